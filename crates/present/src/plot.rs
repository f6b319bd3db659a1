//! `memlens plot capacity`: resident set and live heap over time, the largest
//! objects stacked, annotated regions shaded. SVG or PNG by file extension.

use memlens_analysis::{self as analysis, CapacitySeries, Profile};
use memlens_profile::Calibration;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Debug)]
pub struct PlotError(pub String);

impl std::fmt::Display for PlotError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PlotError {}

const MIB: f64 = 1024.0 * 1024.0;
const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(188, 189, 34),
];

fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // The bundled DejaVu face: PNG output needs no system fonts.
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            dejavu::sans::regular(),
        );
    });
}

/// Where a plot goes: a file (PNG or SVG by its extension), or SVG text to
/// embed (the HTML report).
pub enum Image<'a> {
    File(&'a Path),
    Svg(&'a mut String),
}

impl<'a> From<&'a Path> for Image<'a> {
    fn from(path: &'a Path) -> Self {
        Image::File(path)
    }
}

impl<'a> From<&'a std::path::PathBuf> for Image<'a> {
    fn from(path: &'a std::path::PathBuf) -> Self {
        Image::File(path)
    }
}

/// Draws with the backend the image asks for: `$draw(area, args...)`.
macro_rules! render {
    ($out:expr, $draw:ident ( $($arg:expr),* )) => {{
        register_font();
        let size = (1200, 700);
        match $out {
            Image::Svg(buf) => $draw(SVGBackend::with_string(buf, size).into_drawing_area(), $($arg),*),
            Image::File(path) => {
                let ext = path
                    .extension()
                    .and_then(|e| e.to_str())
                    .unwrap_or("")
                    .to_ascii_lowercase();
                match ext.as_str() {
                    "svg" => $draw(SVGBackend::new(path, size).into_drawing_area(), $($arg),*),
                    "png" => $draw(BitMapBackend::new(path, size).into_drawing_area(), $($arg),*),
                    _ => Err(PlotError(format!(
                        "{}: unknown image type; use a .png or .svg file name",
                        path.display()
                    ))),
                }
            }
        }
    }};
}

pub fn plot_capacity<'a>(p: &Profile, out: impl Into<Image<'a>>) -> Result<(), PlotError> {
    let out = out.into();
    let data = analysis::capacity_series(p, 5);
    render!(out, draw(&data, p))
}

type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

fn drawing_error<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> PlotError {
    PlotError(format!("drawing failed: {e}"))
}

/// Top-level regions as shaded bands with their names at the top.
fn shade_regions<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    regions: &[(String, u64, u64)],
    y_max: f64,
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let secs = |ns: u64| ns as f64 / 1e9;
    let mut colors: BTreeMap<&str, RGBColor> = BTreeMap::new();
    for (name, b, e) in regions {
        let n = colors.len();
        let color = *colors
            .entry(name)
            .or_insert(PALETTE[(n + 3) % PALETTE.len()]);
        let band = Rectangle::new(
            [(secs(*b), 0.0), (secs(*e), y_max)],
            color.mix(0.12).filled(),
        );
        chart
            .draw_series(std::iter::once(band))
            .map_err(drawing_error)?;
    }
    // Names where they fit: a run of short regions would print them on top
    // of each other.
    let style: TextStyle = ("sans-serif", 12).into_font().into();
    let spans: Vec<(i32, i32)> = regions
        .iter()
        .map(|(name, b, _)| {
            let x = chart.backend_coord(&(secs(*b), y_max)).0;
            let width = chart
                .plotting_area()
                .estimate_text_size(name, &style)
                .map_or(0, |(w, _)| w as i32);
            (x, width)
        })
        .collect();
    for (name, b, _) in labels_that_fit(&spans).into_iter().map(|i| &regions[i]) {
        let label = Text::new(name.clone(), (secs(*b), y_max * 0.97), style.clone());
        chart
            .draw_series(std::iter::once(label))
            .map_err(drawing_error)?;
    }
    Ok(())
}

/// The labels drawn, of (left pixel, width) each: from the left, each one
/// that starts past the last drawn one's end and a small gap.
fn labels_that_fit(spans: &[(i32, i32)]) -> Vec<usize> {
    const GAP: i32 = 4;
    let mut order: Vec<usize> = (0..spans.len()).collect();
    order.sort_by_key(|&i| spans[i].0);
    let mut free_from = i32::MIN;
    order.retain(|&i| {
        let (x, width) = spans[i];
        let fits = x >= free_from;
        if fits {
            free_from = x + width + GAP;
        }
        fits
    });
    order
}

fn top_level_regions(p: &Profile) -> Vec<(String, u64, u64)> {
    let end = p.meta.clock.duration_ns;
    p.regions
        .iter()
        .filter(|r| r.depth == 0)
        .map(|r| (r.name.clone(), r.begin_ns, r.end_ns.unwrap_or(end)))
        .collect()
}

/// The time axis' end: the run's duration in seconds (never zero).
fn run_seconds(p: &Profile) -> f64 {
    (p.meta.clock.duration_ns as f64 / 1e9).max(1e-3)
}

fn title(what: &str, p: &Profile) -> String {
    let program = p
        .meta
        .command
        .first()
        .map(|c| c.rsplit('/').next().unwrap_or(c))
        .unwrap_or("");
    format!("{what}: {program}")
}

fn legend<'a, DB: DrawingBackend + 'a>(chart: &mut Chart<'a, DB>) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    legend_at(chart, SeriesLabelPosition::UpperRight)
}

fn legend_at<'a, DB: DrawingBackend + 'a, X: Ranged, Y: Ranged>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    position: SeriesLabelPosition,
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    chart
        .configure_series_labels()
        .position(position)
        .label_font(("sans-serif", 13))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(drawing_error)
}

/// `memlens plot scatter`: sampled address against time, one band per data object
/// (the address scaled within the object), loads and stores in two colours.
pub fn plot_scatter<'a>(p: &Profile, out: impl Into<Image<'a>>) -> Result<(), PlotError> {
    let out = out.into();
    if p.samples.is_empty() {
        return Err(PlotError(
            "this profile has no access samples: build the program with `memlens cc` and record it again".into(),
        ));
    }
    let objects = analysis::data_objects(p);
    let scatter = Scatter {
        placed: place_samples(p, &objects),
        // A few hundred thousand dots show the pattern; more only slow the drawing.
        points: (0..p.samples.len())
            .step_by((p.samples.len() / MAX_DOTS).max(1))
            .map(|i| (p.samples[i].time_ns as f64 / 1e9, i))
            .collect(),
        x_max: run_seconds(p),
        x_desc: "time (s)",
        caption: title("sampled accesses by data object", p),
        regions: top_level_regions(p),
    };
    render!(out, draw_scatter_alone(p, &objects, &scatter))
}

/// Per sample: its object and where in the object it fell (0..1).
fn place_samples(p: &Profile, objects: &analysis::Objects) -> Vec<Option<(u32, f32)>> {
    let mut placed: Vec<Option<(u32, f32)>> = vec![None; p.samples.len()];
    analysis::attribute(p, objects, |i, hit, _| {
        placed[i] = hit.map(|h| {
            let span = h.end.saturating_sub(h.start).max(1) as f64;
            let frac = p.samples[i].address.saturating_sub(h.start) as f64 / span;
            (h.object as u32, frac.clamp(0.0, 0.999) as f32)
        });
    });
    placed
}

const MAX_BANDS: usize = 10;
const MAX_DOTS: usize = 300_000;

/// Samples to draw as address (band of the object, position in it) against x.
struct Scatter {
    placed: Vec<Option<(u32, f32)>>,
    /// (x, sample index) of the dots.
    points: Vec<(f64, usize)>,
    x_max: f64,
    x_desc: &'static str,
    caption: String,
    /// Regions to shade (time axes only).
    regions: Vec<(String, u64, u64)>,
}

fn draw_scatter_alone<DB: DrawingBackend>(
    area: DrawingArea<DB, Shift>,
    p: &Profile,
    objects: &analysis::Objects,
    scatter: &Scatter,
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    area.fill(&WHITE).map_err(drawing_error)?;
    draw_scatter(&area, p, objects, scatter)?;
    area.present().map_err(drawing_error)?;
    Ok(())
}

fn draw_scatter<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    p: &Profile,
    objects: &analysis::Objects,
    scatter: &Scatter,
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    // The most sampled objects get a band each, from the bottom up.
    let mut counts: BTreeMap<usize, u64> = BTreeMap::new();
    for &(_, i) in &scatter.points {
        if let Some((o, _)) = scatter.placed[i] {
            *counts.entry(o as usize).or_default() += 1;
        }
    }
    let mut ranked: Vec<(usize, u64)> = counts.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked.truncate(MAX_BANDS);
    let band: BTreeMap<usize, usize> = ranked
        .iter()
        .enumerate()
        .map(|(i, &(o, _))| (o, i))
        .collect();
    let names: Vec<String> = ranked
        .iter()
        .map(|&(o, n)| {
            format!(
                "{} ({n})",
                objects.list[o].name.chars().take(48).collect::<String>()
            )
        })
        .collect();
    let bands = names.len().max(1) as f64;
    let x_max = scatter.x_max;
    let (left, right) = area.split_horizontally(280);
    let mut chart = ChartBuilder::on(&right)
        .caption(&scatter.caption, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(10)
        .build_cartesian_2d(0.0..x_max, 0.0..bands)
        .map_err(drawing_error)?;
    chart
        .configure_mesh()
        .x_desc(scatter.x_desc)
        .disable_y_mesh()
        .y_labels(0)
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(drawing_error)?;
    shade_regions(&mut chart, &scatter.regions, bands)?;
    for i in 1..names.len() {
        let line = PathElement::new(vec![(0.0, i as f64), (x_max, i as f64)], BLACK.mix(0.3));
        chart
            .draw_series(std::iter::once(line))
            .map_err(drawing_error)?;
    }
    // Band names on the left panel, level with their bands.
    let plot_h = right.dim_in_pixel().1 as f64 - 12.0 * 2.0 - 40.0 - 30.0;
    for (i, name) in names.iter().enumerate() {
        let y = 12.0 + 30.0 + plot_h * (1.0 - (i as f64 + 0.5) / bands);
        left.draw(&Text::new(name.clone(), (8, y as i32), ("sans-serif", 13)))
            .map_err(drawing_error)?;
    }
    for (is_store, color, label) in [
        (false, RGBColor(31, 119, 180), "loads"),
        (true, RGBColor(214, 39, 40), "stores"),
    ] {
        let points = scatter.points.iter().filter_map(|&(x, i)| {
            let (o, frac) = scatter.placed[i]?;
            let b = *band.get(&(o as usize))?;
            (p.samples[i].is_store == is_store).then_some((x, b as f64 + frac as f64))
        });
        chart
            .draw_series(points.map(|c| Circle::new(c, 1, color.mix(0.5).filled())))
            .map_err(drawing_error)?
            .label(label)
            .legend(move |(x, y)| Circle::new((x + 7, y), 4, color.filled()));
    }
    legend(&mut chart)
}

/// `memlens plot fold`: a repeated region folded onto one instance: sampled
/// address against the phase of the instance (above) and the folded access
/// rate, loads and stores (below).
pub fn plot_fold<'a>(
    p: &Profile,
    by: analysis::FoldBy,
    bins: usize,
    out: impl Into<Image<'a>>,
) -> Result<(), PlotError> {
    let out = out.into();
    let objects = analysis::data_objects(p);
    let folding = analysis::fold(p, &objects, by, bins, true)
        .map_err(|why| PlotError(format!("cannot fold: {why}")))?;
    let stride = (folding.points.len() / MAX_DOTS).max(1);
    let scatter = Scatter {
        placed: place_samples(p, &objects),
        points: folding
            .points
            .iter()
            .step_by(stride)
            .map(|pt| (f64::from(pt.phase), pt.sample))
            .collect(),
        x_max: 1.0,
        x_desc: "phase of the instance",
        caption: title(
            &format!(
                "{} folded ({} of {} instances, mean {:.1} us, sampled)",
                folding.label(),
                folding.folded,
                folding.instances,
                folding.mean_ns / 1e3
            ),
            p,
        ),
        regions: Vec::new(),
    };
    render!(out, draw_fold(p, &objects, &scatter, &folding))
}

fn draw_fold<DB: DrawingBackend>(
    area: DrawingArea<DB, Shift>,
    p: &Profile,
    objects: &analysis::Objects,
    scatter: &Scatter,
    folding: &analysis::Folding,
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    area.fill(&WHITE).map_err(drawing_error)?;
    let (top, bottom) = area.split_vertically(470);
    draw_scatter(&top, p, objects, scatter)?;
    let (_, right) = bottom.split_horizontally(280);
    // Millions of loads or stores per second in each bin, drawn as steps.
    let rate = |b: &analysis::FoldedBin, stores: bool| {
        let n = if stores {
            b.store_samples
        } else {
            b.samples - b.store_samples
        };
        b.est_accesses_per_s * n as f64 / b.samples.max(1) as f64 / 1e6
    };
    let y_max = folding
        .bins
        .iter()
        .map(|b| rate(b, false).max(rate(b, true)))
        .fold(0.0, f64::max)
        .max(1e-3)
        * 1.1;
    let mut chart = ChartBuilder::on(&right)
        .margin(12)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..1.0, 0.0..y_max)
        .map_err(drawing_error)?;
    chart
        .configure_mesh()
        .x_desc("phase of the instance")
        .y_desc("M accesses/s (sampled x period)")
        .label_style(("sans-serif", 13))
        .draw()
        .map_err(drawing_error)?;
    for (stores, color, label) in [
        (false, RGBColor(31, 119, 180), "loads"),
        (true, RGBColor(214, 39, 40), "stores"),
    ] {
        let steps: Vec<(f64, f64)> = folding
            .bins
            .iter()
            .flat_map(|b| [(b.from, rate(b, stores)), (b.to, rate(b, stores))])
            .collect();
        chart
            .draw_series(LineSeries::new(steps, color.stroke_width(2)))
            .map_err(drawing_error)?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 14, y)], color.stroke_width(2))
            });
    }
    legend_at(&mut chart, SeriesLabelPosition::UpperRight)?;
    area.present().map_err(drawing_error)?;
    Ok(())
}

/// `memlens plot bandwidth`: read and write bandwidth over time (exact byte
/// counts differentiated between ticks) and the memory traffic the counters
/// saw (dashed, labelled measured or modelled), regions shaded.
pub fn plot_bandwidth<'a>(p: &Profile, out: impl Into<Image<'a>>) -> Result<(), PlotError> {
    let out = out.into();
    let exact = p.meta.has(memlens_profile::Backend::Sancov);
    if !exact && traffic_rates(p).is_empty() {
        return Err(PlotError(
            "this profile has neither byte counts nor memory-traffic counters: build the program with `memlens cc` and record it again, or record where `memlens doctor` lists a memory-traffic counter".into(),
        ));
    }
    render!(out, draw_bandwidth(p, exact))
}

/// The counters in bytes (memory traffic), as GiB/s between readings.
fn traffic_rates(p: &Profile) -> Vec<CounterRates> {
    let gib = (1u64 << 30) as f64;
    counter_rates(p)
        .into_iter()
        .filter(|c| c.unit == "bytes")
        .map(|mut c| {
            c.rates.iter_mut().for_each(|r| r.1 /= gib);
            c
        })
        .collect()
}

/// (seconds, GiB/s read, GiB/s written) between consecutive ticks, all processes.
pub fn bandwidth_series(p: &Profile) -> Vec<(f64, f64, f64)> {
    let mut per_pid: BTreeMap<u32, Vec<&memlens_profile::TimelinePoint>> = BTreeMap::new();
    for t in &p.timeline {
        per_pid.entry(t.pid).or_default().push(t);
    }
    let mut rates: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
    for points in per_pid.values() {
        for w in points.windows(2) {
            let dt = w[1].time_ns.saturating_sub(w[0].time_ns) as f64 / 1e9;
            if dt <= 0.0 {
                continue;
            }
            let gib = (1u64 << 30) as f64;
            let e = rates.entry(w[1].time_ns).or_default();
            e.0 += w[1].bytes_read.saturating_sub(w[0].bytes_read) as f64 / dt / gib;
            e.1 += w[1].bytes_written.saturating_sub(w[0].bytes_written) as f64 / dt / gib;
        }
    }
    rates
        .into_iter()
        .map(|(t, (r, w))| (t as f64 / 1e9, r, w))
        .collect()
}

fn draw_bandwidth<DB: DrawingBackend>(
    area: DrawingArea<DB, Shift>,
    p: &Profile,
    exact: bool,
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let series = if exact {
        bandwidth_series(p)
    } else {
        Vec::new()
    };
    let traffic = traffic_rates(p);
    let x_max = run_seconds(p);
    let y_max = series
        .iter()
        .map(|s| s.1.max(s.2))
        .chain(traffic.iter().flat_map(|c| c.rates.iter().map(|r| r.1)))
        .fold(0.0f64, f64::max)
        .max(1e-3)
        * 1.15;
    let caption = match (exact, traffic.is_empty()) {
        (true, true) => "achieved bandwidth (exact byte counts)",
        (true, false) => "achieved bandwidth (exact byte counts) and memory traffic (counters)",
        (false, _) => "memory traffic (counters)",
    };
    area.fill(&WHITE).map_err(drawing_error)?;
    let mut chart = ChartBuilder::on(&area)
        .caption(title(caption, p), ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(drawing_error)?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc("GiB/s")
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(drawing_error)?;
    shade_regions(&mut chart, &top_level_regions(p), y_max)?;
    if exact {
        for (pick, color, label) in [
            (0usize, RGBColor(31, 119, 180), "read"),
            (1, RGBColor(214, 39, 40), "written"),
        ] {
            let line = series
                .iter()
                .map(|s| (s.0, if pick == 0 { s.1 } else { s.2 }));
            chart
                .draw_series(LineSeries::new(line, color.stroke_width(2)))
                .map_err(drawing_error)?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 14, y)], color.stroke_width(2))
                });
        }
    }
    // Traffic below the caches, where the program's loads and stores are
    // above them: the two differ by what the caches absorb.
    for (i, c) in traffic.iter().enumerate() {
        let color = PALETTE[(i + 2) % PALETTE.len()];
        chart
            .draw_series(DashedLineSeries::new(
                c.rates.iter().copied(),
                8,
                5,
                color.stroke_width(2),
            ))
            .map_err(drawing_error)?
            .label(format!("{} ({})", c.name, c.method))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 14, y)], color.stroke_width(2))
            });
    }
    legend(&mut chart)?;
    area.present().map_err(drawing_error)?;
    Ok(())
}

/// `memlens calibrate --plot`: latency against working-set size (both on log
/// scales), each level's plateau, and the cache sizes sysfs gives.
pub fn plot_calibration<'a>(c: &Calibration, out: impl Into<Image<'a>>) -> Result<(), PlotError> {
    let out = out.into();
    if c.latency.is_empty() {
        return Err(PlotError("the calibration has no latency curve".into()));
    }
    render!(out, draw_calibration(c))
}

fn draw_calibration<DB: DrawingBackend>(
    area: DrawingArea<DB, Shift>,
    c: &Calibration,
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let kib = |b: u64| b as f64 / 1024.0;
    let x_max = c.latency.iter().map(|p| kib(p.bytes)).fold(4.0, f64::max) * 1.2;
    let y_max = c.latency.iter().map(|p| p.ns).fold(1.0, f64::max) * 1.5;
    let y_min = c
        .latency
        .iter()
        .map(|p| p.ns)
        .fold(y_max, f64::min)
        .max(0.05)
        / 1.5;
    area.fill(&WHITE).map_err(drawing_error)?;
    let mut chart = ChartBuilder::on(&area)
        .caption(
            format!("load latency by working set (measured): {}", c.cpu),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((3.0..x_max).log_scale(), (y_min..y_max).log_scale())
        .map_err(drawing_error)?;
    chart
        .configure_mesh()
        .x_desc("working set (KiB)")
        .y_desc("ns per dependent load")
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(drawing_error)?;
    for (i, cache) in c.caches.iter().enumerate() {
        let color = PALETTE[(i + 2) % PALETTE.len()];
        let x = kib(cache.size);
        chart
            .draw_series(DashedLineSeries::new(
                [(x, y_min), (x, y_max)],
                6,
                4,
                color.stroke_width(1),
            ))
            .map_err(drawing_error)?
            .label(format!("{} size (sysfs)", cache.name))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], color));
    }
    let blue = RGBColor(31, 119, 180);
    chart
        .draw_series(LineSeries::new(
            c.latency.iter().map(|p| (kib(p.bytes), p.ns)),
            blue.stroke_width(2),
        ))
        .map_err(drawing_error)?
        .label("measured latency")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], blue.stroke_width(2)));
    chart
        .draw_series(
            c.latency
                .iter()
                .map(|p| Circle::new((kib(p.bytes), p.ns), 3, blue.filled())),
        )
        .map_err(drawing_error)?;
    for l in &c.levels {
        let (from, to) = (kib(l.from_bytes), kib(l.to_bytes));
        chart
            .draw_series(LineSeries::new(
                [(from, l.ns), (to, l.ns)],
                BLACK.stroke_width(3),
            ))
            .map_err(drawing_error)?;
        chart
            .draw_series([Text::new(
                format!("{} {:.1} ns", l.name, l.ns),
                // Left of a one-point plateau (DRAM at the largest size).
                (if l.points > 1 { from } else { from / 2.5 }, l.ns * 1.12),
                ("sans-serif", 14),
            )])
            .map_err(drawing_error)?;
    }
    // The curve climbs to the right: the legend goes where it is low.
    legend_at(&mut chart, SeriesLabelPosition::UpperLeft)?;
    area.present().map_err(drawing_error)?;
    Ok(())
}

/// `memlens plot counters`: one panel per counting perf event, its rate
/// between consecutive readings over time, regions shaded.
pub fn plot_counters<'a>(p: &Profile, out: impl Into<Image<'a>>) -> Result<(), PlotError> {
    let out = out.into();
    if p.counters.is_empty() {
        return Err(PlotError(
            "this profile has no counter readings: record it again with this memlens (`memlens doctor` lists the counters)".into(),
        ));
    }
    render!(out, draw_counters(p))
}

/// A counter's rate between consecutive readings: (seconds, per second).
struct CounterRates {
    name: String,
    unit: String,
    /// How the counter is obtained ("measured", "modelled: ...").
    method: String,
    rates: Vec<(f64, f64)>,
}

fn counter_rates(p: &Profile) -> Vec<CounterRates> {
    analysis::counter_series(p)
        .into_iter()
        .map(|(name, series)| {
            let first = series.first();
            let unit = first.map(|r| r.unit.clone()).unwrap_or_default();
            let method = first.map(|r| r.method.clone()).unwrap_or_default();
            let rates = analysis::rates(&series)
                .map(|(ns, rate)| (ns as f64 / 1e9, rate))
                .collect();
            CounterRates {
                name,
                unit,
                method,
                rates,
            }
        })
        .collect()
}

fn draw_counters<DB: DrawingBackend>(
    area: DrawingArea<DB, Shift>,
    p: &Profile,
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let series = counter_rates(p);
    let x_max = run_seconds(p);
    area.fill(&WHITE).map_err(drawing_error)?;
    let (top, rest) = area.split_vertically(40);
    top.draw(&Text::new(
        title("counting perf events, rate between readings", p),
        (12, 8),
        ("sans-serif", 22),
    ))
    .map_err(drawing_error)?;
    let regions = top_level_regions(p);
    for (
        i,
        (
            panel,
            CounterRates {
                name,
                unit,
                method,
                rates,
            },
        ),
    ) in rest
        .split_evenly((series.len(), 1))
        .into_iter()
        .zip(&series)
        .enumerate()
    {
        // CPU time per second is a number of busy CPUs; bytes per second in GiB/s.
        let (scale, y_desc) = match unit.as_str() {
            "ns" => (1e-9, "CPUs busy".to_string()),
            "bytes" => (1.0 / (1u64 << 30) as f64, "GiB/s".to_string()),
            u => (1.0, format!("{u}/s")),
        };
        let y_max = rates
            .iter()
            .map(|r| r.1 * scale)
            .fold(0.0, f64::max)
            .max(1e-9)
            * 1.15;
        let mut chart = ChartBuilder::on(&panel)
            .caption(format!("{name} ({method})"), ("sans-serif", 15))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)
            .map_err(drawing_error)?;
        chart
            .configure_mesh()
            .x_desc("time (s)")
            .y_desc(y_desc)
            .label_style(("sans-serif", 12))
            .draw()
            .map_err(drawing_error)?;
        shade_regions(&mut chart, &regions, y_max)?;
        let color = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(
                rates.iter().map(|r| (r.0, r.1 * scale)),
                color.stroke_width(2),
            ))
            .map_err(drawing_error)?;
    }
    area.present().map_err(drawing_error)?;
    Ok(())
}

/// The instants the stacked objects are drawn at: in each of `columns` equal
/// slices of the run (a pixel column each), the instant where they total the
/// most, so a peak narrower than a pixel stays drawn, instead of every
/// allocation and free (the example's 400 000 list nodes made a 134 MB SVG).
fn stack_instants(objects: &[analysis::ObjectLive], end_ns: u64, columns: usize) -> Vec<u64> {
    let mut times: Vec<u64> = objects
        .iter()
        .flat_map(|o| o.steps.iter().map(|p| p.0))
        .collect();
    times.sort_unstable();
    times.dedup();
    let columns = columns.max(1);
    let span = end_ns.max(times.last().copied().unwrap_or(0)).max(1);
    let mut best: Vec<Option<(f64, u64)>> = vec![None; columns];
    // Each object's steps are in time order: one cursor each.
    let mut next = vec![0usize; objects.len()];
    for &t in &times {
        let mut total = 0.0;
        for (o, i) in objects.iter().zip(next.iter_mut()) {
            while o.steps.get(*i).is_some_and(|s| s.0 <= t) {
                *i += 1;
            }
            total += i.checked_sub(1).map_or(0.0, |j| o.steps[j].1);
        }
        let column =
            ((u128::from(t) * columns as u128 / u128::from(span)) as usize).min(columns - 1);
        if best[column].is_none_or(|(most, _)| total > most) {
            best[column] = Some((total, t));
        }
    }
    best.into_iter().flatten().map(|(_, t)| t).collect()
}

fn draw<DB: DrawingBackend>(
    area: DrawingArea<DB, Shift>,
    c: &CapacitySeries,
    p: &Profile,
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| PlotError(format!("drawing failed: {e}"));
    let secs = |ns: u64| ns as f64 / 1e9;
    let mib = |b: f64| b / MIB;
    area.fill(&WHITE).map_err(err)?;
    let x_max = secs(c.end_ns.max(c.time_ns.last().copied().unwrap_or(0))).max(1e-3);
    let y_max = c
        .rss
        .iter()
        .chain(c.heap_live.iter())
        .map(|&b| mib(b as f64))
        .fold(0.0f64, f64::max)
        .max(1e-3)
        * 1.1;
    let title = format!(
        "memory capacity over time: {}",
        p.meta
            .command
            .first()
            .map(|c| c.rsplit('/').next().unwrap_or(c))
            .unwrap_or("")
    );
    let mut chart = ChartBuilder::on(&area)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc("MiB")
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(err)?;

    shade_regions(&mut chart, &c.regions, y_max)?;

    // Largest objects stacked: each band is drawn from the sum below it.
    let (x_pixels, _) = chart.plotting_area().dim_in_pixel();
    let times = stack_instants(&c.objects, c.end_ns, x_pixels as usize);
    let mut base = vec![0.0; times.len()];
    for (i, o) in c.objects.iter().enumerate() {
        let top: Vec<f64> = times
            .iter()
            .zip(&base)
            .map(|(&t, b)| b + mib(analysis::step_at(&o.steps, t)))
            .collect();
        let span = |j: usize| (secs(times[j]), times.get(j + 1).map_or(x_max, |&n| secs(n)));
        let mut poly: Vec<(f64, f64)> = Vec::with_capacity(times.len() * 4);
        for (j, &y) in top.iter().enumerate() {
            let (t0, t1) = span(j);
            poly.extend([(t0, y), (t1, y)]);
        }
        for (j, &y) in base.iter().enumerate().rev() {
            let (t0, t1) = span(j);
            poly.extend([(t1, y), (t0, y)]);
        }
        let color = PALETTE[i % PALETTE.len()];
        let short: String = o.name.chars().take(60).collect();
        chart
            .draw_series(std::iter::once(Polygon::new(
                poly,
                color.mix(0.45).filled(),
            )))
            .map_err(err)?
            .label(short)
            .legend(move |(x, y)| {
                Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.mix(0.45).filled())
            });
        base = top;
    }

    let line = |v: &[u64]| -> Vec<(f64, f64)> {
        c.time_ns
            .iter()
            .zip(v)
            .map(|(&t, &b)| (secs(t), mib(b as f64)))
            .collect()
    };
    chart
        .draw_series(LineSeries::new(line(&c.rss), BLACK.stroke_width(2)))
        .map_err(err)?
        .label("resident set (measured, /proc)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], BLACK.stroke_width(2)));
    chart
        .draw_series(LineSeries::new(line(&c.heap_live), RED.stroke_width(2)))
        .map_err(err)?
        .label("live heap (measured, exact counters)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], RED.stroke_width(2)));
    legend(&mut chart)?;
    area.present().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use memlens_profile::CounterReading;

    /// A profile recorded without `memlens cc` on a machine with an IMC
    /// counter: 1 GiB of traffic in the first second, 3 GiB in the second.
    fn traffic_only() -> Profile {
        let mut p = Profile::default();
        p.meta.clock.duration_ns = 2_000_000_000;
        p.counters = [(0, 0.0), (1, 1.0), (2, 4.0)]
            .into_iter()
            .map(|(s, gib)| CounterReading {
                name: "memory traffic".into(),
                unit: "bytes".into(),
                scope: "machine".into(),
                method: "measured: uncore IMC CAS x 64 B".into(),
                time_ns: s * 1_000_000_000,
                value: gib * (1u64 << 30) as f64,
                ..Default::default()
            })
            .collect();
        p
    }

    #[test]
    fn region_names_are_drawn_where_they_fit() {
        assert_eq!(
            labels_that_fit(&[(50, 30), (10, 30), (30, 10), (44, 5), (84, 1)]),
            [1, 3, 4]
        );
        // 400 regions of 2 ms, then one of a second: the short ones' names
        // would overlap on a plot 2 s wide; the long one's is drawn (the SVG
        // puts a text's string on a line of its own).
        let mut p = traffic_only();
        p.regions = (0..400u64)
            .map(|i| (format!("r{i}"), i * 2_000_000, (i + 1) * 2_000_000))
            .chain([("long".to_string(), 1_000_000_000, 2_000_000_000)])
            .map(|(name, begin_ns, end)| memlens_profile::Region {
                name,
                begin_ns,
                end_ns: Some(end),
                ..Default::default()
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let svg = dir.path().join("bw.svg");
        plot_bandwidth(&p, &svg).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        let drawn = (0..400)
            .filter(|i| text.contains(&format!("\nr{i}\n")))
            .count();
        assert!((1..40).contains(&drawn), "{drawn} of 400 short names drawn");
        assert!(text.contains("\nlong\n"));
    }

    #[test]
    fn bandwidth_plot_draws_counter_traffic_with_its_method() {
        let p = traffic_only();
        let rates = traffic_rates(&p);
        assert_eq!(rates.len(), 1);
        assert_eq!(rates[0].rates, [(1.0, 1.0), (2.0, 3.0)]);
        let dir = tempfile::tempdir().unwrap();
        let svg = dir.path().join("bw.svg");
        plot_bandwidth(&p, &svg).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("memory traffic (counters)"), "caption");
        assert!(
            text.contains("memory traffic (measured: uncore IMC CAS x 64 B)"),
            "legend names the counter and how it was obtained"
        );
        // Without counters or byte counts there is nothing to draw.
        let err = plot_bandwidth(&Profile::default(), &svg).unwrap_err();
        assert!(err
            .0
            .contains("neither byte counts nor memory-traffic counters"));
    }
}

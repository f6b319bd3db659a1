//! `memlens plot capacity`: resident set and live heap over time, the largest
//! objects stacked, annotated regions shaded. SVG or PNG by file extension.

use memlens_analysis::{self as analysis, ObjectKind, Profile};
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

/// Data of the capacity plot, separate from drawing so it can be checked.
pub struct CapacitySeries {
    pub rss: Vec<(f64, f64)>,
    pub heap: Vec<(f64, f64)>,
    /// (label, step points in MiB) for the largest dynamic objects.
    pub objects: Vec<(String, Vec<(f64, f64)>)>,
    /// (name, begin s, end s).
    pub regions: Vec<(String, f64, f64)>,
    pub end_s: f64,
}

pub fn capacity_series(p: &Profile, top: usize) -> CapacitySeries {
    // Sum over processes at each tick: a run's capacity is all of its processes.
    let mut rss: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
    for t in &p.timeline {
        let e = rss.entry(t.time_ns).or_default();
        e.0 += t.rss as f64 / MIB;
        e.1 += t.heap_live as f64 / MIB;
    }
    let s = |ns: u64| ns as f64 / 1e9;
    let (objects, series) = analysis::data_objects(p);
    let top_idx = analysis::top_by(&objects, top, |o| {
        if matches!(
            o.kind,
            ObjectKind::Heap | ObjectKind::Mmap | ObjectKind::Group
        ) {
            o.peak_bytes
        } else {
            0.0
        }
    });
    let objects = top_idx
        .iter()
        .map(|&i| {
            let pts = series[i]
                .points
                .iter()
                .map(|&(t, b)| (s(t), b / MIB))
                .collect();
            (objects[i].name.clone(), pts)
        })
        .collect();
    let end_s = s(p.meta.clock.duration_ns);
    let regions = p
        .regions
        .iter()
        .filter(|r| r.depth == 0)
        .map(|r| {
            (
                r.name.clone(),
                s(r.begin_ns),
                s(r.end_ns.unwrap_or(p.meta.clock.duration_ns)),
            )
        })
        .collect();
    CapacitySeries {
        rss: rss.iter().map(|(&t, v)| (s(t), v.0)).collect(),
        heap: rss.iter().map(|(&t, v)| (s(t), v.1)).collect(),
        objects,
        regions,
        end_s,
    }
}

/// Value of a step function (points sorted by time) at time t.
fn step_at(points: &[(f64, f64)], t: f64) -> f64 {
    let i = points.partition_point(|p| p.0 <= t);
    if i == 0 {
        0.0
    } else {
        points[i - 1].1
    }
}

pub fn plot_capacity(p: &Profile, out: &Path) -> Result<(), PlotError> {
    register_font();
    let data = capacity_series(p, 5);
    let size = (1200, 700);
    let ext = out
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    match ext.as_str() {
        "svg" => draw(SVGBackend::new(out, size).into_drawing_area(), &data, p),
        "png" => draw(BitMapBackend::new(out, size).into_drawing_area(), &data, p),
        _ => Err(PlotError(format!(
            "{}: unknown image type; use a .png or .svg file name",
            out.display()
        ))),
    }
}

fn draw<DB: DrawingBackend>(
    area: DrawingArea<DB, Shift>,
    d: &CapacitySeries,
    p: &Profile,
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| PlotError(format!("drawing failed: {e}"));
    area.fill(&WHITE).map_err(err)?;
    let x_max = d.end_s.max(d.rss.last().map_or(0.0, |v| v.0)).max(1e-3);
    let y_max = d
        .rss
        .iter()
        .chain(d.heap.iter())
        .map(|v| v.1)
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

    // Regions: shaded bands with their names at the top.
    let mut region_colors: BTreeMap<&str, RGBColor> = BTreeMap::new();
    for (name, b, e) in &d.regions {
        let n = region_colors.len();
        let c = *region_colors
            .entry(name)
            .or_insert(PALETTE[(n + 3) % PALETTE.len()]);
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(*b, 0.0), (*e, y_max)],
                c.mix(0.12).filled(),
            )))
            .map_err(err)?;
    }
    for (name, b, _) in d.regions.iter().take(40) {
        chart
            .draw_series(std::iter::once(Text::new(
                name.clone(),
                (*b, y_max * 0.97),
                ("sans-serif", 12),
            )))
            .map_err(err)?;
    }

    // Largest objects stacked: each band is drawn from the sum below it.
    let mut times: Vec<f64> = d
        .objects
        .iter()
        .flat_map(|(_, pts)| pts.iter().map(|p| p.0))
        .collect();
    times.sort_by(f64::total_cmp);
    times.dedup();
    let mut base = vec![0.0; times.len()];
    for (i, (label, pts)) in d.objects.iter().enumerate() {
        let top: Vec<f64> = times
            .iter()
            .zip(&base)
            .map(|(&t, b)| b + step_at(pts, t))
            .collect();
        let mut poly: Vec<(f64, f64)> = Vec::with_capacity(times.len() * 4);
        for (j, &t) in times.iter().enumerate() {
            let next_t = times.get(j + 1).copied().unwrap_or(x_max);
            poly.push((t, top[j]));
            poly.push((next_t, top[j]));
        }
        for (j, &t) in times.iter().enumerate().rev() {
            let next_t = times.get(j + 1).copied().unwrap_or(x_max);
            poly.push((next_t, base[j]));
            poly.push((t, base[j]));
        }
        let color = PALETTE[i % PALETTE.len()];
        let short: String = label.chars().take(60).collect();
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

    chart
        .draw_series(LineSeries::new(
            d.rss.iter().copied(),
            BLACK.stroke_width(2),
        ))
        .map_err(err)?
        .label("resident set (measured, /proc)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], BLACK.stroke_width(2)));
    chart
        .draw_series(LineSeries::new(d.heap.iter().copied(), RED.stroke_width(2)))
        .map_err(err)?
        .label("live heap (measured, exact counters)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], RED.stroke_width(2)));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(("sans-serif", 13))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    area.present().map_err(err)?;
    Ok(())
}

use super::layer::{self, LayerSlot};
use super::*;

/// `memlens plot scatter`: sampled address against time, one band per data object
/// (the address scaled within the object), loads and stores in two colours.
pub fn plot_scatter<'a>(d: &PlotData, out: impl Into<Image<'a>>) -> Result<(), PlotError> {
    let (p, objects) = (d.p, &d.objects);
    let out = out.into();
    if p.samples.is_empty() {
        return Err(PlotError(
            "this profile has no access samples: build the program with `memlens cc` and record it again".into(),
        ));
    }
    // A few hundred thousand samples show the pattern; more only slow the drawing.
    let points: Vec<(f64, usize)> = (0..p.samples.len())
        .step_by((p.samples.len() / MAX_DOTS).max(1))
        .map(|i| (p.samples[i].time_ns as f64 / 1e9, i))
        .collect();
    let caption =
        title("sampled accesses by data object", p) + &dots_note(points.len(), p.samples.len());
    let scatter = Scatter {
        placed: d.placed(),
        points,
        x_max: run_seconds(p),
        x_desc: "time (s)",
        caption,
        regions: top_level_regions(p),
        layer: LayerSlot::for_image(&out),
    };
    render!(
        out,
        draw_scatter_alone(p, objects, &scatter),
        |svg: &mut String| scatter.layer.replace_marker(svg)
    )
}

const MAX_BANDS: usize = 10;
pub(super) const MAX_DOTS: usize = 300_000;

/// Samples to draw as address (band of the object, position in it) against x.
pub(super) struct Scatter<'d> {
    pub(super) placed: &'d [Option<(u32, f32)>],
    /// (x, sample index) of the dots.
    pub(super) points: Vec<(f64, usize)>,
    pub(super) x_max: f64,
    pub(super) x_desc: &'static str,
    pub(super) caption: String,
    /// Regions to shade (time axes only).
    pub(super) regions: Vec<(String, u64, u64)>,
    /// Where a dense SVG scatter paints its dots.
    pub(super) layer: LayerSlot,
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

pub(super) fn draw_scatter<DB: DrawingBackend>(
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
                crate::format::shorten(&objects.list[o].name, 48)
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
        let (x, y) = chart.plotting_area().get_pixel_range();
        let series = match scatter.layer.paint(scatter.points.len(), x, y) {
            None => chart
                .draw_series(points.map(|c| Circle::new(c, 1, color.mix(DOT_OPACITY).filled()))),
            Some(mut layer) => {
                for c in points {
                    layer.dot(chart.backend_coord(&c), color, DOT_OPACITY as f32);
                }
                chart.draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
            }
        };
        series
            .map_err(drawing_error)?
            .label(label)
            .legend(move |(x, y)| Circle::new((x + 7, y), 4, color.filled()));
    }
    if scatter.layer.painted() {
        // The layer goes under the legend, where this text is drawn.
        layer::draw_marker(&mut chart)?;
    }
    legend(&mut chart)
}

/// Opacity of one sample's dot: dots that fall on each other darken.
const DOT_OPACITY: f64 = 0.5;

/// What the caption adds when only some samples are drawn.
pub(super) fn dots_note(drawn: usize, samples: usize) -> String {
    if drawn < samples {
        format!(" ({drawn} of {samples} samples drawn)")
    } else {
        String::new()
    }
}

//! A job across its ranks: resident set and live heap as bands (the least and
//! the most of any rank in each time bin, and their mean), and a rank x time
//! map of either.

use super::layer::{self, LayerSlot};
use super::*;
use memlens_analysis::{Band, JobView};

/// Which measure the rank x time map colours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RankMeasure {
    Rss,
    Heap,
}

impl RankMeasure {
    fn label(self) -> &'static str {
        match self {
            RankMeasure::Rss => "resident set",
            RankMeasure::Heap => "live heap",
        }
    }
}

pub fn plot_rank_band<'a>(job: &JobView, out: impl Into<Image<'a>>) -> Result<(), PlotError> {
    let out = out.into();
    render!(out, draw_band(job))
}

/// Fails when the job view was built without each rank's series
/// (`JobView::rss_by_rank` is kept with per-rank values).
pub fn plot_rank_map<'a>(
    job: &JobView,
    measure: RankMeasure,
    out: impl Into<Image<'a>>,
) -> Result<(), PlotError> {
    let out = out.into();
    let layer = LayerSlot::for_image(&out);
    render!(out, draw_map(job, measure, &layer), |svg: &mut String| {
        layer.replace_marker(svg)
    })
}

fn draw_band<DB: DrawingBackend>(
    area: DrawingArea<DB, Shift>,
    job: &JobView,
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let secs = |ns: u64| ns as f64 / 1e9;
    area.fill(&WHITE).map_err(drawing_error)?;
    let x_max = secs(job.grid.bin_ns * job.grid.bins as u64).max(1e-3);
    let y_max = (job.rss.max.iter().chain(&job.heap.max))
        .fold(0.0f64, |m, &b| m.max(b / MIB))
        .max(1e-3)
        * 1.1;
    let mut chart = ChartBuilder::on(&area)
        .caption(
            format!("memory capacity across {} ranks", job.ranks.len()),
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(drawing_error)?;
    chart
        .configure_mesh()
        .x_desc(format!("time (s), {}", job.time_base))
        .y_desc("MiB")
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(drawing_error)?;
    let mut band = |b: &Band, color: RGBColor, what: &str| -> Result<(), PlotError> {
        let at = |i: usize| secs(b.time_ns[i] + job.grid.bin_ns / 2);
        let mut poly: Vec<(f64, f64)> = (0..b.max.len()).map(|i| (at(i), b.max[i] / MIB)).collect();
        poly.extend((0..b.min.len()).rev().map(|i| (at(i), b.min[i] / MIB)));
        chart
            .draw_series(std::iter::once(Polygon::new(
                poly,
                color.mix(0.25).filled(),
            )))
            .map_err(drawing_error)?
            .label(format!("{what}: least to most of any rank"))
            .legend(move |(x, y)| {
                Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.mix(0.25).filled())
            });
        let mean: Vec<(f64, f64)> = (0..b.mean.len())
            .map(|i| (at(i), b.mean[i] / MIB))
            .collect();
        chart
            .draw_series(LineSeries::new(mean, color.stroke_width(2)))
            .map_err(drawing_error)?
            .label(format!("{what}: mean over the ranks"))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 14, y)], color.stroke_width(2))
            });
        Ok(())
    };
    band(&job.rss, BLACK, "resident set (measured, /proc)")?;
    if job.heap_peak.is_some() {
        band(&job.heap, RED, "live heap (measured, exact counters)")?;
    }
    legend(&mut chart)?;
    area.present().map_err(drawing_error)
}

fn draw_map<DB: DrawingBackend>(
    area: DrawingArea<DB, Shift>,
    job: &JobView,
    measure: RankMeasure,
    layer: &LayerSlot,
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let rows = match measure {
        RankMeasure::Rss => &job.rss_by_rank,
        RankMeasure::Heap => &job.heap_by_rank,
    };
    if rows.is_empty() {
        return Err(PlotError("the job view has no per-rank series".into()));
    }
    let secs = |ns: u64| ns as f64 / 1e9;
    area.fill(&WHITE).map_err(drawing_error)?;
    let most = rows
        .iter()
        .flatten()
        .fold(0.0f64, |m, &v| m.max(v))
        .max(1.0);
    let (map, scale) = area.split_horizontally(1060);
    let x_max = secs(job.grid.bin_ns * job.grid.bins as u64).max(1e-3);
    let n = rows.len();
    let mut chart = ChartBuilder::on(&map)
        .caption(
            format!(
                "{} of each rank over time (most: {})",
                measure.label(),
                human_bytes(most)
            ),
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, -0.5..n as f64 - 0.5)
        .map_err(drawing_error)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc(format!("time (s), {}", job.time_base))
        .y_desc("rank")
        .y_labels(n.min(16))
        .y_label_formatter(&|y| {
            let i = (y.round().max(0.0) as usize).min(n - 1);
            job.ranks[i].rank.to_string()
        })
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(drawing_error)?;
    let bin = secs(job.grid.bin_ns);
    let cells = rows.iter().enumerate().flat_map(|(r, row)| {
        row.iter().enumerate().map(move |(b, &v)| {
            (
                (b as f64 * bin, r as f64 - 0.5),
                ((b + 1) as f64 * bin, r as f64 + 0.5),
                heat(v / most),
            )
        })
    });
    let (x, y) = chart.plotting_area().get_pixel_range();
    let count = rows.iter().map(Vec::len).sum();
    match layer.paint(count, x, y) {
        None => {
            chart
                .draw_series(cells.map(|(a, b, color)| Rectangle::new([a, b], color.filled())))
                .map_err(drawing_error)?;
        }
        Some(mut painted) => {
            // A cell covers the pixels from its corner up to the next cell's.
            for (a, b, color) in cells {
                let (a, b) = (chart.backend_coord(&a), chart.backend_coord(&b));
                painted.fill(a, (b.0 - 1, b.1 + 1), color);
            }
            drop(painted);
            layer::draw_marker(&mut chart)?;
        }
    }
    // The colour scale, from none (bottom) to the most (top).
    let mut key = ChartBuilder::on(&scale)
        .margin(12)
        .margin_top(50)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..1.0, 0.0..most)
        .map_err(drawing_error)?;
    key.configure_mesh()
        .disable_mesh()
        .disable_x_axis()
        .y_labels(5)
        .y_label_formatter(&|b| human_bytes(*b))
        .label_style(("sans-serif", 12))
        .draw()
        .map_err(drawing_error)?;
    key.draw_series((0..50).map(|i| {
        let y = i as f64 / 50.0;
        Rectangle::new(
            [(0.0, y * most), (1.0, (y + 0.02) * most)],
            heat(y).filled(),
        )
    }))
    .map_err(drawing_error)?;
    area.present().map_err(drawing_error)
}

/// White through orange to dark red.
fn heat(x: f64) -> RGBColor {
    let x = x.clamp(0.0, 1.0);
    let lerp = |a: f64, b: f64, t: f64| (a + (b - a) * t) as u8;
    if x < 0.5 {
        let t = x * 2.0;
        RGBColor(255, lerp(255.0, 165.0, t), lerp(255.0, 0.0, t))
    } else {
        let t = (x - 0.5) * 2.0;
        RGBColor(lerp(255.0, 140.0, t), lerp(165.0, 0.0, t), 0)
    }
}

//! `memlens plot KIND`: one file per kind of plot, drawn with plotters as SVG
//! or PNG (by the file's extension) or as SVG text for the HTML report. The
//! series come from the analysis crate; this module holds what every plot
//! shares: the image target, palette, fonts, shaded regions and legends.

use crate::format::human_bytes;
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
const GIB: f64 = 1024.0 * MIB;
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

mod bandwidth;
mod calibration;
mod capacity;
mod counters;
mod fold;
mod ranks;
mod scatter;

pub use bandwidth::plot_bandwidth;
pub use calibration::plot_calibration;
pub use capacity::plot_capacity;
pub use counters::plot_counters;
pub use fold::plot_fold;
pub use ranks::{plot_rank_band, plot_rank_map, RankMeasure};
pub use scatter::plot_scatter;

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

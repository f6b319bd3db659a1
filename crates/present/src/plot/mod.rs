//! `memlens plot KIND`: one file per kind of plot, drawn with plotters as SVG
//! or PNG (by the file's extension) or as SVG text for the HTML report. The
//! series come from the analysis crate; this module holds what every plot
//! shares: the image target, palette, fonts, shaded regions and legends.

use crate::format::human_bytes;
use memlens_analysis::{self as analysis, CapacitySeries};
use memlens_profile::{Calibration, Profile};
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

impl Image<'_> {
    /// Whether the plot is drawn as SVG (a file named .svg, or the HTML's).
    fn is_svg(&self) -> bool {
        match self {
            Image::Svg(_) => true,
            Image::File(path) => path
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("svg")),
        }
    }
}

/// Draws with the backend the image asks for: `$draw(area, args...)`; SVG
/// text is handed to `$finish` before it is kept or written.
macro_rules! render {
    ($out:expr, $draw:ident ( $($arg:expr),* )) => {
        render!($out, $draw($($arg),*), |_: &mut String| {})
    };
    ($out:expr, $draw:ident ( $($arg:expr),* ), $finish:expr) => {{
        register_font();
        let size = (1200, 700);
        let svg = |buf: &mut String| -> Result<(), PlotError> {
            $draw(SVGBackend::with_string(buf, size).into_drawing_area(), $($arg),*)?;
            if let std::borrow::Cow::Owned(shown) = memlens_profile::printable_document(buf) {
                *buf = shown;
            }
            ($finish)(buf);
            Ok(())
        };
        match $out {
            Image::Svg(buf) => svg(buf),
            Image::File(path) => {
                let ext = path
                    .extension()
                    .and_then(|e| e.to_str())
                    .unwrap_or("")
                    .to_ascii_lowercase();
                match ext.as_str() {
                    "svg" => {
                        let mut text = String::new();
                        svg(&mut text)?;
                        memlens_profile::write_private_file(path, text.as_bytes())
                            .map_err(|e| PlotError(e.to_string()))
                    }
                    "png" => {
                        // Made private first: the encoder keeps an existing file's mode.
                        memlens_profile::create_private_file(path).map_err(|e| PlotError(e.to_string()))?;
                        $draw(BitMapBackend::new(path, size).into_drawing_area(), $($arg),*)
                    }
                    _ => Err(PlotError(format!(
                        "{}: unknown image type; use a .png or .svg file name",
                        path.display()
                    ))),
                }
            }
        }
    }};
}

/// What the plots of one profile share, each computed once: its data
/// objects, and where each access sample lies in them (the scatter's and the
/// fold's dots). The HTML page draws several plots of one profile: each
/// finding them again swept the samples again (2.3 times the text report's
/// time on 25 M samples).
pub struct PlotData<'p> {
    pub p: &'p Profile,
    pub objects: analysis::Objects,
    placed: std::sync::OnceLock<Vec<Option<(u32, f32)>>>,
}

impl<'p> PlotData<'p> {
    pub fn new(p: &'p Profile) -> PlotData<'p> {
        PlotData {
            p,
            objects: analysis::data_objects(p),
            placed: std::sync::OnceLock::new(),
        }
    }

    /// Each sample's object and place in it (see [`analysis::sample_positions`]).
    fn placed(&self) -> &[Option<(u32, f32)>] {
        self.placed
            .get_or_init(|| analysis::sample_positions(self.p, &self.objects))
    }
}

mod bandwidth;
mod calibration;
mod capacity;
mod counters;
mod fold;
mod layer;
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

/// Top-level regions as shaded bands with their names at the top. Instances
/// of one region less than a pixel apart are one band: a loop of 100 000
/// iterations drew 100 000 rectangles on each plot (9 MB of SVG apiece) that
/// the eye sees as one.
fn shade_regions<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    regions: &[(String, u64, u64)],
    y_max: f64,
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    // Within the plotted run: a time past its end (a damaged profile's)
    // would map to a pixel beyond what plotters can add to.
    let end_ns = (chart.x_range().end * 1e9) as u64;
    let secs = |ns: u64| ns.min(end_ns) as f64 / 1e9;
    let pixel = |ns: u64| chart.backend_coord(&(secs(ns), y_max)).0;
    let mut bands = merge_within_a_pixel(regions, pixel);
    bands.retain(|band| band.1 < end_ns);
    // Names where they fit: a run of short regions would print them on top
    // of each other.
    let style: TextStyle = ("sans-serif", 12).into_font().into();
    let spans: Vec<(i32, i32)> = bands
        .iter()
        .map(|(name, b, _)| {
            let width = chart
                .plotting_area()
                .estimate_text_size(name, &style)
                .map_or(0, |(w, _)| w as i32);
            (pixel(*b), width)
        })
        .collect();
    let mut colors: BTreeMap<&str, RGBColor> = BTreeMap::new();
    for (name, b, e) in &bands {
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
    for (name, b, _) in labels_that_fit(&spans).into_iter().map(|i| &bands[i]) {
        let label = Text::new(name.to_string(), (secs(*b), y_max * 0.97), style.clone());
        chart
            .draw_series(std::iter::once(label))
            .map_err(drawing_error)?;
    }
    Ok(())
}

/// Each region's instances in time order, those that begin within a pixel
/// (by `pixel`) of the previous one's end joined into one band, in order of
/// first appearance.
fn merge_within_a_pixel(
    regions: &[(String, u64, u64)],
    pixel: impl Fn(u64) -> i32,
) -> Vec<(&str, u64, u64)> {
    let mut order: Vec<usize> = (0..regions.len()).collect();
    order.sort_by(|&a, &b| {
        (regions[a].0.as_str(), regions[a].1).cmp(&(regions[b].0.as_str(), regions[b].1))
    });
    let mut bands: Vec<(usize, &str, u64, u64)> = Vec::new();
    for i in order {
        let (name, b, e) = (&regions[i].0, regions[i].1, regions[i].2);
        match bands.last_mut() {
            Some(last) if last.1 == name && pixel(b) <= pixel(last.3) + 1 => last.3 = last.3.max(e),
            _ => bands.push((i, name, b, e)),
        }
    }
    bands.sort_by_key(|band| band.0);
    bands
        .into_iter()
        .map(|(_, name, b, e)| (name, b, e))
        .collect()
}

/// Pixel columns a line is thinned to: the image's width.
const LINE_COLUMNS: usize = 1200;

/// A line of many points as a pixel column shows it: per column of the x
/// range, its first, lowest, highest and last points, in order (the M4
/// reduction). The polyline drawn is the same; its size is bounded by the
/// plot's width rather than by the run's ticks (an hour at 10 ms is 360 000).
fn thin_line(points: impl IntoIterator<Item = (f64, f64)>, x_max: f64) -> Vec<(f64, f64)> {
    let column = |x: f64| ((x / x_max.max(f64::MIN_POSITIVE)) * LINE_COLUMNS as f64).floor() as i64;
    let mut out: Vec<(f64, f64)> = Vec::new();
    // The current column's points (index, point): first, lowest, highest, last.
    type Kept = [(usize, (f64, f64)); 4];
    let mut current: Option<(i64, Kept)> = None;
    let flush = |out: &mut Vec<(f64, f64)>, kept: Kept| {
        let mut kept = kept.to_vec();
        kept.sort_by_key(|k| k.0);
        kept.dedup_by_key(|k| k.0);
        out.extend(kept.into_iter().map(|k| k.1));
    };
    for (i, p) in points.into_iter().enumerate() {
        match &mut current {
            Some((c, kept)) if *c == column(p.0) => {
                if p.1 < kept[1].1 .1 {
                    kept[1] = (i, p);
                }
                if p.1 > kept[2].1 .1 {
                    kept[2] = (i, p);
                }
                kept[3] = (i, p);
            }
            _ => {
                if let Some((_, kept)) = current.take() {
                    flush(&mut out, kept);
                }
                current = Some((column(p.0), [(i, p); 4]));
            }
        }
    }
    if let Some((_, kept)) = current {
        flush(&mut out, kept);
    }
    out
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
        .map(|r| {
            (
                memlens_profile::printable(&r.name).into_owned(),
                r.begin_ns,
                r.end_ns.unwrap_or(end),
            )
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thinned_line_keeps_each_columns_extremes_in_order() {
        // 200 000 ticks of a noisy line over 10 s: 166 per pixel column.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let points: Vec<(f64, f64)> = (0..200_000)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (i as f64 * 5e-5, (x % 1000) as f64 + (i / 1000) as f64)
            })
            .collect();
        let thin = thin_line(points.iter().copied(), 10.0);
        assert!(thin.len() <= 4 * LINE_COLUMNS, "{}", thin.len());
        assert!(thin.windows(2).all(|w| w[0].0 <= w[1].0));
        assert_eq!(thin.first(), points.first());
        assert_eq!(thin.last(), points.last());
        // Brute force: every column's lowest and highest points are drawn.
        let column = |x: f64| (x / 10.0 * LINE_COLUMNS as f64).floor() as usize;
        let mut extremes = vec![(f64::MAX, f64::MIN); LINE_COLUMNS + 1];
        for p in &points {
            let e = &mut extremes[column(p.0)];
            *e = (e.0.min(p.1), e.1.max(p.1));
        }
        let mut drawn = vec![(f64::MAX, f64::MIN); LINE_COLUMNS + 1];
        for p in &thin {
            let e = &mut drawn[column(p.0)];
            *e = (e.0.min(p.1), e.1.max(p.1));
        }
        assert_eq!(drawn, extremes);
        // A short line is drawn as it is.
        let few = vec![(0.0, 1.0), (1.0, 3.0), (2.0, 2.0)];
        assert_eq!(thin_line(few.iter().copied(), 10.0), few);
    }

    #[test]
    fn instances_within_a_pixel_are_one_band() {
        let regions: Vec<(String, u64, u64)> = [
            ("step", 0, 10),
            ("io", 5, 6),
            ("step", 12, 20),
            ("step", 40, 50),
        ]
        .map(|(n, b, e)| (n.to_string(), b, e))
        .to_vec();
        // One pixel a unit: 10 -> 12 is two pixels apart, kept apart.
        let one = merge_within_a_pixel(&regions, |t| t as i32);
        assert_eq!(
            one,
            [
                ("step", 0, 10),
                ("io", 5, 6),
                ("step", 12, 20),
                ("step", 40, 50)
            ]
        );
        // Ten units a pixel: the first two steps join, the third stays.
        let ten = merge_within_a_pixel(&regions, |t| (t / 10) as i32);
        assert_eq!(ten, [("step", 0, 20), ("io", 5, 6), ("step", 40, 50)]);
    }
}

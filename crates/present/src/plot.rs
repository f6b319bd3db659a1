//! `memlens plot capacity`: resident set and live heap over time, the largest
//! objects stacked, annotated regions shaded. SVG or PNG by file extension.

use memlens_analysis::{self as analysis, CapacitySeries, Profile};
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

pub fn plot_capacity(p: &Profile, out: &Path) -> Result<(), PlotError> {
    register_font();
    let data = analysis::capacity_series(p, 5);
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

    // Regions: shaded bands with their names at the top.
    let mut region_colors: BTreeMap<&str, RGBColor> = BTreeMap::new();
    for (name, b, e) in &c.regions {
        let n = region_colors.len();
        let color = *region_colors
            .entry(name)
            .or_insert(PALETTE[(n + 3) % PALETTE.len()]);
        let band = Rectangle::new(
            [(secs(*b), 0.0), (secs(*e), y_max)],
            color.mix(0.12).filled(),
        );
        chart.draw_series(std::iter::once(band)).map_err(err)?;
    }
    for (name, b, _) in c.regions.iter().take(40) {
        let label = Text::new(name.clone(), (secs(*b), y_max * 0.97), ("sans-serif", 12));
        chart.draw_series(std::iter::once(label)).map_err(err)?;
    }

    // Largest objects stacked: each band is drawn from the sum below it.
    let mut times: Vec<u64> = c
        .objects
        .iter()
        .flat_map(|o| o.steps.iter().map(|p| p.0))
        .collect();
    times.sort_unstable();
    times.dedup();
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
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font(("sans-serif", 13))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    area.present().map_err(err)?;
    Ok(())
}

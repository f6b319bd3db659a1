use super::layer::LayerSlot;
use super::scatter::{dots_note, draw_scatter, Scatter, MAX_DOTS};
use super::*;

/// `memlens plot fold`: a repeated region folded onto one instance: sampled
/// address against the phase of the instance (above) and the folded access
/// rate, loads and stores (below).
pub fn plot_fold<'a>(
    d: &PlotData,
    by: analysis::FoldBy,
    bins: usize,
    out: impl Into<Image<'a>>,
) -> Result<(), PlotError> {
    let (p, objects) = (d.p, &d.objects);
    let out = out.into();
    let folding = analysis::fold(p, objects, by, bins, true)
        .map_err(|why| PlotError(format!("cannot fold: {why}")))?;
    let stride = (folding.points.len() / MAX_DOTS).max(1);
    let points: Vec<(f64, usize)> = (folding.points.iter())
        .step_by(stride)
        .map(|pt| (f64::from(pt.phase), pt.sample))
        .collect();
    let caption = title(
        &format!(
            "{} folded ({} of {} instances, mean {:.1} us, sampled)",
            folding.label(),
            folding.folded,
            folding.instances,
            folding.mean_ns / 1e3
        ),
        p,
    ) + &dots_note(points.len(), folding.points.len());
    let scatter = Scatter {
        placed: d.placed(),
        points,
        x_max: 1.0,
        x_desc: "phase of the instance",
        caption,
        layer: LayerSlot::for_image(&out),
        regions: Vec::new(),
    };
    render!(
        out,
        draw_fold(p, objects, &scatter, &folding),
        |svg: &mut String| scatter.layer.replace_marker(svg)
    )
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

use super::*;

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

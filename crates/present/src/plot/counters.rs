use super::*;

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

fn draw_counters<DB: DrawingBackend>(
    area: DrawingArea<DB, Shift>,
    p: &Profile,
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let series = analysis::counter_rates(p);
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
            analysis::CounterRates {
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
        let (scale, y_desc) = crate::format::counter_rate_unit(unit);
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
                thin_line(rates.iter().map(|r| (r.0, r.1 * scale)), x_max),
                color.stroke_width(2),
            ))
            .map_err(drawing_error)?;
    }
    area.present().map_err(drawing_error)?;
    Ok(())
}

use super::*;

pub fn plot_capacity<'a>(d: &PlotData, out: impl Into<Image<'a>>) -> Result<(), PlotError> {
    let out = out.into();
    let data = analysis::capacity_series(d.p, &d.objects);
    render!(out, draw(&data, d.p))
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
        let short = crate::format::shorten(&memlens_profile::printable(&o.name), 60);
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
        thin_line(
            (c.time_ns.iter().zip(v)).map(|(&t, &b)| (secs(t), mib(b as f64))),
            x_max,
        )
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

use super::*;

/// `memlens plot bandwidth`: read and write bandwidth over time (exact byte
/// counts differentiated between ticks) and the memory traffic the counters
/// saw (dashed, labelled measured or modelled), regions shaded.
pub fn plot_bandwidth<'a>(p: &Profile, out: impl Into<Image<'a>>) -> Result<(), PlotError> {
    let out = out.into();
    // GiB/s, the plot's unit: exact bytes of instrumented code, and the
    // memory-traffic counters.
    let exact = p.meta.has(memlens_profile::Backend::Instrumented);
    let series: Vec<(f64, f64, f64)> = if exact {
        analysis::bandwidth_series(p)
            .into_iter()
            .map(|(t, read, written)| (t, read / GIB, written / GIB))
            .collect()
    } else {
        Vec::new()
    };
    let traffic: Vec<_> = analysis::traffic_rates(p)
        .into_iter()
        .map(|mut c| {
            c.rates.iter_mut().for_each(|r| r.1 /= GIB);
            c
        })
        .collect();
    if !exact && traffic.is_empty() {
        return Err(PlotError(
            "this profile has neither byte counts nor memory-traffic counters: build the program with `memlens cc` and record it again, or record where `memlens doctor` lists a memory-traffic counter".into(),
        ));
    }
    render!(out, draw_bandwidth(p, exact, &series, &traffic))
}

fn draw_bandwidth<DB: DrawingBackend>(
    area: DrawingArea<DB, Shift>,
    p: &Profile,
    exact: bool,
    series: &[(f64, f64, f64)],
    traffic: &[analysis::CounterRates],
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let x_max = run_seconds(p);
    let y_max = series
        .iter()
        .map(|s| s.1.max(s.2))
        .chain(traffic.iter().flat_map(|c| c.rates.iter().map(|r| r.1)))
        .fold(0.0f64, f64::max)
        .max(1e-3)
        * 1.15;
    let caption = match (exact, traffic.is_empty()) {
        (true, true) => "achieved bandwidth (exact byte counts)",
        (true, false) => "achieved bandwidth (exact byte counts) and memory traffic (counters)",
        (false, _) => "memory traffic (counters)",
    };
    area.fill(&WHITE).map_err(drawing_error)?;
    let mut chart = ChartBuilder::on(&area)
        .caption(title(caption, p), ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(drawing_error)?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc("GiB/s")
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(drawing_error)?;
    shade_regions(&mut chart, &top_level_regions(p), y_max)?;
    if exact {
        for (pick, color, label) in [
            (0usize, RGBColor(31, 119, 180), "read"),
            (1, RGBColor(214, 39, 40), "written"),
        ] {
            let line = thin_line(
                (series.iter()).map(|s| (s.0, if pick == 0 { s.1 } else { s.2 })),
                x_max,
            );
            chart
                .draw_series(LineSeries::new(line, color.stroke_width(2)))
                .map_err(drawing_error)?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 14, y)], color.stroke_width(2))
                });
        }
    }
    // Traffic below the caches, where the program's loads and stores are
    // above them: the two differ by what the caches absorb.
    for (i, c) in traffic.iter().enumerate() {
        let color = PALETTE[(i + 2) % PALETTE.len()];
        chart
            .draw_series(DashedLineSeries::new(
                thin_line(c.rates.iter().copied(), x_max),
                8,
                5,
                color.stroke_width(2),
            ))
            .map_err(drawing_error)?
            .label(format!("{} ({})", c.name, c.method))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 14, y)], color.stroke_width(2))
            });
    }
    legend(&mut chart)?;
    area.present().map_err(drawing_error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use memlens_profile::CounterReading;

    /// A profile recorded without `memlens cc` on a machine with an IMC
    /// counter: 1 GiB of traffic in the first second, 3 GiB in the second.
    fn traffic_only() -> Profile {
        let mut p = Profile::default();
        p.meta.clock.duration_ns = 2_000_000_000;
        p.counters = [(0, 0.0), (1, 1.0), (2, 4.0)]
            .into_iter()
            .map(|(s, gib)| CounterReading {
                name: "memory traffic".into(),
                unit: "bytes".into(),
                scope: "machine".into(),
                method: "measured: uncore IMC CAS x 64 B".into(),
                time_ns: s * 1_000_000_000,
                value: gib * (1u64 << 30) as f64,
                ..Default::default()
            })
            .collect();
        p
    }

    /// The SVG of [`traffic_only`]'s bandwidth plot with these regions
    /// (name, begin, end).
    fn svg_with_regions(regions: impl IntoIterator<Item = (String, u64, u64)>) -> String {
        let mut p = traffic_only();
        p.regions = regions
            .into_iter()
            .map(|(name, begin_ns, end)| memlens_profile::Region {
                name,
                begin_ns,
                end_ns: Some(end),
                ..Default::default()
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let svg = dir.path().join("bw.svg");
        plot_bandwidth(&p, &svg).unwrap();
        std::fs::read_to_string(&svg).unwrap()
    }

    #[test]
    fn region_names_are_drawn_where_they_fit() {
        assert_eq!(
            labels_that_fit(&[(50, 30), (10, 30), (30, 10), (44, 5), (84, 1)]),
            [1, 3, 4]
        );
        // 400 regions of 2 ms, then one of a second: the short ones' names
        // would overlap on a plot 2 s wide; the long one's is drawn (the SVG
        // puts a text's string on a line of its own).
        let text = svg_with_regions(
            (0..400u64)
                .map(|i| (format!("r{i}"), i * 2_000_000, (i + 1) * 2_000_000))
                .chain([("long".to_string(), 1_000_000_000, 2_000_000_000)]),
        );
        let drawn = (0..400)
            .filter(|i| text.contains(&format!("\nr{i}\n")))
            .count();
        assert!((1..40).contains(&drawn), "{drawn} of 400 short names drawn");
        assert!(text.contains("\nlong\n"));
    }

    #[test]
    fn regions_past_the_run_are_drawn_to_its_end_never_a_panic() {
        // A damaged profile's times: past the end, one at u64::MAX.
        let text = svg_with_regions([
            ("late".to_string(), 1_000_000_000, u64::MAX),
            ("after".to_string(), u64::MAX - 1, u64::MAX),
        ]);
        assert!(text.contains("\nlate\n"));
        assert!(
            !text.contains("\nafter\n"),
            "a region after the run is not drawn"
        );
    }

    #[test]
    fn bandwidth_plot_draws_counter_traffic_with_its_method() {
        let p = traffic_only();
        let rates = analysis::traffic_rates(&p);
        assert_eq!(rates.len(), 1);
        assert_eq!(rates[0].rates, [(1.0, GIB), (2.0, 3.0 * GIB)]);
        let dir = tempfile::tempdir().unwrap();
        let svg = dir.path().join("bw.svg");
        plot_bandwidth(&p, &svg).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("memory traffic (counters)"), "caption");
        assert!(
            text.contains("memory traffic (measured: uncore IMC CAS x 64 B)"),
            "legend names the counter and how it was obtained"
        );
        // Without counters or byte counts there is nothing to draw.
        let err = plot_bandwidth(&Profile::default(), &svg).unwrap_err();
        assert!(err
            .0
            .contains("neither byte counts nor memory-traffic counters"));
    }
}

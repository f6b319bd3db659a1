//! Counting perf events: totals, rates, and their share in each region.

use crate::format::counter_value;
use crate::report::model::{Column, Section, Table};
use crate::report::Report;

pub fn section(r: &Report) -> Option<Section> {
    if r.counters.is_empty() {
        return None;
    }
    let mut t = Table::new(vec![
        Column::text("counter"),
        Column::number("total"),
        Column::number("mean /s"),
        Column::number("peak /s"),
        Column::text("how"),
    ]);
    for c in &r.counters {
        let per_s = |v: f64| match c.unit.as_str() {
            // CPU time per second of run: CPUs busy.
            "ns" => format!("{:.2} CPUs", v / 1e9),
            unit => counter_value(v, unit),
        };
        t.push(vec![
            format!("{} [{}]", c.name, c.unit),
            counter_value(c.total, &c.unit),
            per_s(c.mean_rate),
            per_s(c.peak_rate),
            format!("{} ({}, {} readings)", c.method, c.scope, c.readings),
        ]);
        for r in &c.regions {
            t.push(vec![
                format!("  in {}", r.region),
                counter_value(r.value, &c.unit),
                per_s(r.rate),
                String::new(),
                String::new(),
            ]);
        }
    }
    Some(
        Section::new("counters", "Counters")
            .note("perf events and /proc counts read every interval; per region: interpolated between readings")
            .table(t),
    )
}

#[cfg(test)]
mod tests {
    use super::super::fixture::*;

    #[test]
    fn a_counter_shows_its_total_mean_and_peak_rate() {
        // 1 M faults in the first 50 ms, 2 M in the next: 3 M in 100 ms, a
        // mean of 30 M/s, 40 M/s at the most.
        let mut p = two_blocks();
        p.counters = [(0u64, 0.0), (50, 1e6), (100, 3e6)]
            .map(|(ms, value)| memlens_profile::CounterReading {
                name: "page faults".into(),
                unit: "faults".into(),
                scope: "program".into(),
                method: "measured".into(),
                time_ns: ms * 1_000_000,
                value,
                ..Default::default()
            })
            .to_vec();
        let s = section(&p, "counters");
        assert_eq!(
            rows(&s),
            [[
                "page faults [faults]",
                "3.00 M",
                "30.00 M",
                "40.00 M",
                "measured (program, 3 readings)"
            ]]
        );
    }
}

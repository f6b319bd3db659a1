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

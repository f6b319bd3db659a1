//! Resident set and heap in each annotated region.

use crate::report::model::{Cell, Column, Row, Section, Table, Unit};
use crate::report::Report;

/// Said where a table of regions would be.
pub(crate) const NO_REGIONS: &str =
    "no annotated regions (see memlens_region_begin in include/memlens.h)";

pub fn section(r: &Report) -> Option<Section> {
    if !r.summary.capacity_recorded() {
        return None;
    }
    let mut t = Table::new(vec![
        Column::text("region").at_most(40),
        Column::measure("runs", Unit::Count),
        Column::measure("time", Unit::Seconds),
        Column::measure("rss begin", Unit::Bytes),
        Column::measure("rss peak", Unit::Bytes),
        Column::measure("heap peak", Unit::Bytes),
        Column::measure("heap growth", Unit::Bytes),
    ])
    .or_else(NO_REGIONS);
    for g in &r.regions {
        t.push(Row::from(vec![
            g.name.clone().into(),
            Cell::count(g.instances),
            Cell::seconds(g.total_ns),
            Cell::bytes(g.rss_begin as f64),
            Cell::or_dash(g.rss_peak, |b| Cell::bytes(b as f64)),
            Cell::or_dash(g.heap_peak, |b| Cell::bytes(b as f64)),
            Cell::bytes(g.heap_growth as f64),
        ]));
    }
    let all = |f: fn(&memlens_analysis::RegionCapacity) -> bool| {
        !r.regions.is_empty() && r.regions.iter().all(f)
    };
    let interval = r.summary.settings.interval_ms;
    let how = if all(|g| g.heap_exact) {
        "heap exact, replayed from every block's events (requested bytes); resident set read at the ticks inside each region".to_string()
    } else if all(|g| g.heap_growth_exact) {
        format!("heap growth exact, the runtime's counters read at each instance's ends (usable bytes); peaks read at the ticks inside each region (every {interval} ms; - when none fell inside; --sample-rate 1 gives the heap peak exactly)")
    } else {
        format!("peaks and growth read at the ticks inside each region (every {interval} ms; - when none fell inside; --sample-rate 1 gives the heap exactly)")
    };
    Some(Section::new("regions", "Capacity by region").table(t.note(how)))
}

#[cfg(test)]
mod tests {
    use super::super::fixture::*;

    #[test]
    fn a_regions_capacity_is_read_at_the_ticks_inside_it() {
        // The tick at 60 ms (12 MiB) is past the region's end: not its peak.
        let s = section(&with_timeline_and_region(), "regions");
        assert_eq!(
            rows(&s),
            [["solve", "1", "0.020 s", "8.0 MiB", "8.0 MiB", "68.0 KiB", "0 B"]]
        );
    }
}

//! Resident set and heap in each annotated region.

use crate::format::{human_bytes, seconds};
use crate::report::model::{Column, Section, Table};
use crate::report::Report;

/// Said where a table of regions would be.
pub(crate) const NO_REGIONS: &str =
    "no annotated regions (see memlens_region_begin in include/memlens.h)";

pub fn section(r: &Report) -> Option<Section> {
    let mut t = Table::new(vec![
        Column::text("region").at_most(40),
        Column::number("runs"),
        Column::number("time"),
        Column::number("rss begin"),
        Column::number("rss peak"),
        Column::number("heap peak"),
        Column::number("heap growth"),
    ])
    .or_else(NO_REGIONS);
    for g in &r.regions {
        t.push(vec![
            g.name.clone(),
            g.instances.to_string(),
            seconds(g.total_ns),
            human_bytes(g.rss_begin as f64),
            human_bytes(g.rss_peak as f64),
            human_bytes(g.heap_peak as f64),
            human_bytes(g.heap_growth as f64),
        ]);
    }
    Some(Section::new("regions", "Capacity by region").table(t))
}

//! Loads by memory level per routine and region, and latency by level.

use crate::format::or_dash;
use crate::report::model::{Cell, Column, Figure, Row, Section, Table, Unit};
use crate::report::Report;
use memlens_analysis::{LevelRowShares, LevelTables};

pub fn section(r: &Report) -> Option<Section> {
    let t = r.levels.as_ref()?;
    let mut s = Section::new("levels", "Loads by memory level")
        .note(t.method.clone())
        .figure(Figure::LevelFlame);
    if !t.cost.is_empty() {
        s = s.note(format!("cost: {}", t.cost));
    }
    for (what, rows) in [
        ("routine", &t.by_routine),
        ("region", &t.by_region),
        ("calling context", &t.by_context),
    ] {
        if !rows.is_empty() {
            s = s.table(shares(t, what, rows));
        }
    }
    if !t.spe_latency.is_empty() {
        let mut spe = Table::new(vec![
            Column::text("level"),
            Column::measure("samples", Unit::Count),
            Column::measure("total", Unit::Cycles),
            Column::measure("issue", Unit::Cycles),
            Column::measure("translation", Unit::Cycles),
            Column::measure("execution", Unit::Cycles),
        ])
        .titled("SPE latency by level")
        .note("mean cycles; execution = total - issue - translation");
        for r in &t.spe_latency {
            spe.push(Row::from(vec![
                r.level.clone().into(),
                Cell::count(r.samples),
                Cell::fixed(r.total, 1),
                Cell::fixed(r.issue, 1),
                Cell::fixed(r.translation, 1),
                Cell::fixed(r.execution, 1),
            ]));
        }
        s = s.table(spe);
    }
    if !t.latency.is_empty() {
        let mut latency = Table::new(
            std::iter::once(Column::text("level"))
                .chain(std::iter::once(Column::measure("samples", Unit::Count)))
                .chain(
                    ["mean", "min", "median", "p90", "p99", "max"]
                        .into_iter()
                        .map(|name| Column::measure(name, Unit::Cycles)),
                )
                .collect(),
        )
        .titled("Latency by level")
        .note("cycles");
        for d in &t.latency {
            latency.push(Row::from(vec![
                d.level.clone().into(),
                Cell::count(d.samples),
                Cell::fixed(d.mean, 1),
                Cell::count(d.min),
                Cell::count(d.median),
                Cell::count(d.p90),
                Cell::count(d.p99),
                Cell::count(d.max),
            ]));
        }
        s = s.table(latency);
    }
    Some(s)
}

/// Each routine's (or region's) loads, their share per level and mean cost.
fn shares(t: &LevelTables, what: &str, rows: &[LevelRowShares]) -> Table {
    // The cost's unit is the first word of its description ("cycles, ...").
    let unit = t
        .cost
        .split([':', ','])
        .next()
        .filter(|u| !u.is_empty())
        .unwrap_or("cost");
    let cost = if unit == "cycles" {
        Column::measure(unit, Unit::Cycles)
    } else {
        Column::number(unit)
    };
    let mut columns = vec![
        Column::text(what).at_most(90),
        Column::measure("loads", Unit::Count),
    ];
    columns.extend(t.levels.iter().map(|l| Column::measure(l, Unit::Percent)));
    columns.push(cost);
    let mut table = Table::new(columns).titled(format!("By {what}"));
    for r in rows {
        let mut row = Row::from(vec![r.name.clone().into(), Cell::count(r.load_samples)]);
        for &pct in &r.percent {
            row.push(Cell::percent(pct, 1));
        }
        row.push(match (unit == "cycles", r.mean_cost) {
            (true, Some(m)) => Cell::fixed(m, 1),
            (_, m) => or_dash(m, |m| format!("{m:.1}")).into(),
        });
        table.push(row);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::super::fixture::*;

    #[test]
    fn loads_are_shared_out_by_level_with_their_latencies() {
        // A PMU's 40 load samples: 30 from L1 at 4 cycles, 10 from local
        // DRAM at 300: 75% and 25%, a mean of 78 cycles.
        let mut p = shared_line();
        p.meta.backend = vec![memlens_profile::Backend::Pebs.name().into()];
        for (i, s) in p.samples.iter_mut().enumerate() {
            s.is_store = false;
            (s.level, s.latency) = match i % 4 {
                3 => (memlens_profile::MemLevel::LocalDram as u8, Some(300)),
                _ => (memlens_profile::MemLevel::L1 as u8, Some(4)),
            };
        }
        let s = section(&p, "levels");
        let table = |title: &str| {
            let t = (s.tables.iter())
                .find(|t| t.title.as_deref() == Some(title))
                .unwrap();
            t.rows.iter().map(|r| r.cells.clone()).collect::<Vec<_>>()
        };
        assert_eq!(
            table("By calling context"),
            [["f (a.c:3) ← main (a.c:9)", "40", "75.0%", "25.0%", "78.0"]]
        );
        assert_eq!(
            table("Latency by level"),
            [
                ["L1", "30", "4.0", "4", "4", "4", "4", "4"],
                [
                    "local DRAM",
                    "10",
                    "300.0",
                    "300",
                    "300",
                    "300",
                    "300",
                    "300"
                ],
            ]
        );
    }
}

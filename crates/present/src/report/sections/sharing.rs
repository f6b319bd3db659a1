//! Cache lines two or more threads touched, one of them writing.

use crate::format::context_path;
use crate::report::model::{Cell, Column, Row, Section, Table, Unit};
use crate::report::Report;
use memlens_analysis::LINE;

pub fn section(r: &Report) -> Option<Section> {
    if r.sharing.is_empty() {
        return None;
    }
    let spans = |r: &[(u32, u32)]| {
        r.iter()
            .map(|(a, b)| format!("{a}..{b}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut t = Table::new(vec![
        Column::text("line"),
        Column::text("kind"),
        Column::text("object").at_most(60),
        Column::number("pid"),
        Column::measure("samples", Unit::Count),
        Column::measure("est. accesses", Unit::Count),
        Column::measure("stores", Unit::Count),
        Column::measure("ownership changes", Unit::Count),
    ]);
    for l in &r.sharing {
        let offset = l
            .offset_in_object
            .map_or(String::new(), |o| format!(" +{o}"));
        let mut row = Row::from(vec![
            format!("{:#x}", l.address).into(),
            l.kind.to_uppercase().into(),
            format!("{}{offset}", l.object).into(),
            l.pid.to_string().into(),
            Cell::count(l.samples),
            Cell::measured(format!("~{:.0}", l.est_accesses), l.est_accesses),
            Cell::count(l.store_samples),
            Cell::count(l.thread_switches),
        ]);
        for th in &l.threads {
            let at = match (th.contexts.first(), th.locations.first()) {
                (Some(c), _) => context_path(&c.frames),
                (None, Some(l)) => l.location.clone(),
                (None, None) => String::new(),
            };
            let atomic = if th.atomic > 0 {
                format!(" ({} of atomic read-modify-writes)", th.atomic)
            } else {
                String::new()
            };
            row = row.detail(format!(
                "tid {}: writes bytes {}, reads bytes {}, {} stores, {} loads{atomic}, at {at}",
                th.tid,
                or_none(spans(&th.written)),
                or_none(spans(&th.read)),
                th.stores,
                th.loads
            ));
        }
        t.push(row);
    }
    Some(
        Section::new("sharing", "Shared cache lines")
            .note(format!("{LINE}-byte lines touched by two or more threads, one writing; sampled: ranked by sampled ownership changes"))
            .table(t),
    )
}

fn or_none(spans: String) -> String {
    if spans.is_empty() {
        "none".into()
    } else {
        spans
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::*;

    #[test]
    fn threads_storing_to_adjacent_fields_of_a_line_are_false_sharing() {
        let s = section(&shared_line(), "sharing");
        let table = &s.tables[0];
        assert_eq!(
            table.rows[0].cells,
            [
                "0x200000",
                "FALSE SHARING",
                "f (a.c:3) +0",
                "1",
                "40",
                "~4000",
                "40",
                "39"
            ]
        );
        assert_eq!(
            table.rows[0].details,
            [
                "tid 1: writes bytes 0..8, reads bytes none, 20 stores, 0 loads, at f (a.c:3) ← main (a.c:9)",
                "tid 2: writes bytes 8..16, reads bytes none, 20 stores, 0 loads, at f (a.c:3) ← main (a.c:9)",
            ]
        );
        // One thread alone on the line shares nothing.
        let mut alone = shared_line();
        alone.samples.iter_mut().for_each(|s| s.tid = 1);
        let r = report_of(&alone);
        assert!(super::super::sections(&r).iter().all(|s| s.id != "sharing"));
    }
}

//! Reuse distance: the histogram of all threads, per object, and the use ->
//! reuse code pairs.

use crate::format::count;
use crate::report::model::{Cell, Column, Row, Section, Table, Unit};
use crate::report::Report;
use memlens_analysis::{Bin, Histogram};

pub fn section(r: &Report) -> Option<Section> {
    if !r.access.available {
        return None;
    }
    let s = Section::new("reuse", "Reuse distance");
    let Some(reuse) = &r.reuse.content else {
        let why = r.reuse.why_not.as_deref().unwrap_or("");
        return Some(s.note(format!("none ({why})")));
    };
    let counts = |h: &Histogram| {
        format!(
            "{} accesses, {} first touches, {} reuses",
            count(h.accesses),
            count(h.cold),
            count(h.reuses)
        )
    };
    let mut all = Table::new(vec![
        Column::text("distance (lines)"),
        Column::measure("reuses", Unit::Count),
        Column::measure("share", Unit::Percent),
        Column::measure("cumulative", Unit::Percent),
    ])
    .titled("All threads")
    .note(counts(&reuse.all));
    let mut cumulative = 0.0;
    for b in &reuse.all.bins {
        cumulative += b.reuses;
        all.push(Row::from(vec![
            bin_label(b).into(),
            Cell::estimate(b.reuses),
            Cell::percent(100.0 * b.reuses / reuse.all.reuses, 1),
            Cell::percent(100.0 * cumulative / reuse.all.reuses, 1),
        ]));
    }
    let mut objects = Table::new(vec![
        Column::text("object").at_most(60),
        Column::measure("accesses", Unit::Count),
        Column::measure("reuses", Unit::Count),
        Column::measure("mean dist", Unit::Count),
        Column::text("median"),
        Column::text("p90"),
    ])
    .titled("Objects");
    for o in &reuse.objects {
        let h = &o.histogram;
        objects.push(Row::from(vec![
            format!("{}{}", o.name, super::process_tag(r, o.pid, None)).into(),
            Cell::estimate(h.accesses),
            Cell::estimate(h.reuses),
            Cell::or_dash(h.mean_distance, |m| Cell::fixed(m, 1)),
            quantile_bin(h, 0.5).into(),
            quantile_bin(h, 0.9).into(),
        ]));
    }
    let mut pairs = Table::new(vec![
        Column::measure("reuses", Unit::Count),
        Column::measure("mean dist", Unit::Count),
        Column::number("range"),
        Column::text("median"),
        Column::text("object").at_most(60),
    ])
    .titled("Top use -> reuse pairs")
    .note("distance in lines")
    .details_under(4);
    for pair in &reuse.pairs {
        let h = &pair.histogram;
        let row = Row::from(vec![
            Cell::estimate(h.reuses),
            Cell::or_dash(h.mean_distance, |m| Cell::fixed(m, 1)),
            format!("{:.0}..{:.0}", pair.min_distance, pair.max_distance).into(),
            quantile_bin(h, 0.5).into(),
            pair.object.clone().into(),
        ]);
        pairs.push(
            row.detail(format!("use   {}", pair.use_location))
                .detail(format!("reuse {}", pair.reuse_location)),
        );
    }
    let mut s = s.note(reuse.method.clone()).table(all).table(objects);
    if !reuse.pairs.is_empty() {
        s = s.table(pairs);
    }
    Some(s)
}

fn bin_label(b: &Bin) -> String {
    if b.to == b.from + 1 {
        b.from.to_string()
    } else {
        format!("{}..{}", b.from, b.to - 1)
    }
}

/// The bin holding the q-quantile of an object's reuses.
fn quantile_bin(h: &Histogram, q: f64) -> String {
    let mut cumulative = 0.0;
    for b in &h.bins {
        cumulative += b.reuses;
        if cumulative >= q * h.reuses {
            return bin_label(b);
        }
    }
    "-".into()
}

#[cfg(test)]
mod tests {
    use super::super::fixture::*;

    #[test]
    fn sampled_accesses_say_how_to_measure_reuse() {
        let s = section(&shared_line(), "reuse");
        assert!(
            s.notes[0].starts_with("none (samples are 1 access in 100"),
            "{:?}",
            s.notes
        );
        assert!(s.notes[0].contains("memlens record --reuse"));
    }
}

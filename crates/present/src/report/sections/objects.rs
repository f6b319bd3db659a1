//! The largest data objects: by peak live bytes and by bytes allocated.

use crate::format::{estimate_mark, human_bytes, object_peak};
use crate::report::model::{Cell, Column, Figure, Row, Section, Table, Unit};
use crate::report::Report;
use memlens_analysis::DataObject;

pub fn by_peak(r: &Report) -> Option<Section> {
    if !r.summary.capacity_recorded() {
        return None;
    }
    let stacks = match r.thread_stacks.threads {
        1 => "1 thread stack".to_string(),
        n => format!("{n} thread stacks"),
    };
    let peak = |o: &DataObject| Cell::measured(object_peak(o), o.peak_bytes);
    let table = table(r, &r.objects_by_peak, peak, "peak").footer(format!(
        "+ {stacks}, {} reserved",
        human_bytes(r.thread_stacks.reserved_bytes)
    ));
    Some(
        Section::new("objects", "Top data objects by peak bytes")
            .note("heap blocks by allocation site, mappings, statics, tags and groups; ~ marks sampled figures: scaled up from a site's byte-sampled blocks once 16 of them are live at once, before that the sampled blocks' own bytes (a lower bound); ≥ marks a peak known only as at least this: the call stacks of one source line (an unrolled loop's calls) peaked between the same ticks of the timeline; the program's objects first, then system libraries' variables, a row per library")
            .table(table),
    )
}

pub fn by_allocated(r: &Report) -> Option<Section> {
    if !r.summary.capacity_recorded() {
        return None;
    }
    let table = table(
        r,
        &r.objects_by_allocated,
        |o| {
            let text = format!("{}{}", estimate_mark(o), human_bytes(o.allocated_bytes));
            Cell::measured(text, o.allocated_bytes)
        },
        "allocated",
    )
    .or_else("none recorded: no mapping, group or heap block carried an event (small blocks are sampled at the defaults; record with --leaks for every block)");
    Some(
        Section::new("allocated", "Top data objects by bytes allocated")
            .table(table)
            .figure(Figure::AllocationFlame),
    )
}

/// Objects with one figure of theirs, their kind, allocations and lifetime;
/// heaptrack's temporary allocations and bytes at the heap's peak where
/// every block was recorded; `--stacks N` frames of each object's stack
/// under it.
pub(super) fn table(
    r: &Report,
    objects: &[DataObject],
    figure: impl Fn(&DataObject) -> Cell,
    what: &str,
) -> Table {
    let block_by_block = objects.iter().any(|o| o.temporary.is_some());
    let mut columns = vec![
        Column::measure(what, Unit::Bytes),
        Column::text("kind"),
        Column::measure("allocs", Unit::Count),
    ];
    if block_by_block {
        columns.extend([
            Column::measure("temporary", Unit::Count),
            Column::measure("at peak", Unit::Bytes),
        ]);
    }
    columns.extend([
        Column::measure("first", Unit::Seconds),
        Column::measure("last", Unit::Seconds),
        Column::text("object").at_most(110),
    ]);
    let mut t = Table::new(columns);
    let at = |ns: u64| Cell::measured(format!("{:.3}s", ns as f64 / 1e9), ns as f64 / 1e9);
    for o in objects {
        let est = estimate_mark(o);
        let pid = super::process_tag(r, o.pid, None);
        let mut row = Row::from(vec![
            figure(o),
            o.kind.name().to_string().into(),
            Cell::measured(format!("{est}{:.0}", o.allocations), o.allocations),
        ]);
        if block_by_block {
            row.push(match o.temporary {
                Some(t) => Cell::measured(t.to_string(), t as f64),
                None => String::new().into(),
            });
            row.push(match o.bytes_at_peak {
                Some(b) => Cell::measured(human_bytes(b), b),
                None => String::new().into(),
            });
        }
        row.push(at(o.first_ns));
        row.push(at(o.last_ns));
        row.push(format!("{}{pid}", o.name));
        t.push(with_frames(r, row, o));
    }
    t
}

/// A row with `--stacks` frames of its object's call stack under it, from
/// its site outwards (the allocator's own frames below it are left out).
pub(super) fn with_frames(r: &Report, mut row: Row, o: &DataObject) -> Row {
    let site = o.site.as_ref().map(|s| s.label());
    let from_site = (o.frames.iter())
        .position(|f| Some(f) == site.as_ref())
        .unwrap_or(0);
    for f in o.frames.iter().skip(from_site).take(r.stacks_shown) {
        row = row.detail(format!("  at {f}"));
    }
    row
}

#[cfg(test)]
mod tests {
    use super::super::fixture::*;

    #[test]
    fn objects_by_peak_live_until_freed_or_their_process_ends() {
        let s = section(&two_blocks(), "objects");
        assert_eq!(
            rows(&s),
            [
                ["64.0 KiB", "heap", "1", "0.001s", "0.050s", "main (a.c:2)"],
                ["4.0 KiB", "heap", "1", "0.002s", "0.100s", "f (a.c:3)"],
            ]
        );
        // No thread stack recorded: none, and no "-0 B" from an empty sum.
        assert_eq!(s.tables[0].footers, ["+ 0 thread stacks, 0 B reserved"]);
        // Behind the rounded text: bytes, counts and seconds unrounded; none
        // behind the names.
        let t = &s.tables[0];
        let units: Vec<_> = t.columns.iter().map(|c| c.unit).collect();
        use crate::report::model::Unit::*;
        assert_eq!(
            units,
            [
                Some(Bytes),
                None,
                Some(Count),
                Some(Seconds),
                Some(Seconds),
                None
            ]
        );
        assert_eq!(
            t.rows[1].values,
            [Some(4096.0), None, Some(1.0), Some(0.002), Some(0.1), None]
        );
    }

    #[test]
    fn objects_by_bytes_allocated() {
        // The 64 KiB block was allocated once: more than the 4 KiB one.
        let s = section(&two_blocks(), "allocated");
        let rows = rows(&s);
        let names: Vec<&str> = rows.iter().map(|r| r[5].as_str()).collect();
        assert_eq!(names, ["main (a.c:2)", "f (a.c:3)"]);
        assert_eq!(rows[0][0], "64.0 KiB");
    }
}

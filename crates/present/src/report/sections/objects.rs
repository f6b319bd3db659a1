//! The largest data objects: by peak live bytes and by bytes allocated.

use crate::format::{estimate_mark, human_bytes, object_peak};
use crate::report::model::{Column, Row, Section, Table};
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
    let table = table(r, &r.objects_by_peak, object_peak, "peak").footer(format!(
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
        |o| format!("{}{}", estimate_mark(o), human_bytes(o.allocated_bytes)),
        "allocated",
    )
    .or_else("none recorded: no mapping, group or heap block carried an event (small blocks are sampled at the defaults; record with --leaks for every block)");
    Some(Section::new("allocated", "Top data objects by bytes allocated").table(table))
}

/// Objects with one figure of theirs, their kind, allocations and lifetime;
/// heaptrack's temporary allocations and bytes at the heap's peak where
/// every block was recorded; `--stacks N` frames of each object's stack
/// under it.
pub(super) fn table(
    r: &Report,
    objects: &[DataObject],
    figure: impl Fn(&DataObject) -> String,
    what: &str,
) -> Table {
    let block_by_block = objects.iter().any(|o| o.temporary.is_some());
    let mut columns = vec![
        Column::number(what),
        Column::text("kind"),
        Column::number("allocs"),
    ];
    if block_by_block {
        columns.extend([Column::number("temporary"), Column::number("at peak")]);
    }
    columns.extend([
        Column::number("first"),
        Column::number("last"),
        Column::text("object").at_most(110),
    ]);
    let mut t = Table::new(columns);
    for o in objects {
        let est = estimate_mark(o);
        let pid = super::process_tag(r, o.pid, None);
        let mut row = vec![
            figure(o),
            o.kind.name().to_string(),
            format!("{est}{:.0}", o.allocations),
        ];
        if block_by_block {
            row.push(o.temporary.map_or_else(String::new, |t| t.to_string()));
            row.push(o.bytes_at_peak.map_or_else(String::new, human_bytes));
        }
        row.extend([
            format!("{:.3}s", o.first_ns as f64 / 1e9),
            format!("{:.3}s", o.last_ns as f64 / 1e9),
            format!("{}{pid}", o.name),
        ]);
        t.push(with_frames(r, row.into(), o));
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

//! Heap still live when each process ended, and the sites that left it.

use crate::format::{estimate_mark, human_bytes};
use crate::report::model::{Cell, Column, Section, Table, Unit};
use crate::report::Report;

pub fn section(r: &Report) -> Option<Section> {
    if !r.summary.capacity_recorded() {
        return None;
    }
    let mut s = Section::new("leaks", "Leaks at exit").note(
        "leaks: blocks live at exit (heaptrack's sense), reachable or not; memlens does not scan for pointers: valgrind --leak-check=full tells the unreachable ones",
    );
    // A process that did not exit left its blocks in use, not leaked.
    let mut killed = Vec::new();
    let images = &r.summary.processes;
    for p in images {
        let how = match (p.exit_code, p.signal) {
            (None, Some(sig)) => format!("was killed by signal {sig}"),
            _ if p.end_unseen(images) => "ended without memlens seeing how (a signal it could not observe, such as SIGKILL of a process not its child)".to_string(),
            _ => continue,
        };
        s = s.note(format!(
            "pid {} {how}: its blocks below were live when it died; it never reached exit, so they are not leaks",
            p.pid
        ));
        killed.push(p.pid);
    }
    for l in &r.leaks.heap_live_at_exit {
        let when = if killed.contains(&l.pid) {
            "live when it died"
        } else {
            "still live"
        };
        s = s.note(format!(
            "pid {}: {} of heap {when} (exact, usable bytes)",
            l.pid,
            human_bytes(l.bytes as f64)
        ));
    }
    let mut table = Table::new(vec![
        Column::measure("leaked", Unit::Bytes),
        Column::measure("blocks", Unit::Count),
        Column::measure("allocs", Unit::Count),
        Column::text("site").at_most(110),
    ]);
    let mut sampled = false;
    for o in &r.leaks.sites {
        let est = estimate_mark(o);
        sampled |= !est.is_empty();
        let died = killed.contains(&o.pid).then_some("live when it died");
        let pid = super::process_tag(r, o.pid, died);
        let row = vec![
            Cell::measured(
                format!("{est}{}", human_bytes(o.leaked_bytes)),
                o.leaked_bytes,
            ),
            Cell::measured(format!("{est}{:.0}", o.leaked_blocks), o.leaked_blocks),
            Cell::measured(format!("{est}{:.0}", o.allocations), o.allocations),
            format!("{}{pid}", o.name).into(),
        ];
        table.push(super::objects::with_frames(r, row.into(), o));
    }
    if sampled {
        s = s.note("~: estimated from byte-sampled blocks; `memlens record --leaks` records every block for exact sites, blocks and bytes");
    }
    Some(s.table(table.or_else("no recorded block was left unfreed")))
}

#[cfg(test)]
mod tests {
    use super::super::fixture::*;

    #[test]
    fn a_block_live_at_exit_is_a_leak_unless_its_process_was_killed() {
        // The heap live at exit is the last tick's (4 KiB, at 60 ms).
        let p = with_timeline_and_region();
        let s = section(&p, "leaks");
        assert_eq!(rows(&s), [["4.0 KiB", "1", "1", "f (a.c:3)"]]);
        assert!(
            s.notes
                .contains(&"pid 1: 4.0 KiB of heap still live (exact, usable bytes)".to_string()),
            "{:?}",
            s.notes
        );

        let mut killed = p;
        (
            killed.meta.processes[0].exit_code,
            killed.meta.processes[0].signal,
        ) = (None, Some(9));
        let s = section(&killed, "leaks");
        assert_eq!(
            rows(&s),
            [["4.0 KiB", "1", "1", "f (a.c:3)  [live when it died]"]]
        );
        assert!(
            s.notes.iter().any(|n| n.starts_with(
                "pid 1 was killed by signal 9: its blocks below were live when it died"
            )),
            "{:?}",
            s.notes
        );
    }
}

//! Everything counted as lost while recording or reading.

use crate::report::model::{Column, Section, Table};
use crate::report::Report;
use memlens_profile::Losses;

pub fn section(r: &Report) -> Option<Section> {
    for_losses(&r.losses)
}

/// What was lost, whatever the report (one profile's, a job's).
pub fn for_losses(losses: &Losses) -> Option<Section> {
    let mut t = Table::new(vec![Column::number("count"), Column::text("what")]).or_else("none");
    t.header = false;
    for (what, n) in loss_rows(losses) {
        if n > 0 {
            t.push(vec![n.to_string(), what.to_string()]);
        }
    }
    Some(Section::new("losses", "Losses").table(t))
}

/// Every kind of loss with its count.
pub(crate) fn loss_rows(l: &Losses) -> [(&'static str, u64); 18] {
    [
        ("events dropped (log full)", l.dropped_events),
        ("tracked blocks not followed", l.untracked_allocs),
        ("log blocks cut short (process killed)", l.truncated_blocks),
        ("frees of blocks from before the process", l.unmatched_frees),
        ("timeline ticks missed", l.missed_ticks),
        ("hardware samples lost by the kernel", l.lost_samples),
        ("times the kernel throttled sampling", l.throttled),
        ("AUX chunks truncated", l.aux_truncated),
        ("AUX chunks partial", l.aux_partial),
        ("AUX chunks with collisions", l.aux_collisions),
        ("undecodable bytes or records", l.decode_errors),
        (
            "processes whose malloc was not memlens' (the program's own allocator, or one placed before memlens' runtime in LD_PRELOAD): heap not seen",
            l.heap_not_hooked,
        ),
        (
            "processes whose allocator cannot tell block sizes (live heap not counted)",
            l.heap_sizes_unknown,
        ),
        (
            "processes that closed the log's descriptor (later events lost)",
            l.log_lost,
        ),
        (
            "processes whose log met a full disk (later events lost)",
            l.disk_full,
        ),
        (
            "static or setuid processes seen from /proc only (no heap, objects or sites)",
            l.untracked_processes,
        ),
        (
            "ms of the run after memlens was killed (resident memory, processes and counters not sampled; the heap is whole)",
            l.unsampled_ms,
        ),
        (
            "processes whose end was not seen (a signal memlens could not observe, such as SIGKILL of a grandchild, or still running): what they held then is not leaked",
            l.unseen_ends,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::super::fixture::*;

    #[test]
    fn each_loss_is_counted_in_its_own_row() {
        let mut p = two_blocks();
        assert!(rows(&section(&p, "losses")).is_empty());
        p.meta.losses.dropped_events = 5;
        assert_eq!(
            rows(&section(&p, "losses")),
            [["5", "events dropped (log full)"]]
        );
    }
}

//! The view's threads (lifetimes, exact totals, samples) and its exact
//! access totals.

use crate::Profile;
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::BTreeMap;

/// One thread: lifetime, exact totals and how many samples it took.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct ThreadSummary {
    #[serde(flatten)]
    pub row: memlens_profile::ThreadRow,
    pub samples: u64,
}

/// Samples per (pid, tid).
pub(crate) fn samples_per_thread(p: &Profile) -> FxHashMap<(u32, u32), usize> {
    let mut out: FxHashMap<(u32, u32), usize> = FxHashMap::default();
    for s in &p.samples {
        *out.entry((s.pid, s.tid)).or_default() += 1;
    }
    out
}

/// The view's threads, busiest (most exact accesses, then samples) first.
pub fn thread_summaries(p: &Profile) -> Vec<ThreadSummary> {
    let mut samples = samples_per_thread(p);
    let mut out: Vec<ThreadSummary> = p
        .threads
        .iter()
        .map(|t| ThreadSummary {
            row: t.clone(),
            samples: samples.remove(&(t.pid, t.tid)).unwrap_or(0) as u64,
        })
        .collect();
    // Threads only the samples know (hardware backends, imports).
    out.extend(samples.into_iter().map(|((pid, tid), n)| ThreadSummary {
        row: memlens_profile::ThreadRow {
            pid,
            tid,
            ..Default::default()
        },
        samples: n as u64,
    }));
    let busy =
        |t: &ThreadSummary| (t.row.loads.unwrap_or(0)).saturating_add(t.row.stores.unwrap_or(0));
    out.sort_by(|a, b| {
        (busy(b), b.samples, a.row.pid, a.row.tid).cmp(&(busy(a), a.samples, b.row.pid, b.row.tid))
    });
    out
}

/// Exact access totals of instrumented code in the view.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Totals {
    pub loads: u64,
    pub stores: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

impl Totals {
    /// Adds one thread's or process's counts; a damaged log's counts
    /// saturate rather than wrap.
    fn add(&mut self, loads: u64, stores: u64, bytes_read: u64, bytes_written: u64) {
        self.loads = self.loads.saturating_add(loads);
        self.stores = self.stores.saturating_add(stores);
        self.bytes_read = self.bytes_read.saturating_add(bytes_read);
        self.bytes_written = self.bytes_written.saturating_add(bytes_written);
    }
}

/// The view's exact totals: a thread's own, else each process's last
/// timeline point.
pub(crate) fn exact_totals(p: &Profile) -> Totals {
    let mut out = Totals::default();
    if let Some(memlens_profile::Only::Thread(_)) = p.only {
        for t in &p.threads {
            let count = |c: Option<u64>| c.unwrap_or(0);
            out.add(
                count(t.loads),
                count(t.stores),
                count(t.bytes_read),
                count(t.bytes_written),
            );
        }
        return out;
    }
    let mut last: BTreeMap<u32, &memlens_profile::TimelinePoint> = BTreeMap::new();
    for t in &p.timeline {
        last.insert(t.pid, t);
    }
    for t in last.values() {
        out.add(t.loads, t.stores, t.bytes_read, t.bytes_written);
    }
    out
}

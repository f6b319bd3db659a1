//! Per region: exact traffic and achieved bandwidth from the threads'
//! counters, and the same estimated from the samples between an
//! instance's first and last (Arm's SPE methodology), to show the
//! estimate's error.

use super::PlainTiming;
use crate::{Objects, Profile};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct RegionAccess {
    pub name: String,
    pub pid: u32,
    pub instances: u64,
    pub total_ns: u64,
    /// Exact, from the thread's counters at both ends of every instance.
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Of those, the bytes of the OpenMP teams the marking threads forked
    /// inside (exact); the objects and derived figures come from the
    /// marking threads' own samples.
    pub team_bytes: u64,
    pub loads: u64,
    pub stores: u64,
    /// Achieved bandwidth: exact bytes over the region's summed time, bytes/s.
    pub read_bandwidth: f64,
    pub write_bandwidth: f64,
    /// Of the region's time, what the marking thread spent in the runtime's
    /// access slow path (taking samples, publishing counts), measured; none
    /// when the runtime did not measure it. Not the whole cost of sampling:
    /// a memory-bound loop hides part of it and pays more after each call.
    pub slow_path_ns: Option<u64>,
    /// The region in runs of the uninstrumented build (`report --timed-by`).
    pub plain: Option<PlainTiming>,
    /// Objects whose samples fell inside the region, most sampled first.
    pub objects: Vec<(String, u64)>,
    /// The same figures estimated from samples alone (Arm SPE methodology, 4.2.4 and
    /// 4.4.2), to show the estimate's error where the exact ones exist.
    pub derived: Derived,
    /// Exact time per load: the region's time over its exact loads.
    pub exact_ns_per_load: Option<f64>,
}

/// Figures derived from samples, their periods and timestamps only. Per
/// instance and class, the accesses between its first and last sample are
/// (samples - 1) x period and took the time between them; summed over the
/// region's instances.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct Derived {
    pub load_samples: u64,
    pub store_samples: u64,
    /// Time between first and last load sample, summed over instances.
    pub load_span_ns: u64,
    pub store_span_ns: u64,
    /// The same over the samples of counted loads (bulk calls left out),
    /// for the time per load.
    pub counted_load_span_ns: u64,
    /// Time per load (the load latency when each load waits for the last).
    pub derived_latency_ns: Option<f64>,
    /// Bytes/s (None without access sizes or two samples in an instance).
    pub est_read_bandwidth: Option<f64>,
    pub est_write_bandwidth: Option<f64>,
}

/// One class's samples in one region instance: first and last time, count,
/// bytes.
#[derive(Clone, Copy, Default)]
pub(super) struct Span {
    first: u64,
    last: u64,
    samples: u64,
    bytes: u64,
}

impl Span {
    pub(super) fn add(&mut self, time: u64, bytes: u32) {
        if self.samples == 0 {
            self.first = time;
        }
        self.last = time;
        self.samples += 1;
        self.bytes += u64::from(bytes);
    }

    /// (span ns, accesses in it, bytes in it) at `period`: the accesses after
    /// the first sample up to the last.
    fn between(&self, period: u64) -> (u64, f64, f64) {
        if self.samples < 2 {
            return (0, 0.0, 0.0);
        }
        let accesses = (self.samples - 1) as f64 * period as f64;
        let mean_size = self.bytes as f64 / self.samples as f64;
        (
            self.last.saturating_sub(self.first),
            accesses,
            accesses * mean_size,
        )
    }
}

/// Each region's exact traffic summed over its instances, bandwidths and
/// time per load from it, estimates between its samples (`spans`), and the
/// objects its samples touched (`per_region`), longest first.
pub(super) fn region_accesses(
    p: &Profile,
    objects: &Objects,
    mut spans: FxHashMap<usize, [Span; 3]>,
    mut per_region: FxHashMap<usize, FxHashMap<Option<usize>, u64>>,
) -> Vec<RegionAccess> {
    let period = p.meta.settings.access_period;
    let mut by_name: BTreeMap<(u32, String), RegionAccess> = BTreeMap::new();
    let mut touched: BTreeMap<(u32, String), FxHashMap<Option<usize>, u64>> = BTreeMap::new();
    // Per region, estimated between samples: (counted loads, bytes read) and
    // (unused, bytes written).
    let mut between: BTreeMap<(u32, String), [(f64, f64); 2]> = BTreeMap::new();
    for (i, r) in p.regions.iter().enumerate() {
        let key = (r.pid, crate::region_label(r));
        let e = by_name.entry(key.clone()).or_insert_with(|| RegionAccess {
            name: key.1.clone(),
            pid: r.pid,
            ..Default::default()
        });
        // Saturating: a damaged log's counter deltas must not overflow the sums.
        e.instances += 1;
        e.total_ns = e.total_ns.saturating_add(
            r.end_ns
                .unwrap_or(p.meta.clock.duration_ns)
                .saturating_sub(r.begin_ns),
        );
        e.bytes_read = e.bytes_read.saturating_add(r.bytes_read.unwrap_or(0));
        e.bytes_written = e.bytes_written.saturating_add(r.bytes_written.unwrap_or(0));
        e.team_bytes = e.team_bytes.saturating_add(r.team_bytes.unwrap_or(0));
        if let Some(ns) = r.slow_path_ns {
            e.slow_path_ns = Some(e.slow_path_ns.unwrap_or(0).saturating_add(ns));
        }
        e.loads = e.loads.saturating_add(r.loads.unwrap_or(0));
        e.stores = e.stores.saturating_add(r.stores.unwrap_or(0));
        let d = &mut e.derived;
        let est = between.entry(key.clone()).or_default();
        let [loads, stores, counted_loads] = spans.remove(&i).unwrap_or_default();
        for (class, span) in [loads, stores].iter().enumerate() {
            let (ns, _, bytes) = span.between(period);
            if class == 0 {
                d.load_samples += span.samples;
                d.load_span_ns = d.load_span_ns.saturating_add(ns);
            } else {
                d.store_samples += span.samples;
                d.store_span_ns = d.store_span_ns.saturating_add(ns);
            }
            est[class].1 += bytes;
        }
        let (ns, accesses, _) = counted_loads.between(period);
        d.counted_load_span_ns = d.counted_load_span_ns.saturating_add(ns);
        est[0].0 += accesses;
        for (k, n) in per_region.remove(&i).unwrap_or_default() {
            *touched
                .entry(key.clone())
                .or_default()
                .entry(k)
                .or_default() += n;
        }
    }
    for (key, r) in by_name.iter_mut() {
        let secs = r.total_ns as f64 / 1e9;
        if secs > 0.0 {
            r.read_bandwidth = r.bytes_read as f64 / secs;
            r.write_bandwidth = r.bytes_written as f64 / secs;
        }
        r.exact_ns_per_load = (r.loads > 0).then(|| r.total_ns as f64 / r.loads as f64);
        let [(loads, read), (_, written)] = between.remove(key).unwrap_or_default();
        let d = &mut r.derived;
        let rate = |bytes: f64, ns: u64| (bytes > 0.0 && ns > 0).then(|| bytes / (ns as f64 / 1e9));
        d.derived_latency_ns = (loads > 0.0).then(|| d.counted_load_span_ns as f64 / loads);
        d.est_read_bandwidth = rate(read, d.load_span_ns);
        d.est_write_bandwidth = rate(written, d.store_span_ns);
        let mut objs: Vec<(String, u64)> = touched
            .remove(key)
            .unwrap_or_default()
            .into_iter()
            .map(|(k, n)| (objects.name_of(k), n))
            .collect();
        objs.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        objs.truncate(5);
        r.objects = objs;
    }
    let mut regions: Vec<RegionAccess> = by_name.into_values().collect();
    regions.sort_by_key(|r| std::cmp::Reverse(r.total_ns));
    regions
}

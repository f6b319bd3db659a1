//! Access profiling from the instrumented backend: every sample attributed to the
//! data object live at its address at its time, per-region exact traffic and
//! achieved bandwidth, and the sampling accuracy against the exact counts.

mod attribution;
mod memory_map;
mod plain;

pub use attribution::*;
use memory_map::MemoryMap;
pub use plain::*;

use crate::{ObjectKind, Objects, Profile};
use memlens_profile::Backend;
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct SourceLine {
    /// `function (file:line)`.
    pub location: String,
    pub samples: u64,
}

/// One calling context of an object's sampled accesses (DrCCTProf's
/// data-centric attribution: the object, and the full path of the code that
/// touched it).
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct AccessContext {
    /// In the `stacks` table.
    #[serde(serialize_with = "crate::id_as_string")]
    #[schemars(with = "String")]
    pub stack_id: u64,
    /// `function (file:line)`, the access first, then its callers (inlined
    /// frames included).
    pub frames: Vec<String>,
    pub samples: u64,
    /// samples x period: sampled and scaled.
    pub est_accesses: f64,
    /// Of the object's samples.
    pub share: f64,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct ObjectAccess {
    /// Object name as in the object lists (or "unknown" / "stack").
    pub name: String,
    pub kind: Option<ObjectKind>,
    pub pid: u32,
    pub samples: u64,
    pub load_samples: u64,
    pub store_samples: u64,
    /// Of which parts of intercepted memcpy/memmove/memset calls.
    pub bulk_samples: u64,
    /// Of which halves of atomic read-modify-writes.
    pub atomic_samples: u64,
    /// samples x period: sampled and scaled (a bulk call's bytes count as
    /// 8-byte accesses).
    pub est_accesses: f64,
    pub est_loads: f64,
    pub est_stores: f64,
    /// Sampled bytes x period: sampled and scaled, bulk calls included.
    pub est_bytes_read: f64,
    pub est_bytes_written: f64,
    /// Relative 95% error bounds of `est_bytes_read` and `est_bytes_written`
    /// (see `sampling_error`); null where no sample of the kind was taken.
    pub read_error: Option<f64>,
    pub written_error: Option<f64>,
    /// Hottest source lines touching the object, by samples.
    pub lines: Vec<SourceLine>,
    /// Its accesses' most sampled calling contexts (samples that carry one:
    /// instrumented code).
    pub contexts: Vec<AccessContext>,
}

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
struct Span {
    first: u64,
    last: u64,
    samples: u64,
    bytes: u64,
}

impl Span {
    fn add(&mut self, time: u64, bytes: u32) {
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

/// Samples served by one memory level (hardware samples; modelled levels come
/// with the cache model).
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct LevelRow {
    pub level: String,
    pub samples: u64,
    pub loads: u64,
    pub stores: u64,
    /// Mean latency in cycles of the samples that carry one.
    pub mean_latency: Option<f64>,
}

/// Samples that no object covers, by what the profile says their memory is.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct UnknownMemory {
    pub what: String,
    pub samples: u64,
}

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct AccessReport {
    /// False when the profile has no access samples.
    pub available: bool,
    /// What took the samples (live or imported).
    pub sources: Vec<Backend>,
    /// Samples per memory level, as the hardware reported it (empty for
    /// instrumented builds).
    pub levels: Vec<LevelRow>,
    pub period: u64,
    pub samples: u64,
    /// Samples of intercepted memcpy/memmove/memset calls (their bytes as
    /// 8-byte accesses), among `samples`.
    pub bulk_samples: u64,
    /// Samples of atomic read-modify-writes (each a load and a store), among
    /// `samples`.
    pub atomic_samples: u64,
    /// The samples are of accesses: loads and stores (instrumented code,
    /// PEBS, IBS, SPE). Page faults are neither: their load and store counts
    /// and the figures derived from them are not given.
    pub samples_are_accesses: bool,
    /// Exact bytes per thread and region were counted (instrumented code);
    /// else the regions' bytes are not measured.
    pub bytes_counted: bool,
    /// Exact loads and stores of instrumented code (from the counters).
    pub counted: u64,
    /// Bytes read and written exactly (intercepted memcpy/memmove/memset included).
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// qsort calls of instrumented code, and the bytes of the arrays they
    /// sorted, of threads that exited: their element moves are in no count.
    pub sort_calls: u64,
    pub sort_bytes: u64,
    /// NMO eq. 1: 1 - |counted - samples x period| / counted, over the
    /// samples of counted accesses (bulk samples are of bytes, not counted);
    /// none without counted accesses or without a sample of one.
    pub accuracy: Option<f64>,
    /// Samples that fell in no known object.
    pub unattributed: u64,
    /// What the memory under those samples is, most sampled first.
    pub unattributed_memory: Vec<UnknownMemory>,
    pub objects: Vec<ObjectAccess>,
    pub regions: Vec<RegionAccess>,
    /// The runs of the uninstrumented build the regions were timed by
    /// (`report --timed-by`).
    pub plain_run: Option<PlainRun>,
}

/// A code address's label in its process, or the address itself.
pub fn location_label(p: &Profile, pid: u32, pc: u64) -> String {
    match p.locations.get(&(pid, pc)) {
        Some(l) => crate::code_label(&l.function, &l.file, l.line, &l.module),
        None => format!("{pc:#x}"),
    }
}

/// Samples per level: only hardware reports levels.
fn level_rows(p: &Profile) -> Vec<LevelRow> {
    use memlens_profile::MemLevel;
    // (samples, loads, stores, latency sum, samples with a latency)
    let mut by_level: BTreeMap<u8, (u64, u64, u64, f64, u64)> = BTreeMap::new();
    for s in &p.samples {
        let e = by_level.entry(s.level).or_default();
        e.0 += 1;
        if s.is_store {
            e.2 += 1;
        } else {
            e.1 += 1;
        }
        if let Some(l) = s.latency {
            e.3 += f64::from(l);
            e.4 += 1;
        }
    }
    by_level
        .into_iter()
        .map(|(code, (samples, loads, stores, sum, with))| LevelRow {
            level: MemLevel::from_code(code).name().to_string(),
            samples,
            loads,
            stores,
            mean_latency: (with > 0).then(|| sum / with as f64),
        })
        .collect()
}

/// The backends of a profile that produced access samples.
pub fn sample_sources(meta: &memlens_profile::Meta) -> Vec<Backend> {
    meta.backends().filter(|b| b.samples_accesses()).collect()
}

/// Whether samples from `sources` are loads and stores (page faults are
/// neither, and count no bytes).
pub fn samples_are_accesses(sources: &[Backend]) -> bool {
    sources.iter().any(|s| *s != Backend::PageFaults)
}

/// Whether samples from `sources` carry their access size (instrumented
/// code): hardware samples seldom do, and page faults count no bytes.
pub fn samples_are_sized(sources: &[Backend]) -> bool {
    sources.contains(&Backend::Instrumented)
}

/// The relative error bound, at 95% confidence, of a figure scaled from
/// `samples` samples taken one access in `period`: sampling is binomial, so
/// the count's relative standard error is about 1/sqrt(samples) (NMO states
/// its accuracy the same way); 0 when every access is a sample, none when no
/// sample was taken (the figure's error is then unbounded relative to it).
pub fn sampling_error(samples: u64, period: u64) -> Option<f64> {
    match (samples, period) {
        (0, _) => None,
        (_, 0 | 1) => Some(0.0),
        (n, _) => Some(1.96 / (n as f64).sqrt()),
    }
}

/// What one sample period counts, for a profile's sample sources.
pub fn period_unit(sources: &[Backend]) -> &'static str {
    match sources.first() {
        Some(Backend::Instrumented) => "accesses of a class",
        Some(Backend::PageFaults) => "page faults (first touches of pages, not every access)",
        _ => "sampled operations",
    }
}

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

/// One object's samples.
#[derive(Default)]
struct ObjectTally {
    loads: u64,
    stores: u64,
    bulk: u64,
    atomic: u64,
    /// Bytes of the load and of the store samples.
    bytes: [u64; 2],
    /// Samples per (pid, pc): the unattributed samples mix processes, each
    /// PC is labelled in its own.
    pcs: FxHashMap<(u32, u64), u64>,
    /// Samples per (pid, calling context).
    contexts: FxHashMap<(u32, u64), u64>,
}

pub fn access_report(p: &Profile, objects: &Objects, top: usize) -> AccessReport {
    let sources = sample_sources(&p.meta);
    let available = !sources.is_empty();
    let hardware = sources.iter().any(|s| s.is_hardware());
    let period = p.meta.settings.access_period;
    let samples_are_accesses = samples_are_accesses(&sources);
    let mut out = AccessReport {
        available,
        samples_are_accesses,
        bytes_counted: sources.contains(&Backend::Instrumented),
        sources,
        period,
        samples: p.samples.len() as u64,
        bulk_samples: p.samples.iter().filter(|s| s.bulk).count() as u64,
        atomic_samples: p.samples.iter().filter(|s| s.atomic).count() as u64,
        levels: if hardware { level_rows(p) } else { Vec::new() },
        ..Default::default()
    };
    if !available {
        return out;
    }
    let totals = exact_totals(p);
    out.counted = totals.loads.saturating_add(totals.stores);
    out.bytes_read = totals.bytes_read;
    out.bytes_written = totals.bytes_written;
    for t in &p.threads {
        out.sort_calls += t.sort_calls.unwrap_or(0);
        out.sort_bytes += t.sort_bytes.unwrap_or(0);
    }
    // Without a sample of a counted access the formula gives 0: not a
    // measured accuracy, but none at all.
    let counted_samples = out.samples - out.bulk_samples;
    if out.counted > 0 && counted_samples > 0 {
        let est = counted_samples as f64 * period as f64;
        out.accuracy = Some(1.0 - (out.counted as f64 - est).abs() / out.counted as f64);
    }

    // Looked up for every sample: the fast hash.
    let mut per_object: FxHashMap<Option<usize>, ObjectTally> = FxHashMap::default();
    let mut per_region: FxHashMap<usize, FxHashMap<Option<usize>, u64>> = FxHashMap::default();
    // Per region instance: the load and the store samples' spans (for
    // bandwidth), and the spans of the loads the counters count (for time
    // per load: a bulk call's samples are of bytes).
    let mut spans: FxHashMap<usize, [Span; 3]> = FxHashMap::default();
    let memory = MemoryMap::new(p);
    let mut unknown: FxHashMap<&str, u64> = FxHashMap::default();
    attribute(p, objects, |i, hit, regions| {
        let s = &p.samples[i];
        let object = hit.map(|h| h.object);
        if object.is_none() {
            *unknown.entry(memory.what(s.pid, s.address)).or_default() += 1;
        }
        let e = per_object.entry(object).or_default();
        if s.is_store {
            e.stores += 1;
        } else {
            e.loads += 1;
        }
        e.bulk += s.bulk as u64;
        e.atomic += s.atomic as u64;
        e.bytes[s.is_store as usize] += u64::from(s.size);
        *e.pcs.entry((s.pid, s.pc)).or_default() += 1;
        if s.stack_id != 0 {
            *e.contexts.entry((s.pid, s.stack_id)).or_default() += 1;
        }
        for &r in regions {
            *per_region.entry(r).or_default().entry(object).or_default() += 1;
            // Only accesses time loads and stores: a page fault is neither.
            if samples_are_accesses {
                let spans = spans.entry(r).or_default();
                spans[s.is_store as usize].add(s.time_ns, s.size);
                if !s.is_store && !s.bulk {
                    spans[2].add(s.time_ns, s.size);
                }
            }
        }
    });
    out.unattributed = per_object.get(&None).map_or(0, |e| e.loads + e.stores);
    out.unattributed_memory = (unknown.into_iter())
        .map(|(what, samples)| UnknownMemory {
            what: what.to_string(),
            samples,
        })
        .collect();
    (out.unattributed_memory).sort_by(|a, b| b.samples.cmp(&a.samples).then(a.what.cmp(&b.what)));
    let mut list: Vec<ObjectAccess> = (per_object.into_iter())
        .map(|(key, tally)| object_access(p, objects, key, tally, samples_are_accesses))
        .collect();
    list.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.name.cmp(&b.name)));
    list.truncate(top);
    out.objects = list;

    out.regions = region_accesses(p, objects, spans, per_region);
    out
}

/// What the samples of one object (`None`: of no object) say of it: its
/// estimated accesses and bytes with their sampling error, hottest lines
/// and contexts.
fn object_access(
    p: &Profile,
    objects: &Objects,
    key: Option<usize>,
    tally: ObjectTally,
    samples_are_accesses: bool,
) -> ObjectAccess {
    let period = p.meta.settings.access_period;
    let scaled = |n: u64| n as f64 * period as f64;
    let ObjectTally {
        loads,
        stores,
        bulk,
        atomic,
        bytes,
        pcs,
        contexts,
    } = tally;
    let pid = key.map_or(0, |k| objects.list[k].pid);
    let mut lines: Vec<(String, u64)> = Vec::new();
    let mut by_label: HashMap<String, u64> = HashMap::new();
    for ((pid, pc), n) in pcs {
        *by_label.entry(location_label(p, pid, pc)).or_default() += n;
    }
    lines.extend(by_label);
    lines.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    lines.truncate(5);
    let samples = loads + stores;
    let (read_error, written_error) = if samples_are_accesses {
        (
            sampling_error(loads, period),
            sampling_error(stores, period),
        )
    } else {
        (None, None)
    };
    let (loads, stores) = if samples_are_accesses {
        (loads, stores)
    } else {
        (0, 0)
    };
    ObjectAccess {
        name: objects.name_of(key),
        kind: key.map(|k| objects.list[k].kind),
        pid,
        samples,
        load_samples: loads,
        store_samples: stores,
        bulk_samples: bulk,
        atomic_samples: atomic,
        est_accesses: scaled(samples),
        est_loads: scaled(loads),
        est_stores: scaled(stores),
        est_bytes_read: scaled(bytes[0]),
        est_bytes_written: scaled(bytes[1]),
        read_error,
        written_error,
        lines: lines
            .into_iter()
            .map(|(location, samples)| SourceLine { location, samples })
            .collect(),
        contexts: top_contexts(p, contexts, samples, period),
    }
}

/// Each region's exact traffic summed over its instances, bandwidths and
/// time per load from it, estimates between its samples (`spans`), and the
/// objects its samples touched (`per_region`), longest first.
fn region_accesses(
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

/// The most sampled of an object's access contexts, with their frames. Call
/// sites on one source line (three calls of `sum` in one expression) are one
/// context: contexts are keyed by their frames' names, each listed with the
/// stack id of its most sampled instance.
pub(crate) fn top_contexts(
    p: &Profile,
    contexts: FxHashMap<(u32, u64), u64>,
    of: u64,
    period: u64,
) -> Vec<AccessContext> {
    // frames -> (samples, (samples, stack id) of the most sampled instance)
    let mut by_frames: HashMap<Vec<String>, (u64, (u64, u64))> = HashMap::new();
    for ((pid, stack_id), samples) in contexts {
        let e = by_frames
            .entry(context_frames(p, pid, stack_id))
            .or_default();
        e.0 += samples;
        e.1 = e.1.max((samples, stack_id));
    }
    let mut list: Vec<AccessContext> = by_frames
        .into_iter()
        .map(|(frames, (samples, (_, stack_id)))| AccessContext {
            stack_id,
            frames,
            samples,
            est_accesses: samples as f64 * period as f64,
            share: samples as f64 / of.max(1) as f64,
        })
        .collect();
    list.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.frames.cmp(&b.frames)));
    list.truncate(CONTEXTS_PER_OBJECT);
    list
}

/// A calling context's frames as `function (file:line)`, the access first
/// (empty for stack id 0 or one the profile lacks).
pub(crate) fn context_frames(p: &Profile, pid: u32, stack_id: u64) -> Vec<String> {
    (p.stacks.get(&(pid, stack_id)).into_iter().flatten())
        .map(|f| crate::code_label(&f.function, &f.file, f.line, &f.module))
        .collect()
}

/// Access contexts listed per object.
pub const CONTEXTS_PER_OBJECT: usize = 5;

#[cfg(test)]
mod tests {
    use crate::Profile;
    use memlens_profile::{testing, Allocation, Backend, Region, SampleCore, TimelinePoint};

    /// A 4 KiB block, thread 1's ten loads of it (in the context f <- main)
    /// and thread 2's ten samples of a memset into it; a phase of the process
    /// and a region of thread 1 around all of it.
    fn bulk_and_phase_profile() -> Profile {
        let mut p = testing::instrumented(100);
        p.allocations = vec![testing::heap_block(1, 0x10000, 4096, 0, 1_000)];
        p.samples = (0..20u64)
            .map(|i| SampleCore {
                pid: 1,
                tid: 1 + (i >= 10) as u32,
                time_ns: 2_000 + 1_000 * i,
                address: 0x10000 + 8 * i,
                size: 8,
                is_store: i >= 10,
                bulk: i >= 10,
                stack_id: if i < 10 { 7 } else { 0 },
                ..Default::default()
            })
            .collect();
        // Counted: thread 1's 1 000 loads; the memset's bytes are apart.
        p.timeline = vec![TimelinePoint {
            pid: 1,
            time_ns: 50_000,
            loads: 1_000,
            bytes_written: 8_000,
            ..Default::default()
        }];
        testing::add_stack(&mut p, 1, 7, &[("f", 3), ("main", 9)]);
        let region = |name: &str, process_wide: bool| Region {
            process_wide,
            ..testing::region(1, 1, name, 1_500, 40_000)
        };
        p.regions = vec![region("work", true), region("work", false)];
        p
    }

    #[test]
    fn bulk_samples_count_bytes_and_phases_see_every_thread() {
        let p = bulk_and_phase_profile();
        let report = super::access_report(&p, &crate::data_objects(&p), 10);
        assert_eq!((report.samples, report.bulk_samples), (20, 10));
        // Ten samples of counted accesses at period 100 for 1 000 counted.
        assert_eq!(report.accuracy, Some(1.0));
        let block = &report.objects[0];
        assert_eq!((block.samples, block.bulk_samples), (20, 10));
        assert_eq!(
            (block.est_bytes_read, block.est_bytes_written),
            (8_000.0, 8_000.0)
        );
        // Thread 1's accesses in their calling context, half of the block's.
        assert_eq!(block.contexts.len(), 1);
        assert_eq!(block.contexts[0].frames, ["f (a.c:3)", "main (a.c:9)"]);
        assert_eq!(
            (block.contexts[0].samples, block.contexts[0].share),
            (10, 0.5)
        );
        // The phase holds both threads' samples, thread 1's region its own.
        let touched = |name: &str| {
            let r = report.regions.iter().find(|r| r.name == name).unwrap();
            r.objects.iter().map(|(_, n)| n).sum::<u64>()
        };
        assert_eq!((touched("work [process]"), touched("work")), (20, 10));
    }

    /// What a sample on no object hit: an image's bytes without a symbol,
    /// the 16 bytes between two blocks (a chunk header), a freed block's
    /// bytes, or memory nothing recorded covers.
    #[test]
    fn memory_no_object_covers_is_named_by_what_holds_it() {
        let mut p = Profile::default();
        p.meta.settings.sample_rate = 1;
        p.modules = vec![memlens_profile::Module {
            pid: 1,
            path: "/usr/lib/libx.so".into(),
            start: 0x1000,
            end: 0x5000,
            ..Default::default()
        }];
        let block = |address, free_ns| Allocation {
            pid: 1,
            address,
            size: 48,
            usable_size: 48,
            free_ns,
            ..Default::default()
        };
        p.allocations = vec![block(0x10000, None), block(0x10040, Some(10))];
        let map = super::MemoryMap::new(&p);
        let what = |addr| map.what(1, addr);
        assert!(what(0x2000).starts_with("libx.so's image"));
        assert!(what(0x10038).starts_with("heap memory outside"));
        assert!(what(0x10050).starts_with("heap memory outside"));
        assert!(what(0x20000).starts_with("memory no recorded block"));
        assert!(what(0x10000 + 48 + 16 + 48 + 33).starts_with("memory no recorded block"));
        // Another process's memory is not this one's.
        assert!(map.what(2, 0x2000).starts_with("memory no recorded block"));
        assert!(what(0xffff_8b55_2056_3cf8).starts_with("kernel memory"));

        // An import: perf's anonymous mappings, images without statics, and
        // no blocks.
        p.meta.backend = vec![
            Backend::Pebs.name().into(),
            Backend::PerfDataImport.name().into(),
        ];
        let mapping = |path: &str, start| memlens_profile::Module {
            pid: 1,
            path: path.into(),
            start,
            end: start + 0x1000,
            ..Default::default()
        };
        p.modules = vec![
            mapping("//anon", 0x1000),
            mapping("[stack]", 0x3000),
            mapping("/bin/app", 0x5000),
        ];
        p.allocations.clear();
        let map = super::MemoryMap::new(&p);
        let what = |addr| map.what(1, addr);
        assert!(what(0x1800).starts_with("anonymous memory"));
        assert!(what(0x3800).starts_with("anonymous memory"));
        assert!(what(0x5800).starts_with("app's image (an import"));
        assert!(what(0x9000).starts_with("memory no mapping in the perf.data"));
    }

    /// A 4 KiB heap block at 0x10000 live from 1 us to 1 ms, and 30 samples
    /// (1 per 100 accesses): 20 in the block (every fourth a store), 10 at an
    /// address nothing covers.
    #[test]
    fn samples_land_in_the_object_live_at_their_address_and_time() {
        let mut p = testing::instrumented(100);
        p.allocations = vec![Allocation {
            free_ns: Some(1_000_000),
            ..testing::heap_block(1, 0x10000, 4096, 0, 1_000)
        }];
        p.samples = (0..30u64)
            .map(|i| SampleCore {
                pid: 1,
                tid: 1,
                time_ns: 2_000 + 1_000 * i,
                address: if i < 20 { 0x10000 + 8 * i } else { 0x90000 },
                size: 8,
                is_store: i < 20 && i % 4 == 0,
                ..Default::default()
            })
            .collect();
        let objects = crate::data_objects(&p);
        let report = super::access_report(&p, &objects, 10);
        assert!(report.available);
        assert_eq!((report.samples, report.unattributed), (30, 10));
        let block = report
            .objects
            .iter()
            .find(|o| o.kind == Some(crate::ObjectKind::Heap))
            .expect("the block's accesses");
        assert_eq!(
            (block.samples, block.store_samples, block.load_samples),
            (20, 5, 15)
        );
        assert_eq!(block.est_accesses, 20.0 * 100.0);
        // After the block is freed its address belongs to nothing.
        p.samples[0].time_ns = 2_000_000;
        p.samples.sort_by_key(|s| s.time_ns);
        let report = super::access_report(&p, &crate::data_objects(&p), 10);
        assert_eq!(report.unattributed, 11);
    }

    #[test]
    fn a_scaled_figures_bound_shrinks_with_the_square_root_of_its_samples() {
        use super::sampling_error;
        assert_eq!(sampling_error(0, 4099), None);
        assert_eq!(sampling_error(7, 1), Some(0.0));
        let bound = |n| sampling_error(n, 4099).unwrap();
        assert!((bound(400) - 0.098).abs() < 1e-9);
        assert!((bound(1600) - bound(400) / 2.0).abs() < 1e-12);
    }
}

//! Access profiling from the instrumented backend: every sample attributed to the
//! data object live at its address at its time, per-region exact traffic and
//! achieved bandwidth, and the sampling accuracy against the exact counts.

mod attribution;
mod memory_map;
mod plain;
mod regions;
mod sources;
mod threads;

pub use attribution::*;
use memory_map::MemoryMap;
pub use plain::*;
pub use regions::*;
pub use sources::*;
pub use threads::*;

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

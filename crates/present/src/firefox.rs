//! `memlens export --format firefox`: the Firefox Profiler's processed
//! profile (written by samply's fxprof-processed-profile crate). Each process
//! is a process with its threads; recorded blocks are native allocation
//! samples (their frees as negative ones, so the profiler's "retained memory"
//! works), access samples are the threads' samples under the same stacks as
//! the data-centric flame graph, regions are interval markers, and the heap
//! and resident set are memory counters.

use crate::stacks::{access_stack, allocation_stack, AccessKey, Node};
use fxprof_processed_profile::{
    CategoryHandle, CpuDelta, Frame, FrameFlags, FrameInfo, MarkerFieldFlags, MarkerFieldFormat,
    MarkerTiming, ProcessHandle, Profile as Fx, ReferenceTimestamp, SamplingInterval, StackHandle,
    StaticSchemaMarker, StaticSchemaMarkerField, StringHandle, ThreadHandle, Timestamp,
};
use memlens_analysis as analysis;
use memlens_profile::{Profile, TimelinePoint};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::SystemTime;

/// What went into the file, for the command's message and tests.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FirefoxCounts {
    pub threads: usize,
    pub allocations: usize,
    pub frees: usize,
    pub samples: usize,
    pub markers: usize,
}

/// The profile in the Firefox Profiler's format. `started` is the wall-clock
/// time of the run's start (the profiler shows it; memlens' tables count
/// from a monotonic origin).
pub fn firefox(p: &Profile, started: SystemTime) -> (Fx, FirefoxCounts) {
    let name = p.meta.command.join(" ");
    let mut fx = Fx::new(
        &name,
        ReferenceTimestamp::from_system_time(started),
        SamplingInterval::from_millis(p.meta.settings.interval_ms.max(1)),
    );
    fx.set_product("memlens");
    let mut counts = FirefoxCounts::default();
    let at = Timestamp::from_nanos_since_reference;
    let (processes, threads) = add_threads(p, &mut fx);
    counts.threads = threads.len();
    let thread = |pid: u32, tid: u32| {
        threads
            .get(&(pid, tid))
            .or_else(|| threads.get(&(pid, pid)))
    };

    // Allocation samples, in time order (the format wants them sorted).
    // Threads' stacks are no allocation the code made (the main thread's is
    // the kernel's, its size a limit, never freed): the profiler would count
    // them as retained memory.
    let mut events: Vec<(u64, ThreadHandle, Option<StackHandle>, u64, i64)> = Vec::new();
    for a in p.allocations.iter().filter(|a| a.kind != "stack") {
        let Some(&t) = thread(a.pid, a.tid) else {
            continue;
        };
        let stack = allocation_stack(p, a.pid, a.stack_id, &a.kind);
        let handle = intern(&mut fx, t, &stack);
        let bytes = a.est_bytes.round() as i64;
        events.push((a.alloc_ns, t, handle, a.address, bytes));
        counts.allocations += 1;
        if let Some(free) = a.free_ns {
            events.push((free, t, None, a.address, -bytes));
            counts.frees += 1;
        }
    }
    events.sort_by_key(|e| e.0);
    for (ns, t, stack, address, bytes) in events {
        fx.add_allocation_sample(t, at(ns), stack, address, bytes);
    }

    // Access samples: analysis::attribute visits them in time order.
    if !p.samples.is_empty() {
        let objects = analysis::data_objects(p);
        // Each distinct stack built and interned once per thread.
        let mut interned: HashMap<(AccessKey, ThreadHandle), Option<StackHandle>> = HashMap::new();
        analysis::attribute(p, &objects, |i, hit, _| {
            let s = &p.samples[i];
            if let Some(&t) = thread(s.pid, s.tid) {
                let key = AccessKey::of(s, hit);
                let stack = *interned
                    .entry((key, t))
                    .or_insert_with(|| intern(&mut fx, t, &access_stack(p, &objects, &key)));
                fx.add_sample(t, at(s.time_ns), stack, CpuDelta::ZERO, 1);
                counts.samples += 1;
            }
        });
    }

    for r in &p.regions {
        let Some(&t) = thread(r.pid, r.tid) else {
            continue;
        };
        let timing = match r.end_ns {
            Some(end) => MarkerTiming::Interval(at(r.begin_ns), at(end)),
            None => MarkerTiming::IntervalStart(at(r.begin_ns)),
        };
        let name = fx.intern_string(&r.name);
        let scope = fx.intern_string(if r.process_wide {
            "process (every thread)"
        } else {
            "thread"
        });
        // Unmeasured traffic (code not built with memlens) is no field at
        // all: the format has no empty number, and 0 would read as measured.
        match (r.bytes_read, r.bytes_written, r.loads, r.stores) {
            (Some(read), Some(written), Some(loads), Some(stores)) => {
                let traffic = [read, written, loads, stores].map(|v| v as f64);
                fx.add_marker(
                    t,
                    timing,
                    MeasuredRegionMarker {
                        name,
                        scope,
                        traffic,
                    },
                )
            }
            _ => fx.add_marker(t, timing, RegionMarker { name, scope }),
        };
        counts.markers += 1;
    }

    add_memory_counters(p, &mut fx, &processes);
    (fx, counts)
}

/// One Firefox thread per thread memlens saw (the threads table, and any tid
/// an allocation, sample or region names), the main thread first: the
/// format keeps a process's allocation samples on its first thread.
fn add_threads(
    p: &Profile,
    fx: &mut Fx,
) -> (
    BTreeMap<u32, ProcessHandle>,
    BTreeMap<(u32, u32), ThreadHandle>,
) {
    let mut tids: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    for proc in &p.meta.processes {
        tids.entry(proc.pid).or_default().insert(proc.pid);
    }
    let seen = (p.threads.iter().map(|t| (t.pid, t.tid)))
        .chain(p.allocations.iter().map(|a| (a.pid, a.tid)))
        .chain(p.samples.iter().map(|s| (s.pid, s.tid)))
        .chain(p.regions.iter().map(|r| (r.pid, r.tid)));
    for (pid, tid) in seen {
        tids.entry(pid).or_default().extend([pid, tid]);
    }
    let end = Timestamp::from_nanos_since_reference(p.meta.clock.duration_ns);
    let (mut processes, mut handles) = (BTreeMap::new(), BTreeMap::new());
    for (pid, tids) in tids {
        let procs: Vec<_> = p.meta.processes.iter().filter(|m| m.pid == pid).collect();
        let exe = procs.last().map_or("process", |m| m.exe.as_str());
        let start = procs.first().map_or(0, |m| m.start_ns);
        let process: ProcessHandle = fx.add_process(
            exe.rsplit('/').next().unwrap_or(exe),
            pid,
            Timestamp::from_nanos_since_reference(start),
        );
        fx.set_process_end_time(process, end);
        processes.insert(pid, process);
        // The main thread (tid == pid) first.
        for tid in std::iter::once(pid).chain(tids.into_iter().filter(|&t| t != pid)) {
            let row = p.threads.iter().find(|t| t.pid == pid && t.tid == tid);
            let begin = row.and_then(|r| r.start_ns).unwrap_or(start);
            let t = fx.add_thread(
                process,
                tid,
                Timestamp::from_nanos_since_reference(begin),
                tid == pid,
            );
            fx.set_thread_name(
                t,
                &if tid == pid {
                    "main".to_string()
                } else {
                    format!("thread {tid}")
                },
            );
            if let Some(end) = row.and_then(|r| r.end_ns) {
                fx.set_thread_end_time(t, Timestamp::from_nanos_since_reference(end));
            }
            handles.insert((pid, tid), t);
        }
    }
    (processes, handles)
}

/// Frames as labels (memlens has symbolized them), root first.
fn intern(fx: &mut Fx, thread: ThreadHandle, stack: &[Node]) -> Option<StackHandle> {
    let frames: Vec<FrameInfo> = (stack.iter())
        .map(|n| FrameInfo {
            frame: Frame::Label(fx.intern_string(&n.label())),
            category_pair: CategoryHandle::OTHER.into(),
            flags: FrameFlags::empty(),
        })
        .collect();
    fx.intern_stack_frames(thread, frames.into_iter())
}

/// One figure of a timeline point.
type Reading = fn(&TimelinePoint) -> u64;

/// The live heap (usable bytes, as the timeline counts it) and the resident
/// set, at every tick of the recording interval, as memory tracks.
fn add_memory_counters(p: &Profile, fx: &mut Fx, processes: &BTreeMap<u32, ProcessHandle>) {
    let mut by_pid: BTreeMap<u32, Vec<&TimelinePoint>> = BTreeMap::new();
    for point in &p.timeline {
        by_pid.entry(point.pid).or_default().push(point);
    }
    for (pid, points) in by_pid {
        let Some(&process) = processes.get(&pid) else {
            continue;
        };
        let series: [(&str, &str, Reading); 2] = [
            (
                "Memory",
                "live heap bytes (memlens' exact counters, usable sizes)",
                |t| t.heap_live,
            ),
            (
                "Resident set",
                "VmRSS from /proc/PID/status, sampled",
                |t| t.rss,
            ),
        ];
        for (name, description, value) in series {
            let counter = fx.add_counter(process, name, "Memory", description);
            let mut last = 0.0;
            for point in &points {
                let v = value(point) as f64;
                fx.add_counter_sample(
                    counter,
                    Timestamp::from_nanos_since_reference(point.time_ns),
                    v - last,
                    1,
                );
                last = v;
            }
        }
    }
}

/// A region instance of a program not built with memlens: its name and scope.
struct RegionMarker {
    name: StringHandle,
    scope: StringHandle,
}

const SCOPE: StaticSchemaMarkerField = field("scope", "Scope", MarkerFieldFormat::String);

impl StaticSchemaMarker for RegionMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "MemlensRegion";
    const DESCRIPTION: Option<&'static str> =
        Some("An annotated region (memlens_region_begin/end or a phase)");
    const CHART_LABEL: Option<&'static str> = Some("{marker.name}");
    const TABLE_LABEL: Option<&'static str> = Some("{marker.name}");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[SCOPE];

    fn name(&self, _: &mut Fx) -> StringHandle {
        self.name
    }

    fn category(&self, _: &mut Fx) -> CategoryHandle {
        CategoryHandle::OTHER
    }

    fn string_field_value(&self, _field: u32) -> StringHandle {
        self.scope
    }

    fn number_field_value(&self, _field: u32) -> f64 {
        unreachable!("a region marker has no number field")
    }
}

/// A region instance of instrumented code: its name, scope and exact
/// traffic (bytes read, bytes written, loads, stores).
struct MeasuredRegionMarker {
    name: StringHandle,
    scope: StringHandle,
    traffic: [f64; 4],
}

impl StaticSchemaMarker for MeasuredRegionMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "MemlensMeasuredRegion";
    const DESCRIPTION: Option<&'static str> =
        Some("An annotated region (memlens_region_begin/end or a phase), with its exact traffic");
    const CHART_LABEL: Option<&'static str> = Some("{marker.name}");
    const TABLE_LABEL: Option<&'static str> =
        Some("{marker.name}: {marker.data.bytesRead} read, {marker.data.bytesWritten} written");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[
        SCOPE,
        field("bytesRead", "Bytes read (exact)", MarkerFieldFormat::Bytes),
        field(
            "bytesWritten",
            "Bytes written (exact)",
            MarkerFieldFormat::Bytes,
        ),
        field("loads", "Loads (exact)", MarkerFieldFormat::Integer),
        field("stores", "Stores (exact)", MarkerFieldFormat::Integer),
    ];

    fn name(&self, _: &mut Fx) -> StringHandle {
        self.name
    }

    fn category(&self, _: &mut Fx) -> CategoryHandle {
        CategoryHandle::OTHER
    }

    fn string_field_value(&self, _field: u32) -> StringHandle {
        self.scope
    }

    fn number_field_value(&self, field: u32) -> f64 {
        self.traffic[field as usize - 1]
    }
}

const fn field(
    key: &'static str,
    label: &'static str,
    format: MarkerFieldFormat,
) -> StaticSchemaMarkerField {
    StaticSchemaMarkerField {
        key,
        label,
        format,
        flags: MarkerFieldFlags::SEARCHABLE,
    }
}

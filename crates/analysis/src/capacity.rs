//! The capacity timeline: peaks, and what each annotated region did to capacity.

use crate::Profile;
use memlens_profile::TimelinePoint;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct Peak {
    /// Highest resident set of any single process, and when.
    pub rss_bytes: u64,
    pub rss_time_ns: u64,
    pub rss_pid: u32,
    /// Highest sum of resident sets over all processes at one tick.
    pub total_rss_bytes: u64,
    /// Highest live heap, and when: exact in requested bytes where every
    /// block was recorded and replayed ([`Peak::heap_exact`]), else the
    /// highest of the runtime's exact counts of usable bytes read at each
    /// timeline tick (a peak between two ticks is not seen: see
    /// [`Peak::heap_bound_bytes`]).
    pub heap_bytes: u64,
    pub heap_time_ns: u64,
    pub heap_pid: u32,
    pub heap_exact: bool,
    /// Usable bytes of the same blocks at an exact peak.
    pub heap_usable_bytes: Option<u64>,
    /// Read at ticks: the most the heap can have reached between two ticks
    /// (live at one tick plus all bytes allocated before the next).
    pub heap_bound_bytes: u64,
    /// The runtime ran in at least one process: the heap figures are measured.
    pub heap_measured: bool,
    /// Heap glibc held when the runtime started (the loader's and earlier
    /// constructors' blocks), counted in the live heap: the most of any process.
    pub heap_before_start: u64,
    pub samples: usize,
}

pub fn peak(p: &Profile) -> Peak {
    let mut out = Peak {
        samples: p.timeline.len(),
        heap_measured: p.meta.processes.iter().any(|p| !p.untracked),
        ..Default::default()
    };
    let mut totals: BTreeMap<u64, u64> = BTreeMap::new();
    for (i, t) in p.timeline.iter().enumerate() {
        if t.rss > out.rss_bytes {
            (out.rss_bytes, out.rss_time_ns, out.rss_pid) = (t.rss, t.time_ns, t.pid);
        }
        if t.heap_live > out.heap_bytes {
            (out.heap_bytes, out.heap_time_ns, out.heap_pid) = (t.heap_live, t.time_ns, t.pid);
        }
        // Timeline points are in (pid, time) order.
        let allocated_until_next = (p.timeline.get(i + 1))
            .filter(|n| n.pid == t.pid)
            .map_or(0, |n| n.heap_alloc_bytes.saturating_sub(t.heap_alloc_bytes));
        out.heap_bound_bytes = out.heap_bound_bytes.max(t.heap_live + allocated_until_next);
        *totals.entry(t.time_ns).or_default() += t.rss;
        out.heap_before_start = out.heap_before_start.max(t.heap_before_start);
    }
    out.total_rss_bytes = totals.values().copied().max().unwrap_or(0);
    let exact = (p.meta.processes.iter())
        .filter_map(|x| Some((x.pid, x.heap_peak.as_ref()?)))
        .max_by_key(|(_, h)| h.requested_bytes);
    if let Some((pid, h)) = exact {
        out.heap_exact = true;
        (out.heap_bytes, out.heap_time_ns, out.heap_pid) = (h.requested_bytes, h.time_ns, pid);
        out.heap_usable_bytes = Some(h.usable_bytes);
        out.heap_bound_bytes = h.requested_bytes;
    }
    out
}

/// The live heap each process still held at its last sample (exact), for the
/// processes whose last image ran the runtime.
pub fn heap_at_exit(p: &Profile) -> Vec<(u32, u64)> {
    let mut last: BTreeMap<u32, &TimelinePoint> = BTreeMap::new();
    for t in &p.timeline {
        last.insert(t.pid, t);
    }
    let last_image_untracked = |pid: u32| {
        (p.meta.processes.iter())
            .filter(|x| x.pid == pid)
            .max_by_key(|x| x.exec_seq)
            .is_some_and(|x| x.untracked)
    };
    last.into_iter()
        .filter(|(pid, _)| !last_image_untracked(*pid))
        .map(|(pid, t)| (pid, t.heap_live))
        .collect()
}

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct RegionCapacity {
    pub name: String,
    pub pid: u32,
    pub instances: u64,
    pub threads: u64,
    pub total_ns: u64,
    /// Resident set at the first instance's first tick inside it (the tick
    /// before it when none fell inside: one before can hold memory freed
    /// before the region began), and at the last end (the tick at or before).
    pub rss_begin: u64,
    pub rss_end: u64,
    /// Highest resident set read at a tick while the region ran; none when
    /// no tick fell inside it.
    pub rss_peak: Option<u64>,
    /// Highest live heap while the region ran: exact where every block was
    /// recorded ([`RegionCapacity::heap_exact`]), else read at the ticks
    /// inside it (none when no tick fell inside).
    pub heap_peak: Option<u64>,
    /// Live heap change over all instances (end minus begin, summed): exact
    /// ([`RegionCapacity::heap_growth_exact`]), or between the ticks
    /// nearest each end.
    pub heap_growth: i64,
    /// The heap figures replay every block's events.
    pub heap_exact: bool,
    /// The heap growth is exact: replayed, or the runtime's counters read at
    /// each instance's ends (usable bytes).
    pub heap_growth_exact: bool,
    /// Timeline samples that fell inside the region.
    pub samples: u64,
}

/// The last sample at or before `t` for a process (or the first one).
fn sample_at(points: &[&TimelinePoint], t: u64) -> Option<TimelinePoint> {
    let i = points.partition_point(|p| p.time_ns <= t);
    points.get(i.saturating_sub(1)).map(|p| (*p).clone())
}

pub fn region_capacity(p: &Profile) -> Vec<RegionCapacity> {
    let mut by_key: BTreeMap<(u32, String), RegionCapacity> = BTreeMap::new();
    let mut threads: BTreeMap<(u32, String), std::collections::BTreeSet<u32>> = BTreeMap::new();
    // Each process's ticks, in time order.
    let mut by_pid: BTreeMap<u32, Vec<&TimelinePoint>> = BTreeMap::new();
    for t in &p.timeline {
        by_pid.entry(t.pid).or_default().push(t);
    }
    for v in by_pid.values_mut() {
        v.sort_by_key(|t| t.time_ns);
    }
    for r in &p.regions {
        let points: &[&TimelinePoint] = by_pid.get(&r.pid).map_or(&[], |v| v);
        let end = r.end_ns.unwrap_or_else(|| p.process_end(r.pid));
        // A damaged log can end a region before it began: nothing is inside.
        let first = points.partition_point(|s| s.time_ns < r.begin_ns);
        let inside = &points[first..points.partition_point(|s| s.time_ns <= end).max(first)];
        let key = (r.pid, crate::region_label(r));
        let ends = r.heap_begin.zip(r.heap_end);
        let exact = ends.zip(r.heap_peak);
        let begin_s = sample_at(points, r.begin_ns);
        let e = by_key.entry(key.clone()).or_insert_with(|| RegionCapacity {
            name: key.1.clone(),
            pid: r.pid,
            rss_begin: (inside.first().map(|s| s.rss))
                .or(begin_s.as_ref().map(|s| s.rss))
                .unwrap_or(0),
            heap_exact: exact.is_some(),
            heap_growth_exact: ends.is_some(),
            ..Default::default()
        });
        threads.entry(key).or_default().insert(r.tid);
        e.instances += 1;
        e.total_ns = e.total_ns.saturating_add(end.saturating_sub(r.begin_ns));
        let end_s = sample_at(points, end);
        e.rss_end = end_s.as_ref().map_or(0, |s| s.rss);
        e.heap_exact &= exact.is_some();
        e.heap_growth_exact &= ends.is_some();
        e.heap_growth += match ends {
            Some((begin, end)) => end as i64 - begin as i64,
            None => {
                end_s.as_ref().map_or(0, |s| s.heap_live as i64)
                    - begin_s.as_ref().map_or(0, |s| s.heap_live as i64)
            }
        };
        if let Some(peak) = r.heap_peak.filter(|_| exact.is_some()) {
            e.heap_peak = e.heap_peak.max(Some(peak));
        }
        // Only ticks inside: the one before a region began can hold a block
        // freed before it.
        for s in inside {
            e.samples += 1;
            e.rss_peak = e.rss_peak.max(Some(s.rss));
            if exact.is_none() {
                e.heap_peak = e.heap_peak.max(Some(s.heap_live));
            }
        }
    }
    for (key, t) in threads {
        if let Some(e) = by_key.get_mut(&key) {
            e.threads = t.len() as u64;
        }
    }
    let mut out: Vec<RegionCapacity> = by_key.into_values().collect();
    out.sort_by_key(|r| std::cmp::Reverse(r.total_ns));
    out
}

/// One dynamic object's live bytes over time.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct ObjectLive {
    pub name: String,
    pub kind: crate::ObjectKind,
    pub pid: u32,
    /// (time ns, live bytes) at every change.
    #[serde(skip)]
    pub steps: Vec<(u64, f64)>,
    /// Live bytes at each timeline tick (`CapacitySeries::time_ns`).
    pub bytes: Vec<f64>,
}

/// The capacity timeline of the run: all processes summed at each tick, with the
/// largest dynamic objects' live bytes and the top-level regions.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct CapacitySeries {
    pub time_ns: Vec<u64>,
    pub rss: Vec<u64>,
    pub heap_live: Vec<u64>,
    pub objects: Vec<ObjectLive>,
    /// (name, begin ns, end ns) of top-level regions.
    pub regions: Vec<(String, u64, u64)>,
    pub end_ns: u64,
}

/// Value of a step function (sorted by time) at time t.
pub fn step_at(points: &[(u64, f64)], t: u64) -> f64 {
    let i = points.partition_point(|p| p.0 <= t);
    if i == 0 {
        0.0
    } else {
        points[i - 1].1
    }
}

/// Objects the capacity timeline follows, the same in the report's JSON and in
/// every plot of it (a legend names them all).
pub const TIMELINE_OBJECTS: usize = 8;

/// The capacity timeline with the [`TIMELINE_OBJECTS`] largest dynamic objects
/// of `all` (the profile's [`crate::data_objects`], computed once by the caller).
pub fn capacity_series(p: &Profile, all: &crate::Objects) -> CapacitySeries {
    let mut sums: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for t in &p.timeline {
        let e = sums.entry(t.time_ns).or_default();
        e.0 += t.rss;
        e.1 += t.heap_live;
    }
    let time_ns: Vec<u64> = sums.keys().copied().collect();
    let objects = &all.list;
    let dynamic = |o: &crate::DataObject| {
        matches!(
            o.kind,
            crate::ObjectKind::Heap | crate::ObjectKind::Mmap | crate::ObjectKind::Group
        )
    };
    let top_idx = crate::top_by(objects, TIMELINE_OBJECTS, |o| {
        if dynamic(o) {
            o.peak_bytes
        } else {
            0.0
        }
    });
    let objects = (top_idx.iter().zip(all.series(p, &top_idx)))
        .map(|(&i, steps)| ObjectLive {
            name: objects[i].name.clone(),
            kind: objects[i].kind,
            pid: objects[i].pid,
            bytes: time_ns.iter().map(|&t| step_at(&steps, t)).collect(),
            steps,
        })
        .collect();
    let end_ns = p.meta.clock.duration_ns;
    CapacitySeries {
        rss: sums.values().map(|v| v.0).collect(),
        heap_live: sums.values().map(|v| v.1).collect(),
        time_ns,
        objects,
        regions: p
            .regions
            .iter()
            .filter(|r| r.depth == 0)
            .map(|r| {
                (
                    crate::region_label(r),
                    r.begin_ns,
                    r.end_ns.unwrap_or(end_ns),
                )
            })
            .collect(),
        end_ns,
    }
}

#[cfg(test)]
mod tests {
    use crate::Profile;
    use memlens_profile::{Allocation, Frame, TimelinePoint};

    /// Nine call sites each allocate one block, site k of k MiB, live from
    /// k ms to 20 ms; ticks every 5 ms.
    #[test]
    fn the_timeline_follows_the_largest_objects_at_each_tick() {
        const MIB: u64 = 1 << 20;
        let mut p = Profile::default();
        for k in 1..=9u64 {
            p.allocations.push(Allocation {
                pid: 1,
                kind: "malloc".into(),
                address: k << 32,
                size: k * MIB,
                usable_size: k * MIB,
                alloc_ns: k * 1_000_000,
                free_ns: Some(20_000_000),
                stack_id: k,
                est_count: 1.0,
                est_bytes: (k * MIB) as f64,
                ..Default::default()
            });
            let site = Frame {
                pid: 1,
                stack_id: k,
                function: "make".into(),
                file: "/src/m.c".into(),
                line: k as u32,
                ..Default::default()
            };
            p.stacks.insert((1, k), vec![site]);
        }
        p.timeline = (0..5u64)
            .map(|t| TimelinePoint {
                pid: 1,
                time_ns: t * 5_000_000,
                rss: 100 * MIB,
                ..Default::default()
            })
            .collect();
        let c = super::capacity_series(&p, &crate::data_objects(&p));
        assert_eq!(
            c.time_ns,
            [0, 5_000_000, 10_000_000, 15_000_000, 20_000_000]
        );
        // The eight largest, largest first: the 1 MiB site is left out.
        let names: Vec<&str> = c.objects.iter().map(|o| o.name.as_str()).collect();
        let expected: Vec<String> = (2..=9).rev().map(|k| format!("make (m.c:{k})")).collect();
        assert_eq!(names, expected);
        // Site 9 (9 MiB from 9 ms): not yet at 5 ms, live at 10 and 15 ms,
        // freed at 20 ms.
        let mib: Vec<f64> = c.objects[0].bytes.iter().map(|b| b / MIB as f64).collect();
        assert_eq!(mib, [0.0, 0.0, 9.0, 9.0, 0.0]);
        assert_eq!(c.rss, [100 * MIB; 5]);
    }

    /// A region that begins 5 ms after a tick of 113 MiB, just after 64 MiB
    /// were unmapped: its begin is its first tick inside, never above its peak.
    #[test]
    fn a_regions_rss_begin_is_read_inside_it() {
        const MIB: u64 = 1 << 20;
        let mut p = Profile {
            timeline: [(0, 113), (10, 39), (20, 38), (30, 38)]
                .map(|(ms, mib)| TimelinePoint {
                    pid: 1,
                    time_ns: ms * 1_000_000,
                    rss: mib * MIB,
                    ..Default::default()
                })
                .to_vec(),
            ..Profile::default()
        };
        let region = |name: &str, from_ms: u64, to_ms: u64| memlens_profile::Region {
            pid: 1,
            tid: 1,
            name: name.into(),
            begin_ns: from_ms * 1_000_000,
            end_ns: Some(to_ms * 1_000_000),
            ..Default::default()
        };
        // A damaged log's region that ends before it begins (it panicked).
        p.regions = vec![
            region("teardown", 5, 25),
            region("short", 21, 24),
            region("damaged", 25, 15),
        ];
        let regions = super::region_capacity(&p);
        let teardown = regions.iter().find(|r| r.name == "teardown").unwrap();
        assert_eq!(
            (
                teardown.rss_begin,
                teardown.rss_peak,
                teardown.rss_end,
                teardown.samples
            ),
            (39 * MIB, Some(39 * MIB), 38 * MIB, 2)
        );
        // No tick inside: no peak, and the tick before as its begin.
        let short = regions.iter().find(|r| r.name == "short").unwrap();
        assert_eq!((short.rss_begin, short.rss_peak), (38 * MIB, None));
        let damaged = regions.iter().find(|r| r.name == "damaged").unwrap();
        assert_eq!((damaged.rss_peak, damaged.samples), (None, 0));
    }
}

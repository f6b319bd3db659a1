//! One view across the ranks of a job (MPI): what each rank holds and does,
//! reduced to its spread over the ranks (sum, min, mean, max, imbalance =
//! max / mean, and the ranks of the min and max), as the multi-process views
//! of BSC's Extrae and of NMO read a job: which rank is the outlier, in which
//! object or region, and what the imbalance costs.
//!
//! A job is read one profile at a time: each rank is reduced to a
//! [`RankSummary`] (its objects, regions, counters and capacity on a common
//! time grid) and its profile dropped, so memory grows with ranks x distinct
//! objects, never with the job's events.

use crate::{region_label, ObjectKind, Profile};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// Bins of the capacity bands and the rank x time map.
pub const TIME_BINS: usize = 200;

/// A rank of the job: its MPI rank, the host it ran on and its processes.
#[derive(Clone, Debug, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct RankId {
    pub rank: u32,
    pub host: String,
    pub pids: Vec<u32>,
}

/// The time grid shared by every rank of a job: `bins` bins of `bin_ns`
/// from the job's start (ranks put on one time base first).
#[derive(Clone, Copy, Debug, Serialize, schemars::JsonSchema)]
pub struct TimeGrid {
    pub bin_ns: u64,
    pub bins: usize,
}

impl TimeGrid {
    /// A grid over `duration_ns`, its bins no shorter than the ranks' sampling
    /// interval (a bin without a tick would read as empty).
    pub fn over(duration_ns: u64, interval_ns: u64) -> TimeGrid {
        let bins = (duration_ns / interval_ns.max(1)).clamp(1, TIME_BINS as u64);
        TimeGrid {
            bin_ns: duration_ns.div_ceil(bins).max(1),
            bins: bins as usize,
        }
    }

    fn bin(&self, t: u64) -> usize {
        ((t / self.bin_ns) as usize).min(self.bins - 1)
    }
}

/// Everything a job view keeps of one rank. Serialized (`memlens report
/// --reduce` gathers the summaries of the ranks each process read) through
/// [`RankWire`]: JSON keys are strings, the maps' keys are not.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
#[serde(into = "RankWire", from = "RankWire")]
pub struct RankSummary {
    pub id: RankId,
    /// On the job's time base.
    pub start_ns: u64,
    pub duration_ns: u64,
    pub peak_rss: f64,
    /// The highest live heap (exact where every block was recorded); none
    /// when the runtime ran in none of its processes.
    pub heap_peak: Option<f64>,
    /// (kind, identity) -> its figures in this rank.
    pub objects: BTreeMap<(ObjectKind, String), RankObject>,
    /// Region name -> (instances, time inside, exact bytes moved if counted).
    pub regions: BTreeMap<String, (f64, f64, Option<f64>)>,
    /// Counter name -> (unit, total).
    pub counters: BTreeMap<String, (String, f64)>,
    /// The most resident set and live heap in each bin of the job's grid.
    pub rss: Vec<f64>,
    pub heap: Vec<f64>,
}

/// A data object's figures in one rank.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct RankObject {
    pub peak_bytes: f64,
    pub allocated_bytes: f64,
    /// The figures are sampled and scaled (blocks under --min-size).
    pub sampled: bool,
}

/// A [`RankSummary`] with its maps as lists.
#[derive(Serialize, serde::Deserialize)]
pub struct RankWire {
    id: RankId,
    start_ns: u64,
    duration_ns: u64,
    peak_rss: f64,
    heap_peak: Option<f64>,
    objects: Vec<(ObjectKind, String, RankObject)>,
    regions: Vec<(String, f64, f64, Option<f64>)>,
    counters: Vec<(String, String, f64)>,
    rss: Vec<f64>,
    heap: Vec<f64>,
}

impl From<RankSummary> for RankWire {
    fn from(s: RankSummary) -> RankWire {
        RankWire {
            id: s.id,
            start_ns: s.start_ns,
            duration_ns: s.duration_ns,
            peak_rss: s.peak_rss,
            heap_peak: s.heap_peak,
            objects: (s.objects.into_iter())
                .map(|((k, n), o)| (k, n, o))
                .collect(),
            regions: (s.regions.into_iter())
                .map(|(n, (i, t, b))| (n, i, t, b))
                .collect(),
            counters: (s.counters.into_iter())
                .map(|(n, (u, v))| (n, u, v))
                .collect(),
            rss: s.rss,
            heap: s.heap,
        }
    }
}

impl From<RankWire> for RankSummary {
    fn from(w: RankWire) -> RankSummary {
        RankSummary {
            id: w.id,
            start_ns: w.start_ns,
            duration_ns: w.duration_ns,
            peak_rss: w.peak_rss,
            heap_peak: w.heap_peak,
            objects: (w.objects.into_iter())
                .map(|(k, n, o)| ((k, n), o))
                .collect(),
            regions: (w.regions.into_iter())
                .map(|(n, i, t, b)| (n, (i, t, b)))
                .collect(),
            counters: (w.counters.into_iter())
                .map(|(n, u, v)| (n, (u, v)))
                .collect(),
            rss: w.rss,
            heap: w.heap,
        }
    }
}

/// The ranks in a loaded profile (one rank's run, or several ranks writing
/// into one directory): their summaries, with times shifted by `shift_ns`
/// onto the job's time base.
/// Separates an allocation site's label from its callers' in an object's
/// key across ranks (no symbol or file name holds a NUL).
const CALLER: char = '\0';

/// What an object is matched by across ranks. A heap block's or mapping's:
/// its allocation site and callers (up to a fixed depth), the same in
/// every rank whatever other sites a rank has, where its name is told apart
/// from those ([`job_view`] names it across the job). A thread's stack is
/// named by its tid, which no other rank shares: a rank's stacks are one
/// object; a library's variables are the library's (their count is the
/// same in every rank).
fn identity(p: &Profile, o: &crate::DataObject) -> String {
    match (o.kind, &o.site) {
        (ObjectKind::Stack, _) => "thread stacks (reserved)".to_string(),
        (ObjectKind::Heap | ObjectKind::Mmap, Some(site)) if o.name.starts_with(&site.label()) => {
            let mut key = site.label();
            for caller in crate::objects::site_callers(p, o.pid, o.stack_id) {
                key.push(CALLER);
                key.push_str(&caller);
            }
            key
        }
        _ => o.name.clone(),
    }
}

/// The names of objects across the job by their keys: a site alone under
/// its name is named by it, sites of one name with the callers that tell
/// them apart (as a rank's report names them).
fn job_names(keys: &[&(ObjectKind, String)]) -> HashMap<(ObjectKind, String), String> {
    // Per site: each key of it, with its callers.
    type Keys<'a> = Vec<(&'a String, Vec<String>)>;
    let mut by_site: BTreeMap<(ObjectKind, &str), Keys> = BTreeMap::new();
    for (kind, key) in keys {
        let mut parts = key.split(CALLER);
        let site = parts.next().unwrap_or_default();
        let callers = parts.map(str::to_string).collect();
        by_site
            .entry((*kind, site))
            .or_default()
            .push((key, callers));
    }
    let mut out = HashMap::new();
    for ((kind, site), same) in by_site {
        let chains: Vec<Vec<String>> = same.iter().map(|(_, c)| c.clone()).collect();
        let suffixes = match same.len() {
            1 => vec![String::new()],
            _ => crate::objects::caller_suffixes(&chains, String::clone),
        };
        for ((key, _), suffix) in same.into_iter().zip(suffixes) {
            out.insert((kind, key.clone()), format!("{site}{suffix}"));
        }
    }
    out
}

pub fn summarize_ranks(p: &Profile, host: &str, shift_ns: u64, grid: TimeGrid) -> Vec<RankSummary> {
    let mut by_rank: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for pr in &p.meta.processes {
        by_rank
            .entry(pr.rank.unwrap_or(0))
            .or_default()
            .push(pr.pid);
    }
    let rank_of: HashMap<u32, u32> = (by_rank.iter())
        .flat_map(|(&r, pids)| pids.iter().map(move |&pid| (pid, r)))
        .collect();
    let mut out: BTreeMap<u32, RankSummary> = by_rank
        .iter()
        .map(|(&rank, pids)| {
            let mut pids = pids.clone();
            pids.sort_unstable();
            pids.dedup();
            let procs = || {
                p.meta
                    .processes
                    .iter()
                    .filter(|x| x.rank.unwrap_or(0) == rank)
            };
            let start = procs().map(|x| x.start_ns).min().unwrap_or(0);
            let end = procs()
                .map(|x| x.end_ns.unwrap_or(p.meta.clock.duration_ns))
                .max()
                .unwrap_or(0);
            let heap_measured = procs().any(|x| !x.untracked);
            let exact_heap = procs()
                .filter_map(|x| x.heap_peak.as_ref())
                .map(|h| h.requested_bytes)
                .max();
            let summary = RankSummary {
                id: RankId {
                    rank,
                    host: host.to_string(),
                    pids,
                },
                start_ns: start + shift_ns,
                duration_ns: end.saturating_sub(start),
                peak_rss: 0.0,
                heap_peak: heap_measured.then(|| exact_heap.unwrap_or(0) as f64),
                objects: BTreeMap::new(),
                regions: BTreeMap::new(),
                counters: BTreeMap::new(),
                rss: vec![0.0; grid.bins],
                heap: vec![0.0; grid.bins],
            };
            (rank, summary)
        })
        .collect();

    // Capacity: each process's most in each bin, summed over the rank's
    // processes; the peaks from the ticks (or the exact heap peak).
    let mut bins: HashMap<(u32, usize), (f64, f64)> = HashMap::new();
    for t in &p.timeline {
        let Some(s) = rank_of.get(&t.pid).and_then(|r| out.get_mut(r)) else {
            continue;
        };
        s.peak_rss = s.peak_rss.max(t.rss as f64);
        if let Some(h) = &mut s.heap_peak {
            if !p
                .meta
                .processes
                .iter()
                .any(|x| x.pid == t.pid && x.heap_peak.is_some())
            {
                *h = h.max(t.heap_live as f64);
            }
        }
        let b = bins
            .entry((t.pid, grid.bin(t.time_ns + shift_ns)))
            .or_default();
        b.0 = b.0.max(t.rss as f64);
        b.1 = b.1.max(t.heap_live as f64);
    }
    // A bin without a tick of a process holds its last value, from its
    // first tick to its last.
    let mut by_pid: BTreeMap<u32, BTreeMap<usize, (f64, f64)>> = BTreeMap::new();
    for ((pid, bin), v) in bins {
        by_pid.entry(pid).or_default().insert(bin, v);
    }
    for (pid, series) in by_pid {
        let Some(s) = rank_of.get(&pid).and_then(|r| out.get_mut(r)) else {
            continue;
        };
        let (Some(&first), Some(&last)) = (series.keys().next(), series.keys().next_back()) else {
            continue;
        };
        let mut held = (0.0, 0.0);
        for bin in first..=last {
            held = series.get(&bin).copied().unwrap_or(held);
            s.rss[bin] += held.0;
            s.heap[bin] += held.1;
        }
    }

    // A system library's variables are one object per library: MPI's and
    // the C runtime's thousands of statics would otherwise be most of what
    // each rank keeps, and are the same in every rank.
    let listed = crate::listed_objects(p, &crate::data_objects(p));
    for o in listed.own.into_iter().chain(listed.libraries) {
        let Some(s) = rank_of.get(&o.pid).and_then(|r| out.get_mut(r)) else {
            continue;
        };
        let e = s.objects.entry((o.kind, identity(p, &o))).or_default();
        e.peak_bytes += o.peak_bytes;
        e.allocated_bytes += o.allocated_bytes;
        e.sampled |= o.provenance == crate::Provenance::SampledScaled;
    }
    for r in &p.regions {
        let Some(s) = rank_of.get(&r.pid).and_then(|x| out.get_mut(x)) else {
            continue;
        };
        let end = r.end_ns.unwrap_or_else(|| p.process_end(r.pid));
        let e = s
            .regions
            .entry(region_label(r))
            .or_insert((0.0, 0.0, Some(0.0)));
        e.0 += 1.0;
        e.1 += end.saturating_sub(r.begin_ns) as f64;
        e.2 = match (e.2, r.bytes_read, r.bytes_written) {
            (Some(b), Some(read), Some(written)) => Some(b + read as f64 + written as f64),
            _ => None,
        };
    }
    // Counters are a run's: they belong to its rank when the run is one rank.
    if let [(_, only)] = out.iter_mut().collect::<Vec<_>>().as_mut_slice() {
        for c in crate::counters_report(p) {
            only.counters.insert(c.name, (c.unit, c.total));
        }
    }
    out.into_values().collect()
}

/// A figure over the ranks of a job.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct Spread {
    /// Ranks where it is not zero.
    pub ranks: u32,
    pub sum: f64,
    pub min: f64,
    pub mean: f64,
    pub max: f64,
    /// max / mean: 1 when every rank has the same; the number of ranks when
    /// one rank has it all.
    pub imbalance: f64,
    pub min_rank: u32,
    pub max_rank: u32,
    /// Each rank's value, in the job's rank order (`report --per-rank`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_rank: Vec<f64>,
}

impl Spread {
    /// The spread of `values`, one per rank of `ranks` (0 where a rank has
    /// none); the values are kept when `per_rank`.
    pub fn of(values: Vec<f64>, ranks: &[RankId], per_rank: bool) -> Spread {
        let n = values.len().max(1) as f64;
        let sum: f64 = values.iter().sum();
        let mean = sum / n;
        let (mut min_i, mut max_i) = (0, 0);
        for (i, v) in values.iter().enumerate() {
            if *v < values[min_i] {
                min_i = i;
            }
            if *v > values[max_i] {
                max_i = i;
            }
        }
        let rank = |i: usize| ranks.get(i).map_or(0, |r| r.rank);
        Spread {
            ranks: values.iter().filter(|v| **v != 0.0).count() as u32,
            sum,
            min: values.get(min_i).copied().unwrap_or(0.0),
            mean,
            max: values.get(max_i).copied().unwrap_or(0.0),
            imbalance: if mean > 0.0 {
                values[max_i] / mean
            } else {
                1.0
            },
            min_rank: rank(min_i),
            max_rank: rank(max_i),
            per_rank: if per_rank { values } else { Vec::new() },
        }
    }
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct ObjectAcrossRanks {
    pub kind: ObjectKind,
    pub name: String,
    pub peak_bytes: Spread,
    pub allocated_bytes: Spread,
    /// Sampled and scaled in some rank: its figures are estimates.
    pub sampled: bool,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct RegionAcrossRanks {
    pub name: String,
    pub instances: Spread,
    /// Nanoseconds inside the region.
    pub time_ns: Spread,
    /// What the imbalance costs if the ranks meet after the region: every
    /// rank's wait for the slowest, summed (rank-nanoseconds).
    pub wait_ns: f64,
    /// Exact bytes read and written inside it (instrumented builds).
    pub bytes: Option<Spread>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct CounterAcrossRanks {
    pub name: String,
    pub unit: String,
    pub total: Spread,
}

/// A band over the ranks at each bin of the time grid.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct Band {
    /// Start of each bin on the job's time base.
    pub time_ns: Vec<u64>,
    pub min: Vec<f64>,
    pub mean: Vec<f64>,
    pub max: Vec<f64>,
}

/// The job seen across its ranks.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct JobView {
    pub ranks: Vec<RankId>,
    pub hosts: Vec<String>,
    /// How the ranks' times were put on one base.
    pub time_base: String,
    pub grid: TimeGrid,
    pub duration_ns: Spread,
    pub peak_rss: Spread,
    /// None when no rank ran the runtime.
    pub heap_peak: Option<Spread>,
    /// By the sum of their peaks over the ranks, largest first.
    pub objects: Vec<ObjectAcrossRanks>,
    /// By the time spent in them, longest first.
    pub regions: Vec<RegionAcrossRanks>,
    pub counters: Vec<CounterAcrossRanks>,
    pub rss: Band,
    pub heap: Band,
    /// Resident set and live heap of each rank in each bin (the rank x time
    /// map), in rank order (a JSON report lists them with `--per-rank`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rss_by_rank: Vec<Vec<f64>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub heap_by_rank: Vec<Vec<f64>>,
}

/// The spread over `summaries` (in rank order) of each figure; objects,
/// regions and counters are matched by name across ranks.
pub fn job_view(
    mut summaries: Vec<RankSummary>,
    grid: TimeGrid,
    time_base: String,
    per_rank: bool,
    top: usize,
) -> JobView {
    summaries.sort_by(|a, b| (a.id.rank, &a.id.host).cmp(&(b.id.rank, &b.id.host)));
    let ranks: Vec<RankId> = summaries.iter().map(|s| s.id.clone()).collect();
    let spread = |values: Vec<f64>| Spread::of(values, &ranks, per_rank);
    let each = |f: &dyn Fn(&RankSummary) -> f64| summaries.iter().map(f).collect::<Vec<f64>>();
    let mut hosts: Vec<String> = ranks.iter().map(|r| r.host.clone()).collect();
    hosts.sort();
    hosts.dedup();

    let mut object_keys: Vec<&(ObjectKind, String)> =
        summaries.iter().flat_map(|s| s.objects.keys()).collect();
    object_keys.sort();
    object_keys.dedup();
    let names = job_names(&object_keys);
    let mut objects: Vec<ObjectAcrossRanks> = object_keys
        .into_iter()
        .map(|key| {
            let of =
                |figure: fn(&RankObject) -> f64| each(&|s| s.objects.get(key).map_or(0.0, figure));
            ObjectAcrossRanks {
                kind: key.0,
                name: names.get(key).cloned().unwrap_or_else(|| key.1.clone()),
                peak_bytes: spread(of(|o| o.peak_bytes)),
                allocated_bytes: spread(of(|o| o.allocated_bytes)),
                sampled: (summaries.iter()).any(|s| s.objects.get(key).is_some_and(|o| o.sampled)),
            }
        })
        .collect();
    objects.sort_by(|a, b| b.peak_bytes.sum.total_cmp(&a.peak_bytes.sum));
    objects.truncate(top);

    let mut region_names: Vec<&String> = summaries.iter().flat_map(|s| s.regions.keys()).collect();
    region_names.sort();
    region_names.dedup();
    let mut regions: Vec<RegionAcrossRanks> = region_names
        .into_iter()
        .map(|name| {
            let time = each(&|s| s.regions.get(name).map_or(0.0, |r| r.1));
            let max = time.iter().copied().fold(0.0, f64::max);
            let counted = summaries
                .iter()
                .all(|s| s.regions.get(name).is_none_or(|r| r.2.is_some()));
            RegionAcrossRanks {
                name: name.clone(),
                instances: spread(each(&|s| s.regions.get(name).map_or(0.0, |r| r.0))),
                wait_ns: time.iter().map(|t| max - t).sum(),
                time_ns: spread(time),
                bytes: counted.then(|| {
                    spread(each(&|s| {
                        s.regions.get(name).and_then(|r| r.2).unwrap_or(0.0)
                    }))
                }),
            }
        })
        .collect();
    regions.sort_by(|a, b| b.time_ns.sum.total_cmp(&a.time_ns.sum));

    let mut counter_names: Vec<(&String, &String)> = summaries
        .iter()
        .flat_map(|s| s.counters.iter().map(|(n, (unit, _))| (n, unit)))
        .collect();
    counter_names.sort();
    counter_names.dedup_by(|a, b| a.0 == b.0);
    let counters = counter_names
        .into_iter()
        .map(|(name, unit)| CounterAcrossRanks {
            name: name.clone(),
            unit: unit.clone(),
            total: spread(each(&|s| s.counters.get(name).map_or(0.0, |c| c.1))),
        })
        .collect();

    let band = |series: &dyn Fn(&RankSummary) -> &Vec<f64>| {
        let mut b = Band::default();
        for bin in 0..grid.bins {
            let values: Vec<f64> = summaries.iter().map(|s| series(s)[bin]).collect();
            let n = values.len().max(1) as f64;
            b.time_ns.push(bin as u64 * grid.bin_ns);
            b.min.push(
                values
                    .iter()
                    .copied()
                    .fold(f64::INFINITY, f64::min)
                    .min(f64::MAX),
            );
            b.mean.push(values.iter().sum::<f64>() / n);
            b.max.push(values.iter().copied().fold(0.0, f64::max));
        }
        b
    };
    let heap_measured = summaries.iter().any(|s| s.heap_peak.is_some());
    JobView {
        hosts,
        time_base,
        grid,
        duration_ns: spread(each(&|s| s.duration_ns as f64)),
        peak_rss: spread(each(&|s| s.peak_rss)),
        heap_peak: heap_measured.then(|| spread(each(&|s| s.heap_peak.unwrap_or(0.0)))),
        objects,
        regions,
        counters,
        rss: band(&|s| &s.rss),
        heap: band(&|s| &s.heap),
        rss_by_rank: summaries.iter().map(|s| s.rss.clone()).collect(),
        heap_by_rank: summaries.iter().map(|s| s.heap.clone()).collect(),
        ranks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(rank: u32, site_mib: f64) -> RankSummary {
        let grid = TimeGrid::over(1000, 1);
        let mut objects = BTreeMap::new();
        objects.insert(
            (ObjectKind::Heap, "main (app.c:9)".to_string()),
            RankObject {
                peak_bytes: site_mib,
                allocated_bytes: site_mib,
                sampled: false,
            },
        );
        let mut regions = BTreeMap::new();
        regions.insert("solve".to_string(), (1.0, 100.0 * (rank + 1) as f64, None));
        RankSummary {
            id: RankId {
                rank,
                host: "h".into(),
                pids: vec![100 + rank],
            },
            start_ns: 0,
            duration_ns: 1000,
            peak_rss: site_mib,
            heap_peak: Some(site_mib),
            objects,
            regions,
            counters: BTreeMap::new(),
            rss: vec![site_mib; grid.bins],
            heap: vec![0.0; grid.bins],
        }
    }

    #[test]
    fn spread_names_the_outlier_and_the_cost_of_imbalance() {
        // Rank r holds (r + 1) x 16 at one site, listed out of order.
        let summaries = [2, 0, 3, 1]
            .map(|r| rank(r, 16.0 * (r + 1) as f64))
            .to_vec();
        let v = job_view(
            summaries,
            TimeGrid::over(1000, 1),
            "one host".into(),
            true,
            10,
        );
        let o = &v.objects[0].peak_bytes;
        assert_eq!((o.min, o.max, o.mean, o.sum), (16.0, 64.0, 40.0, 160.0));
        assert_eq!((o.min_rank, o.max_rank, o.ranks), (0, 3, 4));
        assert!((o.imbalance - 1.6).abs() < 1e-12);
        assert_eq!(o.per_rank, [16.0, 32.0, 48.0, 64.0]);
        // Region times 100..400: the others wait 300 + 200 + 100 for rank 3.
        let r = &v.regions[0];
        assert_eq!((r.time_ns.max_rank, r.wait_ns), (3, 600.0));
        assert!(r.bytes.is_none(), "not instrumented: no bytes");
        assert_eq!(
            (v.rss.min[0], v.rss.max[0], v.rss.mean[0]),
            (16.0, 64.0, 40.0)
        );
        assert_eq!(v.rss_by_rank.len(), 4);
    }

    #[test]
    fn a_site_is_one_object_across_ranks_whatever_other_sites_a_rank_has() {
        // Both ranks allocate 1000 bytes at alloc (g.cpp:107) from
        // GenerateProblem; rank 1 also 500 at the same line from Other, so
        // its report names both by their callers.
        let mut p = Profile::default();
        let frame = |pid: u32, stack_id: u64, depth: u32, function: &str, line: u32| {
            memlens_profile::Frame {
                pid,
                stack_id,
                depth,
                function: function.into(),
                file: "/src/g.cpp".into(),
                line,
                ..Default::default()
            }
        };
        let mut block = |pid: u32, stack_id: u64, caller: &str, size: u64| {
            p.stacks.insert(
                (pid, stack_id),
                vec![
                    frame(pid, stack_id, 0, "alloc", 107),
                    frame(pid, stack_id, 1, caller, 50),
                    frame(pid, stack_id, 2, "main", 137),
                ],
            );
            p.allocations.push(memlens_profile::Allocation {
                pid,
                kind: "malloc".into(),
                address: 0x1000 * stack_id,
                size,
                usable_size: size,
                alloc_ns: 10,
                stack_id,
                est_count: 1.0,
                est_bytes: size as f64,
                ..Default::default()
            });
        };
        block(100, 1, "GenerateProblem", 1000);
        block(101, 1, "GenerateProblem", 1000);
        block(101, 2, "Other", 500);
        for (pid, rank) in [(100, 0), (101, 1)] {
            p.meta.processes.push(memlens_profile::Process {
                pid,
                rank: Some(rank),
                end_ns: Some(1000),
                ..Default::default()
            });
        }
        let names: Vec<String> = (crate::data_objects(&p).list.iter())
            .filter(|o| o.pid == 101)
            .map(|o| o.name.clone())
            .collect();
        assert!(names.iter().all(|n| n.contains(" ← ")), "{names:?}");
        let grid = TimeGrid::over(1000, 1);
        let v = job_view(
            summarize_ranks(&p, "h", 0, grid),
            grid,
            String::new(),
            true,
            10,
        );
        let by_name = |n: &str| v.objects.iter().find(|o| o.name == n);
        let generate = by_name("alloc (g.cpp:107) ← GenerateProblem (g.cpp:50)").unwrap();
        assert_eq!(generate.peak_bytes.per_rank, [1000.0, 1000.0]);
        assert_eq!(generate.peak_bytes.imbalance, 1.0);
        let other = by_name("alloc (g.cpp:107) ← Other (g.cpp:50)").unwrap();
        assert_eq!(other.peak_bytes.per_rank, [0.0, 500.0]);
        assert_eq!(v.objects.len(), 2, "{:?}", v.objects);
    }

    #[test]
    fn a_summary_crosses_processes_unchanged() {
        let s = rank(2, 48.0);
        let back: RankSummary = serde_json::from_slice(&serde_json::to_vec(&s).unwrap()).unwrap();
        assert_eq!(format!("{back:?}"), format!("{s:?}"));
    }

    #[test]
    fn an_object_of_one_rank_alone_counts_zero_on_the_others() {
        let mut summaries = vec![rank(0, 16.0), rank(1, 16.0)];
        summaries[0].objects.insert(
            (ObjectKind::Heap, "read_input (io.c:3)".into()),
            RankObject {
                peak_bytes: 8.0,
                allocated_bytes: 8.0,
                sampled: true,
            },
        );
        let v = job_view(summaries, TimeGrid::over(1000, 1), String::new(), false, 10);
        let input = v
            .objects
            .iter()
            .find(|o| o.name.starts_with("read_input"))
            .unwrap();
        assert!(input.sampled, "sampled in rank 0");
        assert!(!v
            .objects
            .iter()
            .any(|o| o.name.starts_with("main") && o.sampled));
        let s = &input.peak_bytes;
        assert_eq!(
            (s.ranks, s.min, s.max, s.imbalance, s.max_rank),
            (1, 0.0, 8.0, 2.0, 0)
        );
        assert!(s.per_rank.is_empty(), "per-rank values only when asked");
    }
}

//! Folding (BSC memory tools, their Folding tool; docs/references.md): the samples of every instance of a
//! repeated region mapped onto one normalised instance, so a run sampled
//! coarsely still shows what happens inside one iteration: which objects and
//! code lines it touches at each point of the iteration, and at what rate.
//!
//! Each instance's samples (of its own thread) get a phase in [0, 1): their
//! time from the instance's start over its duration. Instances far from the
//! typical duration are left out, as the Folding tool prunes outliers, and
//! counted: outside the median +- 3.5 robust standard deviations (1.4826 x the
//! median absolute deviation, which up to half the instances being disturbed
//! does not move), but never closer than 5% nor further than half or twice the
//! median. An instance the scheduler preempted for a slice is longer by the
//! slice, and folding it would squeeze its phases. Rates per phase bin are sampled
//! and scaled: samples x period over the bin's share of the mean duration.

mod period;

use crate::access::{attribute, location_label, ALL_THREADS};
use crate::{Objects, Profile};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::HashMap;

/// A region is folded unasked only with at least this many instances.
pub const MIN_INSTANCES: usize = 8;

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct FoldedBin {
    /// Phase range [from, to) of the normalised instance.
    pub from: f64,
    pub to: f64,
    pub samples: u64,
    pub store_samples: u64,
    /// Sampled and scaled: samples x period / (instances x bin time).
    pub est_accesses_per_s: f64,
    pub est_bytes_per_s: f64,
    /// Most sampled objects in the bin.
    pub objects: Vec<ObjectInBin>,
    /// Most sampled source line in the bin.
    pub location: Option<String>,
    /// Most sampled calling context in the bin, access first (empty when
    /// the samples carry none).
    pub context: Vec<String>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct ObjectInBin {
    pub name: String,
    pub samples: u64,
    /// Mean position of the samples in the object's range (0: its start, 1:
    /// its end): the folded address picture in one number.
    pub mean_offset: f64,
}

/// One sample placed in the folded instance (for the plot).
#[derive(Clone, Copy, Debug)]
pub struct FoldedPoint {
    pub phase: f32,
    pub sample: usize,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Folding {
    /// How the instances were marked: an annotated region, or a detected period.
    pub how: String,
    pub region: String,
    pub pid: u32,
    pub instances: u64,
    /// Instances folded (the others' durations were outliers).
    pub folded: u64,
    pub mean_ns: f64,
    pub median_ns: u64,
    pub samples: u64,
    pub period: u64,
    /// Exact accesses per folded instance (instrumented builds), and the
    /// folded estimate of the same (samples x period / instances).
    pub exact_accesses_per_instance: Option<f64>,
    pub est_accesses_per_instance: f64,
    pub bins: Vec<FoldedBin>,
    #[serde(skip)]
    pub points: Vec<FoldedPoint>,
}

impl Folding {
    /// What was folded, for titles: "region NAME" or "period of ~N accesses".
    pub fn label(&self) -> String {
        if self.how == ANNOTATED {
            format!("region {}", self.region)
        } else {
            self.region.clone()
        }
    }

    /// How to fold the same again.
    pub fn by(&self) -> FoldBy<'_> {
        if self.how == ANNOTATED {
            FoldBy::Region(Some(&self.region))
        } else {
            FoldBy::DetectedPeriod
        }
    }
}

const ANNOTATED: &str = "annotated region";

/// One finished instance of a region: (begin, end, tid), tid ALL_THREADS
/// for a phase.
type Instance = (u64, u64, u32);

/// The region to fold: `name` if given, else the one with the most instances
/// in one process; with its pid and instances.
fn pick_region(p: &Profile, name: Option<&str>) -> Result<(String, u32, Vec<Instance>), String> {
    let mut by_region: HashMap<(&str, u32), Vec<Instance>> = HashMap::new();
    for r in &p.regions {
        if name.is_some_and(|n| n != r.name) {
            continue;
        }
        if let Some(end) = r.end_ns.filter(|&e| e > r.begin_ns) {
            by_region
                .entry((r.name.as_str(), r.pid))
                .or_default()
                .push((r.begin_ns, end, region_thread(r)));
        }
    }
    let best = by_region
        .into_iter()
        .max_by(|a, b| a.1.len().cmp(&b.1.len()).then(b.0.cmp(&a.0)));
    match best {
        // A region named by the user is folded however few its instances.
        Some(((region, pid), instances)) if instances.len() >= MIN_INSTANCES || name.is_some() => {
            Ok((region.to_string(), pid, instances))
        }
        Some(((region, _), instances)) => Err(format!(
            "region {region} has {} finished instances; folding needs {MIN_INSTANCES} or more",
            instances.len()
        )),
        None => Err(match name {
            Some(n) => format!("no finished instance of region {n:?} in this profile"),
            None => "no annotated region: mark the repeated iteration with memlens_region_begin/end (README, Annotations)".into(),
        }),
    }
}

/// The thread whose samples an instance of region `r` folds: a phase
/// (process-wide, counted over every thread) folds every thread's.
fn region_thread(r: &memlens_profile::Region) -> u32 {
    if r.process_wide {
        ALL_THREADS
    } else {
        r.tid
    }
}

/// What marks the instances to fold.
#[derive(Clone, Copy, Debug)]
pub enum FoldBy<'a> {
    /// An annotated region: this one, or the most repeated.
    Region(Option<&'a str>),
    /// The period found in the busiest thread's samples (no annotation).
    DetectedPeriod,
}

impl<'a> FoldBy<'a> {
    /// From the command line: `--fold REGION` or `--fold-detect`.
    pub fn new(region: Option<&'a str>, detect: bool) -> Self {
        if detect {
            FoldBy::DetectedPeriod
        } else {
            FoldBy::Region(region)
        }
    }
}

/// Folds the instances `by` marks into `bins` phase bins; with `points`,
/// keeps every folded sample's phase too (for the plot; 16 bytes a sample).
pub fn fold(
    p: &Profile,
    objects: &Objects,
    by: FoldBy,
    bins: usize,
    points: bool,
) -> Result<Folding, String> {
    if p.samples.is_empty() {
        return Err("no access samples to fold".into());
    }
    let period = p.meta.settings.access_period.max(1);
    let (region, pid, mut instances, how) = instances_to_fold(p, objects, by, period)?;
    let all = instances.len() as u64;
    let mut durations: Vec<u64> = instances.iter().map(|(b, e, _)| e - b).collect();
    durations.sort_unstable();
    let median = durations[durations.len() / 2];
    let typical = typical_durations(&durations);
    instances.retain(|(b, e, _)| typical.contains(&(e - b)));
    let mean_ns = instances
        .iter()
        .map(|(b, e, _)| (e - b) as f64)
        .sum::<f64>()
        / instances.len() as f64;
    // Each thread's instances in time order: a sample finds its own by search.
    let mut by_thread: FxHashMap<u32, Vec<(u64, u64)>> = FxHashMap::default();
    for &(b, e, tid) in &instances {
        by_thread.entry(tid).or_default().push((b, e));
    }
    for v in by_thread.values_mut() {
        v.sort_unstable();
    }
    let exact: Option<f64> = {
        let rows: Vec<_> = p
            .regions
            .iter()
            .filter(|r| r.pid == pid && r.name == region)
            .filter(|r| {
                by_thread.get(&region_thread(r)).is_some_and(|v| {
                    v.binary_search(&(r.begin_ns, r.end_ns.unwrap_or(0)))
                        .is_ok()
                })
            })
            .collect();
        mean_accesses(&rows)
    };
    let bins = bins.max(1);
    let mut tallies = vec![Tally::default(); bins];
    let keep_points = points;
    let mut points = Vec::new();
    attribute(p, objects, |i, hit, _| {
        let s = &p.samples[i];
        if s.pid != pid {
            return;
        }
        let Some(list) = by_thread
            .get(&s.tid)
            .or_else(|| by_thread.get(&ALL_THREADS))
        else {
            return;
        };
        // The last instance starting at or before the sample.
        let at = list.partition_point(|&(b, _)| b <= s.time_ns);
        let Some(&(b, e)) = at.checked_sub(1).map(|k| &list[k]) else {
            return;
        };
        if s.time_ns >= e {
            return;
        }
        let phase = (s.time_ns - b) as f64 / (e - b) as f64;
        let t = &mut tallies[((phase * bins as f64) as usize).min(bins - 1)];
        t.samples += 1;
        t.stores += s.is_store as u64;
        t.bytes += u64::from(s.size);
        let o = t.objects.entry(hit.map(|h| h.object)).or_default();
        o.0 += 1;
        o.1 += hit.map_or(0.0, |h| {
            s.address.saturating_sub(h.start) as f64 / h.end.saturating_sub(h.start).max(1) as f64
        });
        *t.pcs.entry(s.pc).or_default() += 1;
        if s.stack_id != 0 {
            *t.contexts.entry(s.stack_id).or_default() += 1;
        }
        if keep_points {
            points.push(FoldedPoint {
                phase: phase as f32,
                sample: i,
            });
        }
    });
    // Seconds one bin of one instance lasts, over all folded instances.
    let bin_seconds = mean_ns * 1e-9 / bins as f64 * instances.len() as f64;
    let out_bins: Vec<FoldedBin> = tallies
        .into_iter()
        .enumerate()
        .map(|(k, t)| folded_bin(p, objects, pid, (k, bins), t, bin_seconds, period))
        .collect();
    let samples: u64 = out_bins.iter().map(|b| b.samples).sum();
    Ok(Folding {
        how,
        region,
        pid,
        instances: all,
        folded: instances.len() as u64,
        mean_ns,
        median_ns: median,
        samples,
        period,
        exact_accesses_per_instance: exact,
        est_accesses_per_instance: samples as f64 * period as f64 / instances.len() as f64,
        bins: out_bins,
        points,
    })
}

/// The instances to fold (begin, end, thread), the region they are
/// instances of, its process, and how they were found: an annotated
/// region's, or periods detected in the samples.
#[allow(clippy::type_complexity)]
fn instances_to_fold(
    p: &Profile,
    objects: &Objects,
    by: FoldBy,
    period: u64,
) -> Result<(String, u32, Vec<(u64, u64, u32)>, String), String> {
    Ok(match by {
        FoldBy::Region(name) => {
            let (region, pid, instances) = pick_region(p, name)?;
            (region, pid, instances, ANNOTATED.to_string())
        }
        FoldBy::DetectedPeriod => {
            let d = period::detect(p, objects)?;
            period::agrees_with_annotation(p, &d)?;
            // Instances are periods of the thread's progress, on the wall
            // clock: one the thread was preempted or slowed in is longer,
            // and pruned if far off.
            let count = ((d.end - d.start) as f64 / d.period_samples).floor() as u64;
            let at = |k: u64| (d.progress).wall(d.start as f64 + k as f64 * d.period_samples);
            let instances = (0..count).map(|k| (at(k), at(k + 1), d.tid)).collect();
            let accesses = d.period_samples * period as f64;
            let how = format!(
                "period detected in thread {}'s samples, counted in samples rather than time so that an iteration the machine slowed or preempted keeps its place (autocorrelation, then epoch folding: chi2 {:.0} over {} degrees of freedom, the run's halves fold alike at r = {:.2} up to a phase shift): every {:.1} samples, ~{:.0} accesses at 1 sample per {} accesses of a class; phase 0 is its first sample, not an iteration's start",
                d.tid, d.chi2, d.degrees_of_freedom, d.agreement, d.period_samples, accesses, period
            );
            (
                format!("period of ~{accesses:.0} accesses"),
                d.pid,
                instances,
                how,
            )
        }
    })
}

/// What the samples in one bin of the folded instance hold.
#[derive(Default, Clone)]
struct Tally {
    samples: u64,
    stores: u64,
    bytes: u64,
    /// Samples and summed position in the object, per object.
    objects: FxHashMap<Option<usize>, (u64, f64)>,
    pcs: FxHashMap<u64, u64>,
    contexts: FxHashMap<u64, u64>,
}

/// Bin `k` of `bins`: its samples' rates over the time it lasts in all
/// folded instances (`bin_seconds`), its top objects, code and context.
fn folded_bin(
    p: &Profile,
    objects: &Objects,
    pid: u32,
    (k, bins): (usize, usize),
    t: Tally,
    bin_seconds: f64,
    period: u64,
) -> FoldedBin {
    let mut objs: Vec<(Option<usize>, (u64, f64))> = t.objects.into_iter().collect();
    objs.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.0.cmp(&b.0)));
    objs.truncate(3);
    let location = t
        .pcs
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        .map(|(pc, _)| location_label(p, pid, pc));
    let context = (t.contexts.into_iter())
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        .map_or_else(Vec::new, |(id, _)| {
            crate::access::context_frames(p, pid, id)
        });
    FoldedBin {
        from: k as f64 / bins as f64,
        to: (k + 1) as f64 / bins as f64,
        samples: t.samples,
        store_samples: t.stores,
        est_accesses_per_s: t.samples as f64 * period as f64 / bin_seconds,
        est_bytes_per_s: t.bytes as f64 * period as f64 / bin_seconds,
        objects: objs
            .into_iter()
            .map(|(o, (n, offsets))| ObjectInBin {
                name: objects.name_of(o),
                samples: n,
                mean_offset: offsets / n as f64,
            })
            .collect(),
        location,
        context,
    }
}

/// The range of durations folded, from the sorted durations (see the module's
/// comment).
fn typical_durations(sorted: &[u64]) -> std::ops::RangeInclusive<u64> {
    let median = sorted[sorted.len() / 2] as f64;
    let mut deviations: Vec<f64> = sorted.iter().map(|&d| (d as f64 - median).abs()).collect();
    deviations.sort_unstable_by(f64::total_cmp);
    let robust_sd = 1.4826 * deviations[deviations.len() / 2];
    let half_width = (3.5 * robust_sd).clamp(0.05 * median, median);
    let lo = (median - half_width).max(median / 2.0);
    let hi = (median + half_width).min(median * 2.0);
    lo.ceil() as u64..=hi.floor() as u64
}

/// The mean exact accesses (loads and stores) of region instances; None
/// without instances or where one lacks its counts. A damaged log's counts
/// saturate rather than overflow.
fn mean_accesses(rows: &[&memlens_profile::Region]) -> Option<f64> {
    let sum = (rows.iter()).try_fold(0u64, |sum, r| {
        Some(sum.saturating_add(r.loads?.saturating_add(r.stores?)))
    })?;
    (!rows.is_empty()).then(|| sum as f64 / rows.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::{mean_accesses, typical_durations};

    #[test]
    fn a_phase_folds_every_threads_samples_against_every_threads_counts() {
        // Ten instances of a phase opened by thread 1, each 1 000 ns, in
        // which threads 1 and 2 make 100 loads each (counted over the
        // process: 200), sampled 1 in 10.
        let mut p = crate::Profile::default();
        p.meta.settings.access_period = 10;
        for k in 0..10u64 {
            let begin = 10_000 + 2_000 * k;
            p.regions.push(memlens_profile::Region {
                pid: 1,
                tid: 1,
                name: "step".into(),
                begin_ns: begin,
                end_ns: Some(begin + 1_000),
                process_wide: true,
                loads: Some(200),
                stores: Some(0),
                ..Default::default()
            });
            for i in 0..20u64 {
                p.samples.push(memlens_profile::SampleCore {
                    pid: 1,
                    tid: 1 + (i % 2) as u32,
                    time_ns: begin + 50 * i,
                    address: 0x1000 + 8 * i,
                    size: 8,
                    ..Default::default()
                });
            }
        }
        let objects = crate::data_objects(&p);
        let f = super::fold(&p, &objects, super::FoldBy::Region(Some("step")), 4, false).unwrap();
        assert_eq!(f.exact_accesses_per_instance, Some(200.0));
        // Both threads' samples: 20 an instance, 200 accesses (one thread's
        // alone made it 100, -50%).
        assert_eq!(f.est_accesses_per_instance, 200.0);
    }

    #[test]
    fn damaged_counts_saturate_in_the_mean_accesses() {
        let row = |loads, stores| memlens_profile::Region {
            loads: Some(loads),
            stores: Some(stores),
            ..Default::default()
        };
        let (a, b) = (row(300, 100), row(500, 100));
        assert_eq!(mean_accesses(&[&a, &b]), Some(500.0));
        let damaged = row(u64::MAX, 7);
        assert_eq!(mean_accesses(&[&damaged, &a]), Some(u64::MAX as f64 / 2.0));
        let uncounted = memlens_profile::Region::default();
        assert_eq!(mean_accesses(&[&a, &uncounted]), None);
        assert_eq!(mean_accesses(&[]), None);
    }

    #[test]
    fn preempted_instances_fall_outside_the_typical_durations() {
        // 3.7 ms iterations within a few percent, a third of them lengthened
        // by scheduler slices of 0.4 to 3 ms.
        let mut d: Vec<u64> = (0..16).map(|i| 3_600_000 + i * 12_000).collect();
        d.extend([
            4_000_000, 4_300_000, 4_900_000, 5_500_000, 6_100_000, 6_700_000,
        ]);
        d.extend([2_400_000, 9_000_000]);
        d.sort_unstable();
        let typical = typical_durations(&d);
        // The clean ones are kept, the 0.4 ms slice is within the spread (8%),
        // the longer slices and the short outlier are left out.
        let kept: Vec<u64> = d.iter().copied().filter(|x| typical.contains(x)).collect();
        let mut expected: Vec<u64> = (0..16).map(|i| 3_600_000 + i * 12_000).collect();
        expected.push(4_000_000);
        assert_eq!(kept, expected);
        // Identical durations (a detected period) are all kept.
        assert_eq!(typical_durations(&[500; 9]), 475..=525);
        // A loop whose iterations really vary keeps them, from half the median
        // (1100) to twice it.
        let wide: Vec<u64> = (1..=20).map(|i| i * 100).collect();
        let typical = typical_durations(&wide);
        assert_eq!((typical.start(), typical.end()), (&550, &2200));
    }
}

//! The period of a loop nobody annotated, from the busiest thread's samples:
//! each sample is a point of the thread's progress labelled by what it
//! touched (object, load or store). A repeating loop makes those labels recur
//! with its period:
//!
//! 1. coarse: the autocorrelation of the labels' counts per progress bin (by
//!    FFT) peaks at the period's lag; the shortest lag that reaches most of
//!    the highest peak is the fundamental, not a multiple;
//! 2. fine: epoch folding (as pulsar timing searches periods in sparse event
//!    times): around the coarse period, the trial period whose fold separates
//!    the labels into phases most (the largest chi-square against label and
//!    phase being independent) wins. A bin of the coarse grid is too wide to
//!    fold thousands of iterations in phase; the fine search resolves it.
//!
//! Both run on the thread's progress, not on time: samples are taken every
//! so many accesses, so the k-th sample marks k periods' worth of the
//! thread's accesses, and an iteration doing the same work spans the same
//! number of samples however fast it runs. On time, a machine that slows the
//! loop for part of the run (another process on the core, a busier
//! neighbour: on this project's VM a test loop went from 35 to 62 us
//! iterations halfway through) or preempts it puts every later iteration at
//! another phase, and no fixed period folds the run. The instances found are
//! mapped back to wall time ([`Progress`]).
//!
//! A loop whose iterations do different amounts of work drifts out of phase
//! over the run, and the annotated region (`memlens_region_begin`) is the
//! remedy the report names.

use crate::access::attribute;
use crate::{Objects, Profile};
use rustfft::{num_complex::Complex, FftPlanner};
use std::collections::HashMap;

/// Labels followed: the most sampled ones.
const MAX_LABELS: usize = 8;
/// Progress bins of the coarse search (fewer when the thread has fewer
/// samples: a bin is at least one sample).
const BINS: usize = 1 << 14;
/// A period must repeat this often in the run: a run that merely changes
/// over time (setup, then work) also sorts its labels by phase when folded
/// at a period a few times shorter than itself.
const MIN_PERIODS: usize = 32;
/// How alike the folds of the run's two halves must be (correlation).
const MIN_AGREEMENT: f64 = 0.5;
/// Phase bins and most trial periods of the fine search.
const PHASES: usize = 16;
const MAX_TRIALS: usize = 20_000;
/// Samples the fine search folds (the run's first ones).
const FINE_SAMPLES: usize = 50_000;

/// A thread's progress: its samples in time order, the k-th at progress k.
/// Between two samples progress is interpolated linearly in time.
#[derive(Clone, Debug, Default)]
pub struct Progress {
    times: Vec<u64>,
}

impl Progress {
    /// From the thread's sample times, in order.
    pub fn new(times: Vec<u64>) -> Progress {
        Progress { times }
    }

    /// The progress at wall time `wall` (clamped to the first and last sample).
    pub fn at(&self, wall: u64) -> f64 {
        let i = self.times.partition_point(|&t| t <= wall);
        match (i.checked_sub(1), self.times.get(i)) {
            (None, _) => 0.0,
            (Some(last), None) => last as f64,
            (Some(k), Some(&next)) => {
                let from = self.times[k];
                k as f64 + (wall - from) as f64 / (next - from) as f64
            }
        }
    }

    /// The wall time of progress `x` (clamped to the first and last sample).
    pub fn wall(&self, x: f64) -> u64 {
        let (Some(&first), Some(&last)) = (self.times.first(), self.times.last()) else {
            return 0;
        };
        if x <= 0.0 {
            return first;
        }
        let k = x.floor() as usize;
        match (self.times.get(k), self.times.get(k + 1)) {
            (Some(&from), Some(&to)) => from + ((to - from) as f64 * x.fract()) as u64,
            _ => last,
        }
    }
}

pub struct Detected {
    pub pid: u32,
    pub tid: u32,
    /// The period, in the thread's samples.
    pub period_samples: f64,
    /// Progress of the first and last sample followed.
    pub start: u64,
    pub end: u64,
    pub chi2: f64,
    pub degrees_of_freedom: usize,
    /// Correlation of the two halves' folds at their best phase shift.
    pub agreement: f64,
    /// The clock the period runs on.
    pub progress: Progress,
}

/// The period of the busiest thread's samples, or why none stands out.
pub fn detect(p: &Profile, objects: &Objects) -> Result<Detected, String> {
    let Some(((pid, tid), _)) = crate::access::samples_per_thread(p)
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
    else {
        return Err("no access samples".into());
    };
    // (time, label) of the thread's samples in time order.
    let mut points: Vec<(u64, (Option<usize>, bool))> = Vec::new();
    attribute(p, objects, |i, hit, _| {
        let s = &p.samples[i];
        if (s.pid, s.tid) == (pid, tid) {
            points.push((s.time_ns, (hit.map(|h| h.object), s.is_store)));
        }
    });
    let mut counts: HashMap<(Option<usize>, bool), usize> = HashMap::new();
    for (_, label) in &points {
        *counts.entry(*label).or_default() += 1;
    }
    let mut labels: Vec<((Option<usize>, bool), usize)> = counts.into_iter().collect();
    labels.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    labels.truncate(MAX_LABELS);
    let index: HashMap<(Option<usize>, bool), usize> = labels
        .iter()
        .enumerate()
        .map(|(i, (label, _))| (*label, i))
        .collect();
    // Every sample advances the progress, the labels followed or not.
    let events: Vec<(u64, usize)> = (points.iter().enumerate())
        .filter_map(|(k, (_, label))| Some((k as u64, *index.get(label)?)))
        .collect();
    let progress = Progress::new(points.iter().map(|(t, _)| *t).collect());
    let no_period = || {
        format!("no repeating pattern stands out in thread {tid}'s samples: annotate the iteration with memlens_region_begin/end")
    };
    let (Some(&(start, _)), Some(&(end, _))) = (events.first(), events.last()) else {
        return Err(no_period());
    };
    // One label has no composition to change.
    if events.len() < 64 || end <= start || labels.len() < 2 {
        return Err(no_period());
    }
    // Whole samples to a bin: bins of 1.2 samples would hold one or two in
    // turn, a comb in the autocorrelation.
    let width = (end - start).div_ceil(BINS as u64) as f64;
    let lag = coarse_lag(&events, labels.len(), start, width).ok_or_else(no_period)?;
    let fine = &events[..events.len().min(FINE_SAMPLES)];
    let (period, chi2) =
        refine(fine, labels.len(), start, lag as f64 * width, width).ok_or_else(no_period)?;
    let (period, chi2) = fundamental(fine, labels.len(), start, (period, chi2), width);
    // The fine search may move the period off the coarse lag's range.
    let repeats = (end - start) as f64 / period;
    if repeats < MIN_PERIODS as f64 {
        return Err(format!(
            "the pattern in thread {tid}'s samples repeats {repeats:.0} times in the run, too few to fold ({MIN_PERIODS} needed): annotate the iteration with memlens_region_begin/end"
        ));
    }
    // Flat phases give chi-square ~ its degrees of freedom (sd sqrt(2 dof));
    // a period must stand ten deviations above.
    let dof = (labels.len() - 1) * (PHASES - 1);
    if chi2 < dof as f64 + 10.0 * (2.0 * dof as f64).sqrt() {
        return Err(no_period());
    }
    let agreement = halves_agreement(fine, labels.len(), start, period);
    if agreement < MIN_AGREEMENT {
        return Err(no_period());
    }
    Ok(Detected {
        pid,
        tid,
        period_samples: period,
        start,
        end,
        chi2,
        degrees_of_freedom: dof,
        agreement,
        progress,
    })
}

/// Where the detected thread also marks an iteration (a region with
/// MIN_ANNOTATED or more instances inside the detected span), the period
/// must be that iteration's spacing, or a whole number of iterations (an
/// outer loop nobody annotated), for at least a quarter of the instances
/// within 10% (iterations of a loop need not do equal work), or so short
/// that the iteration holds INNER_REPEATS or more of it (a loop inside the
/// annotated one). Anything else (a few periods to an iteration, not a whole
/// number of them) cannot describe the run: each iteration would restart the
/// pattern at another phase. It contradicts what the program itself says
/// repeats, and is refused with the annotation to fold instead.
pub fn agrees_with_annotation(p: &Profile, d: &Detected) -> Result<(), String> {
    let span = d.progress.wall(d.start as f64)..=d.progress.wall(d.end as f64);
    let mut by_name: HashMap<&str, Vec<u64>> = HashMap::new();
    for r in &p.regions {
        if (r.pid, r.tid) == (d.pid, d.tid) && r.end_ns.is_some() && span.contains(&r.begin_ns) {
            by_name.entry(&r.name).or_default().push(r.begin_ns);
        }
    }
    let Some((name, starts)) = by_name
        .into_iter()
        .filter(|(_, starts)| starts.len() >= MIN_ANNOTATED)
        .max_by(|a, b| a.1.len().cmp(&b.1.len()).then(b.0.cmp(a.0)))
    else {
        return Ok(());
    };
    // Spacings on the progress the period was found on.
    let mut starts: Vec<f64> = starts.iter().map(|&t| d.progress.at(t)).collect();
    starts.sort_unstable_by(f64::total_cmp);
    let spacings = starts.len() - 1;
    let mut spacing: Vec<f64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
    let median = *spacing
        .select_nth_unstable_by(spacings / 2, f64::total_cmp)
        .1;
    if median >= INNER_REPEATS * d.period_samples {
        return Ok(());
    }
    // Iterations a period spans (starts can coincide: never past them all).
    let k = ((d.period_samples / median.max(1e-9)).round().max(1.0) as usize).min(spacings);
    let matching = (starts.windows(k + 1))
        .filter(|w| (d.period_samples / (w[k] - w[0]) - 1.0).abs() < 0.10)
        .count();
    if matching * 4 >= spacings {
        return Ok(());
    }
    Err(format!(
        "the period found in thread {}'s samples, {:.1} samples, is not the spacing of its annotated region {name} ({} instances, median spacing {:.1} samples) nor a whole number of them, nor a loop repeating inside it, so it is not trusted: fold the annotated region instead, --fold {name}",
        d.tid,
        d.period_samples,
        starts.len(),
        median
    ))
}

/// Instances of a region on the detected thread that make it the run's
/// annotated iteration, for [`agrees_with_annotation`].
const MIN_ANNOTATED: usize = 4;
/// Periods an annotated iteration must hold for the period to be taken as a
/// loop inside it.
const INNER_REPEATS: f64 = 8.0;

/// The lag (in bins) of the labels' summed autocorrelation's fundamental
/// peak: past its first zero crossing, the top of the first peak whose local
/// maximum reaches 70% of the highest, among lags that fit MIN_PERIODS in the
/// events' span. None when
/// no lag correlates at all (the fine search's chi-square judges whether the
/// period is real).
fn coarse_lag(events: &[(u64, usize)], labels: usize, start: u64, width: f64) -> Option<usize> {
    let n = 2 * BINS;
    let fft = FftPlanner::<f64>::new();
    let (forward, inverse) = {
        let mut planner = fft;
        (planner.plan_fft_forward(n), planner.plan_fft_inverse(n))
    };
    // What a bin holds beyond its share of each label: a busier or idler
    // moment (the thread preempted, say) changes every label alike and
    // cancels out; only a change of what is touched remains.
    let mut counts = vec![vec![0.0f64; BINS]; labels];
    for &(t, l) in events {
        counts[l][(((t - start) as f64 / width) as usize).min(BINS - 1)] += 1.0;
    }
    let shares: Vec<f64> = counts
        .iter()
        .map(|c| c.iter().sum::<f64>() / events.len() as f64)
        .collect();
    let per_bin: Vec<f64> = (0..BINS)
        .map(|b| counts.iter().map(|c| c[b]).sum())
        .collect();
    let mut total = vec![0.0f64; BINS];
    for (label, c) in counts.iter().enumerate() {
        let mut x = vec![Complex::new(0.0, 0.0); n];
        for b in 0..BINS {
            x[b].re = c[b] - per_bin[b] * shares[label];
        }
        forward.process(&mut x);
        for c in &mut x {
            *c = Complex::new(c.norm_sqr(), 0.0);
        }
        inverse.process(&mut x);
        for (sum, c) in total.iter_mut().zip(&x) {
            *sum += c.re;
        }
    }
    // Nearby bins correlate because a phase lasts: past the first zero
    // crossing, only a recurrence does.
    let used = (((events.last()?.0 - start) as f64 / width) as usize + 1).min(BINS);
    let first_negative = (1..used / MIN_PERIODS).find(|&l| total[l] < 0.0)?;
    let range = first_negative..used / MIN_PERIODS;
    let best = range.clone().map(|l| total[l]).fold(f64::MIN, f64::max);
    if best <= 0.0 {
        return None;
    }
    let high = |l: usize| total[l] >= 0.7 * best;
    let first = range
        .clone()
        .find(|&l| high(l) && total[l] >= total[l - 1] && total[l] >= total[l + 1])?;
    // The top of that peak: one as broad as a phase of the loop has noisy
    // local maxima on its flanks.
    let peak_end = (first..range.end).find(|&l| !high(l)).unwrap_or(range.end);
    (first..peak_end).max_by(|&a, &b| total[a].total_cmp(&total[b]))
}

/// The period near `coarse` (good to `width`) whose fold is sharpest, with
/// its chi-square. Folding n periods in phase needs the period to T / (PHASES
/// n): the search steps half that fine across the coarse bin (at most
/// MAX_TRIALS steps), then polishes around the best.
fn refine(
    events: &[(u64, usize)],
    labels: usize,
    start: u64,
    coarse: f64,
    width: f64,
) -> Option<(f64, f64)> {
    let periods = (events.last()?.0 - start) as f64 / coarse;
    let step =
        (coarse / (PHASES as f64 * periods.max(1.0) * 2.0)).max(2.0 * width / MAX_TRIALS as f64);
    let search = |centre: f64, half: f64, step: f64| {
        let trials = (2.0 * half / step).ceil() as usize;
        (0..=trials)
            .map(|k| centre - half + k as f64 * step)
            .filter(|&t| t > 0.0)
            .map(|t| (t, epoch_chi2(events, labels, start, t)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
    };
    let (rough, _) = search(coarse, width, step)?;
    search(rough, 2.0 * step, step / 50.0)
}

/// Share of a period's chi-square that a fold at a fraction of it must keep to
/// be the fundamental: folding at twice the period separates the labels as
/// well as the period itself, while a fraction of the true period piles
/// different phases onto each other and loses most of it.
const FUNDAMENTAL_KEEPS: f64 = 0.8;

/// The shortest of `found` / 2 and `found` / 3 whose fold keeps
/// FUNDAMENTAL_KEEPS of `found`'s chi-square, else `found`: the coarse search
/// can land on a multiple when the fundamental's autocorrelation peak is
/// blurred (iterations that wander in duration).
fn fundamental(
    events: &[(u64, usize)],
    labels: usize,
    start: u64,
    found: (f64, f64),
    width: f64,
) -> (f64, f64) {
    let mut best = found;
    for k in [2.0, 3.0] {
        if let Some((p, c)) = refine(events, labels, start, found.0 / k, width / k) {
            if c >= FUNDAMENTAL_KEEPS * found.1 {
                best = (p, c);
            }
        }
    }
    best
}

/// Folded at `period`: each (label, phase bin) count minus what the bin would
/// hold at the label's overall share.
fn residuals(events: &[(u64, usize)], labels: usize, start: u64, period: f64) -> Vec<f64> {
    let folded = fold_counts(events, labels, start, period);
    let per_phase: Vec<f64> = (0..PHASES)
        .map(|b| folded.iter().map(|f| f64::from(f[b])).sum())
        .collect();
    let n = events.len().max(1) as f64;
    folded
        .iter()
        .flat_map(|bins| {
            let share = bins.iter().sum::<u32>() as f64 / n;
            bins.iter()
                .zip(&per_phase)
                .map(move |(&c, &m)| f64::from(c) - m * share)
        })
        .collect()
}

/// How alike the run's two halves fold at `period` (correlation of their
/// residuals): a loop folds alike in both, a run that changes over time does
/// not. Iterations' durations wander by a few percent (caches, the other
/// core busy), so over hundreds of iterations a fixed period's phase drifts
/// and the second half's fold comes out rotated by a few phases: the halves
/// are compared at their best rotation.
fn halves_agreement(events: &[(u64, usize)], labels: usize, start: u64, period: f64) -> f64 {
    let Some(last) = events.last() else {
        return 0.0;
    };
    let middle = start + (last.0 - start) / 2;
    let (first, second) = events.split_at(events.partition_point(|e| e.0 < middle));
    let first = residuals(first, labels, start, period);
    let second = residuals(second, labels, start, period);
    (0..PHASES)
        .map(|shift| correlation(&first, &shifted(&second, shift)))
        .fold(f64::MIN, f64::max)
}

/// Label-major folded residuals with every label's phases rotated by `shift`.
fn shifted(residuals: &[f64], shift: usize) -> Vec<f64> {
    residuals
        .chunks(PHASES)
        .flat_map(|phases| (0..PHASES).map(move |b| phases[(b + shift) % PHASES]))
        .collect()
}

/// Pearson correlation of two equally long series (0 when either is flat).
fn correlation(a: &[f64], b: &[f64]) -> f64 {
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let (ma, mb) = (mean(a), mean(b));
    let (mut ab, mut aa, mut bb) = (0.0, 0.0, 0.0);
    for (x, y) in a.iter().zip(b) {
        ab += (x - ma) * (y - mb);
        aa += (x - ma).powi(2);
        bb += (y - mb).powi(2);
    }
    if aa == 0.0 || bb == 0.0 {
        0.0
    } else {
        ab / (aa * bb).sqrt()
    }
}

fn fold_counts(
    events: &[(u64, usize)],
    labels: usize,
    start: u64,
    period: f64,
) -> Vec<[u32; PHASES]> {
    let mut folded = vec![[0u32; PHASES]; labels];
    for &(t, l) in events {
        let phase = ((t - start) as f64 / period).fract();
        folded[l][((phase * PHASES as f64) as usize).min(PHASES - 1)] += 1;
    }
    folded
}

/// Epoch folding's statistic, on composition: the chi-square of the labels'
/// counts per phase bin (folded at `period`) against independence of label
/// and phase (each bin holding each label at its overall share). A phase
/// that is merely busier, as when the thread runs more at some moments,
/// adds nothing.
fn epoch_chi2(events: &[(u64, usize)], labels: usize, start: u64, period: f64) -> f64 {
    let folded = fold_counts(events, labels, start, period);
    let per_phase: Vec<f64> = (0..PHASES)
        .map(|b| folded.iter().map(|f| f64::from(f[b])).sum())
        .collect();
    let n = events.len() as f64;
    folded
        .iter()
        .map(|bins| {
            let share = bins.iter().sum::<u32>() as f64 / n;
            bins.iter()
                .zip(&per_phase)
                .filter(|(_, &m)| m > 0.0 && share > 0.0)
                .map(|(&c, &m)| (f64::from(c) - m * share).powi(2) / (m * share))
                .sum::<f64>()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steady_pattern_gives_its_period() {
        // Three labels in turn over a 1000 ns period, 1.5 samples per period
        // at random times, for 4000 periods.
        let period = 1000.0;
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut events = Vec::new();
        for _ in 0..6000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let t = (x % 4_000_000) as f64;
            let label = ((t % period) / (period / 3.0)) as usize;
            events.push((t as u64 + 1_000, label));
        }
        events.sort_unstable();
        let start = events[0].0;
        // Four bins a period: the coarse lag is good to a bin.
        let width = (events.last().unwrap().0 - start) as f64 / BINS as f64;
        let lag = coarse_lag(&events, 3, start, width).unwrap();
        assert!(
            (lag as f64 * width - period).abs() <= width,
            "{lag} x {width}"
        );
        let sharp = epoch_chi2(&events, 3, start, period);
        let blurred = epoch_chi2(&events, 3, start, period * 1.01);
        assert!(sharp > 10.0 * blurred, "{sharp} vs {blurred}");
        // Folding 4000 periods in phase needs the period to 1/64000.
        let (found, chi2) = refine(&events, 3, start, lag as f64 * width, width).unwrap();
        assert!((found / period - 1.0).abs() < 1e-5, "{found}");
        assert!(chi2 >= sharp * 0.99, "{chi2} vs {sharp}");
        // The fundamental is kept, and found again from its multiples.
        let kept = fundamental(&events, 3, start, (found, chi2), width);
        assert_eq!(kept, (found, chi2));
        for k in [2.0, 3.0] {
            let twice = refine(&events, 3, start, k * found, k * width).unwrap();
            let (back, _) = fundamental(&events, 3, start, twice, k * width);
            assert!((back / period - 1.0).abs() < 1e-4, "{k}x: {back}");
        }
    }

    #[test]
    fn halves_rotated_by_a_phase_drift_still_agree() {
        // Two labels alternating each half period of 1000 ns, 8 samples a
        // period; halfway the loop slips by a quarter period (one slow
        // iteration).
        let mut events = Vec::new();
        for k in 0..8_000u64 {
            let t = k * 125;
            let slip = if t >= 500_000 { 250 } else { 0 };
            events.push((t + slip, (((t % 1000) / 500) as usize)));
        }
        let start = events[0].0;
        let aligned = correlation(
            &residuals(&events[..4000], 2, start, 1000.0),
            &residuals(&events[4000..], 2, start, 1000.0),
        );
        assert!(aligned < 0.1, "{aligned}");
        let agreement = halves_agreement(&events, 2, start, 1000.0);
        assert!(agreement > 0.99, "{agreement}");
        // A run that changes over time (one label, then the other) does not
        // fold alike at any rotation.
        let changing: Vec<(u64, usize)> = (0..8_000u64)
            .map(|k| (k * 125, usize::from(k >= 4_000)))
            .collect();
        assert!(halves_agreement(&changing, 2, 0, 1000.0) < MIN_AGREEMENT);
    }

    #[test]
    fn progress_counts_samples_and_maps_back_to_wall_time() {
        // A sample every 1 us, then every 2 us (the loop slowed down), with
        // the thread off the CPU for 3 ms after the 100th sample.
        let mut times = Vec::new();
        let mut t = 1_000_000u64;
        for i in 0..300 {
            times.push(t);
            t += if i < 150 { 1_000 } else { 2_000 } + if i == 99 { 3_000_000 } else { 0 };
        }
        let progress = Progress::new(times.clone());
        for (k, &wall) in times.iter().enumerate() {
            assert_eq!(progress.at(wall), k as f64);
            assert_eq!(progress.wall(k as f64), wall);
        }
        // Halfway between two samples, in either direction; inside the
        // 3 ms gap too.
        assert_eq!(progress.at(times[200] + 1_000), 200.5);
        assert_eq!(progress.wall(200.5), times[200] + 1_000);
        assert_eq!(progress.at(times[99] + 1_500_500), 99.5);
        // Never back in time, and clamped to the samples.
        let walls: Vec<u64> = (0..*times.last().unwrap() + 5_000).step_by(9_973).collect();
        assert!(walls
            .windows(2)
            .all(|w| progress.at(w[0]) <= progress.at(w[1])));
        assert_eq!(progress.at(0), 0.0);
        assert_eq!(progress.at(u64::MAX), 299.0);
        assert_eq!(progress.wall(-1.0), times[0]);
        assert_eq!(progress.wall(1e9), times[299]);
        assert_eq!(Progress::new(Vec::new()).wall(3.0), 0);
    }
}

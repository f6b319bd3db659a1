//! The period of a loop nobody annotated, from the busiest thread's samples:
//! each sample is a point in time labelled by what it touched (object, load or
//! store). A repeating loop makes those labels recur with its period:
//!
//! 1. coarse: the autocorrelation of the labels' counts per time bin (by FFT)
//!    peaks at the period's lag; the shortest lag that reaches most of the
//!    highest peak is the fundamental, not a multiple;
//! 2. fine: epoch folding (as pulsar timing searches periods in sparse event
//!    times): around the coarse period, the trial period whose fold separates
//!    the labels into phases most (the largest chi-square against label and
//!    phase being independent) wins. A bin of the coarse grid is too wide to fold thousands of
//!    iterations in phase; the fine search resolves it.
//!
//! Both run on the thread's running time, not wall time: a gap between two
//! samples far beyond the usual one (the thread preempted or blocked) would
//! shift every later iteration's phase, so it is shortened to the usual gap
//! ([`RunningTime`]); folding maps the instances back to wall time.
//!
//! A fixed period folds a steady loop; iterations whose durations wander drift
//! out of phase over the run, and the annotated region (`memlens_region_begin`)
//! is the remedy the report names.

use crate::access::attribute;
use crate::{Objects, Profile};
use rustfft::{num_complex::Complex, FftPlanner};
use std::collections::HashMap;

/// Labels followed: the most sampled ones.
const MAX_LABELS: usize = 8;
/// Time bins of the coarse search.
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
/// A gap between a thread's samples this many times the median gap, and at
/// least OFF_CPU_MIN_NS, is time the thread did not run.
const OFF_CPU_GAPS: u64 = 20;
const OFF_CPU_MIN_NS: u64 = 200_000;

/// A thread's running time as its samples show it: each gap of over
/// OFF_CPU_GAPS median gaps is cut to one median gap. Accesses are sampled
/// by count, so while the thread runs the gaps stay near their median; a
/// scheduler's time slice (milliseconds) stands out. A loop that itself
/// waits (I/O, a barrier) without accesses loses that wait from its period
/// in running time alike in every iteration.
#[derive(Clone, Debug, Default)]
pub struct RunningTime {
    /// (wall time of the sample ending a cut gap, ns removed up to there).
    cuts: Vec<(u64, u64)>,
}

impl RunningTime {
    /// From the sample times, in order.
    pub fn new(times: &[u64]) -> RunningTime {
        let mut gaps: Vec<u64> = times.windows(2).map(|w| w[1] - w[0]).collect();
        if gaps.is_empty() {
            return RunningTime::default();
        }
        let mid = gaps.len() / 2;
        let median = *gaps.select_nth_unstable(mid).1;
        let off_cpu = (median * OFF_CPU_GAPS).max(OFF_CPU_MIN_NS);
        let mut removed = 0;
        let mut cuts = Vec::new();
        for w in times.windows(2) {
            let gap = w[1] - w[0];
            if gap > off_cpu {
                removed += gap - median;
                cuts.push((w[1], removed));
            }
        }
        RunningTime { cuts }
    }

    /// Running time of a wall time; one inside a cut gap maps no later than
    /// the gap's end, so that the mapping never goes back in time (an
    /// annotated region can begin while the thread's samples paused).
    pub fn running(&self, wall: u64) -> u64 {
        let i = self.cuts.partition_point(|c| c.0 <= wall);
        let running = wall - i.checked_sub(1).map_or(0, |i| self.cuts[i].1);
        match self.cuts.get(i) {
            Some(&(gap_end, removed)) => running.min(gap_end - removed),
            None => running,
        }
    }

    /// Wall time of a running time (inside a cut gap: its start).
    pub fn wall(&self, running: u64) -> u64 {
        let i = self.cuts.partition_point(|c| c.0 - c.1 <= running);
        running + i.checked_sub(1).map_or(0, |i| self.cuts[i].1)
    }

    /// Time the thread was found not running.
    pub fn off_cpu_ns(&self) -> u64 {
        self.cuts.last().map_or(0, |c| c.1)
    }

    pub fn gaps_cut(&self) -> usize {
        self.cuts.len()
    }
}

pub struct Detected {
    pub pid: u32,
    pub tid: u32,
    pub period_ns: f64,
    pub start_ns: u64,
    pub end_ns: u64,
    pub chi2: f64,
    pub degrees_of_freedom: usize,
    /// Correlation of the two halves' folds at their best phase shift.
    pub agreement: f64,
    /// The clock `period_ns` runs on; start and end are wall times.
    pub running: RunningTime,
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
    let times: Vec<u64> = points.iter().map(|(t, _)| *t).collect();
    let running = RunningTime::new(&times);
    let events: Vec<(u64, usize)> = points
        .iter()
        .filter_map(|(t, label)| Some((running.running(*t), *index.get(label)?)))
        .collect();
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
    let width = (end - start) as f64 / BINS as f64;
    let lag = coarse_lag(&events, labels.len(), start, width).ok_or_else(no_period)?;
    let fine = &events[..events.len().min(FINE_SAMPLES)];
    let (period_ns, chi2) =
        refine(fine, labels.len(), start, lag as f64 * width, width).ok_or_else(no_period)?;
    let (period_ns, chi2) = fundamental(fine, labels.len(), start, (period_ns, chi2), width);
    // The fine search may move the period off the coarse lag's range.
    let repeats = (end - start) as f64 / period_ns;
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
    let agreement = halves_agreement(fine, labels.len(), start, period_ns);
    if agreement < MIN_AGREEMENT {
        return Err(no_period());
    }
    Ok(Detected {
        pid,
        tid,
        period_ns,
        start_ns: running.wall(start),
        end_ns: running.wall(end),
        chi2,
        degrees_of_freedom: dof,
        agreement,
        running,
    })
}

/// Where the detected thread also marks an iteration (a region with
/// MIN_ANNOTATED or more instances inside the detected span), the period
/// must be that iteration's spacing, or a whole number of iterations (an
/// outer loop nobody annotated), for at least a quarter of the instances
/// within 10% (the iterations' own durations wander with the machine's
/// load), or so short that the iteration holds INNER_REPEATS or more of it
/// (a loop inside the annotated one). Anything else (a few periods to an
/// iteration, not a whole number of them) cannot describe the run: each
/// iteration would restart the pattern at another phase. It contradicts what
/// the program itself says repeats, and is refused with the annotation to
/// fold instead.
pub fn agrees_with_annotation(p: &Profile, d: &Detected) -> Result<(), String> {
    let mut by_name: HashMap<&str, Vec<u64>> = HashMap::new();
    for r in &p.regions {
        if (r.pid, r.tid) == (d.pid, d.tid)
            && r.end_ns.is_some()
            && (d.start_ns..=d.end_ns).contains(&r.begin_ns)
        {
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
    // Spacings on the running time the period was found on.
    let mut starts: Vec<u64> = starts.iter().map(|&t| d.running.running(t)).collect();
    starts.sort_unstable();
    let spacings = starts.len() - 1;
    let mut spacing: Vec<u64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
    let median = *spacing.select_nth_unstable(spacings / 2).1 as f64;
    if median >= INNER_REPEATS * d.period_ns {
        return Ok(());
    }
    // Iterations a period spans (starts can coincide: never past them all).
    let k = ((d.period_ns / median.max(1.0)).round().max(1.0) as usize).min(spacings);
    let matching = (starts.windows(k + 1))
        .filter(|w| (d.period_ns / (w[k] - w[0]) as f64 - 1.0).abs() < 0.10)
        .count();
    if matching * 4 >= spacings {
        return Ok(());
    }
    Err(format!(
        "the period found in thread {}'s samples, {:.1} us, is not the spacing of its annotated region {name} ({} instances, median spacing {:.1} us) nor a whole number of them, nor a loop repeating inside it, so it is not trusted: fold the annotated region instead, --fold {name}",
        d.tid,
        d.period_ns / 1e3,
        starts.len(),
        median / 1e3
    ))
}

/// Instances of a region on the detected thread that make it the run's
/// annotated iteration, for [`agrees_with_annotation`].
const MIN_ANNOTATED: usize = 4;
/// Periods an annotated iteration must hold for the period to be taken as a
/// loop inside it.
const INNER_REPEATS: f64 = 8.0;

/// The lag (in bins) of the labels' summed autocorrelation's fundamental
/// peak: past its first zero crossing, the shortest local maximum reaching
/// 70% of the highest, among lags that fit MIN_PERIODS in the run. None when
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
    let first_negative = (1..BINS / MIN_PERIODS).find(|&l| total[l] < 0.0)?;
    let range = first_negative..BINS / MIN_PERIODS;
    let best = range.clone().map(|l| total[l]).fold(f64::MIN, f64::max);
    if best <= 0.0 {
        return None;
    }
    range
        .clone()
        .find(|&l| total[l] >= 0.7 * best && total[l] >= total[l - 1] && total[l] >= total[l + 1])
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
    fn gaps_far_beyond_the_usual_are_cut_from_running_time() {
        // A sample every 1 us; the thread is off the CPU for 3 ms after the
        // 100th sample and 5 ms after the 200th.
        let mut times = Vec::new();
        let mut t = 1_000_000u64;
        for i in 0..300 {
            times.push(t);
            t +=
                1_000 + [0, 3_000_000, 5_000_000][usize::from(i == 99) + 2 * usize::from(i == 199)];
        }
        let r = RunningTime::new(&times);
        assert_eq!((r.gaps_cut(), r.off_cpu_ns()), (2, 8_000_000));
        let running: Vec<u64> = times.iter().map(|&t| r.running(t)).collect();
        assert!(running.windows(2).all(|w| w[1] - w[0] == 1_000));
        for (&wall, &run) in times.iter().zip(&running) {
            assert_eq!(r.wall(run), wall);
        }
        // A wall time inside a cut gap maps to no later than its end: the
        // mapping never goes back in time.
        let inside = times[99] + 2_000_000;
        assert_eq!(r.running(inside), r.running(times[100]));
        let walls: Vec<u64> = (times[0]..*times.last().unwrap()).step_by(9_973).collect();
        assert!(walls.windows(2).all(|w| r.running(w[0]) <= r.running(w[1])));
        // Steady samples: nothing is cut.
        let steady: Vec<u64> = (0..100).map(|i| i * 1_000).collect();
        assert_eq!(RunningTime::new(&steady).gaps_cut(), 0);
    }
}

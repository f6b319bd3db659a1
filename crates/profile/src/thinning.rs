//! A profile's timeline read with memory bounded by its processes, not by
//! the run's length. A process keeps every reading up to [`MAX_POINTS`]
//! (5.5 minutes at the default 10 ms); past that, neighbouring readings are
//! merged in pairs, each pair into its later reading with the larger resident
//! set and live heap of the two, and later readings are merged as many at a
//! time. The peaks stay exact (their times move by at most a merged span),
//! cumulative counts stay exact at every kept time, and what was merged is
//! told with the figures ([`Thinned`]).

use crate::TimelinePoint;
use std::collections::HashMap;

/// The readings a process keeps before its timeline is thinned.
pub const MAX_POINTS: usize = 1 << 15;

/// One process's timeline as it was thinned for the report.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct Thinned {
    pub pid: u32,
    /// Readings in the profile.
    pub readings: u64,
    /// Points kept, each merging up to `merged` neighbouring readings.
    pub kept: u64,
    pub merged: u64,
}

#[derive(Default)]
struct Series {
    points: Vec<TimelinePoint>,
    /// Readings merged into each kept point (a power of two).
    merged: u64,
    /// The readings merged so far into the next point, and their number.
    pending: Option<(TimelinePoint, u64)>,
    readings: u64,
}

/// Takes a timeline's readings in order of time for each process.
#[derive(Default)]
pub struct Thinning {
    series: HashMap<u32, Series>,
}

impl Thinning {
    pub fn push(&mut self, p: TimelinePoint) {
        let s = self.series.entry(p.pid).or_insert_with(|| Series {
            merged: 1,
            ..Series::default()
        });
        s.readings += 1;
        let (point, count) = match s.pending.take() {
            Some((held, n)) => (merged(held, p), n + 1),
            None => (p, 1),
        };
        if count < s.merged {
            s.pending = Some((point, count));
            return;
        }
        s.points.push(point);
        if s.points.len() == 2 * MAX_POINTS {
            let pairs = std::mem::take(&mut s.points);
            let mut pairs = pairs.into_iter();
            while let Some(a) = pairs.next() {
                s.points.push(match pairs.next() {
                    Some(b) => merged(a, b),
                    None => a,
                });
            }
            s.merged *= 2;
        }
    }

    /// Every process's kept points, sorted by process and time, and the
    /// processes whose timeline was thinned.
    pub fn finish(self) -> (Vec<TimelinePoint>, Vec<Thinned>) {
        let mut points = Vec::new();
        let mut thinned = Vec::new();
        for (pid, mut s) in self.series {
            points.append(&mut s.points);
            points.extend(s.pending.map(|(p, _)| p));
            if s.merged > 1 {
                thinned.push(Thinned {
                    pid,
                    readings: s.readings,
                    kept: s.readings.div_ceil(s.merged),
                    merged: s.merged,
                });
            }
        }
        points.sort_by_key(|p| (p.pid, p.time_ns));
        thinned.sort_by_key(|t| t.pid);
        (points, thinned)
    }
}

/// Two readings of one process as one: the later one, with the larger
/// resident set (and its parts) and the larger live heap of the two.
fn merged(a: TimelinePoint, b: TimelinePoint) -> TimelinePoint {
    let (earlier, later) = if a.time_ns <= b.time_ns {
        (a, b)
    } else {
        (b, a)
    };
    let heap_live = earlier.heap_live.max(later.heap_live);
    let resident = if earlier.rss > later.rss {
        &earlier
    } else {
        &later
    };
    TimelinePoint {
        rss: resident.rss,
        anon: resident.anon,
        file: resident.file,
        shmem: resident.shmem,
        swap: resident.swap,
        numa0: resident.numa0,
        numa1: resident.numa1,
        numa2: resident.numa2,
        numa3: resident.numa3,
        heap_live,
        ..later
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(i: u64) -> TimelinePoint {
        TimelinePoint {
            pid: 7,
            time_ns: i * 10_000_000,
            // One high reading in the middle; the rest a slow ramp.
            rss: if i == 77_777 { 1 << 40 } else { i },
            heap_live: if i == 123_457 { 1 << 39 } else { i / 2 },
            heap_alloc_bytes: i * 100,
            ..Default::default()
        }
    }

    #[test]
    fn a_long_timeline_keeps_its_peaks_and_totals_within_its_bound() {
        let n = 300_000u64;
        let mut t = Thinning::default();
        for i in 0..n {
            t.push(reading(i));
        }
        let (points, thinned) = t.finish();
        // Halved at 2^16, 2^17 and 2^18 readings: 8 readings a point.
        assert_eq!(
            thinned,
            [Thinned {
                pid: 7,
                readings: n,
                kept: 37_500,
                merged: 8
            }]
        );
        assert_eq!(points.len(), 37_500);
        assert!(points.windows(2).all(|w| w[0].time_ns < w[1].time_ns));
        // The peaks, as a brute-force maximum over every reading finds them,
        // at a time within one merged span after theirs.
        let rss_peak = points.iter().max_by_key(|p| p.rss).unwrap();
        assert_eq!(rss_peak.rss, 1 << 40);
        let span = 8 * 10_000_000;
        assert!((77_777 * 10_000_000..77_777 * 10_000_000 + span).contains(&rss_peak.time_ns));
        let heap_peak = points.iter().max_by_key(|p| p.heap_live).unwrap();
        assert_eq!(heap_peak.heap_live, 1 << 39);
        // Cumulative counts stay those of the kept time.
        assert!(points
            .iter()
            .all(|p| p.heap_alloc_bytes == p.time_ns / 10_000_000 * 100));
        assert_eq!(points.last().unwrap().heap_alloc_bytes, (n - 1) * 100);
    }

    #[test]
    fn a_short_timeline_is_kept_whole() {
        let mut t = Thinning::default();
        let whole: Vec<_> = (0..MAX_POINTS as u64).map(reading).collect();
        for p in whole.iter().cloned() {
            t.push(p);
        }
        let (points, thinned) = t.finish();
        assert_eq!(points, whole);
        assert!(thinned.is_empty());
    }
}

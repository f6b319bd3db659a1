//! Counting perf events over the run: totals, rates over time and per region.
//! Readings are cumulative and taken every collector interval; a region's share
//! is interpolated linearly between the readings around its begin and end.

use crate::Profile;
use memlens_profile::CounterReading;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct CounterSummary {
    pub name: String,
    pub unit: String,
    pub scope: String,
    pub method: String,
    pub total: f64,
    /// Total over the span of the readings, per second.
    pub mean_rate: f64,
    /// Highest rate between two consecutive readings, per second.
    pub peak_rate: f64,
    pub readings: u64,
    pub regions: Vec<CounterInRegion>,
}

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct CounterInRegion {
    pub region: String,
    /// Counted while the region's instances ran (program-wide, interpolated).
    pub value: f64,
    pub rate: f64,
}

/// The series of each counter, in time order.
pub fn counter_series(p: &Profile) -> BTreeMap<String, Vec<&CounterReading>> {
    let mut series: BTreeMap<String, Vec<&CounterReading>> = BTreeMap::new();
    for r in &p.counters {
        series.entry(r.name.clone()).or_default().push(r);
    }
    for s in series.values_mut() {
        s.sort_by_key(|r| r.time_ns);
    }
    series
}

/// The rate (per second) between each two consecutive readings of a series,
/// at the time of the later one (ns).
pub fn rates<'a>(series: &'a [&CounterReading]) -> impl Iterator<Item = (u64, f64)> + 'a {
    series
        .windows(2)
        .filter(|w| w[1].time_ns > w[0].time_ns)
        .map(|w| {
            let dt = (w[1].time_ns - w[0].time_ns) as f64 / 1e9;
            (w[1].time_ns, (w[1].value - w[0].value) / dt)
        })
}

/// A counter's rate between consecutive readings, in its unit per second.
#[derive(Clone, Debug)]
pub struct CounterRates {
    pub name: String,
    pub unit: String,
    /// How the counter is obtained ("measured", "modelled: ...").
    pub method: String,
    /// (seconds into the run, per second)
    pub rates: Vec<(f64, f64)>,
}

/// Every counter's rates over time.
pub fn counter_rates(p: &Profile) -> Vec<CounterRates> {
    counter_series(p)
        .into_iter()
        .map(|(name, series)| {
            let first = series.first();
            let unit = first.map(|r| r.unit.clone()).unwrap_or_default();
            let method = first.map(|r| r.method.clone()).unwrap_or_default();
            let rates = rates(&series)
                .map(|(ns, rate)| (ns as f64 / 1e9, rate))
                .collect();
            CounterRates {
                name,
                unit,
                method,
                rates,
            }
        })
        .collect()
}

/// The counters that count bytes (memory traffic), in bytes per second.
pub fn traffic_rates(p: &Profile) -> Vec<CounterRates> {
    counter_rates(p)
        .into_iter()
        .filter(|c| c.unit == "bytes")
        .collect()
}

/// Exact read and write bandwidth between consecutive ticks, summed over
/// processes: (seconds into the run, bytes/s read, bytes/s written). The
/// bytes are the instrumented code's exact counts.
pub fn bandwidth_series(p: &Profile) -> Vec<(f64, f64, f64)> {
    // Each process's cumulative exact bytes, from none at its start (what
    // it moved before its first tick falls in the first interval) through
    // its ticks to its threads' totals at its end (after the last tick).
    let mut per_pid: BTreeMap<u32, Vec<(u64, u64, u64)>> = BTreeMap::new();
    for t in &p.timeline {
        (per_pid.entry(t.pid))
            .or_insert_with(|| vec![(p.process_start(t.pid), 0, 0)])
            .push((t.time_ns, t.bytes_read, t.bytes_written));
    }
    for (pid, series) in &mut per_pid {
        let threads = p.threads.iter().filter(|t| t.pid == *pid);
        let read: Option<u64> = threads.clone().map(|t| t.bytes_read).sum();
        let written: Option<u64> = threads.map(|t| t.bytes_written).sum();
        let (Some(read), Some(written), Some(&(last, ..))) = (read, written, series.last()) else {
            continue;
        };
        let end = p.process_end(*pid);
        if end > last {
            series.push((end, read, written));
        }
    }
    let mut rates: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
    for points in per_pid.values() {
        for (end, read, written) in interval_rates(points) {
            let e = rates.entry(end).or_default();
            e.0 += read;
            e.1 += written;
        }
    }
    rates
        .into_iter()
        .map(|(t, (r, w))| (t as f64 / 1e9, r, w))
        .collect()
}

/// Between consecutive (time ns, bytes read, bytes written so far) points
/// that differ in time: (the later time, read and written bytes/s).
fn interval_rates(points: &[(u64, u64, u64)]) -> impl Iterator<Item = (u64, f64, f64)> + '_ {
    (points.windows(2)).filter(|w| w[1].0 > w[0].0).map(|w| {
        let dt = (w[1].0 - w[0].0) as f64 / 1e9;
        let rate = |a: u64, b: u64| b.saturating_sub(a) as f64 / dt;
        (w[1].0, rate(w[0].1, w[1].1), rate(w[0].2, w[1].2))
    })
}

/// One thread's exact bandwidth over time (instrumented code).
#[derive(Clone, Debug)]
pub struct ThreadBandwidth {
    pub pid: u32,
    pub tid: u32,
    /// Bytes it read and wrote in all, as it last published them.
    pub bytes: u64,
    /// (seconds into the run at the interval's end, read and written
    /// bytes/s over the interval since its previous point).
    pub rates: Vec<(f64, f64, f64)>,
}

/// Each thread's bandwidth between the ticks where its published counts
/// changed (the `thread_timeline` table, read on demand), from its start
/// when known; threads of the profile's view only, most bytes first.
pub fn thread_bandwidth(p: &Profile) -> Vec<ThreadBandwidth> {
    let Ok(points) = memlens_profile::read_table::<memlens_profile::ThreadTrafficPoint>(&p.dir)
    else {
        return Vec::new();
    };
    // Per (pid, tid): (time, bytes read, bytes written) so far.
    type Counts = Vec<(u64, u64, u64)>;
    let mut per_thread: BTreeMap<(u32, u32), Counts> = BTreeMap::new();
    for t in points.iter().filter(|t| p.in_view(t.pid, t.tid)) {
        per_thread
            .entry((t.pid, t.tid))
            .or_insert_with(|| {
                let start = p.threads.iter().find(|r| r.pid == t.pid && r.tid == t.tid);
                start
                    .and_then(|r| r.start_ns)
                    .map(|s| (s, 0, 0))
                    .into_iter()
                    .collect()
            })
            .push((t.time_ns, t.bytes_read, t.bytes_written));
    }
    let mut out: Vec<ThreadBandwidth> = (per_thread.into_iter())
        .map(|((pid, tid), mut points)| {
            points.sort_unstable();
            let rates = (interval_rates(&points))
                .map(|(end, read, written)| (end as f64 / 1e9, read, written))
                .collect();
            let last = points.last().map_or(0, |l| l.1.saturating_add(l.2));
            ThreadBandwidth {
                pid,
                tid,
                bytes: last,
                rates,
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then((a.pid, a.tid).cmp(&(b.pid, b.tid)))
    });
    out
}

/// The cumulative value at `t`, linear between the readings around it.
pub fn value_at(series: &[&CounterReading], t: u64) -> f64 {
    let i = series.partition_point(|r| r.time_ns <= t);
    match (i.checked_sub(1).map(|j| series[j]), series.get(i)) {
        (Some(a), Some(b)) if b.time_ns > a.time_ns => {
            let f = (t - a.time_ns) as f64 / (b.time_ns - a.time_ns) as f64;
            a.value + f * (b.value - a.value)
        }
        (Some(a), _) => a.value,
        (None, Some(b)) => b.value * t as f64 / b.time_ns.max(1) as f64,
        (None, None) => 0.0,
    }
}

pub fn counters_report(p: &Profile) -> Vec<CounterSummary> {
    let mut out = Vec::new();
    for (name, series) in counter_series(p) {
        let (Some(first), Some(last)) = (series.first(), series.last()) else {
            continue;
        };
        let span_s = last.time_ns as f64 / 1e9;
        let peak_rate = rates(&series).map(|(_, rate)| rate).fold(0.0, f64::max);
        let mut by_region: BTreeMap<String, (f64, u64)> = BTreeMap::new();
        for r in &p.regions {
            let end = r.end_ns.unwrap_or_else(|| p.process_end(r.pid));
            let e = by_region.entry(crate::region_label(r)).or_default();
            e.0 += value_at(&series, end) - value_at(&series, r.begin_ns);
            e.1 += end.saturating_sub(r.begin_ns);
        }
        out.push(CounterSummary {
            name,
            unit: first.unit.clone(),
            scope: first.scope.clone(),
            method: first.method.clone(),
            total: last.value,
            mean_rate: if span_s > 0.0 {
                last.value / span_s
            } else {
                0.0
            },
            peak_rate,
            readings: series.len() as u64,
            regions: by_region
                .into_iter()
                .map(|(region, (value, ns))| CounterInRegion {
                    region,
                    value,
                    rate: if ns > 0 {
                        value / (ns as f64 / 1e9)
                    } else {
                        0.0
                    },
                })
                .collect(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{bandwidth_series, thread_bandwidth};
    use crate::Profile;
    use memlens_profile::{Process, ThreadRow, TimelinePoint};

    #[test]
    fn bandwidth_counts_the_bytes_before_the_first_tick_and_after_the_last() {
        const MIB: u64 = 1 << 20;
        let mut p = Profile::default();
        p.meta.processes = vec![Process {
            pid: 1,
            start_ns: 0,
            end_ns: Some(30_000_000),
            ..Default::default()
        }];
        // 256 MiB read before the first tick (an initialisation), none
        // between the ticks, 44 MiB after the last.
        p.timeline = [10_000_000, 20_000_000]
            .map(|time_ns| TimelinePoint {
                pid: 1,
                time_ns,
                bytes_read: 256 * MIB,
                ..Default::default()
            })
            .to_vec();
        p.threads = vec![ThreadRow {
            pid: 1,
            bytes_read: Some(300 * MIB),
            bytes_written: Some(0),
            ..Default::default()
        }];
        let series = bandwidth_series(&p);
        let rates: Vec<(f64, f64)> = series
            .iter()
            .map(|&(t, r, _)| (t, r / MIB as f64))
            .collect();
        assert_eq!(rates, [(0.01, 25600.0), (0.02, 0.0), (0.03, 4400.0)]);
    }

    #[test]
    fn a_threads_bandwidth_is_its_bytes_between_its_points() {
        // Thread 7 started at 5 ms, had read 1000 bytes at 10 ms and 5000
        // at 30 ms (and written 100 by then); its counts unchanged between.
        let dir = tempfile::tempdir().unwrap();
        let points = [(10, 1000, 0), (30, 5000, 100)].map(|(ms, read, written)| {
            memlens_profile::ThreadTrafficPoint {
                pid: 1,
                tid: 7,
                time_ns: ms * 1_000_000,
                bytes_read: read,
                bytes_written: written,
                loads: 0,
                stores: 0,
            }
        });
        memlens_profile::write_table(dir.path(), &points).unwrap();
        let mut p = Profile {
            dir: dir.path().to_path_buf(),
            ..Default::default()
        };
        p.threads = vec![ThreadRow {
            pid: 1,
            tid: 7,
            start_ns: Some(5_000_000),
            ..Default::default()
        }];
        let threads = thread_bandwidth(&p);
        assert_eq!(threads.len(), 1);
        assert_eq!((threads[0].tid, threads[0].bytes), (7, 5100));
        let close = |a: f64, b: f64| (a - b).abs() < 1e-6 * b.max(1.0);
        let want = [(0.01, 200_000.0, 0.0), (0.03, 200_000.0, 5_000.0)];
        assert_eq!(threads[0].rates.len(), want.len());
        for (got, want) in threads[0].rates.iter().zip(want) {
            assert!(
                close(got.0, want.0) && close(got.1, want.1) && close(got.2, want.2),
                "{:?}",
                threads[0].rates
            );
        }
    }
}

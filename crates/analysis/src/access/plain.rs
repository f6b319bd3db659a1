//! Regions timed by runs of the uninstrumented build: the bandwidth the
//! plain program achieves, from the counted run's exact bytes.

use super::AccessReport;
use memlens_profile::Region;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// A region's time in runs of the uninstrumented build of the same program
/// (recorded with `memlens record`, which times its marks and counts
/// nothing), and the bandwidth the exact bytes of the counted run give over
/// it: the bandwidth without memlens' instrumentation (Examem corrects its
/// figure by a model of its counters' cost; a timed run measures it).
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct PlainTiming {
    /// The median over the timing runs of the region's summed time.
    pub total_ns: u64,
    pub read_bandwidth: f64,
    pub write_bandwidth: f64,
}

/// The runs of the uninstrumented build the regions were timed by, and the
/// regions they could not time.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct PlainRun {
    /// The profile directories, as given.
    pub profiles: Vec<String>,
    /// Why a region has no time from them (one line each).
    pub unmatched: Vec<String>,
}

/// Times the regions of `report` by `runs` (each a profile's name and its
/// regions), runs of the uninstrumented build: a region of the same name,
/// in one process of each run, that ran as many times in every run. The
/// median over the runs of its closed instances' summed time, with the
/// counted run's exact bytes, gives the bandwidth without memlens.
pub fn time_by_plain_runs(report: &mut AccessReport, runs: &[(String, Vec<Region>)]) {
    /// A region name in one timing run.
    #[derive(Default)]
    struct Timed {
        pids: BTreeSet<u32>,
        instances: u64,
        total_ns: u64,
    }
    let timed: Vec<BTreeMap<String, Timed>> = (runs.iter())
        .map(|(_, regions)| {
            let mut by_name: BTreeMap<String, Timed> = BTreeMap::new();
            for r in regions {
                let e = by_name.entry(crate::region_label(r)).or_default();
                e.pids.insert(r.pid);
                e.instances += 1;
                if let Some(end) = r.end_ns {
                    e.total_ns = e.total_ns.saturating_add(end.saturating_sub(r.begin_ns));
                }
            }
            by_name
        })
        .collect();
    let mut processes: BTreeMap<String, usize> = BTreeMap::new();
    for r in &report.regions {
        *processes.entry(r.name.clone()).or_default() += 1;
    }
    let mut unmatched = Vec::new();
    for r in &mut report.regions {
        // Its summed time in each run, or why a run cannot time it.
        let times: Result<Vec<u64>, String> = (runs.iter().zip(&timed))
            .map(|((profile, _), by_name)| {
                let why = match by_name.get(&r.name) {
                    None => "not in that run".to_string(),
                    Some(t) if t.pids.len() > 1 || processes[&r.name] > 1 => {
                        "in several processes of a run".to_string()
                    }
                    Some(t) if t.instances != r.instances => {
                        format!("ran {} times there, {} here", t.instances, r.instances)
                    }
                    Some(t) if t.total_ns == 0 => "took no time there".to_string(),
                    Some(t) => return Ok(t.total_ns),
                };
                let run = if runs.len() > 1 {
                    format!(" ({profile})")
                } else {
                    String::new()
                };
                Err(format!("{}: {why}{run}", r.name))
            })
            .collect();
        let mut times = match times {
            Ok(times) => times,
            Err(why) => {
                unmatched.push(why);
                continue;
            }
        };
        times.sort_unstable();
        let Some(&total_ns) = times.get(times.len() / 2) else {
            continue; // no runs given
        };
        let secs = total_ns as f64 / 1e9;
        r.plain = Some(PlainTiming {
            total_ns,
            read_bandwidth: r.bytes_read as f64 / secs,
            write_bandwidth: r.bytes_written as f64 / secs,
        });
    }
    report.plain_run = Some(PlainRun {
        profiles: runs.iter().map(|(name, _)| name.clone()).collect(),
        unmatched,
    });
}

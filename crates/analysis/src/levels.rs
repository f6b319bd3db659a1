//! Where loads were served, per routine and per region (BSC memory tools, Table 1: "%
//! of load references by memory level, and average cost"), and the latency
//! distribution of each level (Arm SPE methodology, tables 4.4 to 4.6).

use crate::access::attribute;
use crate::{Objects, Profile};
use memlens_profile::MemLevel;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct LevelTables {
    /// How the levels and latencies were obtained.
    pub method: String,
    /// Level names in hierarchy order: the columns of every row.
    pub levels: Vec<String>,
    /// What `mean_cost` is: measured cycles, or the calibrated ns of the
    /// modelled levels; empty when the samples carry no cost.
    pub cost: String,
    pub by_routine: Vec<LevelRowShares>,
    pub by_region: Vec<LevelRowShares>,
    /// By the loads' full calling contexts (`access ← caller ← ...`; samples
    /// of instrumented code carry them).
    pub by_context: Vec<LevelRowShares>,
    pub latency: Vec<LatencyDistribution>,
    /// SPE's latency breakdown per level (Arm SPE methodology, table 4.4), when the
    /// samples carry it.
    pub spe_latency: Vec<SpeLatencyRow>,
}

/// Mean SPE latencies (cycles) of one level's load samples: total, issue
/// (dispatch to issue), translation, and execution derived as total - issue -
/// translation (Arm SPE methodology, 4.2).
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct SpeLatencyRow {
    pub level: String,
    pub samples: u64,
    pub total: f64,
    pub issue: f64,
    pub translation: f64,
    pub execution: f64,
}

/// The SPE breakdown from the samples' latency columns (read apart from the
/// other sample columns, only for SPE profiles).
fn spe_breakdown(p: &Profile) -> Vec<SpeLatencyRow> {
    if !p.meta.has(memlens_profile::Backend::Spe) {
        return Vec::new();
    }
    let Ok(rows) = memlens_profile::read_table::<memlens_profile::SampleLatencies>(&p.dir) else {
        return Vec::new();
    };
    // Per level: samples, then sums of total, issue, translation.
    let mut by_level: BTreeMap<u8, (u64, [u64; 3])> = BTreeMap::new();
    for r in rows
        .iter()
        .filter(|r| !r.is_store && p.in_view(r.pid, r.tid))
    {
        let (Some(total), Some(issue), Some(translation)) =
            (r.latency, r.issue_latency, r.translation_latency)
        else {
            continue;
        };
        let e = by_level.entry(r.level).or_default();
        e.0 += 1;
        for (sum, v) in e.1.iter_mut().zip([total, issue, translation]) {
            *sum += u64::from(v);
        }
    }
    by_level
        .into_iter()
        .map(|(level, (n, [total, issue, translation]))| {
            let mean = |v: u64| v as f64 / n as f64;
            SpeLatencyRow {
                level: MemLevel::from_code(level).name().to_string(),
                samples: n,
                total: mean(total),
                issue: mean(issue),
                translation: mean(translation),
                execution: mean(total) - mean(issue) - mean(translation),
            }
        })
        .collect()
}

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct LevelRowShares {
    pub name: String,
    pub load_samples: u64,
    /// Percent of the load samples served by each of `levels`.
    pub percent: Vec<f64>,
    /// Mean cost of the load samples that have one (see `LevelTables::cost`).
    pub mean_cost: Option<f64>,
}

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct LatencyDistribution {
    pub level: String,
    pub samples: u64,
    pub mean: f64,
    pub min: u32,
    pub median: u32,
    pub p90: u32,
    pub p99: u32,
    pub max: u32,
    /// (from, to, samples): power-of-two buckets of cycles, [from, to).
    pub histogram: Vec<(u32, u32, u64)>,
}

#[derive(Default)]
struct Tally {
    by_level: BTreeMap<u8, u64>,
    cost_sum: f64,
    with_cost: u64,
}

impl Tally {
    fn add(&mut self, level: u8, cost: Option<f64>) {
        *self.by_level.entry(level).or_default() += 1;
        if let Some(c) = cost {
            self.cost_sum += c;
            self.with_cost += 1;
        }
    }

    fn row(&self, name: String, levels: &[u8]) -> LevelRowShares {
        let loads: u64 = self.by_level.values().sum();
        LevelRowShares {
            name,
            load_samples: loads,
            percent: levels
                .iter()
                .map(|l| 100.0 * *self.by_level.get(l).unwrap_or(&0) as f64 / loads.max(1) as f64)
                .collect(),
            mean_cost: (self.with_cost > 0).then(|| self.cost_sum / self.with_cost as f64),
        }
    }
}

/// `None` when no load sample has a level (software samples without the
/// cache model).
pub fn level_tables(p: &Profile, objects: &Objects, top: usize) -> Option<LevelTables> {
    if !p.samples.iter().any(|s| !s.is_store && s.level != 0) {
        return None;
    }
    // Modelled levels are priced with the calibration's plateaus; hardware
    // samples carry their measured latency.
    let model = &p.meta.settings.cache_model;
    let modelled = !model.is_empty();
    let method = if modelled {
        format!("modelled: an LRU model of the caches {model} (size/ways/line) ran on every access; percentages of load samples")
    } else {
        format!(
            "measured by the PMU ({}): level from each sample's data source, latency in core cycles (PEBS weight, SPE total, IBS miss latency); percentages of load samples",
            memlens_profile::Backend::list(&crate::sample_sources(&p.meta))
        )
    };
    let prices = p.calibration.as_ref().filter(|_| modelled);
    let cost_of = |level: u8, latency: Option<u32>| match prices {
        Some(c) => c.model_level_ns(level),
        None if modelled => None,
        None => latency.map(f64::from),
    };
    let cost = match (prices, modelled) {
        (Some(_), _) => {
            "ns: the calibrated load latency of each modelled level (memlens calibrate)"
        }
        (None, true) => "",
        (None, false) => "cycles, measured",
    };
    let mut routines: HashMap<String, Tally> = HashMap::new();
    let mut regions: HashMap<String, Tally> = HashMap::new();
    let mut contexts: HashMap<String, Tally> = HashMap::new();
    let mut context_of: HashMap<(u32, u64), String> = HashMap::new();
    let mut latencies: BTreeMap<u8, Vec<u32>> = BTreeMap::new();
    let mut seen_levels: BTreeSet<u8> = BTreeSet::new();
    // Labels by (pid, pc): one lookup per distinct code address.
    let mut routine_of: HashMap<(u32, u64), String> = HashMap::new();
    attribute(p, objects, |i, _, open| {
        let s = &p.samples[i];
        if s.is_store {
            return;
        }
        seen_levels.insert(s.level);
        let routine = routine_of
            .entry((s.pid, s.pc))
            .or_insert_with(|| routine_label(p, s.pid, s.pc));
        let cost = cost_of(s.level, s.latency);
        routines
            .entry(routine.clone())
            .or_default()
            .add(s.level, cost);
        for &r in open {
            regions
                .entry(crate::region_label(&p.regions[r]))
                .or_default()
                .add(s.level, cost);
        }
        if s.stack_id != 0 {
            let context = context_of
                .entry((s.pid, s.stack_id))
                .or_insert_with(|| crate::access::context_frames(p, s.pid, s.stack_id).join(" ← "));
            contexts
                .entry(context.clone())
                .or_default()
                .add(s.level, cost);
        }
        if let Some(l) = s.latency {
            latencies.entry(s.level).or_default().push(l);
        }
    });
    let levels: Vec<u8> = seen_levels.into_iter().collect();
    let rows = |tallies: HashMap<String, Tally>, top: usize| {
        let mut rows: Vec<LevelRowShares> = tallies
            .into_iter()
            .map(|(name, t)| t.row(name, &levels))
            .collect();
        rows.sort_by(|a, b| {
            b.load_samples
                .cmp(&a.load_samples)
                .then(a.name.cmp(&b.name))
        });
        rows.truncate(top);
        rows
    };
    Some(LevelTables {
        method,
        cost: cost.to_string(),
        levels: levels
            .iter()
            .map(|&l| MemLevel::from_code(l).name().to_string())
            .collect(),
        by_routine: rows(routines, top),
        by_region: rows(regions, usize::MAX),
        by_context: rows(contexts, top),
        latency: latencies
            .into_iter()
            .map(|(level, mut l)| distribution(MemLevel::from_code(level).name(), &mut l))
            .collect(),
        spe_latency: spe_breakdown(p),
    })
}

/// A routine: the function of a code address, or the module it fell in.
fn routine_label(p: &Profile, pid: u32, pc: u64) -> String {
    match p.locations.get(&(pid, pc)) {
        Some(l) if !l.function.is_empty() => l.function.clone(),
        Some(l) if !l.module.is_empty() => format!("[{}]", l.module),
        _ => "[unknown code]".to_string(),
    }
}

fn distribution(level: &str, cycles: &mut [u32]) -> LatencyDistribution {
    cycles.sort_unstable();
    let at = |q: f64| cycles[((cycles.len() - 1) as f64 * q).round() as usize];
    let mut histogram: BTreeMap<u32, u64> = BTreeMap::new();
    for &c in cycles.iter() {
        *histogram.entry(c.checked_ilog2().unwrap_or(0)).or_default() += 1;
    }
    LatencyDistribution {
        level: level.to_string(),
        samples: cycles.len() as u64,
        mean: cycles.iter().map(|&c| f64::from(c)).sum::<f64>() / cycles.len() as f64,
        min: cycles[0],
        median: at(0.5),
        p90: at(0.9),
        p99: at(0.99),
        max: cycles[cycles.len() - 1],
        histogram: histogram
            .into_iter()
            .map(|(b, n)| {
                (
                    if b == 0 { 0 } else { 1 << b },
                    1u32.checked_shl(b + 1).unwrap_or(u32::MAX),
                    n,
                )
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_distribution_has_its_order_statistics_and_buckets() {
        let mut cycles: Vec<u32> = (1..=100).collect();
        let d = super::distribution("L1", &mut cycles);
        assert_eq!((d.min, d.median, d.p90, d.p99, d.max), (1, 51, 90, 99, 100));
        assert_eq!(d.mean, 50.5);
        assert_eq!(d.histogram[0], (0, 2, 1));
        assert_eq!(d.histogram[1], (2, 4, 2));
        assert_eq!(d.histogram.last(), Some(&(64, 128, 37)));
        assert_eq!(d.histogram.iter().map(|b| b.2).sum::<u64>(), 100);
    }
}

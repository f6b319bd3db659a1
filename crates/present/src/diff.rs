//! `memlens diff A B`: what changed between two runs, from their reports:
//! peaks, data objects, regions (time, exact bytes, bandwidth), memory levels
//! and counters. Objects and regions are matched by name (pids differ between
//! runs); each row keeps both values and says how they were obtained.

use crate::report::Report;
use crate::{human_bytes, seconds};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// One figure in both runs.
#[derive(Clone, Debug, Serialize)]
pub struct Change {
    pub name: String,
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// (b - a) / a; None when either is missing or a is 0.
    pub relative: Option<f64>,
}

impl Change {
    fn new(name: impl Into<String>, a: Option<f64>, b: Option<f64>) -> Change {
        let relative = match (a, b) {
            (Some(a), Some(b)) if a != 0.0 => Some((b - a) / a),
            _ => None,
        };
        Change {
            name: name.into(),
            a,
            b,
            relative,
        }
    }

    fn magnitude(&self) -> f64 {
        (self.b.unwrap_or(0.0) - self.a.unwrap_or(0.0)).abs()
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Diff {
    pub a: String,
    pub b: String,
    /// Resident set and live heap peaks (measured).
    pub peaks: Vec<Change>,
    /// Objects' peak bytes, biggest change first (measured or sampled and
    /// scaled, as each run recorded them).
    pub objects: Vec<Change>,
    /// Per region: time, exact bytes read and written, read bandwidth.
    pub regions: Vec<RegionChange>,
    /// Share of load samples per memory level (when both runs have levels).
    pub levels: Vec<Change>,
    /// Counter totals (measured or modelled as each says).
    pub counters: Vec<Change>,
}

#[derive(Clone, Debug, Serialize)]
pub struct RegionChange {
    pub name: String,
    pub time_ns: Change,
    pub bytes_read: Change,
    pub bytes_written: Change,
    pub read_bandwidth: Change,
}

/// Pairs rows of both runs by key.
fn paired<T>(
    a: impl IntoIterator<Item = (String, T)>,
    b: impl IntoIterator<Item = (String, T)>,
) -> BTreeMap<String, (Option<T>, Option<T>)> {
    let mut out: BTreeMap<String, (Option<T>, Option<T>)> = BTreeMap::new();
    for (k, v) in a {
        out.entry(k).or_insert((None, None)).0 = Some(v);
    }
    for (k, v) in b {
        out.entry(k).or_insert((None, None)).1 = Some(v);
    }
    out
}

/// Shares of load samples per level name.
fn level_shares(r: &Report) -> Vec<(String, f64)> {
    let loads: u64 = r.access.levels.iter().map(|l| l.loads).sum();
    r.access
        .levels
        .iter()
        .map(|l| (l.level.clone(), l.loads as f64 / loads.max(1) as f64))
        .collect()
}

pub fn diff(a: &Report, b: &Report, top: usize) -> Diff {
    let peaks = vec![
        Change::new(
            "resident set",
            Some(a.peak.rss_bytes as f64),
            Some(b.peak.rss_bytes as f64),
        ),
        Change::new(
            "live heap",
            Some(a.peak.heap_bytes as f64),
            Some(b.peak.heap_bytes as f64),
        ),
    ];
    let objects_of = |r: &Report| {
        let mut m: BTreeMap<String, f64> = BTreeMap::new();
        for o in r.objects_by_peak.iter().chain(&r.objects_by_allocated) {
            m.insert(format!("{} ({})", o.name, o.kind.name()), o.peak_bytes);
        }
        m
    };
    let mut objects: Vec<Change> = paired(objects_of(a), objects_of(b))
        .into_iter()
        .map(|(name, (x, y))| Change::new(name, x, y))
        .collect();
    objects.sort_by(|x, y| {
        y.magnitude()
            .total_cmp(&x.magnitude())
            .then(x.name.cmp(&y.name))
    });
    objects.truncate(top);
    let regions_of = |r: &Report| {
        r.access
            .regions
            .iter()
            .map(|g| (g.name.clone(), g.clone()))
            .collect::<Vec<_>>()
    };
    let regions = paired(regions_of(a), regions_of(b))
        .into_iter()
        .map(|(name, (x, y))| {
            let f = |get: &dyn Fn(&memlens_analysis::RegionAccess) -> f64| {
                Change::new(name.clone(), x.as_ref().map(get), y.as_ref().map(get))
            };
            RegionChange {
                time_ns: f(&|g| g.total_ns as f64),
                bytes_read: f(&|g| g.bytes_read as f64),
                bytes_written: f(&|g| g.bytes_written as f64),
                read_bandwidth: f(&|g| g.read_bandwidth),
                name,
            }
        })
        .collect();
    let levels = paired(level_shares(a), level_shares(b))
        .into_iter()
        .map(|(name, (x, y))| Change::new(name, x, y))
        .collect();
    let counters_of = |r: &Report| {
        r.counters
            .iter()
            .map(|c| (format!("{} ({}, {})", c.name, c.unit, c.method), c.total))
            .collect::<Vec<_>>()
    };
    let counters = paired(counters_of(a), counters_of(b))
        .into_iter()
        .map(|(name, (x, y))| Change::new(name, x, y))
        .collect();
    Diff {
        a: a.profile.clone(),
        b: b.profile.clone(),
        peaks,
        objects,
        regions,
        levels,
        counters,
    }
}

fn cell(v: Option<f64>, shown: &dyn Fn(f64) -> String) -> String {
    v.map_or("-".into(), shown)
}

fn change_line(out: &mut String, c: &Change, shown: &dyn Fn(f64) -> String) {
    let rel = c
        .relative
        .map_or(String::new(), |r| format!("{:+.1}%", 100.0 * r));
    let _ = writeln!(
        out,
        "  {:>12} {:>12} {:>9}  {}",
        cell(c.a, shown),
        cell(c.b, shown),
        rel,
        c.name
    );
}

pub fn render_diff(d: &Diff) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "memlens diff\n  A {}\n  B {}", d.a, d.b);
    let bytes = |v: f64| human_bytes(v);
    let _ = writeln!(
        out,
        "\nPEAKS (measured)\n  {:>12} {:>12} {:>9}",
        "A", "B", "change"
    );
    for c in &d.peaks {
        change_line(&mut out, c, &bytes);
    }
    let _ = writeln!(
        out,
        "\nDATA OBJECTS BY CHANGE OF PEAK BYTES (as each run recorded them: measured, or ~ sampled and scaled)"
    );
    for c in &d.objects {
        change_line(&mut out, c, &bytes);
    }
    if !d.regions.is_empty() {
        let _ = writeln!(
            out,
            "\nREGIONS (time measured; bytes exact for instrumented code)"
        );
        for r in &d.regions {
            let _ = writeln!(out, "  {}", r.name);
            for (what, c, shown) in [
                (
                    "time",
                    &r.time_ns,
                    &(|v: f64| seconds(v as u64)) as &dyn Fn(f64) -> String,
                ),
                ("read", &r.bytes_read, &bytes),
                ("written", &r.bytes_written, &bytes),
                ("read bandwidth", &r.read_bandwidth, &|v: f64| {
                    format!("{}/s", human_bytes(v))
                }),
            ] {
                let mut c = c.clone();
                c.name = what.into();
                change_line(&mut out, &c, shown);
            }
        }
    }
    if !d.levels.is_empty() {
        let _ = writeln!(
            out,
            "\nLOAD SAMPLES BY MEMORY LEVEL (share, as each run's samples say)"
        );
        for c in &d.levels {
            change_line(&mut out, c, &|v| format!("{:.1}%", 100.0 * v));
        }
    }
    if !d.counters.is_empty() {
        let _ = writeln!(out, "\nCOUNTERS (totals)");
        for c in &d.counters {
            change_line(&mut out, c, &|v| format!("{v:.4e}"));
        }
    }
    out
}

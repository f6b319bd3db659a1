//! `memlens diff A B`: what changed between two runs. Everything both runs
//! have is matched by what names it in the program, never by rank in a top
//! list: data objects by kind, name and whole call stack; regions by name;
//! sampled code lines by their source line; shared cache lines by the object
//! and the offset in it; reuse by object; memory levels and counters by name.
//! Rows are ranked by how much they changed, and what did not change is
//! counted instead of listed. Each figure says how it was obtained.

use crate::report::model::{Cell, Column, Row, Section, Table, Unit};
use crate::report::Report;
use serde::Serialize;
use std::collections::BTreeMap;

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

    /// Present in one run only, or different.
    fn changed(&self) -> bool {
        self.a != self.b
    }
}

/// A data object in both runs.
#[derive(Clone, Debug, Serialize)]
pub struct ObjectChange {
    pub name: String,
    pub kind: String,
    /// Its allocation stack, innermost first (heap objects), which tells
    /// apart objects of one site name.
    pub frames: Vec<String>,
    pub peak_bytes: Change,
    pub allocated_bytes: Change,
    /// Sampled accesses, scaled (samples x period); None without samples.
    pub est_accesses: Change,
}

/// A cache line two or more threads shared, in either run.
#[derive(Clone, Debug, Serialize)]
pub struct SharingChange {
    /// The object holding it and the line's offset in it.
    pub object: String,
    pub offset_in_object: Option<u64>,
    /// "false sharing", "true sharing", or none in that run.
    pub kind_a: Option<String>,
    pub kind_b: Option<String>,
    /// Sampled ownership changes.
    pub thread_switches: Change,
}

#[derive(Clone, Debug, Serialize)]
pub struct Diff {
    pub a: String,
    pub b: String,
    /// Resident set and live heap peaks (measured).
    pub peaks: Vec<Change>,
    /// Data objects that changed, biggest change of peak (then accesses)
    /// first (measured or sampled and scaled, as each run recorded them).
    pub objects: Vec<ObjectChange>,
    /// Objects in both runs with the same figures.
    pub unchanged_objects: usize,
    /// Per region: time, exact bytes read and written, read bandwidth.
    pub regions: Vec<RegionChange>,
    /// Sampled accesses per source line (samples x period), biggest change first.
    pub lines: Vec<Change>,
    pub unchanged_lines: usize,
    /// Cache lines shared between threads in either run.
    pub sharing: Vec<SharingChange>,
    /// Mean reuse distance per object (when both runs followed reuse).
    pub reuse: Vec<Change>,
    /// Share of load samples per memory level (when both runs have levels).
    pub levels: Vec<Change>,
    /// Counter totals (measured or modelled as each says).
    pub counters: Vec<CounterChange>,
}

/// A counter's total in both runs, with the unit it counts in.
#[derive(Clone, Debug, Serialize)]
pub struct CounterChange {
    #[serde(flatten)]
    pub change: Change,
    pub unit: String,
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
fn paired<K: Ord, T>(
    a: impl IntoIterator<Item = (K, T)>,
    b: impl IntoIterator<Item = (K, T)>,
) -> BTreeMap<K, (Option<T>, Option<T>)> {
    let mut out: BTreeMap<K, (Option<T>, Option<T>)> = BTreeMap::new();
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

/// A name as it matches across builds: the program's own module is named by
/// its file, which two builds of it may not share.
fn matching_name(r: &Report, name: &str) -> String {
    let exes = (r.summary.processes.iter())
        .filter_map(|p| std::path::Path::new(&p.exe).file_name()?.to_str());
    for exe in exes {
        if let Some(symbol) = name.strip_suffix(&format!(" [{exe}]")) {
            return format!("{symbol} [the program]");
        }
    }
    name.to_string()
}

/// Each run's data objects by (kind, name, stack): peak and allocated bytes.
fn objects_of(r: &Report) -> BTreeMap<(String, String, Vec<String>), (f64, f64)> {
    let mut out: BTreeMap<_, (f64, f64)> = BTreeMap::new();
    for o in &r.objects_by_peak {
        // A thread's stack is named by its tid, which differs run to run:
        // the threads' stacks are one object.
        let key = match o.kind {
            memlens_analysis::ObjectKind::Stack => (
                o.kind.name().to_string(),
                "thread stacks (reserved)".to_string(),
                Vec::new(),
            ),
            _ => (
                o.kind.name().to_string(),
                matching_name(r, &o.name),
                o.frames.iter().map(|f| matching_name(r, f)).collect(),
            ),
        };
        let e = out.entry(key).or_default();
        // One program's processes (a fork) hold the same objects: summed.
        e.0 += o.peak_bytes;
        e.1 += o.allocated_bytes;
    }
    out
}

/// Each run's sampled accesses per (kind, name) and per source line.
fn accesses_of(r: &Report) -> (AccessesByObject, BTreeMap<String, f64>) {
    let period = r.summary.settings.access_period.max(1) as f64;
    let mut objects = AccessesByObject::new();
    let mut lines: BTreeMap<String, f64> = BTreeMap::new();
    for o in &r.access.objects {
        let kind = o.kind.map_or("unknown", |k| k.name()).to_string();
        *objects
            .entry((kind, matching_name(r, &o.name)))
            .or_default() += o.est_accesses;
        for l in &o.lines {
            *lines.entry(l.location.clone()).or_default() += l.samples as f64 * period;
        }
    }
    (objects, lines)
}

/// The reports of `diff` list every object, line and shared line: built
/// with this many rows per list.
pub const DIFF_ROWS: usize = usize::MAX;

/// What changed from `a` to `b` (reports built with [`DIFF_ROWS`] rows);
/// `top` rows per list.
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
    let (accesses_a, accesses_b) = (accesses_of(a), accesses_of(b));
    let (objects, unchanged_objects) = object_changes((a, &accesses_a.0), (b, &accesses_b.0), top);
    let (lines, unchanged_lines) = match a.access.available && b.access.available {
        true => line_changes(accesses_a.1, accesses_b.1, top),
        false => (Vec::new(), 0),
    };
    let levels = paired(level_shares(a), level_shares(b))
        .into_iter()
        .map(|(name, (x, y))| Change::new(name, x, y))
        .collect();
    Diff {
        a: a.profile.clone(),
        b: b.profile.clone(),
        peaks,
        objects,
        unchanged_objects,
        regions: region_changes(a, b),
        lines,
        unchanged_lines,
        sharing: sharing_changes(a, b, top),
        reuse: reuse_changes(a, b),
        levels,
        counters: counter_changes(a, b),
    }
}

/// Estimated accesses of each object, by (kind, name).
type AccessesByObject = BTreeMap<(String, String), f64>;

/// The objects whose peak, bytes allocated or estimated accesses changed,
/// most changed first (`top` of them), and how many did not change.
fn object_changes(
    (a, acc_a): (&Report, &AccessesByObject),
    (b, acc_b): (&Report, &AccessesByObject),
    top: usize,
) -> (Vec<ObjectChange>, usize) {
    let sampled = |r: &Report| r.access.available;
    let accesses = |acc: &AccessesByObject, r: &Report, kind: &str, name: &str| {
        sampled(r).then(|| {
            acc.get(&(kind.to_string(), name.to_string()))
                .copied()
                .unwrap_or(0.0)
        })
    };
    let mut objects: Vec<ObjectChange> = paired(objects_of(a), objects_of(b))
        .into_iter()
        .map(|((kind, name, frames), (x, y))| ObjectChange {
            peak_bytes: Change::new("peak", x.map(|v| v.0), y.map(|v| v.0)),
            allocated_bytes: Change::new("allocated", x.map(|v| v.1), y.map(|v| v.1)),
            est_accesses: Change::new(
                "accesses",
                accesses(acc_a, a, &kind, &name),
                accesses(acc_b, b, &kind, &name),
            ),
            name,
            kind,
            frames,
        })
        .collect();
    let before = objects.len();
    objects.retain(|o| {
        o.peak_bytes.changed() || o.allocated_bytes.changed() || o.est_accesses.changed()
    });
    let unchanged_objects = before - objects.len();
    objects.sort_by(|x, y| {
        (y.peak_bytes
            .magnitude()
            .total_cmp(&x.peak_bytes.magnitude()))
        .then(
            y.est_accesses
                .magnitude()
                .total_cmp(&x.est_accesses.magnitude()),
        )
        .then(x.name.cmp(&y.name))
    });
    objects.truncate(top);
    (objects, unchanged_objects)
}

/// The source lines whose estimated accesses changed, most changed first,
/// and how many did not.
fn line_changes(
    lines_a: BTreeMap<String, f64>,
    lines_b: BTreeMap<String, f64>,
    top: usize,
) -> (Vec<Change>, usize) {
    let mut lines: Vec<Change> = paired(lines_a, lines_b)
        .into_iter()
        .map(|(name, (x, y))| Change::new(name, Some(x.unwrap_or(0.0)), Some(y.unwrap_or(0.0))))
        .collect();
    let before = lines.len();
    lines.retain(Change::changed);
    let unchanged_lines = before - lines.len();
    lines.sort_by(|x, y| {
        y.magnitude()
            .total_cmp(&x.magnitude())
            .then(x.name.cmp(&y.name))
    });
    lines.truncate(top);
    (lines, unchanged_lines)
}

/// Each region's time, bytes and read bandwidth in both runs.
fn region_changes(a: &Report, b: &Report) -> Vec<RegionChange> {
    let regions_of = |r: &Report| {
        (r.access.regions.iter())
            .map(|g| (g.name.clone(), g.clone()))
            .collect::<Vec<_>>()
    };
    paired(regions_of(a), regions_of(b))
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
        .collect()
}

/// The cache lines shared by threads, by the ownership changes between them.
fn sharing_changes(a: &Report, b: &Report, top: usize) -> Vec<SharingChange> {
    let shared_of = |r: &Report| {
        (r.sharing.iter())
            .map(|l| {
                (
                    (l.object.clone(), l.offset_in_object),
                    (l.kind.clone(), l.thread_switches as f64),
                )
            })
            .collect::<Vec<_>>()
    };
    let mut sharing: Vec<SharingChange> = paired(shared_of(a), shared_of(b))
        .into_iter()
        .map(|((object, offset_in_object), (x, y))| SharingChange {
            thread_switches: Change::new(
                "ownership changes",
                Some(x.as_ref().map_or(0.0, |v| v.1)),
                Some(y.as_ref().map_or(0.0, |v| v.1)),
            ),
            kind_a: x.map(|v| v.0),
            kind_b: y.map(|v| v.0),
            object,
            offset_in_object,
        })
        .collect();
    sharing.sort_by(|x, y| {
        y.thread_switches
            .magnitude()
            .total_cmp(&x.thread_switches.magnitude())
    });
    sharing.truncate(top);

    sharing
}

/// Each object's mean reuse distance, when both runs measured reuse.
fn reuse_changes(a: &Report, b: &Report) -> Vec<Change> {
    let reuse_of = |r: &Report| {
        (r.reuse.content.iter().flat_map(|reuse| &reuse.objects))
            .filter_map(|o| Some((o.name.clone(), o.histogram.mean_distance?)))
            .collect::<Vec<_>>()
    };
    match (&a.reuse.content, &b.reuse.content) {
        (Some(_), Some(_)) => paired(reuse_of(a), reuse_of(b))
            .into_iter()
            .map(|(name, (x, y))| Change::new(name, x, y))
            .collect(),
        _ => Vec::new(),
    }
}

/// Each counter's total in both runs.
fn counter_changes(a: &Report, b: &Report) -> Vec<CounterChange> {
    let counters_of = |r: &Report| {
        r.counters
            .iter()
            .map(|c| {
                let name = format!("{} ({}, {})", c.name, c.unit, c.method);
                ((name, c.unit.clone()), c.total)
            })
            .collect::<Vec<_>>()
    };
    paired(counters_of(a), counters_of(b))
        .into_iter()
        .map(|((name, unit), (x, y))| CounterChange {
            change: Change::new(name, x, y),
            unit,
        })
        .collect()
}

/// How a diff's table writes one run's figure.
type Shown<'a> = &'a dyn Fn(f64) -> Cell;

/// A table of changes: A, B and the relative change, then the columns that
/// name each row.
fn change_table(names: &[&str]) -> Table {
    // A and B carry no value: a table's rows may count in different units.
    let mut columns = vec![
        Column::number("A"),
        Column::number("B"),
        Column::measure("change", Unit::Percent),
    ];
    columns.extend(names.iter().map(|&n| Column::text(n)));
    Table::new(columns)
}

/// A row of a change table: both figures, the change ("new" and "gone" for
/// one run's), and the row's names.
fn change_row(c: &Change, shown: Shown, names: Vec<String>) -> Row {
    let figure = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| shown(v).text);
    let change = match (c.a, c.b, c.relative) {
        (_, _, Some(r)) => Cell::measured(format!("{:+.1}%", 100.0 * r), 100.0 * r),
        (None, Some(_), _) => "new".to_string().into(),
        (Some(_), None, _) => "gone".to_string().into(),
        _ => String::new().into(),
    };
    let mut row = Row::from(vec![figure(c.a).into(), figure(c.b).into(), change]);
    for name in names {
        row.push(name);
    }
    row
}

/// A diff as the sections every rendering draws.
pub fn diff_sections(d: &Diff) -> Vec<Section> {
    let bytes = |v: f64| Cell::bytes(v);
    let count = |v: f64| Cell::estimate(v);
    let mut sections = Vec::new();
    let mut peaks = change_table(&["what"]);
    for c in &d.peaks {
        peaks.push(change_row(c, &bytes, vec![c.name.clone()]));
    }
    sections.push(Section::new("peaks", "Peaks").note("measured").table(peaks));
    let mut objects = change_table(&["figure", "object"])
        .or_else("none")
        .footer(format!(
            "({} objects of both runs unchanged)",
            d.unchanged_objects
        ));
    for o in &d.objects {
        let name = format!("{} [{}]", o.name, o.kind);
        for (what, c, shown) in [
            ("peak", &o.peak_bytes, &bytes as Shown),
            ("allocated", &o.allocated_bytes, &bytes),
            ("accesses", &o.est_accesses, &count),
        ] {
            if c.a.unwrap_or(0.0) != 0.0 || c.b.unwrap_or(0.0) != 0.0 {
                objects.push(change_row(c, shown, vec![what.into(), name.clone()]));
            }
        }
    }
    sections.push(
        Section::new("objects", "Data objects that changed")
            .note("matched by kind, name and call stack; as each run recorded them: measured, or ~ sampled and scaled")
            .table(objects),
    );
    if !d.regions.is_empty() {
        let mut t = change_table(&["figure", "region"]);
        let time = |v: f64| Cell::seconds(v as u64);
        let bandwidth = |v: f64| Cell::measured(crate::format::rate(v), v);
        for r in &d.regions {
            for (what, c, shown) in [
                ("time", &r.time_ns, &time as Shown),
                ("read", &r.bytes_read, &bytes),
                ("written", &r.bytes_written, &bytes),
                ("read bandwidth", &r.read_bandwidth, &bandwidth),
            ] {
                t.push(change_row(c, shown, vec![what.into(), r.name.clone()]));
            }
        }
        sections.push(
            Section::new("regions", "Regions")
                .note("time measured; bytes exact for instrumented code")
                .table(t),
        );
    }
    if !d.lines.is_empty() {
        let mut t = change_table(&["line"]).footer(format!(
            "({} lines of both runs unchanged)",
            d.unchanged_lines
        ));
        for c in &d.lines {
            t.push(change_row(c, &count, vec![c.name.clone()]));
        }
        sections.push(
            Section::new("lines", "Source lines by change of sampled accesses")
                .note("samples x period")
                .table(t),
        );
    }
    if !d.sharing.is_empty() {
        let mut t = change_table(&["line", "sharing"]);
        let kind = |k: &Option<String>| k.clone().unwrap_or_else(|| "not shared".into());
        for s in &d.sharing {
            let line = format!("{} +{}", s.object, s.offset_in_object.unwrap_or(0));
            let sharing = format!("{} -> {}", kind(&s.kind_a), kind(&s.kind_b));
            t.push(change_row(&s.thread_switches, &count, vec![line, sharing]));
        }
        sections.push(
            Section::new("sharing", "Cache lines shared between threads")
                .note("sampled ownership changes")
                .table(t),
        );
    }
    if !d.reuse.is_empty() {
        let mut t = change_table(&["object"]);
        for c in &d.reuse {
            t.push(change_row(c, &|v| Cell::fixed(v, 1), vec![c.name.clone()]));
        }
        sections.push(
            Section::new("reuse", "Mean reuse distance by object")
                .note("distinct lines between a use and its reuse")
                .table(t),
        );
    }
    if !d.levels.is_empty() {
        let mut t = change_table(&["level"]);
        for c in &d.levels {
            t.push(change_row(
                c,
                &|v| Cell::percent(100.0 * v, 1),
                vec![c.name.clone()],
            ));
        }
        sections.push(
            Section::new("levels", "Load samples by memory level")
                .note("share, as each run's samples say")
                .table(t),
        );
    }
    if !d.counters.is_empty() {
        let mut t = change_table(&["counter"]);
        for c in &d.counters {
            let shown = |v: f64| Cell::from(crate::format::counter_value(v, &c.unit));
            t.push(change_row(&c.change, &shown, vec![c.change.name.clone()]));
        }
        sections.push(Section::new("counters", "Counters").note("totals").table(t));
    }
    sections
}

pub fn render_diff(d: &Diff) -> String {
    let head = format!("memlens diff\n  A {}\n  B {}\n", d.a, d.b);
    // Names and paths from the programs, escaped for the terminal.
    memlens_profile::printable_document(&head).into_owned()
        + &crate::report::text::sections_text(&diff_sections(d))
}

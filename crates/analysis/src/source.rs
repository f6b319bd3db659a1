//! Source lines by their sampled accesses: per file and line, the samples,
//! the loads and stores among them, the bytes they stand for, where the
//! loads were served, and the objects and regions they touched. DrCCTProf's
//! source view and VTune's source pane show these per line; the HTML
//! report's source pane draws them beside the file's text.

use crate::access::{attribute, sample_sources, samples_are_accesses, samples_are_sized};
use crate::{Objects, Profile};
use memlens_profile::MemLevel;
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::{BTreeSet, HashMap};

/// Objects and regions kept per line: the samples of the objects beyond
/// these are summed in `other_objects`; further regions are left out.
const PER_LINE: usize = 32;

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct SourceLines {
    /// One sample per `period` accesses of a class: figures are samples x
    /// period (sampled and scaled).
    pub period: u64,
    /// Whether the samples are loads and stores (false: page faults, which
    /// count no bytes and are neither).
    pub samples_are_accesses: bool,
    /// Whether the samples carry their access size (instrumented code): the
    /// lines' bytes are figures only then.
    pub samples_are_sized: bool,
    /// Level names, in hierarchy order, of each line's `load_levels` (empty
    /// when no sample carries a level).
    pub levels: Vec<String>,
    /// Most sampled first.
    pub lines: Vec<LineFigures>,
    /// Lines with samples that `lines` leaves out, and their samples.
    pub lines_left_out: u64,
    pub samples_left_out: u64,
    /// Samples at code without line information, per module: (module, samples).
    pub without_line: Vec<(String, u64)>,
}

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct LineFigures {
    /// As the debug information names it (absolute when the compiler knew
    /// its directory).
    pub file: String,
    pub line: u32,
    /// The function most of its samples were in (an inlined line can be in
    /// several).
    pub function: String,
    pub module: String,
    pub samples: u64,
    pub load_samples: u64,
    pub store_samples: u64,
    /// Sampled bytes x period, as the objects' figures.
    pub est_bytes_read: f64,
    pub est_bytes_written: f64,
    /// Load samples served by each of `SourceLines::levels`.
    pub load_levels: Vec<u64>,
    /// The objects its samples touched, most first: (name as the object
    /// tables give it, samples); at most 32, the rest in `other_objects`.
    pub objects: Vec<(String, u64)>,
    pub other_objects: u64,
    /// The regions open at its samples, most first: (name, samples).
    pub regions: Vec<(String, u64)>,
    /// Its first and last sample's time (ns since the run's start).
    pub first_ns: u64,
    pub last_ns: u64,
}

/// What the samples at one code address, or on one line, add up to.
#[derive(Default)]
struct Tally {
    loads: u64,
    stores: u64,
    bytes: [u64; 2],
    levels: FxHashMap<u8, u64>,
    objects: FxHashMap<Option<usize>, u64>,
    regions: FxHashMap<usize, u64>,
    /// The first and last sample's time.
    span: Option<(u64, u64)>,
}

impl Tally {
    fn at(&mut self, time_ns: u64) {
        self.span = Some(self.span.map_or((time_ns, time_ns), |(first, last)| {
            (first.min(time_ns), last.max(time_ns))
        }));
    }

    fn add(&mut self, other: Tally) {
        if let Some((first, last)) = other.span {
            self.at(first);
            self.at(last);
        }
        self.loads += other.loads;
        self.stores += other.stores;
        self.bytes[0] += other.bytes[0];
        self.bytes[1] += other.bytes[1];
        add_counts(&mut self.levels, other.levels);
        add_counts(&mut self.objects, other.objects);
        add_counts(&mut self.regions, other.regions);
    }
}

fn add_counts<K: std::hash::Hash + Eq>(into: &mut FxHashMap<K, u64>, from: FxHashMap<K, u64>) {
    for (k, n) in from {
        *into.entry(k).or_default() += n;
    }
}

/// Every sampled source line's figures, the `at_most` most sampled kept.
pub fn source_lines(p: &Profile, objects: &Objects, at_most: usize) -> SourceLines {
    let sources = sample_sources(&p.meta);
    let samples_are_accesses = samples_are_accesses(&sources);
    let period = p.meta.settings.access_period;
    // Tallied by code address first (an integer key per sample, where a
    // line's key is a file name), then by line: a run's millions of samples
    // come from a few thousand addresses.
    let mut by_pc: FxHashMap<(u32, u64), Tally> = FxHashMap::default();
    let mut seen_levels: BTreeSet<u8> = BTreeSet::new();
    attribute(p, objects, |i, hit, open| {
        let s = &p.samples[i];
        let t = by_pc.entry((s.pid, s.pc)).or_default();
        t.at(s.time_ns);
        if s.is_store {
            t.stores += 1;
        } else {
            t.loads += 1;
            if s.level != 0 {
                seen_levels.insert(s.level);
                *t.levels.entry(s.level).or_default() += 1;
            }
        }
        t.bytes[s.is_store as usize] += u64::from(s.size);
        *t.objects.entry(hit.map(|h| h.object)).or_default() += 1;
        for &r in open {
            *t.regions.entry(r).or_default() += 1;
        }
    });
    // Each line's tally and its samples by (function, module).
    type Functions<'p> = HashMap<(&'p str, &'p str), u64>;
    let mut by_line: HashMap<(&str, u32), (Tally, Functions)> = HashMap::new();
    let mut without_line: HashMap<&str, u64> = HashMap::new();
    for ((pid, pc), t) in by_pc {
        let samples = t.loads + t.stores;
        let location = p.locations.get(&(pid, pc));
        let Some(l) = location.filter(|l| !l.file.is_empty() && l.line > 0) else {
            let module = location.map_or("", |l| l.module.as_str());
            *without_line.entry(module).or_default() += samples;
            continue;
        };
        let (tally, functions) = by_line.entry((&l.file, l.line)).or_default();
        *functions.entry((&l.function, &l.module)).or_default() += samples;
        tally.add(t);
    }
    let levels: Vec<u8> = seen_levels.into_iter().collect();
    let scaled = |n: u64| {
        if samples_are_accesses {
            n as f64 * period as f64
        } else {
            0.0
        }
    };
    let mut lines: Vec<LineFigures> = (by_line.into_iter())
        .map(|((file, line), (t, functions))| {
            let (function, module) = (functions.iter())
                .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
                .map_or(("", ""), |(k, _)| *k);
            let (objects, other_objects) =
                most_first(t.objects.into_iter().map(|(o, n)| (objects.name_of(o), n)));
            let (regions, _) = most_first(
                (t.regions.into_iter()).map(|(r, n)| (crate::region_label(&p.regions[r]), n)),
            );
            LineFigures {
                file: file.to_string(),
                line,
                function: function.to_string(),
                module: module.to_string(),
                samples: t.loads + t.stores,
                load_samples: t.loads,
                store_samples: t.stores,
                est_bytes_read: scaled(t.bytes[0]),
                est_bytes_written: scaled(t.bytes[1]),
                load_levels: (levels.iter())
                    .map(|l| t.levels.get(l).copied().unwrap_or(0))
                    .collect(),
                objects,
                other_objects,
                regions,
                first_ns: t.span.map_or(0, |s| s.0),
                last_ns: t.span.map_or(0, |s| s.1),
            }
        })
        .collect();
    lines.sort_by(|a, b| {
        (b.samples.cmp(&a.samples))
            .then_with(|| a.file.cmp(&b.file))
            .then(a.line.cmp(&b.line))
    });
    let left_out = lines.split_off(at_most.min(lines.len()));
    let mut without_line: Vec<(String, u64)> = (without_line.into_iter())
        .map(|(m, n)| (if m.is_empty() { "unknown code" } else { m }.to_string(), n))
        .collect();
    without_line.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    SourceLines {
        period,
        samples_are_accesses,
        samples_are_sized: samples_are_accesses && samples_are_sized(&sources),
        levels: (levels.iter())
            .map(|&l| MemLevel::from_code(l).name().to_string())
            .collect(),
        lines,
        lines_left_out: left_out.len() as u64,
        samples_left_out: left_out.iter().map(|l| l.samples).sum(),
        without_line,
    }
}

impl SourceLines {
    /// The `n` most sampled lines, the others counted as left out.
    pub fn most(&self, n: usize) -> SourceLines {
        let kept = n.min(self.lines.len());
        let rest = &self.lines[kept..];
        SourceLines {
            lines: self.lines[..kept].to_vec(),
            lines_left_out: self.lines_left_out + rest.len() as u64,
            samples_left_out: self.samples_left_out + rest.iter().map(|l| l.samples).sum::<u64>(),
            levels: self.levels.clone(),
            without_line: self.without_line.clone(),
            ..*self
        }
    }
}

/// Names by samples, most first (ties by name), the first [`PER_LINE`]
/// kept and the samples of the rest summed; names that repeat (one name
/// in two processes) summed into one.
fn most_first(counts: impl Iterator<Item = (String, u64)>) -> (Vec<(String, u64)>, u64) {
    let mut merged: HashMap<String, u64> = HashMap::new();
    for (name, n) in counts {
        *merged.entry(name).or_default() += n;
    }
    let mut list: Vec<(String, u64)> = merged.into_iter().collect();
    list.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let rest = list.split_off(PER_LINE.min(list.len()));
    (list, rest.iter().map(|(_, n)| n).sum())
}

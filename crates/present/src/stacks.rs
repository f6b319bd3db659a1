//! A profile as weighted call stacks, the shape flame graphs and other
//! profilers' formats share: allocation stacks weighed by heaptrack's and
//! pprof's heap measures, and access samples under their object's allocation
//! stack, the object, then the access's calling context (DrCCTProf's
//! data-centric tree).

use crate::plot::PlotData;
use memlens_analysis as analysis;
use memlens_profile::{code_label, Profile};
use std::collections::HashMap;

/// One frame of an exported stack: code, or a node memlens adds (an object,
/// an access kind), which has no file.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    pub function: String,
    pub file: String,
    pub line: u32,
    pub module: String,
}

impl Node {
    fn added(name: String) -> Node {
        Node {
            function: name,
            file: String::new(),
            line: 0,
            module: String::new(),
        }
    }

    /// The frame as the report names it: `function (file:line)`.
    pub fn label(&self) -> String {
        code_label(&self.function, &self.file, self.line, &self.module)
    }
}

/// A stack, root first, with one value per measure of its [`Stacks`], and
/// when its stacks are sliced, each measure's value by slice of time
/// (`(slice, value)`, slices rising; empty for a measure not sliced).
pub struct Weighted {
    pub stack: Vec<Node>,
    pub values: Vec<f64>,
    pub by_slice: Vec<Vec<(u32, f64)>>,
}

/// A run cut into `count` equal slices of time up to `end_ns` (the
/// profile's clock), to weigh stacks by when their weight came: the HTML
/// page's flame graphs of a time range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slices {
    pub end_ns: u64,
    pub count: u32,
}

impl Slices {
    /// The slice of an instant (one after the end is in the last).
    pub fn of(&self, time_ns: u64) -> u32 {
        let at = time_ns as u128 * self.count as u128 / self.end_ns.max(1) as u128;
        at.min(self.count.saturating_sub(1) as u128) as u32
    }

    /// Where slice `slice` begins.
    fn start(&self, slice: u32) -> f64 {
        self.end_ns as f64 * slice as f64 / self.count as f64
    }

    /// `value`, which came over `[from, to]`, shared among the slices by
    /// their overlap with it, in time order (one slice for an instant).
    fn spread(&self, from: u64, to: u64, value: f64, mut add: impl FnMut(u32, f64)) {
        let (first, last) = (self.of(from), self.of(to.max(from)));
        if first == last {
            return add(first, value);
        }
        let span = (to - from) as f64;
        for slice in first..=last {
            let begin = self.start(slice).max(from as f64);
            let end = match slice == last {
                true => to as f64,
                false => self.start(slice + 1).min(to as f64),
            };
            add(slice, value * (end - begin).max(0.0) / span);
        }
    }
}

/// Adds `value` at `slice` to a row's slices (kept in slice order; a zero
/// adds nothing).
fn add_at(slices: &mut Vec<(u32, f64)>, slice: u32, value: f64) {
    if value == 0.0 {
        return;
    }
    match slices.binary_search_by_key(&slice, |s| s.0) {
        Ok(at) => slices[at].1 += value,
        Err(at) => slices.insert(at, (slice, value)),
    }
}

/// What a stack is weighed by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    /// Blocks allocated (heap blocks and mappings).
    AllocObjects,
    /// Bytes allocated.
    AllocSpace,
    /// Bytes live at the process's heap peak (heap blocks).
    InuseSpace,
    /// Blocks live at exit (heap blocks).
    LeakedObjects,
    /// Bytes live at exit (heap blocks).
    LeakedSpace,
    /// Heap blocks freed by the process's next heap event after their
    /// allocation (heaptrack's temporary allocations): counted only when
    /// every block was recorded, so not one of [`Measure::ALLOCATION`].
    TemporaryObjects,
    /// Access samples.
    AccessSamples,
    /// Accesses: samples times the sampling period.
    Accesses,
}

impl Measure {
    pub const ALLOCATION: [Measure; 5] = [
        Measure::AllocObjects,
        Measure::AllocSpace,
        Measure::InuseSpace,
        Measure::LeakedObjects,
        Measure::LeakedSpace,
    ];
    pub const ACCESS: [Measure; 2] = [Measure::AccessSamples, Measure::Accesses];

    /// pprof's sample type and unit names (Go's heap profiles use the first four).
    pub fn name_and_unit(self) -> (&'static str, &'static str) {
        match self {
            Measure::AllocObjects => ("alloc_objects", "count"),
            Measure::AllocSpace => ("alloc_space", "bytes"),
            Measure::InuseSpace => ("inuse_space", "bytes"),
            Measure::LeakedObjects => ("leaked_objects", "count"),
            Measure::LeakedSpace => ("leaked_space", "bytes"),
            Measure::TemporaryObjects => ("temporary_objects", "count"),
            Measure::AccessSamples => ("samples", "count"),
            Measure::Accesses => ("accesses", "count"),
        }
    }

    /// What is weighed, for a title.
    pub fn what(self) -> &'static str {
        match self {
            Measure::AllocObjects => "blocks allocated",
            Measure::AllocSpace => "bytes allocated",
            Measure::InuseSpace => "bytes live at the heap's peak",
            Measure::LeakedObjects => "blocks leaked (live at exit)",
            Measure::LeakedSpace => "bytes leaked (live at exit)",
            Measure::TemporaryObjects => "temporary allocations",
            Measure::AccessSamples => "access samples",
            Measure::Accesses => "accesses",
        }
    }

    /// What one unit of the measure is: bytes, blocks, samples or accesses.
    pub fn counted(self) -> &'static str {
        match self {
            Measure::AllocSpace | Measure::InuseSpace | Measure::LeakedSpace => "bytes",
            Measure::AllocObjects | Measure::LeakedObjects | Measure::TemporaryObjects => "blocks",
            Measure::AccessSamples => "samples",
            Measure::Accesses => "accesses",
        }
    }

    /// How the figures were obtained, for a title.
    pub fn how(self) -> &'static str {
        match self {
            Measure::AccessSamples => "sampled",
            Measure::Accesses => "sampled and scaled",
            Measure::TemporaryObjects => "measured, every block recorded",
            _ => "measured; byte-sampled blocks scaled",
        }
    }
}

/// The profile's stacks, each weighed by every measure of one family.
pub struct Stacks {
    pub measures: Vec<Measure>,
    pub rows: Vec<Weighted>,
    /// The slices the rows' values are split by, and which measures are
    /// (those whose times the profile holds); `None`: not sliced.
    pub slicing: Option<(Slices, Vec<Measure>)>,
}

impl Stacks {
    /// Allocation stacks when `measure` is one of [`Measure::ALLOCATION`]
    /// or temporary allocations, access stacks otherwise; an error when the
    /// profile lacks the measure (no samples; temporaries not counted).
    pub fn of(p: &Profile, measure: Measure) -> Result<Stacks, String> {
        match Measure::ACCESS.contains(&measure) {
            true => Stacks::sliced(&PlotData::new(p), measure, None),
            false => Stacks::checked(allocation_stacks(p, None), measure),
        }
    }

    /// As [`Stacks::of`] of the profile `d` holds, each row's values also
    /// split by `slices`.
    pub fn sliced(
        d: &PlotData,
        measure: Measure,
        slices: Option<Slices>,
    ) -> Result<Stacks, String> {
        let stacks = match Measure::ACCESS.contains(&measure) {
            true => access_stacks(d, false, slices)?,
            false => allocation_stacks(d.p, slices),
        };
        Stacks::checked(stacks, measure)
    }

    /// `stacks`, or an error when they lack `measure`.
    fn checked(stacks: Stacks, measure: Measure) -> Result<Stacks, String> {
        match stacks.measures.contains(&measure) {
            true => Ok(stacks),
            false => Err("temporary allocations are counted only when every heap block is recorded: record again with `--leaks`".into()),
        }
    }

    /// The load samples' access stacks under the memory level that served
    /// each (an error when no load sample carries a level).
    pub fn loads_by_level(d: &PlotData, slices: Option<Slices>) -> Result<Stacks, String> {
        if !d.p.samples.iter().any(|s| !s.is_store && s.level != 0) {
            return Err("no load sample carries a memory level: levels come from hardware samples (PEBS, IBS, SPE) or `memlens record --cache-model`".into());
        }
        access_stacks(d, true, slices)
    }

    /// Which of `measures` a measure is (one of them: [`Stacks::of`]
    /// checks).
    pub fn index(&self, measure: Measure) -> usize {
        self.measures
            .iter()
            .position(|&m| m == measure)
            .unwrap_or_default()
    }
}

fn stack_of(p: &Profile, pid: u32, id: u64) -> Vec<Node> {
    p.stacks.get(&(pid, id)).map_or_else(Vec::new, |frames| {
        (frames.iter().rev())
            .map(|f| Node {
                function: f.function.clone(),
                file: f.file.clone(),
                line: f.line,
                module: f.module.clone(),
            })
            .collect()
    })
}

/// An allocation's stack, root first; a stack-less one is named by `what`.
pub fn allocation_stack(p: &Profile, pid: u32, stack_id: u64, what: &str) -> Vec<Node> {
    let mut stack = stack_of(p, pid, stack_id);
    if stack.is_empty() {
        stack.push(Node::added(format!("[{what} without a recorded stack]")));
    }
    stack
}

/// Heap sites by their sums, mappings by their rows; temporary allocations
/// among the measures when every heap site counted them. Sliced, a site's
/// allocations come as its timeline's running totals step (see
/// [`SiteSlices`]), its leaks at its leaked blocks' allocations, a mapping
/// at its own; bytes live at the heap's peak are of one instant, not sliced.
fn allocation_stacks(p: &Profile, slices: Option<Slices>) -> Stacks {
    let temporaries_counted = !p.sites.is_empty() && p.sites.iter().all(|s| s.temporary.is_some());
    let mut measures = Measure::ALLOCATION.to_vec();
    if temporaries_counted {
        measures.push(Measure::TemporaryObjects);
    }
    let mut by_slice = slices.map(|slices| SiteSlices::of(p, slices, temporaries_counted));
    let mut rows = Vec::new();
    let mut push = |pid, stack_id, what: &str, values: Vec<f64>, by_slice| {
        let stack = allocation_stack(p, pid, stack_id, what);
        rows.push(Weighted {
            stack,
            values,
            by_slice,
        });
    };
    for (i, s) in p.sites.iter().enumerate() {
        let mut values = vec![
            s.allocations,
            s.bytes,
            s.bytes_at_peak,
            s.leaked,
            s.leaked_bytes,
        ];
        if temporaries_counted {
            values.push(s.temporary.unwrap_or_default() as f64);
        }
        let slices = (by_slice.as_mut()).map_or_else(Vec::new, |b| std::mem::take(&mut b.rows[i]));
        push(s.pid, s.stack_id, "heap block", values, slices);
    }
    for a in p.allocations.iter().filter(|a| a.kind == "mmap") {
        let mut values = vec![a.est_count, a.est_bytes, 0.0, 0.0, 0.0];
        values.resize(measures.len(), 0.0);
        let slices = match slices {
            Some(slices) => {
                let at = slices.of(a.alloc_ns);
                let mut by = vec![Vec::new(); measures.len()];
                by[0].push((at, a.est_count));
                by[1].push((at, a.est_bytes));
                by
            }
            None => Vec::new(),
        };
        push(a.pid, a.stack_id, "mapping", values, slices);
    }
    let slicing = by_slice.map(|b| {
        let sliced = (measures.iter().copied())
            .filter(|m| match m {
                Measure::AllocObjects | Measure::AllocSpace => b.allocations_timed,
                Measure::TemporaryObjects => b.allocations_timed && b.temporaries_timed,
                Measure::LeakedObjects | Measure::LeakedSpace => true,
                _ => false,
            })
            .collect();
        (b.slices, sliced)
    });
    Stacks {
        measures,
        rows,
        slicing,
    }
}

/// Each heap site's measures by slice of time, in the order of
/// [`Measure::ALLOCATION`] then temporaries.
struct SiteSlices {
    slices: Slices,
    rows: Vec<Vec<Vec<(u32, f64)>>>,
    /// The sites' timelines hold their running totals (profiles written
    /// before they did do not), and their temporaries.
    allocations_timed: bool,
    temporaries_timed: bool,
}

impl SiteSlices {
    fn of(p: &Profile, slices: Slices, temporaries: bool) -> SiteSlices {
        let measures = Measure::ALLOCATION.len() + usize::from(temporaries);
        let mut rows = vec![vec![Vec::new(); measures]; p.sites.len()];
        let index: HashMap<(u32, u64, Option<&str>), usize> = (p.sites.iter().enumerate())
            .map(|(i, s)| ((s.pid, s.stack_id, s.group.as_deref()), i))
            .collect();
        // The running totals at each site's previous point.
        let mut before = vec![(0.0, 0.0, 0u64); p.sites.len()];
        let mut allocations_timed = true;
        let mut temporaries_timed = temporaries;
        for t in &p.site_timeline {
            let Some(&i) = index.get(&(t.pid, t.stack_id, t.group.as_deref())) else {
                continue;
            };
            let (Some(blocks), Some(bytes)) = (t.allocations, t.bytes) else {
                allocations_timed = false;
                continue;
            };
            // What the point adds came from the site's first allocation
            // since its previous point to its last (temporaries, freed
            // right after theirs, too), else by its time.
            let from = t.allocated_from_ns.unwrap_or(t.time_ns);
            let to = t.allocated_to_ns.unwrap_or(t.time_ns);
            let b = &mut before[i];
            let row = &mut rows[i];
            slices.spread(from, to, blocks - b.0, |at, v| add_at(&mut row[0], at, v));
            slices.spread(from, to, bytes - b.1, |at, v| add_at(&mut row[1], at, v));
            match t.temporary {
                Some(temporary) if temporaries => {
                    let added = temporary.saturating_sub(b.2) as f64;
                    slices.spread(from, to, added, |at, v| add_at(&mut row[5], at, v));
                    b.2 = temporary;
                }
                _ => temporaries_timed = false,
            }
            (b.0, b.1) = (blocks, bytes);
        }
        // A site's leaks (scaled as its row says) shared among its leaked
        // blocks' allocation times by their share of its blocks and bytes.
        let mut leaked: Vec<Vec<(u32, f64, f64)>> = vec![Vec::new(); p.sites.len()];
        for a in (p.allocations.iter())
            .filter(|a| a.free_ns.is_none() && a.kind != "mmap" && a.kind != "stack")
        {
            if let Some(&i) = index.get(&(a.pid, a.stack_id, a.group.as_deref())) {
                leaked[i].push((slices.of(a.alloc_ns), a.est_count, a.est_bytes));
            }
        }
        for (i, mut blocks) in leaked.into_iter().enumerate() {
            let (count, bytes) = (blocks.iter()).fold((0.0, 0.0), |s, b| (s.0 + b.1, s.1 + b.2));
            let site = &p.sites[i];
            blocks.sort_by_key(|b| b.0);
            for (at, c, b) in blocks {
                if count > 0.0 {
                    add_at(&mut rows[i][3], at, site.leaked * c / count);
                }
                if bytes > 0.0 {
                    add_at(&mut rows[i][4], at, site.leaked_bytes * b / bytes);
                }
            }
        }
        SiteSlices {
            slices,
            rows,
            allocations_timed: allocations_timed && !p.site_timeline.is_empty(),
            temporaries_timed,
        }
    }
}

/// Each sample under its object's allocation stack, the object, and the
/// access's calling context (its last frame the access itself); `by_level`:
/// the load samples only, each under the memory level that served it.
fn access_stacks(d: &PlotData, by_level: bool, slices: Option<Slices>) -> Result<Stacks, String> {
    let (p, objects) = (d.p, &d.objects);
    if p.samples.is_empty() {
        return Err(
            "this profile has no access samples: build the program with `memlens cc` and record it again"
                .into(),
        );
    }
    let period = p.meta.settings.access_period.max(1) as f64;
    // Samples counted by what their stack is made of (and by slice of
    // time), each stack built once: a run's millions of samples share a few
    // thousand stacks.
    let count = slices.map_or(1, |s| s.count as usize);
    let mut counts: HashMap<(AccessKey, u8), Vec<f64>> = HashMap::new();
    analysis::attribute(p, objects, |i, hit, _| {
        let s = &p.samples[i];
        if by_level && s.is_store {
            return;
        }
        let level = if by_level { s.level } else { 0 };
        let at = slices.map_or(0, |slices| slices.of(s.time_ns) as usize);
        (counts.entry((AccessKey::of(s, hit), level))).or_insert_with(|| vec![0.0; count])[at] +=
            1.0;
    });
    // In the keys' order: the same profile gives the same stacks in order.
    let mut counts: Vec<((AccessKey, u8), Vec<f64>)> = counts.into_iter().collect();
    counts.sort_unstable_by_key(|c| c.0);
    let mut rows: Vec<Weighted> = Vec::new();
    // Keys that differ only in code addresses of one line are one stack.
    let mut index: HashMap<Vec<Node>, usize> = HashMap::new();
    for ((key, level), samples) in counts {
        let mut stack = access_stack(p, objects, &key);
        if by_level {
            let level = memlens_profile::MemLevel::from_code(level).name();
            stack.insert(0, Node::added(format!("[{level}]")));
        }
        let at = *index.entry(stack).or_insert_with_key(|stack| {
            rows.push(Weighted {
                stack: stack.clone(),
                values: vec![0.0; 2],
                by_slice: vec![Vec::new(); if slices.is_some() { 2 } else { 0 }],
            });
            rows.len() - 1
        });
        let row = &mut rows[at];
        let total: f64 = samples.iter().sum();
        row.values[0] += total;
        row.values[1] += total * period;
        if slices.is_some() {
            for (slice, &n) in samples.iter().enumerate().filter(|s| *s.1 > 0.0) {
                add_at(&mut row.by_slice[0], slice as u32, n);
                add_at(&mut row.by_slice[1], slice as u32, n * period);
            }
        }
    }
    Ok(Stacks {
        measures: Measure::ACCESS.to_vec(),
        rows,
        slicing: slices.map(|s| (s, Measure::ACCESS.to_vec())),
    })
}

/// What an access sample's stack is made of: the object it hit, its
/// process, calling context and code address, load or store.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AccessKey {
    object: Option<usize>,
    pid: u32,
    stack_id: u64,
    pc: u64,
    is_store: bool,
}

impl AccessKey {
    pub fn of(s: &memlens_profile::SampleCore, hit: Option<analysis::Hit>) -> AccessKey {
        AccessKey {
            object: hit.map(|h| h.object),
            pid: s.pid,
            stack_id: s.stack_id,
            pc: s.pc,
            is_store: s.is_store,
        }
    }
}

/// A sample's stack: its object's allocation stack, the object, the
/// access's calling context, and the access itself (`load at site`).
pub fn access_stack(p: &Profile, objects: &analysis::Objects, key: &AccessKey) -> Vec<Node> {
    let mut stack = match key.object {
        Some(object) => {
            let o = &objects.list[object];
            let mut f = stack_of(p, o.pid, o.stack_id);
            f.push(Node::added(format!("[{}]", o.name)));
            f
        }
        None => vec![Node::added("[unknown object]".into())],
    };
    let mut context = stack_of(p, key.pid, key.stack_id);
    let site = context.pop().map_or_else(
        || analysis::location_label(p, key.pid, key.pc),
        |n| n.label(),
    );
    stack.extend(context);
    let kind = if key.is_store { "store at" } else { "load at" };
    stack.push(Node::added(format!("{kind} {site}")));
    stack
}

#[cfg(test)]
mod tests {
    use super::Slices;

    #[test]
    fn a_span_is_shared_among_its_slices_by_overlap() {
        // Ten slices of 100 ns.
        let slices = Slices {
            end_ns: 1000,
            count: 10,
        };
        let spread = |from, to| {
            let mut got = Vec::new();
            slices.spread(from, to, 100.0, |slice, v| got.push((slice, v)));
            got
        };
        assert_eq!(spread(250, 250), [(2, 100.0)]);
        assert_eq!(spread(150, 350), [(1, 25.0), (2, 50.0), (3, 25.0)]);
        // An instant past the end is in the last slice.
        assert_eq!(spread(1200, 1200), [(9, 100.0)]);
        assert_eq!(spread(950, 1050), [(9, 100.0)]);
    }
}

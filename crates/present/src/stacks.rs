//! A profile as weighted call stacks, the shape flame graphs and other
//! profilers' formats share: allocation stacks weighed by heaptrack's and
//! pprof's heap measures, and access samples under their object's allocation
//! stack, the object, then the access's calling context (DrCCTProf's
//! data-centric tree).

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

/// A stack, root first, with one value per measure of its [`Stacks`].
pub struct Weighted {
    pub stack: Vec<Node>,
    pub values: Vec<f64>,
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
}

impl Stacks {
    /// Allocation stacks when `measure` is one of [`Measure::ALLOCATION`]
    /// or temporary allocations, access stacks otherwise; an error when the
    /// profile lacks the measure (no samples; temporaries not counted).
    pub fn of(p: &Profile, measure: Measure) -> Result<Stacks, String> {
        let stacks = match Measure::ACCESS.contains(&measure) {
            true => access_stacks(p, false)?,
            false => allocation_stacks(p),
        };
        match stacks.measures.contains(&measure) {
            true => Ok(stacks),
            false => Err("temporary allocations are counted only when every heap block is recorded: record again with `--leaks`".into()),
        }
    }

    /// The load samples' access stacks under the memory level that served
    /// each (an error when no load sample carries a level).
    pub fn loads_by_level(p: &Profile) -> Result<Stacks, String> {
        if !p.samples.iter().any(|s| !s.is_store && s.level != 0) {
            return Err("no load sample carries a memory level: levels come from hardware samples (PEBS, IBS, SPE) or `memlens record --cache-model`".into());
        }
        access_stacks(p, true)
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
/// among the measures when every heap site counted them.
fn allocation_stacks(p: &Profile) -> Stacks {
    let temporaries_counted = !p.sites.is_empty() && p.sites.iter().all(|s| s.temporary.is_some());
    let mut measures = Measure::ALLOCATION.to_vec();
    if temporaries_counted {
        measures.push(Measure::TemporaryObjects);
    }
    let mut rows = Vec::new();
    let mut push = |pid, stack_id, what: &str, values: Vec<f64>| {
        let stack = allocation_stack(p, pid, stack_id, what);
        rows.push(Weighted { stack, values });
    };
    for s in &p.sites {
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
        push(s.pid, s.stack_id, "heap block", values);
    }
    for a in p.allocations.iter().filter(|a| a.kind == "mmap") {
        let mut values = vec![a.est_count, a.est_bytes, 0.0, 0.0, 0.0];
        values.resize(measures.len(), 0.0);
        push(a.pid, a.stack_id, "mapping", values);
    }
    Stacks { measures, rows }
}

/// Each sample under its object's allocation stack, the object, and the
/// access's calling context (its last frame the access itself); `by_level`:
/// the load samples only, each under the memory level that served it.
fn access_stacks(p: &Profile, by_level: bool) -> Result<Stacks, String> {
    if p.samples.is_empty() {
        return Err(
            "this profile has no access samples: build the program with `memlens cc` and record it again"
                .into(),
        );
    }
    let objects = analysis::data_objects(p);
    let period = p.meta.settings.access_period.max(1) as f64;
    // Samples counted by what their stack is made of, each stack built once:
    // a run's millions of samples share a few thousand stacks.
    let mut counts: HashMap<(AccessKey, u8), f64> = HashMap::new();
    analysis::attribute(p, &objects, |i, hit, _| {
        let s = &p.samples[i];
        if by_level && s.is_store {
            return;
        }
        let level = if by_level { s.level } else { 0 };
        *counts.entry((AccessKey::of(s, hit), level)).or_default() += 1.0;
    });
    // In the keys' order: the same profile gives the same stacks in order.
    let mut counts: Vec<((AccessKey, u8), f64)> = counts.into_iter().collect();
    counts.sort_unstable_by_key(|c| c.0);
    let mut rows: Vec<Weighted> = Vec::new();
    // Keys that differ only in code addresses of one line are one stack.
    let mut index: HashMap<Vec<Node>, usize> = HashMap::new();
    for ((key, level), samples) in counts {
        let mut stack = access_stack(p, &objects, &key);
        if by_level {
            let level = memlens_profile::MemLevel::from_code(level).name();
            stack.insert(0, Node::added(format!("[{level}]")));
        }
        let at = *index.entry(stack).or_insert_with_key(|stack| {
            rows.push(Weighted {
                stack: stack.clone(),
                values: vec![0.0; 2],
            });
            rows.len() - 1
        });
        rows[at].values[0] += samples;
        rows[at].values[1] += samples * period;
    }
    Ok(Stacks {
        measures: Measure::ACCESS.to_vec(),
        rows,
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

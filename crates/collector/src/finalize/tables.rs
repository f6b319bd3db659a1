//! The tables written whole at the end of the finalizer: an image's stacks
//! and code symbolized, its modules and their variables listed.

use super::collector_log::{counter_rows, thread_traffic_rows, CollectorLog};
use crate::image::Definitions;
use crate::replay::Built;
use crate::Result;
use memlens_convert::symbols::{self, LoadedModule, Symbolizer};
use memlens_profile::{self as profile, StaticObject, TimelinePoint};
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// The tables written whole at the end (the allocations, sites' timelines
/// and samples are streamed), and what symbolizing them needs.
#[derive(Default)]
pub(super) struct Tables {
    sites: Vec<profile::HeapSite>,
    frames: Vec<profile::Frame>,
    locations: Vec<profile::CodeLocation>,
    regions: Vec<profile::Region>,
    threads: Vec<profile::ThreadRow>,
    tags: Vec<profile::TagRange>,
    pub(super) timeline: Vec<TimelinePoint>,
    modules: Vec<profile::Module>,
    statics: Vec<StaticObject>,
    symbolizer: Symbolizer,
    /// The (pid, stack id) and (pid, pc) already listed: an exec keeps the
    /// pid, and without address randomization its images share stack ids
    /// and code addresses, which are listed once per process.
    listed: HashSet<(u32, u64)>,
    listed_pcs: HashSet<(u32, u64)>,
    /// Each process's modules (its last image's), for samples of perf backends.
    modules_of: HashMap<u32, Vec<LoadedModule>>,
}

impl Tables {
    /// Tables beginning with the collector's timeline, symbolized by
    /// `symbolizer`.
    pub(super) fn new(timeline: Vec<TimelinePoint>, symbolizer: Symbolizer) -> Tables {
        Tables {
            timeline,
            symbolizer,
            ..Default::default()
        }
    }

    /// An image's stacks and code addresses symbolized, its modules and
    /// their variables listed.
    pub(super) fn add_image(
        &mut self,
        pid: u32,
        defs: &Definitions,
        built: &Built,
        modules: &[LoadedModule],
        t0: u64,
    ) {
        // The modules' variables are read beside the symbolizing, on the
        // core the program left.
        let image_statics = std::thread::scope(|scope| {
            let image_statics = scope.spawn(|| variables(pid, &defs.modules));
            for &id in &built.stack_ids {
                let Some(addrs) = defs.stacks.get(&id) else {
                    continue;
                };
                if self.listed.insert((pid, id)) {
                    (self.frames).extend(self.symbolizer.stack_rows(pid, id, addrs, modules));
                }
            }
            for &pc in &built.pcs {
                if self.listed_pcs.insert((pid, pc)) {
                    (self.locations).push(self.symbolizer.location(pid, pc, modules, true));
                }
            }
            (image_statics.join()).unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        });
        self.statics.extend(image_statics);
        self.modules_of.insert(pid, modules.to_vec());
        for (time, m) in &defs.modules {
            self.modules.push(module_row(pid, *time, m, t0));
        }
    }

    /// An image's rows kept whole (its sites, regions, threads, tags and
    /// timeline).
    pub(super) fn add_rows(&mut self, built: Built) {
        self.sites.extend(built.sites);
        self.regions.extend(built.regions);
        self.threads.extend(built.threads);
        self.tags.extend(built.tags);
        self.timeline.extend(built.timeline);
    }

    /// A module an attached process mapped (`record --pid`).
    pub(super) fn add_attached_module(&mut self, pid: u32, time: u64, m: LoadedModule, t0: u64) {
        self.modules.push(module_row(pid, time, &m, t0));
        // A module maps several segments: its variables are listed once.
        let known = self.modules_of.entry(pid).or_default();
        if known.iter().all(|k| k.path != m.path) {
            self.statics.extend(symbols::static_objects(pid, &m));
        }
        known.push(m);
    }

    /// The code of a perf backend's sample: a PMU's or the kernel's sample
    /// names the instruction itself.
    pub(super) fn add_sampled_instruction(&mut self, pid: u32, pc: u64) {
        let modules = self.modules_of.get(&pid).map_or(&[][..], Vec::as_slice);
        (self.locations).push(self.symbolizer.location(pid, pc, modules, false));
    }

    pub(super) fn write(&self, dir: &Path, collector: &CollectorLog, t0: u64) -> Result<()> {
        profile::write_table(dir, &self.sites)?;
        profile::write_table(dir, &self.frames)?;
        profile::write_table(dir, &self.locations)?;
        profile::write_table(dir, &self.regions)?;
        profile::write_table(dir, &self.threads)?;
        profile::write_table(dir, &self.tags)?;
        profile::write_table(dir, &self.timeline)?;
        profile::write_table(dir, &thread_traffic_rows(collector, t0))?;
        profile::write_table(dir, &self.modules)?;
        profile::write_table(dir, &self.statics)?;
        profile::write_table(dir, &counter_rows(collector, t0))?;
        Ok(())
    }
}

pub(super) fn module_row(pid: u32, time: u64, m: &LoadedModule, t0: u64) -> profile::Module {
    profile::Module {
        pid,
        path: m.path.clone(),
        start: m.start,
        end: m.end,
        bias: m.bias,
        load_ns: time.saturating_sub(t0),
    }
}

/// The variables of an image's modules, each file's once; the runtime's own
/// variables are not the program's data.
pub(super) fn variables(pid: u32, modules: &[(u64, LoadedModule)]) -> Vec<StaticObject> {
    let mut seen_paths = HashSet::new();
    (modules.iter())
        .filter(|(_, m)| seen_paths.insert(&m.path) && !m.path.ends_with(profile::RUNTIME_FILE))
        .flat_map(|(_, m)| symbols::static_objects(pid, m))
        .collect()
}

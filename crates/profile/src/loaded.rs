//! A profile loaded into memory: its tables read (the largest on a second
//! core), the timeline thinned as it is read, restricted to a process or
//! thread, or merged from several runs or ranks.

use crate::thinning::{Thinned, Thinning};
use crate::{
    self as profile, Allocation, CodeLocation, CounterReading, Frame, HeapSite, Meta, Region,
    SampleCore, SiteLivePoint, StaticObject, TagRange, ThreadRow, TimelinePoint,
};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[derive(Default)]
pub struct Profile {
    pub dir: PathBuf,
    pub meta: Meta,
    pub allocations: Vec<Allocation>,
    /// Heap sites (every recorded block summed by stack and group), and
    /// their live bytes at each tick where they changed.
    pub sites: Vec<HeapSite>,
    pub site_timeline: Vec<SiteLivePoint>,
    /// Set by [`Profile::load_for_summary`]: `site_timeline` was not read
    /// (the objects that need it read their sites' points themselves).
    pub site_timeline_unread: bool,
    pub stacks: HashMap<(u32, u64), Vec<Frame>>,
    pub regions: Vec<Region>,
    pub tags: Vec<TagRange>,
    pub timeline: Vec<TimelinePoint>,
    /// The processes whose timeline was thinned as it was read.
    pub timeline_thinned: Vec<Thinned>,
    pub statics: Vec<StaticObject>,
    /// The ELF objects each process mapped (their paths tell the program's
    /// code from a system library).
    pub modules: Vec<profile::Module>,
    pub samples: Vec<SampleCore>,
    pub locations: HashMap<(u32, u64), CodeLocation>,
    /// Readings of counting perf events (merged runs: one series per run,
    /// the run's directory name in brackets after the counter's).
    pub counters: Vec<CounterReading>,
    /// The machine's calibration, kept by a run with the cache model.
    pub calibration: Option<profile::Calibration>,
    /// Each thread's lifetime and exact totals.
    pub threads: Vec<ThreadRow>,
    /// Set by [`Profile::restrict`]: the view is of one process or thread.
    pub only: Option<Only>,
    /// Frames that are not allocation sites beyond the defaults
    /// (`--skip-frames`).
    pub skip_frames: profile::SkipFrames,
}

/// The part of a profile a view keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub enum Only {
    Process(u32),
    /// A thread, by tid (unique among live threads of the machine).
    Thread(u32),
}

impl Profile {
    pub fn load(dir: &Path) -> profile::Result<Profile> {
        Self::load_parts(dir, true, true)
    }

    /// The profile without its access samples and code locations: enough for
    /// capacity figures, and cheap however many samples the run took.
    pub fn load_without_samples(dir: &Path) -> profile::Result<Profile> {
        Self::load_parts(dir, false, true)
    }

    /// As [`Profile::load_without_samples`], and without the sites'
    /// timelines, for the figures of all objects and the series of none
    /// (`record`'s summary): only an object of several sites needs its
    /// sites' points, for its peak, and reads them when its objects are
    /// found. (The timelines hold a point per site changed in each tick:
    /// reading 513,000 of them for 12,000 sites of one object each kept
    /// `record --leaks` waiting 35 ms after the program's exit.)
    pub fn load_for_summary(dir: &Path) -> profile::Result<Profile> {
        Self::load_parts(dir, false, false)
    }

    fn load_parts(
        dir: &Path,
        with_samples: bool,
        with_site_timeline: bool,
    ) -> profile::Result<Profile> {
        // The largest tables (the blocks, the samples, the sites' timelines:
        // a point per site changed in each tick) are read on a second core
        // while this one reads the rest.
        std::thread::scope(|scope| {
            let large = scope.spawn(|| -> profile::Result<_> {
                let allocations = profile::read_table(dir)?;
                let samples = match with_samples {
                    true => profile::read_table(dir)?,
                    false => Vec::new(),
                };
                let site_timeline = match with_site_timeline {
                    true => profile::read_table(dir)?,
                    false => Vec::new(),
                };
                Ok((allocations, samples, site_timeline))
            });
            let rest = Self::load_small_parts(dir, with_samples);
            let large = (large.join()).unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            // A directory that is no profile says so (its meta.json) first.
            let mut p = rest?;
            (p.allocations, p.samples, p.site_timeline) = large?;
            p.site_timeline_unread = !with_site_timeline;
            Ok(p)
        })
    }

    /// Every table but the allocations, the samples and the sites' timelines.
    fn load_small_parts(dir: &Path, with_samples: bool) -> profile::Result<Profile> {
        let meta = Meta::read(dir)?;
        let mut stacks: HashMap<(u32, u64), Vec<Frame>> = HashMap::new();
        for f in profile::read_table::<Frame>(dir)? {
            stacks.entry((f.pid, f.stack_id)).or_default().push(f);
        }
        for frames in stacks.values_mut() {
            frames.sort_by_key(|f| f.depth);
        }
        // Read a batch at a time: a long run's timeline is thinned as it
        // comes, never held whole (finalize writes it sorted by pid and time).
        let mut thinning = Thinning::default();
        profile::read_table_by_batch::<TimelinePoint>(dir, &mut |_, batch| {
            batch.into_iter().for_each(|p| thinning.push(p))
        })?;
        let (timeline, timeline_thinned) = thinning.finish();
        Ok(Profile {
            dir: dir.to_path_buf(),
            allocations: Vec::new(),
            sites: profile::read_table(dir)?,
            site_timeline: Vec::new(),
            site_timeline_unread: false,
            stacks,
            regions: profile::read_table(dir)?,
            tags: profile::read_table(dir)?,
            timeline,
            timeline_thinned,
            statics: profile::read_table(dir)?,
            modules: profile::read_table(dir)?,
            counters: profile::read_table(dir)?,
            threads: profile::read_table(dir)?,
            only: None,
            skip_frames: Default::default(),
            calibration: profile::Calibration::read(&dir.join(profile::CALIBRATION_FILE)).ok(),
            samples: Vec::new(),
            locations: if with_samples {
                profile::read_table::<CodeLocation>(dir)?
                    .into_iter()
                    .map(|l| ((l.pid, l.pc), l))
                    .collect()
            } else {
                HashMap::new()
            },
            meta,
        })
    }

    /// When a process ended (or the run, if unknown), ns.
    pub fn process_end(&self, pid: u32) -> u64 {
        self.meta
            .processes
            .iter()
            .filter(|p| p.pid == pid)
            .filter_map(|p| p.end_ns)
            .max()
            .unwrap_or(self.meta.clock.duration_ns)
    }

    /// Keeps one process's (or one thread's) part: its samples, regions and
    /// tags, and, for a process, its allocations, timeline and statics. A
    /// thread keeps its process's allocations, statics and timeline: the
    /// objects its accesses land in and the memory it shares.
    pub fn restrict(&mut self, only: Only) -> Result<(), String> {
        let pid = match only {
            Only::Process(pid) => pid,
            Only::Thread(tid) => self
                .threads
                .iter()
                .find(|t| t.tid == tid)
                .map(|t| t.pid)
                .or_else(|| self.samples.iter().find(|s| s.tid == tid).map(|s| s.pid))
                .or_else(|| self.regions.iter().find(|r| r.tid == tid).map(|r| r.pid))
                .ok_or_else(|| {
                    format!("no thread {tid} in this profile (see its THREADS table)")
                })?,
        };
        if !self.meta.processes.iter().any(|p| p.pid == pid) {
            return Err(format!("no process {pid} in this profile"));
        }
        let tid = match only {
            Only::Thread(tid) => Some(tid),
            Only::Process(_) => None,
        };
        let keep = |p: u32, t: u32| p == pid && tid.is_none_or(|tid| tid == t);
        self.samples.retain(|s| keep(s.pid, s.tid));
        // A phase's counts are its process's: not one thread's.
        self.regions
            .retain(|r| keep(r.pid, r.tid) && !(r.process_wide && tid.is_some()));
        self.tags.retain(|t| keep(t.pid, t.tid));
        self.threads.retain(|t| keep(t.pid, t.tid));
        self.allocations.retain(|a| a.pid == pid);
        self.sites.retain(|s| s.pid == pid);
        self.site_timeline.retain(|s| s.pid == pid);
        self.timeline.retain(|t| t.pid == pid);
        self.timeline_thinned.retain(|t| t.pid == pid);
        self.statics.retain(|s| s.pid == pid);
        self.modules.retain(|m| m.pid == pid);
        self.meta.processes.retain(|p| p.pid == pid);
        self.only = Some(only);
        Ok(())
    }

    /// Whether a row of process `pid`, thread `tid` is in the view
    /// [`Profile::restrict`] made (for tables read on demand, after it).
    pub fn in_view(&self, pid: u32, tid: u32) -> bool {
        match self.only {
            Some(Only::Process(only)) => pid == only,
            Some(Only::Thread(only)) => tid == only,
            None => true,
        }
    }

    pub fn process_start(&self, pid: u32) -> u64 {
        self.meta
            .processes
            .iter()
            .filter(|p| p.pid == pid)
            .map(|p| p.start_ns)
            .min()
            .unwrap_or(0)
    }
}

/// Several profiles (MPI ranks, separate runs of one job) read as one: times are
/// put on the earliest profile's clock origin (CLOCK_MONOTONIC is shared on one
/// machine; across machines each rank keeps its own origin).
pub fn merge(dir: &Path, mut profiles: Vec<Profile>) -> Profile {
    let t0 = profiles
        .iter()
        .map(|p| p.meta.clock.start_ns)
        .min()
        .unwrap_or(0);
    let mut out = Profile {
        dir: dir.to_path_buf(),
        meta: profiles.first().map(|p| p.meta.clone()).unwrap_or_default(),
        calibration: profiles.first().and_then(|p| p.calibration.clone()),
        ..Profile::default()
    };
    out.meta.processes.clear();
    out.meta.losses = Default::default();
    out.meta.clock.start_ns = t0;
    out.meta.clock.duration_ns = 0;
    for p in profiles.iter_mut() {
        let shift = p.meta.clock.start_ns.saturating_sub(t0);
        let m = &p.meta;
        out.meta.clock.duration_ns = out
            .meta
            .clock
            .duration_ns
            .max(m.clock.duration_ns.saturating_add(shift));
        out.meta.losses.add(&m.losses);
        let span = |begin: &mut u64, end: &mut Option<u64>| {
            *begin = begin.saturating_add(shift);
            *end = end.map(|t| t.saturating_add(shift));
        };
        for mut pr in m.processes.iter().cloned() {
            span(&mut pr.start_ns, &mut pr.end_ns);
            out.meta.processes.push(pr);
        }
        for mut a in p.allocations.drain(..) {
            span(&mut a.alloc_ns, &mut a.free_ns);
            out.allocations.push(a);
        }
        for mut s in p.sites.drain(..) {
            s.first_ns = s.first_ns.saturating_add(shift);
            s.last_ns = s.last_ns.saturating_add(shift);
            out.sites.push(s);
        }
        for mut s in p.site_timeline.drain(..) {
            span(&mut s.time_ns, &mut None);
            out.site_timeline.push(s);
        }
        for mut r in p.regions.drain(..) {
            span(&mut r.begin_ns, &mut r.end_ns);
            out.regions.push(r);
        }
        for mut t in p.tags.drain(..) {
            span(&mut t.begin_ns, &mut t.end_ns);
            out.tags.push(t);
        }
        out.timeline_thinned.append(&mut p.timeline_thinned);
        for mut t in p.timeline.drain(..) {
            span(&mut t.time_ns, &mut None);
            out.timeline.push(t);
        }
        out.statics.append(&mut p.statics);
        out.modules.append(&mut p.modules);
        for mut t in p.threads.drain(..) {
            t.start_ns = t.start_ns.map(|v| v.saturating_add(shift));
            t.end_ns = t.end_ns.map(|v| v.saturating_add(shift));
            out.threads.push(t);
        }
        for mut s in p.samples.drain(..) {
            span(&mut s.time_ns, &mut None);
            out.samples.push(s);
        }
        // Each run's counters stay a cumulative series of their own, named
        // after the run: summing them would count a machine-wide counter once
        // per run on the same machine.
        let run = p.dir.file_name().map(|n| n.to_string_lossy().into_owned());
        for mut c in p.counters.drain(..) {
            span(&mut c.time_ns, &mut None);
            if let Some(run) = &run {
                c.name = format!("{} [{run}]", c.name);
            }
            out.counters.push(c);
        }
        out.locations.extend(p.locations.drain());
        out.stacks.extend(p.stacks.drain());
    }
    out.timeline.sort_by_key(|p| (p.pid, p.time_ns));
    out
}

//! A directory of rank profiles read as one job: found from the parts'
//! metadata, each part loaded on its own and reduced to its ranks' summaries
//! before the next is read (memory grows with ranks x distinct objects, not
//! with the job's events).

use anyhow::{bail, Result};
use memlens_analysis::{job_view, summarize_ranks, RankSummary, TimeGrid};
use memlens_present::JobReport;
use memlens_profile::{Meta, Profile};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// How the ranks' times are put on one base.
#[derive(Clone, Copy)]
enum TimeBase {
    /// One host: its CLOCK_MONOTONIC, exact, from the earliest part's start.
    Monotonic(u64),
    /// Several hosts: the wall clock each run read at its start, from the
    /// earliest.
    Realtime(u64),
    /// Several hosts without wall-clock starts: each from its own start.
    OwnStart,
}

/// The parts of a directory with their metadata.
pub struct Job {
    parts: Vec<(PathBuf, Meta)>,
}

impl Job {
    /// The parts as a job when their processes carry two MPI ranks or more.
    pub fn of(parts: &[PathBuf]) -> Result<Option<Job>> {
        let parts = (parts.iter())
            .map(|part| Ok((part.clone(), Meta::read(part)?)))
            .collect::<Result<Vec<_>>>()?;
        let ranks: BTreeSet<u32> = (parts.iter())
            .flat_map(|(_, m)| m.processes.iter().filter_map(|p| p.rank))
            .collect();
        Ok((ranks.len() >= 2).then_some(Job { parts }))
    }

    /// The parts holding `rank`, and its processes' pids.
    pub fn rank(&self, rank: u32) -> Result<(Vec<PathBuf>, Vec<u32>)> {
        let mut parts = Vec::new();
        let mut pids = Vec::new();
        for (part, meta) in &self.parts {
            let here: Vec<u32> = (meta.processes.iter())
                .filter(|p| p.rank == Some(rank))
                .map(|p| p.pid)
                .collect();
            if !here.is_empty() {
                parts.push(part.clone());
                pids.extend(here);
            }
        }
        if parts.is_empty() {
            let ranks: BTreeSet<u32> = (self.parts.iter())
                .flat_map(|(_, m)| m.processes.iter().filter_map(|p| p.rank))
                .collect();
            bail!(
                "no rank {rank} in this job (ranks {}..={})",
                ranks.first().unwrap_or(&0),
                ranks.last().unwrap_or(&0)
            );
        }
        Ok((parts, pids))
    }

    /// The job's report: every rank summarized one part at a time.
    pub fn report(&self, dir: &Path, per_rank: bool, top: usize) -> Result<JobReport> {
        let summaries = self.summarize(|_| true)?;
        Ok(self.assemble(dir, summaries, per_rank, top))
    }

    /// The summaries of the ranks in the parts `mine` picks (by index), each
    /// part read, summarized and dropped before the next.
    pub fn summarize(&self, mine: impl Fn(usize) -> bool) -> Result<Vec<RankSummary>> {
        let base = self.time_base();
        let mut summaries = Vec::new();
        for (_, (part, meta)) in self.parts.iter().enumerate().filter(|(i, _)| mine(*i)) {
            let p = Profile::load_without_samples(part)?;
            summaries.extend(summarize_ranks(
                &p,
                &meta.host,
                base.shift(meta),
                self.grid(&base),
            ));
        }
        Ok(summaries)
    }

    /// The job's report from every rank's summary.
    pub fn assemble(
        &self,
        dir: &Path,
        summaries: Vec<RankSummary>,
        per_rank: bool,
        top: usize,
    ) -> JobReport {
        let base = self.time_base();
        let mut losses = memlens_profile::Losses::default();
        let mut backend: Vec<String> = Vec::new();
        for (_, meta) in &self.parts {
            losses.add(&meta.losses);
            for b in &meta.backend {
                if !backend.contains(b) {
                    backend.push(b.clone());
                }
            }
        }
        JobReport {
            memlens_version: env!("CARGO_PKG_VERSION").to_string(),
            profile: dir.display().to_string(),
            command: (self.parts.first()).map_or_else(Vec::new, |(_, m)| m.command.clone()),
            backend,
            job: job_view(summaries, self.grid(&base), base.describe(), per_rank, top),
            losses,
        }
    }

    /// How the parts' times are put on one base. One host: CLOCK_MONOTONIC
    /// is shared, the parts' origins line up exactly. Several: the wall clock
    /// each run read beside it at its start, as well as the hosts' clocks
    /// agree; without it, each part from its own start.
    fn time_base(&self) -> Based {
        let hosts: BTreeSet<String> = self.parts.iter().map(|(_, m)| m.host.clone()).collect();
        let realtime: Option<Vec<u64>> = (self.parts.iter())
            .map(|(_, m)| m.clock.realtime_start_ns)
            .collect();
        let base = match (hosts.len(), realtime) {
            (1, _) => {
                let t0 = (self.parts.iter()).map(|(_, m)| m.clock.start_ns).min();
                TimeBase::Monotonic(t0.unwrap_or(0))
            }
            (_, Some(starts)) => TimeBase::Realtime(starts.into_iter().min().unwrap_or(0)),
            (_, None) => TimeBase::OwnStart,
        };
        Based { base, hosts }
    }

    /// The time grid of the job's capacity series.
    fn grid(&self, base: &Based) -> TimeGrid {
        let duration = (self.parts.iter())
            .map(|(_, m)| base.shift(m) + m.clock.duration_ns)
            .max()
            .unwrap_or(0);
        let interval = (self.parts.iter())
            .map(|(_, m)| m.settings.interval_ms * 1_000_000)
            .max()
            .unwrap_or(0);
        TimeGrid::over(duration, interval)
    }
}

/// A time base with the hosts it spans.
struct Based {
    base: TimeBase,
    hosts: BTreeSet<String>,
}

impl Based {
    /// Where a part's time 0 lies on the job's base.
    fn shift(&self, m: &Meta) -> u64 {
        match self.base {
            TimeBase::Monotonic(t0) => m.clock.start_ns.saturating_sub(t0),
            TimeBase::Realtime(origin) => {
                (m.clock.realtime_start_ns).map_or(0, |start| start.saturating_sub(origin))
            }
            TimeBase::OwnStart => 0,
        }
    }

    fn describe(&self) -> String {
        let n = self.hosts.len();
        match self.base {
            TimeBase::Monotonic(_) => format!(
                "CLOCK_MONOTONIC of {}, exact",
                self.hosts.first().map_or("", String::as_str)
            ),
            TimeBase::Realtime(_) => format!(
                "the wall clock (CLOCK_REALTIME) of each of the {n} hosts, read at each run's start: as close as the hosts' clocks agree (NTP: about a millisecond)"
            ),
            TimeBase::OwnStart => format!(
                "each of the {n} hosts' own clock, from each run's start (not aligned: runs recorded without their wall-clock start)"
            ),
        }
    }
}

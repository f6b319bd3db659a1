//! `meta.json`: what was run, where, how, and what was lost.

use crate::{ProfileError, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

pub const FORMAT_VERSION: u32 = 1;
pub const META_FILE: &str = "meta.json";

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema, Deserialize)]
pub struct Meta {
    pub format_version: u32,
    pub memlens_version: String,
    pub command: Vec<String>,
    pub host: String,
    pub cpu: String,
    pub kernel: String,
    /// What produced the data: names of [`crate::Backend`]s (as strings: a
    /// profile naming a backend this memlens does not know still loads;
    /// [`Meta::backends`] reads the known ones).
    pub backend: Vec<String>,
    pub settings: Settings,
    pub clock: Clock,
    pub processes: Vec<Process>,
    pub losses: Losses,
}

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema, Deserialize)]
pub struct Settings {
    pub interval_ms: u64,
    pub min_size: u64,
    pub sample_rate: u64,
    pub unwinder: String,
    pub max_frames: u32,
    /// Instrumented accesses: one sample per this many accesses of a class.
    #[serde(default)]
    pub access_period: u64,
    #[serde(default)]
    pub sample_loads: bool,
    #[serde(default)]
    pub sample_stores: bool,
    /// Samples are every access to one cache line in `access_period` (lines
    /// chosen by address hash), not one access in `access_period`.
    #[serde(default)]
    pub sample_lines: bool,
    /// The cache model's levels ("size/ways/line", smallest first) when it gave
    /// the samples their levels; empty otherwise.
    #[serde(default)]
    pub cache_model: String,
    /// Every freed block has its row, even when every block was recorded
    /// (`--keep-blocks`, or access sampling).
    #[serde(default)]
    pub keep_blocks: bool,
}

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema, Deserialize)]
pub struct Clock {
    pub source: String,
    /// CLOCK_MONOTONIC ns of time 0 in every table.
    pub start_ns: u64,
    pub duration_ns: u64,
    /// CLOCK_REALTIME ns (since the Unix epoch) at time 0, read beside the
    /// monotonic clock when `record` started: what puts runs of several hosts
    /// on one time base (as well as the hosts' clocks agree).
    #[serde(default)]
    pub realtime_start_ns: Option<u64>,
}

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema, Deserialize)]
pub struct Process {
    pub pid: u32,
    pub ppid: u32,
    /// 0 for the first program image of this pid, 1 after its first exec, ...
    pub exec_seq: u32,
    pub rank: Option<u32>,
    pub exe: String,
    pub start_ns: u64,
    pub end_ns: Option<u64>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// The kernel's account at exit, for processes the collector reaped.
    #[serde(default)]
    pub usage: Option<KernelUsage>,
    /// The runtime could not enter this image (static or setuid): only its
    /// resident memory was sampled, from /proc.
    #[serde(default)]
    pub untracked: bool,
    /// A running process memlens attached to (`record --pid`): recorded from
    /// `start_ns` on, from outside (/proc and perf events); its heap, regions
    /// and exit status were not seen.
    #[serde(default)]
    pub attached: bool,
    /// How this image's allocation stacks were unwound.
    #[serde(default)]
    pub stacks_unwound: StacksUnwound,
    /// The live heap's exact peak, replayed from every block (only when
    /// every block was recorded: `--sample-rate 1`).
    #[serde(default)]
    pub heap_peak: Option<HeapPeak>,
}

impl Process {
    /// Whether this image's end went unseen among the run's `images`: no
    /// exit status, no signal and no later exec of its pid (a process
    /// memlens attached to or could not enter has none to see).
    pub fn end_unseen(&self, images: &[Process]) -> bool {
        !(self.exit_code.is_some()
            || self.signal.is_some()
            || self.attached
            || self.untracked
            || (images.iter()).any(|q| q.pid == self.pid && q.exec_seq > self.exec_seq))
    }
}

/// The most heap a process held at once, as its blocks' events replay it.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema, Deserialize, PartialEq)]
pub struct HeapPeak {
    /// Bytes requested of the allocator (what heaptrack and dhat report).
    pub requested_bytes: u64,
    /// Bytes the allocator reserved for the same blocks at that moment.
    pub usable_bytes: u64,
    pub time_ns: u64,
}

/// Call stacks captured, by the unwinder that walked them (`--unwind dwarf`
/// hands libgcc what its cached rules do not describe).
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema, Deserialize, PartialEq)]
pub struct StacksUnwound {
    pub frame_pointers: u64,
    pub cached_rules: u64,
    pub libgcc: u64,
}

/// CPU time as the kernel accounted it (wait4's rusage), including the children
/// the process waited for.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema, Deserialize, PartialEq)]
pub struct KernelUsage {
    pub user_ns: u64,
    pub system_ns: u64,
}

/// What was lost, counted; every report prints the non-zero ones.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema, Deserialize, PartialEq)]
pub struct Losses {
    /// Events the runtime could not write (log full).
    pub dropped_events: u64,
    /// Tracked blocks whose free could not be followed (tracking table full).
    pub untracked_allocs: u64,
    /// Log blocks cut short or malformed (a process killed mid-record).
    pub truncated_blocks: u64,
    /// Frees of tracked blocks allocated before the process (inherited across fork).
    pub unmatched_frees: u64,
    /// Timeline ticks the collector missed (late by more than one interval).
    pub missed_ticks: u64,
    /// Hardware samples the kernel dropped (PERF_RECORD_LOST, LOST_SAMPLES).
    #[serde(default)]
    pub lost_samples: u64,
    /// Times the kernel throttled a sampling event.
    #[serde(default)]
    pub throttled: u64,
    /// AUX buffer chunks the kernel marked truncated, partial or colliding.
    #[serde(default)]
    pub aux_truncated: u64,
    #[serde(default)]
    pub aux_partial: u64,
    #[serde(default)]
    pub aux_collisions: u64,
    /// Bytes or records a decoder could not read (bad SPE packets, cut records,
    /// malformed samples).
    #[serde(default)]
    pub decode_errors: u64,
    /// Processes whose malloc and free went to another allocator placed before
    /// the runtime in LD_PRELOAD: their heap was not seen.
    #[serde(default)]
    pub heap_not_hooked: u64,
    /// Processes whose allocator cannot tell block sizes: live heap not counted.
    #[serde(default)]
    pub heap_sizes_unknown: u64,
    /// Processes that closed the log's descriptor for good: later events lost.
    #[serde(default)]
    pub log_lost: u64,
    /// Processes whose log stopped at a full disk: later events lost.
    #[serde(default)]
    pub disk_full: u64,
    /// Processes (or exec'd images) the runtime could not enter, static or
    /// setuid: sampled from /proc alone.
    #[serde(default)]
    pub untracked_processes: u64,
    /// Milliseconds the run went on after `memlens record` was killed: no
    /// resident memory, process or counter samples then (the heap, from the
    /// programs' own logs, is whole).
    #[serde(default)]
    pub unsampled_ms: u64,
    /// Processes whose end was not seen (a signal memlens could not
    /// observe, such as SIGKILL of a grandchild, or still running when
    /// recording stopped): what they held then was not leaked.
    #[serde(default)]
    pub unseen_ends: u64,
}

impl Losses {
    /// Every count, in field order (for adding and totalling them).
    fn counts_mut(&mut self) -> [&mut u64; 18] {
        [
            &mut self.dropped_events,
            &mut self.untracked_allocs,
            &mut self.truncated_blocks,
            &mut self.unmatched_frees,
            &mut self.missed_ticks,
            &mut self.lost_samples,
            &mut self.throttled,
            &mut self.aux_truncated,
            &mut self.aux_partial,
            &mut self.aux_collisions,
            &mut self.decode_errors,
            &mut self.heap_not_hooked,
            &mut self.heap_sizes_unknown,
            &mut self.log_lost,
            &mut self.disk_full,
            &mut self.untracked_processes,
            &mut self.unsampled_ms,
            &mut self.unseen_ends,
        ]
    }

    /// Adds `o`'s counts; saturating, since some come from damaged files.
    pub fn add(&mut self, o: &Losses) {
        let mut o = o.clone();
        for (mine, theirs) in self.counts_mut().into_iter().zip(o.counts_mut()) {
            *mine = mine.saturating_add(*theirs);
        }
    }

    pub fn total(&self) -> u64 {
        self.clone()
            .counts_mut()
            .into_iter()
            .fold(0u64, |sum, n| sum.saturating_add(*n))
    }
}

impl Meta {
    pub fn write(&self, dir: &Path) -> Result<()> {
        let path = dir.join(META_FILE);
        let json = serde_json::to_string_pretty(self).expect("meta serializes");
        let mut file = crate::create_private_file(&path)?;
        std::io::Write::write_all(&mut file, json.as_bytes())
            .map_err(|e| crate::write_error(&path, e.to_string()))
    }

    pub fn read(dir: &Path) -> Result<Meta> {
        let path = dir.join(META_FILE);
        // A process takes about 400 bytes of it: 10^5 processes, 40 MB.
        let text = crate::read_small_text(&path, 256 << 20)?;
        let meta: Meta = serde_json::from_str(&text).map_err(|e| ProfileError::Format {
            path: path.clone(),
            detail: format!("not valid memlens metadata ({e})"),
        })?;
        if meta.format_version > FORMAT_VERSION {
            return Err(ProfileError::Format {
                path,
                detail: format!(
                    "written by a newer memlens (format {}, this one reads {FORMAT_VERSION}); upgrade memlens",
                    meta.format_version
                ),
            });
        }
        Ok(meta)
    }
}

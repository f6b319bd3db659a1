//! What `memlens record` is asked to do, and what a run leaves for the
//! finalizer.

use crate::finalize::RunInfo;
use crate::perf::backends::Kind;
use crate::{LiveSamples, Result};
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct RecordConfig {
    pub command: Vec<OsString>,
    pub out_dir: PathBuf,
    pub runtime: PathBuf,
    pub interval_ms: u64,
    pub min_size: Option<u64>,
    pub sample_rate: Option<u64>,
    pub unwinder: Option<String>,
    pub max_frames: Option<u32>,
    pub period: Option<u64>,
    pub no_loads: bool,
    pub no_stores: bool,
    pub keep_raw: bool,
    /// A row for every freed block even when every block is recorded.
    pub keep_blocks: bool,
    pub backend: SamplerChoice,
    /// PEBS load-latency threshold / SPE minimum latency (cycles); 0 for the default.
    pub min_latency: u64,
    /// SPE AUX area per CPU (KiB) and its wake-up watermark (bytes); 0: defaults.
    pub aux_kib: u64,
    pub aux_watermark: u32,
    /// Run the cache model on every access: "size/ways/line" per level.
    pub cache_model: Option<String>,
    /// Sample every access to one cache line in `period` (reuse distance).
    pub sample_lines: bool,
    /// Show capacity and bandwidth on stderr while the program runs, written
    /// by this renderer.
    pub live: Option<crate::live::RenderLive>,
    /// Replace the data of an earlier run in `out_dir`.
    pub force: bool,
    /// Record this running process instead of starting `command`.
    pub attach: Option<u32>,
    /// With `attach`: stop recording after this long.
    pub duration: Option<Duration>,
}

/// Where access samples come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SamplerChoice {
    /// The instrumented build's own samples if the program is instrumented,
    /// else the best hardware sampler this machine has, else none.
    Auto,
    /// Only the instrumented build's samples (`memlens cc`).
    Software,
    /// This perf_event backend, or an error saying why it cannot run.
    Perf(Kind),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetExit {
    Code(i32),
    Signal(i32),
    /// An attached process (`record --pid`): it ended (its status went to
    /// its parent), or memlens stopped recording while it ran on.
    Attached {
        ended: bool,
    },
}

impl TargetExit {
    /// The exit status a shell would show for the target.
    pub fn shell_status(self) -> i32 {
        match self {
            TargetExit::Code(c) => c,
            TargetExit::Signal(s) => 128 + s,
            TargetExit::Attached { .. } => 0,
        }
    }
}

/// A finished run whose raw logs are complete: [`finalize`](crate::finalize)
/// `dir` with `run` to write the profile (a step of its own, so the caller can
/// show its progress).
pub struct RecordOutcome {
    pub dir: PathBuf,
    /// Held until the profile is written.
    pub lock: memlens_profile::DirLock,
    pub exit: TargetExit,
    pub run: RunInfo,
    /// The samples written while the program ran, for the finalizer.
    pub live_samples: Option<LiveSamples>,
    /// The replay of an image begun while it ran, for the finalizer.
    pub replay_ahead: Option<crate::ReplayAhead>,
}

/// Takes the profile directory for this run, with an empty `raw/` (an
/// earlier run, or an interrupted run's raw logs, is kept aside in
/// <dir>.old): one run per directory, written by one memlens at a time.
pub(crate) fn claim_profile_dir(cfg: &RecordConfig) -> Result<(memlens_profile::DirLock, PathBuf)> {
    let (lock, kept_aside) = memlens_profile::claim_dir(&cfg.out_dir, cfg.force)?;
    if let Some(old) = kept_aside {
        eprintln!("{}", memlens_profile::kept_aside_note(&cfg.out_dir, &old));
    }
    let raw_dir = cfg.out_dir.join(memlens_profile::RAW_DIR);
    memlens_profile::create_private_dir(&raw_dir)?;
    Ok((lock, raw_dir))
}

//! The collector: launches a program under the memlens runtime, samples its
//! capacity from /proc, follows its children, and turns the raw logs into a profile.

mod attach;
mod block_map;
pub mod calibrate;
mod code_seen;
mod config;
mod finalize;
mod image;
pub mod inherited;
mod live;
mod live_replay;
mod live_samples;
pub use live::RenderLive;
pub use live_replay::ReplayAhead;
pub use live_samples::LiveSamples;
mod mappings;
pub mod perf;
mod process_tree;
mod reaper;
mod record;
mod replay;
mod rescue;
mod sampler;
pub mod sysinfo;
mod tail;

pub use config::{RecordConfig, RecordOutcome, SamplerChoice, TargetExit};
pub use finalize::{finalize, FollowedLogs, RunInfo};
pub use record::record;

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// (Its cause is told in words: not a `source` for a chain to repeat.)
    #[error("{path}: {}", memlens_profile::error_words(.cause))]
    Io {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error(transparent)]
    Profile(#[from] memlens_profile::ProfileError),
    #[error("{0}")]
    Usage(String),
    /// The program to record cannot be run (exit 126, as `env` and
    /// `timeout` do; 127 when `not_found`).
    #[error("{message}")]
    CannotRun { message: String, not_found: bool },
}

impl Error {
    /// An I/O error on `path`; a full disk or quota, met only by writes,
    /// says how to finish the profile once there is room.
    pub fn io(path: &Path, cause: std::io::Error) -> Self {
        if matches!(cause.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) {
            return Error::Profile(memlens_profile::ProfileError::Write {
                path: path.to_path_buf(),
                detail: memlens_profile::error_words(&cause),
            });
        }
        Error::Io {
            path: path.to_path_buf(),
            cause,
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;

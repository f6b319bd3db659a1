//! The machine's memory hierarchy: cache geometry (from sysfs) and what
//! `memlens calibrate` measured on it, saved as JSON for the cache model.

use crate::{ProfileError, Result};
use memlens_rawlog::level::MemLevel;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One data or unified cache level, as sysfs describes it for CPU 0.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CacheLevel {
    /// "L1d", "L2", "L3", ...
    pub name: String,
    pub level: u8,
    pub size: u64,
    pub ways: u32,
    pub line: u32,
    /// CPUs sharing it (1: private to a core's thread).
    pub shared_cpus: u32,
}

/// Mean latency of one dependent load at a working-set size.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyPoint {
    pub bytes: u64,
    pub ns: f64,
}

/// The latency plateau of one level: the median of the points whose working
/// set fits that level and not the one above it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LevelLatency {
    /// A cache's name, or "DRAM".
    pub name: String,
    pub ns: f64,
    /// Working-set sizes the plateau was taken from.
    pub from_bytes: u64,
    pub to_bytes: u64,
    pub points: u32,
}

/// Streaming bandwidth of one kind ("read", "write", "copy") over a buffer,
/// the median of repeated runs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BandwidthPoint {
    pub kind: String,
    pub threads: u32,
    pub bytes: u64,
    /// Bytes moved by the program per second (a copy counts its reads and
    /// writes): the median run's.
    pub gib_per_s: f64,
    /// Every run's GiB/s, slowest first (empty in calibrations written
    /// before runs were repeated).
    #[serde(default)]
    pub runs_gib_per_s: Vec<f64>,
}

impl BandwidthPoint {
    /// How far the runs spread around the median: (fastest - slowest) /
    /// median, without the one fastest and one slowest run when there are
    /// five or more (a single disturbed run moves the median little and
    /// should not condemn the figure).
    pub fn spread(&self) -> f64 {
        let runs = &self.runs_gib_per_s;
        let middle = if runs.len() >= 5 {
            &runs[1..runs.len() - 1]
        } else {
            &runs[..]
        };
        match (middle.first(), middle.last()) {
            (Some(lo), Some(hi)) => (hi - lo) / self.gib_per_s.max(f64::MIN_POSITIVE),
            _ => 0.0,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub host: String,
    pub cpu: String,
    pub kernel: String,
    pub memlens_version: String,
    /// How the figures were obtained.
    pub method: String,
    pub caches: Vec<CacheLevel>,
    pub latency: Vec<LatencyPoint>,
    /// One plateau per cache level, then DRAM when the largest size reached it.
    pub levels: Vec<LevelLatency>,
    /// Working-set sizes after which latency rose by half or more: where the
    /// curve itself puts the caches' capacities (sysfs may differ in a VM).
    pub knees: Vec<u64>,
    /// Only figures whose runs agreed (`memlens calibrate` refuses the others).
    pub bandwidth: Vec<BandwidthPoint>,
}

/// The copy a profile keeps of the calibration its modelled costs use.
pub const CALIBRATION_FILE: &str = "calibration.json";

impl Calibration {
    /// The latency plateau (ns) of a cache (by its sysfs name) or "DRAM".
    pub fn level_ns(&self, name: &str) -> Option<f64> {
        self.levels.iter().find(|l| l.name == name).map(|l| l.ns)
    }

    /// The calibrated latency (ns) of a level the cache model gives, by its
    /// code in the samples table: L1 is the first cache measured, L2 the
    /// cache named so, LLC the last, DRAM its own plateau.
    pub fn model_level_ns(&self, code: u8) -> Option<f64> {
        match MemLevel::from_code(code) {
            MemLevel::L1 => self.level_ns(&self.caches.first()?.name),
            MemLevel::L2 => self.level_ns("L2"),
            MemLevel::Llc => self.level_ns(&self.caches.last()?.name),
            MemLevel::LocalDram => self.level_ns("DRAM"),
            _ => None,
        }
    }

    /// Where `memlens calibrate` keeps the machine's calibration by default.
    pub fn default_path() -> PathBuf {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .unwrap_or_else(std::env::temp_dir);
        base.join("memlens").join("calibration.json")
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        let io = |cause| ProfileError::Io {
            path: path.to_path_buf(),
            cause,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let text = serde_json::to_string_pretty(self).map_err(|e| ProfileError::Format {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
        std::fs::write(path, text).map_err(io)
    }

    pub fn read(path: &Path) -> Result<Calibration> {
        let text = crate::read_small_text(path, 16 << 20)?;
        serde_json::from_str(&text).map_err(|e| ProfileError::Format {
            path: path.to_path_buf(),
            detail: format!("not a memlens calibration ({e}); run `memlens calibrate` again"),
        })
    }
}

//! What the collector tells the runtime (the environment variables, the
//! unwinders, the access filter) and what the runtime ran with.

/// Which unwinder walked a call stack: frame pointers, the runtime's cached
/// DWARF rules, or libgcc's `_Unwind_Backtrace` (alone, or for the stacks the
/// cached rules do not describe).
pub mod walked_by {
    pub const FRAME_POINTERS: usize = 0;
    pub const CACHED_RULES: usize = 1;
    pub const LIBGCC: usize = 2;
    pub const COUNT: usize = 3;
}

/// Settings the runtime ran with, copied into the header so a log explains itself.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct RuntimeSettings {
    /// Allocations of at least this many bytes are all recorded with their stack.
    pub min_size: u64,
    /// Mean bytes between two sampled allocations below `min_size` (0: none sampled).
    pub sample_rate: u64,
    pub max_frames: u32,
    /// One of [`unwinder`]'s codes.
    pub unwinder: u32,
    /// One access sample per this many accesses of a class (instrumented code).
    pub access_period: u64,
    /// Bits of [`access_filter`].
    pub access_filter: u32,
    pub _pad: u32,
}

impl RuntimeSettings {
    /// The runtime's settings when nothing is set: chosen by measurement
    /// (`bench/`, docs/performance.md); `memlens record --help` shows them.
    pub const DEFAULT: RuntimeSettings = RuntimeSettings {
        min_size: 64 * 1024,
        sample_rate: 512 * 1024,
        max_frames: 64,
        unwinder: unwinder::DWARF,
        access_period: 4099,
        access_filter: access_filter::LOADS | access_filter::STORES,
        _pad: 0,
    };
}

/// What the instrumented backend samples: bits of `RuntimeSettings::access_filter`.
pub mod access_filter {
    pub const LOADS: u32 = 1;
    pub const STORES: u32 = 2;
    /// Instead of one access in `access_period`, every access to one cache
    /// line in `access_period`, the lines chosen by [`super::line_chosen`]
    /// (spatially hashed sampling, as SHARDS: docs/references.md). A chosen
    /// line's whole access stream is kept, so reuse distances among chosen
    /// lines are exact and scale by the period to estimate all lines'.
    pub const LINES: u32 = 4;
}

/// Cache line size the line sampling hashes by.
pub const SAMPLED_LINE: u64 = 64;

/// Whether the line holding `addr` is one of the 1-in-`period` sampled lines:
/// a fixed mixing of the line number (splitmix64's finaliser), so every thread
/// and process chooses the same lines.
#[inline]
pub fn line_chosen(addr: u64, period: u64) -> bool {
    let mut h = addr / SAMPLED_LINE;
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    h.is_multiple_of(period.max(1))
}

/// The environment variables `memlens record` passes the runtime (and a user
/// sets in transparent mode; docs/recording.md lists them with their
/// defaults), named once for both sides.
pub mod env {
    use core::ffi::CStr;
    pub const DIR: &CStr = c"MEMLENS_DIR";
    /// Set by `memlens record`: the collector samples /proc, not the runtime.
    pub const COLLECTOR: &CStr = c"MEMLENS_COLLECTOR";
    pub const DISABLE: &CStr = c"MEMLENS_DISABLE";
    pub const INTERVAL: &CStr = c"MEMLENS_INTERVAL";
    pub const MIN_SIZE: &CStr = c"MEMLENS_MIN_SIZE";
    pub const SAMPLE_RATE: &CStr = c"MEMLENS_SAMPLE_RATE";
    /// "1": every block in a process image built with `memlens cc` (its
    /// access samples each need their block), the default rate elsewhere.
    pub const EVERY_BLOCK_IF_INSTRUMENTED: &CStr = c"MEMLENS_EVERY_BLOCK_IF_INSTRUMENTED";
    pub const UNWIND: &CStr = c"MEMLENS_UNWIND";
    pub const MAX_FRAMES: &CStr = c"MEMLENS_MAX_FRAMES";
    pub const PERIOD: &CStr = c"MEMLENS_PERIOD";
    pub const SAMPLE_LINES: &CStr = c"MEMLENS_SAMPLE_LINES";
    pub const CACHE_MODEL: &CStr = c"MEMLENS_CACHE_MODEL";
    pub const NO_LOADS: &CStr = c"MEMLENS_NO_LOADS";
    pub const NO_STORES: &CStr = c"MEMLENS_NO_STORES";

    /// A variable's name as a string, for `Command::env`.
    pub fn name(var: &CStr) -> &str {
        var.to_str().unwrap_or_default()
    }
}

/// How the runtime takes call stacks (`RuntimeSettings::unwinder`).
pub mod unwinder {
    /// Frame pointers, each read checked against the thread's stack.
    pub const FP: u32 = 0;
    /// DWARF: cached rules, libgcc for the stacks they do not describe.
    pub const DWARF: u32 = 1;
    pub const NONE: u32 = 2;
    /// DWARF through libgcc alone.
    pub const LIBGCC: u32 = 3;
    /// The profile's name of each code.
    pub const NAMES: [&str; 4] = ["frame-pointers", "dwarf", "none", "dwarf-libgcc"];
    /// Each code as `--unwind` and `MEMLENS_UNWIND` spell it.
    pub const OPTIONS: [&str; 4] = ["fp", "dwarf", "none", "libgcc"];

    /// The code `MEMLENS_UNWIND`'s value names.
    pub fn from_option(value: &[u8]) -> Option<u32> {
        (OPTIONS.iter())
            .position(|o| o.as_bytes() == value)
            .map(|code| code as u32)
    }
}

/// A size as the CLI, the environment and sysfs write it: "4096", "64K", "1M",
/// "2G" (powers of 1024); `None` when malformed or past u64.
pub fn parse_size(v: &[u8]) -> Option<u64> {
    let (digits, mult) = match v.last()? {
        b'k' | b'K' => (&v[..v.len() - 1], 1u64 << 10),
        b'm' | b'M' => (&v[..v.len() - 1], 1 << 20),
        b'g' | b'G' => (&v[..v.len() - 1], 1 << 30),
        _ => (v, 1),
    };
    let mut n: u64 = 0;
    if digits.is_empty() {
        return None;
    }
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    n.checked_mul(mult)
}

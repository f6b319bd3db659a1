//! The raw event log: the one definition of the bytes the runtime writes inside the
//! profiled process and the collector reads back.
//!
//! A log file is a [`FileHeader`] (live counters the collector polls while the target
//! runs) followed by [`BLOCK_SIZE`] blocks. Each thread appends its records to its own
//! staging block ([`STAGE_MAGIC`]), mapped `MAP_SHARED` once, publishing each with a
//! release store of [`BlockHeader::used`]; when it is full the thread copies its
//! records with `pwrite` to the block named in its header, the thread's next, which
//! then reads as a written block ([`BLOCK_MAGIC`]), and starts the staging block
//! again. The page cache holds every published record, so the log stays readable when
//! the target crashes or is killed with SIGKILL: a staging block's records belong at
//! its destination's place, unless that block was written with them already.
//!
//! A record is a [`RecordHeader`] (tag and length) followed by a fixed payload struct,
//! padded to 8 bytes. Variable-length records (strings, stacks, modules) put their
//! trailing bytes after the fixed part. `no_std`: the runtime must not allocate.
#![no_std]

use core::mem::{offset_of, size_of};
use core::sync::atomic::{AtomicU32, AtomicU64};

pub const MAGIC: u64 = u64::from_le_bytes(*b"MEMLENS1");
/// The log's format: 4 added the compact allocation and free records.
pub const VERSION: u32 = 4;
pub const HEADER_SIZE: usize = 256 * 1024;
/// Small enough that a program with thousands of short threads, each holding one
/// block, stays cheap in disk space; large enough that a busy thread maps a new
/// block only every ~2000 events.
pub const BLOCK_SIZE: usize = 64 * 1024;
pub const BLOCK_MAGIC: u32 = 0x4b4c_424d; // "MBLK"
/// A block the collector wrote ahead for the runtime to take
/// ([`FileHeader::ready_blocks`]); one still marked so at the end was never
/// taken and holds nothing.
pub const READY_MAGIC: u32 = 0x5944_4552; // "REDY"

/// A thread's staging block: its [`BlockHeader::used`] packs the block its
/// records are copied to when it is full ([`pack_staged`]).
pub const STAGE_MAGIC: u32 = 0x4753_4c4d; // "MLSG"

/// Bits of a staging block's used word that hold its bytes of records.
const STAGED_USED_BITS: u32 = 17;
const _: () = assert!(BLOCK_SIZE < 1 << STAGED_USED_BITS);

/// A staging block's used word: its destination block and its bytes of
/// records, in one word so that a reader sees both at once.
pub fn pack_staged(dest: u64, used: u64) -> u64 {
    dest << STAGED_USED_BITS | used
}

/// The destination block and bytes of records of a staging block's used word.
pub fn unpack_staged(word: u64) -> (u64, u64) {
    (
        word >> STAGED_USED_BITS,
        word & ((1 << STAGED_USED_BITS) - 1),
    )
}

/// File offset of block `index`.
pub fn block_offset(index: u64) -> u64 {
    HEADER_SIZE as u64 + index * BLOCK_SIZE as u64
}

/// The block at file offset `offset` (None: in the header).
pub fn block_index(offset: u64) -> Option<u64> {
    Some(offset.checked_sub(HEADER_SIZE as u64)? / BLOCK_SIZE as u64)
}

/// [`FileHeader::ready_blocks`] of the block indices [next, end).
pub fn pack_ready(next: u32, end: u32) -> u64 {
    u64::from(next) << 32 | u64::from(end)
}

/// The block indices (next, end) of [`FileHeader::ready_blocks`].
pub fn unpack_ready(v: u64) -> (u32, u32) {
    ((v >> 32) as u32, v as u32)
}
pub const THREAD_SLOTS: usize = 1024;
pub const MAX_FRAMES: usize = 128;

/// The C library routines `memlens cc` links instrumented code to the
/// runtime's `__wrap_NAME` for (`-Wl,--wrap=NAME`): their bytes are counted
/// and sampled as the program's.
pub const WRAPPED_ROUTINES: &[&str] = &[
    "memcpy", "memmove", "memset", "strlen", "strnlen", "strcmp", "strncmp", "memcmp", "bcmp",
    "strcpy", "stpcpy", "strncpy", "strcat", "strchr", "strrchr", "memchr", "strdup", "qsort",
    "qsort_r",
];
pub const MAX_STRING: usize = 4096;

/// Exact allocation counters of one thread, written only by that thread (relaxed
/// stores) and read by the collector at every timeline tick.
#[repr(C)]
#[derive(Default)]
pub struct Counters {
    pub alloc_bytes: AtomicU64,
    pub free_bytes: AtomicU64,
    pub allocs: AtomicU64,
    pub frees: AtomicU64,
    /// Call stacks captured, indexed by the [`walked_by`] code of the unwinder
    /// that walked them.
    pub stacks_walked: [AtomicU64; walked_by::COUNT],
}

impl Counters {
    /// Every counter, for resetting and folding a thread's into the retired ones.
    pub fn all(&self) -> impl Iterator<Item = &AtomicU64> {
        [
            &self.alloc_bytes,
            &self.free_bytes,
            &self.allocs,
            &self.frees,
        ]
        .into_iter()
        .chain(&self.stacks_walked)
    }
}

pub mod level;

/// Which unwinder walked a call stack: frame pointers, the runtime's cached
/// DWARF rules, or libgcc's `_Unwind_Backtrace` (alone, or for the stacks the
/// cached rules do not describe).
pub mod walked_by {
    pub const FRAME_POINTERS: usize = 0;
    pub const CACHED_RULES: usize = 1;
    pub const LIBGCC: usize = 2;
    pub const COUNT: usize = 3;
}

/// Access classes of the instrumented (sancov) backend: loads of 1, 2, 4, 8 and 16
/// bytes, then stores of the same sizes.
pub const ACCESS_CLASSES: usize = 10;
pub const ACCESS_SIZES: [u64; 5] = [1, 2, 4, 8, 16];
/// Access counters plus the bytes of intercepted memcpy/memmove/memset.
pub const COUNTS: usize = ACCESS_CLASSES + 2;
pub const BULK_READ: usize = ACCESS_CLASSES;
pub const BULK_WRITTEN: usize = ACCESS_CLASSES + 1;

/// Bytes of one access class.
pub const fn class_size(class: usize) -> u64 {
    ACCESS_SIZES[class % 5]
}

pub const fn class_is_store(class: usize) -> bool {
    class >= 5
}

/// Exact access counts of one thread, published by the thread at least every
/// `PUBLISH_EVERY` accesses of a class (the collector's bandwidth timeline).
#[repr(C)]
pub struct AccessCounters {
    pub counts: [AtomicU64; COUNTS],
}

impl Default for AccessCounters {
    fn default() -> Self {
        AccessCounters {
            counts: [const { AtomicU64::new(0) }; COUNTS],
        }
    }
}

/// Accesses of a class between two publications of its count.
pub const PUBLISH_EVERY: u64 = 1 << 16;

#[repr(C)]
#[derive(Default)]
pub struct ThreadSlot {
    /// 0 when free; otherwise the owning thread id.
    pub tid: AtomicU32,
    pub _pad: u32,
    pub counters: Counters,
    pub access: AccessCounters,
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

#[repr(C)]
pub struct FileHeader {
    pub magic: u64,
    pub version: u32,
    pub pid: u32,
    pub ppid: u32,
    /// MPI rank from OMPI/PMI/PMIx/Slurm variables, or -1.
    pub rank: i32,
    /// Which exec of this pid wrote the log (0 for the first image).
    pub exec_seq: u32,
    pub _pad: u32,
    /// CLOCK_MONOTONIC ns when the runtime started in this process.
    pub start_ns: u64,
    pub settings: RuntimeSettings,
    /// Next free byte offset for a block (atomic bump allocator).
    pub reserve_cursor: AtomicU64,
    /// Events the runtime could not record (log full, disk full, table full).
    pub dropped_events: AtomicU64,
    /// Allocations tracked (with an event) that could not enter the tracking table.
    pub untracked_allocs: AtomicU64,
    /// Counters of threads that have exited, and of threads beyond `THREAD_SLOTS`.
    pub retired: Counters,
    pub retired_access: AccessCounters,
    /// Set once instrumented code made its first access callback.
    pub instrumented: AtomicU32,
    /// What went wrong in this process that makes parts of its log incomplete:
    /// bits of [`fault`].
    pub faults: AtomicU32,
    /// Heap bytes glibc's allocator held when the runtime started (its own
    /// count, `mallinfo2`): blocks of the dynamic loader and library
    /// constructors, whose frees the counters see while their allocations
    /// came before them.
    pub heap_before_start: AtomicU64,
    /// Blocks [next, end) ([`pack_ready`]) the collector reserved and wrote
    /// (zeros, marked [`READY_MAGIC`]) while the program runs, for its threads
    /// to take instead of writing their own: writing a block's zeros into the
    /// page cache was 14% of a malloc-heavy program's time under every-block
    /// recording. A writer takes only a block past its previous one, so each
    /// thread's blocks stay in file order.
    pub ready_blocks: AtomicU64,
    /// Blocks the threads took from [`FileHeader::ready_blocks`].
    pub ready_taken: AtomicU64,
    pub slots: [ThreadSlot; THREAD_SLOTS],
    /// Threads that became writers of this log (each before it read a time
    /// for its first record): while it is 1, no thread but the one writing
    /// can log an event earlier than those already published, so a reader
    /// may replay the records as it reads them (0: a runtime that does not
    /// count them).
    pub threads_started: AtomicU64,
    /// Slots [0, slots_claimed) were ever claimed: the others' counters are
    /// zero (0: a runtime that does not say, every slot is read).
    pub slots_claimed: AtomicU64,
}

const _: () = assert!(size_of::<FileHeader>() <= HEADER_SIZE);

#[repr(C)]
pub struct BlockHeader {
    pub magic: u32,
    pub tid: u32,
    /// Bytes of published records after this header.
    pub used: AtomicU64,
}

pub const BLOCK_HEADER_SIZE: usize = size_of::<BlockHeader>();

/// What a block's header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockState {
    /// Written whole: its thread and bytes of records.
    Written { tid: u32, used: u64 },
    /// A thread's staging block: its records belong at block `dest`.
    Staging { tid: u32, dest: u64, used: u64 },
}

impl BlockHeader {
    /// A block header's bytes as they lie in the file: `magic` (which says
    /// how to read `word`, see [`BlockState`]), the thread, the used word.
    pub fn bytes(magic: u32, tid: u32, word: u64) -> [u8; BLOCK_HEADER_SIZE] {
        let mut b = [0u8; BLOCK_HEADER_SIZE];
        b[..4].copy_from_slice(&magic.to_le_bytes());
        b[4..8].copy_from_slice(&tid.to_le_bytes());
        b[8..].copy_from_slice(&word.to_le_bytes());
        b
    }

    /// A block's state, from the first [`BLOCK_HEADER_SIZE`] bytes of the
    /// block as read from the file; `None` while the runtime has not
    /// initialised it (or the bytes are too few).
    pub fn read(bytes: &[u8]) -> Option<BlockState> {
        let word = |i: usize| Some(u64::from_le_bytes(bytes.get(i..i + 8)?.try_into().ok()?));
        let (first, used) = (word(0)?, word(8)?);
        let tid = (first >> 32) as u32;
        match first as u32 {
            BLOCK_MAGIC => Some(BlockState::Written { tid, used }),
            STAGE_MAGIC => {
                let (dest, used) = unpack_staged(used);
                Some(BlockState::Staging { tid, dest, used })
            }
            _ => None,
        }
    }
}
pub const BLOCK_CAPACITY: usize = BLOCK_SIZE - BLOCK_HEADER_SIZE;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RecordHeader {
    pub tag: u16,
    /// Whole record length in bytes, header included, a multiple of 8.
    pub len: u16,
    pub _pad: u32,
}

pub const RECORD_HEADER_SIZE: usize = size_of::<RecordHeader>();

/// Record tags. Values are part of the on-disk format: never renumber.
pub mod tag {
    pub const ALLOC: u16 = 1;
    pub const FREE: u16 = 2;
    pub const MMAP: u16 = 3;
    pub const MUNMAP: u16 = 4;
    pub const MREMAP: u16 = 5;
    pub const REGION_BEGIN: u16 = 6;
    pub const REGION_END: u16 = 7;
    pub const TAG: u16 = 8;
    pub const UNTAG: u16 = 9;
    pub const GROUP_BEGIN: u16 = 10;
    pub const GROUP_END: u16 = 11;
    pub const STRING: u16 = 12;
    pub const STACK: u16 = 13;
    pub const MODULE: u16 = 14;
    pub const THREAD_START: u16 = 15;
    pub const THREAD_EXIT: u16 = 16;
    pub const TIMELINE: u16 = 17;
    pub const PROCESS_EXIT: u16 = 18;
    pub const SAMPLE: u16 = 19;
    pub const COUNTER_DEF: u16 = 20;
    pub const COUNTER: u16 = 21;
    pub const PROCESS_USAGE: u16 = 22;
    pub const THREAD_TOTALS: u16 = 23;
    pub const UNTRACKED_PROCESS: u16 = 24;
    /// A process-wide phase's marks: [`RegionMark`]s whose counts are every
    /// thread's of the process.
    pub const PHASE_BEGIN: u16 = 25;
    pub const PHASE_END: u16 = 26;
    /// A thread's access counts read by the collector at a tick.
    pub const THREAD_TRAFFIC: u16 = 27;
    /// An [`Alloc`] in its short form, [`SmallAlloc`].
    pub const SMALL_ALLOC: u16 = 28;
    /// A running process memlens attached to (`record --pid`): an
    /// [`UntrackedProcess`], recorded from the attach on.
    pub const ATTACHED_PROCESS: u16 = 29;
    /// A mapping of an attached process appeared in, or left, its
    /// /proc/PID/maps: a [`Mapping`].
    pub const MAPPING: u16 = 30;
    /// The image's command line as /proc/self/cmdline gives it (arguments
    /// each followed by a NUL), written by the runtime at its start when no
    /// collector knows it (transparent mode): a [`CommandLine`].
    pub const COMMAND_LINE: u16 = 31;
    /// An allocation and a free coded against their block's [`Context`]
    /// (see there); readers see them as [`ALLOC`] and [`FREE`].
    pub const COMPACT_ALLOC: u16 = 32;
    pub const COMPACT_FREE: u16 = 33;
}

/// Bits of [`FileHeader::faults`]: each makes a part of the log incomplete, and
/// each is reported as a loss.
pub mod fault {
    /// Another allocator came before the runtime in symbol lookup: malloc and
    /// free of this process were not seen.
    pub const HEAP_NOT_HOOKED: u32 = 1;
    /// The allocator in use cannot tell a block's size (no malloc_usable_size of
    /// its own): the live heap was not counted.
    pub const HEAP_SIZES_UNKNOWN: u32 = 2;
    /// The program closed or replaced the log's descriptor and it could not be
    /// reopened: later events were dropped.
    pub const LOG_LOST: u32 = 4;
    /// The file system refused a log block: later events were dropped.
    pub const DISK_FULL: u32 = 8;
}

/// How an allocation was made.
pub mod alloc_kind {
    pub const MALLOC: u8 = 0;
    pub const CALLOC: u8 = 1;
    pub const REALLOC: u8 = 2;
    pub const MEMALIGN: u8 = 3;
    pub const VALLOC: u8 = 4;
    pub const MMAP: u8 = 5;
    pub const NAMES: [&str; 6] = ["malloc", "calloc", "realloc", "memalign", "valloc", "mmap"];
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

/// Why an allocation carries an event.
pub mod alloc_flags {
    /// At or above the size threshold: recorded exactly.
    pub const EXACT: u8 = 1;
    /// Chosen by byte sampling: stands for more allocations (see `sample_rate`).
    pub const SAMPLED: u8 = 2;
    /// Made inside a `memlens_group_begin/end` span.
    pub const GROUPED: u8 = 4;
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Alloc {
    pub time: u64,
    pub ptr: u64,
    pub size: u64,
    pub usable: u64,
    pub stack: u64,
    pub group: u64,
    pub kind: u8,
    pub flags: u8,
    pub _pad: [u8; 6],
}

/// The common allocation in 40 bytes instead of [`Alloc`]'s 64: no group,
/// under 4 GiB, usable size at most 64 KiB over it. Recording every block
/// writes one per call: the log's size is mostly these.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SmallAlloc {
    pub time: u64,
    pub ptr: u64,
    pub stack: u64,
    pub size: u32,
    /// Usable size minus size.
    pub slack: u16,
    pub kind: u8,
    pub flags: u8,
}

impl Alloc {
    /// The short form, when the allocation fits it.
    pub fn small(&self) -> Option<SmallAlloc> {
        Some(SmallAlloc {
            time: self.time,
            ptr: self.ptr,
            stack: self.stack,
            size: u32::try_from(self.size).ok()?,
            slack: u16::try_from(self.usable.checked_sub(self.size)?).ok()?,
            kind: self.kind,
            flags: self.flags,
        })
        .filter(|_| self.group == 0)
    }
}

impl From<SmallAlloc> for Alloc {
    fn from(s: SmallAlloc) -> Alloc {
        Alloc {
            time: s.time,
            ptr: s.ptr,
            size: s.size as u64,
            usable: s.size as u64 + s.slack as u64,
            stack: s.stack,
            group: 0,
            kind: s.kind,
            flags: s.flags,
            _pad: [0; 6],
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Free {
    pub time: u64,
    pub ptr: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Mmap {
    pub time: u64,
    pub addr: u64,
    pub len: u64,
    pub stack: u64,
    pub prot: i32,
    pub flags: i32,
    pub fd: i32,
    pub _pad: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Munmap {
    pub time: u64,
    pub addr: u64,
    pub len: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Mremap {
    pub time: u64,
    pub old_addr: u64,
    pub old_len: u64,
    pub new_addr: u64,
    pub new_len: u64,
}

/// One sampled access of instrumented code.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Sample {
    pub time: u64,
    pub addr: u64,
    /// Return address of the callback: the instrumented access's call site.
    pub pc: u64,
    /// The access's calling context: a [`StackDef`] id (0: none).
    pub stack: u64,
    pub cpu: u32,
    /// Access class (see `ACCESS_CLASSES`).
    pub class: u8,
    /// Memory level the cache model gave the access ([`level::MemLevel`]
    /// code; 0 when the model is off).
    pub level: u8,
    /// Bits of [`sample_flags`].
    pub flags: u8,
    pub _pad: u8,
}

/// What kind of access a [`Sample`] is, beyond its class.
pub mod sample_flags {
    /// Part of an intercepted memcpy, memmove or memset: its bytes are
    /// sampled as 8-byte accesses, one sample per period of them.
    pub const BULK: u8 = 1;
    /// Half of an atomic read-modify-write (atomicrmw, cmpxchg), which counts
    /// as one load and one store of its size.
    pub const ATOMIC: u8 = 2;
}

/// Region begin/end, with the thread's exact access counts at that instant
/// (with those of the OpenMP teams it forked), then 16 trailing bytes: the
/// process's live heap, and the bytes its teams read and wrote so far.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RegionMark {
    pub time: u64,
    pub name: u64,
    pub counts: [u64; COUNTS],
}

/// Group begin/end.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Named {
    pub time: u64,
    pub name: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Tag {
    pub time: u64,
    pub name: u64,
    pub start: u64,
    pub len: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Untag {
    pub time: u64,
    pub start: u64,
}

/// Followed by `len` bytes of UTF-8 (not NUL-terminated).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct StringDef {
    pub id: u64,
    pub len: u32,
    pub _pad: u32,
}

/// Followed by `frames` u64 return addresses, innermost first.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct StackDef {
    pub id: u64,
    pub frames: u32,
    pub _pad: u32,
}

/// A loaded ELF object. Followed by `path_len` bytes of path.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Module {
    pub time: u64,
    /// Load bias (`dlpi_addr`): file virtual address + bias = runtime address.
    pub bias: u64,
    pub start: u64,
    pub end: u64,
    pub path_len: u32,
    pub _pad: u32,
}

/// A thread's start (with its stack range) or exit (stack fields 0).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ThreadEvent {
    pub time: u64,
    pub tid: u64,
    pub stack_lo: u64,
    pub stack_hi: u64,
}

/// A thread's own exact totals, written by the thread when it exits (or runs
/// the process's exit).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ThreadTotals {
    pub time: u64,
    pub tid: u64,
    /// Exact access counts per class, then bulk bytes read and written.
    pub access: [u64; COUNTS],
    pub alloc_bytes: u64,
    pub free_bytes: u64,
    pub allocs: u64,
    pub frees: u64,
    /// 0 when the thread had no slot of its own: its allocation counters were
    /// shared with others and are not its own.
    pub own_alloc_counters: u64,
    /// Calls of qsort/qsort_r from instrumented code, and the bytes of the
    /// arrays they sorted: libc moves their elements, which no counter sees.
    pub sorts: [u64; 2],
}

/// One capacity sample of one process.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Timeline {
    pub time: u64,
    pub pid: u64,
    pub rss: u64,
    pub anon: u64,
    pub file: u64,
    pub shmem: u64,
    pub swap: u64,
    pub heap_alloc_bytes: u64,
    pub heap_free_bytes: u64,
    pub heap_allocs: u64,
    pub heap_frees: u64,
    /// Exact bytes read and written by instrumented code so far (with bulk copies).
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub loads: u64,
    pub stores: u64,
    /// Bytes resident per NUMA node for the first 4 nodes (u64::MAX: not sampled).
    pub numa: [u64; 4],
    /// [`FileHeader::heap_before_start`].
    pub heap_before_start: u64,
}

impl Timeline {
    /// Heap bytes live at the reading: what the allocator held when the
    /// runtime started, plus the exact counters' allocated - freed (saturating:
    /// a damaged log's counters can be anything).
    pub fn heap_live(&self) -> u64 {
        (self.heap_before_start.saturating_add(self.heap_alloc_bytes))
            .saturating_sub(self.heap_free_bytes)
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcessExit {
    pub time: u64,
    /// Exit code, or 128 + signal number.
    pub status: i32,
    pub signaled: u32,
    pub pid: u64,
}

/// A process of the run that has no runtime (a static or setuid program):
/// the collector samples it from /proc alone. Followed by its executable's path.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct UntrackedProcess {
    pub time: u64,
    pub pid: u32,
    pub ppid: u32,
}

/// A mapping the collector found in, or no longer found in, an attached
/// process's /proc/PID/maps. Followed by its name as maps gives it (a path,
/// `[heap]`, `[stack]`, ...; empty for an anonymous mapping).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Mapping {
    /// For a mapping gone, the look that missed it; for one found, the look
    /// before (it appeared since, and may have been touched since).
    pub time: u64,
    pub pid: u32,
    /// 1: the mapping was found; 0: it is gone.
    pub present: u32,
    pub start: u64,
    pub end: u64,
    /// Offset into the file.
    pub offset: u64,
    /// PROT_READ | PROT_WRITE | PROT_EXEC as maps' permissions give them.
    pub prot: u32,
    /// 1 for a shared mapping ('s'), 0 for a private one.
    pub shared: u32,
}

/// An image's command line. Followed by its arguments, each ending in a NUL
/// (cut at [`CommandLine::MAX_BYTES`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CommandLine {
    pub time: u64,
}

impl CommandLine {
    /// The most bytes of arguments recorded: a record's length is 16 bits.
    pub const MAX_BYTES: usize = 4096;
}

/// The kernel's account of a child the collector reaped (wait4's rusage): CPU
/// time, including the children it waited for. (Its peak resident set is left
/// out: Linux carries it over exec, so it would be memlens' own at fork.)
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcessUsage {
    pub pid: u64,
    pub user_ns: u64,
    pub system_ns: u64,
}

/// A counting perf event the collector reads every tick. Trailing bytes: its
/// name, a NUL, and how its value is obtained ("measured", "modelled: ...").
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CounterDef {
    pub index: u32,
    /// 0: the recorded program (inherited by its processes), 1: the whole machine.
    pub machine_wide: u32,
    /// Units per count (64 for bytes per cache line, 1 otherwise).
    pub scale: f64,
    /// NUL-padded unit of the scaled value ("bytes", "ns", "instructions").
    pub unit: [u8; 16],
}

/// One reading of a counter: cumulative count and the kernel's enabled and
/// running times (they differ when the PMU multiplexes events).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CounterReading {
    pub time: u64,
    pub value: u64,
    pub enabled: u64,
    pub running: u64,
    pub index: u32,
    pub reserved: u32,
}

/// One thread's exact access counts as it last published them, read by the
/// collector at a tick: the per-thread bandwidth timeline.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ThreadTraffic {
    pub time: u64,
    pub pid: u32,
    pub tid: u32,
    pub counts: [u64; COUNTS],
}

/// Length of a record with `payload` fixed bytes and `extra` trailing bytes.
pub const fn record_len(payload: usize, extra: usize) -> usize {
    (RECORD_HEADER_SIZE + payload + extra + 7) & !7
}

/// The payload structs that may be read from or written to a record.
///
/// # Safety
/// Implementors must be `repr(C)`, `Copy`, and valid for every bit pattern.
pub unsafe trait Payload: Copy + Default {}

macro_rules! payload {
    ($($ty:ty),* $(,)?) => {
        $(unsafe impl Payload for $ty {})*
    };
}
payload!(
    ThreadTraffic,
    Sample,
    RegionMark,
    Alloc,
    SmallAlloc,
    Free,
    Mmap,
    Munmap,
    Mremap,
    Named,
    Tag,
    Untag,
    StringDef,
    StackDef,
    Module,
    ThreadEvent,
    ThreadTotals,
    Timeline,
    ProcessExit,
    ProcessUsage,
    UntrackedProcess,
    Mapping,
    CommandLine,
    CounterDef,
    CounterReading
);

/// A record as found in a byte buffer: its tag, fixed payload bytes and trailing bytes.
pub struct RawRecord<'a> {
    pub tag: u16,
    pub body: &'a [u8],
    /// The tag in the log: a compact form's is not `tag`.
    form: u16,
    /// The second half of the record's header (a compact form's field).
    word: u32,
    /// The block's context after this record: a compact record's time,
    /// pointer and stack, as decoded.
    context: Context,
}

impl<'a> RawRecord<'a> {
    /// The fixed payload, or `None` if the record is too short for it.
    #[inline]
    pub fn payload<P: Payload>(&self) -> Option<P> {
        if self.body.len() < size_of::<P>() {
            return None;
        }
        let mut out = P::default();
        // SAFETY: P is plain old data (trait contract) and the length was checked.
        unsafe {
            core::ptr::copy_nonoverlapping(
                self.body.as_ptr(),
                &mut out as *mut P as *mut u8,
                size_of::<P>(),
            )
        };
        Some(out)
    }

    /// An allocation record's payload, in any form (None for other tags).
    #[inline]
    pub fn alloc(&self) -> Option<Alloc> {
        match self.form {
            tag::COMPACT_ALLOC => {
                let fields = word_at(self.body, 0)?;
                let size = self.word as u64;
                Some(Alloc {
                    time: self.context.time,
                    ptr: self.context.ptr,
                    size,
                    usable: size + (fields >> 32 & 0xffff),
                    stack: self.context.stack,
                    group: 0,
                    kind: (fields >> 48) as u8,
                    flags: (fields >> 56) as u8,
                    _pad: [0; 6],
                })
            }
            tag::ALLOC => self.payload(),
            tag::SMALL_ALLOC => self.payload::<SmallAlloc>().map(Alloc::from),
            _ => None,
        }
    }

    /// A free record's payload, in either form (None for other tags).
    #[inline]
    pub fn free(&self) -> Option<Free> {
        match self.form {
            tag::COMPACT_FREE => Some(Free {
                time: self.context.time,
                // The block allocated last, unless named.
                ptr: word_at(self.body, 0).unwrap_or(self.context.ptr),
            }),
            tag::FREE => self.payload(),
            _ => None,
        }
    }

    /// The record's time; None for a definition (a string or a stack).
    #[inline]
    pub fn time(&self) -> Option<u64> {
        match self.form {
            tag::COMPACT_ALLOC | tag::COMPACT_FREE => Some(self.context.time),
            tag::STRING | tag::STACK => None,
            // Every other payload starts with its u64 time.
            _ => word_at(self.body, 0),
        }
    }

    /// Bytes after the fixed payload `P`.
    pub fn trailing<P: Payload>(&self) -> &'a [u8] {
        self.body.get(size_of::<P>()..).unwrap_or(&[])
    }
}

#[inline]
fn word_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The running values of a block's body that compact records are coded
/// against: the time of its last allocation or free, the pointer and stack
/// of its last allocation. So the common allocation takes 24 bytes (its
/// stack the last one's) instead of [`SmallAlloc`]'s 40, and the free of the
/// block allocated last 8 instead of 24: recording every block writes one
/// of each per call, and a smaller log costs the program less time in the
/// kernel writing it and the collector less reading it. Each body starts
/// from the default, so a block reads alone; a reader resuming within a
/// body carries the context it had there ([`Records::resume`]). A writer
/// writes every allocation and free through [`encode_alloc`] and
/// [`encode_free`], which keep its context as readers will.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Context {
    time: u64,
    ptr: u64,
    stack: u64,
}

impl Context {
    /// A body's start (the default, as a `const fn` for the runtime's statics).
    pub const fn new() -> Context {
        Context {
            time: 0,
            ptr: 0,
            stack: 0,
        }
    }

    /// The context after a full-form record, read from its body as the
    /// writer's [`encode_alloc`] and [`encode_free`] set it.
    fn see_full(&mut self, tag: u16, body: &[u8]) {
        let stack_at = match tag {
            tag::ALLOC => offset_of!(Alloc, stack),
            tag::SMALL_ALLOC => offset_of!(SmallAlloc, stack),
            tag::FREE => {
                self.time = word_at(body, 0).unwrap_or(self.time);
                return;
            }
            _ => return,
        };
        if let (Some(time), Some(ptr), Some(stack)) =
            (word_at(body, 0), word_at(body, 8), word_at(body, stack_at))
        {
            (self.time, self.ptr, self.stack) = (time, ptr, stack);
        }
    }

    /// Moves past a compact record (`word`: its header's second half): its
    /// time, and an allocation's pointer and stack, become the context's;
    /// false if its length is not one the writer gives it.
    #[inline]
    fn decode(&mut self, tag: u16, word: u32, body: &[u8]) -> bool {
        match (tag, body.len()) {
            (tag::COMPACT_ALLOC, 16 | 24) => {
                let (Some(fields), Some(ptr)) = (word_at(body, 0), word_at(body, 8)) else {
                    return false;
                };
                self.time = self.time.wrapping_add(fields & 0xffff_ffff);
                self.ptr = ptr;
                self.stack = word_at(body, 16).unwrap_or(self.stack);
                true
            }
            (tag::COMPACT_FREE, 0 | 8) => {
                self.time = self.time.wrapping_add(word as u64);
                true
            }
            _ => false,
        }
    }
}

/// Iterates over the records in `buf`; stops at the first malformed header and
/// reports it through [`Records::malformed`].
pub struct Records<'a> {
    buf: &'a [u8],
    pos: usize,
    context: Context,
    pub malformed: bool,
}

impl<'a> Records<'a> {
    /// The records of a block's body from its start.
    pub fn new(buf: &'a [u8]) -> Self {
        Records::resume(buf, Context::new())
    }

    /// The records of a block's body from within it, where a reader that
    /// stopped there had `context` ([`Records::context`]).
    pub fn resume(buf: &'a [u8], context: Context) -> Self {
        Records {
            buf,
            pos: 0,
            context,
            malformed: false,
        }
    }

    /// The context after the records read so far.
    pub fn context(&self) -> Context {
        self.context
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = RawRecord<'a>;

    #[inline]
    fn next(&mut self) -> Option<RawRecord<'a>> {
        let rest = self.buf.get(self.pos..)?;
        if rest.len() < RECORD_HEADER_SIZE {
            self.malformed |= !rest.is_empty();
            return None;
        }
        let tag = u16::from_le_bytes([rest[0], rest[1]]);
        let len = u16::from_le_bytes([rest[2], rest[3]]) as usize;
        if tag == 0 || len < RECORD_HEADER_SIZE || !len.is_multiple_of(8) || len > rest.len() {
            self.malformed = true;
            return None;
        }
        let body = &rest[RECORD_HEADER_SIZE..len];
        let (form, word) = (
            tag,
            u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]),
        );
        let tag = match form {
            tag::COMPACT_ALLOC | tag::COMPACT_FREE => {
                if !self.context.decode(form, word, body) {
                    self.malformed = true;
                    return None;
                }
                if form == tag::COMPACT_ALLOC {
                    tag::ALLOC
                } else {
                    tag::FREE
                }
            }
            _ => {
                self.context.see_full(form, body);
                form
            }
        };
        self.pos += len;
        Some(RawRecord {
            tag,
            body,
            form,
            word,
            context: self.context,
        })
    }
}

/// Writes records into a caller-provided byte buffer (a mapped block, or a `Vec`'s
/// spare space); returns the bytes written or `None` if it does not fit.
///
/// # Safety
/// `dst` must be valid for `cap` bytes of writes.
pub unsafe fn encode<P: Payload>(
    dst: *mut u8,
    cap: usize,
    tag: u16,
    payload: &P,
    extra: &[u8],
) -> Option<usize> {
    let len = record_len(size_of::<P>(), extra.len());
    if len > cap || len > u16::MAX as usize {
        return None;
    }
    let header = RecordHeader {
        tag,
        len: len as u16,
        _pad: 0,
    };
    // SAFETY: the caller guarantees `cap` writable bytes and len <= cap.
    unsafe {
        core::ptr::copy_nonoverlapping(&header as *const _ as *const u8, dst, RECORD_HEADER_SIZE);
        let body = dst.add(RECORD_HEADER_SIZE);
        core::ptr::copy_nonoverlapping(payload as *const P as *const u8, body, size_of::<P>());
        let tail = body.add(size_of::<P>());
        let pad = len - RECORD_HEADER_SIZE - size_of::<P>() - extra.len();
        // Most records have neither: no call to memcpy or memset for them.
        if !extra.is_empty() {
            core::ptr::copy_nonoverlapping(extra.as_ptr(), tail, extra.len());
        }
        if pad > 0 {
            core::ptr::write_bytes(tail.add(extra.len()), 0, pad);
        }
    }
    Some(len)
}

/// Writes an allocation's record in the shortest form that holds it (see
/// [`Context`]), moving the block's context past it; as [`encode`].
///
/// # Safety
/// As [`encode`].
#[inline]
pub unsafe fn encode_alloc(
    dst: *mut u8,
    cap: usize,
    a: &Alloc,
    context: &mut Context,
) -> Option<usize> {
    let delta = a.time.wrapping_sub(context.time);
    let slack = a.usable.wrapping_sub(a.size);
    let compact = a.group == 0
        && delta <= u32::MAX as u64
        && a.size <= u32::MAX as u64
        && slack <= u16::MAX as u64;
    let len = if !compact {
        // SAFETY: as the caller's.
        unsafe {
            match a.small() {
                Some(small) => encode(dst, cap, tag::SMALL_ALLOC, &small, &[]),
                None => encode(dst, cap, tag::ALLOC, a, &[]),
            }
        }?
    } else {
        let same_stack = a.stack == context.stack;
        let len = if same_stack { 24 } else { 32 };
        if len > cap {
            return None;
        }
        let fields = delta | slack << 32 | (a.kind as u64) << 48 | (a.flags as u64) << 56;
        let header = tag::COMPACT_ALLOC as u64 | (len as u64) << 16 | a.size << 32;
        // SAFETY: `len` <= `cap` writable bytes.
        unsafe {
            let words = dst as *mut [u8; 8];
            words.write(header.to_le_bytes());
            words.add(1).write(fields.to_le_bytes());
            words.add(2).write(a.ptr.to_le_bytes());
            if !same_stack {
                words.add(3).write(a.stack.to_le_bytes());
            }
        }
        len
    };
    (context.time, context.ptr, context.stack) = (a.time, a.ptr, a.stack);
    Some(len)
}

/// Writes a free's record in the shortest form that holds it (see
/// [`Context`]), moving the block's context past it; as [`encode`].
///
/// # Safety
/// As [`encode`].
#[inline]
pub unsafe fn encode_free(
    dst: *mut u8,
    cap: usize,
    f: &Free,
    context: &mut Context,
) -> Option<usize> {
    let delta = f.time.wrapping_sub(context.time);
    let len = if delta > u32::MAX as u64 {
        // SAFETY: as the caller's.
        unsafe { encode(dst, cap, tag::FREE, f, &[]) }?
    } else {
        let last_allocated = f.ptr == context.ptr;
        let len = if last_allocated { 8 } else { 16 };
        if len > cap {
            return None;
        }
        let header = tag::COMPACT_FREE as u64 | (len as u64) << 16 | delta << 32;
        // SAFETY: `len` <= `cap` writable bytes.
        unsafe {
            let words = dst as *mut [u8; 8];
            words.write(header.to_le_bytes());
            if !last_allocated {
                words.add(1).write(f.ptr.to_le_bytes());
            }
        }
        len
    };
    context.time = f.time;
    Some(len)
}

/// FNV-1a: ids for strings and stacks, stable across processes.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A stack's id from its addresses: a word at a time (one multiply each,
/// this runs for every recorded block), with a final mix so that stacks
/// differing in one low bit still differ everywhere.
pub fn hash_frames(frames: &[u64]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ frames.len() as u64;
    for &f in frames {
        h = (h ^ f).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h ^= h >> 32;
    }
    h ^= h >> 29;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 32;
    h | 1 // 0 means "no stack"
}

/// Parsers for the /proc files the capacity timeline samples; shared by the
/// collector and the runtime's own sampler thread, so they never allocate.
pub mod procfs {
    fn parse_u64(s: &[u8]) -> Option<u64> {
        let mut v: u64 = 0;
        let mut any = false;
        for &c in s {
            if c.is_ascii_digit() {
                v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
                any = true;
            } else if any {
                break;
            }
        }
        any.then_some(v)
    }

    /// `/proc/PID/statm`: (resident pages, shared pages).
    pub fn statm(buf: &[u8]) -> Option<(u64, u64)> {
        let mut fields = buf.split(|&c| c == b' ');
        let _size = fields.next()?;
        let resident = parse_u64(fields.next()?)?;
        let shared = parse_u64(fields.next()?)?;
        Some((resident, shared))
    }

    /// Field `n` of `/proc/PID/stat` after the command name (0: the state,
    /// 1: the parent, 7: minor faults, 9: major faults); the name may hold
    /// spaces and parentheses, so the fields start after its last `)`.
    pub fn stat_field(buf: &[u8], n: usize) -> Option<u64> {
        let close = buf.iter().rposition(|&c| c == b')')?;
        let mut fields = buf[close + 1..]
            .split(|&c| c == b' ')
            .filter(|f| !f.is_empty());
        parse_u64(fields.nth(n)?)
    }

    /// A `Key:   123 kB` line of `/proc/PID/status` or `smaps_rollup`, in bytes.
    pub fn kb_field(buf: &[u8], key: &[u8]) -> Option<u64> {
        for line in buf.split(|&c| c == b'\n') {
            if line.len() > key.len() && line.starts_with(key) && line[key.len()] == b':' {
                return parse_u64(&line[key.len() + 1..]).map(|kb| kb * 1024);
            }
        }
        None
    }

    /// One line of `/proc/PID/maps`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct MapsLine<'a> {
        pub start: u64,
        pub end: u64,
        /// `rwxp` / `rw-s` ...
        pub perms: [u8; 4],
        pub offset: u64,
        /// A path, `[heap]`, `[stack]`, `[vdso]`, ...; empty when anonymous.
        pub name: &'a [u8],
    }

    impl MapsLine<'_> {
        /// PROT_* bits of the permissions.
        pub fn prot(&self) -> u32 {
            (self.perms[0] == b'r') as u32
                | ((self.perms[1] == b'w') as u32) << 1
                | ((self.perms[2] == b'x') as u32) << 2
        }
    }

    fn hex(s: &[u8]) -> Option<u64> {
        if s.is_empty() || s.len() > 16 {
            return None;
        }
        s.iter().try_fold(0u64, |v, &c| {
            Some(v << 4 | (c as char).to_digit(16)? as u64)
        })
    }

    /// `start-end perms offset dev inode [name]`; the name may hold spaces.
    pub fn maps_line(line: &[u8]) -> Option<MapsLine<'_>> {
        let mut rest = line;
        let mut field = || {
            while rest.first() == Some(&b' ') {
                rest = &rest[1..];
            }
            let end = rest.iter().position(|&c| c == b' ').unwrap_or(rest.len());
            let (f, r) = rest.split_at(end);
            rest = r;
            Some(f).filter(|f| !f.is_empty())
        };
        let range = field()?;
        let dash = range.iter().position(|&c| c == b'-')?;
        let perms: [u8; 4] = field()?.try_into().ok()?;
        let offset = hex(field()?)?;
        let (_dev, _inode) = (field()?, field()?);
        let name = rest.trim_ascii();
        Some(MapsLine {
            start: hex(&range[..dash])?,
            end: hex(&range[dash + 1..])?,
            perms,
            offset,
            name,
        })
    }

    /// Fills a timeline record's rss/anon/file/shmem/swap from `status` contents.
    pub fn fill_from_status(buf: &[u8], t: &mut super::Timeline) {
        t.rss = kb_field(buf, b"VmRSS").unwrap_or(0);
        t.anon = kb_field(buf, b"RssAnon").unwrap_or(0);
        t.file = kb_field(buf, b"RssFile").unwrap_or(0);
        t.shmem = kb_field(buf, b"RssShmem").unwrap_or(0);
        t.swap = kb_field(buf, b"VmSwap").unwrap_or(0);
    }
}

impl AccessCounters {
    /// (bytes read, bytes written, loads, stores) from the counts. Wrapping, as the
    /// counters themselves are: a corrupt log's counts must not panic the reader.
    pub fn traffic(counts: &[u64; COUNTS]) -> (u64, u64, u64, u64) {
        let mut t = (counts[BULK_READ], counts[BULK_WRITTEN], 0u64, 0u64);
        for (c, &n) in counts.iter().take(ACCESS_CLASSES).enumerate() {
            let bytes = n.wrapping_mul(class_size(c));
            if class_is_store(c) {
                t.1 = t.1.wrapping_add(bytes);
                t.3 = t.3.wrapping_add(n);
            } else {
                t.0 = t.0.wrapping_add(bytes);
                t.2 = t.2.wrapping_add(n);
            }
        }
        t
    }

    pub fn load(&self) -> [u64; COUNTS] {
        core::array::from_fn(|i| self.counts[i].load(core::sync::atomic::Ordering::Relaxed))
    }
}

impl FileHeader {
    /// Fills a timeline record's heap and access figures from the live counters.
    pub fn fill_timeline(&self, t: &mut Timeline) {
        (
            t.heap_alloc_bytes,
            t.heap_free_bytes,
            t.heap_allocs,
            t.heap_frees,
        ) = self.totals();
        (t.bytes_read, t.bytes_written, t.loads, t.stores) =
            AccessCounters::traffic(&self.access_totals());
        t.heap_before_start = self
            .heap_before_start
            .load(core::sync::atomic::Ordering::Relaxed);
    }

    /// Each live thread with a slot of its own and its access counts as last
    /// published (threads on the shared overflow slot publish at exit).
    pub fn thread_counts(&self) -> impl Iterator<Item = (u32, [u64; COUNTS])> + '_ {
        (self.slots.iter()).filter_map(|s| {
            let tid = s.tid.load(core::sync::atomic::Ordering::Acquire);
            (tid != 0).then(|| (tid, s.access.load()))
        })
    }

    /// Exact access counts of every thread, live or exited, as last published.
    pub fn access_totals(&self) -> [u64; COUNTS] {
        let mut t = self.retired_access.load();
        for s in &self.slots {
            for (i, v) in s.access.load().iter().enumerate() {
                t[i] = t[i].wrapping_add(*v);
            }
        }
        t
    }

    /// The allocation counters of exited threads and of every slot ever
    /// claimed (the others were never written).
    fn counters(&self) -> impl Iterator<Item = &Counters> {
        let claimed = match self
            .slots_claimed
            .load(core::sync::atomic::Ordering::Relaxed)
        {
            0 => THREAD_SLOTS,
            n => (n as usize).min(THREAD_SLOTS),
        };
        core::iter::once(&self.retired).chain(self.slots[..claimed].iter().map(|s| &s.counters))
    }

    /// Sum of the exact allocation counters of every thread, live or exited.
    pub fn totals(&self) -> (u64, u64, u64, u64) {
        use core::sync::atomic::Ordering::Relaxed;
        let mut t = (0u64, 0u64, 0u64, 0u64);
        for c in self.counters() {
            t.0 = t.0.wrapping_add(c.alloc_bytes.load(Relaxed));
            t.1 = t.1.wrapping_add(c.free_bytes.load(Relaxed));
            t.2 = t.2.wrapping_add(c.allocs.load(Relaxed));
            t.3 = t.3.wrapping_add(c.frees.load(Relaxed));
        }
        t
    }

    /// The live heap now (usable bytes): exact at the instant, read by a
    /// region's mark.
    pub fn heap_live(&self) -> u64 {
        let (allocated, freed, _, _) = self.totals();
        allocated.saturating_sub(freed)
    }

    /// Call stacks captured by every thread, live or exited, indexed by
    /// [`walked_by`] code.
    pub fn stacks_walked(&self) -> [u64; walked_by::COUNT] {
        use core::sync::atomic::Ordering::Relaxed;
        let mut t = [0u64; walked_by::COUNT];
        for c in self.counters() {
            for (t, v) in t.iter_mut().zip(&c.stacks_walked) {
                *t = t.wrapping_add(v.load(Relaxed));
            }
        }
        t
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

#[cfg(test)]
mod tests {
    extern crate std;
    use std::{vec, vec::Vec};

    #[test]
    fn stack_ids_do_not_collide() {
        // 200 000 stacks of 1 to 8 return addresses in a few code pages, as
        // real stacks are, and their one-bit and reordered variants.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut ids = std::collections::HashMap::new();
        for _ in 0..200_000 {
            let n = 1 + next() as usize % 8;
            let frames: Vec<u64> = (0..n)
                .map(|_| 0x5555_5555_0000 + next() % 0x40000)
                .collect();
            let id = hash_frames(&frames);
            assert_ne!(id, 0);
            if let Some(other) = ids.insert(id, frames.clone()) {
                assert_eq!(other, frames, "two stacks, one id");
            }
            let mut flipped = frames.clone();
            flipped[0] ^= 1;
            assert_ne!(hash_frames(&flipped), id);
            if n > 1 {
                let mut swapped = frames.clone();
                swapped.swap(0, 1);
                if swapped != frames {
                    assert_ne!(hash_frames(&swapped), id);
                }
            }
        }
    }

    use super::*;

    #[test]
    fn sizes_parse_as_sysfs_and_the_cli_write_them() {
        assert_eq!(parse_size(b"7"), Some(7));
        assert_eq!(parse_size(b"48K"), Some(48 << 10));
        assert_eq!(parse_size(b"64m"), Some(64 << 20));
        assert_eq!(parse_size(b"1G"), Some(1 << 30));
        assert_eq!(parse_size(b"12Q"), None);
        assert_eq!(parse_size(b"K"), None);
        assert_eq!(parse_size(b"99999999999999999999"), None);
    }

    /// An allocation record with every field set.
    fn an_alloc() -> Alloc {
        Alloc {
            time: 7,
            ptr: 0x1000,
            size: 100,
            usable: 104,
            stack: 9,
            kind: alloc_kind::CALLOC,
            flags: alloc_flags::EXACT,
            ..Default::default()
        }
    }

    #[test]
    fn records_round_trip_and_stop_at_garbage() {
        let mut buf = [0u8; 256];
        let a = an_alloc();
        // SAFETY: 256-byte buffer.
        let n1 = unsafe { encode(buf.as_mut_ptr(), buf.len(), tag::ALLOC, &a, &[]) }.unwrap();
        let def = StringDef {
            id: 5,
            len: 3,
            _pad: 0,
        };
        let n2 = unsafe {
            encode(
                buf.as_mut_ptr().add(n1),
                buf.len() - n1,
                tag::STRING,
                &def,
                b"abc",
            )
        }
        .unwrap();
        assert_eq!(n2 % 8, 0);
        buf[n1 + n2] = 0xff; // a torn record header after the two good ones
        buf[n1 + n2 + 2] = 3;
        let mut it = Records::new(&buf[..n1 + n2 + 8]);
        let r1 = it.next().unwrap();
        assert_eq!(r1.tag, tag::ALLOC);
        assert_eq!(r1.payload::<Alloc>().unwrap().usable, 104);
        let r2 = it.next().unwrap();
        assert_eq!(&r2.trailing::<StringDef>()[..3], b"abc");
        assert!(it.next().is_none());
        assert!(it.malformed);
        // Too small a buffer is refused, not overrun.
        assert!(unsafe { encode(buf.as_mut_ptr(), 16, tag::ALLOC, &a, &[]) }.is_none());
    }

    #[test]
    fn small_allocations_take_40_bytes_and_read_back_whole() {
        let a = an_alloc();
        let mut buf = [0u8; 64];
        let small = a.small().unwrap();
        // SAFETY: 64-byte buffer.
        let n = unsafe { encode(buf.as_mut_ptr(), buf.len(), tag::SMALL_ALLOC, &small, &[]) };
        assert_eq!(n, Some(40));
        let back = Records::new(&buf).next().unwrap().alloc().unwrap();
        assert_eq!((back.time, back.ptr, back.stack), (7, 0x1000, 9));
        assert_eq!((back.size, back.usable, back.group), (100, 104, 0));
        assert_eq!(
            (back.kind, back.flags),
            (alloc_kind::CALLOC, alloc_flags::EXACT)
        );
        // What the short form cannot hold keeps the long one.
        for wide in [
            Alloc { group: 3, ..a },
            Alloc {
                size: 1 << 32,
                usable: 1 << 32,
                ..a
            },
            Alloc {
                usable: 100 + 65536,
                ..a
            },
        ] {
            assert!(wide.small().is_none(), "{wide:?}");
        }
    }

    /// What a thread's records are, allocations and frees in the forms
    /// the writer picks, one after the other in a block's body.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Event {
        Alloc(Alloc),
        Free(Free),
    }

    /// Writes `events` into a body as the runtime's writer does: each
    /// record's length and the body.
    fn body_of(events: &[Event]) -> (Vec<usize>, Vec<u8>) {
        let mut buf = vec![0u8; 4096];
        let (mut at, mut context, mut lens) = (0, Context::new(), Vec::new());
        for e in events {
            let (dst, cap) = (buf[at..].as_mut_ptr(), buf.len() - at);
            // SAFETY: `cap` bytes from `dst`.
            let n = unsafe {
                match e {
                    Event::Alloc(a) => encode_alloc(dst, cap, a, &mut context),
                    Event::Free(f) => encode_free(dst, cap, f, &mut context),
                }
            }
            .unwrap();
            lens.push(n);
            at += n;
        }
        buf.truncate(at);
        (lens, buf)
    }

    fn events_of(records: Records<'_>) -> Vec<Event> {
        records
            .map(|r| match r.tag {
                tag::FREE => Event::Free(r.free().unwrap()),
                _ => Event::Alloc(r.alloc().unwrap()),
            })
            .collect()
    }

    #[test]
    fn compact_records_code_against_the_last_and_read_back_whole_from_any_point() {
        let t0 = 5_000_000_000_000; // ns since boot: too far from 0 for 32 bits
        let a = |time, ptr, stack| Alloc {
            time,
            ptr,
            stack,
            ..an_alloc()
        };
        let free = |time, ptr| Event::Free(Free { time, ptr });
        let events = [
            Event::Alloc(a(t0, 0x1000, 9)),       // first of the body: full
            free(t0 + 10, 0x1000),                // the last allocated: 8 bytes
            Event::Alloc(a(t0 + 20, 0x2000, 9)),  // same stack: 24 bytes
            Event::Alloc(a(t0 + 30, 0x3000, 11)), // another: 32
            free(t0 + 40, 0x2000),                // not the last: 16
            free(t0 + 50 + (1 << 32), 0x3000),    // 4.3 s later: full
            Event::Alloc(Alloc {
                group: 3,
                ..a(t0 + 60 + (1 << 32), 0x4000, 11)
            }), // grouped: full
            Event::Alloc(a(t0 + 10, 0x5000, 11)), // earlier (another CPU's clock): full
            Event::Alloc(Alloc {
                usable: 100 + 65536,
                ..a(t0 + 20, 0x6000, 11)
            }), // slack past 16 bits: full
            free(t0 + 30, 0x6000),
        ];
        let (lens, body) = body_of(&events);
        assert_eq!(lens, [40, 8, 24, 32, 16, 24, 64, 40, 64, 8]);
        assert_eq!(events_of(Records::new(&body)), events);
        // A reader stopping anywhere and resuming with its context reads the rest.
        let mut records = Records::new(&body);
        for (i, len) in lens.iter().enumerate() {
            let at = lens[..i].iter().sum::<usize>();
            let rest = Records::resume(&body[at..], records.context());
            assert_eq!(events_of(rest), events[i..], "from record {i}");
            assert_eq!(records.next().unwrap().body.len() + 8, *len);
        }
        assert!(!records.malformed);
        // A compact record of a length the writer never gives ends the body.
        let mut torn = body.clone();
        torn[40 + 2] = 24; // the compact free after the first allocation, as 24 bytes
        let mut records = Records::new(&torn);
        assert!(records.next().is_some() && records.next().is_none() && records.malformed);
    }

    #[test]
    fn maps_lines() {
        let l = procfs::maps_line(
            b"7f1c2a000000-7f1c2a021000 r-xp 00002000 fe:00 1234      /usr/lib/a b.so",
        )
        .unwrap();
        assert_eq!(
            (l.start, l.end, &l.perms, l.offset, l.name, l.prot()),
            (
                0x7f1c2a000000,
                0x7f1c2a021000,
                b"r-xp",
                0x2000,
                &b"/usr/lib/a b.so"[..],
                5
            )
        );
        let anon = procfs::maps_line(b"55d0-55e0 rw-p 00000000 00:00 0 ").unwrap();
        assert_eq!((anon.name, anon.prot()), (&b""[..], 3));
        assert_eq!(procfs::maps_line(b"55d0-55e0 rw-p"), None);
        assert_eq!(procfs::maps_line(b"zz-55e0 rw-p 0 00:00 0"), None);
    }

    #[test]
    fn ready_blocks_pack_both_ends() {
        assert_eq!(
            unpack_ready(pack_ready(7, 4_000_000_000)),
            (7, 4_000_000_000)
        );
        assert_eq!(unpack_ready(0), (0, 0));
        assert_eq!(block_offset(2), (HEADER_SIZE + 2 * BLOCK_SIZE) as u64);
        assert_eq!(block_index(block_offset(2)), Some(2));
        assert_eq!(block_index(HEADER_SIZE as u64 - 1), None);
    }

    #[test]
    fn block_headers_say_written_or_staging() {
        let header = BlockHeader::bytes;
        assert_eq!(
            BlockHeader::read(&header(BLOCK_MAGIC, 7, 4096)),
            Some(BlockState::Written { tid: 7, used: 4096 })
        );
        let full = BLOCK_CAPACITY as u64;
        assert_eq!(
            BlockHeader::read(&header(STAGE_MAGIC, 7, pack_staged(3_000_000, full))),
            Some(BlockState::Staging {
                tid: 7,
                dest: 3_000_000,
                used: full
            })
        );
        assert_eq!(BlockHeader::read(&header(READY_MAGIC, 0, 0)), None);
        assert_eq!(BlockHeader::read(&header(BLOCK_MAGIC, 7, 1)[..12]), None);
    }

    #[test]
    fn stat_fields_after_a_command_name_with_spaces_and_parentheses() {
        let stat = b"4242 (a) b (c) S 17 4242 4242 0 -1 4194560 1536 77 2 0 12 3\n";
        assert_eq!(procfs::stat_field(stat, 1), Some(17));
        assert_eq!(procfs::stat_field(stat, 7), Some(1536));
        assert_eq!(procfs::stat_field(stat, 9), Some(2));
        assert_eq!(procfs::stat_field(stat, 40), None);
        assert_eq!(procfs::stat_field(b"4242 no name", 1), None);
    }

    #[test]
    fn procfs_parsers() {
        let status =
            b"Name:\tx\nVmRSS:\t  2048 kB\nRssAnon:\t1024 kB\nRssFile:\t 512 kB\nRssShmem:\t0 kB\n";
        let mut t = Timeline::default();
        procfs::fill_from_status(status, &mut t);
        assert_eq!(
            (t.rss, t.anon, t.file, t.shmem, t.swap),
            (2 << 20, 1 << 20, 512 << 10, 0, 0)
        );
        assert_eq!(procfs::statm(b"100 25 7 1 0 20 0\n"), Some((25, 7)));
        assert_eq!(procfs::kb_field(b"VmRSSX: 5 kB\n", b"VmRSS"), None);
    }
}

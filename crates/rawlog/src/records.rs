//! The records: their tags and payload structs.

use core::mem::size_of;

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

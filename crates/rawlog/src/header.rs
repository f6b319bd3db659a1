//! The log file's layout: its header (live counters, thread slots, the
//! settings the runtime ran with), its blocks and their states.

use crate::records::{
    class_is_store, class_size, Timeline, ACCESS_CLASSES, BULK_READ, BULK_WRITTEN, COUNTS,
};
use crate::settings::{walked_by, RuntimeSettings};
use core::mem::size_of;
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

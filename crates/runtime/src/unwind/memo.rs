//! Walks remembered per thread. A program allocating in a loop walks the same
//! call path again and again: the same stack words give the same frames. An
//! entry keeps every word a walk by the cached rules depended on (address and
//! value) and the id of the stack it gave; when each word still holds its
//! value, walking again would compute exactly the same (a rule depends only
//! on its code address, and unloading code empties the memo), so the id is
//! reused without walking or hashing the stack again.
//! The reads are compared, not trusted: a different caller or a changed saved
//! register is a miss, then a walk.

use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicU64, Ordering};

/// Words a remembered walk may depend on: a return address per frame, and
/// the saved rbp of frames computed from it, for stacks of 20 to 40 frames.
/// Deeper stacks are walked each time.
const MAX_READS: usize = 40;
/// Call paths remembered per thread (direct-mapped by hook frame and caller).
const ENTRIES: usize = 4;
/// The bits of a slot's number: the top bits of a hash pick it.
const SLOT_BITS: u32 = ENTRIES.trailing_zeros();
const _: () = assert!(ENTRIES.is_power_of_two() && SLOT_BITS > 0);

/// Bumped when code is unloaded: an entry of an earlier generation is stale.
static GENERATION: AtomicU64 = AtomicU64::new(1);

pub fn forget() {
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// The words one walk read, in order; `full` once more were read than kept.
pub struct Reads {
    n: usize,
    full: bool,
    /// The first `n` are written (left uninitialised: every walk makes one).
    words: [MaybeUninit<(u64, u64)>; MAX_READS],
}

impl Reads {
    pub fn new() -> Reads {
        Reads {
            n: 0,
            full: false,
            words: [MaybeUninit::uninit(); MAX_READS],
        }
    }

    #[inline(always)]
    // Only the cached rules' walk (x86-64) notes its reads.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub fn push(&mut self, addr: u64, value: u64) {
        match self.words.get_mut(self.n) {
            Some(w) => {
                w.write((addr, value));
                self.n += 1;
            }
            None => self.full = true,
        }
    }

    fn words(&self) -> &[(u64, u64)] {
        // SAFETY: the first n were written.
        unsafe { core::slice::from_raw_parts(self.words.as_ptr() as *const (u64, u64), self.n) }
    }
}

#[derive(Clone, Copy)]
struct Entry {
    /// The hook's frame the walk started from (0: empty).
    entry: u64,
    generation: u64,
    stack: u64,
    n: usize,
    words: [(u64, u64); MAX_READS],
}

pub struct WalkMemo {
    entries: [Entry; ENTRIES],
}

impl WalkMemo {
    pub const fn new() -> WalkMemo {
        WalkMemo {
            entries: [Entry {
                entry: 0,
                generation: 0,
                stack: 0,
                n: 0,
                words: [(0, 0); MAX_READS],
            }; ENTRIES],
        }
    }

    /// Forgets every walk (a fork child writes its own log, where no stack
    /// is defined yet).
    pub fn clear(&mut self) {
        for e in &mut self.entries {
            e.entry = 0;
        }
    }
}

/// The return address in the hook's frame: with the frame, it picks the entry.
fn slot(entry: u64) -> usize {
    // SAFETY: `entry` is the frame of the runtime's entry point, live on this
    // thread's stack below the caller (checked by the caller against its bounds).
    let ret = unsafe { *((entry + 8) as *const u64) };
    ((entry ^ ret.rotate_left(17)).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - SLOT_BITS)) as usize
}

/// Whether `entry` is a frame of this thread's stack, [lo, hi), a walk can
/// start from.
fn usable(entry: u64, (lo, hi): (u64, u64)) -> bool {
    entry.is_multiple_of(8) && entry > lo && entry.saturating_add(16) <= hi
}

/// The stack of the remembered walk from `entry` if every word it read still
/// holds the value it read.
#[inline(always)]
pub fn recall(memo: &WalkMemo, bounds: (u64, u64), entry: u64) -> Option<u64> {
    if !usable(entry, bounds) {
        return None;
    }
    let e = &memo.entries[slot(entry)];
    if e.entry != entry || e.generation != GENERATION.load(Ordering::Relaxed) {
        return None;
    }
    for &(addr, value) in &e.words[..e.n] {
        // SAFETY: the walk read it from this thread's stack, at or above
        // `entry`, which is live (the frame of the hook running now).
        if unsafe { *(addr as *const u64) } != value {
            return None;
        }
    }
    Some(e.stack)
}

/// Keeps a walk by the cached rules that started at `entry` and gave `stack`
/// (already defined in the log).
pub fn remember(memo: &mut WalkMemo, bounds: (u64, u64), entry: u64, reads: &Reads, stack: u64) {
    // A walk that started elsewhere (no usable entry: its first word is the
    // return address above another frame) or read more than is kept.
    let words = reads.words();
    if reads.full || words.first().is_none_or(|w| w.0 != entry + 8) || !usable(entry, bounds) {
        return;
    }
    let generation = GENERATION.load(Ordering::Relaxed);
    let e = &mut memo.entries[slot(entry)];
    e.entry = entry;
    e.generation = generation;
    e.stack = stack;
    e.n = words.len();
    e.words[..words.len()].copy_from_slice(words);
}

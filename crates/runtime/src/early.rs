//! Blocks allocated before the runtime started: the loader's, and those of
//! the constructors of libraries initialised before it (libstdc++'s
//! emergency exception pool, a Rust library's). Kept here, as many as fit,
//! and recorded once the runtime starts, as a group of their own, so that
//! the heap's peak holds them and their frees find their blocks.

use crate::stage::{STATE, UNINIT};
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};

/// Blocks kept at most; more are in the exact heap counter only (the C
/// library's count of what was allocated before the start).
const CAPACITY: usize = 4096;

struct Slot {
    /// 0 once freed.
    ptr: AtomicU64,
    size: AtomicU64,
    kind: AtomicU8,
}

static SLOTS: [Slot; CAPACITY] = [const {
    Slot {
        ptr: AtomicU64::new(0),
        size: AtomicU64::new(0),
        kind: AtomicU8::new(0),
    }
}; CAPACITY];

/// Slots handed out (may pass CAPACITY: those blocks were not kept).
static USED: AtomicUsize = AtomicUsize::new(0);

/// The runtime's start has begun: what it allocates itself is not kept.
pub(crate) static STARTING: AtomicBool = AtomicBool::new(false);

fn before_start() -> bool {
    STATE.load(Ordering::Acquire) == UNINIT && !STARTING.load(Ordering::Relaxed)
}

fn used() -> &'static [Slot] {
    &SLOTS[..USED.load(Ordering::Acquire).min(CAPACITY)]
}

/// A block allocated before the start.
pub(crate) fn allocated(ptr: u64, size: u64, kind: u8) {
    if ptr == 0 || !before_start() {
        return;
    }
    let i = USED.fetch_add(1, Ordering::AcqRel);
    if let Some(slot) = SLOTS.get(i) {
        slot.size.store(size, Ordering::Relaxed);
        slot.kind.store(kind, Ordering::Relaxed);
        slot.ptr.store(ptr, Ordering::Release);
    }
}

/// A block freed before the start (a kept one is kept no more).
pub(crate) fn freed(ptr: u64) {
    if ptr == 0 || STATE.load(Ordering::Acquire) != UNINIT {
        return;
    }
    if let Some(slot) = used().iter().find(|s| s.ptr.load(Ordering::Acquire) == ptr) {
        slot.ptr.store(0, Ordering::Release);
    }
}

/// The blocks still live, in the order they were allocated, each once:
/// (ptr, size, kind).
pub(crate) fn take_live(mut each: impl FnMut(u64, u64, u8)) {
    for slot in used() {
        let ptr = slot.ptr.swap(0, Ordering::AcqRel);
        if ptr != 0 {
            each(
                ptr,
                slot.size.load(Ordering::Relaxed),
                slot.kind.load(Ordering::Relaxed),
            );
        }
    }
}

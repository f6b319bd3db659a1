//! The set of live allocations that carry an event, so that `free` emits an event
//! exactly for those. Every `free` asks; almost all answers must be "no" and cheap:
//! a counting filter of one byte per hash bucket answers them without a lock, and
//! only the few maybe-tracked pointers reach the locked open-addressing table.

use crate::sys::{self, SpinLock};
use core::sync::atomic::{AtomicU8, Ordering};

const FILTER_BITS: u32 = 16;
static FILTER: [AtomicU8; 1 << FILTER_BITS] = [const { AtomicU8::new(0) }; 1 << FILTER_BITS];

pub static LOCK: SpinLock = SpinLock::new();
static mut TABLE: Table = Table {
    slots: core::ptr::null_mut(),
    capacity: 0,
    len: 0,
};

struct Table {
    slots: *mut u64,
    capacity: usize,
    len: usize,
}

const EMPTY: u64 = 0;

#[inline(always)]
fn hash(ptr: u64) -> u64 {
    (ptr >> 4).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// The filter is direct-mapped on a block's 16-byte granule within 1 MiB:
/// as even as the allocator's addresses, and two instructions on every free.
#[inline(always)]
fn bucket(ptr: u64) -> usize {
    (ptr >> 4) as usize & ((1 << FILTER_BITS) - 1)
}

/// With every block recorded the table is not kept: every free carries an
/// event and the finalizer pairs them (a block from before the runtime
/// started comes out as an unmatched free), where the table would cost a lock
/// per call.
#[inline(always)]
pub(crate) fn every_block() -> bool {
    crate::settings::settings().sample_rate == 1
}

/// Cheap, lock-free: false means the block's free certainly carries no event.
#[inline(always)]
pub fn may_take(ptr: u64) -> bool {
    every_block() || maybe_tracked(ptr)
}

/// A block carrying an event is freed: true if its free must carry one too.
#[inline(always)]
pub fn take(ptr: u64) -> bool {
    every_block() || (maybe_tracked(ptr) && remove(ptr))
}

/// A block carries an event; false if the table cannot grow (the caller counts it).
#[inline(always)]
pub fn add(ptr: u64) -> bool {
    every_block() || insert(ptr)
}

/// Cheap, lock-free: false means certainly not tracked.
#[inline(always)]
pub(crate) fn maybe_tracked(ptr: u64) -> bool {
    FILTER[bucket(ptr)].load(Ordering::Relaxed) != 0
}

fn insert(ptr: u64) -> bool {
    LOCK.lock();
    // SAFETY: TABLE is only touched under LOCK.
    let ok = unsafe { table_insert(&mut *core::ptr::addr_of_mut!(TABLE), ptr) };
    if ok {
        let f = &FILTER[bucket(ptr)];
        // Saturate at 255: a saturated bucket stays "maybe" forever, which is safe.
        let v = f.load(Ordering::Relaxed);
        if v < 255 {
            f.store(v + 1, Ordering::Relaxed);
        }
    }
    LOCK.unlock();
    ok
}

/// Removes a pointer; true if it was tracked.
fn remove(ptr: u64) -> bool {
    LOCK.lock();
    // SAFETY: TABLE is only touched under LOCK.
    let found = unsafe { table_remove(&mut *core::ptr::addr_of_mut!(TABLE), ptr) };
    if found {
        let f = &FILTER[bucket(ptr)];
        let v = f.load(Ordering::Relaxed);
        if v > 0 && v < 255 {
            f.store(v - 1, Ordering::Relaxed);
        }
    }
    LOCK.unlock();
    found
}

unsafe fn table_insert(t: &mut Table, ptr: u64) -> bool {
    if (t.len + 1) * 2 > t.capacity && !grow(t) {
        return false;
    }
    let mask = t.capacity - 1;
    let mut i = hash(ptr) as usize & mask;
    loop {
        let s = t.slots.add(i);
        if *s == EMPTY {
            *s = ptr;
            t.len += 1;
            return true;
        }
        if *s == ptr {
            return true;
        }
        i = (i + 1) & mask;
    }
}

unsafe fn table_remove(t: &mut Table, ptr: u64) -> bool {
    if t.capacity == 0 {
        return false;
    }
    let mask = t.capacity - 1;
    let mut i = hash(ptr) as usize & mask;
    loop {
        let v = *t.slots.add(i);
        if v == EMPTY {
            return false;
        }
        if v == ptr {
            break;
        }
        i = (i + 1) & mask;
    }
    // Backward-shift deletion keeps probe chains short without tombstones.
    let mut hole = i;
    let mut j = (i + 1) & mask;
    loop {
        let v = *t.slots.add(j);
        if v == EMPTY {
            break;
        }
        let home = hash(v) as usize & mask;
        let dist_hole = (j.wrapping_sub(home)) & mask;
        let dist_j = (j.wrapping_sub(hole)) & mask;
        if dist_hole >= dist_j {
            *t.slots.add(hole) = v;
            hole = j;
        }
        j = (j + 1) & mask;
    }
    *t.slots.add(hole) = EMPTY;
    t.len -= 1;
    true
}

unsafe fn grow(t: &mut Table) -> bool {
    let new_cap = if t.capacity == 0 {
        4096
    } else {
        t.capacity * 2
    };
    let slots = sys::alloc_pages(new_cap * 8) as *mut u64;
    if slots.is_null() {
        return false;
    }
    let old = Table {
        slots: t.slots,
        capacity: t.capacity,
        len: t.len,
    };
    *t = Table {
        slots,
        capacity: new_cap,
        len: 0,
    };
    for i in 0..old.capacity {
        let v = *old.slots.add(i);
        if v != EMPTY {
            table_insert(t, v);
        }
    }
    if !old.slots.is_null() {
        sys::munmap(old.slots as *mut libc::c_void, old.capacity * 8);
    }
    true
}

//! The malloc family, interposed: each call goes to the real allocator, then
//! is counted and, when large, sampled or grouped, recorded with its stack.

use crate::events::{
    count, count_dead, count_own_alloc, count_own_free, next_sample_countdown, record_alloc,
    with_orphan,
};
use crate::guard::{enter, fast_state, guarded, is_dead_thread, leave, state};
use crate::sys::{errno, set_errno};
use crate::thread::ThreadState;
use crate::{allocator, sys, track};
use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicU64, Ordering};
use memlens_rawlog::{self as raw, alloc_flags, alloc_kind, RuntimeSettings};

/// Requests of at least this many bytes are recorded exactly: `min_size`, or
/// 0 when every block is (a byte countdown would skip blocks of 0 bytes, and
/// a few small ones). Set at start, before any hook runs.
static EXACT_FROM: AtomicU64 = AtomicU64::new(u64::MAX);

pub(crate) fn configure(s: &RuntimeSettings) {
    let from = if s.sample_rate == 1 { 0 } else { s.min_size };
    EXACT_FROM.store(from, Ordering::Relaxed);
}

/// Accounts for a new block of `usable` bytes and records an event for it if
/// it is large, sampled or grouped. `force` records it regardless (a realloc
/// of a recorded block).
#[inline(always)]
fn on_alloc(
    st: &mut ThreadState,
    ptr: *mut c_void,
    size: usize,
    usable: u64,
    kind: u8,
    force: bool,
) {
    count(st, usable, 0);
    if st.group_depth == 0 && !force {
        sample(st, ptr, size, kind);
    } else {
        core::hint::cold_path();
        let entry = crate::unwind::frame_address();
        record_new_block(st, ptr as u64, size as u64, kind, force, entry);
    }
}

/// Records an event for a new block outside any group, already counted, if
/// it is large or its countdown runs out.
#[inline(always)]
fn sample(st: &mut ThreadState, ptr: *mut c_void, size: usize, kind: u8) {
    let size = size as u64;
    // Most calls: small, the countdown not yet run out.
    if size < EXACT_FROM.load(Ordering::Relaxed) {
        st.countdown -= size as i64;
        if st.countdown > 0 {
            return;
        }
    }
    core::hint::cold_path();
    // The hook's own frame (this is inlined into it): the walk starts at
    // its caller, not at the runtime's inner frames.
    let entry = crate::unwind::frame_address();
    record_new_block(st, ptr as u64, size, kind, false, entry);
}

/// The event of a new block that is large, sampled (its countdown ran out)
/// or grouped, out of the hooks' fast path.
#[cold]
#[inline(never)]
fn record_new_block(st: &mut ThreadState, ptr: u64, size: u64, kind: u8, force: bool, entry: u64) {
    // Read again rather than passed: a seventh argument would go on the
    // stack, whose room every call makes.
    let usable = allocator::usable_size(ptr as *mut c_void) as u64;
    let group = match st.group_depth {
        0 => 0,
        depth => st.groups[depth - 1],
    };
    let mut flags = 0;
    if size >= EXACT_FROM.load(Ordering::Relaxed) || force {
        flags = alloc_flags::EXACT;
    } else if group == 0 {
        st.countdown = next_sample_countdown(st);
        flags = alloc_flags::SAMPLED;
    }
    if group != 0 {
        flags |= alloc_flags::GROUPED;
    }
    guarded(st, |st| {
        record_alloc(st, ptr, size, usable, kind, flags, group, entry)
    });
}

/// Accounts for a block about to be freed, and records its free if it
/// carried an event.
#[inline(always)]
fn on_free(st: &mut ThreadState, ptr: *mut c_void, glibc: bool) {
    let usable = allocator::usable_size_in(glibc, ptr) as u64;
    count(st, 0, usable);
    let p = ptr as u64;
    if track::may_take(p) {
        take_free_event(st, p);
    }
}

/// A block that may carry an event is freed: its free event, if it does.
#[cold]
#[inline(never)]
fn take_free_event(st: &mut ThreadState, p: u64) {
    guarded(st, |st| {
        if track::take(p) {
            record_free(st, p);
        }
    });
}

/// The event of a recorded block's free, out of the hooks' fast path.
#[inline(never)]
fn record_free(st: &mut ThreadState, ptr: u64) {
    let ev = raw::Free {
        time: st.clock.now(),
        ptr,
    };
    st.writer.write_free(st.tid, &ev);
}

/// A free outside the hooks (as [`unhooked_alloc`]), out of the fast path.
#[cold]
#[inline(never)]
fn unhooked_free(p: *mut c_void) {
    crate::early::freed(p as u64);
    if is_dead_thread() {
        on_free_dead(p);
    }
    allocator::free(p);
}

fn on_free_dead(ptr: *mut c_void) {
    let usable = allocator::usable_size(ptr) as u64;
    count_dead(0, usable);
    let p = ptr as u64;
    if track::take(p) {
        let ev = raw::Free {
            time: sys::now_ns(),
            ptr: p,
        };
        with_orphan(|w| {
            w.write_free(0, &ev);
        });
    }
}

/// An allocation outside the hooks (runtime not ready, nested in a hook, or
/// a thread past its exit), out of the hooks' fast path.
#[cold]
#[inline(never)]
fn unhooked_alloc(size: usize, kind: u8, alloc: impl FnOnce() -> *mut c_void) -> *mut c_void {
    let p = alloc();
    crate::early::allocated(p as u64, size as u64, kind);
    if !p.is_null() && is_dead_thread() {
        count_dead(allocator::usable_size(p) as u64, 0);
    }
    p
}

/// Runs an allocation function and records what it returned.
#[inline(always)]
fn hooked_alloc(size: usize, kind: u8, alloc: impl FnOnce() -> *mut c_void) -> *mut c_void {
    let Some(st) = fast_state() else {
        return generic_alloc(size, kind, alloc);
    };
    let p = alloc();
    if !p.is_null() {
        // SAFETY: a block glibc's allocator just returned.
        let usable = unsafe { allocator::glibc_usable_size(p) } as u64;
        count_own_alloc(st, usable);
        sample(st, p, size, kind);
    }
    p
}

/// [`hooked_alloc`] off its fast path: before the runtime is ready, nested,
/// another allocator than glibc's, every block recorded, shared counters or
/// a group open.
#[inline(always)]
fn generic_alloc(size: usize, kind: u8, alloc: impl FnOnce() -> *mut c_void) -> *mut c_void {
    let Some(st) = state() else {
        return unhooked_alloc(size, kind, alloc);
    };
    // glibc's allocator calls no hook; another may (jemalloc's mmap, say),
    // and what it calls for itself must not be recorded as the program's.
    if !allocator::is_glibc() {
        return alloc_guarded(st, size, kind, alloc);
    }
    let p = alloc();
    on_new_block(st, p, size, kind, true);
    p
}

/// An allocation by another allocator than glibc's, out of the fast path
/// (whose every register saved and restored costs every call).
#[cold]
#[inline(never)]
fn alloc_guarded(
    st: &mut ThreadState,
    size: usize,
    kind: u8,
    alloc: impl FnOnce() -> *mut c_void,
) -> *mut c_void {
    let p = guarded(st, |_| alloc());
    on_new_block(st, p, size, kind, false);
    p
}

/// Accounts for the block an allocation returned, if any.
#[inline(always)]
fn on_new_block(st: &mut ThreadState, p: *mut c_void, size: usize, kind: u8, glibc: bool) {
    if !p.is_null() {
        let usable = allocator::usable_size_in(glibc, p) as u64;
        on_alloc(st, p, size, usable, kind, false);
    }
}

/// The group of the blocks allocated before the runtime started.
const EARLY_GROUP: &core::ffi::CStr =
    c"allocated before memlens started (the loader, library constructors)";

/// Records the blocks allocated before the runtime started, as the group
/// [`EARLY_GROUP`] (allocated now, as far as the log tells); returns their
/// usable bytes, which the C library's count of the heap before the start
/// holds.
pub(crate) fn record_early_blocks() -> u64 {
    let (mut bytes, mut grouped) = (0, false);
    crate::early::take_live(|ptr, size, kind| {
        if !grouped {
            // SAFETY: a NUL-terminated name.
            unsafe { crate::annotate::memlens_group_begin(EARLY_GROUP.as_ptr()) };
            grouped = true;
        }
        if let Some(st) = crate::guard::state() {
            let usable = allocator::usable_size(ptr as *mut c_void) as u64;
            on_alloc(st, ptr as *mut c_void, size as usize, usable, kind, true);
            bytes += usable;
        }
    });
    if grouped {
        // SAFETY: ends the group begun above.
        unsafe { crate::annotate::memlens_group_end() };
    }
    bytes
}

/// # Safety
/// C allocator contract.
#[no_mangle]
pub unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
    hooked_alloc(size, alloc_kind::MALLOC, move || allocator::malloc(size))
}

/// # Safety
/// C allocator contract.
#[no_mangle]
pub unsafe extern "C" fn calloc(n: usize, size: usize) -> *mut c_void {
    hooked_alloc(n.saturating_mul(size), alloc_kind::CALLOC, move || {
        allocator::calloc(n, size)
    })
}

/// # Safety
/// C allocator contract.
#[no_mangle]
pub unsafe extern "C" fn free(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    if let Some(st) = fast_state() {
        // SAFETY: a block of glibc's allocator, or of the arena.
        let usable = unsafe { allocator::glibc_heap_usable_size(p) };
        // An mmapped block, the arena's, or one that may carry an event
        // takes the generic path.
        if let (Some(usable), false) = (usable, track::maybe_tracked(p as u64)) {
            count_own_free(st, usable as u64);
            return allocator::free_heap_block(p);
        }
    }
    generic_free(p);
}

/// [`free`] off its fast path (as [`generic_alloc`]). Of the C ABI, as
/// `free` is: the hook jumps to it rather than calls it.
#[inline(never)]
extern "C" fn generic_free(p: *mut c_void) {
    let Some(st) = state() else {
        return unhooked_free(p);
    };
    if allocator::is_glibc() {
        on_free(st, p, true);
        allocator::free(p);
    } else {
        free_guarded(st, p);
    }
}

/// A free with another allocator than glibc's, which may call back into a
/// hook: out of the fast path, whose every register saved costs every call.
#[cold]
#[inline(never)]
fn free_guarded(st: &mut ThreadState, p: *mut c_void) {
    guarded(st, |st| {
        on_free(st, p, false);
        allocator::free(p);
    });
}

/// # Safety
/// C allocator contract.
#[no_mangle]
pub unsafe extern "C" fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    if p.is_null() {
        return hooked_alloc(size, alloc_kind::REALLOC, move || {
            allocator::realloc(p, size)
        });
    }
    let Some(st) = enter() else {
        if !is_dead_thread() {
            let q = allocator::realloc(p, size);
            if !q.is_null() || size == 0 {
                crate::early::freed(p as u64);
                crate::early::allocated(q as u64, size as u64, alloc_kind::REALLOC);
            }
            return q;
        }
        let old = allocator::usable_size(p) as u64;
        let q = allocator::realloc(p, size);
        if !q.is_null() || size == 0 {
            count_dead(
                if q.is_null() {
                    0
                } else {
                    allocator::usable_size(q) as u64
                },
                old,
            );
        }
        return q;
    };
    let old_usable = allocator::usable_size(p) as u64;
    let was_tracked = track::take(p as u64);
    let q = allocator::realloc(p, size);
    if q.is_null() && size != 0 {
        // Failed: the old block is untouched.
        if was_tracked {
            track::add(p as u64);
        }
        leave(st);
        return q;
    }
    count(st, 0, old_usable);
    if was_tracked {
        record_free(st, p as u64);
    }
    if !q.is_null() {
        let usable = allocator::usable_size(q) as u64;
        on_alloc(st, q, size, usable, alloc_kind::REALLOC, was_tracked);
    }
    leave(st);
    q
}

/// # Safety
/// C allocator contract.
#[no_mangle]
pub unsafe extern "C" fn reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void {
    match n.checked_mul(size) {
        Some(total) => realloc(p, total),
        None => {
            set_errno(libc::ENOMEM);
            core::ptr::null_mut()
        }
    }
}

/// # Safety
/// C allocator contract.
#[no_mangle]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
    let saved = errno();
    let mut code = 0;
    let p = hooked_alloc(size, alloc_kind::MEMALIGN, || {
        let mut p = core::ptr::null_mut();
        code = allocator::posix_memalign(&mut p, align, size);
        p
    });
    set_errno(saved);
    if code == 0 {
        *out = p;
    }
    code
}

/// # Safety
/// C allocator contract.
#[no_mangle]
pub unsafe extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    hooked_alloc(size, alloc_kind::MEMALIGN, move || {
        allocator::aligned_alloc(align, size)
    })
}

/// # Safety
/// C allocator contract.
#[no_mangle]
pub unsafe extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    hooked_alloc(size, alloc_kind::MEMALIGN, move || {
        allocator::memalign(align, size)
    })
}

/// # Safety
/// C allocator contract.
#[no_mangle]
pub unsafe extern "C" fn valloc(size: usize) -> *mut c_void {
    hooked_alloc(size, alloc_kind::VALLOC, move || allocator::valloc(size))
}

/// # Safety
/// C allocator contract.
#[no_mangle]
pub unsafe extern "C" fn pvalloc(size: usize) -> *mut c_void {
    hooked_alloc(size, alloc_kind::VALLOC, move || allocator::pvalloc(size))
}

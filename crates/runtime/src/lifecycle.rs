//! A thread's state: made at the thread's first event, retired by a
//! pthread key destructor when it exits (its totals and exit recorded, its
//! counters folded into the retired ones, its memory unmapped).

use crate::log::Writer;
use crate::openmp::contexts::CONTEXTS_MAPPED;
use crate::sys;
use crate::thread::{claim_slot, tls_set, ThreadState, DEAD, INTERNAL, MAX_GROUP_DEPTH, NONE};
use core::sync::atomic::{AtomicU32, Ordering};

static THREAD_KEY: AtomicU32 = AtomicU32::new(u32::MAX);

/// Registers the destructor that retires a thread's state when the thread exits.
pub fn init_key() {
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: plain pthread call with a valid out pointer.
    if unsafe { libc::pthread_key_create(&mut key, Some(on_thread_exit)) } == 0 {
        THREAD_KEY.store(key, Ordering::Release);
    }
}

/// Creates the calling thread's state. Returns null if memory cannot be had.
pub fn create() -> *mut ThreadState {
    // Allocations made while we set up (pthread_getattr_np) must pass through.
    tls_set(INTERNAL);
    let size = core::mem::size_of::<ThreadState>().next_multiple_of(4096);
    let p = sys::alloc_pages(size) as *mut ThreadState;
    if p.is_null() {
        tls_set(NONE);
        return p;
    }
    let tid = sys::gettid();
    let (stack_lo, stack_hi) = stack_bounds();
    let (counters, access_counters, shared_counters) = claim_slot(tid);
    // SAFETY: fresh zeroed mapping of sufficient size.
    unsafe {
        p.write(ThreadState {
            tid,
            in_hook: false,
            counters,
            shared_counters,
            fast_path: false,
            access_counters,
            access: crate::access::state::AccessState::new(),
            writer: Writer::new(),
            countdown: 0,
            rng: (tid as u64) ^ sys::now_ns().rotate_left(17) ^ 0x9e37_79b9_7f4a_7c15,
            groups: [0; MAX_GROUP_DEPTH],
            group_depth: 0,
            stack_lo,
            stack_hi,
            model: crate::model::ThreadModel::off(),
            clock: crate::clock::Clock::new(),
            memo: crate::unwind::memo::WalkMemo::new(),
            omp: core::ptr::null_mut(),
            sorts: [0; 2],
        });
        (*p).countdown = crate::events::next_sample_countdown(&mut *p);
        (*p).refresh_fast_path();
    }
    tls_set(p as usize);
    let key = THREAD_KEY.load(Ordering::Acquire);
    if key != u32::MAX {
        // SAFETY: the key is valid; the value is only read back by our destructor.
        unsafe { libc::pthread_setspecific(key, p as *const libc::c_void) };
    }
    p
}

/// Folds a thread's counters (and its exact access counts) into the retired ones
/// and frees its slot.
fn retire_slot(st: &ThreadState) {
    let Some(h) = crate::log::header() else {
        return;
    };
    let access = st.access.exact_counts();
    for (to, n) in h.retired_access.counts.iter().zip(access) {
        to.fetch_add(n, Ordering::Relaxed);
    }
    let counters = st.counters;
    if counters.is_null() || st.shared_counters {
        return;
    }
    // SAFETY: points into the mapped header.
    let c = unsafe { &*counters };
    let r = &h.retired;
    for (from, to) in c.all().zip(r.all()) {
        to.fetch_add(from.swap(0, Ordering::Relaxed), Ordering::Relaxed);
    }
    for slot in &h.slots {
        if core::ptr::eq(&slot.counters, c) {
            for v in &slot.access.counts {
                v.store(0, Ordering::Relaxed);
            }
            slot.tid.store(0, Ordering::Release);
        }
    }
}

unsafe extern "C" fn on_thread_exit(value: *mut libc::c_void) {
    let st = value as *mut ThreadState;
    if st.is_null() {
        return;
    }
    // A signal handler that allocates now must not write to the block we retire.
    (*st).in_hook = true;
    crate::events::record_thread_totals(&mut *st);
    crate::events::record_thread_exit(&mut *st);
    retire_slot(&*st);
    (*st).writer.release();
    (*st).model.release();
    if !(*st).omp.is_null() {
        // SAFETY: the thread's contexts' mapping, no longer used.
        sys::munmap((*st).omp as *mut libc::c_void, CONTEXTS_MAPPED);
    }
    tls_set(DEAD);
    let size = core::mem::size_of::<ThreadState>().next_multiple_of(4096);
    sys::munmap(st as *mut libc::c_void, size);
}

/// The thread's stack range, to validate frame-pointer reads.
fn stack_bounds() -> (u64, u64) {
    if sys::gettid() == sys::getpid() {
        return main_stack_bounds();
    }
    // SAFETY: pthread_getattr_np may allocate; callers hold the reentrancy guard
    // or run before the state exists, so such allocations pass straight through.
    unsafe {
        let mut attr: libc::pthread_attr_t = core::mem::zeroed();
        if sys::real_pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return (0, 0);
        }
        let mut addr: *mut libc::c_void = core::ptr::null_mut();
        let mut size: usize = 0;
        let ok = libc::pthread_attr_getstack(&attr, &mut addr, &mut size) == 0;
        libc::pthread_attr_destroy(&mut attr);
        if ok {
            (addr as u64, addr as u64 + size as u64)
        } else {
            (0, 0)
        }
    }
}

/// The main thread's stack range, found as glibc's `pthread_getattr_np` finds
/// it (the mapping holding the stack, extended down to RLIMIT_STACK or the
/// mapping below), but read with raw system calls: glibc reads
/// /proc/self/maps through `fopen`, which calls malloc, and a program that
/// defines its own malloc may not be ready for it before `main`.
fn main_stack_bounds() -> (u64, u64) {
    let on_stack = 0u8;
    let here = core::hint::black_box(&on_stack) as *const u8 as u64;
    let mut limit: libc::rlimit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: an out pointer to a local.
    let rlimit = match unsafe { libc::getrlimit(libc::RLIMIT_STACK, &mut limit) } {
        0 => limit.rlim_cur,
        _ => libc::RLIM_INFINITY,
    };
    let (mut below, mut found) = (0u64, None);
    sys::for_each_line(c"/proc/self/maps", &mut |line| {
        let Some((from, to)) = sys::parse_range(line) else {
            return true;
        };
        if (from..to).contains(&here) {
            found = Some(to);
            return false;
        }
        below = to;
        true
    });
    match found {
        Some(hi) => (hi - rlimit.min(hi - below), hi),
        None => (0, 0),
    }
}

//! Per-thread state, reached through one initial-exec TLS slot.
//!
//! Rust's `thread_local!` in a cdylib goes through `__tls_get_addr` on every access;
//! on x86_64 we define the slot ourselves in `.tbss` and reach it with a
//! `@GOTTPOFF` load, which is one `mov` from `%fs`.

use crate::log::Writer;
use crate::sys;
use core::sync::atomic::{AtomicU32, Ordering};
use memlens_rawlog::{AccessCounters, Counters};

pub const MAX_GROUP_DEPTH: usize = 16;

/// The fields every hooked call reads come first, in one cache line (C
/// layout: Rust would put the flags after the large buffers, four lines away).
#[repr(C)]
pub struct ThreadState {
    /// Inside a hook's guarded part: nested calls (from the unwinder, from libc,
    /// from another allocator) pass through.
    pub in_hook: bool,
    /// The counters are the shared overflow slot: update them atomically.
    pub shared_counters: bool,
    /// The allocation hooks' fast path may serve this thread: see
    /// [`ThreadState::refresh_fast_path`].
    pub fast_path: bool,
    pub tid: u32,
    pub counters: *const Counters,
    /// Bytes left until the next sampled small allocation.
    pub countdown: i64,
    pub group_depth: usize,
    pub access_counters: *const AccessCounters,
    pub access: crate::access::AccessState,
    pub writer: Writer,
    pub rng: u64,
    pub groups: [u64; MAX_GROUP_DEPTH],
    pub stack_lo: u64,
    pub stack_hi: u64,
    /// The cache model's levels for this thread (built at its first access).
    pub model: crate::model::ThreadModel,
    pub clock: crate::clock::Clock,
    /// Allocation stacks walked lately (the cached rules' walks).
    pub memo: crate::unwind::memo::WalkMemo,
    /// The OpenMP regions this thread opened and runs (their calling
    /// contexts), mapped at its first one: null before.
    pub omp: *mut crate::openmp::TeamContexts,
    /// qsort calls and the bytes they sorted (see `libc_calls`).
    pub sorts: [u64; 2],
}

impl ThreadState {
    /// Whether the allocation hooks may count this thread's calls on their
    /// fast path: its own counters (plain adds, not the shared slot's atomic
    /// ones, nor none as in a fork child before it has a slot) and no group
    /// open (whose every block is recorded). Called whenever those change.
    pub fn refresh_fast_path(&mut self) {
        self.fast_path = !self.counters.is_null() && !self.shared_counters && self.group_depth == 0;
    }
}

/// TLS values that are not pointers to a state: the three lowest (the hooks
/// test `<= INTERNAL`).
pub const NONE: usize = 0;
/// The thread has run its exit destructors: use the shared path.
pub const DEAD: usize = 1;
/// A thread of the runtime itself: never record it.
pub const INTERNAL: usize = 2;

#[cfg(target_arch = "x86_64")]
core::arch::global_asm!(
    ".section .tbss.memlens_thread_state,\"awT\",@nobits",
    ".p2align 3",
    ".globl memlens_thread_state",
    ".hidden memlens_thread_state",
    ".type memlens_thread_state, @object",
    ".size memlens_thread_state, 8",
    "memlens_thread_state:",
    ".zero 8",
    ".text",
);

#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn tls_get() -> usize {
    let out: usize;
    // SAFETY: reads our own TLS slot through its initial-exec offset.
    unsafe {
        core::arch::asm!(
            "mov {o}, qword ptr [rip + memlens_thread_state@GOTTPOFF]",
            "mov {o}, qword ptr fs:[{o}]",
            o = out(reg) out,
            options(nostack, readonly, preserves_flags)
        );
    }
    out
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn tls_set(v: usize) {
    // SAFETY: writes our own TLS slot through its initial-exec offset.
    unsafe {
        core::arch::asm!(
            "mov {t}, qword ptr [rip + memlens_thread_state@GOTTPOFF]",
            "mov qword ptr fs:[{t}], {v}",
            t = out(reg) _,
            v = in(reg) v,
            options(nostack, preserves_flags)
        );
    }
}

#[cfg(not(target_arch = "x86_64"))]
std::thread_local! {
    static SLOT: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub fn tls_get() -> usize {
    SLOT.with(|s| s.get())
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub fn tls_set(v: usize) {
    SLOT.with(|s| s.set(v))
}

/// The calling thread's state, if it has one (whatever its guard says).
pub fn current() -> Option<&'static mut ThreadState> {
    match tls_get() {
        NONE | DEAD | INTERNAL => None,
        // SAFETY: a state is only used by its own thread.
        p => unsafe { (p as *mut ThreadState).as_mut() },
    }
}

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
            access: crate::access::AccessState::new(),
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

/// A thread slot in the header for exact per-thread counters, or the shared
/// "retired" counters when all slots are taken; the thread is counted among
/// the log's writers.
pub fn claim_slot(tid: u32) -> (*const Counters, *const AccessCounters, bool) {
    let Some(h) = crate::log::header() else {
        return (core::ptr::null(), core::ptr::null(), false);
    };
    // Before the thread reads a time for any record (see the field).
    if h.threads_started.fetch_add(1, Ordering::SeqCst) > 0 {
        crate::clock::second_thread_writes();
    }
    for (i, slot) in h.slots.iter().enumerate() {
        if slot.tid.load(Ordering::Relaxed) == 0
            && slot
                .tid
                .compare_exchange(0, tid, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            h.slots_claimed.fetch_max(i as u64 + 1, Ordering::Relaxed);
            reset(&slot.counters);
            for v in &slot.access.counts {
                v.store(0, Ordering::Relaxed);
            }
            return (&slot.counters, &slot.access, false);
        }
    }
    (&h.retired, &h.retired_access, true)
}

fn reset(c: &Counters) {
    for v in c.all() {
        v.store(0, Ordering::Relaxed);
    }
}

/// Folds a thread's counters (and its exact access counts) into the retired ones
/// and frees its slot.
pub fn retire_slot(st: &ThreadState) {
    let Some(h) = crate::log::header() else {
        return;
    };
    let access = crate::access::exact_counts(st);
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
    crate::openmp::release(&mut *st);
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
        if crate::process::real_pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
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

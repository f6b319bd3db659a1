//! Per-thread state, reached through one initial-exec TLS slot.
//!
//! Rust's `thread_local!` in a cdylib goes through `__tls_get_addr` on every access;
//! on x86_64 we define the slot ourselves in `.tbss` and reach it with a
//! `@GOTTPOFF` load, which is one `mov` from `%fs`.

use crate::log::Writer;
use core::sync::atomic::Ordering;
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
    pub access: crate::access::state::AccessState,
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
    pub omp: *mut crate::openmp::contexts::TeamContexts,
    /// qsort calls and the bytes they sorted (see `libc_calls`).
    pub sorts: [u64; 2],
}

impl ThreadState {
    /// The thread's OpenMP contexts, if it has met a parallel region.
    pub fn team_contexts(&self) -> Option<&crate::openmp::contexts::TeamContexts> {
        // SAFETY: null, or this thread's own mapping made at its first region.
        unsafe { self.omp.as_ref() }
    }

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

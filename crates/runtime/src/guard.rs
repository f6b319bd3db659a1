//! The reentrancy guard every hook passes through: whether the runtime is
//! ready, the calling thread's state, and errno kept as the program left it.

use crate::events::record_thread_start;
use crate::stage::{READY, STATE};
use crate::thread;
use crate::thread::ThreadState;
use core::sync::atomic::{AtomicBool, Ordering};

/// READY with glibc's allocator and sampled recording: the malloc family's
/// fast path ([`fast_state`]) is open. Kept with `STATE` by [`set_state`].
static FAST_PATH: AtomicBool = AtomicBool::new(false);

/// Moves the runtime to `state` (after its settings and the allocator are
/// known).
pub(crate) fn set_state(state: u8) {
    let fast = state == READY && crate::allocator::is_glibc() && !crate::track::every_block();
    FAST_PATH.store(fast, Ordering::Relaxed);
    STATE.store(state, Ordering::Release);
}

/// The calling thread's state with the reentrancy guard taken, or `None` when the
/// event must pass through unrecorded (not ready, nested, runtime thread, exited).
#[inline(always)]
pub(crate) fn enter() -> Option<&'static mut ThreadState> {
    let st = state()?;
    st.in_hook = true;
    Some(st)
}

/// The calling thread's state as [`enter`] finds it, the guard left as it is:
/// for the allocation hooks, whose fast path only counts. Its two stores
/// around the allocator's call cost a tenth of a malloc-heavy program's time;
/// what may call back into a hook (a stack walk, the log, a lock, an
/// allocator other than glibc's) runs in [`guarded`].
#[inline(always)]
pub(crate) fn state() -> Option<&'static mut ThreadState> {
    if STATE.load(Ordering::Relaxed) != READY {
        core::hint::cold_path();
        return None;
    }
    let mut p = thread::tls_get();
    if p <= thread::INTERNAL {
        p = first_state(p)?;
    }
    // SAFETY: a state is only used by its own thread.
    let st = unsafe { &mut *(p as *mut ThreadState) };
    if st.in_hook {
        core::hint::cold_path();
        return None;
    }
    Some(st)
}

/// The calling thread's state when its allocation call can take the fast
/// path: glibc's allocator, sampled recording, the thread's own counters, no
/// group open, outside any hook. Every check the generic path makes for these
/// cases, made once: a malloc-heavy program makes tens of millions of calls.
#[inline(always)]
pub(crate) fn fast_state() -> Option<&'static mut ThreadState> {
    if !FAST_PATH.load(Ordering::Relaxed) {
        return None;
    }
    let p = thread::tls_get();
    if p <= thread::INTERNAL {
        return None;
    }
    // SAFETY: a state is only used by its own thread.
    let st = unsafe { &mut *(p as *mut ThreadState) };
    if st.in_hook || !st.fast_path {
        return None;
    }
    Some(st)
}

/// Runs `f` with the guard taken, then leaves the guard as it found it.
#[inline(always)]
pub(crate) fn guarded<R>(st: &mut ThreadState, f: impl FnOnce(&mut ThreadState) -> R) -> R {
    let was = st.in_hook;
    st.in_hook = true;
    let r = f(st);
    st.in_hook = was;
    r
}

/// For a TLS slot that holds no state: the state of the thread's first
/// event (made now), or `None` for a thread past its exit or the runtime's
/// own. Out of the hooks' fast path (whose every register saved and restored
/// costs every call).
#[cold]
#[inline(never)]
fn first_state(slot: usize) -> Option<usize> {
    if slot != thread::NONE {
        return None;
    }
    let p = crate::lifecycle::create();
    // SAFETY: a fresh state of this thread, not yet in use.
    let st = unsafe { p.as_mut() }?;
    guarded(st, record_thread_start);
    Some(p as usize)
}

#[inline(always)]
pub(crate) fn leave(st: &mut ThreadState) {
    st.in_hook = false;
}

pub(crate) fn is_dead_thread() -> bool {
    STATE.load(Ordering::Relaxed) == READY && thread::tls_get() == thread::DEAD
}

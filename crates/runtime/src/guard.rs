//! The reentrancy guard every hook passes through: whether the runtime is
//! ready, the calling thread's state, and errno kept as the program left it.

use crate::events::record_thread_start;
use crate::thread;
use crate::thread::ThreadState;
use core::ffi::c_int;
use core::sync::atomic::{AtomicU8, Ordering};

pub(crate) const UNINIT: u8 = 0;

pub(crate) const READY: u8 = 1;

pub(crate) const DISABLED: u8 = 2;

pub(crate) static STATE: AtomicU8 = AtomicU8::new(UNINIT);

pub(crate) fn errno() -> c_int {
    // SAFETY: errno location is always valid for the calling thread.
    unsafe { *libc::__errno_location() }
}

pub(crate) fn set_errno(v: c_int) {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = v };
}

/// The calling thread's state with the reentrancy guard taken, or `None` when the
/// event must pass through unrecorded (not ready, nested, runtime thread, exited).
#[inline(always)]
pub(crate) fn enter() -> Option<&'static mut ThreadState> {
    if STATE.load(Ordering::Relaxed) != READY {
        core::hint::cold_path();
        return None;
    }
    let p = match thread::tls_get() {
        thread::NONE => first_state(),
        thread::DEAD | thread::INTERNAL => {
            core::hint::cold_path();
            return None;
        }
        p => p as *mut ThreadState,
    };
    // SAFETY: a state is only used by its own thread (null: none could be made).
    let st = unsafe { p.as_mut()? };
    if st.in_hook {
        core::hint::cold_path();
        return None;
    }
    st.in_hook = true;
    Some(st)
}

/// The state of a thread's first event, out of the hooks' fast path (whose
/// every register saved and restored costs every call).
#[cold]
#[inline(never)]
fn first_state() -> *mut ThreadState {
    let p = thread::create();
    // SAFETY: a fresh state of this thread, not yet in use.
    if let Some(st) = unsafe { p.as_mut() } {
        record_thread_start(st);
    }
    p
}

#[inline(always)]
pub(crate) fn leave(st: &mut ThreadState) {
    st.in_hook = false;
}

pub(crate) fn is_dead_thread() -> bool {
    STATE.load(Ordering::Relaxed) == READY && thread::tls_get() == thread::DEAD
}

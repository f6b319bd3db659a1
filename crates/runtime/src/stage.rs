//! Where the runtime is in its life: not started yet, ready (recording), or
//! disabled (told to stay out, or it could not open its log, at the start
//! or in a fork child).

use core::sync::atomic::AtomicU8;

/// Before the constructor ran (allocations then are kept by `early`).
pub(crate) const UNINIT: u8 = 0;

pub(crate) const READY: u8 = 1;

pub(crate) const DISABLED: u8 = 2;

pub(crate) static STATE: AtomicU8 = AtomicU8::new(UNINIT);

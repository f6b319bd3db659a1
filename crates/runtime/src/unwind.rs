//! Call stacks of allocations: frame pointers with validated reads (cheap, but
//! stops at the first function built without them), or DWARF unwind information
//! (complete: cached rules on x86_64, libgcc's `_Unwind_Backtrace` elsewhere and
//! for what the cached rules do not describe). Frames inside the runtime are skipped.

pub mod memo;
#[cfg(target_arch = "x86_64")]
mod rules;

use crate::thread::ThreadState;
use core::ffi::c_void;
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicU64, Ordering};
use memlens_rawlog::{unwinder, walked_by};

/// Address range of the runtime's own code.
static SELF_START: AtomicU64 = AtomicU64::new(0);
static SELF_END: AtomicU64 = AtomicU64::new(0);

pub fn set_self_range(start: u64, end: u64) {
    SELF_START.store(start, Ordering::Relaxed);
    SELF_END.store(end, Ordering::Relaxed);
}

#[inline(always)]
fn is_self(ip: u64) -> bool {
    ip >= SELF_START.load(Ordering::Relaxed) && ip < SELF_END.load(Ordering::Relaxed)
}

/// Fills `out` with return addresses, innermost first; returns the count and
/// the unwinder that walked them (a `walked_by` code). `entry` is the frame
/// of the runtime's entry point (see [`frame_address`]), whose inner frames
/// are then not walked, or 0: this one's. The cached rules' walk puts the
/// words it read into `reads`.
#[inline(never)]
pub fn capture(
    st: &ThreadState,
    method: u32,
    entry: u64,
    out: &mut [MaybeUninit<u64>],
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))] reads: &mut memo::Reads,
) -> (usize, usize) {
    let (n, by) = match method {
        #[cfg(target_arch = "x86_64")]
        unwinder::DWARF => match rules::capture(st, entry, out, reads) {
            Some(n) => (n, walked_by::CACHED_RULES),
            None => (dwarf(out), walked_by::LIBGCC),
        },
        #[cfg(not(target_arch = "x86_64"))]
        unwinder::DWARF => (dwarf(out), walked_by::LIBGCC),
        unwinder::LIBGCC => (dwarf(out), walked_by::LIBGCC),
        unwinder::FP => (
            frames_from(st, entry_or_this(entry), out),
            walked_by::FRAME_POINTERS,
        ),
        _ => (0, walked_by::FRAME_POINTERS),
    };
    (n, by)
}

/// Code was unloaded: what was learnt about its frames no longer holds.
pub fn forget_unloaded_code() {
    #[cfg(target_arch = "x86_64")]
    rules::forget();
    #[cfg(not(target_arch = "x86_64"))]
    memo::forget();
}

/// The current function's frame (its saved frame pointer and return address).
#[inline(always)]
pub fn frame_address() -> u64 {
    let fp: u64;
    // SAFETY: reads the frame pointer register (frame pointers are forced on).
    unsafe {
        #[cfg(target_arch = "x86_64")]
        core::arch::asm!("mov {}, rbp", out(reg) fp, options(nomem, nostack, preserves_flags));
        #[cfg(target_arch = "aarch64")]
        core::arch::asm!("mov {}, x29", out(reg) fp, options(nomem, nostack, preserves_flags));
    }
    fp
}

/// The caller's return address (frame pointers are forced on in this crate).
#[inline(always)]
pub fn return_address() -> u64 {
    let fp = frame_address();
    // SAFETY: our own frame: the saved link register sits above the saved fp.
    unsafe { *((fp + 8) as *const u64) }
}

/// The frame a walk starts from: the entry point's, or the caller's.
#[inline(always)]
fn entry_or_this(entry: u64) -> u64 {
    if entry != 0 {
        entry
    } else {
        frame_address()
    }
}

/// Return addresses by frame pointers from the frame at `fp` outwards: given
/// the frame of one of the runtime's entry points, the runtime's own inner
/// frames are not walked.
fn frames_from(st: &ThreadState, mut fp: u64, out: &mut [MaybeUninit<u64>]) -> usize {
    let (lo, hi) = (st.stack_lo, st.stack_hi);
    let mut n = 0;
    while n < out.len() {
        // Every read is checked against this thread's stack first: a function built
        // without frame pointers leaves any value in the register.
        if !fp.is_multiple_of(8) || fp < lo || fp.saturating_add(16) > hi {
            break;
        }
        // SAFETY: fp and fp+8 lie inside this thread's mapped stack.
        let (next, ret) = unsafe { (*(fp as *const u64), *((fp + 8) as *const u64)) };
        if ret == 0 {
            break;
        }
        if !is_self(ret) {
            out[n].write(ret);
            n += 1;
        }
        if next <= fp {
            break;
        }
        fp = next;
    }
    n
}

#[repr(C)]
struct UnwindContext {
    _private: [u8; 0],
}

type UnwindTraceFn = extern "C" fn(*mut UnwindContext, *mut c_void) -> i32;

extern "C" {
    fn _Unwind_Backtrace(trace: UnwindTraceFn, arg: *mut c_void) -> i32;
    fn _Unwind_GetIP(ctx: *mut UnwindContext) -> usize;
}

struct DwarfOut<'a> {
    out: &'a mut [MaybeUninit<u64>],
    n: usize,
}

extern "C" fn dwarf_frame(ctx: *mut UnwindContext, arg: *mut c_void) -> i32 {
    const URC_NO_REASON: i32 = 0;
    const URC_END_OF_STACK: i32 = 5;
    // SAFETY: arg is the DwarfOut passed below; ctx comes from the unwinder.
    let acc = unsafe { &mut *(arg as *mut DwarfOut) };
    let ip = unsafe { _Unwind_GetIP(ctx) } as u64;
    if ip == 0 {
        return URC_END_OF_STACK;
    }
    if !is_self(ip) {
        acc.out[acc.n].write(ip);
        acc.n += 1;
    }
    if acc.n == acc.out.len() {
        URC_END_OF_STACK
    } else {
        URC_NO_REASON
    }
}

fn dwarf(out: &mut [MaybeUninit<u64>]) -> usize {
    let mut acc = DwarfOut { out, n: 0 };
    // SAFETY: the callback only writes within `acc.out`.
    unsafe { _Unwind_Backtrace(dwarf_frame, &mut acc as *mut DwarfOut as *mut c_void) };
    acc.n
}

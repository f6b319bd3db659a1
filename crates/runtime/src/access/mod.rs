//! The callbacks of clang's `-fsanitize-coverage=trace-loads,trace-stores`: exact
//! access counts per thread and a sample every `access_period` accesses of a class.
//!
//! Fast path (hand-written: one instruction of real work): each of the ten access
//! classes (load/store x 1,2,4,8,16 bytes) has a countdown in initial-exec TLS. The
//! callback subtracts one; only the subtraction that borrows (from 0) takes the
//! slow path, which credits the accesses counted down since the last reset, takes a
//! sample when one is due, publishes the exact count for the collector, and sets
//! the next countdown. Exact count at any instant = credited + (reset - remaining).

pub(crate) mod state;

use state::countdowns;

use crate::guard::{enter, leave};
use crate::log;
use crate::settings::settings;
use crate::sys::{errno, set_errno};
use crate::thread::{self, ThreadState};
use core::sync::atomic::Ordering;
use memlens_rawlog::{self as raw, tag, ACCESS_CLASSES, PUBLISH_EVERY};

/// One exported callback per class: subtract, and on borrow tail-call the slow path
/// with (address, class, return address) so it returns straight to the caller.
#[cfg(target_arch = "x86_64")]
macro_rules! callback {
    ($name:ident, $class:literal) => {
        /// sancov access callback.
        ///
        /// # Safety
        /// Called by instrumented code only.
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $name(_addr: *const u8) {
            core::arch::naked_asm!(
                "mov rax, qword ptr [rip + memlens_access_countdown@GOTTPOFF]",
                concat!("sub qword ptr fs:[rax + ", $class, " * 8], 1"),
                "jb 2f",
                "ret",
                "2:",
                concat!("mov esi, ", $class),
                "mov rdx, qword ptr [rsp]",
                "jmp {slow}",
                slow = sym slow_path,
            )
        }
    };
}

/// Portable callbacks (through `thread_local!`, slower than the x86_64 ones).
#[cfg(not(target_arch = "x86_64"))]
macro_rules! callback {
    ($name:ident, $class:literal) => {
        /// sancov access callback.
        ///
        /// # Safety
        /// Called by instrumented code only.
        #[no_mangle]
        #[inline(never)]
        pub unsafe extern "C" fn $name(addr: *const u8) {
            let c = &mut (*countdowns())[$class];
            let (next, borrow) = c.overflowing_sub(1);
            *c = next;
            if borrow {
                let pc = crate::unwind::return_address();
                slow_path(addr as u64, $class, pc);
            }
        }
    };
}

/// The ten exported callbacks, from whichever `callback!` this target has.
mod callbacks {
    use super::*;
    callback!(__sanitizer_cov_load1, 0);
    callback!(__sanitizer_cov_load2, 1);
    callback!(__sanitizer_cov_load4, 2);
    callback!(__sanitizer_cov_load8, 3);
    callback!(__sanitizer_cov_load16, 4);
    callback!(__sanitizer_cov_store1, 5);
    callback!(__sanitizer_cov_store2, 6);
    callback!(__sanitizer_cov_store4, 7);
    callback!(__sanitizer_cov_store8, 8);
    callback!(__sanitizer_cov_store16, 9);
}

/// Accesses credited between two publications of a thread's counts, and the
/// longest countdown: its published counts then trail the exact ones by less
/// than `PUBLISH_EVERY` accesses of a class (less than half of them pending
/// in a countdown, less than half credited since the last publication).
/// Publishing at every sample instead cost STREAM 7 ms of its 0.25 s: its
/// slow path then touched every class's bookkeeping and the header's lines.
const PUBLISH_STEP: u64 = PUBLISH_EVERY / 2;

/// Countdown used while the runtime is not recording: the fast path then borrows
/// once every 2^62 accesses, i.e. never.
const IDLE: u64 = 1 << 62;

/// Whether samples of this class are taken at all (--no-loads, --no-stores).
fn class_wanted(class: usize) -> bool {
    use raw::access_filter::{LOADS, STORES};
    let bit = if raw::class_is_store(class) {
        STORES
    } else {
        LOADS
    };
    settings().access_filter & bit != 0
}

fn jittered_period(st: &mut ThreadState, class: usize) -> u64 {
    let s = settings();
    if !class_wanted(class) || s.access_period == 0 {
        return u64::MAX;
    }
    // Uniform jitter of +-1/8 of the period, as SPE perturbs its interval, so a
    // loop whose trip matches the period is not always sampled at the same access.
    let p = s.access_period;
    let j = p / 8;
    // Uniform in [p - j, p + j]: the mean stays exactly p. The high half of
    // a 64x64-bit product rather than a remainder: a division cost a sample
    // ~15 ns (its bias, under 2^-40 here, is of no account).
    let draw = u128::from(crate::events::next_u64(st)) * u128::from(2 * j + 1);
    p - j + (draw >> 64) as u64
}

/// Publishes the thread's exact counts to its own header slot (a thread on the
/// shared overflow slot publishes only when it exits).
pub fn publish(st: &ThreadState) {
    if st.shared_counters {
        return;
    }
    // SAFETY: points into the mapped header, or is null in a fork child before it
    // has its own slot.
    if let Some(slot) = unsafe { st.access_counters.as_ref() } {
        for (v, n) in slot.counts.iter().zip(st.access.exact_counts()) {
            v.store(n, Ordering::Relaxed);
        }
    }
}

/// A forked child starts counting from zero (its parent's accesses are the
/// parent's).
pub fn reset_after_fork(st: &mut ThreadState) {
    let arrays = st.access.countdown_arrays;
    for (src, array) in st.access.sources.iter_mut().zip(arrays) {
        // SAFETY: TLS arrays of this thread.
        if let Some(remaining) = unsafe { array.as_ref() } {
            src.credited = [0; ACCESS_CLASSES];
            src.reset = *remaining;
        }
    }
    st.access.bulk = [0; 2];
    // Its log is a new one.
    st.access.marked_instrumented = false;
}

extern "C" fn slow_path(addr: u64, class: u32, pc: u64) {
    let frame = crate::unwind::frame_address();
    // SAFETY: our own TLS block.
    slow(addr, class, pc, unsafe { &mut *countdowns() }, 0, frame);
}

/// The slow path of the executable's inlined fast path (`sancov/fastpath.ll.in`):
/// returns the class's next countdown, which the caller keeps (perhaps in a
/// register).
///
/// # Safety
/// `countdowns` is the calling thread's own array of ten countdowns.
#[no_mangle]
pub unsafe extern "C" fn memlens_access_refill(
    addr: u64,
    class: u32,
    pc: u64,
    countdowns: *mut [u64; ACCESS_CLASSES],
) -> u64 {
    let frame = crate::unwind::frame_address();
    match countdowns.as_mut() {
        // One access that borrowed: the block case with one access, at 0.
        Some(remaining) => take_due(&[addr], &[pc], 0, class, remaining, frame),
        None => IDLE,
    }
}

/// The slow path of code counted per block (`sancov/pass.cpp`): `n`
/// accesses of `class` (their addresses and code addresses in the two
/// arrays, in program order) were due to be subtracted from a countdown of
/// `left`, and borrowed.
///
/// # Safety
/// `addresses` and `code` hold `n` values; `countdowns` is the calling
/// thread's own array of ten countdowns (as an integer, see the pass).
#[no_mangle]
pub unsafe extern "C" fn memlens_access_refill_block(
    addresses: *const u64,
    code: *const u64,
    n: u64,
    left: u64,
    class: u32,
    countdowns: usize,
) -> u64 {
    let frame = crate::unwind::frame_address();
    match (countdowns as *mut [u64; ACCESS_CLASSES]).as_mut() {
        Some(remaining) => {
            let addresses = core::slice::from_raw_parts(addresses, n as usize);
            let code = core::slice::from_raw_parts(code, n as usize);
            take_due(addresses, code, left, class, remaining, frame)
        }
        None => IDLE,
    }
}

/// Takes each access of `addresses` (with its code address) that a countdown
/// per access would have stopped at, the first at index `left`, and returns
/// the countdown left after the last.
fn take_due(
    addresses: &[u64],
    code: &[u64],
    left: u64,
    class: u32,
    remaining: &mut [u64; ACCESS_CLASSES],
    frame: u64,
) -> u64 {
    let index = class as usize % ACCESS_CLASSES;
    let n = addresses.len() as u64;
    let mut at = left;
    while at < n {
        // The accesses before this one took the countdown to zero: this one
        // borrows, as it would have alone.
        slow(
            addresses[at as usize],
            class,
            code[at as usize],
            remaining,
            0,
            frame,
        );
        let next = remaining[index];
        let after = n - at - 1;
        if next >= after {
            return next - after;
        }
        at += next + 1;
    }
    remaining[index]
}

/// An access of `class` whose countdown borrowed; `flags` are the sample's
/// ([`raw::sample_flags`]); `frame` is the runtime's entry point's, where a
/// sample's context starts.
fn slow(
    addr: u64,
    class: u32,
    pc: u64,
    remaining: &mut [u64; ACCESS_CLASSES],
    flags: u8,
    frame: u64,
) {
    let class = class as usize % ACCESS_CLASSES;
    let Some(st) = enter() else {
        match thread::current() {
            // Nested in one of our hooks (instrumented code in a signal handler):
            // count the accesses so far and look again at the next access.
            Some(st) => match st.access.source_of(remaining) {
                Some(src) => {
                    let src = &mut st.access.sources[src];
                    src.credited[class] += src.reset[class] + 1;
                    src.reset[class] = 0;
                    remaining[class] = 0;
                }
                None => remaining[class] = IDLE,
            },
            // Not recording on this thread (runtime idle, exited thread): park.
            None => remaining[class] = IDLE,
        }
        return;
    };
    let Some(src) = st.access.source_of(remaining) else {
        remaining[class] = IDLE;
        leave(st);
        return;
    };
    let saved = errno();
    // Also the sample's time.
    let entered = st.clock.now_unordered();
    if !st.access.marked_instrumented {
        if let Some(h) = log::header() {
            h.instrumented.store(1, Ordering::Relaxed);
        }
        st.access.marked_instrumented = true;
    }
    let modelled = crate::model::enabled();
    let level = if modelled {
        st.model.level(addr, raw::class_size(class) as u64)
    } else {
        0
    };
    let s = settings();
    let by_lines = s.access_filter & raw::access_filter::LINES != 0;
    // Everything since the last reset, plus this access.
    let consumed = st.access.sources[src].reset[class] + 1;
    st.access.sources[src].credited[class] += consumed;
    let due = if by_lines {
        class_wanted(class) && raw::line_chosen(addr, s.access_period)
    } else {
        if st.access.sources[src].until_sample[class] == 0 {
            // First access of this class from this source on this thread.
            st.access.sources[src].until_sample[class] = jittered_period(st, class);
        }
        let until = st.access.sources[src].until_sample[class].saturating_sub(consumed);
        st.access.sources[src].until_sample[class] = until;
        until == 0
    };
    if due {
        let ev = raw::Sample {
            time: entered,
            addr,
            pc,
            stack: access_context(st, frame),
            // SAFETY: plain libc call (vDSO getcpu).
            cpu: unsafe { libc::sched_getcpu() }.max(0) as u32,
            class: class as u8,
            level,
            flags,
            _pad: 0,
        };
        st.writer.write(st.tid, tag::SAMPLE, &ev, &[]);
        if !by_lines {
            st.access.sources[src].until_sample[class] = jittered_period(st, class);
        }
    }
    // The cache model and line sampling must see every access: each one comes
    // here then.
    let every_access = modelled || by_lines;
    let next = if every_access {
        1
    } else {
        st.access.sources[src].until_sample[class].min(PUBLISH_STEP)
    };
    st.access.sources[src].reset[class] = next - 1;
    remaining[class] = next - 1;
    st.access.unpublished += consumed;
    if st.access.unpublished >= PUBLISH_STEP {
        publish(st);
        st.access.unpublished = 0;
    }
    st.access.slow_ns += st.clock.now_unordered().saturating_sub(entered);
    set_errno(saved);
    leave(st);
}

/// A sampled access's calling context, by frame pointers from the frame of
/// the runtime's entry point on: instrumented code keeps them (`memlens cc`
/// forces them on), and the walk costs tens of nanoseconds once per sample.
/// DrCCTProf's context of each access. The walk is not counted here: the
/// finalizer counts one per (non-bulk) sample record, where the thread's
/// counter, a line of its own, cost STREAM 5 ms.
fn access_context(st: &mut ThreadState, frame: u64) -> u64 {
    crate::events::capture_stack_by(st, raw::unwinder::FP, frame).0
}

/// Called by code built with memlens' pass plugin before each atomic
/// read-modify-write of `bytes` at `addr`: one load and one store of that
/// size, counted and sampled as the access callbacks do, the samples marked
/// atomic.
///
/// # Safety
/// Called by instrumented code only.
#[no_mangle]
pub unsafe extern "C" fn memlens_atomic(addr: *const u8, bytes: u32) {
    let pc = crate::unwind::return_address();
    count_access(addr, bytes, pc, Did::Both, raw::sample_flags::ATOMIC);
}

/// An atomic access of code built by `memlens gcc` (its ThreadSanitizer
/// entry points, `gcc/tsan_shim.c`, do the operation and call here): `did`
/// 0 a load, 1 a store, 2 both, by the instruction before `pc`.
///
/// # Safety
/// Called by the shim only.
#[no_mangle]
pub unsafe extern "C" fn memlens_atomic_at(addr: *const u8, bytes: u32, did: u32, pc: u64) {
    let did = match did {
        0 => Did::Load,
        1 => Did::Store,
        _ => Did::Both,
    };
    count_access(addr, bytes, pc, did, raw::sample_flags::ATOMIC);
}

/// Bytes of code built by `memlens gcc` read or written as a range (a struct
/// copied or cleared inline, a C++ object's vtable pointer): counted and
/// sampled as an intercepted memcpy's.
///
/// # Safety
/// Called by the shim only.
#[no_mangle]
pub unsafe extern "C" fn memlens_range_at(addr: *const u8, bytes: u64, written: u32, pc: u64) {
    let Some(begin) = bulk_begin() else { return };
    let span = (addr as u64, bytes);
    match written {
        0 => bulk_end(begin, pc, &[span], None),
        _ => bulk_end(begin, pc, &[], Some(span)),
    }
}

/// What one access of a callback did: read, wrote, or both (an atomic
/// read-modify-write).
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Did {
    Load,
    Store,
    Both,
}

/// One access of `bytes` at `addr` from code at `pc`, not through a
/// class's callback (an atomic, a vtable pointer): counted and sampled as
/// the callbacks do, its samples with `flags`.
#[inline(always)]
pub(crate) fn count_access(addr: *const u8, bytes: u32, pc: u64, did: Did, flags: u8) {
    let size = raw::ACCESS_SIZES
        .iter()
        .position(|&s| s >= u64::from(bytes))
        .unwrap_or(raw::ACCESS_SIZES.len() - 1);
    let classes = [
        (did != Did::Store).then_some(size),
        (did != Did::Load).then_some(size + raw::ACCESS_SIZES.len()),
    ];
    for class in classes.into_iter().flatten() {
        // SAFETY: our own TLS block, as the exported callbacks use it.
        let remaining = unsafe { &mut *countdowns() };
        let (next, borrow) = remaining[class].overflowing_sub(1);
        remaining[class] = next;
        if borrow {
            slow(
                addr as u64,
                class as u32,
                pc,
                remaining,
                flags,
                crate::unwind::frame_address(),
            );
        }
    }
}

/// A bulk call's bytes are sampled as accesses of this class's size (8 bytes,
/// loads or stores): one sample per period of them, as a loop of 8-byte
/// accesses would be.
const BULK_LOAD_CLASS: usize = 3;
const BULK_STORE_CLASS: usize = 8;

/// The start of an intercepted bulk call: its time, if this thread records.
pub(crate) fn bulk_begin() -> Option<u64> {
    let st = enter()?;
    let begin = st.clock.now_unordered();
    leave(st);
    Some(begin)
}

/// Counts the bytes an intercepted bulk call of instrumented code moved
/// (exact, as its thread's bulk counters) and samples them: the ranges
/// (address, bytes) of `read` were read (memcpy's source, both strings of a
/// strcmp) and `written` written (memcpy's destination), between `begin`
/// and now.
pub(crate) fn bulk_end(begin: u64, pc: u64, read: &[(u64, u64)], written: Option<(u64, u64)>) {
    let Some(st) = enter() else { return };
    let saved = errno();
    let end = st.clock.now_unordered();
    for &(source, n) in read {
        st.access.bulk[0] += n;
        sample_bulk(st, source, n, BULK_LOAD_CLASS, pc, (begin, end));
    }
    if let Some((dest, n)) = written {
        st.access.bulk[1] += n;
        sample_bulk(st, dest, n, BULK_STORE_CLASS, pc, (begin, end));
    }
    // Bulk copies take no slow path: publish here for the bandwidth timeline.
    publish(st);
    set_errno(saved);
    leave(st);
}

/// Samples the `n` bytes at `base` of one bulk call as 8-byte accesses of
/// `class`: by the thread's bulk countdown of that direction (its bytes
/// carried from call to call), or every chosen line (line sampling). With the
/// cache model on, every line of the range goes through the model, as the
/// copy's own loads or stores would, and a sample takes its line's level.
/// Times are spread over the call's duration by offset.
fn sample_bulk(
    st: &mut ThreadState,
    base: u64,
    n: u64,
    class: usize,
    pc: u64,
    (begin, end): (u64, u64),
) {
    if n == 0 {
        return;
    }
    let s = settings();
    let direction = raw::class_is_store(class) as usize;
    let by_lines = s.access_filter & raw::access_filter::LINES != 0;
    let size = raw::class_size(class);
    let gap = |st: &mut ThreadState| jittered_period(st, class).saturating_mul(size);
    // Offset in this call of the next sample.
    let mut next = if by_lines {
        u64::MAX
    } else {
        match st.access.bulk_until[direction] {
            0 => gap(st) - 1,
            until => until - 1,
        }
    };
    // Once per call: the thread seldom migrates during one copy.
    // SAFETY: plain libc call (vDSO getcpu).
    let cpu = unsafe { libc::sched_getcpu() }.max(0) as u32;
    // The call's context, walked at its first sample.
    let mut stack = None;
    let mut emit = |st: &mut ThreadState, offset: u64, level: u8| {
        let ev = raw::Sample {
            time: begin + ((end - begin) as u128 * offset as u128 / n as u128) as u64,
            addr: base + (offset & !(size - 1)),
            pc,
            // One walk per call, whatever its samples: counted here.
            stack: *stack.get_or_insert_with(|| {
                crate::events::capture_counted_stack(st, raw::unwinder::FP, 0)
            }),
            cpu,
            class: class as u8,
            level,
            flags: raw::sample_flags::BULK,
            _pad: 0,
        };
        st.writer.write(st.tid, tag::SAMPLE, &ev, &[]);
    };
    let modelled = crate::model::enabled();
    if modelled || by_lines {
        let line = raw::SAMPLED_LINE;
        let mut at = base & !(line - 1);
        while at < base + n {
            let offset = at.max(base) - base;
            let line_end = (at + line - base).min(n);
            let level = if modelled {
                st.model.level(at.max(base), line_end - offset)
            } else {
                0
            };
            if by_lines && class_wanted(class) && raw::line_chosen(at, s.access_period) {
                emit(st, offset, level);
            }
            while next < line_end {
                emit(st, next, level);
                next = next.saturating_add(gap(st));
            }
            at += line;
        }
    } else {
        while next < n {
            emit(st, next, 0);
            next = next.saturating_add(gap(st));
        }
    }
    if !by_lines {
        st.access.bulk_until[direction] = next - n + 1;
    }
}

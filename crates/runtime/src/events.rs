//! What the hooks write: exact per-thread counters, call stacks and strings
//! (each defined once per log), allocation and thread records, and the log
//! of threads that already exited.

use crate::settings::settings;
use crate::sys::{errno, set_errno};
use crate::thread::ThreadState;
use crate::ways::Ways;
use crate::{log, modules, sys, track, unwind};
use core::ffi::{c_char, CStr};
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicU64, Ordering};
use memlens_rawlog::{self as raw, alloc_flags, tag};

/// Caches of ids already defined in this process's log: a stack or string
/// not found is defined (again). Stacks: 65,536 ids in sets of 8 (a
/// compiler allocates from 38,000 stacks); strings (the annotation API's
/// names) are few, direct-mapped.
pub(crate) static STACK_SEEN: Ways<8192> = Ways::new();

pub(crate) static STRING_SEEN: [AtomicU64; 1 << 10] = [const { AtomicU64::new(0) }; 1 << 10];

/// Events of threads that already ran their exit destructors.
pub(crate) static ORPHAN_LOCK: sys::SpinLock = sys::SpinLock::new();

static mut ORPHAN: log::Writer = log::Writer::new();

pub(crate) fn with_orphan(f: impl FnOnce(&mut log::Writer)) {
    ORPHAN_LOCK.lock();
    // SAFETY: ORPHAN is only touched under ORPHAN_LOCK.
    f(unsafe { &mut *core::ptr::addr_of_mut!(ORPHAN) });
    ORPHAN_LOCK.unlock();
}

/// The thread's exact counters (its own slot, or the shared overflow one) and
/// whether they are shared; None in a fork child before it has its own.
#[inline(always)]
fn own_counters(st: &ThreadState) -> Option<(&raw::Counters, bool)> {
    // SAFETY: counters point into the mapped header, or are null.
    let c = unsafe { st.counters.as_ref() }?;
    Some((c, st.shared_counters))
}

/// Adds to a counter: a plain store in the thread's own slot (it is the only
/// writer), an atomic add in the shared overflow one.
#[inline(always)]
fn add(v: &AtomicU64, d: u64, shared: bool) {
    if shared {
        v.fetch_add(d, Ordering::Relaxed);
    } else {
        v.store(v.load(Ordering::Relaxed).wrapping_add(d), Ordering::Relaxed);
    }
}

/// Adds to the thread's exact counters.
#[inline(always)]
pub(crate) fn count(st: &ThreadState, alloc_bytes: u64, free_bytes: u64) {
    let Some((c, shared)) = own_counters(st) else {
        return;
    };
    let pairs = [
        (&c.alloc_bytes, alloc_bytes),
        (&c.allocs, (alloc_bytes != 0) as u64),
        (&c.free_bytes, free_bytes),
        (&c.frees, (free_bytes != 0) as u64),
    ];
    for (v, d) in pairs {
        if d != 0 {
            add(v, d, shared);
        }
    }
}

/// [`count`] of a new block on the fast path, whose thread has its own
/// counters ([`crate::thread::ThreadState::refresh_fast_path`]).
#[inline(always)]
pub(crate) fn count_own_alloc(st: &ThreadState, usable: u64) {
    // SAFETY: the fast path's thread has its own slot in the mapped header.
    let c = unsafe { &*st.counters };
    add(&c.alloc_bytes, usable, false);
    add(&c.allocs, 1, false);
}

/// [`count`] of a freed block on the fast path, as [`count_own_alloc`].
#[inline(always)]
pub(crate) fn count_own_free(st: &ThreadState, usable: u64) {
    // SAFETY: as in count_own_alloc.
    let c = unsafe { &*st.counters };
    add(&c.free_bytes, usable, false);
    add(&c.frees, 1, false);
}

/// Counts a captured stack under the unwinder that walked it (a
/// `raw::walked_by` code), so a profile says how much the cached rules did
/// and how much fell back to libgcc.
fn count_stack(st: &ThreadState, walked_by: usize) {
    if let Some((c, shared)) = own_counters(st) {
        add(&c.stacks_walked[walked_by], 1, shared);
    }
}

/// Counts for a thread that already exited (allocations in late TLS destructors).
pub(crate) fn count_dead(alloc_bytes: u64, free_bytes: u64) {
    if let Some(h) = log::header() {
        let r = &h.retired;
        if alloc_bytes != 0 {
            r.alloc_bytes.fetch_add(alloc_bytes, Ordering::Relaxed);
            r.allocs.fetch_add(1, Ordering::Relaxed);
        }
        if free_bytes != 0 {
            r.free_bytes.fetch_add(free_bytes, Ordering::Relaxed);
            r.frees.fetch_add(1, Ordering::Relaxed);
        }
    }
}

pub(crate) fn next_u64(st: &mut ThreadState) -> u64 {
    // xorshift64*
    let mut x = st.rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    st.rng = x;
    x.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// Exponentially distributed byte count with mean `sample_rate` (Poisson sampling
/// of bytes, as tcmalloc and memray do), so every byte has the same chance.
#[cold]
pub(crate) fn next_sample_countdown(st: &mut ThreadState) -> i64 {
    let rate = settings().sample_rate;
    if rate == 0 {
        return i64::MAX;
    }
    let u = ((next_u64(st) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    let v = -u.ln() * rate as f64;
    (v as i64).max(1)
}

/// The calling context of an allocation, by the configured unwinder, from
/// the frame `entry` of the runtime's entry point (0: from here): its
/// interned id (0 when none was walked).
pub(crate) fn capture_stack(st: &mut ThreadState, entry: u64) -> u64 {
    capture_counted_stack(st, settings().unwinder, entry)
}

/// [`capture_stack_by`], the walk counted under its unwinder.
pub(crate) fn capture_counted_stack(st: &mut ThreadState, method: u32, entry: u64) -> u64 {
    let (id, walked_by) = capture_stack_by(st, method, entry);
    count_stack(st, walked_by);
    id
}

/// A calling context walked by `method` (one of [`raw::unwinder`]), interned
/// (its frames are written once, then named by id), and the unwinder that
/// walked it, for the caller to count.
pub(crate) fn capture_stack_by(st: &mut ThreadState, method: u32, entry: u64) -> (u64, usize) {
    // A remembered walk holds no OpenMP region's context.
    let memo = method == raw::unwinder::DWARF && !st.team_contexts().is_some_and(|t| t.in_region());
    if memo {
        if let Some(id) = unwind::memo::recall(&st.memo, (st.stack_lo, st.stack_hi), entry) {
            return (id, raw::walked_by::CACHED_RULES);
        }
    }
    // Left uninitialised: zeroing it cost 5% of every-block recording.
    let mut frames = [MaybeUninit::<u64>::uninit(); raw::MAX_FRAMES];
    let max = settings().max_frames as usize;
    let mut reads = unwind::memo::Reads::new();
    let (n, walked_by) = unwind::capture(st, method, entry, &mut frames[..max], &mut reads);
    let n = (st.team_contexts()).map_or(n, |t| t.complete(&mut frames[..max], n));
    let id = intern_stack(st, &frames, n);
    if memo && walked_by == raw::walked_by::CACHED_RULES && id != 0 && stack_seen(id) {
        unwind::memo::remember(&mut st.memo, (st.stack_lo, st.stack_hi), entry, &reads, id);
    }
    (id, walked_by)
}

/// Whether the stack's definition is in this process's log.
fn stack_seen(id: u64) -> bool {
    STACK_SEEN.find(id, |seen| seen == id).is_some()
}

/// The id of the first `n` of `frames`, their definition written once (0:
/// no frames).
fn intern_stack(st: &mut ThreadState, frames: &[MaybeUninit<u64>], n: usize) -> u64 {
    if n == 0 {
        return 0;
    }
    // SAFETY: the walk wrote the first n entries.
    let frames = unsafe { core::slice::from_raw_parts(frames.as_ptr() as *const u64, n) };
    let id = raw::hash_frames(frames);
    if !stack_seen(id) {
        if !modules::all_known(frames) {
            record_modules(st);
        }
        let def = raw::StackDef {
            id,
            frames: n as u32,
            _pad: 0,
        };
        // SAFETY: u64 slice viewed as its bytes.
        let bytes = unsafe { core::slice::from_raw_parts(frames.as_ptr() as *const u8, n * 8) };
        if st.writer.write(st.tid, tag::STACK, &def, bytes) {
            STACK_SEEN.insert(id, id);
        }
    }
    id
}

pub(crate) fn intern(st: &mut ThreadState, name: *const c_char) -> u64 {
    let bytes: &[u8] = if name.is_null() {
        b"(null)"
    } else {
        // SAFETY: the API takes NUL-terminated names.
        unsafe { CStr::from_ptr(name) }.to_bytes()
    };
    let bytes = &bytes[..bytes.len().min(raw::MAX_STRING)];
    let id = raw::fnv1a(bytes) | 1;
    let seen = &STRING_SEEN[(id as usize >> 1) & (STRING_SEEN.len() - 1)];
    if seen.load(Ordering::Relaxed) != id {
        let def = raw::StringDef {
            id,
            len: bytes.len() as u32,
            _pad: 0,
        };
        if st.writer.write(st.tid, tag::STRING, &def, bytes) {
            seen.store(id, Ordering::Relaxed);
        }
    }
    id
}

/// Records an allocation; `entry` is the frame of the hook that made it (see
/// [`capture_stack`]).
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn record_alloc(
    st: &mut ThreadState,
    ptr: u64,
    size: u64,
    usable: u64,
    kind: u8,
    flags: u8,
    group: u64,
    entry: u64,
) {
    let saved = errno();
    let stack = if flags & (alloc_flags::EXACT | alloc_flags::SAMPLED) != 0 {
        capture_stack(st, entry)
    } else {
        0
    };
    if !track::add(ptr) {
        if let Some(h) = log::header() {
            h.untracked_allocs.fetch_add(1, Ordering::Relaxed);
        }
    }
    let ev = raw::Alloc {
        time: st.clock.now(),
        ptr,
        size,
        usable,
        stack,
        group,
        kind,
        flags,
        _pad: [0; 6],
    };
    st.writer.write_alloc(st.tid, &ev);
    set_errno(saved);
}

/// The thread's exact totals, from its own counters.
pub(crate) fn record_thread_totals(st: &mut ThreadState) {
    let mut ev = raw::ThreadTotals {
        time: st.clock.now(),
        tid: st.tid as u64,
        access: st.access.exact_counts(),
        sorts: st.sorts,
        ..Default::default()
    };
    // SAFETY: points into the mapped header, or is null.
    if let (false, Some(c)) = (st.shared_counters, unsafe { st.counters.as_ref() }) {
        ev.alloc_bytes = c.alloc_bytes.load(Ordering::Relaxed);
        ev.free_bytes = c.free_bytes.load(Ordering::Relaxed);
        ev.allocs = c.allocs.load(Ordering::Relaxed);
        ev.frees = c.frees.load(Ordering::Relaxed);
        ev.own_alloc_counters = 1;
    }
    st.writer.write(st.tid, tag::THREAD_TOTALS, &ev, &[]);
}

pub(crate) fn record_thread_exit(st: &mut ThreadState) {
    let ev = raw::ThreadEvent {
        time: st.clock.now(),
        tid: st.tid as u64,
        ..Default::default()
    };
    st.writer.write(st.tid, tag::THREAD_EXIT, &ev, &[]);
}

/// The thread's stack becomes a data object from its first event on.
pub(crate) fn record_thread_start(st: &mut ThreadState) {
    let ev = raw::ThreadEvent {
        time: st.clock.now(),
        tid: st.tid as u64,
        stack_lo: st.stack_lo,
        stack_hi: st.stack_hi,
    };
    st.writer.write(st.tid, tag::THREAD_START, &ev, &[]);
}

/// Records the loaded objects through the thread's writer.
pub(crate) fn record_modules(st: &mut ThreadState) {
    let tid = st.tid;
    let w = &mut st.writer;
    modules::scan(&mut |m, path| {
        w.write(tid, tag::MODULE, m, path);
    });
}

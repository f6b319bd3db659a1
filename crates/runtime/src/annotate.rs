//! The annotation API of `include/memlens.h`: regions, tags, groups.

use crate::events::intern;
use crate::guard::{enter, leave};
use crate::stage::{READY, STATE};
use crate::sys::{errno, set_errno};
use crate::{access, thread};
use core::ffi::{c_char, c_int, c_void};
use core::sync::atomic::Ordering;
use memlens_rawlog::{self as raw, tag};

/// Region begin/end carry the thread's exact access counts at that instant,
/// with those of the OpenMP teams it forked (see `openmp`), so the bytes a
/// region moved are exact differences. A phase's carry every
/// thread's of the process: the caller's exact, the others' as they last
/// published them (at most `PUBLISH_EVERY` accesses of a class behind).
/// Both carry the process's live heap then (usable bytes, 8 bytes after the
/// mark): a region's heap growth is exact however few blocks are recorded;
/// (8 bytes more) the bytes its OpenMP teams read and wrote so far, of
/// which the counts hold the region's share; and (8 more) the nanoseconds
/// the thread spent in the access slow path so far: what of a region's time
/// was memlens' sampling code.
fn record_region(tag: u16, name: *const c_char) {
    if let Some(st) = enter() {
        let saved = errno();
        let id = intern(st, name);
        let header = crate::log::header();
        let counts = match (tag, header) {
            (tag::PHASE_BEGIN | tag::PHASE_END, Some(header)) => {
                access::publish(st);
                header.access_totals()
            }
            _ => crate::openmp::counts_with_teams(st),
        };
        let ev = raw::RegionMark {
            time: st.clock.now(),
            name: id,
            counts,
        };
        let (read, written, ..) = raw::AccessCounters::traffic(&crate::openmp::team_counts(st));
        let mut trailing = [0u8; 24];
        let heap = header.map(|h| h.heap_live());
        trailing[..8].copy_from_slice(&heap.unwrap_or(0).to_le_bytes());
        trailing[8..16].copy_from_slice(&read.wrapping_add(written).to_le_bytes());
        trailing[16..].copy_from_slice(&st.access.slow_ns.to_le_bytes());
        let trailing = if heap.is_some() {
            &trailing[..]
        } else {
            &[][..]
        };
        st.writer.write(st.tid, tag, &ev, trailing);
        set_errno(saved);
        leave(st);
    }
}

/// Starts a named region on the calling thread; regions nest.
///
/// # Safety
/// `name` is NUL-terminated or null.
#[no_mangle]
pub unsafe extern "C" fn memlens_region_begin(name: *const c_char) {
    record_region(tag::REGION_BEGIN, name);
}

/// Ends the innermost region of that name on the calling thread.
///
/// # Safety
/// `name` is NUL-terminated or null.
#[no_mangle]
pub unsafe extern "C" fn memlens_region_end(name: *const c_char) {
    record_region(tag::REGION_END, name);
}

/// Starts a named phase of the whole process (every thread's accesses count,
/// whichever thread marks it); phases nest.
///
/// # Safety
/// `name` is NUL-terminated or null.
#[no_mangle]
pub unsafe extern "C" fn memlens_phase_begin(name: *const c_char) {
    record_region(tag::PHASE_BEGIN, name);
}

/// Ends the innermost phase of that name, from any thread.
///
/// # Safety
/// `name` is NUL-terminated or null.
#[no_mangle]
pub unsafe extern "C" fn memlens_phase_end(name: *const c_char) {
    record_region(tag::PHASE_END, name);
}

/// Names the address range [start, start+len) as a data object.
///
/// # Safety
/// `name` is NUL-terminated or null.
#[no_mangle]
pub unsafe extern "C" fn memlens_tag(name: *const c_char, start: *const c_void, len: usize) {
    if let Some(st) = enter() {
        let saved = errno();
        let id = intern(st, name);
        let ev = raw::Tag {
            time: st.clock.now(),
            name: id,
            start: start as u64,
            len: len as u64,
        };
        st.writer.write(st.tid, tag::TAG, &ev, &[]);
        set_errno(saved);
        leave(st);
    }
}

/// Ends the tag that starts at `start`.
///
/// # Safety
/// None beyond the C ABI.
#[no_mangle]
pub unsafe extern "C" fn memlens_untag(start: *const c_void) {
    if let Some(st) = enter() {
        let ev = raw::Untag {
            time: st.clock.now(),
            start: start as u64,
        };
        st.writer.write(st.tid, tag::UNTAG, &ev, &[]);
        leave(st);
    }
}

/// Until the matching `memlens_group_end`, every allocation of the calling thread,
/// whatever its size, belongs to the synthetic object `name`.
///
/// # Safety
/// `name` is NUL-terminated or null.
#[no_mangle]
pub unsafe extern "C" fn memlens_group_begin(name: *const c_char) {
    if let Some(st) = enter() {
        let saved = errno();
        let id = intern(st, name);
        if st.group_depth < thread::MAX_GROUP_DEPTH {
            st.groups[st.group_depth] = id;
        }
        st.group_depth += 1;
        st.refresh_fast_path();
        let ev = raw::Named {
            time: st.clock.now(),
            name: id,
        };
        st.writer.write(st.tid, tag::GROUP_BEGIN, &ev, &[]);
        set_errno(saved);
        leave(st);
    }
}

/// Ends the innermost group of the calling thread.
///
/// # Safety
/// None beyond the C ABI.
#[no_mangle]
pub unsafe extern "C" fn memlens_group_end() {
    if let Some(st) = enter() {
        if st.group_depth > 0 {
            st.group_depth -= 1;
            st.refresh_fast_path();
            let name = st.groups[st.group_depth.min(thread::MAX_GROUP_DEPTH - 1)];
            let ev = raw::Named {
                time: st.clock.now(),
                name,
            };
            st.writer.write(st.tid, tag::GROUP_END, &ev, &[]);
        }
        leave(st);
    }
}

/// 1 when the runtime is loaded and recording.
#[no_mangle]
pub extern "C" fn memlens_active() -> c_int {
    (STATE.load(Ordering::Acquire) == READY) as c_int
}

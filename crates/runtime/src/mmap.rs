//! mmap, munmap and mremap, interposed: every mapping is a recorded event.

use crate::events::capture_stack;
use crate::guard::{enter, leave};
use crate::sys;
use crate::sys::{errno, set_errno};
use core::ffi::{c_int, c_void};
use memlens_rawlog::{self as raw, tag};

/// Records the payload `make` builds from the event's time and call stack.
fn record_mapping_event<P: raw::Payload>(tag: u16, make: impl FnOnce(u64, u64) -> P) {
    if let Some(st) = enter() {
        let saved = errno();
        let stack = if tag == raw::tag::MMAP {
            capture_stack(st, crate::unwind::frame_address())
        } else {
            0
        };
        let ev = make(st.clock.now(), stack);
        st.writer.write(st.tid, tag, &ev, &[]);
        set_errno(saved);
        leave(st);
    }
}

/// # Safety
/// mmap(2) contract.
#[no_mangle]
pub unsafe extern "C" fn mmap(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: i64,
) -> *mut c_void {
    let p = sys::mmap(addr, len, prot, flags, fd, off);
    if p != libc::MAP_FAILED {
        record_mapping_event(tag::MMAP, |time, stack| raw::Mmap {
            time,
            addr: p as u64,
            len: len as u64,
            stack,
            prot,
            flags,
            fd,
            _pad: 0,
        });
    }
    p
}

/// # Safety
/// mmap(2) contract.
#[no_mangle]
pub unsafe extern "C" fn mmap64(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: i64,
) -> *mut c_void {
    mmap(addr, len, prot, flags, fd, off)
}

/// # Safety
/// munmap(2) contract.
#[no_mangle]
pub unsafe extern "C" fn munmap(addr: *mut c_void, len: usize) -> c_int {
    let r = sys::munmap(addr, len);
    if r == 0 {
        record_mapping_event(tag::MUNMAP, |time, _| raw::Munmap {
            time,
            addr: addr as u64,
            len: len as u64,
        });
    }
    r
}

/// mremap is variadic in C; the optional fifth argument arrives in the same
/// register as a fixed one on x86_64 and aarch64.
///
/// # Safety
/// mremap(2) contract.
#[no_mangle]
pub unsafe extern "C" fn mremap(
    old: *mut c_void,
    old_len: usize,
    new_len: usize,
    flags: c_int,
    new_addr: *mut c_void,
) -> *mut c_void {
    let p = sys::mremap(old, old_len, new_len, flags, new_addr);
    if p != libc::MAP_FAILED {
        record_mapping_event(tag::MREMAP, |time, _| raw::Mremap {
            time,
            old_addr: old as u64,
            old_len: old_len as u64,
            new_addr: p as u64,
            new_len: new_len as u64,
        });
    }
    p
}

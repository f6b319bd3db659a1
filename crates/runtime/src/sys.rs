//! Raw system calls. The runtime exports `mmap`/`munmap` itself, so calling libc's
//! would re-enter our own hooks; every mapping it needs goes through here. Its
//! file I/O goes through here too: glibc's `open`, `read`, `pwrite` and `close`
//! are cancellation points, and a thread with a `pthread_cancel` pending must
//! not be cancelled inside a malloc that writes a log block (glibc's
//! `syscall` is no cancellation point). The C library's own definitions of
//! what the runtime interposes are found here too.

use core::ffi::{c_int, c_void, CStr};
use core::sync::atomic::{AtomicU64, Ordering};

pub unsafe fn mmap(
    addr: *mut c_void,
    len: usize,
    prot: i32,
    flags: i32,
    fd: i32,
    off: i64,
) -> *mut c_void {
    libc::syscall(libc::SYS_mmap, addr, len, prot, flags, fd, off) as *mut c_void
}

pub unsafe fn munmap(addr: *mut c_void, len: usize) -> i32 {
    libc::syscall(libc::SYS_munmap, addr, len) as i32
}

pub unsafe fn mremap(
    old: *mut c_void,
    old_len: usize,
    new_len: usize,
    flags: i32,
    new_addr: *mut c_void,
) -> *mut c_void {
    libc::syscall(libc::SYS_mremap, old, old_len, new_len, flags, new_addr) as *mut c_void
}

pub unsafe fn open(path: *const libc::c_char, flags: i32, mode: libc::mode_t) -> i32 {
    libc::syscall(libc::SYS_openat, libc::AT_FDCWD, path, flags, mode) as i32
}

pub unsafe fn read(fd: i32, buf: *mut c_void, len: usize) -> isize {
    libc::syscall(libc::SYS_read, fd, buf, len) as isize
}

pub unsafe fn pwrite(fd: i32, buf: *const c_void, len: usize, off: i64) -> isize {
    libc::syscall(libc::SYS_pwrite64, fd, buf, len, off) as isize
}

pub unsafe fn pwritev(fd: i32, iov: *const libc::iovec, count: i32, off: i64) -> isize {
    // The kernel takes the offset in two halves (low, high) on every ABI.
    libc::syscall(libc::SYS_pwritev, fd, iov, count, off, 0) as isize
}

pub unsafe fn close(fd: i32) -> i32 {
    libc::syscall(libc::SYS_close, fd) as i32
}

/// Anonymous private memory for the runtime's own structures (never the hooked malloc).
pub fn alloc_pages(len: usize) -> *mut u8 {
    // SAFETY: anonymous mapping with no address hint.
    let p = unsafe {
        mmap(
            core::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        core::ptr::null_mut()
    } else {
        p as *mut u8
    }
}

pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub fn gettid() -> u32 {
    // SAFETY: no arguments.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

pub fn getpid() -> u32 {
    // SAFETY: no arguments.
    unsafe { libc::getpid() as u32 }
}

/// Reads a whole small file (a /proc entry) into `buf`; returns the bytes read.
pub fn read_file(path: &core::ffi::CStr, buf: &mut [u8]) -> usize {
    // SAFETY: NUL-terminated path, buffer bounds respected.
    unsafe {
        let fd = open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC, 0);
        if fd < 0 {
            return 0;
        }
        let mut total = 0;
        while total < buf.len() {
            let n = read(
                fd,
                buf[total..].as_mut_ptr() as *mut c_void,
                buf.len() - total,
            );
            if n <= 0 {
                break;
            }
            total += n as usize;
        }
        close(fd);
        total
    }
}

/// Calls `f` with each line of a text file (a /proc entry) until it returns
/// false, reading through a buffer on the stack: no allocation. A line longer
/// than the buffer is handed over cut to the buffer's length.
pub fn for_each_line(path: &core::ffi::CStr, f: &mut dyn FnMut(&[u8]) -> bool) {
    let mut buf = [0u8; 8192];
    // SAFETY: NUL-terminated path; reads stay inside the buffer.
    unsafe {
        let fd = open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC, 0);
        if fd < 0 {
            return;
        }
        let (mut held, mut skipping) = (0usize, false);
        loop {
            let n = read(
                fd,
                buf[held..].as_mut_ptr() as *mut c_void,
                buf.len() - held,
            );
            if n <= 0 {
                if held > 0 && !skipping {
                    f(&buf[..held]);
                }
                break;
            }
            let end = held + n as usize;
            let mut start = 0;
            let mut go_on = true;
            while let Some(nl) = buf[start..end].iter().position(|&c| c == b'\n') {
                if !skipping && !f(&buf[start..start + nl]) {
                    go_on = false;
                    break;
                }
                skipping = false;
                start += nl + 1;
            }
            if !go_on {
                break;
            }
            held = end - start;
            buf.copy_within(start..end, 0);
            if held == buf.len() {
                // No end of line in a whole buffer: hand over what fits.
                if !skipping && !f(&buf[..held]) {
                    break;
                }
                (held, skipping) = (0, true);
            }
        }
        close(fd);
    }
}

/// The `FROM-TO` hexadecimal address range a /proc/PID/maps line starts with.
pub fn parse_range(line: &[u8]) -> Option<(u64, u64)> {
    let hex = |s: &[u8]| -> Option<u64> {
        let mut v = 0u64;
        for &c in s {
            v = v.checked_mul(16)? + (c as char).to_digit(16)? as u64;
        }
        (!s.is_empty()).then_some(v)
    };
    let range = line.split(|&c| c == b' ').next()?;
    let dash = range.iter().position(|&c| c == b'-')?;
    Some((hex(&range[..dash])?, hex(&range[dash + 1..])?))
}

/// A spin lock for the runtime's rare slow paths. It never allocates, and the
/// fork handlers take and release every one of them.
pub struct SpinLock(core::sync::atomic::AtomicBool);

impl SpinLock {
    pub const fn new() -> Self {
        SpinLock(core::sync::atomic::AtomicBool::new(false))
    }

    pub fn lock(&self) {
        use core::sync::atomic::Ordering;
        let mut spins = 0u32;
        while self
            .0
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spins += 1;
            if spins > 64 {
                // SAFETY: plain syscall.
                unsafe { libc::sched_yield() };
            } else {
                core::hint::spin_loop();
            }
        }
    }

    pub fn unlock(&self) {
        self.0.store(false, core::sync::atomic::Ordering::Release);
    }
}

pub(crate) fn errno() -> c_int {
    // SAFETY: errno location is always valid for the calling thread.
    unsafe { *libc::__errno_location() }
}

pub(crate) fn set_errno(v: c_int) {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = v };
}

/// The definition of `name` that this runtime interposes, looked up once.
pub(crate) unsafe fn next_definition(cache: &AtomicU64, name: &CStr) -> u64 {
    let mut real = cache.load(Ordering::Acquire);
    if real == 0 {
        real = libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) as u64;
        cache.store(real, Ordering::Release);
    }
    real
}

static REAL_GETATTR: AtomicU64 = AtomicU64::new(0);

/// glibc's `pthread_getattr_np`, which the runtime asks for a thread's stack.
pub(crate) unsafe fn real_pthread_getattr_np(
    thread: libc::pthread_t,
    attr: *mut libc::pthread_attr_t,
) -> c_int {
    let real = next_definition(&REAL_GETATTR, c"pthread_getattr_np");
    if real == 0 {
        return libc::ENOSYS;
    }
    let f: unsafe extern "C" fn(libc::pthread_t, *mut libc::pthread_attr_t) -> c_int =
        core::mem::transmute(real as usize);
    f(thread, attr)
}

//! Raw system calls. The runtime exports `mmap`/`munmap` itself, so calling libc's
//! would re-enter our own hooks; every mapping it needs goes through here.

use core::ffi::c_void;

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
        let fd = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return 0;
        }
        let mut total = 0;
        while total < buf.len() {
            let n = libc::read(
                fd,
                buf[total..].as_mut_ptr() as *mut c_void,
                buf.len() - total,
            );
            if n <= 0 {
                break;
            }
            total += n as usize;
        }
        libc::close(fd);
        total
    }
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

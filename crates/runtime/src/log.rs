//! The process's raw log file: header with live counters, plus per-thread blocks.

use crate::sys;
use core::ffi::c_void;
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, Ordering};
use memlens_rawlog::{self as raw, BlockHeader, FileHeader};

static LOG_FD: AtomicI32 = AtomicI32::new(-1);
static HEADER: AtomicPtr<FileHeader> = AtomicPtr::new(core::ptr::null_mut());
/// Set once the disk refused a block: later events are counted as dropped.
static LOG_FULL: AtomicBool = AtomicBool::new(false);

pub fn header() -> Option<&'static FileHeader> {
    // SAFETY: set once to a mapping that is never unmapped.
    unsafe { HEADER.load(Ordering::Acquire).as_ref() }
}

pub fn count_dropped() {
    if let Some(h) = header() {
        h.dropped_events.fetch_add(1, Ordering::Relaxed);
    }
}

/// Creates `dir/raw/<pid>.<seq>.mlraw`, the first free sequence number for this pid
/// (an exec'd image gets the next one), and maps its header.
///
/// # Safety
/// Called from init or the fork child handler only, with `dir` NUL-terminated.
pub unsafe fn open(
    dir: &[u8],
    pid: u32,
    ppid: u32,
    rank: i32,
    settings: raw::RuntimeSettings,
) -> bool {
    let mut path = [0u8; 4200];
    let mut seq = 0u32;
    let fd = loop {
        let Some(len) = format_path(&mut path, dir, pid, seq) else {
            return false;
        };
        path[len] = 0;
        let fd = libc::open(
            path.as_ptr() as *const libc::c_char,
            libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
            0o644,
        );
        if fd >= 0 {
            break fd;
        }
        if *libc::__errno_location() != libc::EEXIST || seq > 10_000 {
            return false;
        }
        seq += 1;
    };
    if libc::fallocate(fd, 0, 0, raw::HEADER_SIZE as i64) != 0
        && libc::ftruncate(fd, raw::HEADER_SIZE as i64) != 0
    {
        libc::close(fd);
        return false;
    }
    let p = sys::mmap(
        core::ptr::null_mut(),
        raw::HEADER_SIZE,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_SHARED,
        fd,
        0,
    );
    if p == libc::MAP_FAILED {
        libc::close(fd);
        return false;
    }
    let h = p as *mut FileHeader;
    (*h).version = raw::VERSION;
    (*h).pid = pid;
    (*h).ppid = ppid;
    (*h).rank = rank;
    (*h).exec_seq = seq;
    (*h).start_ns = sys::now_ns();
    (*h).settings = settings;
    (*h).reserve_cursor
        .store(raw::HEADER_SIZE as u64, Ordering::Relaxed);
    // The magic goes last: a reader that sees it sees a complete header.
    core::ptr::write_volatile(&mut (*h).magic, raw::MAGIC);
    LOG_FD.store(fd, Ordering::Release);
    HEADER.store(h, Ordering::Release);
    LOG_FULL.store(false, Ordering::Release);
    true
}

fn format_path(out: &mut [u8], dir: &[u8], pid: u32, seq: u32) -> Option<usize> {
    let mut w = ByteWriter { buf: out, len: 0 };
    w.push(dir)?;
    w.push(b"/raw/")?;
    w.push_u64(pid as u64)?;
    w.push(b".")?;
    w.push_u64(seq as u64)?;
    w.push(b".mlraw")?;
    Some(w.len)
}

/// Appends bytes and decimal numbers into a fixed buffer (no allocation).
pub struct ByteWriter<'a> {
    pub buf: &'a mut [u8],
    pub len: usize,
}

impl ByteWriter<'_> {
    pub fn push(&mut self, bytes: &[u8]) -> Option<()> {
        let end = self.len + bytes.len();
        // Keep one byte for a terminating NUL.
        if end >= self.buf.len() {
            return None;
        }
        self.buf[self.len..end].copy_from_slice(bytes);
        self.len = end;
        Some(())
    }

    pub fn push_u64(&mut self, mut v: u64) -> Option<()> {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.push(&digits[i..])
    }
}

/// One thread's current block, or the shared block of threads past their exit.
pub struct Writer {
    block: *mut u8,
    used: usize,
}

impl Writer {
    pub const fn new() -> Self {
        Writer {
            block: core::ptr::null_mut(),
            used: 0,
        }
    }

    /// Appends one record; returns false (and counts a drop) if it cannot.
    pub fn write<P: raw::Payload>(
        &mut self,
        tid: u32,
        tag: u16,
        payload: &P,
        extra: &[u8],
    ) -> bool {
        for _ in 0..2 {
            if self.block.is_null() && !self.next_block(tid) {
                count_dropped();
                return false;
            }
            // SAFETY: the block is mapped for BLOCK_SIZE bytes and `used` < capacity.
            unsafe {
                let dst = self.block.add(raw::BLOCK_HEADER_SIZE + self.used);
                if let Some(n) =
                    raw::encode(dst, raw::BLOCK_CAPACITY - self.used, tag, payload, extra)
                {
                    self.used += n;
                    (*(self.block as *const BlockHeader))
                        .used
                        .store(self.used as u64, Ordering::Release);
                    return true;
                }
            }
            self.release();
        }
        count_dropped();
        false
    }

    fn next_block(&mut self, tid: u32) -> bool {
        let (Some(h), fd) = (header(), LOG_FD.load(Ordering::Acquire)) else {
            return false;
        };
        if LOG_FULL.load(Ordering::Relaxed) {
            return false;
        }
        let off = h
            .reserve_cursor
            .fetch_add(raw::BLOCK_SIZE as u64, Ordering::Relaxed);
        // SAFETY: plain syscalls on our own descriptor; a failed fallocate means the
        // disk is full, and writing through a mapping then would raise SIGBUS.
        unsafe {
            if libc::fallocate(fd, 0, off as i64, raw::BLOCK_SIZE as i64) != 0 {
                LOG_FULL.store(true, Ordering::Relaxed);
                return false;
            }
            let p = sys::mmap(
                core::ptr::null_mut(),
                raw::BLOCK_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                off as i64,
            );
            if p == libc::MAP_FAILED {
                return false;
            }
            let b = p as *mut BlockHeader;
            (*b).tid = tid;
            (*b).used.store(0, Ordering::Relaxed);
            core::ptr::write_volatile(&mut (*b).magic, raw::BLOCK_MAGIC);
            self.block = p as *mut u8;
        }
        self.used = 0;
        true
    }

    /// Unmaps the current block; its published records stay in the file.
    pub fn release(&mut self) {
        if !self.block.is_null() {
            // SAFETY: we mapped exactly this range.
            unsafe { sys::munmap(self.block as *mut c_void, raw::BLOCK_SIZE) };
        }
        self.block = core::ptr::null_mut();
        self.used = 0;
    }
}

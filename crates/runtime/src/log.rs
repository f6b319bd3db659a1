//! The process's raw log file: header with live counters, plus per-thread blocks.

use crate::sys;
use core::ffi::c_void;
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU64, Ordering};
use memlens_rawlog::{self as raw, BlockHeader, FileHeader};

static LOG_FD: AtomicI32 = AtomicI32::new(-1);
/// The log file's identity and path: the program may close the descriptor (or
/// put its own file under that number), so it is checked before each use and
/// reopened by path if it is no longer the log.
static LOG_DEV: AtomicU64 = AtomicU64::new(0);
static LOG_INO: AtomicU64 = AtomicU64::new(0);
static mut LOG_PATH: [u8; PATH_MAX] = [0; PATH_MAX];
static REOPEN_LOCK: sys::SpinLock = sys::SpinLock::new();
const PATH_MAX: usize = 4200;
/// Linux 5.14's madvise advice (not yet in every libc crate version).
const MADV_POPULATE_WRITE: i32 = 23;
static HEADER: AtomicPtr<FileHeader> = AtomicPtr::new(core::ptr::null_mut());
/// Set once no block can be had (the disk refused one, or the log is gone):
/// later events are counted as dropped.
static LOG_FULL: AtomicBool = AtomicBool::new(false);

pub fn header() -> Option<&'static FileHeader> {
    // SAFETY: set once to a mapping that is never unmapped.
    unsafe { HEADER.load(Ordering::Acquire).as_ref() }
}

/// Marks a fault of this process's log (bits of `memlens_rawlog::fault`).
pub fn set_fault(bit: u32) {
    if let Some(h) = header() {
        h.faults.fetch_or(bit, Ordering::Relaxed);
    }
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
    let path = &mut *core::ptr::addr_of_mut!(LOG_PATH);
    let mut seq = 0u32;
    let fd = loop {
        let Some(len) = format_path(path, dir, pid, seq) else {
            return false;
        };
        path[len] = 0;
        let fd = sys::open(
            path.as_ptr() as *const libc::c_char,
            libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            0o600,
        );
        if fd >= 0 {
            break fd;
        }
        if *libc::__errno_location() != libc::EEXIST || seq > 10_000 {
            return false;
        }
        seq += 1;
    };
    let fd = move_high(fd);
    let mut st: libc::stat = core::mem::zeroed();
    if !reserve(fd, 0, raw::HEADER_SIZE) || libc::fstat(fd, &mut st) != 0 {
        sys::close(fd);
        return false;
    }
    LOG_DEV.store(st.st_dev, Ordering::Relaxed);
    LOG_INO.store(st.st_ino, Ordering::Relaxed);
    let p = sys::mmap(
        core::ptr::null_mut(),
        raw::HEADER_SIZE,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_SHARED,
        fd,
        0,
    );
    if p == libc::MAP_FAILED {
        sys::close(fd);
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

/// Closes the log descriptor a forked child inherited (it gets a log of its own).
pub fn close_inherited() {
    let fd = LOG_FD.swap(-1, Ordering::AcqRel);
    if is_log(fd) {
        // SAFETY: our own descriptor, checked to still be the log.
        unsafe { sys::close(fd) };
    }
}

/// Moves a descriptor of the runtime's to a high number, so that the program's
/// own files get the numbers they would get without memlens, and a program
/// that closes "every" low descriptor seldom hits it.
unsafe fn move_high(fd: i32) -> i32 {
    let mut limit: libc::rlimit = core::mem::zeroed();
    let soft = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
        limit.rlim_cur.min(1024) as i32
    } else {
        256
    };
    let high = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, (soft - 100).max(10));
    if high < 0 {
        return fd;
    }
    sys::close(fd);
    high
}

/// A block the collector made ready, past block `after` (a writer's blocks
/// stay in file order, which readers take for time order); the ready blocks
/// before it are left to no one.
fn take_ready(h: &FileHeader, after: Option<u64>) -> Option<u64> {
    let mut v = h.ready_blocks.load(Ordering::Acquire);
    loop {
        let (next, end) = raw::unpack_ready(v);
        let take = match after {
            Some(last) => u64::from(next).max(last + 1),
            None => u64::from(next),
        };
        // Offered blocks were reserved through the cursor: one past it is no
        // block (a header the program scribbled on), and mapping it would
        // fault past the file's end.
        let reserved = h.reserve_cursor.load(Ordering::Relaxed);
        if take >= u64::from(end) || raw::block_offset(take) + raw::BLOCK_SIZE as u64 > reserved {
            return None;
        }
        let taken = raw::pack_ready(take as u32 + 1, end);
        match (h.ready_blocks).compare_exchange_weak(v, taken, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => {
                h.ready_taken.fetch_add(1, Ordering::Relaxed);
                return Some(take);
            }
            Err(now) => v = now,
        }
    }
}

/// Gives the file real blocks for [off, off+len) so that writing through a
/// mapping of them cannot raise SIGBUS on a full disk. False if the disk
/// refused. Zeros are written rather than fallocated: written pages are in the
/// page cache already, where the first touch of an fallocated range reads
/// (zero-fills, with readahead) every page through a fault, which cost half
/// of every-block recording.
unsafe fn reserve(fd: i32, off: u64, len: usize) -> bool {
    static ZEROS: [u8; 4096] = [0; 4096];
    const CHUNKS: usize = 16;
    let iov = [libc::iovec {
        iov_base: ZEROS.as_ptr() as *mut c_void,
        iov_len: ZEROS.len(),
    }; CHUNKS];
    let mut done = 0;
    while done < len {
        let chunks = (len - done).div_ceil(ZEROS.len()).min(CHUNKS);
        let mut n = chunks * ZEROS.len();
        let mut iov = iov;
        if n > len - done {
            iov[chunks - 1].iov_len -= n - (len - done);
            n = len - done;
        }
        let w = sys::pwritev(
            fd,
            iov.as_ptr(),
            chunks as i32,
            (off as usize + done) as i64,
        );
        if w <= 0 {
            return false;
        }
        done += (w as usize).min(n);
    }
    true
}

/// Writes `len` bytes at `off` whatever short writes the kernel makes; false
/// on an error (a full disk).
unsafe fn write_all(fd: i32, mut bytes: *const u8, mut len: usize, mut off: u64) -> bool {
    while len > 0 {
        let w = sys::pwrite(fd, bytes as *const c_void, len, off as i64);
        if w < 0 && crate::sys::errno() == libc::EINTR {
            continue;
        }
        if w <= 0 {
            return false;
        }
        let w = (w as usize).min(len);
        (bytes, len, off) = (bytes.add(w), len - w, off + w as u64);
    }
    true
}

/// The log's descriptor, reopened by path if the program closed it or put
/// another file under its number; -1 (and the fault marked) if the log is gone.
fn log_fd() -> i32 {
    let fd = LOG_FD.load(Ordering::Acquire);
    if is_log(fd) {
        return fd;
    }
    REOPEN_LOCK.lock();
    let mut fd = LOG_FD.load(Ordering::Acquire);
    if !is_log(fd) {
        // The old number is the program's now (or free): never close it.
        // SAFETY: LOG_PATH was NUL-terminated by open() and is not written after.
        fd = unsafe {
            let path = core::ptr::addr_of!(LOG_PATH) as *const libc::c_char;
            let new = sys::open(path, libc::O_RDWR | libc::O_CLOEXEC, 0);
            if new >= 0 && !is_log(new) {
                sys::close(new);
                -1
            } else if new >= 0 {
                move_high(new)
            } else {
                -1
            }
        };
        if fd < 0 {
            set_fault(raw::fault::LOG_LOST);
            LOG_FULL.store(true, Ordering::Relaxed);
        }
        LOG_FD.store(fd, Ordering::Release);
    }
    REOPEN_LOCK.unlock();
    fd
}

fn is_log(fd: i32) -> bool {
    if fd < 0 {
        return false;
    }
    // SAFETY: fstat into a local struct.
    unsafe {
        let mut st: libc::stat = core::mem::zeroed();
        libc::fstat(fd, &mut st) == 0
            && st.st_ino == LOG_INO.load(Ordering::Relaxed)
            && st.st_dev == LOG_DEV.load(Ordering::Relaxed)
    }
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

/// The log's header and descriptor, if the log still takes blocks.
fn writable_log() -> Option<(&'static FileHeader, i32)> {
    let h = header()?;
    if LOG_FULL.load(Ordering::Relaxed) {
        return None;
    }
    let fd = log_fd();
    (fd >= 0).then_some((h, fd))
}

/// One thread's staging block, or the shared one of threads past their exit.
///
/// Records are written into a staging block mapped once; when it is full they
/// are copied with `pwrite` to the writer's next block and the staging block
/// starts again. Mapping a fresh block of the log for each 64 KiB instead
/// cost each of its pages a write fault through the file system (ext4: 2.7 us
/// a page, `madvise(MADV_POPULATE_WRITE)` included) and an unmap: STREAM's
/// program took 8.5 ms longer under `memlens record` than with its samples
/// written to plain memory; copying costs 0.4 us a page, and the staging
/// block's lines stay in the cache.
pub struct Writer {
    block: *mut u8,
    used: usize,
    /// What the block's compact records are coded against.
    context: raw::Context,
    /// The block the staging block's records go to (see
    /// [`raw::BlockState::Staging`]).
    dest: u64,
    /// The log header and block index of the writer's last block: a block
    /// the collector made ready is taken only past it (a fork child's new log
    /// has another header).
    last: (usize, u64),
}

impl Writer {
    pub const fn new() -> Self {
        Writer {
            block: core::ptr::null_mut(),
            used: 0,
            context: raw::Context::new(),
            dest: 0,
            last: (0, 0),
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
        // They move the block's context: `write_alloc` and `write_free`.
        debug_assert!(![raw::tag::ALLOC, raw::tag::SMALL_ALLOC, raw::tag::FREE].contains(&tag));
        // SAFETY: `put` passes the writable bytes at `dst`.
        self.put(tid, |dst, cap, _| unsafe {
            raw::encode(dst, cap, tag, payload, extra)
        })
    }

    /// Appends an allocation's record, in its shortest form.
    pub fn write_alloc(&mut self, tid: u32, a: &raw::Alloc) -> bool {
        // SAFETY: as in `write`.
        self.put(tid, |dst, cap, context| unsafe {
            raw::encode_alloc(dst, cap, a, context)
        })
    }

    /// Appends a free's record, in its shortest form.
    pub fn write_free(&mut self, tid: u32, f: &raw::Free) -> bool {
        // SAFETY: as in `write`.
        self.put(tid, |dst, cap, context| unsafe {
            raw::encode_free(dst, cap, f, context)
        })
    }

    /// Appends the record `encode` writes at the given address with room
    /// for the given bytes (None if it does not fit), coded against the
    /// block's context.
    #[inline(always)]
    fn put(
        &mut self,
        tid: u32,
        mut encode: impl FnMut(*mut u8, usize, &mut raw::Context) -> Option<usize>,
    ) -> bool {
        for _ in 0..2 {
            if self.block.is_null() && !self.preserving_errno(|w| w.map_staging(tid)) {
                break;
            }
            // SAFETY: the block is mapped for BLOCK_SIZE bytes and `used` < capacity.
            let dst = unsafe { self.block.add(raw::BLOCK_HEADER_SIZE + self.used) };
            if let Some(n) = encode(dst, raw::BLOCK_CAPACITY - self.used, &mut self.context) {
                self.used += n;
                self.publish();
                return true;
            }
            if !self.preserving_errno(|w| w.flush(tid)) {
                break;
            }
        }
        count_dropped();
        false
    }

    /// Runs a step whose system calls may set errno: the program's errno is
    /// kept whatever they say (a hook of `free` writes events too).
    fn preserving_errno(&mut self, step: impl FnOnce(&mut Self) -> bool) -> bool {
        let saved = crate::sys::errno();
        let ok = step(self);
        crate::sys::set_errno(saved);
        ok
    }

    /// Publishes the staging block's records and destination in one store.
    fn publish(&self) {
        // SAFETY: the staging block is mapped.
        unsafe {
            (*(self.block as *const BlockHeader)).used.store(
                raw::pack_staged(self.dest, self.used as u64),
                Ordering::Release,
            );
        }
    }

    /// A block for this writer past its last one. A staging block (`mapped`)
    /// is one the collector made ready, else a new one at the end of the log
    /// given disk space (written zeros): writing through a mapping of a block
    /// without it would raise SIGBUS on a full disk. A destination is always a
    /// new one: `pwrite` gives it space then, or an error, and zeros written
    /// ahead of it would be written twice (and the collector's writing them
    /// held the file's lock against the program's copies).
    fn take_block(&mut self, h: &FileHeader, fd: i32, mapped: bool) -> Option<u64> {
        let header_addr = h as *const FileHeader as usize;
        let after = (self.last.0 == header_addr).then_some(self.last.1);
        let ready = if mapped { take_ready(h, after) } else { None };
        let index = match ready {
            Some(index) => index,
            None => {
                let off = h
                    .reserve_cursor
                    .fetch_add(raw::BLOCK_SIZE as u64, Ordering::Relaxed);
                // SAFETY: plain syscalls on our own descriptor.
                if mapped && !unsafe { reserve(fd, off, raw::BLOCK_SIZE) } {
                    LOG_FULL.store(true, Ordering::Relaxed);
                    set_fault(raw::fault::DISK_FULL);
                    return None;
                }
                raw::block_index(off)?
            }
        };
        self.last = (header_addr, index);
        Some(index)
    }

    /// Maps a staging block for the thread and names its first destination.
    fn map_staging(&mut self, tid: u32) -> bool {
        let Some((h, fd)) = writable_log() else {
            return false;
        };
        let Some(index) = self.take_block(h, fd, true) else {
            return false;
        };
        let Some(dest) = self.take_block(h, fd, false) else {
            return false;
        };
        // SAFETY: plain syscalls on our own descriptor, over a block with disk
        // space (written zeros, ours or the collector's).
        unsafe {
            let p = sys::mmap(
                core::ptr::null_mut(),
                raw::BLOCK_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                raw::block_offset(index) as i64,
            );
            if p == libc::MAP_FAILED {
                return false;
            }
            // Fault the whole block in, writable, with one call: page by page
            // each first write costs a read fault (with readahead) and a
            // write fault. Kernels before 5.14 refuse it and fault as before.
            libc::madvise(p, raw::BLOCK_SIZE, MADV_POPULATE_WRITE);
            self.block = p as *mut u8;
            (self.used, self.context) = (0, raw::Context::new());
            self.dest = dest;
            let b = p as *mut BlockHeader;
            (*b).tid = tid;
            self.publish();
            // The magic goes last: a reader that sees it sees the rest.
            core::ptr::write_volatile(&mut (*b).magic, raw::STAGE_MAGIC);
        }
        true
    }

    /// Copies the staging block's records to their destination, which then
    /// reads as a written block (its header written after its records), and
    /// starts the staging block again for the next destination. False, the
    /// records staying where they are, if the log cannot take them.
    fn flush(&mut self, tid: u32) -> bool {
        let Some((h, fd)) = writable_log() else {
            return false;
        };
        let at = raw::block_offset(self.dest);
        let header = BlockHeader::bytes(raw::BLOCK_MAGIC, tid, self.used as u64);
        // SAFETY: the staging block is mapped for BLOCK_SIZE bytes; plain
        // syscalls on our own descriptor.
        let copied = unsafe {
            let records = self.block.add(raw::BLOCK_HEADER_SIZE);
            write_all(fd, records, self.used, at + raw::BLOCK_HEADER_SIZE as u64)
                && write_all(fd, header.as_ptr(), header.len(), at)
        };
        if !copied {
            LOG_FULL.store(true, Ordering::Relaxed);
            set_fault(raw::fault::DISK_FULL);
            return false;
        }
        let Some(dest) = self.take_block(h, fd, false) else {
            return false;
        };
        (self.used, self.context) = (0, raw::Context::new());
        self.dest = dest;
        self.publish();
        true
    }

    /// Unmaps the staging block; its published records stay in the file,
    /// where readers take them as their destination's.
    pub fn release(&mut self) {
        if !self.block.is_null() {
            // SAFETY: we mapped exactly this range.
            unsafe { sys::munmap(self.block as *mut c_void, raw::BLOCK_SIZE) };
        }
        self.block = core::ptr::null_mut();
        (self.used, self.context) = (0, raw::Context::new());
    }
}

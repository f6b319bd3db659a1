//! The memlens runtime, loaded into the profiled program with LD_PRELOAD.
//!
//! Hand-written on purpose (no crate does this): it interposes the malloc family and
//! mmap/munmap/mremap, exports the annotation API of `include/memlens.h`, and writes
//! events to a crash-safe log (see `memlens-rawlog`). It lives inside someone else's
//! process, so it never allocates through the hooked allocator, never panics, keeps
//! errno, guards against reentrancy, and survives fork, exec and thread exit.
//!
//! Every allocation updates exact per-thread counters (live heap over time). Only
//! allocations of at least `min_size` bytes, a byte-sampled subset of the smaller
//! ones, and those inside a group carry an event with time and call stack.

mod access;
mod allocator;
mod log;
mod model;
mod modules;
mod sampler;
mod sys;
mod thread;
mod track;
mod unwind;

use core::ffi::{c_char, c_int, c_void, CStr};
use core::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use memlens_rawlog::{self as raw, access_filter, alloc_flags, alloc_kind, tag, RuntimeSettings};
use thread::ThreadState;

const UNINIT: u8 = 0;
const READY: u8 = 1;
const DISABLED: u8 = 2;
static STATE: AtomicU8 = AtomicU8::new(UNINIT);

static mut SETTINGS: RuntimeSettings = RuntimeSettings {
    min_size: DEFAULT_MIN_SIZE,
    sample_rate: DEFAULT_SAMPLE_RATE,
    max_frames: 64,
    unwinder: raw::unwinder::DWARF,
    access_period: DEFAULT_ACCESS_PERIOD,
    access_filter: access_filter::LOADS | access_filter::STORES,
    _pad: 0,
};
/// Defaults chosen by measurement: see `bench/` and the README.
pub const DEFAULT_MIN_SIZE: u64 = 64 * 1024;
pub const DEFAULT_SAMPLE_RATE: u64 = 512 * 1024;
/// One access sample per this many accesses of a class (instrumented code).
pub const DEFAULT_ACCESS_PERIOD: u64 = 4099;

static mut DIR: [u8; 4096] = [0; 4096];
static mut DIR_LEN: usize = 0;
static mut INTERVAL_MS: u64 = 10;
static mut OWN_SAMPLER: bool = false;

pub(crate) fn settings() -> &'static RuntimeSettings {
    // SAFETY: written once during init and in the fork child, read-only otherwise.
    unsafe { &*core::ptr::addr_of!(SETTINGS) }
}

/// Direct-mapped caches of ids already defined in this process's log. A collision
/// only costs a repeated definition.
static STACK_SEEN: [AtomicU64; 1 << 14] = [const { AtomicU64::new(0) }; 1 << 14];
static STRING_SEEN: [AtomicU64; 1 << 10] = [const { AtomicU64::new(0) }; 1 << 10];

/// Events of threads that already ran their exit destructors.
static ORPHAN_LOCK: sys::SpinLock = sys::SpinLock::new();
static mut ORPHAN: log::Writer = log::Writer::new();

fn with_orphan(f: impl FnOnce(&mut log::Writer)) {
    ORPHAN_LOCK.lock();
    // SAFETY: ORPHAN is only touched under ORPHAN_LOCK.
    f(unsafe { &mut *core::ptr::addr_of_mut!(ORPHAN) });
    ORPHAN_LOCK.unlock();
}

// ---------------------------------------------------------------- initialisation

#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;

#[used]
#[link_section = ".fini_array"]
static FINI: extern "C" fn() = fini;

fn env(name: &CStr) -> Option<&'static [u8]> {
    // SAFETY: getenv does not allocate; the environment outlives us.
    let p = unsafe { libc::getenv(name.as_ptr()) };
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_bytes())
}

fn mpi_rank() -> i32 {
    for var in [
        c"OMPI_COMM_WORLD_RANK",
        c"PMIX_RANK",
        c"PMI_RANK",
        c"SLURM_PROCID",
    ] {
        if let Some(n) = env(var).and_then(raw::parse_size) {
            return n.min(i32::MAX as u64) as i32;
        }
    }
    -1
}

extern "C" fn init() {
    if STATE.load(Ordering::Acquire) != UNINIT {
        return;
    }
    let saved_errno = errno();
    // SAFETY: single-threaded during constructors; statics written before READY.
    unsafe {
        if env(raw::env::DISABLE).is_some_and(|v| v == b"1") || !configure() {
            STATE.store(DISABLED, Ordering::Release);
            set_errno(saved_errno);
            return;
        }
        allocator::resolve();
        thread::init_key();
        libc::pthread_atfork(Some(fork_prepare), Some(fork_parent), Some(fork_child));
        if !open_log(libc::getppid() as u32) {
            STATE.store(DISABLED, Ordering::Release);
            set_errno(saved_errno);
            return;
        }
        STATE.store(READY, Ordering::Release);
        record_allocator_faults();
        record_modules_from_here();
        if OWN_SAMPLER {
            sampler::start(INTERVAL_MS);
        }
    }
    set_errno(saved_errno);
}

/// Reads MEMLENS_* variables. False if no profile directory can be made.
unsafe fn configure() -> bool {
    // A setuid or setgid program (or one with file capabilities) must not take
    // its caller's word on where to write: such a process records nothing.
    if libc::getauxval(libc::AT_SECURE) != 0 {
        return false;
    }
    let s = &mut *core::ptr::addr_of_mut!(SETTINGS);
    if let Some(v) = env(raw::env::MIN_SIZE).and_then(raw::parse_size) {
        s.min_size = v;
    }
    if let Some(v) = env(raw::env::SAMPLE_RATE).and_then(raw::parse_size) {
        s.sample_rate = v;
    }
    if let Some(v) = env(raw::env::MAX_FRAMES).and_then(raw::parse_size) {
        s.max_frames = v.clamp(1, raw::MAX_FRAMES as u64) as u32;
    }
    match env(raw::env::UNWIND) {
        Some(b"fp") => s.unwinder = raw::unwinder::FP,
        Some(b"none") => s.unwinder = raw::unwinder::NONE,
        Some(b"libgcc") => s.unwinder = raw::unwinder::LIBGCC,
        _ => {}
    }
    if let Some(v) = env(raw::env::PERIOD).and_then(raw::parse_size) {
        s.access_period = v;
    }
    if env(raw::env::NO_LOADS).is_some_and(|v| v == b"1") {
        s.access_filter &= !access_filter::LOADS;
    }
    if env(raw::env::NO_STORES).is_some_and(|v| v == b"1") {
        s.access_filter &= !access_filter::STORES;
    }
    if env(raw::env::SAMPLE_LINES).is_some_and(|v| v == b"1") {
        s.access_filter |= access_filter::LINES;
    }
    if let Some(spec) = env(raw::env::CACHE_MODEL) {
        model::configure(spec);
    }
    if let Some(v) = env(raw::env::INTERVAL).and_then(raw::parse_size) {
        INTERVAL_MS = v.max(1);
    }
    // Linked into a program built by `memlens cc` but run without memlens (no
    // MEMLENS_DIR, not preloaded): stay idle, the program runs as if we were absent.
    let preloaded = env(c"LD_PRELOAD").is_some_and(|v| v.windows(7).any(|w| w == b"memlens"));
    if env(raw::env::DIR).is_none() && !preloaded {
        return false;
    }
    // Under `memlens record` the collector samples /proc; alone, we do it ourselves.
    OWN_SAMPLER = env(raw::env::COLLECTOR).is_none();
    let dir = &mut *core::ptr::addr_of_mut!(DIR);
    let mut w = log::ByteWriter { buf: dir, len: 0 };
    let ok = match env(raw::env::DIR) {
        Some(d) if !d.is_empty() => w.push(d).is_some(),
        _ => default_dir(&mut w).is_some(),
    };
    if !ok {
        return false;
    }
    DIR_LEN = w.len;
    make_dirs(&mut *core::ptr::addr_of_mut!(DIR), DIR_LEN)
}

/// `memlens-<program>-<pid>` in the working directory.
fn default_dir(w: &mut log::ByteWriter) -> Option<()> {
    let mut exe = [0u8; 1024];
    // SAFETY: readlink into a local buffer.
    let n = unsafe {
        libc::readlink(
            c"/proc/self/exe".as_ptr(),
            exe.as_mut_ptr() as *mut c_char,
            exe.len(),
        )
    };
    let exe = if n > 0 {
        &exe[..n as usize]
    } else {
        b"program"
    };
    let base = exe.rsplit(|&c| c == b'/').next().unwrap_or(b"program");
    w.push(b"memlens-")?;
    w.push(base)?;
    w.push(b"-")?;
    w.push_u64(sys::getpid() as u64)
}

/// mkdir DIR and DIR/raw, private to the user (DIR must be NUL-free; the buffer
/// gets terminated here). Both must end up directories of the user's own: a
/// directory of someone else's could redirect the logs through its links.
unsafe fn make_dirs(buf: &mut [u8; 4096], len: usize) -> bool {
    buf[len] = 0;
    let mut raw_dir = [0u8; 4200];
    let mut w = log::ByteWriter {
        buf: &mut raw_dir,
        len: 0,
    };
    if w.push(&buf[..len]).is_none() || w.push(b"/raw").is_none() {
        return false;
    }
    let end = w.len;
    raw_dir[end] = 0;
    own_private_dir(buf.as_ptr() as *const c_char)
        && own_private_dir(raw_dir.as_ptr() as *const c_char)
}

/// Makes the directory (mode 0700) if it is not there; true if it is a
/// directory, not a link, owned by this user.
unsafe fn own_private_dir(path: *const c_char) -> bool {
    libc::mkdir(path, 0o700);
    let mut st: libc::stat = core::mem::zeroed();
    libc::lstat(path, &mut st) == 0
        && (st.st_mode & libc::S_IFMT) == libc::S_IFDIR
        && st.st_uid == libc::geteuid()
}

/// Says in the log when the heap cannot be followed: another allocator comes
/// before the runtime in symbol lookup (its malloc is not ours), or the one in
/// use cannot tell block sizes.
fn record_allocator_faults() {
    // SAFETY: dlsym with a NUL-terminated name.
    let first = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"malloc".as_ptr()) } as usize;
    if allocator::object_of(first) != allocator::object_of(init as *const () as usize) {
        log::set_fault(raw::fault::HEAP_NOT_HOOKED);
    }
    if !allocator::sizes_known() {
        log::set_fault(raw::fault::HEAP_SIZES_UNKNOWN);
    }
}

unsafe fn open_log(ppid: u32) -> bool {
    let dir = &(&*core::ptr::addr_of!(DIR))[..DIR_LEN];
    log::open(dir, sys::getpid(), ppid, mpi_rank(), *settings())
}

extern "C" fn fini() {
    if let Some(st) = enter() {
        let saved = errno();
        // A last capacity sample: the collector's next tick may come too late.
        // The exiting thread publishes its exact counts, then a last sample.
        access::publish(st);
        let last = sampler::snapshot();
        st.writer.write(st.tid, tag::TIMELINE, &last, &[]);
        record_thread_totals(st);
        record_exit(st, EXIT_STATUS.load(Ordering::Relaxed));
        set_errno(saved);
        leave(st);
    }
}

/// The status passed to exit(), for the fini record (-1: not known).
static EXIT_STATUS: core::sync::atomic::AtomicI32 = core::sync::atomic::AtomicI32::new(-1);
static REAL_EXIT: AtomicU64 = AtomicU64::new(0);

fn record_exit(st: &mut ThreadState, status: i32) {
    let exit = raw::ProcessExit {
        time: sys::now_ns(),
        status,
        signaled: 0,
        pid: sys::getpid() as u64,
    };
    st.writer.write(st.tid, tag::PROCESS_EXIT, &exit, &[]);
}

/// Remembers the status for the fini record: a process whose parent is not the
/// collector (a grandchild) has its exit status nowhere else.
///
/// # Safety
/// C `exit` contract.
#[no_mangle]
pub unsafe extern "C" fn exit(status: c_int) -> ! {
    EXIT_STATUS.store(status & 0xff, Ordering::Relaxed);
    let real = next_definition(&REAL_EXIT, c"exit");
    if real != 0 {
        let f: extern "C" fn(c_int) -> ! = core::mem::transmute(real as usize);
        f(status);
    }
    libc::syscall(libc::SYS_exit_group, status);
    core::hint::unreachable_unchecked()
}

/// `_exit` skips the fini handlers: record the exit here.
///
/// # Safety
/// C `_exit` contract.
#[no_mangle]
pub unsafe extern "C" fn _exit(status: c_int) -> ! {
    if let Some(st) = enter() {
        record_exit(st, status & 0xff);
        leave(st);
    }
    libc::syscall(libc::SYS_exit_group, status);
    core::hint::unreachable_unchecked()
}

/// # Safety
/// C `_Exit` contract.
#[no_mangle]
pub unsafe extern "C" fn _Exit(status: c_int) -> ! {
    _exit(status)
}

/// The definition of `name` that this runtime interposes, looked up once.
unsafe fn next_definition(cache: &AtomicU64, name: &CStr) -> u64 {
    let mut real = cache.load(Ordering::Acquire);
    if real == 0 {
        real = libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) as u64;
        cache.store(real, Ordering::Release);
    }
    real
}

static REAL_DLCLOSE: AtomicU64 = AtomicU64::new(0);

/// Unloading a library ends what the unwinder learnt about its code.
///
/// # Safety
/// C `dlclose` contract.
#[no_mangle]
pub unsafe extern "C" fn dlclose(handle: *mut c_void) -> c_int {
    let real = next_definition(&REAL_DLCLOSE, c"dlclose");
    if real == 0 {
        return -1;
    }
    let f: unsafe extern "C" fn(*mut c_void) -> c_int = core::mem::transmute(real as usize);
    let r = f(handle);
    unwind::forget_unloaded_code();
    r
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

/// glibc's `pthread_getattr_np` reallocs while it holds the thread's lock; were
/// that realloc the thread's first event, making the thread's state would ask
/// for the stack again and wait on that lock forever. So the state is made
/// first, here, before the lock is taken.
///
/// # Safety
/// C `pthread_getattr_np` contract.
#[no_mangle]
pub unsafe extern "C" fn pthread_getattr_np(
    thread: libc::pthread_t,
    attr: *mut libc::pthread_attr_t,
) -> c_int {
    if let Some(st) = enter() {
        leave(st);
    }
    real_pthread_getattr_np(thread, attr)
}

/// Records the loaded objects through the calling thread's writer.
fn record_modules_from_here() {
    if let Some(st) = enter() {
        record_modules(st);
        leave(st);
    }
}

fn record_modules(st: &mut ThreadState) {
    let tid = st.tid;
    let w = &mut st.writer;
    modules::scan(&mut |m, path| {
        w.write(tid, tag::MODULE, m, path);
    });
}

// ---------------------------------------------------------------- fork

extern "C" fn fork_prepare() {
    ORPHAN_LOCK.lock();
    track::LOCK.lock();
    modules::LOCK.lock();
}

extern "C" fn fork_parent() {
    modules::LOCK.unlock();
    track::LOCK.unlock();
    ORPHAN_LOCK.unlock();
}

/// The child gets its own log; it must never write to the parent's mappings.
extern "C" fn fork_child() {
    fork_parent();
    if STATE.load(Ordering::Acquire) != READY {
        return;
    }
    let saved = errno();
    let inherited = log::header().map(|h| h.totals());
    let st = thread::tls_get();
    if st > thread::INTERNAL {
        // SAFETY: the only thread left in the child owns this state.
        let st = unsafe { &mut *(st as *mut ThreadState) };
        st.writer.release();
        st.counters = core::ptr::null();
        st.access_counters = core::ptr::null();
    }
    with_orphan(|w| w.release());
    log::close_inherited();
    for s in STACK_SEEN.iter().chain(STRING_SEEN.iter()) {
        s.store(0, Ordering::Relaxed);
    }
    modules::reset();
    // SAFETY: the child is single-threaded here.
    unsafe {
        if !open_log(libc::getppid() as u32) {
            STATE.store(DISABLED, Ordering::Release);
            set_errno(saved);
            return;
        }
    }
    record_allocator_faults();
    // The child starts with the parent's heap: carry the live total over.
    if let (Some(h), Some((ab, fb, ac, fc))) = (log::header(), inherited) {
        h.retired.alloc_bytes.store(ab, Ordering::Relaxed);
        h.retired.free_bytes.store(fb, Ordering::Relaxed);
        h.retired.allocs.store(ac, Ordering::Relaxed);
        h.retired.frees.store(fc, Ordering::Relaxed);
    }
    if st > thread::INTERNAL {
        // SAFETY: as above.
        let st = unsafe { &mut *(st as *mut ThreadState) };
        st.tid = sys::gettid();
        (st.counters, st.access_counters, st.shared_counters) = thread::claim_slot(st.tid);
        access::reset_after_fork(st);
    }
    record_modules_from_here();
    // SAFETY: read-only after init.
    if unsafe { OWN_SAMPLER } {
        sampler::start(unsafe { INTERVAL_MS });
    }
    set_errno(saved);
}

// ---------------------------------------------------------------- hook plumbing

pub(crate) fn errno() -> c_int {
    // SAFETY: errno location is always valid for the calling thread.
    unsafe { *libc::__errno_location() }
}

pub(crate) fn set_errno(v: c_int) {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = v };
}

/// The calling thread's state with the reentrancy guard taken, or `None` when the
/// event must pass through unrecorded (not ready, nested, runtime thread, exited).
#[inline(always)]
pub(crate) fn enter() -> Option<&'static mut ThreadState> {
    if STATE.load(Ordering::Relaxed) != READY {
        return None;
    }
    let v = thread::tls_get();
    let p = match v {
        thread::NONE => {
            let p = thread::create();
            // SAFETY: a fresh state of this thread, not yet in use.
            if let Some(st) = unsafe { p.as_mut() } {
                record_thread_start(st);
            }
            p
        }
        thread::DEAD | thread::INTERNAL => return None,
        p => p as *mut ThreadState,
    };
    // SAFETY: a state is only used by its own thread.
    let st = unsafe { p.as_mut()? };
    if st.in_hook {
        return None;
    }
    st.in_hook = true;
    Some(st)
}

#[inline(always)]
pub(crate) fn leave(st: &mut ThreadState) {
    st.in_hook = false;
}

/// The thread's exact counters (its own slot, or the shared overflow one) and
/// whether they are shared; None in a fork child before it has its own.
#[inline(always)]
fn own_counters(st: &ThreadState) -> Option<(&raw::Counters, bool)> {
    // SAFETY: counters point into the mapped header, or are null.
    let c = unsafe { st.counters.as_ref() }?;
    Some((
        c,
        log::header().is_some_and(|h| core::ptr::eq(c, &h.retired)),
    ))
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
fn count(st: &ThreadState, alloc_bytes: u64, free_bytes: u64) {
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

/// Counts a captured stack under the unwinder that walked it (a
/// `raw::walked_by` code), so a profile says how much the cached rules did
/// and how much fell back to libgcc.
pub(crate) fn count_stack(st: &ThreadState, walked_by: usize) {
    if let Some((c, shared)) = own_counters(st) {
        add(&c.stacks_walked[walked_by], 1, shared);
    }
}

/// Counts for a thread that already exited (allocations in late TLS destructors).
fn count_dead(alloc_bytes: u64, free_bytes: u64) {
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

fn is_dead_thread() -> bool {
    STATE.load(Ordering::Relaxed) == READY && thread::tls_get() == thread::DEAD
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
pub(crate) fn next_sample_countdown(st: &mut ThreadState) -> i64 {
    let rate = settings().sample_rate;
    if rate == 0 {
        return i64::MAX;
    }
    let u = ((next_u64(st) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    let v = -u.ln() * rate as f64;
    (v as i64).max(1)
}

fn capture_stack(st: &mut ThreadState) -> u64 {
    let s = settings();
    let mut frames = [0u64; raw::MAX_FRAMES];
    let n = unwind::capture(st, s.unwinder, &mut frames[..s.max_frames as usize]);
    if n == 0 {
        return 0;
    }
    let frames = &frames[..n];
    let id = raw::hash_frames(frames);
    let seen = &STACK_SEEN[(id as usize >> 1) & (STACK_SEEN.len() - 1)];
    if seen.load(Ordering::Relaxed) != id {
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
            seen.store(id, Ordering::Relaxed);
        }
    }
    id
}

fn intern(st: &mut ThreadState, name: *const c_char) -> u64 {
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

/// Accounts for a new block and records an event for it if it is large, sampled
/// or grouped. `force` records it regardless (a realloc of a recorded block).
#[inline(always)]
fn on_alloc(st: &mut ThreadState, ptr: *mut c_void, size: usize, kind: u8, force: bool) {
    let usable = allocator::usable_size(ptr) as u64;
    count(st, usable, 0);
    let size = size as u64;
    let s = settings();
    let group = if st.group_depth > 0 {
        st.groups[st.group_depth - 1]
    } else {
        0
    };
    let mut flags = 0;
    if size >= s.min_size || force {
        flags = alloc_flags::EXACT;
    } else if group == 0 {
        st.countdown -= size as i64;
        if st.countdown <= 0 {
            st.countdown = next_sample_countdown(st);
            flags = alloc_flags::SAMPLED;
        }
    }
    if group != 0 {
        flags |= alloc_flags::GROUPED;
    }
    if flags != 0 {
        record_alloc(st, ptr as u64, size, usable, kind, flags, group);
    }
}

#[inline(never)]
fn record_alloc(
    st: &mut ThreadState,
    ptr: u64,
    size: u64,
    usable: u64,
    kind: u8,
    flags: u8,
    group: u64,
) {
    let saved = errno();
    let stack = if flags & (alloc_flags::EXACT | alloc_flags::SAMPLED) != 0 {
        capture_stack(st)
    } else {
        0
    };
    if !track::insert(ptr) {
        if let Some(h) = log::header() {
            h.untracked_allocs.fetch_add(1, Ordering::Relaxed);
        }
    }
    let ev = raw::Alloc {
        time: sys::now_ns(),
        ptr,
        size,
        usable,
        stack,
        group,
        kind,
        flags,
        _pad: [0; 6],
    };
    st.writer.write(st.tid, tag::ALLOC, &ev, &[]);
    set_errno(saved);
}

/// Accounts for a block about to be freed; true if it carried an event.
#[inline(always)]
fn on_free(st: &mut ThreadState, ptr: *mut c_void) -> bool {
    let usable = allocator::usable_size(ptr) as u64;
    count(st, 0, usable);
    let p = ptr as u64;
    if track::maybe_tracked(p) && track::remove(p) {
        let ev = raw::Free {
            time: sys::now_ns(),
            ptr: p,
        };
        st.writer.write(st.tid, tag::FREE, &ev, &[]);
        return true;
    }
    false
}

fn on_free_dead(ptr: *mut c_void) {
    let usable = allocator::usable_size(ptr) as u64;
    count_dead(0, usable);
    let p = ptr as u64;
    if track::maybe_tracked(p) && track::remove(p) {
        let ev = raw::Free {
            time: sys::now_ns(),
            ptr: p,
        };
        with_orphan(|w| {
            w.write(0, tag::FREE, &ev, &[]);
        });
    }
}

/// Runs an allocation function and records what it returned.
#[inline(always)]
fn hooked_alloc(size: usize, kind: u8, alloc: impl FnOnce() -> *mut c_void) -> *mut c_void {
    let Some(st) = enter() else {
        let p = alloc();
        if !p.is_null() && is_dead_thread() {
            count_dead(allocator::usable_size(p) as u64, 0);
        }
        return p;
    };
    let p = alloc();
    if !p.is_null() {
        on_alloc(st, p, size, kind, false);
    }
    leave(st);
    p
}

// ---------------------------------------------------------------- malloc family

/// # Safety
/// C allocator contract.
#[no_mangle]
pub unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
    hooked_alloc(size, alloc_kind::MALLOC, || allocator::malloc(size))
}

/// # Safety
/// C allocator contract.
#[no_mangle]
pub unsafe extern "C" fn calloc(n: usize, size: usize) -> *mut c_void {
    hooked_alloc(n.saturating_mul(size), alloc_kind::CALLOC, || {
        allocator::calloc(n, size)
    })
}

/// # Safety
/// C allocator contract.
#[no_mangle]
pub unsafe extern "C" fn free(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    match enter() {
        Some(st) => {
            on_free(st, p);
            allocator::free(p);
            leave(st);
        }
        None => {
            if is_dead_thread() {
                on_free_dead(p);
            }
            allocator::free(p);
        }
    }
}

/// # Safety
/// C allocator contract.
#[no_mangle]
pub unsafe extern "C" fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    if p.is_null() {
        return hooked_alloc(size, alloc_kind::REALLOC, || allocator::realloc(p, size));
    }
    let Some(st) = enter() else {
        if !is_dead_thread() {
            return allocator::realloc(p, size);
        }
        let old = allocator::usable_size(p) as u64;
        let q = allocator::realloc(p, size);
        if !q.is_null() || size == 0 {
            count_dead(
                if q.is_null() {
                    0
                } else {
                    allocator::usable_size(q) as u64
                },
                old,
            );
        }
        return q;
    };
    let old_usable = allocator::usable_size(p) as u64;
    let was_tracked = track::maybe_tracked(p as u64) && track::remove(p as u64);
    let q = allocator::realloc(p, size);
    if q.is_null() && size != 0 {
        // Failed: the old block is untouched.
        if was_tracked {
            track::insert(p as u64);
        }
        leave(st);
        return q;
    }
    count(st, 0, old_usable);
    if was_tracked {
        let ev = raw::Free {
            time: sys::now_ns(),
            ptr: p as u64,
        };
        st.writer.write(st.tid, tag::FREE, &ev, &[]);
    }
    if !q.is_null() {
        on_alloc(st, q, size, alloc_kind::REALLOC, was_tracked);
    }
    leave(st);
    q
}

/// # Safety
/// C allocator contract.
#[no_mangle]
pub unsafe extern "C" fn reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void {
    match n.checked_mul(size) {
        Some(total) => realloc(p, total),
        None => {
            set_errno(libc::ENOMEM);
            core::ptr::null_mut()
        }
    }
}

/// # Safety
/// C allocator contract.
#[no_mangle]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
    let saved = errno();
    let mut code = 0;
    let p = hooked_alloc(size, alloc_kind::MEMALIGN, || {
        let mut p = core::ptr::null_mut();
        code = allocator::posix_memalign(&mut p, align, size);
        p
    });
    set_errno(saved);
    if code == 0 {
        *out = p;
    }
    code
}

/// # Safety
/// C allocator contract.
#[no_mangle]
pub unsafe extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    hooked_alloc(size, alloc_kind::MEMALIGN, || {
        allocator::aligned_alloc(align, size)
    })
}

/// # Safety
/// C allocator contract.
#[no_mangle]
pub unsafe extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    hooked_alloc(size, alloc_kind::MEMALIGN, || {
        allocator::memalign(align, size)
    })
}

/// # Safety
/// C allocator contract.
#[no_mangle]
pub unsafe extern "C" fn valloc(size: usize) -> *mut c_void {
    hooked_alloc(size, alloc_kind::VALLOC, || allocator::valloc(size))
}

/// # Safety
/// C allocator contract.
#[no_mangle]
pub unsafe extern "C" fn pvalloc(size: usize) -> *mut c_void {
    hooked_alloc(size, alloc_kind::VALLOC, || allocator::pvalloc(size))
}

// ---------------------------------------------------------------- mappings

fn record_mapping_event<P: raw::Payload>(tag: u16, make: impl FnOnce(u64) -> P) {
    if let Some(st) = enter() {
        let saved = errno();
        let stack = if tag == raw::tag::MMAP {
            capture_stack(st)
        } else {
            0
        };
        let ev = make(stack);
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
        record_mapping_event(tag::MMAP, |stack| raw::Mmap {
            time: sys::now_ns(),
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
        record_mapping_event(tag::MUNMAP, |_| raw::Munmap {
            time: sys::now_ns(),
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
        record_mapping_event(tag::MREMAP, |_| raw::Mremap {
            time: sys::now_ns(),
            old_addr: old as u64,
            old_len: old_len as u64,
            new_addr: p as u64,
            new_len: new_len as u64,
        });
    }
    p
}

// ---------------------------------------------------------------- annotation API

/// Region begin/end carry the thread's exact access counts at that instant, so
/// the bytes a region moved are exact differences.
fn record_region(tag: u16, name: *const c_char) {
    if let Some(st) = enter() {
        let saved = errno();
        let id = intern(st, name);
        let ev = raw::RegionMark {
            time: sys::now_ns(),
            name: id,
            counts: access::exact_counts(st),
        };
        st.writer.write(st.tid, tag, &ev, &[]);
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
            time: sys::now_ns(),
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
            time: sys::now_ns(),
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
        let ev = raw::Named {
            time: sys::now_ns(),
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
            let name = st.groups[st.group_depth.min(thread::MAX_GROUP_DEPTH - 1)];
            let ev = raw::Named {
                time: sys::now_ns(),
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

/// The thread's exact totals, from its own counters.
pub(crate) fn record_thread_totals(st: &mut ThreadState) {
    let mut ev = raw::ThreadTotals {
        time: sys::now_ns(),
        tid: st.tid as u64,
        access: access::exact_counts(st),
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
        time: sys::now_ns(),
        tid: st.tid as u64,
        ..Default::default()
    };
    st.writer.write(st.tid, tag::THREAD_EXIT, &ev, &[]);
}

/// The thread's stack becomes a data object from its first event on.
pub(crate) fn record_thread_start(st: &mut ThreadState) {
    let ev = raw::ThreadEvent {
        time: sys::now_ns(),
        tid: st.tid as u64,
        stack_lo: st.stack_lo,
        stack_hi: st.stack_hi,
    };
    st.writer.write(st.tid, tag::THREAD_START, &ev, &[]);
}

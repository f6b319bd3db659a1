//! Hooks on the process's life: exit paths (the status goes in the log), fork
//! (the child gets its own log), dlclose (the unwinder forgets unloaded code)
//! and pthread_getattr_np (a thread's state is made before glibc's lock).

use crate::events::{with_orphan, ORPHAN_LOCK, STACK_SEEN, STRING_SEEN};
use crate::guard::{enter, leave, set_state};
use crate::settings::{open_log, INTERVAL_MS, OWN_SAMPLER};
use crate::stage::{DISABLED, READY, STATE};
use crate::sys::{errno, set_errno};
use crate::thread::ThreadState;
use crate::{access, log, modules, sampler, sys, thread, track, unwind};
use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicU64, Ordering};
use memlens_rawlog::{self as raw, tag};

/// The status passed to exit(), for the fini record (-1: not known).
pub(crate) static EXIT_STATUS: core::sync::atomic::AtomicI32 =
    core::sync::atomic::AtomicI32::new(-1);

static REAL_EXIT: AtomicU64 = AtomicU64::new(0);

pub(crate) fn record_exit(st: &mut ThreadState, status: i32) {
    let exit = raw::ProcessExit {
        time: st.clock.now(),
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
    let real = sys::next_definition(&REAL_EXIT, c"exit");
    if real != 0 {
        let f: extern "C" fn(c_int) -> ! = core::mem::transmute(real as usize);
        f(status);
    }
    libc::syscall(libc::SYS_exit_group, status);
    core::hint::unreachable_unchecked()
}

type Main = unsafe extern "C" fn(c_int, *mut *mut i8, *mut *mut i8) -> c_int;
type StartMain = unsafe extern "C" fn(
    Main,
    c_int,
    *mut *mut i8,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    *mut c_void,
) -> c_int;

static REAL_START_MAIN: AtomicU64 = AtomicU64::new(0);
static PROGRAM_MAIN: AtomicU64 = AtomicU64::new(0);

/// The program's main, whose return value glibc passes to its own `exit`
/// from inside libc, where no interposed `exit` sees it: kept for the fini
/// record.
unsafe extern "C" fn main_returning_status(
    argc: c_int,
    argv: *mut *mut i8,
    envp: *mut *mut i8,
) -> c_int {
    let main: Main = core::mem::transmute(PROGRAM_MAIN.load(Ordering::Acquire) as usize);
    let status = main(argc, argv, envp);
    EXIT_STATUS.store(status & 0xff, Ordering::Relaxed);
    status
}

/// Starts the program with its main wrapped (see [`main_returning_status`]),
/// so a process that is not memlens' child (a compiler's cc1 under its
/// driver) has a known status when it returns from main.
///
/// # Safety
/// glibc's `__libc_start_main` contract: called once, by the program's `_start`.
#[no_mangle]
pub unsafe extern "C" fn __libc_start_main(
    main: Main,
    argc: c_int,
    argv: *mut *mut i8,
    init: *mut c_void,
    fini: *mut c_void,
    rtld_fini: *mut c_void,
    stack_end: *mut c_void,
) -> c_int {
    let real = sys::next_definition(&REAL_START_MAIN, c"__libc_start_main");
    if real == 0 {
        // No glibc underneath: nothing to wrap, nothing to start.
        libc::abort();
    }
    let real: StartMain = core::mem::transmute(real as usize);
    PROGRAM_MAIN.store(main as usize as u64, Ordering::Release);
    real(
        main_returning_status,
        argc,
        argv,
        init,
        fini,
        rtld_fini,
        stack_end,
    )
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

static REAL_DLCLOSE: AtomicU64 = AtomicU64::new(0);

/// Unloading a library ends what the unwinder learnt about its code.
///
/// # Safety
/// C `dlclose` contract.
#[no_mangle]
pub unsafe extern "C" fn dlclose(handle: *mut c_void) -> c_int {
    let real = sys::next_definition(&REAL_DLCLOSE, c"dlclose");
    if real == 0 {
        return -1;
    }
    let f: unsafe extern "C" fn(*mut c_void) -> c_int = core::mem::transmute(real as usize);
    let r = f(handle);
    unwind::forget_unloaded_code();
    r
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
    crate::sys::real_pthread_getattr_np(thread, attr)
}

/// Records the image's command line (transparent mode: no collector knows
/// it) through the calling thread's writer.
pub(crate) fn record_command_line() {
    let mut args = [0u8; raw::CommandLine::MAX_BYTES];
    let n = sys::read_file(c"/proc/self/cmdline", &mut args);
    if let Some(st) = enter() {
        let ev = raw::CommandLine {
            time: st.clock.now(),
        };
        st.writer.write(st.tid, tag::COMMAND_LINE, &ev, &args[..n]);
        leave(st);
    }
}

/// Records the loaded objects through the calling thread's writer.
pub(crate) fn record_modules_from_here() {
    if let Some(st) = enter() {
        crate::events::record_modules(st);
        leave(st);
    }
}

pub(crate) extern "C" fn fork_prepare() {
    ORPHAN_LOCK.lock();
    track::LOCK.lock();
    modules::LOCK.lock();
}

pub(crate) extern "C" fn fork_parent() {
    modules::LOCK.unlock();
    track::LOCK.unlock();
    ORPHAN_LOCK.unlock();
}

/// The child gets its own log; it must never write to the parent's mappings.
pub(crate) extern "C" fn fork_child() {
    fork_parent();
    crate::clock::after_fork();
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
        st.refresh_fast_path();
    }
    with_orphan(|w| w.release());
    log::close_inherited();
    STACK_SEEN.clear();
    for s in &STRING_SEEN {
        s.store(0, Ordering::Relaxed);
    }
    modules::reset();
    // SAFETY: the child is single-threaded here.
    unsafe {
        if !open_log(libc::getppid() as u32) {
            set_state(DISABLED);
            set_errno(saved);
            return;
        }
    }
    crate::allocator::record_faults();
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
        st.refresh_fast_path();
        access::reset_after_fork(st);
        st.sorts = [0; 2];
        st.memo.clear();
    }
    record_modules_from_here();
    // SAFETY: read-only after init.
    if unsafe { OWN_SAMPLER } {
        sampler::start(unsafe { INTERVAL_MS });
    }
    set_errno(saved);
}

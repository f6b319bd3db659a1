//! Start and end of the runtime in a process: the constructor reads the
//! configuration (`MEMLENS_*`, see `memlens_rawlog::env`), makes the profile
//! directory and opens the log; the destructor writes the last records.

use crate::events::record_thread_totals;
use crate::guard::{enter, leave, set_state};
use crate::process::{
    fork_child, fork_parent, fork_prepare, record_command_line, record_exit,
    record_modules_from_here, EXIT_STATUS,
};
use crate::settings::{env, open_log, settings, DIR, DIR_LEN, INTERVAL_MS, OWN_SAMPLER, SETTINGS};
use crate::stage::{DISABLED, READY, STATE, UNINIT};
use crate::sys::{errno, set_errno};
use crate::{access, allocator, clock, log, model, sampler, sys};
use core::ffi::c_char;
use core::sync::atomic::Ordering;
use memlens_rawlog::{self as raw, access_filter, tag};

#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;

#[used]
#[link_section = ".fini_array"]
static FINI: extern "C" fn() = fini;

extern "C" fn init() {
    if STATE.load(Ordering::Acquire) != UNINIT {
        return;
    }
    let saved_errno = errno();
    crate::early::STARTING.store(true, Ordering::Relaxed);
    // SAFETY: single-threaded during constructors; statics written before READY.
    unsafe {
        if env(raw::env::DISABLE).is_some_and(|v| v == b"1") || !configure() {
            set_state(DISABLED);
            set_errno(saved_errno);
            return;
        }
        allocator::resolve();
        crate::malloc::configure(settings());
        clock::init();
        crate::lifecycle::init_key();
        libc::pthread_atfork(Some(fork_prepare), Some(fork_parent), Some(fork_child));
        if !open_log(libc::getppid() as u32) {
            set_state(DISABLED);
            set_errno(saved_errno);
            return;
        }
        // What the loader and constructors before us allocated, read before
        // any allocation is counted: their frees are counted, their
        // allocations were not, but for the blocks kept and recorded now.
        let before_start = allocator::is_glibc().then(|| glibc_heap_in_use()).flatten();
        set_state(READY);
        let early = crate::malloc::record_early_blocks();
        if let (Some(total), Some(h)) = (before_start, log::header()) {
            (h.heap_before_start).store(total.saturating_sub(early), Ordering::Relaxed);
        }
        allocator::record_faults();
        record_modules_from_here();
        // Also under a collector: if it is killed, the log still tells the command.
        record_command_line();
        if OWN_SAMPLER {
            sampler::start(INTERVAL_MS);
        }
    }
    set_errno(saved_errno);
}

/// The bytes glibc's malloc has handed out and not had back: `mallinfo2`
/// (glibc 2.33 on), else `mallinfo`, whose `int` fields hold the same
/// counts below 2 GiB (what constructors allocate before the runtime
/// starts). Looked up, not linked: the runtime loads into programs of
/// older C libraries too.
unsafe fn glibc_heap_in_use() -> Option<u64> {
    let mallinfo2 = libc::dlsym(libc::RTLD_DEFAULT, c"mallinfo2".as_ptr());
    if !mallinfo2.is_null() {
        // SAFETY: glibc's mallinfo2, by its name.
        let f: unsafe extern "C" fn() -> libc::mallinfo2 = core::mem::transmute(mallinfo2);
        let m = f();
        return Some((m.uordblks + m.hblkhd) as u64);
    }
    let mallinfo = libc::dlsym(libc::RTLD_DEFAULT, c"mallinfo".as_ptr());
    if mallinfo.is_null() {
        return None;
    }
    // SAFETY: glibc's mallinfo, by its name.
    let f: unsafe extern "C" fn() -> libc::mallinfo = core::mem::transmute(mallinfo);
    let m = f();
    Some(u64::from(m.uordblks as u32) + u64::from(m.hblkhd as u32))
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
    } else if env(raw::env::EVERY_BLOCK_IF_INSTRUMENTED).is_some_and(|v| v == b"1")
        && crate::modules::instrumented_image()
    {
        s.sample_rate = 1;
    }
    if let Some(v) = env(raw::env::MAX_FRAMES).and_then(raw::parse_size) {
        s.max_frames = v.clamp(1, raw::MAX_FRAMES as u64) as u32;
    }
    if let Some(code) = env(raw::env::UNWIND).and_then(raw::unwinder::from_option) {
        s.unwinder = code;
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
    // The collector made the directories; gone, the program removed them,
    // and they stay removed (the collector writes the run elsewhere).
    make_dirs(&mut *core::ptr::addr_of_mut!(DIR), DIR_LEN, OWN_SAMPLER)
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

/// mkdir DIR and DIR/raw when `create`, private to the user (DIR must be
/// NUL-free; the buffer gets terminated here). Both must be directories of
/// the user's own: a directory of someone else's could redirect the logs
/// through its links.
unsafe fn make_dirs(buf: &mut [u8; 4096], len: usize, create: bool) -> bool {
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
    own_private_dir(buf.as_ptr() as *const c_char, create)
        && own_private_dir(raw_dir.as_ptr() as *const c_char, create)
}

/// Makes the directory (mode 0700) if it is not there and `create`; true if
/// it is a directory, not a link, owned by this user.
unsafe fn own_private_dir(path: *const c_char, create: bool) -> bool {
    if create {
        libc::mkdir(path, 0o700);
    }
    let mut st: libc::stat = core::mem::zeroed();
    libc::lstat(path, &mut st) == 0
        && (st.st_mode & libc::S_IFMT) == libc::S_IFDIR
        && st.st_uid == libc::geteuid()
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

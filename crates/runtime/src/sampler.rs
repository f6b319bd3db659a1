//! The capacity sampler of the transparent mode (LD_PRELOAD without `memlens
//! record`): one thread that reads /proc/self every interval and the header's
//! exact counters, and writes timeline records. Under `memlens record` the
//! collector does this from outside and no thread is added.

use crate::log::{self, Writer};
use crate::{sys, thread};
use core::ffi::c_void;
use memlens_rawlog::{self as raw, procfs, tag};

static mut INTERVAL_NS: u64 = 10_000_000;

pub fn start(interval_ms: u64) {
    // SAFETY: set before the thread starts; read-only afterwards.
    unsafe {
        INTERVAL_NS = interval_ms * 1_000_000;
        let mut attr: libc::pthread_attr_t = core::mem::zeroed();
        libc::pthread_attr_init(&mut attr);
        libc::pthread_attr_setdetachstate(&mut attr, libc::PTHREAD_CREATE_DETACHED);
        libc::pthread_attr_setstacksize(&mut attr, 256 * 1024);
        let mut tid: libc::pthread_t = 0;
        libc::pthread_create(&mut tid, &attr, run, core::ptr::null_mut());
        libc::pthread_attr_destroy(&mut attr);
    }
}

/// The process's capacity now: /proc/self/status and the exact heap counters.
pub fn snapshot() -> raw::Timeline {
    let mut t = raw::Timeline {
        time: sys::now_ns(),
        pid: sys::getpid() as u64,
        numa: [u64::MAX; 4],
        ..Default::default()
    };
    let mut buf = [0u8; 4096];
    let n = sys::read_file(c"/proc/self/status", &mut buf);
    procfs::fill_from_status(&buf[..n], &mut t);
    if let Some(h) = log::header() {
        h.fill_timeline(&mut t);
    }
    t
}

extern "C" fn run(_: *mut c_void) -> *mut c_void {
    thread::tls_set(thread::INTERNAL);
    // SAFETY: blocking every signal keeps process-directed signals on the
    // program's own threads, as without memlens.
    unsafe {
        let mut all: libc::sigset_t = core::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, core::ptr::null_mut());
    }
    let tid = sys::gettid();
    let pid = sys::getpid();
    let mut writer = Writer::new();
    // SAFETY: written before start.
    let interval = unsafe { INTERVAL_NS };
    let mut next = sys::now_ns();
    while let Some(h) = log::header() {
        if h.pid != pid {
            break; // a forked child starts its own sampler
        }
        writer.write(tid, tag::TIMELINE, &snapshot(), &[]);
        next += interval;
        let now = sys::now_ns();
        let wait = next.saturating_sub(now).max(100_000);
        let ts = libc::timespec {
            tv_sec: (wait / 1_000_000_000) as i64,
            tv_nsec: (wait % 1_000_000_000) as i64,
        };
        // SAFETY: plain sleep.
        unsafe { libc::nanosleep(&ts, core::ptr::null_mut()) };
    }
    writer.release();
    core::ptr::null_mut()
}

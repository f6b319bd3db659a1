//! Event times, CLOCK_MONOTONIC nanoseconds, read cheaply.
//!
//! The vDSO's `clock_gettime` orders its read of the time stamp counter
//! (`lfence; rdtsc`), and on a memory-bound loop that fence waits for every load
//! in flight: on STREAM it was a third of what a sample cost the program; on a
//! malloc-heavy program it was 20 ns of each recorded allocation and free. A
//! thread instead reads the counter unordered and interpolates from its last
//! reading of the real clock, at the counter's rate measured against that clock
//! since the runtime started. It reads the real clock again when its last
//! reading is more than [`WINDOW_NS`] old, which bounds the error by the window
//! times the rate's error (NTP slews CLOCK_MONOTONIC by at most 500 ppm: 25 ns,
//! less than a pointer takes to reach another thread, so a block's allocation
//! and its free by another thread stay in order). A thread's times never go
//! backwards, so its events keep their order (an access sample between a
//! region's marks, a block's allocation before its free).

use crate::sys;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// How long a thread interpolates from one reading of the real clock.
const WINDOW_NS: f64 = 50_000.0;
/// The shortest time over which the counter's rate is measured.
const MIN_BASELINE_NS: u64 = 1_000_000;
/// Counter ticks a reading of the real clock may span: the vDSO's takes
/// under 200 (0.1 µs at 2.3 GHz), but on this VM 1 in 70,000 spans 10 to
/// 40 µs (an interrupt, an exit to the hypervisor) and 1 in 300,000 more
/// (a preemption). Such a pair's counter is not the clock's instant: a
/// thread interpolating from it would give times up to that far behind,
/// and another thread's allocation of a block could sort after this one's
/// free of it. Under 2,000 (about 1 µs), the midpoint errs by half that.
const MAX_PAIR_TICKS: u64 = 2_000;

/// The kernel keeps time by the counter (so it found it constant and
/// synchronized across CPUs).
static TSC_USABLE: AtomicBool = AtomicBool::new(false);
/// Counter and clock at the runtime's start, the rate's baseline.
static START_TSC: AtomicU64 = AtomicU64::new(0);
static START_NS: AtomicU64 = AtomicU64::new(0);
/// Nanoseconds per counter tick (f64 bits); 0 until measured.
static NS_PER_TICK: AtomicU64 = AtomicU64::new(0);
/// [`WINDOW_NS`] in ticks.
static WINDOW_TICKS: AtomicU64 = AtomicU64::new(0);

#[cfg(target_arch = "x86_64")]
fn ticks() -> u64 {
    // SAFETY: rdtsc has no preconditions.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
fn ticks() -> u64 {
    0
}

/// Takes the rate's baseline, if the kernel's clock source is the counter.
/// Called once, at the runtime's start.
pub fn init() {
    if cfg!(target_arch = "x86_64") && clock_source_is_tsc() {
        if let (ns, Some(tsc)) = read_pair() {
            START_NS.store(ns, Ordering::Relaxed);
            START_TSC.store(tsc, Ordering::Relaxed);
            TSC_USABLE.store(true, Ordering::Release);
        }
    }
}

/// The real clock, and the counter at the same instant: read on both sides
/// of the clock, a few tries; none when the thread was held up between the
/// reads each time. A pair taken across a preemption would put every time
/// the thread interpolates from it behind by the preemption's length, and
/// a block freed by another thread right after its allocation before it.
fn read_pair() -> (u64, Option<u64>) {
    for _ in 0..3 {
        let before = ticks();
        let ns = sys::now_ns();
        let spanned = ticks().wrapping_sub(before);
        if spanned < MAX_PAIR_TICKS {
            return (ns, Some(before + spanned / 2));
        }
    }
    (sys::now_ns(), None)
}

fn clock_source_is_tsc() -> bool {
    let mut buf = [0u8; 16];
    // SAFETY: plain syscalls on a NUL-terminated path and our own buffer.
    let n = unsafe {
        let fd = sys::open(
            c"/sys/devices/system/clocksource/clocksource0/current_clocksource".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
            0,
        );
        if fd < 0 {
            return false;
        }
        let n = sys::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len());
        sys::close(fd);
        n
    };
    n >= 3 && buf[..n as usize].trim_ascii_end() == b"tsc"
}

/// A thread's clock.
pub struct Clock {
    /// The counter and the real clock at this thread's last reading of both
    /// (0: none yet).
    tsc: u64,
    ns: u64,
    /// The latest time this thread has given out.
    last: u64,
}

impl Clock {
    pub const fn new() -> Self {
        Clock {
            tsc: 0,
            ns: 0,
            last: 0,
        }
    }

    /// CLOCK_MONOTONIC now, interpolated from the counter while this
    /// thread's last reading of the real clock is recent, else read from the
    /// clock (never before a time this thread already gave out).
    pub fn now(&mut self) -> u64 {
        let rate = f64::from_bits(NS_PER_TICK.load(Ordering::Relaxed));
        let elapsed = ticks().wrapping_sub(self.tsc);
        // A counter behind the reading (another CPU's) wraps to a huge
        // `elapsed`: read the clock then too.
        if self.tsc == 0 || rate == 0.0 || elapsed > WINDOW_TICKS.load(Ordering::Relaxed) {
            return self.read_both();
        }
        self.last = self.last.max(self.ns + (elapsed as f64 * rate) as u64);
        self.last
    }

    /// Reads the real clock and the counter, and measures the counter's rate
    /// again over the longer baseline.
    #[cold]
    fn read_both(&mut self) -> u64 {
        let (ns, tsc) = read_pair();
        self.last = self.last.max(ns);
        let Some(tsc) = tsc.filter(|_| TSC_USABLE.load(Ordering::Acquire)) else {
            return self.last;
        };
        let base_ns = START_NS.load(Ordering::Relaxed);
        let base_tsc = START_TSC.load(Ordering::Relaxed);
        if ns >= base_ns + MIN_BASELINE_NS && tsc > base_tsc {
            let rate = (ns - base_ns) as f64 / (tsc - base_tsc) as f64;
            NS_PER_TICK.store(rate.to_bits(), Ordering::Relaxed);
            WINDOW_TICKS.store((WINDOW_NS / rate) as u64, Ordering::Relaxed);
            (self.tsc, self.ns) = (tsc, ns);
        }
        self.last
    }
}

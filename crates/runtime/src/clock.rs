//! Event times, CLOCK_MONOTONIC nanoseconds, read cheaply.
//!
//! The vDSO's `clock_gettime` orders its read of the time stamp counter
//! (`lfence; rdtsc`), and on a memory-bound loop that fence waits for every load
//! in flight: on STREAM it was a third of what a sample cost the program; on a
//! malloc-heavy program it was 20 ns of each recorded allocation and free. A
//! thread instead reads the counter itself, fenced only where the order
//! across threads needs it ([`Clock::now`]), and maps it to the clock.
//!
//! Every thread maps the counter through the same function, so that events of
//! different threads keep their real order: a block freed by one thread and
//! handed back by malloc to another within 100 ns (when each thread
//! interpolated from its own reading of the clock, the readings' errors put
//! such hand-offs out of order by up to 244 ns; measurements in
//! docs/recording.md, "Event times"). The function is linear in segments of
//! [`PERIOD_NS`]: the first thread to read the counter past a segment's end
//! reads the real clock and starts the next one where the last one ends, or
//! later if the clock is ahead of it (never earlier, so that a time given out
//! from the old segment stays before any from the new); ahead of the clock,
//! the next segment runs slower until it meets it. Its rate is the counter's,
//! measured against the clock since the runtime started. A thread's times
//! never go backwards, so its events keep their order (an access sample
//! between a region's marks, a block's allocation before its free).

use crate::sys;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// How long one segment maps the counter before the real clock is read again.
const PERIOD_NS: f64 = 1_000_000.0;
/// The shortest time over which the counter's rate is measured.
const MIN_BASELINE_NS: u64 = 1_000_000;
/// Counter ticks a reading of the real clock may span: the vDSO's takes
/// under 200 (0.1 µs at 2.3 GHz), but on this VM 1 in 70,000 spans 10 to
/// 40 µs (an interrupt, an exit to the hypervisor) and 1 in 300,000 more
/// (a preemption). Such a pair's counter is not the clock's instant: a
/// segment started from it would be that far off the clock. Under 2,000
/// (about 1 µs), the midpoint errs by half that.
const MAX_PAIR_TICKS: u64 = 2_000;
/// The slowest a segment runs to let the clock catch up with it, as a
/// fraction of the counter's rate.
const MIN_RATE_FRACTION: f64 = 0.5;
/// Times a thread polls for the segment another thread is starting before it
/// reads the real clock itself (that thread may have been preempted).
const WAIT_POLLS: u32 = 1_000;

/// The kernel keeps time by the counter (so it found it constant and
/// synchronized across CPUs).
static TSC_USABLE: AtomicBool = AtomicBool::new(false);
/// Counter and clock at the runtime's start, the rate's baseline.
static START_TSC: AtomicU64 = AtomicU64::new(0);
static START_NS: AtomicU64 = AtomicU64::new(0);

/// One linear piece of the counter-to-clock mapping.
struct Segment {
    tsc: AtomicU64,
    ns: AtomicU64,
    /// Nanoseconds per tick (f64 bits).
    rate: AtomicU64,
    /// Ticks it maps before the next one starts.
    ticks: AtomicU64,
}

const SLOTS: usize = 8;
/// The latest segments, the current one at `SEGMENT_SEQ % SLOTS`: a thread
/// reading one while the next is written still reads it whole (it would take
/// `SLOTS` new segments to overwrite it, which the reader detects).
static SEGMENTS: [Segment; SLOTS] = [const {
    Segment {
        tsc: AtomicU64::new(0),
        ns: AtomicU64::new(0),
        rate: AtomicU64::new(0),
        ticks: AtomicU64::new(0),
    }
}; SLOTS];
/// Segments started so far (0: none, the counter's rate is not measured yet).
static SEGMENT_SEQ: AtomicU64 = AtomicU64::new(0);
/// Held by the thread starting the next segment.
static STARTING: AtomicBool = AtomicBool::new(false);
/// A second thread writes events: their order across threads needs the
/// fenced read. Until then one thread's times keep its own order unfenced
/// (the fence cost 8% of `bench/sites.sh`'s program under `record --leaks`,
/// 0.488 -> 0.449 s). A thread's first event comes after it set this
/// ([`second_thread_writes`]); another thread that takes a block it freed
/// does so through the allocator's lock or atomics, after which it sees
/// the flag.
static THREADS_WRITE: AtomicBool = AtomicBool::new(false);

/// A second thread is about to write events: from now on every thread's
/// times are read fenced.
pub fn second_thread_writes() {
    THREADS_WRITE.store(true, Ordering::SeqCst);
}

#[cfg(target_arch = "x86_64")]
fn ticks() -> u64 {
    // SAFETY: rdtsc has no preconditions.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// The counter once every earlier load has completed. Unordered, a read
/// after the load that saw another thread's free of a block (or the pointer
/// it hands over) runs ahead of it, while the load waits for the other
/// core's cache line: by up to 350 ns on this VM, on 1 hand-off in 20.
#[cfg(target_arch = "x86_64")]
fn ordered_ticks() -> u64 {
    // SAFETY: lfence and rdtsc have no preconditions.
    unsafe {
        core::arch::x86_64::_mm_lfence();
        core::arch::x86_64::_rdtsc()
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn ticks() -> u64 {
    0
}

#[cfg(not(target_arch = "x86_64"))]
fn ordered_ticks() -> u64 {
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
/// reads each time.
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

/// The current segment's (start counter, start time, rate, length); none
/// before the first, or if its slot was written over while it was read.
fn current_segment() -> Option<(u64, u64, f64, u64)> {
    let seq = SEGMENT_SEQ.load(Ordering::Acquire);
    if seq == 0 {
        return None;
    }
    let s = &SEGMENTS[seq as usize % SLOTS];
    let tsc = s.tsc.load(Ordering::Acquire);
    let ns = s.ns.load(Ordering::Acquire);
    let rate = f64::from_bits(s.rate.load(Ordering::Acquire));
    let ticks = s.ticks.load(Ordering::Acquire);
    // Its slot written over meanwhile (the reader held up for that long).
    let overwritten = SEGMENT_SEQ.load(Ordering::Relaxed) - seq >= SLOTS as u64 - 1;
    (!overwritten).then_some((tsc, ns, rate, ticks))
}

/// The time the current segment gives counter reading `now`: none past its
/// end (or long before its start, a counter not kept in step across CPUs).
fn segment_time(now: u64) -> Option<u64> {
    let (tsc, ns, rate, ticks) = current_segment()?;
    let elapsed = now.wrapping_sub(tsc);
    if elapsed < ticks {
        Some(ns + (elapsed as f64 * rate) as u64)
    } else {
        // Read before the segment began (a counter read early, or another
        // CPU's a little behind): the segment's start, which is no earlier.
        (tsc.wrapping_sub(now) < ticks).then_some(ns)
    }
}

/// Starts the next segment at the real clock's reading now, continuing the
/// current one; its start time, or none if the clock could not be read with
/// the counter. Called by one thread at a time.
fn start_segment() -> Option<u64> {
    let (ns, tsc) = read_pair();
    let tsc = tsc?;
    let (base_ns, base_tsc) = (
        START_NS.load(Ordering::Relaxed),
        START_TSC.load(Ordering::Relaxed),
    );
    if ns < base_ns + MIN_BASELINE_NS || tsc <= base_tsc {
        // Too soon to know the rate: the clock itself.
        return Some(ns);
    }
    let rate = (ns - base_ns) as f64 / (tsc - base_tsc) as f64;
    let seq = SEGMENT_SEQ.load(Ordering::Relaxed);
    let continued = match current_segment() {
        None => ns,
        Some((from, start, its_rate, _)) => {
            start + (tsc.saturating_sub(from) as f64 * its_rate) as u64
        }
    };
    // Never back, lest a time given out from the last segment come after
    // one from this; ahead of the clock, slower until the clock catches up.
    let start = continued.max(ns);
    let ahead = (start - ns) as f64 / PERIOD_NS;
    let next = &SEGMENTS[(seq + 1) as usize % SLOTS];
    next.tsc.store(tsc, Ordering::Release);
    next.ns.store(start, Ordering::Release);
    next.rate.store(
        (rate * (1.0 - ahead).max(MIN_RATE_FRACTION)).to_bits(),
        Ordering::Release,
    );
    next.ticks
        .store((PERIOD_NS / rate) as u64, Ordering::Release);
    SEGMENT_SEQ.store(seq + 1, Ordering::Release);
    Some(start)
}

/// In a fork's child: a thread of the parent that was starting a segment is
/// not there to finish it, and one thread writes the child's events.
pub fn after_fork() {
    STARTING.store(false, Ordering::Release);
    THREADS_WRITE.store(false, Ordering::SeqCst);
}

/// The time when the current segment has ended: from the next, started by
/// this thread or by another (the real clock if neither can).
#[cold]
#[inline(never)]
fn next_segment_time() -> u64 {
    if !TSC_USABLE.load(Ordering::Acquire) {
        return sys::now_ns();
    }
    if STARTING
        .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_ok()
    {
        // Another thread may have started it since this one looked.
        let time = segment_time(ticks()).or_else(start_segment);
        STARTING.store(false, Ordering::Release);
        if let Some(time) = time {
            return time;
        }
    } else if SEGMENT_SEQ.load(Ordering::Relaxed) != 0 {
        for _ in 0..WAIT_POLLS {
            core::hint::spin_loop();
            if let Some(time) = segment_time(ticks()) {
                return time;
            }
        }
    }
    sys::now_ns()
}

/// A thread's clock.
pub struct Clock {
    /// The latest time this thread has given out.
    last: u64,
}

impl Clock {
    pub const fn new() -> Self {
        Clock { last: 0 }
    }

    /// CLOCK_MONOTONIC now, mapped from the counter (never before a time this
    /// thread already gave out), after everything this thread has seen: a
    /// block's allocation after another thread's free of it.
    pub fn now(&mut self) -> u64 {
        if THREADS_WRITE.load(Ordering::Relaxed) {
            self.give_out(ordered_ticks())
        } else {
            self.give_out(ticks())
        }
    }

    /// As [`Clock::now`], without waiting for loads in flight: for an access
    /// sample, whose order with other threads' events matters to no figure,
    /// and whose wait would slow a memory-bound loop.
    pub fn now_unordered(&mut self) -> u64 {
        self.give_out(ticks())
    }

    fn give_out(&mut self, ticks: u64) -> u64 {
        let time = segment_time(ticks).unwrap_or_else(next_segment_time);
        self.last = self.last.max(time);
        self.last
    }
}

//! A thread's access bookkeeping: its countdown arrays (the runtime's own
//! in initial-exec TLS, and each instrumented module's), what each has
//! counted, and the thread's exact counts from them.

use memlens_rawlog::{self as raw, ACCESS_CLASSES, COUNTS};

/// Bookkeeping of one countdown array (not on the fast path).
#[derive(Clone, Copy)]
pub struct Counting {
    /// Accesses accounted for at the last reset of each class.
    pub credited: [u64; ACCESS_CLASSES],
    /// Value the countdown was last reset to.
    pub reset: [u64; ACCESS_CLASSES],
    /// Accesses left until the next sample of each class.
    pub until_sample: [u64; ACCESS_CLASSES],
}

/// Countdown arrays one thread can count from: the runtime's own, and one per
/// instrumented executable or shared library (each links its own, hidden).
/// The arrays of libraries past this many stay idle, their accesses uncounted.
pub(super) const SOURCES: usize = 8;

/// A thread's access bookkeeping. Its countdown arrays: the runtime's own TLS
/// (the exported callbacks, used by code built without the pass plugin), and
/// each instrumented module's (`memlens cc` links one into every executable
/// and library it counts per block, and the fast path's LTO inlines).
pub struct AccessState {
    pub sources: [Counting; SOURCES],
    /// Each source's countdown array on this thread (null until it calls
    /// in): the first is the runtime's own.
    pub countdown_arrays: [*mut [u64; ACCESS_CLASSES]; SOURCES],
    /// Bytes of intercepted memcpy/memmove (read) and memcpy/memmove/memset (written).
    pub bulk: [u64; 2],
    /// Bytes of bulk calls left until the next sample of bytes read, written
    /// (0: not started).
    pub bulk_until: [u64; 2],
    /// Accesses counted since the counts were last published.
    pub unpublished: u64,
    /// Nanoseconds this thread spent in the slow path (sampling, publishing):
    /// region marks carry it, so that a region says what of its time was
    /// memlens' sampling code.
    pub slow_ns: u64,
    /// This thread has marked its process's log as holding instrumented
    /// code's accesses (a flag in the header, read once a thread).
    pub marked_instrumented: bool,
}

impl AccessState {
    /// The calling thread's bookkeeping, counting from the runtime's own
    /// countdown array.
    pub fn new() -> Self {
        let zero = Counting {
            credited: [0; ACCESS_CLASSES],
            reset: [0; ACCESS_CLASSES],
            until_sample: [0; ACCESS_CLASSES],
        };
        AccessState {
            sources: [zero; SOURCES],
            countdown_arrays: {
                let mut arrays = [core::ptr::null_mut(); SOURCES];
                arrays[0] = countdowns();
                arrays
            },
            bulk: [0; 2],
            bulk_until: [0; 2],
            unpublished: 0,
            slow_ns: 0,
            marked_instrumented: false,
        }
    }

    /// The thread's exact counts now: each source's credited accesses and
    /// those counted down since, and the bulk calls' bytes.
    pub fn exact_counts(&self) -> [u64; COUNTS] {
        let a = self;
        let mut out = [0u64; COUNTS];
        for (src, array) in a.sources.iter().zip(a.countdown_arrays) {
            // SAFETY: TLS arrays of this thread (ours, or the executable's).
            let Some(remaining) = (unsafe { array.as_ref() }) else {
                continue;
            };
            for c in 0..ACCESS_CLASSES {
                // Just after a borrow the countdown wrapped: nothing is pending then.
                let pending = src.reset[c].saturating_sub(remaining[c].min(src.reset[c]));
                out[c] += src.credited[c] + pending;
            }
        }
        out[raw::BULK_READ] = a.bulk[0];
        out[raw::BULK_WRITTEN] = a.bulk[1];
        out
    }

    /// The source `remaining` is, registered on its first call; none when
    /// this thread already counts from as many as it can.
    pub(super) fn source_of(&mut self, remaining: *mut [u64; ACCESS_CLASSES]) -> Option<usize> {
        let arrays = &mut self.countdown_arrays;
        let at = (arrays.iter()).position(|&a| a == remaining || a.is_null())?;
        arrays[at] = remaining;
        Some(at)
    }
}

#[cfg(target_arch = "x86_64")]
core::arch::global_asm!(
    ".section .tbss.memlens_access_countdown,\"awT\",@nobits",
    ".p2align 6",
    ".globl memlens_access_countdown",
    ".hidden memlens_access_countdown",
    ".type memlens_access_countdown, @object",
    ".size memlens_access_countdown, 80",
    "memlens_access_countdown:",
    ".zero 80",
    ".text",
);

#[cfg(target_arch = "x86_64")]
pub(super) fn countdowns() -> *mut [u64; ACCESS_CLASSES] {
    let base: usize;
    // SAFETY: computes the address of our own TLS block (fs base + offset).
    unsafe {
        core::arch::asm!(
            "mov {b}, qword ptr fs:[0]",
            "add {b}, qword ptr [rip + memlens_access_countdown@GOTTPOFF]",
            b = out(reg) base,
            options(nostack, readonly)
        );
    }
    base as *mut [u64; ACCESS_CLASSES]
}

#[cfg(not(target_arch = "x86_64"))]
std::thread_local! {
    static COUNTDOWNS: core::cell::UnsafeCell<[u64; ACCESS_CLASSES]> =
        const { core::cell::UnsafeCell::new([0; ACCESS_CLASSES]) };
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) fn countdowns() -> *mut [u64; ACCESS_CLASSES] {
    COUNTDOWNS.with(|c| c.get())
}

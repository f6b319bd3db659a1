//! A thread's OpenMP contexts: the context of each region it opened, its
//! team's tally, and the implicit tasks it runs; a walk made in a region
//! completed with the region's context.

use core::mem::MaybeUninit;
use core::sync::atomic::AtomicU64;
use memlens_rawlog::{COUNTS, MAX_FRAMES};

/// Nested parallel regions whose contexts a thread keeps; deeper ones are
/// left as walked.
pub(crate) const DEPTH: usize = 4;

/// A region's calling context (return addresses, innermost first), the
/// tally its team's workers add their counts to, and where a walk made in
/// the region leaves the program's frames for the OpenMP runtime's.
#[derive(Clone, Copy)]
pub struct Context {
    pub(super) len: usize,
    pub(super) frames: [u64; MAX_FRAMES],
    pub(super) team: *const [AtomicU64; COUNTS],
    pub(super) boundary: Boundary,
}

/// The OpenMP runtime's code a walk reaches below a region's body: the
/// frames from the first one in [start, end) on give way to the region's
/// context, that first one kept or not.
#[derive(Clone, Copy)]
pub(super) struct Boundary {
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) keep: bool,
}

pub(crate) const NO_CONTEXT: Context = Context {
    len: 0,
    frames: [0; MAX_FRAMES],
    team: core::ptr::null(),
    boundary: Boundary {
        start: 0,
        end: 0,
        keep: false,
    },
};

/// An implicit task this thread runs: its region's context, and for a
/// worker the counts it had when it last added to the team's tally.
#[derive(Clone, Copy)]
pub(super) struct Running {
    pub(super) context: Context,
    pub(super) worker: bool,
    pub(super) added: [u64; COUNTS],
}

/// A thread's OpenMP contexts.
pub struct TeamContexts {
    /// The context of the region this thread opened at each nesting depth,
    /// which its team copies when their implicit tasks begin.
    pub(super) opened: [Context; DEPTH],
    /// What the workers of the regions this thread opened at each depth
    /// counted (exact, as [`crate::access::AccessState::exact_counts`]).
    pub(super) forked: [[AtomicU64; COUNTS]; DEPTH],
    /// The implicit tasks this thread runs, innermost last.
    pub(super) running: [Running; DEPTH],
    pub(super) depth: usize,
}

impl TeamContexts {
    /// Whether the thread runs a parallel region's implicit task: its walks
    /// are then completed with the region's context.
    pub fn in_region(&self) -> bool {
        self.depth > 0
    }

    /// Completes a walk of `n` frames made inside a parallel region: the frames
    /// past the region's body (the OpenMP runtime's, which end at a worker's
    /// thread start) give way to the region's context. Returns the new count.
    pub fn complete(&self, frames: &mut [MaybeUninit<u64>], n: usize) -> usize {
        let t = self;
        let Some(Running { context, .. }) = t.depth.checked_sub(1).and_then(|d| t.running.get(d))
        else {
            return n;
        };
        if context.len == 0 {
            return n;
        }
        let Boundary { start, end, keep } = context.boundary;
        // SAFETY: the walk wrote the first n entries.
        let walked = unsafe { core::slice::from_raw_parts(frames.as_ptr() as *const u64, n) };
        let Some(runtime) = walked.iter().position(|&pc| pc >= start && pc < end) else {
            return n;
        };
        let keep = runtime + usize::from(keep);
        let added = context.len.min(frames.len() - keep);
        for (slot, &pc) in frames[keep..keep + added].iter_mut().zip(&context.frames) {
            slot.write(pc);
        }
        keep + added
    }

    pub const fn new() -> TeamContexts {
        const NOT_RUNNING: Running = Running {
            context: NO_CONTEXT,
            worker: false,
            added: [0; COUNTS],
        };
        TeamContexts {
            opened: [NO_CONTEXT; DEPTH],
            forked: [const { [const { AtomicU64::new(0) }; COUNTS] }; DEPTH],
            running: [NOT_RUNNING; DEPTH],
            depth: 0,
        }
    }
}

/// Bytes of the mapping a thread's contexts take (whole pages).
pub(crate) const CONTEXTS_MAPPED: usize =
    core::mem::size_of::<TeamContexts>().next_multiple_of(4096);

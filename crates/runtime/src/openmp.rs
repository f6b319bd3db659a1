//! OpenMP calling contexts through OMPT, the tool interface of OpenMP 5 that
//! LLVM's libomp (and Intel's) offers a tool defining `ompt_start_tool`.
//!
//! A worker thread's stack ends in the OpenMP runtime's thread start, and the
//! master's passes through runtime code built without frame pointers: neither
//! walk reaches the function that opened the parallel region. So when a
//! region begins, the encountering thread's own stack is walked once (DWARF:
//! through the runtime's frames) from the call that forked it, and every
//! thread of the team puts that context under the runtime's microtask
//! invoker in each stack it walks while it runs the region's implicit task
//! (DrCCTProf's calling contexts follow OpenMP threads to their fork point
//! the same way). Hand-written: the OMPT ABI is a handful of C types.
//!
//! A region the encountering thread marks around a parallel region counts
//! its team's accesses too: each worker adds what it counted since its last
//! addition to the encountering thread's tally for that nesting depth when
//! it reaches a barrier and when its implicit task ends (before the join
//! barrier lets the encountering thread go on), and region marks carry the
//! thread's own exact counts plus that tally.
//!
//! The tool stands aside when the user names OMPT tools of their own
//! (`OMP_TOOL_LIBRARIES`) or when memlens is not recording.

use crate::guard;
use crate::thread::ThreadState;
use core::ffi::{c_char, c_int, c_uint, c_void};
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicU64, Ordering};
use memlens_rawlog::{unwinder, COUNTS, MAX_FRAMES};

/// Nested parallel regions whose contexts a thread keeps; deeper ones are
/// left as walked.
const DEPTH: usize = 4;

/// A region's calling context (return addresses, innermost first) and the
/// tally its team's workers add their counts to.
#[derive(Clone, Copy)]
pub struct Context {
    len: usize,
    frames: [u64; MAX_FRAMES],
    team: *const [AtomicU64; COUNTS],
}

const NO_CONTEXT: Context = Context {
    len: 0,
    frames: [0; MAX_FRAMES],
    team: core::ptr::null(),
};

/// An implicit task this thread runs: its region's context, and for a
/// worker the counts it had when it last added to the team's tally.
#[derive(Clone, Copy)]
struct Running {
    context: Context,
    worker: bool,
    added: [u64; COUNTS],
}

/// A thread's OpenMP contexts.
pub struct TeamContexts {
    /// The context of the region this thread opened at each nesting depth,
    /// which its team copies when their implicit tasks begin.
    opened: [Context; DEPTH],
    /// What the workers of the regions this thread opened at each depth
    /// counted (exact, as [`crate::access::exact_counts`]).
    forked: [[AtomicU64; COUNTS]; DEPTH],
    /// The implicit tasks this thread runs, innermost last.
    running: [Running; DEPTH],
    depth: usize,
}

impl TeamContexts {
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

    /// Whether the thread runs a parallel region's implicit task: its walks
    /// are then completed with the region's context.
    pub fn in_region(&self) -> bool {
        self.depth > 0
    }
}

/// The code of the runtime's microtask invoker (`__kmp_invoke_microtask`),
/// which calls a region's outlined body: [start, end), or empty.
static INVOKER_START: AtomicU64 = AtomicU64::new(0);
static INVOKER_END: AtomicU64 = AtomicU64::new(0);

/// Completes a walk of `n` frames made inside a parallel region: the frames
/// past the microtask invoker (the runtime's, which end at a worker's thread
/// start) give way to the region's context. Returns the new count.
pub fn complete(st: &ThreadState, frames: &mut [MaybeUninit<u64>], n: usize) -> usize {
    let t = &st.omp;
    let Some(Running { context, .. }) = t.depth.checked_sub(1).and_then(|d| t.running.get(d))
    else {
        return n;
    };
    if context.len == 0 {
        return n;
    }
    let (start, end) = (
        INVOKER_START.load(Ordering::Relaxed),
        INVOKER_END.load(Ordering::Relaxed),
    );
    // SAFETY: the walk wrote the first n entries.
    let walked = unsafe { core::slice::from_raw_parts(frames.as_ptr() as *const u64, n) };
    let Some(invoker) = walked.iter().position(|&pc| pc >= start && pc < end) else {
        return n;
    };
    let keep = invoker + 1;
    let added = context.len.min(frames.len() - keep);
    for (slot, &pc) in frames[keep..keep + added].iter_mut().zip(&context.frames) {
        slot.write(pc);
    }
    keep + added
}

/// What the workers of the regions the thread opened at its current depth
/// counted so far.
pub fn team_counts(st: &ThreadState) -> [u64; COUNTS] {
    let forked = st.omp.forked.get(st.omp.depth);
    core::array::from_fn(|c| forked.map_or(0, |f| f[c].load(Ordering::Acquire)))
}

/// The thread's exact counts plus [`team_counts`]: what its region marks
/// carry.
pub fn counts_with_teams(st: &ThreadState) -> [u64; COUNTS] {
    let mut counts = crate::access::exact_counts(st);
    for (c, t) in counts.iter_mut().zip(team_counts(st)) {
        *c += t;
    }
    counts
}

/// A worker adds what it counted since its last addition to its team's tally.
fn add_to_team(st: &mut ThreadState) {
    let now = counts_with_teams(st);
    let t = &mut st.omp;
    let Some(running) = t.depth.checked_sub(1).and_then(|d| t.running.get_mut(d)) else {
        return;
    };
    // SAFETY: the tally lives in the encountering thread's state, which
    // outlives the region (it is released only after that thread exits).
    let Some(team) = (unsafe { running.context.team.as_ref() }) else {
        return;
    };
    if !running.worker {
        return;
    }
    for ((total, added), now) in team.iter().zip(&mut running.added).zip(now) {
        total.fetch_add(now.wrapping_sub(*added), Ordering::Release);
        *added = now;
    }
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union OmptData {
    value: u64,
    ptr: *mut c_void,
}

type Lookup = unsafe extern "C" fn(name: *const c_char) -> *const c_void;
type SetCallback = unsafe extern "C" fn(event: c_int, callback: *const c_void) -> c_int;
type Initialize = unsafe extern "C" fn(Lookup, c_int, *mut OmptData) -> c_int;
type Finalize = unsafe extern "C" fn(*mut OmptData);

#[repr(C)]
pub struct StartToolResult {
    initialize: Initialize,
    finalize: Finalize,
    tool_data: OmptData,
}

// OMPT's event numbers and flags (omp-tools.h).
const CALLBACK_PARALLEL_BEGIN: c_int = 3;
const CALLBACK_IMPLICIT_TASK: c_int = 7;
const CALLBACK_SYNC_REGION: c_int = 23;
const SCOPE_BEGIN: c_int = 1;
const SCOPE_END: c_int = 2;
const TASK_INITIAL: c_int = 1;
/// `dladdr1`'s request for the symbol table entry.
const RTLD_DL_SYMENT: c_int = 1;

static mut RESULT: StartToolResult = StartToolResult {
    initialize,
    finalize,
    tool_data: OmptData { value: 0 },
};

/// Called by the OpenMP runtime when it starts: memlens' tool, unless the
/// user named OMPT tools or memlens is not recording.
///
/// # Safety
/// Called by the OpenMP runtime as OMPT specifies.
#[no_mangle]
pub unsafe extern "C" fn ompt_start_tool(
    _omp_version: c_uint,
    _runtime_version: *const c_char,
) -> *mut StartToolResult {
    let theirs = !libc::getenv(c"OMP_TOOL_LIBRARIES".as_ptr()).is_null();
    if theirs || guard::STATE.load(Ordering::Relaxed) != guard::READY {
        return core::ptr::null_mut();
    }
    core::ptr::addr_of_mut!(RESULT)
}

unsafe extern "C" fn initialize(lookup: Lookup, _device: c_int, _data: *mut OmptData) -> c_int {
    let set = lookup(c"ompt_set_callback".as_ptr());
    if set.is_null() {
        return 0;
    }
    let set: SetCallback = core::mem::transmute(set);
    let invoker = libc::dlsym(libc::RTLD_DEFAULT, c"__kmp_invoke_microtask".as_ptr());
    let mut info = MaybeUninit::<libc::Dl_info>::uninit();
    let mut symbol: *mut c_void = core::ptr::null_mut();
    if !invoker.is_null()
        && libc::dladdr1(invoker, info.as_mut_ptr(), &mut symbol, RTLD_DL_SYMENT) != 0
        && !symbol.is_null()
    {
        let size = (*(symbol as *const libc::Elf64_Sym)).st_size.max(1);
        INVOKER_START.store(invoker as u64, Ordering::Relaxed);
        INVOKER_END.store(invoker as u64 + size, Ordering::Relaxed);
    }
    set(CALLBACK_PARALLEL_BEGIN, parallel_begin as *const c_void);
    set(CALLBACK_IMPLICIT_TASK, implicit_task as *const c_void);
    set(CALLBACK_SYNC_REGION, sync_region as *const c_void);
    1
}

unsafe extern "C" fn finalize(_data: *mut OmptData) {}

/// On the encountering thread: its context from the call that forked the
/// region outwards, kept for the team at its nesting depth.
unsafe extern "C" fn parallel_begin(
    _task: *mut OmptData,
    _task_frame: *const c_void,
    parallel: *mut OmptData,
    _requested: c_uint,
    _flags: c_int,
    codeptr_ra: *const c_void,
) {
    let Some(st) = guard::enter() else {
        return;
    };
    let depth = st.omp.depth;
    if depth < DEPTH && !parallel.is_null() {
        let mut frames = [MaybeUninit::<u64>::uninit(); MAX_FRAMES];
        let mut reads = crate::unwind::memo::Reads::new();
        let max = crate::init::settings().max_frames as usize;
        let (n, _) = crate::unwind::capture(st, unwinder::DWARF, 0, &mut frames[..max], &mut reads);
        let n = complete(st, &mut frames[..max], n);
        // SAFETY: the walk and its completion wrote the first n entries.
        let walked = core::slice::from_raw_parts(frames.as_ptr() as *const u64, n);
        // From the fork call's return address on: the runtime's frames
        // inside the fork are not the program's.
        let from = walked
            .iter()
            .position(|&pc| pc == codeptr_ra as u64)
            .unwrap_or(0);
        let t = &mut st.omp;
        let opened = &mut t.opened[depth];
        opened.len = n - from;
        opened.frames[..n - from].copy_from_slice(&walked[from..]);
        opened.team = &t.forked[depth];
        (*parallel).ptr = opened as *mut Context as *mut c_void;
    }
    guard::leave(st);
}

/// On each thread of the team, the master too: the region's context is
/// this thread's while it runs the implicit task; a worker's counts go to
/// the team's tally.
unsafe extern "C" fn implicit_task(
    endpoint: c_int,
    parallel: *mut OmptData,
    _task: *mut OmptData,
    _parallelism: c_uint,
    index: c_uint,
    flags: c_int,
) {
    if flags & TASK_INITIAL != 0 {
        return;
    }
    let Some(st) = guard::enter() else {
        return;
    };
    match endpoint {
        SCOPE_BEGIN => {
            let depth = st.omp.depth;
            if depth < DEPTH {
                let opened = if parallel.is_null() {
                    core::ptr::null()
                } else {
                    (*parallel).ptr as *const Context
                };
                // A region opened past the kept depth has no context.
                let context = opened.as_ref().copied().unwrap_or(NO_CONTEXT);
                st.omp.depth += 1;
                let added = counts_with_teams(st);
                st.omp.running[depth] = Running {
                    context,
                    worker: index != 0,
                    added,
                };
            } else {
                st.omp.depth += 1;
            }
        }
        SCOPE_END => {
            add_to_team(st);
            st.omp.depth = st.omp.depth.saturating_sub(1);
        }
        _ => {}
    }
    guard::leave(st);
}

/// At a barrier (and every synchronisation) a worker adds its counts to the
/// team's tally: the region's closing barrier holds the encountering thread
/// until every worker has.
unsafe extern "C" fn sync_region(
    _kind: c_int,
    endpoint: c_int,
    _parallel: *mut OmptData,
    _task: *mut OmptData,
    _codeptr_ra: *const c_void,
) {
    if endpoint != SCOPE_BEGIN {
        return;
    }
    if let Some(st) = guard::enter() {
        add_to_team(st);
        guard::leave(st);
    }
}

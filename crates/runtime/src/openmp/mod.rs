//! OpenMP calling contexts through OMPT, the tool interface of OpenMP 5 that
//! LLVM's libomp (and Intel's) offers a tool defining `ompt_start_tool`, and
//! through GCC's libgomp's team-starting calls, interposed (below).
//!
//! A worker thread's stack ends in the OpenMP runtime's thread start, and the
//! master's passes through runtime code built without frame pointers: neither
//! walk reaches the function that opened the parallel region. So when a
//! region begins, the encountering thread's own stack is walked once (DWARF:
//! through the runtime's frames) from the call that forked it, and every
//! thread of the team puts that context in place of the runtime's frames
//! below the region's body (libomp's microtask invoker is kept) in each
//! stack it walks while it runs the region's implicit task
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
//! (`OMP_TOOL_LIBRARIES` naming another library) or when memlens is not
//! recording.

pub(crate) mod contexts;

use crate::guard;
use crate::thread::ThreadState;
use contexts::{Boundary, Context, Running, TeamContexts, CONTEXTS_MAPPED, DEPTH, NO_CONTEXT};
use core::ffi::{c_char, c_int, c_long, c_uint, c_void, CStr};
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicU64, Ordering};
use memlens_rawlog::{unwinder, COUNTS, MAX_FRAMES};

/// The thread's OpenMP contexts, mapped at its first parallel region: a
/// thread that never meets one keeps its state as small as it was (none
/// when the mapping fails: its stacks are then left as walked).
fn contexts_mut(st: &mut ThreadState) -> Option<&mut TeamContexts> {
    if st.omp.is_null() {
        let p = crate::sys::alloc_pages(CONTEXTS_MAPPED) as *mut TeamContexts;
        if !p.is_null() {
            // SAFETY: a fresh mapping of the struct's size.
            unsafe { p.write(TeamContexts::new()) };
            st.omp = p;
        }
    }
    contexts_met(st)
}

/// The thread's OpenMP contexts to change, if it has met a parallel region.
fn contexts_met(st: &mut ThreadState) -> Option<&mut TeamContexts> {
    // SAFETY: as in `contexts`.
    unsafe { st.omp.as_mut() }
}

/// The code of libomp's microtask invoker (`__kmp_invoke_microtask`), which
/// calls a region's outlined body: [start, end), or empty.
static INVOKER_START: AtomicU64 = AtomicU64::new(0);
static INVOKER_END: AtomicU64 = AtomicU64::new(0);

/// What the workers of the regions the thread opened at its current depth
/// counted so far.
pub fn team_counts(st: &ThreadState) -> [u64; COUNTS] {
    let forked = st.team_contexts().and_then(|t| t.forked.get(t.depth));
    core::array::from_fn(|c| forked.map_or(0, |f| f[c].load(Ordering::Acquire)))
}

/// The thread's exact counts plus [`team_counts`]: what its region marks
/// carry.
pub fn counts_with_teams(st: &ThreadState) -> [u64; COUNTS] {
    let mut counts = st.access.exact_counts();
    for (c, t) in counts.iter_mut().zip(team_counts(st)) {
        *c += t;
    }
    counts
}

/// A worker adds what it counted since its last addition to its team's tally.
fn add_to_team(st: &mut ThreadState) {
    let now = counts_with_teams(st);
    let Some(t) = contexts_met(st) else {
        return;
    };
    let Some(running) = t.depth.checked_sub(1).and_then(|d| t.running.get_mut(d)) else {
        return;
    };
    // SAFETY: the tally lives in the encountering thread's contexts, which
    // outlive the region (they are unmapped only when that thread exits).
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
    let named = libc::getenv(c"OMP_TOOL_LIBRARIES".as_ptr());
    let theirs = !named.is_null() && !names_only_this_library(CStr::from_ptr(named));
    if theirs || crate::stage::STATE.load(Ordering::Relaxed) != crate::stage::READY {
        return core::ptr::null_mut();
    }
    core::ptr::addr_of_mut!(RESULT)
}

/// Whether an `OMP_TOOL_LIBRARIES` list names this library alone: the
/// collector names it there for an OpenMP runtime that will not find it by
/// its symbol (Ubuntu's libomp is linked `-Bsymbolic-functions`: its call to
/// `ompt_start_tool` binds to its own weak definition, which looks only in
/// the libraries loaded after it, and the runtime is loaded first).
unsafe fn names_only_this_library(list: &CStr) -> bool {
    let mut info = MaybeUninit::<libc::Dl_info>::uninit();
    let this = ompt_start_tool as *const c_void;
    if libc::dladdr(this, info.as_mut_ptr()) == 0 || info.assume_init().dli_fname.is_null() {
        return false;
    }
    let path = CStr::from_ptr(info.assume_init().dli_fname).to_bytes();
    let mut entries = list
        .to_bytes()
        .split(|&b| b == b':')
        .filter(|e| !e.is_empty());
    entries.clone().next().is_some() && entries.all(|e| e == path)
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

/// On the encountering thread, when a region opens: its context from the
/// fork call's return address `from` outwards (the OpenMP runtime's frames
/// inside the fork are not the program's; 0: the walk's first frame on),
/// kept for the team at its nesting depth; null past the kept depth.
fn open_region(st: &mut ThreadState, from: u64, boundary: Boundary) -> *const Context {
    let Some(depth) = contexts_mut(st).map(|t| t.depth).filter(|&d| d < DEPTH) else {
        return core::ptr::null();
    };
    let mut frames = [MaybeUninit::<u64>::uninit(); MAX_FRAMES];
    let mut reads = crate::unwind::memo::Reads::new();
    let max = crate::settings::settings().max_frames as usize;
    let (n, _) = crate::unwind::capture(st, unwinder::DWARF, 0, &mut frames[..max], &mut reads);
    let n = (st.team_contexts()).map_or(n, |t| t.complete(&mut frames[..max], n));
    // SAFETY: the walk and its completion wrote the first n entries.
    let walked = unsafe { core::slice::from_raw_parts(frames.as_ptr() as *const u64, n) };
    let from = walked.iter().position(|&pc| pc == from).unwrap_or(0);
    let Some(t) = contexts_mut(st) else {
        return core::ptr::null();
    };
    let opened = &mut t.opened[depth];
    opened.len = n - from;
    opened.frames[..n - from].copy_from_slice(&walked[from..]);
    opened.team = &t.forked[depth];
    opened.boundary = boundary;
    opened
}

/// A thread of the team (the encountering one too) begins the region's
/// implicit task: the region's context is its own until the task ends.
fn begin_task(st: &mut ThreadState, opened: *const Context, worker: bool) {
    let Some(t) = contexts_mut(st) else {
        return;
    };
    let depth = t.depth;
    t.depth += 1;
    if depth < DEPTH {
        // SAFETY: the encountering thread keeps the context until the
        // region ends, after every task of its team has begun.
        let context = unsafe { opened.as_ref() }.copied().unwrap_or(NO_CONTEXT);
        let added = counts_with_teams(st);
        if let Some(t) = contexts_mut(st) {
            t.running[depth] = Running {
                context,
                worker,
                added,
            };
        }
    }
}

/// The task ends: a worker's counts go to the team's tally (before the
/// region's closing barrier lets the encountering thread go on).
fn end_task(st: &mut ThreadState) {
    add_to_team(st);
    if let Some(t) = contexts_met(st) {
        t.depth = t.depth.saturating_sub(1);
    }
}

/// OMPT, on the encountering thread.
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
    if !parallel.is_null() {
        let boundary = Boundary {
            start: INVOKER_START.load(Ordering::Relaxed),
            end: INVOKER_END.load(Ordering::Relaxed),
            keep: true,
        };
        (*parallel).ptr = open_region(st, codeptr_ra as u64, boundary) as *mut c_void;
    }
    guard::leave(st);
}

/// OMPT, on each thread of the team.
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
            // A region opened past the kept depth has no context (null).
            let opened = parallel
                .as_ref()
                .map_or(core::ptr::null(), |p| p.ptr as *const Context);
            begin_task(st, opened, index != 0);
        }
        SCOPE_END => end_task(st),
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

// GCC's libgomp offers no OMPT: its calls that start a team are interposed
// instead (the runtime is preloaded ahead of it), and each region's body
// runs through `run_task` on every thread of the team, which takes the
// region's context around it. Where libomp serves these calls (its GOMP
// compatibility layer) OMPT already does this: they pass straight through.

/// A region's outlined body.
type Body = unsafe extern "C" fn(*mut c_void);

/// What `run_task` gets in place of the body's data: the body, its data,
/// and the context the team takes.
struct Fork {
    body: Body,
    data: *mut c_void,
    opened: *const Context,
    master: u32,
}

/// The code of the library that serves the GOMP calls: [start, end).
static GOMP_START: AtomicU64 = AtomicU64::new(0);
static GOMP_END: AtomicU64 = AtomicU64::new(0);

unsafe extern "C" fn run_task(fork: *mut c_void) {
    // SAFETY: the encountering thread's `Fork`, alive until its call returns
    // (after the whole team's tasks).
    let fork = &*(fork as *const Fork);
    let began = match guard::enter() {
        Some(st) => {
            let worker = st.tid != fork.master;
            begin_task(st, fork.opened, worker);
            guard::leave(st);
            true
        }
        None => false,
    };
    (fork.body)(fork.data);
    if let Some(st) = guard::enter().filter(|_| began) {
        end_task(st);
        guard::leave(st);
    }
}

/// The encountering thread's `Fork` for a region about to start, called
/// from `caller` (the fork's return address), or none: not recording, or
/// OMPT (libomp) tells the region already.
fn fork_here(body: Body, data: *mut c_void, caller: u64, real: usize) -> Option<Fork> {
    if INVOKER_START.load(Ordering::Relaxed) != 0 {
        return None;
    }
    let st = guard::enter()?;
    if GOMP_END.load(Ordering::Relaxed) == 0 {
        let (start, end) = crate::modules::code_range(real as u64);
        GOMP_START.store(start, Ordering::Relaxed);
        GOMP_END.store(end, Ordering::Relaxed);
    }
    let boundary = Boundary {
        start: GOMP_START.load(Ordering::Relaxed),
        end: GOMP_END.load(Ordering::Relaxed),
        keep: false,
    };
    let opened = open_region(st, caller, boundary);
    let master = st.tid;
    guard::leave(st);
    Some(Fork {
        body,
        data,
        opened,
        master,
    })
}

/// The next definition of a GOMP entry point (libgomp's), looked up once.
fn next_definition(cache: &core::sync::atomic::AtomicUsize, name: &CStr) -> usize {
    let mut f = cache.load(Ordering::Relaxed);
    if f == 0 {
        // SAFETY: dlsym with a NUL-terminated name.
        f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
        if f == 0 {
            // The program called it, so it was linked against a library
            // defining it: only a broken install gets here.
            let message =
                b"memlens: no OpenMP runtime defines a GOMP entry point the program calls\n";
            // SAFETY: plain libc calls.
            unsafe {
                libc::write(2, message.as_ptr().cast(), message.len());
                libc::abort();
            }
        }
        cache.store(f, Ordering::Relaxed);
    }
    f
}

/// Declares the interposed GOMP entry point `name(body, data, args...)`.
macro_rules! gomp_fork {
    ($($name:ident($($arg:ident: $ty:ty),*);)*) => {$(
        /// # Safety
        /// libgomp's contract.
        #[no_mangle]
        pub unsafe extern "C" fn $name(body: Body, data: *mut c_void, $($arg: $ty),*) {
            static NEXT: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
            let name = CStr::from_bytes_with_nul_unchecked(concat!(stringify!($name), "\0").as_bytes());
            let real = next_definition(&NEXT, name);
            let next: unsafe extern "C" fn(Body, *mut c_void, $($ty),*) = core::mem::transmute(real);
            match fork_here(body, data, crate::unwind::return_address(), real) {
                Some(fork) => next(run_task, &fork as *const Fork as *mut c_void, $($arg),*),
                None => next(body, data, $($arg),*),
            }
        }
    )*};
}

gomp_fork! {
    GOMP_parallel(threads: c_uint, flags: c_uint);
    GOMP_parallel_sections(threads: c_uint, count: c_uint, flags: c_uint);
    GOMP_parallel_loop_static(threads: c_uint, start: c_long, end: c_long, incr: c_long, chunk: c_long, flags: c_uint);
    GOMP_parallel_loop_dynamic(threads: c_uint, start: c_long, end: c_long, incr: c_long, chunk: c_long, flags: c_uint);
    GOMP_parallel_loop_guided(threads: c_uint, start: c_long, end: c_long, incr: c_long, chunk: c_long, flags: c_uint);
    GOMP_parallel_loop_nonmonotonic_dynamic(threads: c_uint, start: c_long, end: c_long, incr: c_long, chunk: c_long, flags: c_uint);
    GOMP_parallel_loop_nonmonotonic_guided(threads: c_uint, start: c_long, end: c_long, incr: c_long, chunk: c_long, flags: c_uint);
    GOMP_parallel_loop_runtime(threads: c_uint, start: c_long, end: c_long, incr: c_long, flags: c_uint);
    GOMP_parallel_loop_nonmonotonic_runtime(threads: c_uint, start: c_long, end: c_long, incr: c_long, flags: c_uint);
    GOMP_parallel_loop_maybe_nonmonotonic_runtime(threads: c_uint, start: c_long, end: c_long, incr: c_long, flags: c_uint);
}

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
mod annotate;
mod clock;
mod early;
mod events;
mod guard;
mod init;
mod libc_calls;
mod lifecycle;
mod log;
mod malloc;
mod mmap;
mod model;
mod modules;
mod openmp;
mod process;
mod sampler;
mod settings;
mod stage;
mod sys;
mod thread;
mod track;
mod unwind;
mod ways;

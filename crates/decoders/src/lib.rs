//! Decoders of what hardware samplers write, shared by `memlens import` (perf.data
//! files) and the live perf_event backends: Arm SPE packets and records, perf's
//! memory data-source encoding, AMD IBS op registers, perf sample records and
//! the perf.data container.
//! All take untrusted bytes and return errors or counts, never panic.

pub mod bytes;
pub mod datasrc;
pub mod ibs;
pub mod perf_data;
pub mod record;
pub mod sample;
pub mod spe;

/// The levels are the raw log's codes, shared with the runtime's cache model.
pub use memlens_rawlog::level::{self, MemLevel};

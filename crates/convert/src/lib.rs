//! What `memlens record` (finalize, live view) and `memlens import` share to
//! turn what the kernel and the binaries say into profile rows, as samply
//! shares its converter and symbol crates between its recorder and importer:
//! `perf` converts perf.data records (PEBS, IBS, Arm SPE, page faults) into
//! access samples and losses; `symbols` names code addresses (addr2line) and
//! finds static data objects in ELF symbol tables.

pub mod perf;
pub mod symbols;

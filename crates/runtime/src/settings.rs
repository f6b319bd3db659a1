//! The configuration the runtime runs with (read from `MEMLENS_*` by
//! `init`), and the log it opens with it.

use crate::{log, sys};
use core::ffi::CStr;
use memlens_rawlog::{self as raw, RuntimeSettings};

pub(crate) static mut SETTINGS: RuntimeSettings = RuntimeSettings::DEFAULT;

pub(crate) static mut DIR: [u8; 4096] = [0; 4096];

pub(crate) static mut DIR_LEN: usize = 0;

pub(crate) static mut INTERVAL_MS: u64 = 10;

pub(crate) static mut OWN_SAMPLER: bool = false;

pub(crate) fn settings() -> &'static RuntimeSettings {
    // SAFETY: written once during init and in the fork child, read-only otherwise.
    unsafe { &*core::ptr::addr_of!(SETTINGS) }
}

pub(crate) fn env(name: &CStr) -> Option<&'static [u8]> {
    // SAFETY: getenv does not allocate; the environment outlives us.
    let p = unsafe { libc::getenv(name.as_ptr()) };
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_bytes())
}

fn mpi_rank() -> i32 {
    for var in [
        c"OMPI_COMM_WORLD_RANK",
        c"PMIX_RANK",
        c"PMI_RANK",
        c"SLURM_PROCID",
    ] {
        if let Some(n) = env(var).and_then(raw::parse_size) {
            return n.min(i32::MAX as u64) as i32;
        }
    }
    -1
}

/// Opens this process's log in the profile directory.
pub(crate) unsafe fn open_log(ppid: u32) -> bool {
    let dir = &(&*core::ptr::addr_of!(DIR))[..DIR_LEN];
    log::open(dir, sys::getpid(), ppid, mpi_rank(), *settings())
}

//! A runtime's raw log through the finalizer and the report, as `memlens report`
//! runs them on a directory a killed collector left. A real log is 320 KiB at
//! least (header and one block), past what libFuzzer mutates well, so inputs are
//! packed: the first `HEADER_PREFIX` bytes start the header, each next `CHUNK`
//! bytes start one block, and the rest of header and blocks is zero (what an
//! untouched mapping of the log reads as).
#![no_main]
use libfuzzer_sys::fuzz_target;
use memlens_collector::{finalize, RunInfo};
use memlens_present::{build_report, ReportOptions};
use memlens_analysis::Profile;
use memlens_rawlog::{BLOCK_SIZE, HEADER_SIZE};

const HEADER_PREFIX: usize = 1024;
const CHUNK: usize = 4096;

fn unpack(data: &[u8]) -> Vec<u8> {
    let (header, blocks) = data.split_at(data.len().min(HEADER_PREFIX));
    let mut log = vec![0u8; HEADER_SIZE];
    log[..header.len()].copy_from_slice(header);
    for chunk in blocks.chunks(CHUNK) {
        let start = log.len();
        log.resize(start + BLOCK_SIZE, 0);
        log[start..start + chunk.len()].copy_from_slice(chunk);
    }
    log
}

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().expect("temporary directory");
    let raw = dir.path().join("raw");
    std::fs::create_dir(&raw).expect("raw directory");
    std::fs::write(raw.join("1.0.mlraw"), unpack(data)).expect("log written");
    if finalize(dir.path(), &RunInfo::default(), false, &|_, _| {}).is_err() {
        return;
    }
    if let Ok(profile) = Profile::load(dir.path()) {
        let _ = build_report(&profile, &ReportOptions::default());
    }
});

//! libFuzzer target: a runtime's raw log, finalized and reported ([`memlens_fuzz::raw_log`]).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    memlens_fuzz::raw_log(data);
});

//! libFuzzer target: a whole perf.data, read and converted ([`memlens_fuzz::perf_data`]).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    memlens_fuzz::perf_data(data);
});

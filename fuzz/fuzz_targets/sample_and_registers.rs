//! libFuzzer target: perf sample bodies, IBS registers and data sources ([`memlens_fuzz::sample_and_registers`]).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    memlens_fuzz::sample_and_registers(data);
});

//! libFuzzer target: Arm SPE packets and records ([`memlens_fuzz::spe_decoder`]).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    memlens_fuzz::spe_decoder(data);
});

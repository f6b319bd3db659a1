//! A whole perf.data through what `memlens import` and `memlens record` run:
//! the container reader, the features, and the conversion of every record
//! (samples, SPE AUX data, mappings, losses) into memlens samples.
#![no_main]
use libfuzzer_sys::fuzz_target;
use memlens_collector::perf::convert::{convert, first_time};
use memlens_decoders::perf_data::PerfData;

fuzz_target!(|data: &[u8]| {
    let Ok(perf) = PerfData::parse(data) else {
        return;
    };
    let _ = (perf.cmdline(), perf.pmu_mappings(), perf.build_ids());
    let _ = first_time(&perf);
    let mut rows = 0u64;
    let c = convert(&perf, |_| rows += 1);
    assert_eq!(c.summary.samples, rows);
});

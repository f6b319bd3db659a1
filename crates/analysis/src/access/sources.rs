//! What a profile's samples are: the backends that took them, whether they
//! are loads and stores with sizes, what a period counts, and the error
//! bound of a figure scaled from them.

use memlens_profile::Backend;

/// The backends of a profile that produced access samples.
pub fn sample_sources(meta: &memlens_profile::Meta) -> Vec<Backend> {
    meta.backends().filter(|b| b.samples_accesses()).collect()
}

/// Whether samples from `sources` are loads and stores (page faults are
/// neither, and count no bytes).
pub fn samples_are_accesses(sources: &[Backend]) -> bool {
    sources.iter().any(|s| *s != Backend::PageFaults)
}

/// Whether samples from `sources` carry their access size (instrumented
/// code): hardware samples seldom do, and page faults count no bytes.
pub fn samples_are_sized(sources: &[Backend]) -> bool {
    sources.contains(&Backend::Instrumented)
}

/// The relative error bound, at 95% confidence, of a figure scaled from
/// `samples` samples taken one access in `period`: sampling is binomial, so
/// the count's relative standard error is about 1/sqrt(samples) (NMO states
/// its accuracy the same way); 0 when every access is a sample, none when no
/// sample was taken (the figure's error is then unbounded relative to it).
pub fn sampling_error(samples: u64, period: u64) -> Option<f64> {
    match (samples, period) {
        (0, _) => None,
        (_, 0 | 1) => Some(0.0),
        (n, _) => Some(1.96 / (n as f64).sqrt()),
    }
}

/// What one sample period counts, for a profile's sample sources.
pub fn period_unit(sources: &[Backend]) -> &'static str {
    match sources.first() {
        Some(Backend::Instrumented) => "accesses of a class",
        Some(Backend::PageFaults) => "page faults (first touches of pages, not every access)",
        _ => "sampled operations",
    }
}

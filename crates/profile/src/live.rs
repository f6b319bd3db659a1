//! What `memlens record --live` shows at each update: computed by the
//! collector while the program runs, written as lines by the presentation.

/// What the live view shows at one update.
#[derive(Clone, Debug, Default)]
pub struct LiveView {
    /// Time since the recording started.
    pub elapsed_ns: u64,
    pub resident_bytes: u64,
    pub heap_bytes: u64,
    /// Exact bytes read and written per second since the last update
    /// (instrumented code only; `None` when nothing was counted).
    pub bandwidth: Option<(f64, f64)>,
    pub processes: usize,
    /// The sites holding the most live memory, most first.
    pub sites: Vec<LiveSite>,
}

#[derive(Clone, Debug)]
pub struct LiveSite {
    /// "heap", "mmap" or "group".
    pub kind: &'static str,
    pub label: String,
    pub bytes: f64,
    pub blocks: f64,
    /// Byte-sampled allocations scaled by 1/p (not exact sizes).
    pub estimated: bool,
}

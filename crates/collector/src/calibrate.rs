//! `memlens calibrate`: the latency of a load at each working-set size and the
//! streaming bandwidth of this machine, in the spirit of LMbench's lat_mem_rd
//! and bw_mem (Arm SPE methodology, section 4). The chase follows one random cycle through
//! the buffer's cache lines, so every load depends on the one before and the
//! prefetchers cannot guess the next line; the buffer asks for huge pages so
//! that TLB misses weigh on the large sizes as little as they can.

use crate::sysinfo;
use memlens_profile::{BandwidthPoint, CacheLevel, Calibration, LatencyPoint, LevelLatency};
use std::hint::black_box;
use std::time::{Duration, Instant};

pub struct Options {
    /// Largest working set of the latency curve, and the bandwidth buffer.
    pub max_bytes: u64,
    /// Threads of the second bandwidth run (the first uses one).
    pub threads: usize,
}

impl Options {
    /// Four times the last cache (to reach DRAM), at least 256 MiB, at most
    /// 1 GiB and a quarter of the memory.
    pub fn for_machine(caches: &[CacheLevel]) -> Options {
        let last = caches.iter().map(|c| c.size).max().unwrap_or(32 << 20);
        let quarter_of_ram = physical_memory() / 4;
        Options {
            max_bytes: (4 * last).clamp(256 << 20, 1 << 30).min(quarter_of_ram),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

fn physical_memory() -> u64 {
    // SAFETY: sysconf reads system constants.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages.max(0) as u64).saturating_mul(page.max(0) as u64)
}

/// Time spent measuring each point (after a warm-up pass).
const POINT_TIME: Duration = Duration::from_millis(40);

/// Runs of each bandwidth figure, interleaved round by round so that a moment
/// of other load falls on one run of several figures rather than on every run
/// of one.
const BANDWIDTH_RUNS: usize = 7;
/// Time of one bandwidth run (at least two passes over the buffer).
const RUN_TIME: Duration = Duration::from_millis(40);
/// Widest spread of a bandwidth figure's runs, (fastest - slowest) / median,
/// that is stored: beyond it the machine was busy and the median is a guess.
pub const MAX_BANDWIDTH_SPREAD: f64 = 0.25;

/// What `memlens calibrate` measured: the calibration to save, and the
/// bandwidth figures left out of it because their runs disagreed.
pub struct Measured {
    pub calibration: Calibration,
    pub refused: Vec<BandwidthPoint>,
}

/// Measures the curve and the bandwidth; `progress` hears of each step (what,
/// working-set bytes).
pub fn calibrate(opts: &Options, mut progress: impl FnMut(&str, u64)) -> std::io::Result<Measured> {
    let caches = sysinfo::cache_levels();
    let line = caches.first().map_or(64, |c| c.line.max(8)) as usize;
    let mut buf = Buffer::new(opts.max_bytes as usize)?;
    let mut latency = Vec::new();
    for bytes in working_sets(opts.max_bytes) {
        progress("latency", bytes);
        let ns = chase_ns(buf.words(bytes as usize), line / 8);
        latency.push(LatencyPoint { bytes, ns });
    }
    // One thread, then all of them when there are more.
    let mut thread_counts = vec![1];
    if opts.threads > 1 {
        thread_counts.push(opts.threads);
    }
    let figures: Vec<(&str, usize)> = (thread_counts.into_iter())
        .flat_map(|threads| ["read", "write", "copy"].map(|kind| (kind, threads)))
        .collect();
    let mut runs = vec![Vec::with_capacity(BANDWIDTH_RUNS); figures.len()];
    for round in 0..BANDWIDTH_RUNS {
        progress(
            &format!("bandwidth, run {} of {BANDWIDTH_RUNS},", round + 1),
            opts.max_bytes,
        );
        for (&(kind, threads), runs) in figures.iter().zip(&mut runs) {
            runs.push(stream(kind, buf.words(opts.max_bytes as usize), threads));
        }
    }
    let (bandwidth, refused): (Vec<BandwidthPoint>, Vec<BandwidthPoint>) = figures
        .iter()
        .zip(runs)
        .map(|(&(kind, threads), runs)| BandwidthPoint {
            kind: kind.to_string(),
            threads: threads as u32,
            ..summarize_runs(&runs, opts.max_bytes)
        })
        .partition(|b| b.spread() <= MAX_BANDWIDTH_SPREAD);
    let levels = plateaus(&caches, &latency);
    let calibration = Calibration {
        host: sysinfo::hostname(),
        cpu: sysinfo::cpu_model(),
        kernel: sysinfo::kernel(),
        memlens_version: env!("CARGO_PKG_VERSION").to_string(),
        method: format!(
            "measured: dependent loads over a random cycle of {line}-byte lines (as lat_mem_rd, prefetching defeated), at least {} ms per size; streaming read/write/copy of {} MiB (as bw_mem), the median of {BANDWIDTH_RUNS} runs of {} ms each, interleaved, a figure kept only when its runs spread at most {:.0}%",
            POINT_TIME.as_millis(),
            opts.max_bytes >> 20,
            RUN_TIME.as_millis(),
            MAX_BANDWIDTH_SPREAD * 100.0
        ),
        knees: knees(&latency),
        caches,
        latency,
        levels,
        bandwidth,
    };
    Ok(Measured {
        calibration,
        refused,
    })
}

/// A figure from its runs' GiB/s: the median, and the runs in order.
fn summarize_runs(runs: &[f64], bytes: u64) -> BandwidthPoint {
    let mut sorted = runs.to_vec();
    sorted.sort_unstable_by(f64::total_cmp);
    BandwidthPoint {
        bytes,
        gib_per_s: sorted.get(sorted.len() / 2).copied().unwrap_or(0.0),
        runs_gib_per_s: sorted,
        ..BandwidthPoint::default()
    }
}

/// 4 KiB to `max`, two sizes per doubling.
fn working_sets(max: u64) -> Vec<u64> {
    let mut sizes = Vec::new();
    let mut size = 4096u64;
    while size <= max {
        sizes.push(size);
        let between = (size + size / 2) / 4096 * 4096;
        if between < max {
            sizes.push(between);
        }
        size *= 2;
    }
    if sizes.last() != Some(&max) && max >= 4096 {
        sizes.push(max);
    }
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// Mean ns of one load chasing a random cycle through the lines of `words`.
fn chase_ns(words: &mut [usize], stride: usize) -> f64 {
    let lines = words.len() / stride;
    if lines < 2 {
        return 0.0;
    }
    // Sattolo's shuffle: a single cycle through every line.
    let mut order: Vec<u32> = (0..lines as u32).collect();
    let mut rng = fastrand::Rng::with_seed(lines as u64);
    for i in (1..lines).rev() {
        order.swap(i, rng.usize(..i));
    }
    for (i, &next) in order.iter().enumerate() {
        words[i * stride] = next as usize * stride;
    }
    drop(order);
    let walk = |steps: usize| {
        let mut at = 0usize;
        for _ in 0..steps {
            at = words[at];
        }
        black_box(at)
    };
    walk(lines.min(1 << 22)); // warm-up: caches and TLB as in the steady state
    let chunk = 1 << 16;
    let (mut steps, start) = (0usize, Instant::now());
    while start.elapsed() < POINT_TIME || steps < lines.min(1 << 20) {
        walk(chunk);
        steps += chunk;
    }
    start.elapsed().as_nanos() as f64 / steps as f64
}

/// Streaming `kind` over `words` split among `threads`, repeated for
/// RUN_TIME: GiB the program moved per second.
fn stream(kind: &str, words: &mut [usize], threads: usize) -> f64 {
    let bytes = std::mem::size_of_val(words) as u64;
    let per_thread = words.len().div_ceil(threads);
    let start = Instant::now();
    let mut passes = 0u64;
    while start.elapsed() < RUN_TIME || passes < 2 {
        std::thread::scope(|s| {
            for part in words.chunks_mut(per_thread) {
                s.spawn(move || match kind {
                    "read" => {
                        black_box(part.iter().fold(0usize, |a, &w| a.wrapping_add(w)));
                    }
                    "write" => part.fill(passes as usize),
                    _ => {
                        let (from, to) = part.split_at_mut(part.len() / 2);
                        to[..from.len()].copy_from_slice(from);
                    }
                });
            }
        });
        passes += 1;
    }
    // A copy reads half the buffer and writes the other half.
    (bytes * passes) as f64 / start.elapsed().as_secs_f64() / (1u64 << 30) as f64
}

/// Each cache's plateau: the median latency of the sizes between twice the
/// level below and half this one (the fill of a set-associative cache is
/// uneven near its capacity); DRAM from twice the last cache on.
pub fn plateaus(caches: &[CacheLevel], latency: &[LatencyPoint]) -> Vec<LevelLatency> {
    let mut bounds: Vec<(String, u64, u64)> = Vec::new();
    let mut below = 0u64;
    for c in caches {
        bounds.push((c.name.clone(), 2 * below, c.size / 2));
        below = c.size;
    }
    bounds.push(("DRAM".into(), 2 * below.max(1), u64::MAX));
    bounds
        .into_iter()
        .filter_map(|(name, from, to)| {
            let mut ns: Vec<(u64, f64)> = latency
                .iter()
                .filter(|p| p.bytes >= from && p.bytes <= to)
                .map(|p| (p.bytes, p.ns))
                .collect();
            let (first, last) = (ns.first()?.0, ns.last()?.0);
            ns.sort_by(|a, b| a.1.total_cmp(&b.1));
            Some(LevelLatency {
                name,
                ns: ns[ns.len() / 2].1,
                from_bytes: first,
                to_bytes: last,
                points: ns.len() as u32,
            })
        })
        .collect()
}

/// Sizes after which the latency rose by half or more over the highest seen so
/// far; a rise over consecutive sizes is one knee, at its start.
fn knees(latency: &[LatencyPoint]) -> Vec<u64> {
    let mut out = Vec::new();
    let mut highest = latency.first().map_or(0.0, |p| p.ns);
    let mut rising = false;
    for w in latency.windows(2) {
        let knee = w[1].ns > 1.5 * highest;
        if knee && !rising {
            out.push(w[0].bytes);
        }
        rising = knee;
        highest = highest.max(w[1].ns);
    }
    out
}

/// An anonymous mapping, huge pages asked for.
struct Buffer(memmap2::MmapMut);

impl Buffer {
    fn new(bytes: usize) -> std::io::Result<Buffer> {
        let map = memmap2::MmapMut::map_anon(bytes.max(4096))?;
        // Failure only means small pages.
        let _ = map.advise(memmap2::Advice::HugePage);
        Ok(Buffer(map))
    }

    /// The first `bytes` of the buffer as words.
    fn words(&mut self, bytes: usize) -> &mut [usize] {
        let n = bytes.min(self.0.len()) / std::mem::size_of::<usize>();
        // SAFETY: the mapping is page-aligned and at least n words long; any
        // bit pattern is a usize.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_mut_ptr().cast(), n) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(name: &str, size: u64) -> CacheLevel {
        CacheLevel {
            name: name.into(),
            size,
            ..CacheLevel::default()
        }
    }

    #[test]
    fn plateaus_take_the_sizes_each_level_holds() {
        let caches = [level("L1d", 32 << 10), level("L2", 1 << 20)];
        let curve: Vec<LatencyPoint> = working_sets(16 << 20)
            .into_iter()
            .map(|bytes| LatencyPoint {
                bytes,
                ns: match bytes {
                    b if b <= 32 << 10 => 1.0,
                    b if b <= 1 << 20 => 4.0,
                    _ => 80.0,
                },
            })
            .collect();
        let got: Vec<(String, f64, u64, u64)> = plateaus(&caches, &curve)
            .into_iter()
            .map(|l| (l.name, l.ns, l.from_bytes, l.to_bytes))
            .collect();
        assert_eq!(
            got,
            [
                ("L1d".to_string(), 1.0, 4 << 10, 16 << 10),
                ("L2".to_string(), 4.0, 64 << 10, 512 << 10),
                ("DRAM".to_string(), 80.0, 2 << 20, 16 << 20),
            ]
        );
        assert_eq!(knees(&curve), [32 << 10, 1 << 20]);
    }

    #[test]
    fn a_bandwidth_figure_is_the_median_run_and_kept_only_when_runs_agree() {
        let steady = summarize_runs(&[10.0, 10.4, 9.8, 10.1, 9.9, 10.2, 10.0], 1 << 28);
        assert_eq!(steady.gib_per_s, 10.0);
        assert_eq!(
            steady.runs_gib_per_s,
            [9.8, 9.9, 10.0, 10.0, 10.1, 10.2, 10.4]
        );
        assert!((steady.spread() - 0.03).abs() < 1e-9, "{}", steady.spread());
        // One run of a busy moment moves neither the median nor the spread.
        let one_busy = summarize_runs(&[1.78, 10.4, 9.8, 10.1, 9.9, 10.2, 10.0], 1 << 28);
        assert_eq!(one_busy.gib_per_s, 10.0);
        assert!(one_busy.spread() <= MAX_BANDWIDTH_SPREAD);
        // Runs that disagree among themselves (the machine busy throughout,
        // or a figure that changes from run to run) are refused.
        let busy = summarize_runs(&[1.78, 24.5, 16.9, 14.9, 9.0, 12.0, 20.0], 1 << 28);
        assert!(busy.spread() > MAX_BANDWIDTH_SPREAD, "{}", busy.spread());
    }
}

//! Reuse distance (DrCCTProf's reuse client; docs/references.md): for each access, the
//! number of distinct cache lines its thread touched since its previous access
//! to the same line (Mattson's stack distance; an access hits a fully
//! associative LRU cache of C lines exactly when its distance is below C).
//!
//! It needs the whole access stream of the lines it follows, which two kinds of
//! instrumented profiles have:
//! - every access (`memlens record --reuse`, or `--period 1`): exact;
//! - every access to one line in N, the lines chosen by address hash
//!   (`memlens record --reuse N`): SHARDS (Waldspurger et al., FAST 2015). The
//!   chosen lines' distances among themselves are exact; as the lines are a
//!   uniform 1-in-N draw, each stands for about N lines, so distances and
//!   counts are scaled. The scale is the exact access count over the sampled
//!   one rather than N (SHARDS-adj's correction: a draw that chose lines with
//!   more or fewer accesses than 1 in N scales accordingly). The estimate's
//!   error is that of the draw: small once thousands of lines are chosen,
//!   large for objects of few lines.
//!
//! Samples of 1 access in N (the default, and every hardware sampler) do not
//! hold a line's next access, so they give no reuse distance.
//!
//! Distances are per thread: another thread's accesses neither count between a
//! use and its reuse nor make one.

use crate::access::{attribute, exact_totals, location_label, samples_per_thread};
use crate::sharing::LINE;
use crate::{ObjectKind, Objects, Profile};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::HashMap;

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema, PartialEq)]
pub struct Bin {
    /// Distances in [from, to) distinct lines.
    pub from: u64,
    pub to: u64,
    pub reuses: f64,
}

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema, PartialEq)]
pub struct Histogram {
    pub accesses: f64,
    /// First accesses to a line on the thread (no previous use).
    pub cold: f64,
    pub reuses: f64,
    pub mean_distance: Option<f64>,
    /// Power-of-two bins that hold reuses: [0,1), [1,2), [2,4), ...
    pub bins: Vec<Bin>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct ObjectReuse {
    pub pid: u32,
    pub name: String,
    pub kind: Option<ObjectKind>,
    pub histogram: Histogram,
}

/// A code location pair: an access (use) and the next access of its thread to
/// the same line (reuse), with the object the line belongs to at the reuse.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct ReusePair {
    pub pid: u32,
    pub object: String,
    pub use_location: String,
    pub reuse_location: String,
    /// The full calling contexts of the pair's most frequent use and reuse
    /// (access first, then callers; empty without contexts).
    pub use_context: Vec<String>,
    pub reuse_context: Vec<String>,
    pub min_distance: f64,
    pub max_distance: f64,
    /// The pair's reuses (all of its accesses are reuses: `cold` is 0).
    pub histogram: Histogram,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct ReuseReport {
    /// How the distances were obtained.
    pub method: String,
    /// Every access followed (no scaling).
    pub exact: bool,
    /// Each followed line stands for this many (1: exact).
    pub scale: f64,
    pub line_bytes: u64,
    pub all: Histogram,
    /// Objects with the most reuses first.
    pub objects: Vec<ObjectReuse>,
    /// Use/reuse pairs with the most reuses first.
    pub pairs: Vec<ReusePair>,
}

/// Power-of-two bin of a distance: 0 -> 0, [2^(k-1), 2^k) -> k.
fn bin_of(distance: u64) -> usize {
    (u64::BITS - distance.leading_zeros()) as usize
}

fn bin_bounds(bin: usize) -> (u64, u64) {
    match bin {
        0 => (0, 1),
        k => (1 << (k - 1), 1 << k),
    }
}

/// Counts per bin of distances (already scaled), before the counts are.
#[derive(Clone, Default)]
struct Tally {
    accesses: u64,
    cold: u64,
    distance_sum: u128,
    bins: Vec<u64>,
}

impl Tally {
    fn add(&mut self, distance: Option<u64>) {
        self.accesses += 1;
        match distance {
            None => self.cold += 1,
            Some(d) => {
                let b = bin_of(d);
                if self.bins.len() <= b {
                    self.bins.resize(b + 1, 0);
                }
                self.bins[b] += 1;
                self.distance_sum += u128::from(d);
            }
        }
    }

    fn merge(&mut self, other: &Tally) {
        self.accesses += other.accesses;
        self.cold += other.cold;
        self.distance_sum += other.distance_sum;
        if self.bins.len() < other.bins.len() {
            self.bins.resize(other.bins.len(), 0);
        }
        for (to, from) in self.bins.iter_mut().zip(&other.bins) {
            *to += from;
        }
    }

    /// The histogram with each followed line standing for `s` lines.
    fn histogram(&self, s: f64) -> Histogram {
        let reuses = self.accesses - self.cold;
        let bins = self
            .bins
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(b, &n)| {
                let (from, to) = bin_bounds(b);
                Bin {
                    from,
                    to,
                    reuses: n as f64 * s,
                }
            })
            .collect();
        Histogram {
            accesses: self.accesses as f64 * s,
            cold: self.cold as f64 * s,
            reuses: reuses as f64 * s,
            mean_distance: (reuses > 0).then(|| self.distance_sum as f64 / reuses as f64),
            bins,
        }
    }
}

/// Stack distances of one thread's stream: a Fenwick tree over stream positions
/// marks each line's latest access, so the distinct lines since a line's
/// previous access are the marks after it (O(log n) per access).
struct Stream {
    marks: Vec<u32>,
    next: usize,
    /// Per line: the position, PC and calling context of its last access.
    last: FxHashMap<u64, (usize, Site)>,
}

impl Stream {
    fn new(len: usize) -> Self {
        Stream {
            marks: vec![0; len + 1],
            next: 0,
            last: FxHashMap::default(),
        }
    }

    fn update(&mut self, pos: usize, delta: i32) {
        let mut i = pos + 1;
        while i < self.marks.len() {
            self.marks[i] = self.marks[i].wrapping_add_signed(delta);
            i += i & i.wrapping_neg();
        }
    }

    /// Marks at positions [0, pos).
    fn before(&self, pos: usize) -> u64 {
        let mut i = pos;
        let mut sum = 0u64;
        while i > 0 {
            sum += u64::from(self.marks[i]);
            i -= i & i.wrapping_neg();
        }
        sum
    }

    /// The distance of an access to `line` from `site`, and the site of the
    /// previous access to the line (None: its first access).
    fn access(&mut self, line: u64, site: Site) -> Option<(u64, Site)> {
        let pos = self.next;
        self.next += 1;
        let previous = self.last.insert(line, (pos, site));
        let out = previous.map(|(before, use_site)| {
            let between = self.before(pos) - self.before(before + 1);
            self.update(before, -1);
            (between, use_site)
        });
        self.update(pos, 1);
        out
    }
}

/// How the profile's samples give reuse distances: (exact, scale, method), or
/// why they give none.
fn method(p: &Profile) -> Result<(bool, f64, String), String> {
    let s = &p.meta.settings;
    if !p.meta.has(memlens_profile::Backend::Instrumented) {
        return Err("needs an instrumented build's access stream (memlens cc, then memlens record --reuse): hardware samples hold no line's next access".into());
    }
    let only = match (s.sample_loads, s.sample_stores) {
        (true, false) => " (loads only)",
        (false, true) => " (stores only)",
        _ => "",
    };
    match (s.sample_lines, s.access_period.max(1)) {
        (_, 1) => Ok((
            true,
            1.0,
            format!("exact: every access{only}, per thread, {LINE}-byte lines"),
        )),
        (true, n) => {
            // The exact count of the sampled classes over the samples.
            let t = exact_totals(p);
            let counted = (t.loads * s.sample_loads as u64)
                .saturating_add(t.stores * s.sample_stores as u64);
            let scale = if counted > 0 && !p.samples.is_empty() {
                counted as f64 / p.samples.len() as f64
            } else {
                n as f64
            };
            Ok((
                false,
                scale,
                format!(
                    "estimated (SHARDS): every access{only} to 1 line in {n} chosen by address hash, counts and distances x{scale:.2} (accesses counted / sampled); per thread, {LINE}-byte lines"
                ),
            ))
        }
        (false, n) => Err(format!(
            "samples are 1 access in {n}, which do not hold a line's next access: record with `memlens record --reuse` (every access) or `--reuse N` (every access to 1 line in N)"
        )),
    }
}

/// Where an access came from: its PC and calling context (0: none).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Site {
    pc: u64,
    stack: u64,
}

/// One use/reuse pair's distances: their histogram and extremes, and how
/// often each (use context, reuse context) gave it.
#[derive(Default)]
struct PairTally {
    distances: Tally,
    min: u64,
    max: u64,
    contexts: FxHashMap<(u64, u64), u64>,
}

impl PairTally {
    fn add(&mut self, d: u64, contexts: (u64, u64)) {
        *self.contexts.entry(contexts).or_default() += 1;
        self.min = if self.distances.accesses == 0 {
            d
        } else {
            self.min.min(d)
        };
        self.max = self.max.max(d);
        self.distances.add(Some(d));
    }

    fn merge(&mut self, other: &PairTally) {
        self.min = if self.distances.accesses == 0 {
            other.min
        } else {
            self.min.min(other.min)
        };
        self.max = self.max.max(other.max);
        self.distances.merge(&other.distances);
        for (&k, &n) in &other.contexts {
            *self.contexts.entry(k).or_default() += n;
        }
    }

    /// The most frequent (use, reuse) contexts.
    fn usual_contexts(&self) -> (u64, u64) {
        (self.contexts.iter())
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
            .map_or((0, 0), |(&k, _)| k)
    }
}

/// Reuse distances of the profile's samples, or why there are none.
pub fn reuse_distances(p: &Profile, objects: &Objects, top: usize) -> Result<ReuseReport, String> {
    let (exact, scale, method) = method(p)?;
    if p.samples.is_empty() {
        return Err("no access samples".into());
    }
    // Looked up for every sample: the fast hash.
    let mut streams: FxHashMap<(u32, u32), Stream> = samples_per_thread(p)
        .into_iter()
        .map(|(key, len)| (key, Stream::new(len)))
        .collect();
    let mut all = Tally::default();
    // Unattributed samples: one "unknown" row per process.
    let mut by_object: FxHashMap<(u32, Option<usize>), Tally> = FxHashMap::default();
    let mut pairs: FxHashMap<(u32, Option<usize>, u64, u64), PairTally> = FxHashMap::default();
    attribute(p, objects, |i, hit, _| {
        let s = &p.samples[i];
        let Some(stream) = streams.get_mut(&(s.pid, s.tid)) else {
            return;
        };
        // SHARDS: a distance among the followed lines stands for `scale`
        // times as many lines.
        let site = Site {
            pc: s.pc,
            stack: s.stack_id,
        };
        let reuse = stream
            .access(s.address / LINE, site)
            .map(|(d, used)| ((d as f64 * scale).round() as u64, used));
        let distance = reuse.map(|r| r.0);
        all.add(distance);
        let object = hit.map(|h| h.object);
        by_object.entry((s.pid, object)).or_default().add(distance);
        if let Some((d, used)) = reuse {
            pairs
                .entry((s.pid, object, used.pc, s.pc))
                .or_default()
                .add(d, (used.stack, s.stack_id));
        }
    });
    let mut object_rows: Vec<ObjectReuse> = by_object
        .into_iter()
        .map(|((pid, object), t)| ObjectReuse {
            pid,
            name: objects.name_of(object),
            kind: object.map(|o| objects.list[o].kind),
            histogram: t.histogram(scale),
        })
        .collect();
    object_rows.sort_by(|a, b| {
        b.histogram
            .reuses
            .total_cmp(&a.histogram.reuses)
            .then(a.name.cmp(&b.name))
    });
    object_rows.truncate(top);
    // Pairs by source location: an unrolled loop's copies of one access are
    // one pair.
    let mut by_location: HashMap<(u32, String, String, String), PairTally> = HashMap::new();
    for ((pid, object, use_pc, reuse_pc), t) in pairs {
        let key = (
            pid,
            objects.name_of(object),
            location_label(p, pid, use_pc),
            location_label(p, pid, reuse_pc),
        );
        by_location.entry(key).or_default().merge(&t);
    }
    let mut pair_rows: Vec<ReusePair> = by_location
        .into_iter()
        .map(|((pid, object, use_location, reuse_location), t)| {
            let (use_stack, reuse_stack) = t.usual_contexts();
            ReusePair {
                pid,
                object,
                use_location,
                reuse_location,
                use_context: crate::access::context_frames(p, pid, use_stack),
                reuse_context: crate::access::context_frames(p, pid, reuse_stack),
                min_distance: t.min as f64,
                max_distance: t.max as f64,
                histogram: t.distances.histogram(scale),
            }
        })
        .collect();
    pair_rows.sort_by(|a, b| {
        b.histogram
            .reuses
            .total_cmp(&a.histogram.reuses)
            .then_with(|| {
                (&a.use_location, &a.reuse_location).cmp(&(&b.use_location, &b.reuse_location))
            })
    });
    pair_rows.truncate(top);
    Ok(ReuseReport {
        method,
        exact,
        scale,
        line_bytes: LINE,
        all: all.histogram(scale),
        objects: object_rows,
        pairs: pair_rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance by definition: distinct other lines since the previous access.
    fn brute_force(stream: &[u64]) -> Vec<Option<u64>> {
        (0..stream.len())
            .map(|i| {
                let previous = stream[..i].iter().rposition(|&l| l == stream[i])?;
                let mut seen: Vec<u64> = stream[previous + 1..i].to_vec();
                seen.sort_unstable();
                seen.dedup();
                Some(seen.len() as u64)
            })
            .collect()
    }

    fn fenwick(stream: &[u64]) -> Vec<Option<u64>> {
        let mut s = Stream::new(stream.len());
        stream
            .iter()
            .map(|&l| s.access(l, super::Site { pc: 0, stack: 0 }).map(|r| r.0))
            .collect()
    }

    #[test]
    fn stack_distances_equal_the_definition() {
        // A cyclic sweep: every reuse sees all the other lines.
        let cyclic: Vec<u64> = (0..5).flat_map(|_| 0..37u64).collect();
        let d = fenwick(&cyclic);
        assert!(d[..37].iter().all(Option::is_none));
        assert!(d[37..].iter().all(|&x| x == Some(36)));
        // Random over a known footprint, mixing hot and cold lines.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut random = Vec::new();
        for i in 0..3000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            random.push(if i % 3 == 0 { x % 5 } else { x % 211 });
        }
        assert_eq!(fenwick(&random), brute_force(&random));
    }

    #[test]
    fn histogram_bins_and_counts_scaled() {
        let mut t = Tally::default();
        for d in [None, Some(0), Some(1), Some(2), Some(3), Some(4), Some(100)] {
            t.add(d);
        }
        let h = t.histogram(1.0);
        assert_eq!((h.accesses, h.cold, h.reuses), (7.0, 1.0, 6.0));
        let bins: Vec<(u64, u64, f64)> = h.bins.iter().map(|b| (b.from, b.to, b.reuses)).collect();
        assert_eq!(
            bins,
            [
                (0, 1, 1.0),
                (1, 2, 1.0),
                (2, 4, 2.0),
                (4, 8, 1.0),
                (64, 128, 1.0)
            ]
        );
        assert_eq!(h.mean_distance, Some(110.0 / 6.0));
        // Scaled: counts x4 (distances are scaled before they are added).
        let h = t.histogram(4.0);
        assert_eq!((h.accesses, h.cold, h.reuses), (28.0, 4.0, 24.0));
        assert_eq!(h.bins[2].reuses, 8.0);
        assert_eq!(h.mean_distance, Some(110.0 / 6.0));
    }
}

//! Heap sites while replaying: every recorded block adds to its site (its
//! stack and group), so a site's totals, temporaries, peak and leaks cost
//! memory per site, not per block, and blocks need no rows of their own
//! (heaptrack's per-call-site measures, computed as heaptrack_analyze does:
//! in one pass over the events in time order).
//!
//! Bytes at the process's peak: each new peak would need every site's live
//! bytes copied; instead a site takes its snapshot lazily, when it next
//! changes after a peak (its live bytes then are still those at that peak).

use memlens_profile::{HeapSite, SiteLivePoint, TableWriter};
use rustc_hash::FxHashMap;

/// A block live in the replay: what its row and its site need, kept small
/// (the replay holds one per live block; its stack and group are its site's).
#[derive(Clone, Copy, Debug)]
pub(super) struct LiveBlock {
    pub size: u64,
    pub usable: u64,
    pub alloc_ns: u64,
    pub site: u32,
    pub tid: u32,
    /// Blocks this one stands for: 1 unless sampled (1/p, see `estimate`).
    pub weight: f32,
    pub kind: u8,
    pub sampled: bool,
    /// An access sample landed in it: it keeps its row.
    pub hit: bool,
}

impl LiveBlock {
    pub fn est_count(&self) -> f64 {
        self.weight as f64
    }

    pub fn est_bytes(&self) -> f64 {
        self.size as f64 * self.weight as f64
    }
}

#[derive(Default)]
struct Site {
    stack: u64,
    group: u64,
    allocations: f64,
    bytes: f64,
    usable_bytes: f64,
    temporary: u64,
    live: f64,
    /// The live blocks' own bytes (unscaled), and how many of them were
    /// sampled: see [`Site::shown`].
    live_own: f64,
    live_sampled: u32,
    peak: f64,
    /// Live bytes at the process peak numbered `snapshot_peak`.
    snapshot: f64,
    snapshot_peak: u64,
    first_ns: u64,
    last_ns: u64,
    sampled: bool,
    /// Most bytes live since the site's last timeline point, and whether it
    /// changed since.
    max_since_point: f64,
    changed: bool,
    /// Its first and last allocation since its last point (`u64::MAX`, 0:
    /// none), which time what the point's running totals add.
    allocated_from: u64,
    allocated_to: u64,
}

/// Sampled blocks a site needs live at once before its live bytes are
/// scaled up from them: at 16 the scaled figure's 95% bound is ±49%; below,
/// one 512-byte block drawn by the byte sampler would stand for half a MiB
/// in a peak that never held more than that block.
const MIN_SCALED: u32 = 16;

impl Site {
    /// Its live bytes as a peak, a leak or a point of its timeline states
    /// them: scaled from its sampled blocks once enough of them are live,
    /// else the bytes of the blocks themselves (exact when none is sampled,
    /// a lower bound otherwise): never more than the site can hold.
    fn shown(&self) -> f64 {
        if self.live_sampled == 0 || self.live_sampled >= MIN_SCALED {
            self.live
        } else {
            self.live_own
        }
    }
}

/// Timeline points a process's sites write before their tick doubles: a
/// site writes a point in each tick it changed, so thousands of sites busy
/// for an hour at 10 ms would write billions, which every report loads
/// whole. With the tick doubled after each of these many points, the count
/// grows with the logarithm of the run's length; each point still carries
/// the most its site held since the last one, so peaks survive the coarser
/// ticks (the bounds between them widen).
const POINTS_BEFORE_DOUBLING: u64 = 1 << 18;

/// The process heap's peak in requested bytes (estimated when sampled).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Peak {
    pub requested: f64,
    /// Usable bytes live at that moment.
    pub usable: f64,
    pub time_ns: u64,
}

pub(super) struct HeapSites {
    pid: u32,
    index: FxHashMap<(u64, u64), u32>,
    /// The site [`HeapSites::site_of`] gave last.
    last_site: u32,
    sites: Vec<Site>,
    live: f64,
    live_usable: f64,
    peak: Peak,
    /// Numbers the process peaks: a site's snapshot of an earlier one is stale.
    peaks: u64,
    /// The site and size of the process's last allocation, if no free came
    /// after it: heaptrack's temporary allocation is a block whose free is
    /// the next event after an allocation of its site and size.
    last_allocation: Option<(u32, u64)>,
    /// Every block was recorded: temporaries can be told.
    every_block: bool,
    tick_ns: u64,
    next_tick: u64,
    points_written: u64,
    /// Points written when the tick doubles next.
    next_doubling: u64,
}

impl HeapSites {
    pub fn new(pid: u32, every_block: bool, tick_ns: u64) -> HeapSites {
        HeapSites {
            pid,
            index: FxHashMap::default(),
            last_site: u32::MAX,
            sites: Vec::new(),
            live: 0.0,
            live_usable: 0.0,
            peak: Peak::default(),
            peaks: 0,
            last_allocation: None,
            every_block,
            tick_ns: tick_ns.max(1),
            next_tick: tick_ns.max(1),
            points_written: 0,
            next_doubling: POINTS_BEFORE_DOUBLING,
        }
    }

    /// The site of a stack and group.
    pub fn site_of(&mut self, stack: u64, group: u64) -> u32 {
        // A program allocating in a loop asks for one site again and again.
        let last = self.sites.get(self.last_site as usize);
        if last.is_some_and(|s| s.stack == stack && s.group == group) {
            return self.last_site;
        }
        let sites = &mut self.sites;
        self.last_site = *self.index.entry((stack, group)).or_insert_with(|| {
            sites.push(Site {
                stack,
                group,
                first_ns: u64::MAX,
                allocated_from: u64::MAX,
                ..Site::default()
            });
            (sites.len() - 1) as u32
        });
        self.last_site
    }

    /// A site's stack and group.
    pub fn key(&self, site: u32) -> (u64, u64) {
        let s = &self.sites[site as usize];
        (s.stack, s.group)
    }

    /// Takes the site's snapshot of the latest peak if it has not yet: its
    /// bytes are about to change.
    fn before_change(&mut self, site: u32) {
        let s = &mut self.sites[site as usize];
        if s.snapshot_peak != self.peaks {
            s.snapshot = s.shown();
            s.snapshot_peak = self.peaks;
        }
    }

    /// The process's live heap now, requested bytes (exact when every block
    /// is recorded).
    pub fn live(&self) -> f64 {
        self.live
    }

    pub fn allocated(&mut self, b: &LiveBlock) {
        self.before_change(b.site);
        let s = &mut self.sites[b.site as usize];
        s.allocations += b.est_count();
        s.bytes += b.est_bytes();
        s.usable_bytes += b.usable as f64 * b.est_count();
        s.live += b.est_bytes();
        s.live_own += b.size as f64;
        s.live_sampled += u32::from(b.sampled);
        s.peak = s.peak.max(s.shown());
        s.max_since_point = s.max_since_point.max(s.shown());
        s.changed = true;
        s.first_ns = s.first_ns.min(b.alloc_ns);
        s.last_ns = s.last_ns.max(b.alloc_ns);
        s.allocated_from = s.allocated_from.min(b.alloc_ns);
        s.allocated_to = s.allocated_to.max(b.alloc_ns);
        s.sampled |= b.sampled;
        self.live += b.est_bytes();
        self.live_usable += b.usable as f64 * b.est_count();
        if self.live > self.peak.requested {
            self.peaks += 1;
            self.peak = Peak {
                requested: self.live,
                usable: self.live_usable,
                time_ns: b.alloc_ns,
            };
        }
        self.last_allocation = Some((b.site, b.size));
    }

    /// A block freed by thread `tid` at `at` (or found ended by its
    /// address's reuse: `tid` None).
    pub fn freed(&mut self, b: &LiveBlock, tid: Option<u32>, at: u64) {
        self.before_change(b.site);
        // A free the log did not hold (the block's address reused) is no
        // event in heaptrack's stream either.
        let temporary = tid.is_some() && self.last_allocation == Some((b.site, b.size));
        if tid.is_some() {
            self.last_allocation = None;
        }
        let s = &mut self.sites[b.site as usize];
        s.temporary += u64::from(temporary);
        s.live = (s.live - b.est_bytes()).max(0.0);
        s.live_own = (s.live_own - b.size as f64).max(0.0);
        s.live_sampled = s.live_sampled.saturating_sub(u32::from(b.sampled));
        s.changed = true;
        s.last_ns = s.last_ns.max(at);
        self.live = (self.live - b.est_bytes()).max(0.0);
        self.live_usable = (self.live_usable - b.usable as f64 * b.est_count()).max(0.0);
    }

    /// Writes a timeline point for each site changed since its last one at
    /// the first tick of the interval at or before `now` not yet written
    /// (nothing changes between that tick and `now`).
    pub fn advance(
        &mut self,
        now: u64,
        out: &mut TableWriter<SiteLivePoint>,
        group: impl Fn(u64) -> Option<String>,
    ) {
        if now >= self.next_tick {
            self.points(self.next_tick, out, &group);
            if self.points_written >= self.next_doubling {
                self.tick_ns *= 2;
                self.next_doubling += POINTS_BEFORE_DOUBLING;
            }
            self.next_tick = (now / self.tick_ns + 1) * self.tick_ns;
        }
    }

    fn points(
        &mut self,
        at: u64,
        out: &mut TableWriter<SiteLivePoint>,
        group: &impl Fn(u64) -> Option<String>,
    ) {
        for s in self.sites.iter_mut().filter(|s| s.changed) {
            out.push(SiteLivePoint {
                pid: self.pid,
                stack_id: s.stack,
                group: (s.group != 0).then(|| group(s.group)).flatten(),
                time_ns: at,
                live_bytes: s.shown(),
                max_bytes: s.max_since_point.max(s.shown()),
                allocations: Some(s.allocations),
                bytes: Some(s.bytes),
                temporary: self.every_block.then_some(s.temporary),
                allocated_from_ns: (s.allocated_from <= s.allocated_to).then_some(s.allocated_from),
                allocated_to_ns: (s.allocated_from <= s.allocated_to).then_some(s.allocated_to),
            });
            s.changed = false;
            (s.allocated_from, s.allocated_to) = (u64::MAX, 0);
            s.max_since_point = s.shown();
            self.points_written += 1;
        }
    }

    /// The sites' rows, with `leaked` (the blocks live at the end), the last
    /// timeline points at `end`, and the process peak.
    pub fn finish<'a>(
        &mut self,
        end: u64,
        leaked: impl Iterator<Item = &'a LiveBlock>,
        out: &mut TableWriter<SiteLivePoint>,
        group: impl Fn(u64) -> Option<String>,
    ) -> (Vec<HeapSite>, Peak) {
        self.points(end, out, &group);
        // Leaked blocks and bytes, scaled, and as the blocks themselves.
        let mut leaks = vec![[0.0; 4]; self.sites.len()];
        let mut sampled = vec![0u32; self.sites.len()];
        for b in leaked {
            let l = &mut leaks[b.site as usize];
            l[0] += b.est_count();
            l[1] += b.est_bytes();
            l[2] += 1.0;
            l[3] += b.size as f64;
            sampled[b.site as usize] += u32::from(b.sampled);
        }
        let peaks = self.peaks;
        let rows = (self.sites.iter())
            .zip(leaks.into_iter().zip(sampled))
            .map(|(s, (leaks, sampled))| {
                // As for live bytes: a few sampled blocks are not scaled up.
                let [leaked, leaked_bytes] = if sampled == 0 || sampled >= MIN_SCALED {
                    [leaks[0], leaks[1]]
                } else {
                    [leaks[2], leaks[3]]
                };
                (s, leaked, leaked_bytes)
            })
            .map(|(s, leaked, leaked_bytes)| HeapSite {
                pid: self.pid,
                stack_id: s.stack,
                group: (s.group != 0).then(|| group(s.group)).flatten(),
                allocations: s.allocations,
                bytes: s.bytes,
                usable_bytes: s.usable_bytes,
                temporary: self.every_block.then_some(s.temporary),
                peak_bytes: s.peak,
                bytes_at_peak: if s.snapshot_peak == peaks {
                    s.snapshot
                } else {
                    s.shown()
                },
                leaked,
                leaked_bytes,
                first_ns: s.first_ns.min(s.last_ns),
                last_ns: s.last_ns,
                sampled: s.sampled,
            })
            .collect();
        (rows, self.peak)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory named for the test and a timeline writer in it.
    fn scratch(name: &str) -> (std::path::PathBuf, TableWriter<SiteLivePoint>) {
        let dir = std::env::temp_dir().join(format!("memlens-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = TableWriter::create(&dir).unwrap();
        (dir, out)
    }

    /// A block recorded as it was (not sampled), allocated by thread `tid`.
    fn recorded(site: u32, size: u64, alloc_ns: u64, tid: u32) -> LiveBlock {
        LiveBlock {
            tid,
            kind: 0,
            size,
            usable: size,
            alloc_ns,
            sampled: false,
            hit: false,
            weight: 1.0,
            site,
        }
    }

    /// Random allocations and frees over five sites: each site's bytes at
    /// the peak, peak and temporaries against a brute-force replay.
    #[test]
    fn lazy_snapshots_give_every_sites_bytes_at_the_peak() {
        let (dir, mut out) = scratch("sites");
        let mut sites = HeapSites::new(1, true, 1_000);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut live: Vec<(u64, LiveBlock)> = Vec::new();
        let (mut best, mut at_best, mut peaks) = (0.0, [0.0f64; 5], [0.0f64; 5]);
        let mut temporaries = [0u64; 5];
        // Three threads, one stream of events: a temporary's free comes
        // right after an allocation of its site and size (heaptrack's).
        let mut last_allocation = None;
        for t in 0..20_000u64 {
            if live.is_empty() || next() % 3 != 0 {
                let site_index = next() % 5;
                let site = sites.site_of(site_index + 1, 0);
                let size = 1 + next() % 1000;
                let block = recorded(site, size, t, 7 + (next() % 3) as u32);
                sites.advance(t, &mut out, |_| None);
                sites.allocated(&block);
                live.push((t, block));
                last_allocation = Some((site, size));
            } else {
                // Half the frees are of the newest block: temporaries when
                // no free came between.
                let (_, block) = if next() % 2 == 0 {
                    live.pop().unwrap()
                } else {
                    live.swap_remove((next() % live.len() as u64) as usize)
                };
                sites.advance(t, &mut out, |_| None);
                let freer = 7 + (next() % 3) as u32;
                sites.freed(&block, Some(freer), t);
                if last_allocation.take() == Some((block.site, block.size)) {
                    temporaries[block.site as usize] += 1;
                }
            }
            let mut per_site = [0.0f64; 5];
            for (_, b) in &live {
                per_site[b.site as usize] += b.est_bytes();
            }
            for (p, now) in peaks.iter_mut().zip(per_site) {
                *p = f64::max(*p, now);
            }
            let total: f64 = per_site.iter().sum();
            if total > best {
                (best, at_best) = (total, per_site);
            }
        }
        let (rows, peak) = sites.finish(20_000, live.iter().map(|(_, b)| b), &mut out, |_| None);
        out.finish().unwrap();
        assert_eq!(peak.requested, best);
        for row in &rows {
            let i = (row.stack_id - 1) as usize;
            let site = sites.index[&(row.stack_id, 0)] as usize;
            assert_eq!(row.bytes_at_peak, at_best[site], "site {i}");
            assert_eq!(row.peak_bytes, peaks[site], "site {i}");
            assert_eq!(row.temporary, Some(temporaries[site]), "site {i}");
            assert!(temporaries[site] > 100, "site {i}");
        }
        assert_eq!(rows.iter().map(|r| r.bytes_at_peak).sum::<f64>(), best);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// 2,000 sites that each allocate and free a block in every one of
    /// 2,000 ticks: a point per site and tick would be 4 million; with the
    /// tick doubling the points are far fewer, and each site's points still
    /// hold its peak.
    #[test]
    fn busy_sites_over_many_ticks_write_a_bounded_timeline() {
        let (dir, mut out) = scratch("busy");
        let mut sites = HeapSites::new(1, true, 1_000);
        let (n_sites, ticks) = (2_000u64, 2_000u64);
        for tick in 0..ticks {
            for k in 0..n_sites {
                let t = tick * 1_000 + k * 1_000 / n_sites;
                let site = sites.site_of(k + 1, 0);
                let block = recorded(site, 16 + k + tick % 7, t, 7);
                sites.advance(t, &mut out, |_| None);
                sites.allocated(&block);
                sites.freed(&block, Some(7), t);
            }
        }
        let (rows, _) = sites.finish(ticks * 1_000, std::iter::empty(), &mut out, |_| None);
        out.finish().unwrap();
        let points = memlens_profile::read_table::<SiteLivePoint>(&dir).unwrap();
        assert_eq!(points.len() as u64, sites.points_written);
        // 1,056,000 when written.
        assert!(points.len() < 1_600_000, "{} points", points.len());
        let mut most = FxHashMap::<u64, f64>::default();
        for p in &points {
            let m = most.entry(p.stack_id).or_default();
            *m = m.max(p.max_bytes);
        }
        for row in &rows {
            let most = most[&row.stack_id];
            assert_eq!(most, row.peak_bytes, "site {}", row.stack_id);
            assert_eq!(most, (16 + row.stack_id - 1 + 6) as f64);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A site that holds one 512-byte block at a time, one of whose blocks
    /// the byte sampler drew (standing for 1024 blocks), peaks and leaks at
    /// that block's bytes, not at half a MiB; a site with 40 sampled blocks
    /// live at once is scaled up from them.
    #[test]
    fn a_few_sampled_blocks_are_not_scaled_into_a_peak() {
        let (dir, mut out) = scratch("sampled");
        let mut sites = HeapSites::new(1, false, 1_000);
        let block = |site, t, sampled| LiveBlock {
            tid: 7,
            kind: 0,
            size: 512,
            usable: 512,
            alloc_ns: t,
            sampled,
            hit: false,
            weight: if sampled { 1024.0 } else { 1.0 },
            site,
        };
        let serial = sites.site_of(1, 0);
        let mut t = 0;
        for i in 0..100u64 {
            let b = block(serial, t, i == 50);
            sites.allocated(&b);
            t += 1;
            sites.freed(&b, Some(7), t);
        }
        let leaked = block(serial, t, true);
        sites.allocated(&leaked);
        let many = sites.site_of(2, 0);
        let held: Vec<LiveBlock> = (0..40).map(|i| block(many, t + i, true)).collect();
        for b in &held {
            sites.allocated(b);
        }
        let live: Vec<LiveBlock> = std::iter::once(leaked).chain(held).collect();
        let (rows, _) = sites.finish(t + 100, live.iter(), &mut out, |_| None);
        out.finish().unwrap();
        let row = |stack| rows.iter().find(|r| r.stack_id == stack).unwrap();
        assert_eq!(
            (row(1).peak_bytes, row(1).leaked_bytes, row(1).leaked),
            (512.0, 512.0, 1.0)
        );
        let scaled = 40.0 * 512.0 * 1024.0;
        assert_eq!((row(2).peak_bytes, row(2).leaked_bytes), (scaled, scaled));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! Replays one image's records in time order into profile rows: a handler per
//! record kind updates the state of the image (live blocks and mappings, open
//! regions, stacks and tags, threads' times and totals). Allocation rows and
//! samples go to the sinks as soon as they are complete, so memory holds only
//! what is live; the small tables are returned whole.

mod sites;

use crate::block_map::{block_map, BlockMap};
use crate::image::{Definitions, ImageHeader, LogCounts, Merged};
use crate::mappings::Mappings;

use memlens_profile::{
    AccessSample, Allocation, HeapPeak, HeapSite, Region, SiteLivePoint, TableWriter, TagRange,
    ThreadRow, TimelinePoint,
};
use memlens_rawlog::{self as raw, alloc_flags, alloc_kind, tag, RawRecord};
use rustc_hash::FxHashMap;
use sites::{HeapSites, LiveBlock};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Rows of one image that are kept whole (small tables), and counts.
#[derive(Default)]
pub(crate) struct Built {
    pub regions: Vec<Region>,
    pub threads: Vec<ThreadRow>,
    pub tags: Vec<TagRange>,
    pub timeline: Vec<TimelinePoint>,
    pub stack_ids: BTreeSet<u64>,
    /// Code addresses of the samples.
    pub pcs: BTreeSet<u64>,
    pub unmatched_frees: u64,
    /// Counted by the merge over every record of the log.
    pub counts: LogCounts,
    pub sites: Vec<HeapSite>,
    /// The process heap's peak when every block was recorded.
    pub heap_peak: Option<HeapPeak>,
}

/// The row of access sample `x` of thread `tid` of process `pid`, its time
/// counted from `t0`; `model_cost` is the modelled cost of its level.
pub(crate) fn sample_row(
    pid: u32,
    tid: u32,
    x: &raw::Sample,
    t0: u64,
    model_cost: Option<f64>,
) -> AccessSample {
    let class = x.class as usize % raw::ACCESS_CLASSES;
    AccessSample {
        pid,
        tid,
        time_ns: x.time.saturating_sub(t0),
        cpu: x.cpu,
        pc: x.pc,
        address: x.addr,
        size: raw::class_size(class) as u32,
        is_store: raw::class_is_store(class),
        level: x.level,
        model_cost_ns: model_cost,
        bulk: x.flags & raw::sample_flags::BULK != 0,
        atomic: x.flags & raw::sample_flags::ATOMIC != 0,
        stack_id: x.stack,
        ..AccessSample::default()
    }
}

/// Whether a block was sampled, and the blocks and bytes it stands for.
pub(crate) fn estimate(size: u64, flags: u8, rate: u64) -> (bool, f64, f64) {
    let sampled = flags & alloc_flags::SAMPLED != 0
        && flags & (alloc_flags::EXACT | alloc_flags::GROUPED) == 0;
    if !sampled || rate <= 1 {
        return (false, 1.0, size as f64);
    }
    // Poisson byte sampling: a block of s bytes is picked with p = 1 - exp(-s/R).
    let p = -(-(size.max(1) as f64) / rate as f64).exp_m1();
    (true, 1.0 / p, size as f64 / p)
}

/// Which blocks get a row of their own when every block is recorded (a
/// sampled block always has one): the others are summed in their sites.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BlockRows {
    /// Blocks of `--min-size` or more.
    Large,
    /// Those, and every block an access sample of the log landed in: the
    /// report attributes each sample to the block live at its address, and
    /// needs no other (rows bounded by the samples, not by the blocks).
    LargeAndHit,
    /// Every block: the user asked (`--keep-blocks`), or samples from
    /// perf.data, which the replay does not see, are attributed to blocks.
    All,
}

/// Whether the replay finds the block each access sample landed in: every
/// block was recorded, and a small one keeps its row only if hit.
fn finds_hits(settings: &raw::RuntimeSettings, sinks: &Sinks) -> bool {
    settings.sample_rate == 1 && sinks.rows == BlockRows::LargeAndHit
}

/// Where one image's streamed rows go.
pub(crate) struct Sinks {
    pub allocations: TableWriter<Allocation>,
    pub site_timeline: TableWriter<SiteLivePoint>,
    /// None while an image is replayed as it runs (an access sample stops
    /// that replay: the finalizer writes the samples).
    pub samples: Option<TableWriter<AccessSample>>,
    /// Calibrated ns of each modelled level code (cache model runs only).
    pub model_cost: [Option<f64>; 8],
    /// Which blocks get a row when every block is recorded.
    pub rows: BlockRows,
    /// Ticks of the sites' timeline.
    pub tick_ns: u64,
}

impl Sinks {
    /// The allocations and sites' timeline tables of the profile in `dir`
    /// (a timeline point every `tick_ns`); no samples table, and a small
    /// freed block summed in its site without a row of its own.
    pub(crate) fn create(dir: &std::path::Path, tick_ns: u64) -> crate::Result<Sinks> {
        Ok(Sinks {
            allocations: TableWriter::create(dir)?,
            site_timeline: TableWriter::create(dir)?,
            samples: None,
            model_cost: [None; 8],
            rows: BlockRows::Large,
            tick_ns,
        })
    }

    /// Drops the rows written so far: the tables are written again from
    /// their start (a replay begun during the run, which writes no samples).
    pub(crate) fn discard(self) {
        // Each encoder closes its file before it is created again.
        let _ = self.allocations.finish();
        let _ = self.site_timeline.finish();
    }
}

/// Replays one image's events in time order: allocation rows and samples go to
/// the sinks as soon as they are complete; the small tables are returned, and
/// the definitions.
/// `samples_written`: its samples are in the samples table already (written
/// while it ran); those the merge hands over only find their blocks.
pub(crate) fn replay<'a>(
    log: &ImageHeader,
    defs: Cow<'a, Definitions>,
    merged: Merged<'_>,
    t0: u64,
    sinks: &mut Sinks,
    samples_written: bool,
    progress: &dyn Fn(u64),
) -> (Built, Cow<'a, Definitions>) {
    let mut image = Replay::new(log.pid, log.settings, defs, t0, sinks);
    image.samples_written = samples_written;
    image.replay_merged(merged, sinks, progress);
    image.finish(log, sinks)
}

/// Records handed from the merge to the replay at once.
const BATCH: usize = 4096;

/// Records of a log in time order, the blocks read to their end among them
/// (released once replayed), and the log's bytes opened so far.
struct Batch<'a> {
    records: Vec<(u32, u64, RawRecord<'a>)>,
    read: Vec<&'a [u8]>,
    blocks_started: u64,
}

/// The replay of one image: the state its records build (live blocks and
/// mappings, open regions, stacks and tags, threads' times and totals). It
/// owns that state, so that a replay begun while the image runs
/// ([`crate::live_replay`]) is carried on by the finalizer.
pub(crate) struct Replay<'a> {
    pid: u32,
    settings: raw::RuntimeSettings,
    pub(crate) defs: Cow<'a, Definitions>,
    t0: u64,
    built: Built,
    /// Hashed by address (see [`BlockMap`]): millions of blocks pass through
    /// when every block is recorded, and the row order of still-live blocks
    /// stays the same run to run.
    live_heap: BlockMap<LiveBlock>,
    /// The live blocks by address, (start, end), to find the one a sample
    /// landed in ([`BlockRows::LargeAndHit`] with every block recorded).
    by_address: Option<BTreeMap<u64, u64>>,
    heap_sites: HeapSites,
    /// Every block was recorded (`--sample-rate 1`).
    every_block: bool,
    /// The image's samples were written while it ran: not again.
    samples_written: bool,
    maps: Mappings,
    /// Per thread (and for the process's phases, [`scope`]), the indices of
    /// its open regions, innermost last.
    open_regions: HashMap<u64, Vec<usize>>,
    /// What open regions' marks carried at their start.
    region_start: HashMap<usize, RegionStart>,
    /// Every block recorded: each open region's exact live heap when it
    /// began and the most since.
    region_heap: FxHashMap<usize, (f64, f64)>,
    open_stacks: FxHashMap<u32, Allocation>,
    /// Per thread: (start, end) and its totals (final, or as last published).
    thread_times: BTreeMap<u32, (Option<u64>, Option<u64>)>,
    final_totals: BTreeMap<u32, (raw::ThreadTotals, bool)>,
}

/// A region mark's figures at the region's start: the thread's exact counts,
/// the bytes of its OpenMP teams and its time in the access slow path.
struct RegionStart {
    counts: [u64; raw::COUNTS],
    team_bytes: Option<u64>,
    slow_ns: Option<u64>,
}

/// A string the image defined, or its id where the definition was lost.
fn name(defs: &Definitions, id: u64) -> String {
    defs.strings
        .get(&id)
        .cloned()
        .unwrap_or_else(|| format!("#{id:x}"))
}

/// The live heap a region mark carries after it (usable bytes; none from a
/// runtime that did not write it).
fn heap_of(rec: &raw::RawRecord<'_>) -> Option<u64> {
    mark_word(rec, 0)
}

/// The bytes the OpenMP teams of a region mark's thread moved so far (the
/// mark's second trailing word).
fn team_of(rec: &raw::RawRecord<'_>) -> Option<u64> {
    mark_word(rec, 1)
}

/// The nanoseconds a region mark's thread spent in the access slow path so
/// far (the mark's third trailing word).
fn slow_ns_of(rec: &raw::RawRecord<'_>) -> Option<u64> {
    mark_word(rec, 2)
}

fn mark_word(rec: &raw::RawRecord<'_>, word: usize) -> Option<u64> {
    let bytes: [u8; 8] = rec
        .trailing::<raw::RegionMark>()
        .get(8 * word..8 * word + 8)?
        .try_into()
        .ok()?;
    Some(u64::from_le_bytes(bytes))
}

/// The key of a thread's open regions, or of the process's open phases.
fn scope(tid: u32, process_wide: bool) -> u64 {
    if process_wide {
        u64::MAX
    } else {
        u64::from(tid)
    }
}

impl<'a> Replay<'a> {
    /// Whether its access samples are needed in the merge: to be written,
    /// or to find the blocks they hit.
    pub(crate) fn needs_samples(
        settings: &raw::RuntimeSettings,
        sinks: &Sinks,
        written: bool,
    ) -> bool {
        !written || finds_hits(settings, sinks)
    }

    /// The replay of process `pid`'s image run with `settings`, its rows'
    /// times counted from `t0`.
    pub(crate) fn new(
        pid: u32,
        settings: raw::RuntimeSettings,
        defs: Cow<'a, Definitions>,
        t0: u64,
        sinks: &Sinks,
    ) -> Replay<'a> {
        let every_block = settings.sample_rate == 1;
        Replay {
            pid,
            settings,
            t0,
            heap_sites: HeapSites::new(pid, every_block, sinks.tick_ns),
            every_block,
            samples_written: false,
            built: Built::default(),
            live_heap: block_map(defs.most_live_blocks),
            by_address: finds_hits(&settings, sinks).then(BTreeMap::new),
            defs,
            maps: Mappings::default(),
            open_regions: HashMap::new(),
            region_start: HashMap::new(),
            region_heap: FxHashMap::default(),
            open_stacks: FxHashMap::default(),
            thread_times: BTreeMap::new(),
            final_totals: BTreeMap::new(),
        }
    }

    /// Replays the merged records. The merge (reading each record's time, the
    /// first touch of the log's pages) runs on a thread of its own, a batch
    /// of records ahead of the replay: the two halves of the work on the two
    /// cores a run leaves.
    pub(crate) fn replay_merged(
        &mut self,
        mut merged: Merged<'_>,
        sinks: &mut Sinks,
        progress: &dyn Fn(u64),
    ) {
        let counts = std::thread::scope(|scope| {
            let (batches, received) = std::sync::mpsc::sync_channel::<Batch>(4);
            let merge = scope.spawn(move || loop {
                let records: Vec<_> = merged.by_ref().take(BATCH).collect();
                let last = records.len() < BATCH;
                let batch = Batch {
                    records,
                    read: std::mem::take(&mut merged.read),
                    blocks_started: merged.blocks_started,
                };
                if batches.send(batch).is_err() || last {
                    return merged.counts;
                }
            });
            let mut release = crate::image::Release::default();
            for batch in received {
                for (tid, time, rec) in &batch.records {
                    self.record(sinks, *tid, *time, rec);
                }
                for block in batch.read {
                    release.block(block);
                }
                progress(batch.blocks_started);
            }
            merge
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        });
        self.built.counts.add(&counts);
    }

    /// The image's definitions, to add to while its log is followed.
    #[inline]
    pub(crate) fn defs_mut(&mut self) -> &mut Definitions {
        match self.defs {
            Cow::Owned(ref mut defs) => defs,
            Cow::Borrowed(_) => self.defs.to_mut(),
        }
    }

    /// What a merge counts over the records (see [`LogCounts`]), for a
    /// replay fed record by record.
    pub(crate) fn counts_mut(&mut self) -> &mut LogCounts {
        &mut self.built.counts
    }

    /// Makes room for `blocks` live blocks at once.
    pub(crate) fn expect_live_blocks(&mut self, blocks: u64) {
        let more = (blocks as usize).saturating_sub(self.live_heap.len());
        if more > self.live_heap.capacity() - self.live_heap.len() {
            let _ = self.live_heap.try_reserve(more);
        }
    }

    fn rel(&self, t: u64) -> u64 {
        t.saturating_sub(self.t0)
    }

    fn name(&self, id: u64) -> String {
        name(&self.defs, id)
    }

    /// A finished allocation row, to the sink.
    fn emit(built: &mut Built, out: &mut TableWriter<Allocation>, row: Allocation) {
        if row.stack_id != 0 {
            built.stack_ids.insert(row.stack_id);
        }
        out.push(row);
    }

    /// One timed record (at `time`, as [`crate::image::timed`] read it), by
    /// its kind; a payload too short for its kind is skipped.
    pub(crate) fn record(
        &mut self,
        sinks: &mut Sinks,
        tid: u32,
        time: u64,
        rec: &RawRecord<'_>,
    ) -> Option<()> {
        let defs = &self.defs;
        let name = |id| defs.strings.get(&id).cloned();
        (self.heap_sites).advance(self.rel(time), &mut sinks.site_timeline, name);
        match rec.tag {
            tag::ALLOC | tag::SMALL_ALLOC => self.alloc(sinks, tid, &rec.alloc()?),
            tag::FREE => self.free(sinks, tid, &rec.free()?),
            tag::MMAP => self.mmap(sinks, tid, &rec.payload()?),
            tag::MREMAP => self.mremap(sinks, tid, &rec.payload()?),
            tag::MUNMAP => self.munmap(sinks, &rec.payload()?),
            tag::REGION_BEGIN => self.region_begin(tid, false, &rec.payload()?, rec),
            tag::REGION_END => self.region_end(tid, false, &rec.payload()?, rec),
            tag::PHASE_BEGIN => self.region_begin(tid, true, &rec.payload()?, rec),
            tag::PHASE_END => self.region_end(tid, true, &rec.payload()?, rec),
            tag::SAMPLE => self.sample(sinks, tid, &rec.payload()?),
            tag::TAG => self.tag(tid, &rec.payload()?),
            tag::UNTAG => self.untag(&rec.payload()?),
            tag::THREAD_START => self.thread_start(sinks, tid, &rec.payload()?),
            tag::THREAD_TOTALS => self.thread_totals(rec.payload()?),
            tag::THREAD_EXIT => self.thread_exit(sinks, tid, &rec.payload()?),
            tag::TIMELINE => self.timeline(&rec.payload()?),
            _ => {}
        }
        Some(())
    }

    fn alloc(&mut self, sinks: &mut Sinks, tid: u32, a: &raw::Alloc) {
        let (sampled, est_count, _) = estimate(a.size, a.flags, self.settings.sample_rate);
        let at = self.rel(a.time);
        let block = LiveBlock {
            tid,
            kind: a.kind,
            size: a.size,
            usable: a.usable,
            alloc_ns: at,
            sampled,
            hit: false,
            weight: est_count as f32,
            site: self.heap_sites.site_of(a.stack, a.group),
        };
        if let Some(index) = &mut self.by_address {
            index.insert(a.ptr, a.ptr.saturating_add(a.usable.max(a.size).max(1)));
        }
        if let Some(old) = self.live_heap.insert(a.ptr, block) {
            // Its free was not seen (the block was freed before the hook
            // could record it): it ended when its address was reused.
            self.block_ended(sinks, a.ptr, old, None, at);
        }
        self.heap_sites.allocated(&block);
        let live = self.heap_sites.live();
        for (_, peak) in self.region_heap.values_mut() {
            *peak = peak.max(live);
        }
    }

    fn free(&mut self, sinks: &mut Sinks, tid: u32, f: &raw::Free) {
        let at = self.rel(f.time);
        match self.live_heap.remove(&f.ptr) {
            Some(block) => {
                if let Some(index) = &mut self.by_address {
                    index.remove(&f.ptr);
                }
                self.block_ended(sinks, f.ptr, block, Some(tid), at)
            }
            None => self.built.unmatched_frees += 1,
        }
    }

    /// A heap block's row, ended at `free_ns` (None: live at the end).
    fn heap_row(
        pid: u32,
        defs: &Definitions,
        sites: &HeapSites,
        ptr: u64,
        b: &LiveBlock,
        free_ns: Option<u64>,
    ) -> Allocation {
        let (stack, group) = sites.key(b.site);
        Allocation {
            pid,
            tid: b.tid,
            kind: alloc_kind::NAMES
                .get(b.kind as usize)
                .unwrap_or(&"malloc")
                .to_string(),
            address: ptr,
            size: b.size,
            usable_size: b.usable,
            alloc_ns: b.alloc_ns,
            free_ns,
            stack_id: stack,
            sampled: b.sampled,
            est_count: b.est_count(),
            est_bytes: b.est_bytes(),
            group: (group != 0).then(|| name(defs, group)),
            prot: None,
            map_flags: None,
            fd: None,
            name: None,
        }
    }

    /// A freed block: its site hears of it, and it gets a row unless the
    /// site's sums stand for it (every block recorded, a small one, rows not
    /// asked for).
    fn block_ended(
        &mut self,
        sinks: &mut Sinks,
        ptr: u64,
        b: LiveBlock,
        tid: Option<u32>,
        at: u64,
    ) {
        self.heap_sites.freed(&b, tid, at);
        let summed = match sinks.rows {
            BlockRows::Large => true,
            BlockRows::LargeAndHit => !b.hit,
            BlockRows::All => false,
        };
        if self.every_block && summed && b.size < self.settings.min_size {
            return;
        }
        let row = Self::heap_row(self.pid, &self.defs, &self.heap_sites, ptr, &b, Some(at));
        Self::emit(&mut self.built, &mut sinks.allocations, row);
    }

    fn mmap(&mut self, sinks: &mut Sinks, tid: u32, m: &raw::Mmap) {
        let origin = Allocation {
            stack_id: m.stack,
            prot: Some(m.prot),
            map_flags: Some(m.flags),
            fd: Some(m.fd),
            ..Default::default()
        };
        self.map(sinks, tid, m.time, m.addr, m.len, origin);
    }

    fn mremap(&mut self, sinks: &mut Sinks, tid: u32, m: &raw::Mremap) {
        // The new mapping carries the old one's origin.
        let at = self.rel(m.time);
        let (built, out) = (&mut self.built, &mut sinks.allocations);
        let origin = self
            .maps
            .moved(m.old_addr, m.old_len, at, &mut |r| {
                Self::emit(built, out, r)
            })
            .unwrap_or_default();
        self.map(sinks, tid, m.time, m.new_addr, m.new_len, origin);
    }

    /// A new mapping; MAP_FIXED replaces whatever was mapped there.
    fn map(
        &mut self,
        sinks: &mut Sinks,
        tid: u32,
        time: u64,
        addr: u64,
        len: u64,
        origin: Allocation,
    ) {
        let at = self.rel(time);
        let row = Allocation {
            pid: self.pid,
            tid,
            kind: "mmap".into(),
            address: addr,
            size: len,
            alloc_ns: at,
            free_ns: None,
            sampled: false,
            est_count: 1.0,
            est_bytes: len as f64,
            ..origin
        };
        let (built, out) = (&mut self.built, &mut sinks.allocations);
        self.maps.map(row, at, &mut |r| Self::emit(built, out, r));
    }

    fn munmap(&mut self, sinks: &mut Sinks, m: &raw::Munmap) {
        let at = self.rel(m.time);
        let (built, out) = (&mut self.built, &mut sinks.allocations);
        self.maps
            .unmap(m.addr, m.len, at, &mut |r| Self::emit(built, out, r));
    }

    /// A region of the thread, or a phase of the process (its instances
    /// nest apart from every thread's regions).
    fn region_begin(
        &mut self,
        tid: u32,
        process_wide: bool,
        n: &raw::RegionMark,
        rec: &raw::RawRecord<'_>,
    ) {
        let index = self.built.regions.len();
        let open = self
            .open_regions
            .entry(scope(tid, process_wide))
            .or_default();
        open.push(index);
        let depth = (open.len() - 1) as u32;
        let start = RegionStart {
            counts: n.counts,
            team_bytes: team_of(rec),
            slow_ns: slow_ns_of(rec),
        };
        self.region_start.insert(index, start);
        if self.every_block {
            let live = self.heap_sites.live();
            self.region_heap.insert(index, (live, live));
        }
        let region = Region {
            pid: self.pid,
            tid,
            name: self.name(n.name),
            begin_ns: self.rel(n.time),
            end_ns: None,
            depth,
            process_wide,
            heap_begin: heap_of(rec),
            ..Default::default()
        };
        self.built.regions.push(region);
    }

    /// Ends the innermost open region of that name on the thread (the
    /// innermost phase of that name, from any thread).
    fn region_end(
        &mut self,
        tid: u32,
        process_wide: bool,
        n: &raw::RegionMark,
        rec: &raw::RawRecord<'_>,
    ) {
        let heap = heap_of(rec);
        let wanted = self.name(n.name);
        let at = self.rel(n.time);
        let open = self
            .open_regions
            .entry(scope(tid, process_wide))
            .or_default();
        let Some(pos) = open
            .iter()
            .rposition(|&r| self.built.regions[r].name == wanted)
        else {
            return;
        };
        let r = open.remove(pos);
        let region = &mut self.built.regions[r];
        region.end_ns = Some(at);
        // The runtime's counters at both ends (usable bytes), unless every
        // block's replay gives the heap with its peak, below.
        region.heap_end = heap.filter(|_| region.heap_begin.is_some());
        if let Some((begin, peak)) = self.region_heap.remove(&r) {
            let end = self.heap_sites.live();
            region.heap_begin = Some(begin as u64);
            region.heap_end = Some(end as u64);
            region.heap_peak = Some(peak.max(end) as u64);
        }
        // Kept only if the image turns out instrumented (see `finish`).
        if let Some(start) = self.region_start.remove(&r) {
            // A phase's counts are every thread's already; its marking
            // thread's slow path is no measure of the process's.
            if !process_wide {
                region.team_bytes = (start.team_bytes)
                    .zip(team_of(rec))
                    .map(|(b, e)| e.saturating_sub(b));
                region.slow_path_ns = (start.slow_ns)
                    .zip(slow_ns_of(rec))
                    .map(|(b, e)| e.saturating_sub(b));
            }
            // The thread's exact counts at both ends: their difference is exact.
            let diff: [u64; raw::COUNTS] =
                std::array::from_fn(|i| n.counts[i].saturating_sub(start.counts[i]));
            let (read, written, loads, stores) = raw::AccessCounters::traffic(&diff);
            region.bytes_read = Some(read);
            region.bytes_written = Some(written);
            region.loads = Some(loads);
            region.stores = Some(stores);
        }
    }

    fn sample(&mut self, sinks: &mut Sinks, tid: u32, x: &raw::Sample) {
        self.built.pcs.insert(x.pc);
        if x.stack != 0 {
            self.built.stack_ids.insert(x.stack);
        }
        if let Some(index) = &self.by_address {
            let within = index.range(..=x.addr).next_back();
            if let Some((start, _)) = within.filter(|(_, &end)| x.addr < end) {
                if let Some(b) = self.live_heap.get_mut(start) {
                    b.hit = true;
                }
            }
        }
        if self.samples_written {
            return;
        }
        let cost = sinks.model_cost.get(x.level as usize).copied().flatten();
        if let Some(samples) = &mut sinks.samples {
            samples.push(sample_row(self.pid, tid, x, self.t0, cost));
        }
    }

    fn tag(&mut self, tid: u32, t: &raw::Tag) {
        let row = TagRange {
            pid: self.pid,
            tid,
            name: self.name(t.name),
            address: t.start,
            size: t.len,
            begin_ns: self.rel(t.time),
            end_ns: None,
        };
        self.built.tags.push(row);
    }

    fn untag(&mut self, u: &raw::Untag) {
        let at = self.rel(u.time);
        if let Some(t) = self
            .built
            .tags
            .iter_mut()
            .rev()
            .find(|t| t.address == u.start && t.end_ns.is_none())
        {
            t.end_ns = Some(at);
        }
    }

    /// A thread's start; its stack becomes an object until it exits.
    fn thread_start(&mut self, sinks: &mut Sinks, tid: u32, t: &raw::ThreadEvent) {
        let at = self.rel(t.time);
        self.thread_times.entry(tid).or_default().0 = Some(at);
        if t.stack_hi > t.stack_lo {
            let size = t.stack_hi - t.stack_lo;
            let row = Allocation {
                pid: self.pid,
                tid,
                kind: "stack".into(),
                address: t.stack_lo,
                size,
                usable_size: size,
                alloc_ns: at,
                est_count: 1.0,
                est_bytes: size as f64,
                ..Default::default()
            };
            if let Some(old) = self.open_stacks.insert(t.tid as u32, row) {
                Self::emit(&mut self.built, &mut sinks.allocations, old);
            }
        }
    }

    fn thread_totals(&mut self, t: raw::ThreadTotals) {
        self.final_totals.insert(t.tid as u32, (t, true));
    }

    fn thread_exit(&mut self, sinks: &mut Sinks, tid: u32, t: &raw::ThreadEvent) {
        let at = self.rel(t.time);
        self.thread_times.entry(tid).or_default().1 = Some(at);
        if let Some(mut row) = self.open_stacks.remove(&(t.tid as u32)) {
            row.free_ns = Some(at);
            Self::emit(&mut self.built, &mut sinks.allocations, row);
        }
    }

    fn timeline(&mut self, t: &raw::Timeline) {
        self.built.timeline.push(timeline_point(t, self.t0));
    }

    /// The threads' rows, and whatever is still live: it was live when the
    /// process ended.
    pub(crate) fn finish(
        mut self,
        log: &ImageHeader,
        sinks: &mut Sinks,
    ) -> (Built, Cow<'a, Definitions>) {
        if !log.instrumented {
            for r in &mut self.built.regions {
                (r.bytes_read, r.bytes_written, r.loads, r.stores) = (None, None, None, None);
                r.team_bytes = None;
                r.slow_path_ns = None;
            }
        }
        for t in &log.live_threads {
            self.final_totals.entry(t.tid as u32).or_insert((*t, false));
        }
        for (&tid, (t, done)) in &self.final_totals {
            let (start_ns, end_ns) = self.thread_times.get(&tid).copied().unwrap_or_default();
            let (read, written, loads, stores) = raw::AccessCounters::traffic(&t.access);
            let instrumented = log.instrumented;
            let own = t.own_alloc_counters != 0;
            self.built.threads.push(ThreadRow {
                pid: log.pid,
                tid,
                start_ns,
                end_ns: end_ns.or((*done && t.time > 0).then(|| self.rel(t.time))),
                loads: instrumented.then_some(loads),
                stores: instrumented.then_some(stores),
                bytes_read: instrumented.then_some(read),
                bytes_written: instrumented.then_some(written),
                allocs: own.then_some(t.allocs),
                alloc_bytes: own.then_some(t.alloc_bytes),
                frees: own.then_some(t.frees),
                free_bytes: own.then_some(t.free_bytes),
                // Counted by the thread, written as it exits.
                sort_calls: (instrumented && *done).then_some(t.sorts[0]),
                sort_bytes: (instrumented && *done).then_some(t.sorts[1]),
                final_counts: *done,
            });
        }
        let defs = &self.defs;
        let name = |id| defs.strings.get(&id).cloned();
        let end = self.rel(self.built.counts.last_ns);
        let (sites, peak) =
            self.heap_sites
                .finish(end, self.live_heap.values(), &mut sinks.site_timeline, name);
        for s in &sites {
            if s.stack_id != 0 {
                self.built.stack_ids.insert(s.stack_id);
            }
        }
        self.built.sites = sites;
        self.built.heap_peak = self.every_block.then_some(HeapPeak {
            requested_bytes: peak.requested as u64,
            usable_bytes: peak.usable as u64,
            time_ns: peak.time_ns,
        });
        for (ptr, b) in std::mem::take(&mut self.live_heap) {
            let row = Self::heap_row(self.pid, defs, &self.heap_sites, ptr, &b, None);
            Self::emit(&mut self.built, &mut sinks.allocations, row);
        }
        let still_live = (self.maps.into_rows()).chain(self.open_stacks.into_values());
        for row in still_live {
            Self::emit(&mut self.built, &mut sinks.allocations, row);
        }
        (self.built, self.defs)
    }
}
pub(crate) fn timeline_point(t: &raw::Timeline, t0: u64) -> TimelinePoint {
    let numa = |i: usize| (t.numa[i] != u64::MAX).then_some(t.numa[i]);
    TimelinePoint {
        pid: t.pid as u32,
        time_ns: t.time.saturating_sub(t0),
        rss: t.rss,
        anon: t.anon,
        file: t.file,
        shmem: t.shmem,
        swap: t.swap,
        heap_live: t.heap_live(),
        heap_before_start: t.heap_before_start,
        heap_alloc_bytes: t.heap_alloc_bytes,
        heap_free_bytes: t.heap_free_bytes,
        heap_allocs: t.heap_allocs,
        heap_frees: t.heap_frees,
        bytes_read: t.bytes_read,
        bytes_written: t.bytes_written,
        loads: t.loads,
        stores: t.stores,
        numa0: numa(0),
        numa1: numa(1),
        numa2: numa(2),
        numa3: numa(3),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampled_blocks_are_scaled_by_their_selection_probability() {
        let (sampled, count, bytes) = estimate(512, alloc_flags::SAMPLED, 512 * 1024);
        assert!(sampled);
        // p = 1 - exp(-1/1024): about 1024.5 blocks of 512 bytes.
        assert!((count - 1024.5).abs() < 0.1, "{count}");
        assert!((bytes - 512.0 * count).abs() < 1e-6);
        assert_eq!(
            estimate(512, alloc_flags::EXACT | alloc_flags::SAMPLED, 1024),
            (false, 1.0, 512.0)
        );
        assert_eq!(
            estimate(512, alloc_flags::GROUPED | alloc_flags::SAMPLED, 1024),
            (false, 1.0, 512.0)
        );
    }
}

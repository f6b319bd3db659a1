//! Turns the raw logs of a recording (one per process image, plus the collector's
//! timeline) into the profile's Parquet tables and `meta.json`.
//!
//! It streams: each image's per-thread record streams are merged in time order,
//! and an allocation row is written as soon as its block is freed, so memory grows
//! with the blocks live at once, not with the length of the run. It reads whatever
//! was published, so a target that crashed or was killed still gives a profile up
//! to that point; blocks cut short are counted as losses.

use crate::mappings::Mappings;
use crate::perf::convert::{convert_into, Streamed};
use crate::symbols::{self, LoadedModule, Symbolizer};
use crate::{Error, Result};
use memlens_decoders::perf_data::PerfData;
use memlens_profile::{
    self as profile, AccessSample, Allocation, KernelUsage, Losses, Meta, Process, Region,
    StacksUnwound, TableWriter, TagRange, ThreadRow, TimelinePoint,
};
use memlens_rawlog::{self as raw, alloc_flags, alloc_kind, tag, FileHeader, RawRecord, Records};
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

pub const COLLECTOR_LOG: &str = "collector.mltl";

/// What the launcher knows that the logs do not.
#[derive(Clone, Debug, Default)]
pub struct RunInfo {
    pub command: Vec<String>,
    pub interval_ms: u64,
    pub start_ns: Option<u64>,
    pub end_ns: Option<u64>,
    pub missed_ticks: u64,
    /// The cache model's geometry ("size/ways/line" per level), when it ran.
    pub cache_model: Option<String>,
}

/// What an image log's header says.
struct ImageHeader {
    path: PathBuf,
    pid: u32,
    ppid: u32,
    exec_seq: u32,
    rank: i32,
    start_ns: u64,
    settings: raw::RuntimeSettings,
    dropped: u64,
    untracked: u64,
    /// Bits of `memlens_rawlog::fault`.
    faults: u32,
    /// Instrumented code ran in this image (access counts and samples exist).
    instrumented: bool,
    /// Threads holding a header slot when the image ended, as last published.
    live_threads: Vec<raw::ThreadTotals>,
    /// Size of the log's blocks (the file after its header).
    block_bytes: u64,
    /// Stacks captured, by `raw::walked_by` code.
    stacks_walked: [u64; raw::walked_by::COUNT],
}

fn read_header(path: &Path) -> Result<Option<ImageHeader>> {
    let mut buf = vec![0u8; raw::HEADER_SIZE];
    let mut f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    if f.read_exact(&mut buf).is_err() {
        return Ok(None); // created but never sized: the process died at once
    }
    let file_len = f.metadata().map_err(|e| Error::io(path, e))?.len();
    // SAFETY: FileHeader is plain data (integers and atomics of integers) and the
    // buffer holds HEADER_SIZE >= size_of::<FileHeader>() bytes.
    let h: FileHeader = unsafe { std::ptr::read_unaligned(buf.as_ptr() as *const FileHeader) };
    if h.magic != raw::MAGIC {
        return Ok(None);
    }
    let stacks_walked = h.stacks_walked();
    Ok(Some(ImageHeader {
        path: path.to_path_buf(),
        pid: h.pid,
        ppid: h.ppid,
        exec_seq: h.exec_seq,
        rank: h.rank,
        start_ns: h.start_ns,
        settings: h.settings,
        dropped: h.dropped_events.into_inner(),
        untracked: h.untracked_allocs.into_inner(),
        faults: h.faults.into_inner(),
        instrumented: h.instrumented.into_inner() != 0,
        live_threads: h
            .slots
            .iter()
            .filter(|slot| slot.tid.load(Ordering::Relaxed) != 0)
            .map(|slot| raw::ThreadTotals {
                tid: slot.tid.load(Ordering::Relaxed).into(),
                access: slot.access.load(),
                alloc_bytes: slot.counters.alloc_bytes.load(Ordering::Relaxed),
                free_bytes: slot.counters.free_bytes.load(Ordering::Relaxed),
                allocs: slot.counters.allocs.load(Ordering::Relaxed),
                frees: slot.counters.frees.load(Ordering::Relaxed),
                own_alloc_counters: 1,
                ..Default::default()
            })
            .collect(),
        block_bytes: file_len.saturating_sub(raw::HEADER_SIZE as u64),
        stacks_walked,
    }))
}

/// One thread's published records: its blocks in file order, which is time order.
struct ThreadStream<'a> {
    tid: u32,
    blocks: Vec<&'a [u8]>,
}

/// An image log mapped in memory, split into per-thread streams.
struct ImageLog {
    data: memmap2::Mmap,
    /// The byte ranges the file has data in: a hole (a block whose disk space
    /// was refused while another thread's later block got some) is never
    /// touched, since reading a hole of a full tmpfs raises SIGBUS.
    extents: Vec<std::ops::Range<usize>>,
}

impl ImageLog {
    fn open(path: &Path) -> Result<ImageLog> {
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        // SAFETY: read-only mapping of a log nobody writes any more.
        let data = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
        let extents = data_extents(&file, data.len());
        Ok(ImageLog { data, extents })
    }

    /// How many bytes from `at` on lie in one data extent (0 in a hole).
    fn data_after(&self, at: usize) -> usize {
        // Extents are sorted and disjoint: the first ending past `at`.
        let i = self.extents.partition_point(|e| e.end <= at);
        self.extents
            .get(i)
            .filter(|e| e.start <= at)
            .map_or(0, |e| e.end - at)
    }

    /// Per-thread streams, and how many blocks were cut short or never written.
    fn streams(&self) -> (Vec<ThreadStream<'_>>, u64) {
        let data = &self.data[..];
        let mut by_tid: BTreeMap<u32, Vec<&[u8]>> = BTreeMap::new();
        let mut truncated = 0;
        let mut off = raw::HEADER_SIZE;
        while off + raw::BLOCK_HEADER_SIZE <= data.len() {
            let readable = self.data_after(off);
            if readable < raw::BLOCK_HEADER_SIZE {
                truncated += 1; // a hole: disk space refused
                off += raw::BLOCK_SIZE;
                continue;
            }
            let block = &data[off..data.len().min(off + raw::BLOCK_SIZE.min(readable))];
            off += raw::BLOCK_SIZE;
            let Some((tid, used)) = raw::BlockHeader::read(block) else {
                truncated += 1; // reserved but never initialised: the process died then
                continue;
            };
            let body = &block[raw::BLOCK_HEADER_SIZE..];
            let used = used as usize;
            if used > body.len() {
                truncated += 1;
            }
            by_tid
                .entry(tid)
                .or_default()
                .push(&body[..used.min(body.len())]);
        }
        let streams = by_tid
            .into_iter()
            .map(|(tid, blocks)| ThreadStream { tid, blocks })
            .collect();
        (streams, truncated)
    }
}

/// The data extents of a file of `len` bytes, from SEEK_DATA and SEEK_HOLE;
/// the whole file where the file system cannot tell.
fn data_extents(file: &std::fs::File, len: usize) -> Vec<std::ops::Range<usize>> {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    let mut extents = Vec::new();
    let mut at = 0i64;
    while (at as usize) < len {
        // SAFETY: lseek on a descriptor we own.
        let start = unsafe { libc::lseek(fd, at, libc::SEEK_DATA) };
        if start < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::ENXIO) {
                break; // only a hole is left
            }
            return std::iter::once(0..len).collect();
        }
        // SAFETY: as above.
        let end = unsafe { libc::lseek(fd, start, libc::SEEK_HOLE) };
        if end <= start {
            return std::iter::once(0..len).collect();
        }
        extents.push(start as usize..(end as usize).min(len));
        at = end;
    }
    extents
}

/// Definitions an image's events refer to, gathered in a first pass.
#[derive(Default)]
struct Definitions {
    strings: HashMap<u64, String>,
    stacks: HashMap<u64, Vec<u64>>,
    modules: Vec<(u64, LoadedModule)>,
    exit_ns: Option<u64>,
    /// Status the program passed to exit/_exit, when the runtime saw it.
    exit_status: Option<i32>,
    malformed_blocks: u64,
    /// Records whose time lies outside the image's window (scribbled on).
    damaged_records: u64,
    last_ns: u64,
}

/// The times an image's records can carry: from shortly before its runtime
/// started to a year after. A time outside is a damaged record, dropped and
/// counted, so that no garbage time reaches spans, sums and timelines.
#[derive(Clone, Copy)]
struct TimeWindow {
    start: u64,
    end: u64,
}

impl TimeWindow {
    const SLACK_NS: u64 = 60_000_000_000;
    const LONGEST_RUN_NS: u64 = 366 * 24 * 3600 * 1_000_000_000;

    fn of(log: &ImageHeader) -> TimeWindow {
        TimeWindow {
            start: log.start_ns.saturating_sub(Self::SLACK_NS),
            end: log.start_ns.saturating_add(Self::LONGEST_RUN_NS),
        }
    }

    fn contains(&self, time: u64) -> bool {
        (self.start..=self.end).contains(&time)
    }
}

fn definitions(streams: &[ThreadStream<'_>], window: TimeWindow) -> Definitions {
    let mut d = Definitions::default();
    for block in streams.iter().flat_map(|s| s.blocks.iter()) {
        let mut records = Records::new(block);
        for rec in records.by_ref() {
            let time = record_time(&rec);
            if time.is_some_and(|t| !window.contains(t)) {
                d.damaged_records += 1;
                continue;
            }
            match rec.tag {
                tag::STRING => {
                    if let Some(def) = rec.payload::<raw::StringDef>() {
                        let bytes = rec.trailing::<raw::StringDef>();
                        let s = &bytes[..(def.len as usize).min(bytes.len())];
                        d.strings
                            .insert(def.id, String::from_utf8_lossy(s).into_owned());
                    }
                }
                tag::STACK => {
                    if let Some((id, frames)) = stack_def(&rec) {
                        d.stacks.insert(id, frames);
                    }
                }
                tag::MODULE => {
                    if let Some(module) = module_def(&rec) {
                        d.modules.push(module);
                    }
                }
                tag::PROCESS_EXIT => {
                    if let Some(e) = rec.payload::<raw::ProcessExit>() {
                        d.exit_ns = Some(e.time);
                        d.exit_status = (e.status >= 0).then_some(e.status);
                    }
                }
                _ => {
                    if let Some(t) = time {
                        d.last_ns = d.last_ns.max(t);
                    }
                }
            }
        }
        if records.malformed {
            d.malformed_blocks += 1;
        }
    }
    d.modules.sort_by_key(|m| m.0);
    d
}

/// A stack definition: its id and return addresses, innermost first.
pub(crate) fn stack_def(rec: &RawRecord<'_>) -> Option<(u64, Vec<u64>)> {
    let def = rec.payload::<raw::StackDef>()?;
    let frames = rec
        .trailing::<raw::StackDef>()
        .chunks_exact(8)
        .take(def.frames as usize)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
        .collect();
    Some((def.id, frames))
}

/// A loaded object and when it was loaded.
pub(crate) fn module_def(rec: &RawRecord<'_>) -> Option<(u64, LoadedModule)> {
    let m = rec.payload::<raw::Module>()?;
    let p = rec.trailing::<raw::Module>();
    let path = String::from_utf8_lossy(&p[..(m.path_len as usize).min(p.len())]).into_owned();
    let module = LoadedModule {
        path,
        start: m.start,
        end: m.end,
        bias: m.bias,
    };
    Some((m.time, module))
}

/// The timed records of all threads of an image, merged in time order.
struct Merged<'a> {
    window: TimeWindow,
    /// Bytes of the log's blocks opened so far (progress).
    blocks_started: u64,
    cursors: Vec<(u32, std::slice::Iter<'a, &'a [u8]>, Records<'a>)>,
    heads: BinaryHeap<Reverse<(u64, usize)>>,
    pending: Vec<Option<RawRecord<'a>>>,
}

impl<'a> Merged<'a> {
    fn new(streams: &'a [ThreadStream<'a>], window: TimeWindow) -> Self {
        let mut m = Merged {
            window,
            blocks_started: 0,
            cursors: Vec::new(),
            heads: BinaryHeap::new(),
            pending: Vec::new(),
        };
        for s in streams {
            let mut blocks = s.blocks.iter();
            let first = Records::new(blocks.next().copied().unwrap_or(&[]));
            m.blocks_started += raw::BLOCK_SIZE as u64;
            m.cursors.push((s.tid, blocks, first));
            m.pending.push(None);
            m.advance(m.cursors.len() - 1);
        }
        m
    }

    /// Loads the next timed record of stream `i` into `pending` and the heap.
    fn advance(&mut self, i: usize) {
        let (_, blocks, records) = &mut self.cursors[i];
        loop {
            match records.next() {
                Some(rec) => {
                    // Untimed records are definitions; damaged ones are counted
                    // by `definitions`.
                    if let Some(t) = record_time(&rec).filter(|&t| self.window.contains(t)) {
                        self.heads.push(Reverse((t, i)));
                        self.pending[i] = Some(rec);
                        return;
                    }
                }
                None => match blocks.next() {
                    Some(b) => {
                        *records = Records::new(b);
                        self.blocks_started += raw::BLOCK_SIZE as u64;
                    }
                    None => return,
                },
            }
        }
    }
}

impl<'a> Iterator for Merged<'a> {
    type Item = (u32, RawRecord<'a>);

    fn next(&mut self) -> Option<(u32, RawRecord<'a>)> {
        let Reverse((_, i)) = self.heads.pop()?;
        let rec = self.pending[i].take()?;
        let tid = self.cursors[i].0;
        self.advance(i);
        Some((tid, rec))
    }
}

fn record_time(rec: &RawRecord<'_>) -> Option<u64> {
    // Every timed payload starts with its u64 time.
    match rec.tag {
        tag::STRING | tag::STACK => None,
        _ => rec
            .body
            .get(0..8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default())),
    }
}

/// Rows of one image that are kept whole (small tables), and counts.
#[derive(Default)]
struct Built {
    regions: Vec<Region>,
    threads: Vec<ThreadRow>,
    tags: Vec<TagRange>,
    timeline: Vec<TimelinePoint>,
    stack_ids: std::collections::BTreeSet<u64>,
    /// Code addresses of the samples.
    pcs: std::collections::BTreeSet<u64>,
    unmatched_frees: u64,
}

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

/// Where one image's streamed rows go.
struct Sinks {
    allocations: TableWriter<Allocation>,
    samples: TableWriter<AccessSample>,
    /// Calibrated ns of each modelled level code (cache model runs only).
    model_cost: [Option<f64>; 8],
}

/// Replays one image's events in time order: allocation rows and samples go to
/// the sinks as soon as they are complete; the small tables are returned.
fn build(
    log: &ImageHeader,
    defs: &Definitions,
    merged: Merged<'_>,
    t0: u64,
    sinks: &mut Sinks,
    progress: &dyn Fn(u64),
) -> Built {
    let out = &mut sinks.allocations;
    let samples = &mut sinks.samples;
    let model_cost = sinks.model_cost;
    let rel = |t: u64| t.saturating_sub(t0);
    let name = |id: u64| {
        defs.strings
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("#{id:x}"))
    };
    let mut built = Built::default();
    // Hashed with Fx: millions of blocks pass through when every block is
    // recorded, and the row order of still-live blocks stays the same run to run.
    let mut live_heap: FxHashMap<u64, Allocation> = FxHashMap::default();
    let mut maps = Mappings::default();
    let mut open_regions: HashMap<u32, Vec<usize>> = HashMap::new();
    let mut region_start: HashMap<usize, [u64; raw::COUNTS]> = HashMap::new();
    let mut open_stacks: FxHashMap<u32, Allocation> = FxHashMap::default();
    // Per thread: (start, end) and its totals (final, or as last published).
    let mut thread_times: BTreeMap<u32, (Option<u64>, Option<u64>)> = BTreeMap::new();
    let mut final_totals: BTreeMap<u32, (raw::ThreadTotals, bool)> = BTreeMap::new();
    let pid = log.pid;
    let mut emit = |row: Allocation, built: &mut Built| {
        if row.stack_id != 0 {
            built.stack_ids.insert(row.stack_id);
        }
        out.push(row);
    };
    let mut merged = merged;
    let mut records = 0u64;
    while let Some((tid, rec)) = merged.next() {
        records += 1;
        if records.is_multiple_of(1 << 16) {
            progress(merged.blocks_started);
        }
        match rec.tag {
            tag::ALLOC => {
                let Some(a) = rec.payload::<raw::Alloc>() else {
                    continue;
                };
                let (sampled, est_count, est_bytes) =
                    estimate(a.size, a.flags, log.settings.sample_rate);
                let row = Allocation {
                    pid,
                    tid,
                    kind: alloc_kind::NAMES
                        .get(a.kind as usize)
                        .unwrap_or(&"malloc")
                        .to_string(),
                    address: a.ptr,
                    size: a.size,
                    usable_size: a.usable,
                    alloc_ns: rel(a.time),
                    free_ns: None,
                    stack_id: a.stack,
                    sampled,
                    est_count,
                    est_bytes,
                    group: (a.group != 0).then(|| name(a.group)),
                    prot: None,
                    map_flags: None,
                    fd: None,
                };
                if let Some(mut old) = live_heap.insert(a.ptr, row) {
                    // Its free was not seen (the block was freed before the hook
                    // could record it): it ended when its address was reused.
                    old.free_ns = Some(rel(a.time));
                    emit(old, &mut built);
                }
            }
            tag::FREE => {
                let Some(f) = rec.payload::<raw::Free>() else {
                    continue;
                };
                match live_heap.remove(&f.ptr) {
                    Some(mut row) => {
                        row.free_ns = Some(rel(f.time));
                        emit(row, &mut built);
                    }
                    None => built.unmatched_frees += 1,
                }
            }
            tag::MMAP | tag::MREMAP => {
                let (time, addr, len, template) = if rec.tag == tag::MMAP {
                    let Some(m) = rec.payload::<raw::Mmap>() else {
                        continue;
                    };
                    let row = Allocation {
                        stack_id: m.stack,
                        prot: Some(m.prot),
                        map_flags: Some(m.flags),
                        fd: Some(m.fd),
                        ..Default::default()
                    };
                    (m.time, m.addr, m.len, row)
                } else {
                    let Some(m) = rec.payload::<raw::Mremap>() else {
                        continue;
                    };
                    // The new mapping carries the old one's origin.
                    let template = maps
                        .moved(m.old_addr, m.old_len, rel(m.time), &mut |r| {
                            emit(r, &mut built)
                        })
                        .unwrap_or_default();
                    (m.time, m.new_addr, m.new_len, template)
                };
                let row = Allocation {
                    pid,
                    tid,
                    kind: "mmap".into(),
                    address: addr,
                    size: len,
                    alloc_ns: rel(time),
                    free_ns: None,
                    sampled: false,
                    est_count: 1.0,
                    est_bytes: len as f64,
                    ..template
                };
                // MAP_FIXED replaces whatever was mapped there.
                maps.map(row, rel(time), &mut |r| emit(r, &mut built));
            }
            tag::MUNMAP => {
                let Some(m) = rec.payload::<raw::Munmap>() else {
                    continue;
                };
                maps.unmap(m.addr, m.len, rel(m.time), &mut |r| emit(r, &mut built));
            }
            tag::REGION_BEGIN | tag::REGION_END => {
                let Some(n) = rec.payload::<raw::RegionMark>() else {
                    continue;
                };
                let stack = open_regions.entry(tid).or_default();
                if rec.tag == tag::REGION_BEGIN {
                    stack.push(built.regions.len());
                    region_start.insert(built.regions.len(), n.counts);
                    built.regions.push(Region {
                        pid,
                        tid,
                        name: name(n.name),
                        begin_ns: rel(n.time),
                        end_ns: None,
                        depth: (stack.len() - 1) as u32,
                        ..Default::default()
                    });
                } else {
                    let wanted = name(n.name);
                    if let Some(pos) = stack.iter().rposition(|&r| built.regions[r].name == wanted)
                    {
                        let r = stack.remove(pos);
                        let region = &mut built.regions[r];
                        region.end_ns = Some(rel(n.time));
                        if let (true, Some(begin)) = (log.instrumented, region_start.remove(&r)) {
                            // The thread's exact counts at both ends: their difference is exact.
                            let diff: [u64; raw::COUNTS] =
                                std::array::from_fn(|i| n.counts[i].saturating_sub(begin[i]));
                            let (read, written, loads, stores) =
                                raw::AccessCounters::traffic(&diff);
                            region.bytes_read = Some(read);
                            region.bytes_written = Some(written);
                            region.loads = Some(loads);
                            region.stores = Some(stores);
                        }
                    }
                }
            }
            tag::SAMPLE => {
                let Some(x) = rec.payload::<raw::Sample>() else {
                    continue;
                };
                let class = x.class as usize % raw::ACCESS_CLASSES;
                built.pcs.insert(x.pc);
                samples.push(AccessSample {
                    pid,
                    tid,
                    time_ns: rel(x.time),
                    cpu: x.cpu,
                    pc: x.pc,
                    address: x.addr,
                    size: raw::class_size(class) as u32,
                    is_store: raw::class_is_store(class),
                    level: x.level,
                    model_cost_ns: model_cost.get(x.level as usize).copied().flatten(),
                    ..AccessSample::default()
                });
            }
            tag::TAG => {
                let Some(tg) = rec.payload::<raw::Tag>() else {
                    continue;
                };
                built.tags.push(TagRange {
                    pid,
                    tid,
                    name: name(tg.name),
                    address: tg.start,
                    size: tg.len,
                    begin_ns: rel(tg.time),
                    end_ns: None,
                });
            }
            tag::UNTAG => {
                let Some(u) = rec.payload::<raw::Untag>() else {
                    continue;
                };
                if let Some(t) = built
                    .tags
                    .iter_mut()
                    .rev()
                    .find(|t| t.address == u.start && t.end_ns.is_none())
                {
                    t.end_ns = Some(rel(u.time));
                }
            }
            tag::THREAD_START => {
                let Some(t) = rec.payload::<raw::ThreadEvent>() else {
                    continue;
                };
                thread_times.entry(tid).or_default().0 = Some(rel(t.time));
                if t.stack_hi > t.stack_lo {
                    let size = t.stack_hi - t.stack_lo;
                    let row = Allocation {
                        pid,
                        tid,
                        kind: "stack".into(),
                        address: t.stack_lo,
                        size,
                        usable_size: size,
                        alloc_ns: rel(t.time),
                        est_count: 1.0,
                        est_bytes: size as f64,
                        ..Default::default()
                    };
                    if let Some(old) = open_stacks.insert(t.tid as u32, row) {
                        emit(old, &mut built);
                    }
                }
            }
            tag::THREAD_TOTALS => {
                if let Some(t) = rec.payload::<raw::ThreadTotals>() {
                    final_totals.insert(t.tid as u32, (t, true));
                }
            }
            tag::THREAD_EXIT => {
                let Some(t) = rec.payload::<raw::ThreadEvent>() else {
                    continue;
                };
                thread_times.entry(tid).or_default().1 = Some(rel(t.time));
                if let Some(mut row) = open_stacks.remove(&(t.tid as u32)) {
                    row.free_ns = Some(rel(t.time));
                    emit(row, &mut built);
                }
            }
            tag::TIMELINE => {
                if let Some(t) = rec.payload::<raw::Timeline>() {
                    built.timeline.push(timeline_point(&t, t0));
                }
            }
            _ => {}
        }
    }
    for t in &log.live_threads {
        final_totals.entry(t.tid as u32).or_insert((*t, false));
    }
    for (&tid, (t, done)) in &final_totals {
        let (start_ns, end_ns) = thread_times.get(&tid).copied().unwrap_or_default();
        let (read, written, loads, stores) = raw::AccessCounters::traffic(&t.access);
        let instrumented = log.instrumented;
        let own = t.own_alloc_counters != 0;
        built.threads.push(ThreadRow {
            pid,
            tid,
            start_ns,
            end_ns: end_ns.or((*done && t.time > 0).then(|| rel(t.time))),
            loads: instrumented.then_some(loads),
            stores: instrumented.then_some(stores),
            bytes_read: instrumented.then_some(read),
            bytes_written: instrumented.then_some(written),
            allocs: own.then_some(t.allocs),
            alloc_bytes: own.then_some(t.alloc_bytes),
            frees: own.then_some(t.frees),
            free_bytes: own.then_some(t.free_bytes),
            final_counts: *done,
        });
    }
    // Whatever is still live was live when the process ended.
    let still_live: Vec<Allocation> = live_heap
        .into_values()
        .chain(maps.into_rows())
        .chain(open_stacks.into_values())
        .collect();
    for row in still_live {
        emit(row, &mut built);
    }
    built
}

fn timeline_point(t: &raw::Timeline, t0: u64) -> TimelinePoint {
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

/// What the collector wrote: capacity samples, process exits and the kernel's
/// usage of each, counter readings.
#[derive(Default)]
struct CollectorLog {
    timeline: Vec<raw::Timeline>,
    exits: Vec<raw::ProcessExit>,
    usages: Vec<raw::ProcessUsage>,
    /// Images the runtime could not enter, with their executables.
    untracked: Vec<(raw::UntrackedProcess, String)>,
    /// Counter definitions (with name and method) by index, and readings.
    counters: HashMap<u32, (raw::CounterDef, String, String)>,
    readings: Vec<raw::CounterReading>,
}

fn read_collector_log(path: &Path) -> CollectorLog {
    let Ok(data) = std::fs::read(path) else {
        return CollectorLog::default();
    };
    let mut log = CollectorLog::default();
    for rec in raw::Records::new(&data) {
        match rec.tag {
            tag::TIMELINE => log.timeline.extend(rec.payload::<raw::Timeline>()),
            tag::PROCESS_EXIT => log.exits.extend(rec.payload::<raw::ProcessExit>()),
            tag::PROCESS_USAGE => log.usages.extend(rec.payload::<raw::ProcessUsage>()),
            tag::UNTRACKED_PROCESS => {
                if let Some(p) = rec.payload::<raw::UntrackedProcess>() {
                    let exe = rec.trailing::<raw::UntrackedProcess>();
                    let exe = String::from_utf8_lossy(exe)
                        .trim_end_matches('\0')
                        .to_string();
                    log.untracked.push((p, exe));
                }
            }
            tag::COUNTER_DEF => {
                if let Some(def) = rec.payload::<raw::CounterDef>() {
                    let text =
                        String::from_utf8_lossy(rec.trailing::<raw::CounterDef>()).into_owned();
                    let (name, method) = text.split_once('\0').unwrap_or((&text, ""));
                    let method = method.trim_end_matches('\0').to_string();
                    log.counters
                        .insert(def.index, (def, name.to_string(), method));
                }
            }
            tag::COUNTER => log.readings.extend(rec.payload::<raw::CounterReading>()),
            _ => {}
        }
    }
    log
}

/// Counter readings as table rows, scaled and compensated for multiplexing.
fn counter_rows(log: &CollectorLog, t0: u64) -> Vec<profile::CounterReading> {
    log.readings
        .iter()
        .filter_map(|r| {
            let (def, name, method) = log.counters.get(&r.index)?;
            let unit = &def.unit[..def.unit.iter().position(|&c| c == 0).unwrap_or(16)];
            // Counted only part of the time (multiplexed): scale up, as perf stat does.
            let share = if r.running > 0 && r.running < r.enabled {
                r.enabled as f64 / r.running as f64
            } else {
                1.0
            };
            Some(profile::CounterReading {
                name: name.clone(),
                unit: String::from_utf8_lossy(unit).into_owned(),
                scope: if def.machine_wide != 0 {
                    "machine"
                } else {
                    "program"
                }
                .into(),
                method: if share > 1.0 {
                    format!("{method}; multiplexed, scaled by enabled/running time")
                } else {
                    method.clone()
                },
                time_ns: r.time.saturating_sub(t0),
                value: r.value as f64 * share * def.scale,
                count: r.value,
                enabled_ns: r.enabled,
                running_ns: r.running,
            })
        })
        .collect()
}

/// The signal that ended a process the collector reaped, if one did.
fn signal_of(exit: Option<&raw::ProcessExit>) -> Option<i32> {
    exit.filter(|e| e.signaled != 0)
        .map(|e| e.status.wrapping_sub(128))
}

fn kernel_usage(u: &raw::ProcessUsage) -> KernelUsage {
    KernelUsage {
        user_ns: u.user_ns,
        system_ns: u.system_ns,
    }
}

/// The processes (or images after an exec) the runtime could not enter: known
/// from the collector alone, they end at their exit or at a later image.
fn untracked_processes(log: &CollectorLog, images: &[ImageHeader], t0: u64) -> Vec<Process> {
    log.untracked
        .iter()
        .map(|(u, exe)| {
            let logged = images.iter().filter(|l| l.pid == u.pid);
            let before = logged.clone().filter(|l| l.start_ns < u.time).count() as u32;
            let next = (logged.filter(|l| l.start_ns > u.time).map(|l| l.start_ns))
                .chain(
                    (log.untracked.iter())
                        .filter(|(o, _)| o.pid == u.pid && o.time > u.time)
                        .map(|(o, _)| o.time),
                )
                .min();
            let exit = log
                .exits
                .iter()
                .find(|e| e.pid as u32 == u.pid)
                .filter(|_| next.is_none());
            let usage = log
                .usages
                .iter()
                .find(|x| x.pid as u32 == u.pid)
                .filter(|_| next.is_none());
            Process {
                pid: u.pid,
                ppid: u.ppid,
                exec_seq: before,
                rank: None,
                exe: exe.clone(),
                start_ns: u.time.saturating_sub(t0),
                end_ns: next.or(exit.map(|e| e.time)).map(|t| t.saturating_sub(t0)),
                exit_code: exit.filter(|e| e.signaled == 0).map(|e| e.status),
                signal: signal_of(exit),
                usage: usage.map(kernel_usage),
                untracked: true,
                stacks_unwound: Default::default(),
            }
        })
        .collect()
}

fn raw_logs(raw_dir: &Path) -> Result<Vec<PathBuf>> {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(raw_dir)
        .map_err(|e| Error::io(raw_dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "mlraw"))
        .collect();
    logs.sort();
    Ok(logs)
}

/// Writes the profile tables and meta.json from `dir/raw`. Keeps the raw logs
/// unless `remove_raw`.
///
/// `progress` hears (done, total) bytes of the raw logs as their events replay.
pub fn finalize(
    dir: &Path,
    run: &RunInfo,
    remove_raw: bool,
    progress: &dyn Fn(u64, u64),
) -> Result<Meta> {
    let raw_dir = dir.join("raw");
    let mut images = Vec::new();
    for path in raw_logs(&raw_dir)? {
        images.extend(read_header(&path)?);
    }
    let collector = read_collector_log(&raw_dir.join(COLLECTOR_LOG));
    let (collector_timeline, exits) = (&collector.timeline, &collector.exits);
    if images.is_empty() && collector_timeline.is_empty() {
        return Err(Error::Profile(profile::ProfileError::NotAProfile(
            dir.to_path_buf(),
        )));
    }
    images.sort_by_key(|l| (l.start_ns, l.pid, l.exec_seq));
    let t0 = run
        .start_ns
        .into_iter()
        .chain(images.iter().map(|l| l.start_ns))
        .chain(collector_timeline.iter().map(|t| t.time))
        .min()
        .unwrap_or(0);

    let mut sinks = Sinks {
        allocations: TableWriter::create(dir)?,
        samples: TableWriter::create(dir)?,
        model_cost: match (
            &run.cache_model,
            profile::Calibration::read(&dir.join(profile::CALIBRATION_FILE)),
        ) {
            (Some(_), Ok(c)) => std::array::from_fn(|code| c.model_level_ns(code as u8)),
            _ => [None; 8],
        },
    };
    let mut locations = Vec::new();
    let mut regions = Vec::new();
    let mut threads = Vec::new();
    let mut tags = Vec::new();
    let mut timeline: Vec<TimelinePoint> = collector_timeline
        .iter()
        .map(|t| timeline_point(t, t0))
        .collect();
    let mut frames = Vec::new();
    let (mut listed, mut listed_pcs) = (HashSet::new(), HashSet::new());
    let mut modules_rows = Vec::new();
    let mut statics = Vec::new();
    let mut processes = Vec::new();
    let mut losses = Losses {
        missed_ticks: run.missed_ticks,
        ..Default::default()
    };
    let mut symbolizer = Symbolizer::default();
    let mut last_time = run.end_ns.unwrap_or(0).saturating_sub(t0);
    // Each process's modules (its last image's), for samples of perf backends.
    let mut modules_of: HashMap<u32, Vec<LoadedModule>> = HashMap::new();

    let total: u64 = images.iter().map(|l| l.block_bytes).sum();
    let mut replayed = 0;
    for (i, log) in images.iter().enumerate() {
        let image = ImageLog::open(&log.path)?;
        let (streams, truncated) = image.streams();
        let window = TimeWindow::of(log);
        let defs = definitions(&streams, window);
        let merged = Merged::new(&streams, window);
        let report = |bytes| progress(replayed + bytes, total);
        let built = build(log, &defs, merged, t0, &mut sinks, &report);
        replayed += log.block_bytes;
        progress(replayed, total);
        losses.dropped_events += log.dropped;
        losses.untracked_allocs += log.untracked;
        let fault = |bit| u64::from(log.faults & bit != 0);
        losses.heap_not_hooked += fault(raw::fault::HEAP_NOT_HOOKED);
        losses.heap_sizes_unknown += fault(raw::fault::HEAP_SIZES_UNKNOWN);
        losses.log_lost += fault(raw::fault::LOG_LOST);
        losses.disk_full += fault(raw::fault::DISK_FULL);
        losses.truncated_blocks += truncated + defs.malformed_blocks;
        losses.decode_errors += defs.damaged_records;
        losses.unmatched_frees += built.unmatched_frees;
        let modules: Vec<LoadedModule> = defs.modules.iter().map(|(_, m)| m.clone()).collect();
        // An exec keeps the pid: without address randomization its images share
        // stack ids and code addresses, which are listed once per process.
        for &id in &built.stack_ids {
            let Some(addrs) = defs.stacks.get(&id) else {
                continue;
            };
            if listed.insert((log.pid, id)) {
                frames.extend(symbolizer.stack_rows(log.pid, id, addrs, &modules));
            }
        }
        for &pc in &built.pcs {
            if listed_pcs.insert((log.pid, pc)) {
                locations.push(symbolizer.location(log.pid, pc, &modules, true));
            }
        }
        modules_of.insert(log.pid, modules.clone());
        let mut seen_paths = HashSet::new();
        for (time, m) in &defs.modules {
            modules_rows.push(profile::Module {
                pid: log.pid,
                path: m.path.clone(),
                start: m.start,
                end: m.end,
                bias: m.bias,
                load_ns: time.saturating_sub(t0),
            });
            // The runtime's own variables are not the program's data.
            if seen_paths.insert(m.path.clone()) && !m.path.ends_with("libmemlens_runtime.so") {
                statics.extend(symbols::static_objects(log.pid, m));
            }
        }
        last_time = last_time.max(defs.last_ns.saturating_sub(t0));
        // An image ends at its exit, at the next exec of the same pid, or when the
        // collector saw the pid end.
        let next_exec = images[i + 1..]
            .iter()
            .find(|l| l.pid == log.pid && l.exec_seq > log.exec_seq)
            .map(|l| l.start_ns)
            .into_iter()
            .chain(
                (collector.untracked.iter())
                    .filter(|(u, _)| u.pid == log.pid && u.time > log.start_ns)
                    .map(|(u, _)| u.time),
            )
            .min()
            .map(|t| t.saturating_sub(t0));
        let last_image = next_exec.is_none();
        let exit = exits
            .iter()
            .find(|e| e.pid as u32 == log.pid)
            .filter(|_| last_image);
        let usage = collector
            .usages
            .iter()
            .find(|u| u.pid as u32 == log.pid)
            .filter(|_| last_image);
        let exe = modules.first().map(|m| m.path.clone()).unwrap_or_default();
        processes.push(Process {
            pid: log.pid,
            ppid: log.ppid,
            exec_seq: log.exec_seq,
            rank: (log.rank >= 0).then_some(log.rank as u32),
            exe,
            start_ns: log.start_ns.saturating_sub(t0),
            end_ns: next_exec
                .or(exit.map(|e| e.time.saturating_sub(t0)))
                .or(defs.exit_ns.map(|t| t.saturating_sub(t0))),
            exit_code: match exit {
                Some(e) => (e.signaled == 0).then_some(e.status),
                None => defs.exit_status.filter(|_| last_image),
            },
            signal: signal_of(exit),
            usage: usage.map(kernel_usage),
            untracked: false,
            stacks_unwound: StacksUnwound {
                frame_pointers: log.stacks_walked[raw::walked_by::FRAME_POINTERS],
                cached_rules: log.stacks_walked[raw::walked_by::CACHED_RULES],
                libgcc: log.stacks_walked[raw::walked_by::LIBGCC],
            },
        });
        regions.extend(built.regions);
        threads.extend(built.threads);
        tags.extend(built.tags);
        timeline.extend(built.timeline);
    }
    processes.extend(untracked_processes(&collector, &images, t0));
    losses.untracked_processes += collector.untracked.len() as u64;
    let perf = perf_samples(&raw_dir, t0, &mut sinks.samples);
    if let Some(perf) = &perf {
        let mut code: Vec<&(u32, u64)> = perf.code.iter().collect();
        code.sort_unstable();
        for &(pid, pc) in code {
            let modules = modules_of.get(&pid).map_or(&[][..], Vec::as_slice);
            // A PMU's or the kernel's sample names the instruction itself.
            locations.push(symbolizer.location(pid, pc, modules, false));
        }
        // A damaged record that ended the stream is already among them.
        losses.add(&perf.converted.summary.losses);
        last_time = last_time.max(perf.last_ns);
    }
    sinks.allocations.finish()?;
    sinks.samples.finish()?;
    timeline.sort_by_key(|p| (p.pid, p.time_ns));
    last_time = last_time.max(timeline.last().map_or(0, |p| p.time_ns));

    let settings = images.first().map(|l| l.settings).unwrap_or_default();
    let meta = Meta {
        format_version: profile::FORMAT_VERSION,
        memlens_version: env!("CARGO_PKG_VERSION").to_string(),
        command: run.command.clone(),
        host: crate::sysinfo::hostname(),
        cpu: crate::sysinfo::cpu_model(),
        kernel: crate::sysinfo::kernel(),
        backend: {
            let mut b = vec![profile::Backend::Preload, profile::Backend::Procfs];
            match &perf {
                Some(perf) => b.extend(perf.converted.backends()),
                None if images.iter().any(|l| l.instrumented) => b.push(profile::Backend::Sancov),
                None => {}
            }
            b.iter().map(|b| b.name().to_string()).collect()
        },
        settings: profile::Settings {
            interval_ms: run.interval_ms,
            min_size: settings.min_size,
            sample_rate: settings.sample_rate,
            unwinder: raw::unwinder::NAMES
                .get(settings.unwinder as usize)
                .unwrap_or(&"frame-pointers")
                .to_string(),
            max_frames: settings.max_frames,
            cache_model: run.cache_model.clone().unwrap_or_default(),
            access_period: perf.as_ref().map_or(settings.access_period, |p| p.period),
            sample_loads: settings.access_filter & raw::access_filter::LOADS != 0,
            sample_stores: settings.access_filter & raw::access_filter::STORES != 0,
            sample_lines: perf.is_none() && settings.access_filter & raw::access_filter::LINES != 0,
        },
        clock: profile::Clock {
            source: "CLOCK_MONOTONIC".into(),
            start_ns: t0,
            duration_ns: last_time,
        },
        processes,
        losses,
    };
    profile::write_table(dir, &frames)?;
    profile::write_table(dir, &locations)?;
    profile::write_table(dir, &regions)?;
    profile::write_table(dir, &threads)?;
    profile::write_table(dir, &tags)?;
    profile::write_table(dir, &timeline)?;
    profile::write_table(dir, &modules_rows)?;
    profile::write_table(dir, &statics)?;
    profile::write_table(dir, &counter_rows(&collector, t0))?;
    // meta.json last: its presence marks a complete profile.
    meta.write(dir)?;
    if remove_raw {
        std::fs::remove_dir_all(&raw_dir).map_err(|e| Error::io(&raw_dir, e))?;
    }
    Ok(meta)
}

/// The perf backend's `raw/perf.data` (if the run had one), streamed into the
/// samples table.
fn perf_samples(raw_dir: &Path, t0: u64, sink: &mut TableWriter<AccessSample>) -> Option<Streamed> {
    let file = std::fs::File::open(raw_dir.join(crate::record::PERF_DATA)).ok()?;
    // SAFETY: read-only map of a file nothing writes any more.
    let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    let perf = PerfData::parse(&map).ok()?;
    Some(convert_into(&perf, t0, |row| sink.push(row)))
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

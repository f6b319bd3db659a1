//! Turns the raw logs of a recording (one per process image, plus the collector's
//! timeline) into the profile's Parquet tables and `meta.json`.
//!
//! It reads whatever was published, so a target that crashed or was killed still
//! gives a profile up to that point; blocks cut short are counted as losses.

use crate::symbols::{self, LoadedModule, Symbolizer};
use crate::{Error, Result};
use memlens_profile::{
    self as profile, Allocation, Losses, Meta, Process, Region, TagRange, TimelinePoint,
};
use memlens_rawlog::{self as raw, alloc_flags, alloc_kind, tag, FileHeader, RawRecord};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

pub const COLLECTOR_LOG: &str = "collector.mltl";

/// What the launcher knows that the logs do not.
#[derive(Clone, Debug, Default)]
pub struct RunInfo {
    pub command: Vec<String>,
    pub interval_ms: u64,
    pub start_ns: Option<u64>,
    pub end_ns: Option<u64>,
    pub missed_ticks: u64,
}

/// A timed record of a log: where its payload lies in the file.
struct Event {
    time: u64,
    offset: u64,
    tid: u32,
    tag: u16,
    len: u16,
}

/// One process image's log, decoded.
struct ImageLog {
    pid: u32,
    ppid: u32,
    exec_seq: u32,
    rank: i32,
    start_ns: u64,
    settings: raw::RuntimeSettings,
    dropped: u64,
    untracked: u64,
    truncated_blocks: u64,
    /// The whole log file; events point into it.
    data: Vec<u8>,
    /// Timed records, in time order.
    events: Vec<Event>,
    strings: HashMap<u64, String>,
    stacks: HashMap<u64, Vec<u64>>,
    modules: Vec<(u64, LoadedModule)>,
    exit_ns: Option<u64>,
    /// Status the program passed to exit/_exit, when the runtime saw it.
    exit_status: Option<i32>,
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

fn read_image_log(path: &Path) -> Result<Option<ImageLog>> {
    let data = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    if data.len() < raw::HEADER_SIZE {
        return Ok(None);
    }
    // SAFETY: FileHeader is plain data (atomics of integers) and the buffer is big
    // enough; read_unaligned copies it out of the byte buffer.
    let header: FileHeader =
        unsafe { std::ptr::read_unaligned(data.as_ptr() as *const FileHeader) };
    if header.magic != raw::MAGIC {
        return Ok(None);
    }
    let mut log = ImageLog {
        pid: header.pid,
        ppid: header.ppid,
        exec_seq: header.exec_seq,
        rank: header.rank,
        start_ns: header.start_ns,
        settings: header.settings,
        dropped: header.dropped_events.into_inner(),
        untracked: header.untracked_allocs.into_inner(),
        truncated_blocks: 0,
        data: Vec::new(),
        events: Vec::new(),
        strings: HashMap::new(),
        stacks: HashMap::new(),
        modules: Vec::new(),
        exit_ns: None,
        exit_status: None,
    };
    let mut off = raw::HEADER_SIZE;
    while off + raw::BLOCK_HEADER_SIZE <= data.len() {
        let block = &data[off..data.len().min(off + raw::BLOCK_SIZE)];
        off += raw::BLOCK_SIZE;
        let magic = u32::from_le_bytes(block[0..4].try_into().unwrap_or_default());
        if magic != raw::BLOCK_MAGIC {
            // Reserved but never initialised: the process died right then.
            log.truncated_blocks += 1;
            continue;
        }
        let tid = u32::from_le_bytes(block[4..8].try_into().unwrap_or_default());
        let used = u64::from_le_bytes(block[8..16].try_into().unwrap_or_default()) as usize;
        let body = &block[raw::BLOCK_HEADER_SIZE..];
        if used > body.len() {
            log.truncated_blocks += 1;
        }
        let mut records = raw::Records::new(&body[..used.min(body.len())]);
        for rec in records.by_ref() {
            match rec.tag {
                tag::STRING => {
                    if let Some(def) = rec.payload::<raw::StringDef>() {
                        let bytes = rec.trailing::<raw::StringDef>();
                        let s = &bytes[..(def.len as usize).min(bytes.len())];
                        log.strings
                            .insert(def.id, String::from_utf8_lossy(s).into_owned());
                    }
                }
                tag::STACK => {
                    if let Some(def) = rec.payload::<raw::StackDef>() {
                        let frames = rec
                            .trailing::<raw::StackDef>()
                            .chunks_exact(8)
                            .take(def.frames as usize)
                            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
                            .collect();
                        log.stacks.insert(def.id, frames);
                    }
                }
                tag::MODULE => {
                    if let Some(m) = rec.payload::<raw::Module>() {
                        let p = rec.trailing::<raw::Module>();
                        let path =
                            String::from_utf8_lossy(&p[..(m.path_len as usize).min(p.len())])
                                .into_owned();
                        log.modules.push((
                            m.time,
                            LoadedModule {
                                path,
                                start: m.start,
                                end: m.end,
                                bias: m.bias,
                            },
                        ));
                    }
                }
                tag::PROCESS_EXIT => {
                    if let Some(e) = rec.payload::<raw::ProcessExit>() {
                        log.exit_ns = Some(e.time);
                        log.exit_status = (e.status >= 0).then_some(e.status);
                    }
                }
                _ => {
                    if let Some(time) = record_time(&rec) {
                        log.events.push(Event {
                            time,
                            offset: (rec.body.as_ptr() as usize - data.as_ptr() as usize) as u64,
                            tid,
                            tag: rec.tag,
                            len: rec.body.len() as u16,
                        });
                    }
                }
            }
        }
        if records.malformed {
            log.truncated_blocks += 1;
        }
    }
    // Each thread's blocks are in time order already: a stable sort is cheap.
    log.events.sort_by_key(|e| e.time);
    log.data = data;
    Ok(Some(log))
}

impl ImageLog {
    fn record(&self, e: &Event) -> RawRecord<'_> {
        let start = e.offset as usize;
        RawRecord {
            tag: e.tag,
            body: &self.data[start..start + e.len as usize],
        }
    }
}

/// Rows built from one image.
#[derive(Default)]
struct Built {
    allocations: Vec<Allocation>,
    regions: Vec<Region>,
    tags: Vec<TagRange>,
    timeline: Vec<TimelinePoint>,
    unmatched_frees: u64,
}

/// Live mapping segments: start -> (end, allocation row).
type Segments = BTreeMap<u64, (u64, usize)>;

fn unmap(
    segments: &mut Segments,
    rows: &mut [Allocation],
    live: &mut HashMap<usize, u64>,
    a: u64,
    b: u64,
    t: u64,
) {
    // Segments are disjoint and sorted: walking down from `b`, the overlapping ones
    // come first and the first one ending at or before `a` ends the search.
    let overlapping: Vec<u64> = segments
        .range(..b)
        .rev()
        .take_while(|(_, &(end, _))| end > a)
        .map(|(&s, _)| s)
        .collect();
    for s in overlapping {
        let Some((end, row)) = segments.remove(&s) else {
            continue;
        };
        let (cut_lo, cut_hi) = (s.max(a), end.min(b));
        if cut_lo >= cut_hi {
            segments.insert(s, (end, row));
            continue;
        }
        if s < cut_lo {
            segments.insert(s, (cut_lo, row));
        }
        if cut_hi < end {
            segments.insert(cut_hi, (end, row));
        }
        let left = live.entry(row).or_insert(0);
        *left = left.saturating_sub(cut_hi - cut_lo);
        if *left == 0 {
            rows[row].free_ns = Some(t);
        }
    }
}

/// Length rounded up to whole pages (saturating: lengths come from the log).
fn page_round(len: u64) -> u64 {
    len.checked_next_multiple_of(4096).unwrap_or(!4095)
}

fn estimate(size: u64, flags: u8, rate: u64) -> (bool, f64, f64) {
    let sampled = flags & alloc_flags::SAMPLED != 0
        && flags & (alloc_flags::EXACT | alloc_flags::GROUPED) == 0;
    if !sampled || rate <= 1 {
        return (false, 1.0, size as f64);
    }
    // Poisson byte sampling: a block of s bytes is picked with p = 1 - exp(-s/R).
    let p = -(-(size.max(1) as f64) / rate as f64).exp_m1();
    (true, 1.0 / p, size as f64 / p)
}

fn build(log: &ImageLog, t0: u64) -> Built {
    let rel = |t: u64| t.saturating_sub(t0);
    let name = |id: u64| {
        log.strings
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("#{id:x}"))
    };
    let mut out = Built::default();
    let mut live_heap: HashMap<u64, usize> = HashMap::new();
    let mut segments = Segments::new();
    let mut live_map: HashMap<usize, u64> = HashMap::new();
    let mut open_regions: HashMap<u32, Vec<usize>> = HashMap::new();
    let mut open_stacks: HashMap<u32, usize> = HashMap::new();
    let pid = log.pid;
    for e in &log.events {
        let rec = log.record(e);
        let tid = e.tid;
        match rec.tag {
            tag::ALLOC => {
                let Some(a) = rec.payload::<raw::Alloc>() else {
                    continue;
                };
                let (sampled, est_count, est_bytes) =
                    estimate(a.size, a.flags, log.settings.sample_rate);
                if let Some(old) = live_heap.insert(a.ptr, out.allocations.len()) {
                    // The block was freed without our seeing it (freed before the
                    // hook could record it): close it here.
                    out.allocations[old].free_ns.get_or_insert(rel(a.time));
                }
                out.allocations.push(Allocation {
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
                });
            }
            tag::FREE => {
                let Some(f) = rec.payload::<raw::Free>() else {
                    continue;
                };
                match live_heap.remove(&f.ptr) {
                    Some(row) => out.allocations[row].free_ns = Some(rel(f.time)),
                    None => out.unmatched_frees += 1,
                }
            }
            tag::MMAP => {
                let Some(m) = rec.payload::<raw::Mmap>() else {
                    continue;
                };
                let (a, b) = (m.addr, m.addr.saturating_add(page_round(m.len)));
                unmap(
                    &mut segments,
                    &mut out.allocations,
                    &mut live_map,
                    a,
                    b,
                    rel(m.time),
                );
                let row = out.allocations.len();
                segments.insert(a, (b, row));
                live_map.insert(row, b - a);
                out.allocations.push(Allocation {
                    pid,
                    tid,
                    kind: "mmap".into(),
                    address: m.addr,
                    size: m.len,
                    usable_size: b - a,
                    alloc_ns: rel(m.time),
                    stack_id: m.stack,
                    est_count: 1.0,
                    est_bytes: m.len as f64,
                    prot: Some(m.prot),
                    map_flags: Some(m.flags),
                    fd: Some(m.fd),
                    ..Default::default()
                });
            }
            tag::MUNMAP => {
                let Some(m) = rec.payload::<raw::Munmap>() else {
                    continue;
                };
                let b = m.addr.saturating_add(page_round(m.len));
                unmap(
                    &mut segments,
                    &mut out.allocations,
                    &mut live_map,
                    m.addr,
                    b,
                    rel(m.time),
                );
            }
            tag::MREMAP => {
                let Some(m) = rec.payload::<raw::Mremap>() else {
                    continue;
                };
                let old_end = m.old_addr.saturating_add(page_round(m.old_len));
                let template = segments
                    .range(..=m.old_addr)
                    .next_back()
                    .filter(|(_, &(end, _))| end > m.old_addr)
                    .map(|(_, &(_, row))| out.allocations[row].clone());
                unmap(
                    &mut segments,
                    &mut out.allocations,
                    &mut live_map,
                    m.old_addr,
                    old_end,
                    rel(m.time),
                );
                let new_end = m.new_addr.saturating_add(page_round(m.new_len));
                unmap(
                    &mut segments,
                    &mut out.allocations,
                    &mut live_map,
                    m.new_addr,
                    new_end,
                    rel(m.time),
                );
                let row = out.allocations.len();
                segments.insert(m.new_addr, (new_end, row));
                live_map.insert(row, new_end - m.new_addr);
                let base = template.unwrap_or_default();
                out.allocations.push(Allocation {
                    pid,
                    tid,
                    kind: "mmap".into(),
                    address: m.new_addr,
                    size: m.new_len,
                    usable_size: new_end - m.new_addr,
                    alloc_ns: rel(m.time),
                    free_ns: None,
                    est_count: 1.0,
                    est_bytes: m.new_len as f64,
                    ..base
                });
            }
            tag::REGION_BEGIN | tag::REGION_END => {
                let Some(n) = rec.payload::<raw::Named>() else {
                    continue;
                };
                let stack = open_regions.entry(tid).or_default();
                if rec.tag == tag::REGION_BEGIN {
                    stack.push(out.regions.len());
                    out.regions.push(Region {
                        pid,
                        tid,
                        name: name(n.name),
                        begin_ns: rel(n.time),
                        end_ns: None,
                        depth: (stack.len() - 1) as u32,
                    });
                } else {
                    let wanted = name(n.name);
                    if let Some(pos) = stack.iter().rposition(|&r| out.regions[r].name == wanted) {
                        let r = stack.remove(pos);
                        out.regions[r].end_ns = Some(rel(n.time));
                    }
                }
            }
            tag::TAG => {
                let Some(tg) = rec.payload::<raw::Tag>() else {
                    continue;
                };
                out.tags.push(TagRange {
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
                if let Some(t) = out
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
                if t.stack_hi > t.stack_lo {
                    open_stacks.insert(t.tid as u32, out.allocations.len());
                    let size = t.stack_hi - t.stack_lo;
                    out.allocations.push(Allocation {
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
                    });
                }
            }
            tag::THREAD_EXIT => {
                let Some(t) = rec.payload::<raw::ThreadEvent>() else {
                    continue;
                };
                if let Some(row) = open_stacks.remove(&(t.tid as u32)) {
                    out.allocations[row].free_ns = Some(rel(t.time));
                }
            }
            tag::TIMELINE => {
                if let Some(t) = rec.payload::<raw::Timeline>() {
                    out.timeline.push(timeline_point(&t, t0));
                }
            }
            _ => {}
        }
    }
    out
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
        heap_live: t.heap_alloc_bytes.saturating_sub(t.heap_free_bytes),
        heap_alloc_bytes: t.heap_alloc_bytes,
        heap_free_bytes: t.heap_free_bytes,
        heap_allocs: t.heap_allocs,
        heap_frees: t.heap_frees,
        numa0: numa(0),
        numa1: numa(1),
        numa2: numa(2),
        numa3: numa(3),
    }
}

/// Timeline samples and process exits the collector wrote.
fn read_collector_log(path: &Path) -> (Vec<raw::Timeline>, Vec<raw::ProcessExit>) {
    let Ok(data) = std::fs::read(path) else {
        return Default::default();
    };
    let (mut timeline, mut exits) = (Vec::new(), Vec::new());
    for rec in raw::Records::new(&data) {
        match rec.tag {
            tag::TIMELINE => timeline.extend(rec.payload::<raw::Timeline>()),
            tag::PROCESS_EXIT => exits.extend(rec.payload::<raw::ProcessExit>()),
            _ => {}
        }
    }
    (timeline, exits)
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
pub fn finalize(dir: &Path, run: &RunInfo, remove_raw: bool) -> Result<Meta> {
    let raw_dir = dir.join("raw");
    let mut images = Vec::new();
    for path in raw_logs(&raw_dir)? {
        images.extend(read_image_log(&path)?);
    }
    let (collector_timeline, exits) = read_collector_log(&raw_dir.join(COLLECTOR_LOG));
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

    let mut allocations = Vec::new();
    let mut regions = Vec::new();
    let mut tags = Vec::new();
    let mut timeline: Vec<TimelinePoint> = collector_timeline
        .iter()
        .map(|t| timeline_point(t, t0))
        .collect();
    let mut frames = Vec::new();
    let mut modules_rows = Vec::new();
    let mut statics = Vec::new();
    let mut processes = Vec::new();
    let mut losses = Losses {
        missed_ticks: run.missed_ticks,
        ..Default::default()
    };
    let mut symbolizer = Symbolizer::default();
    let mut last_time = run.end_ns.unwrap_or(0).saturating_sub(t0);

    for (i, log) in images.iter().enumerate() {
        let built = build(log, t0);
        losses.dropped_events += log.dropped;
        losses.untracked_allocs += log.untracked;
        losses.truncated_blocks += log.truncated_blocks;
        losses.unmatched_frees += built.unmatched_frees;
        let modules: Vec<LoadedModule> = log.modules.iter().map(|(_, m)| m.clone()).collect();
        let mut stack_ids: Vec<u64> = built
            .allocations
            .iter()
            .map(|a| a.stack_id)
            .filter(|&s| s != 0)
            .collect();
        stack_ids.sort_unstable();
        stack_ids.dedup();
        for id in stack_ids {
            if let Some(addrs) = log.stacks.get(&id) {
                frames.extend(symbolizer.stack_rows(log.pid, id, addrs, &modules));
            }
        }
        let mut seen_paths = std::collections::HashSet::new();
        for (time, m) in &log.modules {
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
        last_time = last_time.max(log.events.last().map_or(0, |e| e.time.saturating_sub(t0)));
        // An image ends at its exit, at the next exec of the same pid, or when the
        // collector saw the pid end.
        let next_exec = images[i + 1..]
            .iter()
            .find(|l| l.pid == log.pid && l.exec_seq > log.exec_seq)
            .map(|l| l.start_ns.saturating_sub(t0));
        let last_image = next_exec.is_none();
        let exit = exits
            .iter()
            .find(|e| e.pid as u32 == log.pid)
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
                .or(log.exit_ns.map(|t| t.saturating_sub(t0))),
            exit_code: match exit {
                Some(e) => (e.signaled == 0).then_some(e.status),
                None => log.exit_status.filter(|_| last_image),
            },
            signal: exit
                .filter(|e| e.signaled != 0)
                .map(|e| e.status.wrapping_sub(128)),
        });
        allocations.extend(built.allocations);
        regions.extend(built.regions);
        tags.extend(built.tags);
        timeline.extend(built.timeline);
    }
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
        backend: vec!["preload".into(), "procfs".into()],
        settings: profile::Settings {
            interval_ms: run.interval_ms,
            min_size: settings.min_size,
            sample_rate: settings.sample_rate,
            unwinder: match settings.unwinder {
                1 => "dwarf",
                2 => "none",
                _ => "frame-pointers",
            }
            .into(),
            max_frames: settings.max_frames,
        },
        clock: profile::Clock {
            source: "CLOCK_MONOTONIC".into(),
            start_ns: t0,
            duration_ns: last_time,
        },
        processes,
        losses,
    };
    profile::write_table(dir, &allocations)?;
    profile::write_table(dir, &frames)?;
    profile::write_table(dir, &regions)?;
    profile::write_table(dir, &tags)?;
    profile::write_table(dir, &timeline)?;
    profile::write_table(dir, &modules_rows)?;
    profile::write_table(dir, &statics)?;
    // meta.json last: its presence marks a complete profile.
    meta.write(dir)?;
    if remove_raw {
        std::fs::remove_dir_all(&raw_dir).map_err(|e| Error::io(&raw_dir, e))?;
    }
    Ok(meta)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_unmaps_end_a_mapping_only_when_all_of_it_is_gone() {
        let mut rows = vec![Allocation::default(), Allocation::default()];
        let mut segs = Segments::new();
        let mut live = HashMap::new();
        segs.insert(0x10000, (0x20000, 0));
        live.insert(0, 0x10000);
        segs.insert(0x30000, (0x32000, 1));
        live.insert(1, 0x2000);
        unmap(&mut segs, &mut rows, &mut live, 0x14000, 0x18000, 10); // a hole
        assert_eq!(rows[0].free_ns, None);
        assert_eq!(live[&0], 0xc000);
        unmap(&mut segs, &mut rows, &mut live, 0x0, 0x31000, 20); // rest of 0, half of 1
        assert_eq!(rows[0].free_ns, Some(20));
        assert_eq!(rows[1].free_ns, None);
        unmap(&mut segs, &mut rows, &mut live, 0x31000, 0x40000, 30);
        assert_eq!(rows[1].free_ns, Some(30));
        assert!(segs.is_empty());
    }

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

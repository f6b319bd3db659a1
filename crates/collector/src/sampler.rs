//! The collector's look at the run every interval: each process's capacity
//! from /proc, the logs of the images it follows (read ahead for the
//! finalizer), attached processes' mappings, threads' traffic and counters,
//! written to the collector's log.

use crate::config::TargetExit;
use crate::finalize::FollowedLogs;
use crate::image::Definitions;
use crate::live_replay::{ReplayAhead, ReplayFollower};
use crate::perf::counters::Counters;
use crate::process_tree::{descendants, procfs_ppid, runtime_cannot_load};
use crate::rescue::KeptFiles;
use crate::sysinfo::now_ns;
use crate::tail::header_of;
use crate::{Error, LiveSamples, Result};
use memlens_convert::symbols::ReadAhead;
use memlens_profile::{RAW_COLLECTOR_LOG, RAW_DIR};
use memlens_rawlog::{self as raw, procfs, tag, FileHeader};
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

/// A process image being recorded: its log, and its header mapped (writable
/// where the log could be opened for writing, to make blocks ready).
struct Watched {
    pid: u32,
    path: PathBuf,
    log: std::fs::File,
    header: memmap2::MmapRaw,
    /// The header's ready blocks ([`FileHeader::ready_blocks`]) at the last
    /// look, to keep blocks ready at the rate the image's threads take them;
    /// None: its log is not writable here.
    ready: Option<u64>,
    /// Follows the log as the runtime publishes it.
    tail: crate::tail::LogTail,
    /// Every record read so far went by the samples table.
    samples_live: bool,
    /// The modules its stacks and samples name, for the read-ahead.
    code: crate::code_seen::CodeSeen,
    /// The definitions read so far: whole once the image ended, and the
    /// finalizer's pass over the log is saved.
    defs: Definitions,
    /// The thread that follows its log in place of this one, replaying it.
    pub(crate) replay: Option<ReplayFollower>,
}

/// Ready blocks kept for an image: an interval and a half's worth at the
/// rate its threads took them in the last one (what a run leaves unused at
/// its end), at least MIN (a thread starting takes one, for its staging
/// block) and at most MAX.
const MIN_READY_BLOCKS: u64 = 2;
const MAX_READY_BLOCKS: u64 = 64;

impl Watched {
    fn header(&self) -> &FileHeader {
        header_of(&self.header)
    }

    /// Writes blocks ahead for the image's threads to take as staging blocks
    /// ([`FileHeader::ready_blocks`]), on the collector's core: zeros marked
    /// [`raw::READY_MAGIC`], which give them disk space (a full disk fails
    /// here, and the threads then reserve their own and find it full). Each
    /// block is offered as soon as it is written, appended to the ready range
    /// or, where threads reserved blocks of their own in between, starting a
    /// new one past them.
    fn make_blocks_ready(&mut self) {
        let Some(last) = self.ready else {
            return;
        };
        let h = header_of(&self.header);
        let block = raw::BLOCK_SIZE as u64;
        let (next, end) = raw::unpack_ready(h.ready_blocks.load(Ordering::Acquire));
        let (last_next, last_end) = raw::unpack_ready(last);
        // The header is the program's memory too: nothing in it is trusted
        // to be consistent.
        let from_ready = if end == last_end {
            next.saturating_sub(last_next)
        } else {
            0
        };
        let want = (3 * u64::from(from_ready))
            .div_ceil(2)
            .clamp(MIN_READY_BLOCKS, MAX_READY_BLOCKS);
        let waiting = u64::from(end.saturating_sub(next));
        let mut zeros = Vec::new();
        for _ in waiting..want {
            if zeros.is_empty() {
                zeros = vec![0u8; raw::BLOCK_SIZE];
                let header = raw::BlockHeader::bytes(raw::READY_MAGIC, 0, 0);
                zeros[..header.len()].copy_from_slice(&header);
            }
            let off = h.reserve_cursor.fetch_add(block, Ordering::AcqRel);
            let Some(Ok(index)) = raw::block_index(off).map(u32::try_from) else {
                break;
            };
            if self.log.write_all_at(&zeros, off).is_err() || index == u32::MAX {
                break; // the disk is full: the block stays a hole
            }
            let mut v = h.ready_blocks.load(Ordering::Acquire);
            loop {
                let (next, end) = raw::unpack_ready(v);
                let offered = if end == index {
                    raw::pack_ready(next, index + 1)
                } else {
                    raw::pack_ready(index, index + 1)
                };
                match (h.ready_blocks).compare_exchange_weak(
                    v,
                    offered,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => break,
                    Err(now) => v = now,
                }
            }
        }
        self.ready = Some(h.ready_blocks.load(Ordering::Acquire));
    }

    /// Reads what the image logged since the last look: the code it names,
    /// for the read-ahead, its definitions, and its access samples, into the
    /// table. `ended`: the image ran its last (its process exited or exec'd),
    /// so this look reads its log to the end and its samples are complete.
    /// Past the read-ahead's share of a log, the records of one without
    /// samples (not instrumented, none written) no longer go to the table:
    /// the finalizer writes its samples.
    fn follow(&mut self, read_ahead: &ReadAhead, samples: Option<&mut LiveSamples>, ended: bool) {
        if self.replay.is_some() {
            return;
        }
        let instrumented = self.header().instrumented.load(Ordering::Relaxed) != 0;
        let samples = samples.filter(|_| self.samples_live);
        let sampled = (samples.as_ref()).is_some_and(|s| instrumented || s.has_rows(&self.path));
        if !self.code.following() && !sampled {
            // Records read from now on would not reach the table.
            self.samples_live = false;
        }
        let mut samples = samples.filter(|_| self.samples_live);
        let start_ns = self.header().start_ns;
        let window = crate::image::TimeWindow::from_start(start_ns);
        let mut image = (samples.as_deref_mut()).map(|s| s.image(&self.path, self.pid, start_ns));
        let (code, defs) = (&mut self.code, &mut self.defs);
        self.tail.read_new(&self.log, &mut |tid, rec| {
            code.see(&rec);
            defs.see(&rec, window);
            if let Some(image) = &mut image {
                image.add(tid, &rec);
            }
        });
        self.code
            .request_new(&mut |m, addresses| read_ahead.resolve(m, addresses));
        if let (true, Some(samples)) = (ended, samples) {
            samples.complete(&self.path);
        }
    }
}

pub(crate) struct Sampler {
    raw_dir: PathBuf,
    /// Latest image log per pid, with its sequence number.
    watched: HashMap<u32, (u32, Watched)>,
    /// Per pid, the sequence number of its last image that ended (its log,
    /// read to the end, is not followed again).
    ended: HashMap<u32, u32>,
    pub(crate) out: std::io::BufWriter<std::fs::File>,
    numa_nodes: usize,
    buf: Vec<u8>,
    ticks: u64,
    pub(crate) counters: Counters,
    pub(crate) live: Option<crate::live::Live>,
    /// Processes of the run the runtime cannot enter (static or setuid
    /// images), sampled from /proc alone, with the executable they run.
    untracked: HashMap<u32, PathBuf>,
    /// memlens' own pid: the root of the run's process tree.
    root: u32,
    /// Executables of the run already looked at: whether the runtime can
    /// enter each (read once, not on every look at the process tree).
    loadable: HashMap<PathBuf, bool>,
    /// Each live thread's access counts at the last tick, by (pid, tid):
    /// a thread's traffic is written when it changed.
    thread_counts: HashMap<(u32, u32), [u64; raw::COUNTS]>,
    /// The debug information of the code the run maps, read while it runs
    /// for the finalizer.
    read_ahead: ReadAhead,
    /// Processes memlens attached to, with the mappings their
    /// /proc/PID/maps listed at the last look and its time.
    attached: HashMap<u32, (u64, HashSet<MapsEntry>)>,
    /// The samples table, written as the logs are followed.
    pub(crate) samples: Option<LiveSamples>,
    /// The definitions of the logs followed to their end.
    followed: FollowedLogs,
    /// The replays begun while images that record every block run.
    pub(crate) replay: Option<ReplayAhead>,
    /// Every file of the run, open to the end.
    kept: KeptFiles,
}

/// A mapping as /proc/PID/maps lists it: (start, end, offset, prot, shared,
/// name).
pub(crate) type MapsEntry = (u64, u64, u64, u32, bool, Vec<u8>);

/// A timeline point of `pid` from /proc/PID/status (read into `buf`); None
/// when the process is gone or a zombie (it has no memory any more).
pub(crate) fn proc_timeline(pid: u32, time: u64, buf: &mut Vec<u8>) -> Option<raw::Timeline> {
    let mut t = raw::Timeline {
        time,
        pid: pid as u64,
        numa: [u64::MAX; 4],
        ..Default::default()
    };
    buf.clear();
    let mut f = std::fs::File::open(format!("/proc/{pid}/status")).ok()?;
    if std::io::Read::read_to_end(&mut f, buf).is_err() || buf.is_empty() {
        return None;
    }
    procfs::fill_from_status(buf, &mut t);
    (t.rss != 0 || procfs::kb_field(buf, b"VmRSS").is_some()).then_some(t)
}

impl Sampler {
    /// A sampler writing the collector's log in `raw_dir`, keeping it and
    /// every log it follows in `kept`.
    pub(crate) fn new(
        raw_dir: &Path,
        counters: Counters,
        live: Option<crate::live::Live>,
        mut kept: KeptFiles,
    ) -> Result<Sampler> {
        let log_path = raw_dir.join(RAW_COLLECTOR_LOG);
        let log_file = memlens_profile::create_private_file(&log_path)?;
        kept.keep(Path::new(RAW_DIR).join(RAW_COLLECTOR_LOG), &log_file);
        Ok(Sampler {
            raw_dir: raw_dir.to_path_buf(),
            watched: HashMap::new(),
            ended: HashMap::new(),
            out: std::io::BufWriter::new(log_file),
            numa_nodes: crate::sysinfo::numa_nodes(),
            buf: Vec::with_capacity(4096),
            ticks: 0,
            counters,
            live,
            untracked: HashMap::new(),
            root: std::process::id(),
            loadable: HashMap::new(),
            thread_counts: HashMap::new(),
            read_ahead: ReadAhead::default(),
            attached: HashMap::new(),
            samples: None,
            followed: FollowedLogs::default(),
            replay: None,
            kept,
        })
    }

    /// Writes what is buffered; hands over the debug information read so far,
    /// the definitions of the logs followed to their end and the files kept.
    pub(crate) fn finish(mut self) -> Result<(ReadAhead, FollowedLogs, KeptFiles)> {
        let log_path = self.raw_dir.join(RAW_COLLECTOR_LOG);
        self.out.flush().map_err(|e| Error::io(&log_path, e))?;
        Ok((
            self.read_ahead.clone(),
            std::mem::take(&mut self.followed),
            std::mem::take(&mut self.kept),
        ))
    }

    /// Every process of the run ended: what is still followed is complete.
    pub(crate) fn all_ended(&mut self) {
        for (_, (_, w)) in std::mem::take(&mut self.watched) {
            self.image_ended(w);
        }
    }

    /// An image ran its last (its process exited or exec'd): its log is read
    /// to the end, its samples and definitions are whole.
    fn image_ended(&mut self, mut w: Watched) {
        // Its follower reads the rest, and has its definitions.
        if let (Some(follower), Some(replay)) = (w.replay.take(), &mut self.replay) {
            replay.ended(follower);
            return;
        }
        w.follow(&self.read_ahead, self.samples.as_mut(), true);
        self.followed.insert(&w.path, w.defs);
    }

    /// Follows a process the runtime cannot enter: says so in the log, and
    /// samples it from /proc from now on.
    pub(crate) fn follow_untracked(&mut self, pid: u32, exe: PathBuf) {
        self.follow_from_outside(tag::UNTRACKED_PROCESS, pid, &exe);
        self.untracked.insert(pid, exe);
    }

    /// Follows a running process memlens attached to: its resident memory
    /// from /proc, its mappings as /proc/PID/maps lists them, from now on.
    pub(crate) fn follow_attached(&mut self, pid: u32, exe: PathBuf) {
        self.follow_from_outside(tag::ATTACHED_PROCESS, pid, &exe);
        self.untracked.insert(pid, exe);
        self.attached.insert(pid, (now_ns(), HashSet::new()));
        self.scan_mappings(pid);
        self.read_ahead_code(pid);
    }

    fn follow_from_outside(&mut self, tag: u16, pid: u32, exe: &Path) {
        let ppid = procfs_ppid(pid).unwrap_or(0);
        let ev = raw::UntrackedProcess {
            time: now_ns(),
            pid,
            ppid,
        };
        self.write_with(tag, &ev, exe.as_os_str().as_encoded_bytes());
    }

    /// Logs the mappings of an attached process that appeared or went since
    /// the last look (those gone first: a mapping that grew, as the heap does,
    /// is the old one gone and a larger one found). A mapping found now may
    /// have been touched since the last look: it is logged at that time, and
    /// one gone at this look's.
    fn scan_mappings(&mut self, pid: u32) {
        let Ok(maps) = std::fs::read(format!("/proc/{pid}/maps")) else {
            return;
        };
        let time = now_ns();
        let now: HashSet<MapsEntry> = maps
            .split(|&b| b == b'\n')
            .filter_map(procfs::maps_line)
            .map(|m| {
                (
                    m.start,
                    m.end,
                    m.offset,
                    m.prot(),
                    m.perms[3] == b's',
                    m.name.to_vec(),
                )
            })
            .collect();
        let Some((looked, before)) = self.attached.insert(pid, (time, now.clone())) else {
            return;
        };
        let gone = before.difference(&now).map(|m| (m, 0, time));
        let found = now.difference(&before).map(|m| (m, 1, looked));
        for ((start, end, offset, prot, shared, name), present, time) in gone.chain(found) {
            let rec = raw::Mapping {
                time,
                pid,
                present,
                start: *start,
                end: *end,
                offset: *offset,
                prot: *prot,
                shared: u32::from(*shared),
            };
            self.write_with(tag::MAPPING, &rec, name);
        }
    }

    /// Looks through the run's processes for images the runtime cannot enter
    /// (a static program a script runs, say).
    fn find_untracked(&mut self) {
        for pid in descendants(self.root) {
            let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) else {
                continue;
            };
            if self.untracked.get(&pid) == Some(&exe) {
                continue;
            }
            let loadable = *(self.loadable.entry(exe.clone()))
                .or_insert_with(|| runtime_cannot_load(&exe).is_none());
            if !loadable {
                self.follow_untracked(pid, exe);
            }
        }
    }

    /// Picks up logs of new processes and images (fork, exec).
    fn discover(&mut self) {
        let Ok(entries) = std::fs::read_dir(&self.raw_dir) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            let Some(stem) = name.strip_suffix(".mlraw") else {
                continue;
            };
            let mut parts = stem.split('.');
            let (Some(Ok(pid)), Some(Ok(seq))) = (
                parts.next().map(str::parse::<u32>),
                parts.next().map(str::parse::<u32>),
            ) else {
                continue;
            };
            let known = |s: Option<&u32>| s.is_some_and(|&s| s >= seq);
            if known(self.watched.get(&pid).map(|(s, _)| s)) || known(self.ended.get(&pid)) {
                continue;
            }
            // Writable to make blocks ready for its threads; else read only.
            let path = e.path();
            let writable = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path);
            let (file, writable) = match writable {
                Ok(file) => (file, true),
                Err(_) => match std::fs::File::open(&path) {
                    Ok(file) => (file, false),
                    Err(_) => continue,
                },
            };
            // The runtime creates the file, then sizes it: mapping a header that is
            // not there yet would raise SIGBUS on the first read.
            if file
                .metadata()
                .map_or(true, |m| m.len() < raw::HEADER_SIZE as u64)
            {
                continue;
            }
            // Shared: the runtime's counters and the blocks made ready.
            let mapping = memmap2::MmapOptions::new().len(raw::HEADER_SIZE).clone();
            let header = if writable {
                mapping.map_raw(&file)
            } else {
                mapping.map_raw_read_only(&file)
            };
            let Ok(header) = header else {
                continue;
            };
            let mut w = Watched {
                pid,
                path,
                log: file,
                header,
                ready: None,
                tail: crate::tail::LogTail::new(),
                samples_live: true,
                code: crate::code_seen::CodeSeen::new(),
                defs: Definitions::default(),
                replay: None,
            };
            if w.header().magic == raw::MAGIC {
                self.kept.keep(Path::new(RAW_DIR).join(&*name), &w.log);
                // Blocks are made ready only in a log of this layout.
                if writable && w.header().version == raw::VERSION {
                    w.ready = Some(w.header().ready_blocks.load(Ordering::Acquire));
                }
                // The image it follows ran its last: the process exec'd.
                if let Some((_, old)) = self.watched.remove(&pid) {
                    self.image_ended(old);
                }
                let h = w.header();
                if let (true, Some(replay)) = (
                    h.version == raw::VERSION && h.settings.sample_rate == 1,
                    &mut self.replay,
                ) {
                    // Without a follower this thread follows the log, and
                    // the finalizer replays it.
                    w.replay = replay.follow(&w.path, &w.log, pid, self.read_ahead.clone());
                }
                self.watched.insert(pid, (seq, w));
                // A newer image the runtime entered (a static program exec'd
                // a dynamic one).
                self.untracked.remove(&pid);
            }
        }
    }

    /// Queues the debug information of the code `pid` has mapped (each file
    /// is read once, so the look every second only finds what dlopen added).
    fn read_ahead_code(&self, pid: u32) {
        let Ok(maps) = std::fs::read(format!("/proc/{pid}/maps")) else {
            return;
        };
        for m in maps.split(|&b| b == b'\n').filter_map(procfs::maps_line) {
            if m.perms[2] == b'x' && m.name.starts_with(b"/") {
                (self.read_ahead).request_debug(&String::from_utf8_lossy(m.name));
            }
        }
    }

    pub(crate) fn tick(&mut self) {
        self.discover();
        if self.ticks.is_multiple_of(10) {
            self.find_untracked();
        }
        for (_, w) in self.watched.values_mut() {
            w.make_blocks_ready();
            w.follow(&self.read_ahead, self.samples.as_mut(), false);
        }
        if self.ticks.is_multiple_of(100) {
            // Code of images whose logs are not followed (any more): all of it.
            let unfollowed = (self.watched.iter())
                .filter(|(_, (_, w))| !w.code.following())
                .map(|(&pid, _)| pid);
            let pids: Vec<u32> = unfollowed.chain(self.attached.keys().copied()).collect();
            for pid in pids {
                self.read_ahead_code(pid);
            }
        }
        if self.ticks.is_multiple_of(10) {
            let attached: Vec<u32> = self.attached.keys().copied().collect();
            for pid in attached {
                self.scan_mappings(pid);
            }
        }
        let time = now_ns();
        let numa_due = self.numa_nodes > 1 && self.ticks.is_multiple_of(100);
        self.ticks += 1;
        let mut records = Vec::new();
        for (_, w) in self.watched.values() {
            if self.untracked.contains_key(&w.pid) {
                continue; // its logged image exec'd one the runtime cannot enter
            }
            let Some(mut t) = proc_timeline(w.pid, time, &mut self.buf) else {
                continue;
            };
            w.header().fill_timeline(&mut t);
            if numa_due {
                t.numa = numa_resident(w.pid);
            }
            records.push(t);
        }
        // Processes without the runtime: /proc alone.
        for &pid in self.untracked.keys() {
            records.extend(proc_timeline(pid, time, &mut self.buf));
        }
        if let Some(live) = self.live.as_mut().filter(|live| live.due(time)) {
            let images: Vec<_> = (self.watched.values())
                .map(|(seq, w)| crate::live::Image {
                    pid: w.pid,
                    seq: *seq,
                    log: &w.log,
                    sample_rate: w.header().settings.sample_rate,
                })
                .collect();
            live.update(time, &records, &images);
        }
        for t in records {
            self.write(tag::TIMELINE, &t);
        }
        self.thread_traffic(time);
        self.read_counters(time);
        // One write per tick: if memlens itself is killed, `memlens report`
        // still finds the timeline up to the last tick.
        let _ = self.out.flush();
    }

    pub(crate) fn record_exit(&mut self, pid: u32, exit: TargetExit) {
        let (status, signaled) = match exit {
            TargetExit::Code(c) => (c, 0),
            TargetExit::Signal(s) => (128 + s, 1),
            // Not memlens' child: no status reaches it.
            TargetExit::Attached { .. } => return,
        };
        let ev = raw::ProcessExit {
            time: now_ns(),
            status,
            signaled,
            pid: pid as u64,
        };
        self.write(tag::PROCESS_EXIT, &ev);
        // What it logged since the last tick: its samples complete, its code
        // read ahead while the finalizer replays the logs.
        if let Some((seq, w)) = self.watched.remove(&pid) {
            self.image_ended(w);
            self.ended.insert(pid, seq);
        }
    }

    pub(crate) fn record_usage(&mut self, pid: u32, usage: &libc::rusage) {
        let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
        let ev = raw::ProcessUsage {
            pid: pid as u64,
            user_ns: ns(usage.ru_utime),
            system_ns: ns(usage.ru_stime),
        };
        self.write(tag::PROCESS_USAGE, &ev);
    }

    pub(crate) fn read_counters(&mut self, time: u64) {
        let pids = self.watched.keys().chain(self.untracked.keys()).copied();
        let readings = self.counters.read(pids);
        for (index, [value, enabled, running]) in readings.into_iter().enumerate() {
            let reading = raw::CounterReading {
                time,
                value,
                enabled,
                running,
                index: index as u32,
                reserved: 0,
            };
            self.write(tag::COUNTER, &reading);
        }
    }

    /// Names each counter in the log, before its first reading.
    pub(crate) fn define_counters(&mut self) {
        for (i, d) in self.counters.definitions().into_iter().enumerate() {
            let mut unit = [0u8; 16];
            let n = d.unit.len().min(16);
            unit[..n].copy_from_slice(&d.unit.as_bytes()[..n]);
            let def = raw::CounterDef {
                index: i as u32,
                machine_wide: u32::from(d.machine_wide),
                scale: d.scale,
                unit,
            };
            let text = format!("{}\0{}", d.name, d.method);
            self.write_with(tag::COUNTER_DEF, &def, text.as_bytes());
        }
    }

    /// The per-thread bandwidth timeline: each instrumented thread's counts,
    /// when they changed since the last tick. The map keeps live threads only.
    fn thread_traffic(&mut self, time: u64) {
        let mut now = HashMap::new();
        let mut changed = Vec::new();
        for (_, w) in self.watched.values() {
            let pid = w.pid;
            for (tid, counts) in w.header().thread_counts() {
                if counts.iter().any(|&c| c != 0)
                    && self.thread_counts.get(&(pid, tid)) != Some(&counts)
                {
                    changed.push(raw::ThreadTraffic {
                        time,
                        pid,
                        tid,
                        counts,
                    });
                }
                now.insert((pid, tid), counts);
            }
        }
        self.thread_counts = now;
        for t in changed {
            self.write(tag::THREAD_TRAFFIC, &t);
        }
    }

    fn write<P: raw::Payload>(&mut self, tag: u16, payload: &P) {
        self.write_with(tag, payload, &[]);
    }

    fn write_with<P: raw::Payload>(&mut self, tag: u16, payload: &P, extra: &[u8]) {
        // Sized for the record (a path may be PATH_MAX long); encode refuses
        // one over a record's 64 KiB.
        let mut rec = vec![0u8; raw::record_len(std::mem::size_of::<P>(), extra.len())];
        // SAFETY: the buffer is rec.len() bytes and encode checks the capacity.
        if let Some(n) = unsafe { raw::encode(rec.as_mut_ptr(), rec.len(), tag, payload, extra) } {
            // A write error surfaces at the final flush.
            let _ = self.out.write_all(&rec[..n]);
        }
    }
}

/// Resident bytes per NUMA node (first 4) from /proc/PID/numa_maps.
pub(crate) fn numa_resident(pid: u32) -> [u64; 4] {
    let mut out = [0u64; 4];
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/numa_maps")) else {
        return [u64::MAX; 4];
    };
    let page = 4096u64;
    for line in text.lines() {
        for field in line.split_whitespace() {
            if let Some((node, pages)) = field.strip_prefix('N').and_then(|f| f.split_once('=')) {
                if let (Ok(n), Ok(p)) = (node.parse::<usize>(), pages.parse::<u64>()) {
                    if n < 4 {
                        out[n] += p * page;
                    }
                }
            }
        }
    }
    out
}

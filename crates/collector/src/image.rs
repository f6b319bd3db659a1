//! One process image's raw log: its header, its per-thread record streams
//! (the blocks each thread published), the definitions they hold (call
//! stacks, strings, modules), and the streams merged in time order.

use crate::{Error, Result};
use memlens_convert::symbols::LoadedModule;
use memlens_rawlog::{self as raw, tag, FileHeader, RawRecord, Records};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

/// What an image log's header says.
pub(crate) struct ImageHeader {
    pub(crate) path: PathBuf,
    pub(crate) pid: u32,
    pub(crate) ppid: u32,
    pub(crate) exec_seq: u32,
    pub(crate) rank: i32,
    pub(crate) start_ns: u64,
    pub(crate) settings: raw::RuntimeSettings,
    pub(crate) dropped: u64,
    pub(crate) untracked: u64,
    /// Bits of `memlens_rawlog::fault`.
    pub(crate) faults: u32,
    /// Instrumented code ran in this image (access counts and samples exist).
    pub(crate) instrumented: bool,
    /// Threads holding a header slot when the image ended, as last published.
    pub(crate) live_threads: Vec<raw::ThreadTotals>,
    /// Size of the log's blocks (the file after its header).
    pub(crate) block_bytes: u64,
    /// Stacks captured, by `raw::walked_by` code.
    pub(crate) stacks_walked: [u64; raw::walked_by::COUNT],
}

pub(crate) fn read_header(path: &Path) -> Result<Option<ImageHeader>> {
    let mut buf = vec![0u8; raw::HEADER_SIZE];
    // A FIFO or a link to a device in a log's place is refused, not read.
    let mut f = memlens_profile::open_regular(path)?;
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
    if h.version != raw::VERSION {
        return Err(Error::Usage(format!(
            "{}: raw log format {}, and this memlens reads format {}: finalize it with the memlens that recorded it (`memlens finalize DIR`)",
            path.display(),
            h.version,
            raw::VERSION
        )));
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

/// One thread's published records: its blocks in the order it wrote them, which is time order.
pub(crate) struct ThreadStream<'a> {
    pub(crate) tid: u32,
    pub(crate) blocks: Vec<&'a [u8]>,
    /// Its blocks' pages are dropped once read ([`release`]): the log is
    /// large.
    pub(crate) release: bool,
}

/// What a reader took of one thread's first records, summed so that two
/// readers of a log can be checked against each other: the replay begun
/// during the run (which reads through the log's tail while the thread
/// writes) against the finalizer's reading of the whole file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Taken {
    pub(crate) records: u64,
    pub(crate) bytes: u64,
    /// The last record's tag and length, and its time (or first word, for
    /// a definition): a cheap name for it.
    pub(crate) last: (u16, usize, u64),
}

impl Taken {
    pub(crate) fn add(&mut self, rec: &RawRecord<'_>) {
        let len = raw::RECORD_HEADER_SIZE + rec.body.len();
        self.records += 1;
        self.bytes += len as u64;
        let first_word =
            || (rec.body.get(..8)).map_or(0, |w| u64::from_le_bytes(w.try_into().unwrap()));
        self.last = (rec.tag, len, rec.time().unwrap_or_else(first_word));
    }
}

impl ThreadStream<'_> {
    /// Its first `records` records, summed.
    pub(crate) fn first(&self, records: u64) -> Taken {
        let mut taken = Taken::default();
        let all = self.blocks.iter().flat_map(|b| Records::new(b));
        all.take(records as usize).for_each(|rec| taken.add(&rec));
        taken
    }

    /// Its bytes and its last record (as [`Taken`]'s) read from its blocks'
    /// lengths and its last block: its records are not counted.
    pub(crate) fn whole(&self) -> (u64, (u16, usize, u64)) {
        let bytes = self.blocks.iter().map(|b| b.len() as u64).sum();
        let mut last = Taken::default();
        if let Some(block) = self.blocks.iter().rev().find(|b| !b.is_empty()) {
            Records::new(block).for_each(|rec| last.add(&rec));
        }
        (bytes, last.last)
    }
}

/// Logs this big or bigger have their blocks' pages dropped from the
/// finalizer once read; a smaller one stays mapped whole (dropping costs a
/// system call and a TLB flush of every memlens thread per block: STREAM's
/// 6 MB log, 300 calls, 1 ms of a 10 ms finalize).
const RELEASED_LOG_BYTES: usize = 64 << 20;

/// An image log mapped in memory, split into per-thread streams.
pub(crate) struct ImageLog {
    pub(crate) data: memmap2::Mmap,
    /// The byte ranges the file has data in: a hole (a block whose disk space
    /// was refused while another thread's later block got some) is never
    /// touched, since reading a hole of a full tmpfs raises SIGBUS.
    pub(crate) extents: Vec<std::ops::Range<usize>>,
    /// The blocks' headers are read from the file: through the mapping each
    /// would map its whole block (the kernel maps the pages around a fault),
    /// which the large logs' streams then had to drop again (the 735 MB log
    /// of 24 million events: 41-45 ms to split it into streams).
    file: std::fs::File,
}

impl ImageLog {
    pub(crate) fn open(path: &Path) -> Result<ImageLog> {
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        // SAFETY: read-only mapping of a log nobody writes any more.
        let data = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
        let extents = data_extents(&file, data.len());
        Ok(ImageLog {
            data,
            extents,
            file,
        })
    }

    /// How many bytes from `at` on lie in one data extent (0 in a hole).
    pub(crate) fn data_after(&self, at: usize) -> usize {
        // Extents are sorted and disjoint: the first ending past `at`.
        let i = self.extents.partition_point(|e| e.end <= at);
        self.extents
            .get(i)
            .filter(|e| e.start <= at)
            .map_or(0, |e| e.end - at)
    }

    /// Per-thread streams, and how many blocks were cut short or never written.
    ///
    /// A thread's blocks are read in file order, each staging block's records
    /// at its destination's place (the runtime takes a thread's blocks in file
    /// order); a staging block whose destination holds a written block of its
    /// thread was copied there already (the process ended between the copy
    /// and the staging block's restart) and is passed over.
    pub(crate) fn streams(&self) -> (Vec<ThreadStream<'_>>, u64) {
        use std::os::unix::fs::FileExt;
        let data = &self.data[..];
        let release_pages = data.len() >= RELEASED_LOG_BYTES;
        // (tid, place) -> records, of written and of staging blocks.
        let mut written: BTreeMap<(u32, u64), &[u8]> = BTreeMap::new();
        let mut staged: Vec<((u32, u64), &[u8])> = Vec::new();
        let mut unwritten = Vec::new();
        let mut truncated = 0;
        let mut off = raw::HEADER_SIZE;
        let mut index = 0u64;
        while off + raw::BLOCK_HEADER_SIZE <= data.len() {
            let readable = self.data_after(off);
            let block = &data[off..data.len().min(off + raw::BLOCK_SIZE.min(readable))];
            let at = index;
            (off, index) = (off + raw::BLOCK_SIZE, index + 1);
            if readable < raw::BLOCK_HEADER_SIZE {
                unwritten.push(at); // a hole: disk space refused, or not written yet
                continue;
            }
            let mut head = [0u8; raw::BLOCK_HEADER_SIZE];
            let read = self.file.read_exact_at(&mut head, raw::block_offset(at));
            let header = read.ok().and_then(|()| raw::BlockHeader::read(&head));
            let ready = head[..4] == raw::READY_MAGIC.to_le_bytes();
            let (tid, place, used, staging) = match header {
                Some(raw::BlockState::Written { tid, used }) => (tid, at, used, false),
                Some(raw::BlockState::Staging { tid, dest, used }) => (tid, dest, used, true),
                None => {
                    // Reserved but never initialised: the process died then,
                    // unless the collector made it ready and no thread needed it.
                    if !ready {
                        unwritten.push(at);
                    }
                    continue;
                }
            };
            let body = &block[raw::BLOCK_HEADER_SIZE..];
            let used = used as usize;
            if used > body.len() {
                truncated += 1;
            }
            let records = &body[..used.min(body.len())];
            if staging {
                staged.push(((tid, place), records));
            } else {
                written.insert((tid, place), records);
            }
        }
        // A staging block's destination is not written until it is full.
        let destinations: std::collections::HashSet<u64> =
            staged.iter().map(|&((_, dest), _)| dest).collect();
        truncated += unwritten
            .iter()
            .filter(|i| !destinations.contains(i))
            .count() as u64;
        for (key, records) in staged {
            written.entry(key).or_insert(records);
        }
        let mut by_tid: BTreeMap<u32, Vec<&[u8]>> = BTreeMap::new();
        for ((tid, _), records) in written {
            by_tid.entry(tid).or_default().push(records);
        }
        let streams = by_tid
            .into_iter()
            .map(|(tid, blocks)| ThreadStream {
                tid,
                blocks,
                release: release_pages,
            })
            .collect();
        (streams, truncated)
    }
}

/// The data extents of a file of `len` bytes, from SEEK_DATA and SEEK_HOLE;
/// the whole file where the file system cannot tell.
pub(crate) fn data_extents(file: &std::fs::File, len: usize) -> Vec<std::ops::Range<usize>> {
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

/// Definitions an image's events refer to: gathered by the collector as it
/// follows the log while the image runs, else by a pass of the finalizer
/// before its replay (a whole read of the log: a fifth of an every-block
/// finalize).
#[derive(Default, Clone)]
pub(crate) struct Definitions {
    pub(crate) strings: HashMap<u64, String>,
    pub(crate) stacks: HashMap<u64, Vec<u64>>,
    /// In the order seen: [`Definitions::by_time`] sorts them.
    pub(crate) modules: Vec<(u64, LoadedModule)>,
    /// The command line the runtime recorded (transparent mode).
    pub(crate) command: Vec<String>,
    pub(crate) exit_ns: Option<u64>,
    /// Status the program passed to exit/_exit, when the runtime saw it.
    pub(crate) exit_status: Option<i32>,
    /// Blocks with an event live now and at most, counted in the order the
    /// records were read (threads one after another): the replay's table of
    /// live blocks is made this large at once, not grown by doubling.
    live_blocks: u64,
    pub(crate) most_live_blocks: u64,
}

impl Definitions {
    /// One record of the image, in its thread's order: a definition is kept,
    /// unless its time lies outside the image's window (damaged; the merge
    /// counts it).
    #[inline]
    pub(crate) fn see(&mut self, rec: &RawRecord<'_>, window: TimeWindow) {
        match rec.tag {
            tag::ALLOC | tag::SMALL_ALLOC => {
                self.live_blocks += 1;
                self.most_live_blocks = self.most_live_blocks.max(self.live_blocks);
            }
            tag::FREE => self.live_blocks = self.live_blocks.saturating_sub(1),
            t if is_definition(t) => self.define(rec, window),
            _ => {}
        }
    }

    /// A definition record (out of [`Definitions::see`], which the replay
    /// begun during the run calls for every record).
    #[inline(never)]
    fn define(&mut self, rec: &RawRecord<'_>, window: TimeWindow) {
        if rec.time().is_some_and(|t| !window.contains(t)) {
            return;
        }
        match rec.tag {
            tag::STRING => {
                if let Some(def) = rec.payload::<raw::StringDef>() {
                    let bytes = rec.trailing::<raw::StringDef>();
                    let s = &bytes[..(def.len as usize).min(bytes.len())];
                    (self.strings).insert(def.id, String::from_utf8_lossy(s).into_owned());
                }
            }
            tag::STACK => {
                if let Some((id, frames)) = stack_def(rec) {
                    self.stacks.insert(id, frames);
                }
            }
            tag::MODULE => self.modules.extend(module_def(rec)),
            tag::COMMAND_LINE => {
                let args = rec.trailing::<raw::CommandLine>();
                self.command = (args.split(|&b| b == 0).filter(|a| !a.is_empty()))
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect();
            }
            tag::PROCESS_EXIT => {
                if let Some(e) = rec.payload::<raw::ProcessExit>() {
                    self.exit_ns = Some(e.time);
                    self.exit_status = (e.status >= 0).then_some(e.status);
                }
            }
            _ => {}
        }
    }

    /// The modules in load order.
    pub(crate) fn by_time(mut self) -> Definitions {
        self.modules.sort_by_key(|m| m.0);
        self
    }
}

/// Whether a record is a definition: not an event of the program's run,
/// so its time does not extend the image's.
pub(crate) fn is_definition(tag: u16) -> bool {
    matches!(
        tag,
        tag::STRING | tag::STACK | tag::MODULE | tag::COMMAND_LINE | tag::PROCESS_EXIT
    )
}

/// The times an image's records can carry: from shortly before its runtime
/// started to a year after. A time outside is a damaged record, dropped and
/// counted, so that no garbage time reaches spans, sums and timelines.
#[derive(Clone, Copy)]
pub(crate) struct TimeWindow {
    pub(crate) start: u64,
    pub(crate) end: u64,
}

impl TimeWindow {
    const SLACK_NS: u64 = 60_000_000_000;
    const LONGEST_RUN_NS: u64 = 366 * 24 * 3600 * 1_000_000_000;

    pub(crate) fn of(log: &ImageHeader) -> TimeWindow {
        TimeWindow::from_start(log.start_ns)
    }

    /// The window of an image whose runtime started at `start_ns`.
    pub(crate) fn from_start(start_ns: u64) -> TimeWindow {
        TimeWindow {
            start: start_ns.saturating_sub(Self::SLACK_NS),
            end: start_ns.saturating_add(Self::LONGEST_RUN_NS),
        }
    }

    pub(crate) fn contains(&self, time: u64) -> bool {
        (self.start..=self.end).contains(&time)
    }
}

/// The definitions of an image's log, by a pass over it.
pub(crate) fn definitions(streams: &[ThreadStream<'_>], window: TimeWindow) -> Definitions {
    let mut d = Definitions::default();
    let mut release = Release::default();
    for s in streams {
        for block in &s.blocks {
            for rec in Records::new(block) {
                d.see(&rec, window);
            }
            if s.release {
                release.block(block);
            }
        }
    }
    d.by_time()
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

/// Lets the kernel drop log blocks' pages from the process once read: the
/// log is a file mapping, so they come back from the page cache if touched
/// again, and the finalizer's memory stays that of a few blocks per thread
/// and one run (or of a log smaller than [`RELEASED_LOG_BYTES`]), not the
/// log's size.
///
/// `block` is a block's body or all of it: blocks are whole pages of the
/// file, so the pages it touches belong to that block alone.
///
/// Each release flushes the TLB of every core running the process (an
/// interrupt to the merge's thread on the other core): contiguous blocks are
/// released together, up to [`Release::RUN`] bytes at once, instead of one
/// call per 64 KiB block (24 000 calls for bench/malloc.sh's every-block log).
#[derive(Default)]
pub(crate) struct Release {
    start: usize,
    end: usize,
}

impl Release {
    const RUN: usize = 2 << 20;

    pub(crate) fn block(&mut self, block: &[u8]) {
        let page = 4096usize;
        let start = block.as_ptr() as usize / page * page;
        let end = (block.as_ptr() as usize + block.len()).div_ceil(page) * page;
        if start != self.end || self.end - self.start >= Self::RUN {
            self.flush();
            self.start = start;
        }
        self.end = end;
    }

    fn flush(&mut self) {
        if self.end > self.start {
            // SAFETY: pages of a read-only file mapping that stays mapped;
            // MADV_DONTNEED only drops their page table entries (a range past
            // the mapping's end is refused whole, harmlessly).
            unsafe {
                libc::madvise(
                    self.start as *mut libc::c_void,
                    self.end - self.start,
                    libc::MADV_DONTNEED,
                )
            };
        }
        self.start = self.end;
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        self.flush();
    }
}

pub(crate) struct Cursor<'a> {
    tid: u32,
    /// Records still to pass over: the replay begun while the log was
    /// written took them.
    skip: u64,
    release: bool,
    blocks: std::slice::Iter<'a, &'a [u8]>,
    records: Records<'a>,
    current: &'a [u8],
    previous: &'a [u8],
}

/// The timed records of all threads of an image, merged in time order.
pub(crate) struct Merged<'a> {
    pub(crate) window: TimeWindow,
    /// Bytes of the log's blocks opened so far (progress).
    pub(crate) blocks_started: u64,
    /// Per stream: its thread, its blocks to come, the records of the
    /// current block, and that block and the one before: the last record of
    /// a block is read after the next block is opened, so a block is
    /// released one block later.
    pub(crate) cursors: Vec<Cursor<'a>>,
    pub(crate) heads: BinaryHeap<Reverse<(u64, usize)>>,
    pub(crate) pending: Vec<Option<RawRecord<'a>>>,
    /// Access samples are passed over (they are in the table already).
    skip_samples: bool,
    pub(crate) counts: LogCounts,
    /// Blocks whose records were all handed out, for the reader to
    /// [`release`] once it has used them.
    pub(crate) read: Vec<&'a [u8]>,
}

/// What the merge counts over every record of a log.
#[derive(Default, Clone, Copy)]
pub(crate) struct LogCounts {
    /// Samples whose context the runtime walked by frame pointers (every
    /// one but a bulk call's), which it leaves to the finalizer to count.
    pub(crate) sample_walks: u64,
    /// Records whose time lies outside the image's window (scribbled on).
    pub(crate) damaged_records: u64,
    /// Blocks whose records end in one that cannot be read.
    pub(crate) malformed_blocks: u64,
    /// The time of the image's last event.
    pub(crate) last_ns: u64,
}

impl LogCounts {
    /// The counts of two parts of a log together.
    pub(crate) fn add(&mut self, other: &LogCounts) {
        self.sample_walks += other.sample_walks;
        self.damaged_records += other.damaged_records;
        self.malformed_blocks += other.malformed_blocks;
        self.last_ns = self.last_ns.max(other.last_ns);
    }
}

impl<'a> Merged<'a> {
    /// `skip_samples`: pass over the access samples (still counted in
    /// [`LogCounts::sample_walks`]); `replayed`: how many of each thread's
    /// first records to pass over, not counted again (the replay begun
    /// while the log was written took them).
    pub(crate) fn new(
        streams: &'a [ThreadStream<'a>],
        window: TimeWindow,
        skip_samples: bool,
        replayed: &rustc_hash::FxHashMap<u32, Taken>,
    ) -> Self {
        let mut m = Merged {
            window,
            blocks_started: 0,
            cursors: Vec::new(),
            heads: BinaryHeap::new(),
            pending: Vec::new(),
            skip_samples,
            counts: LogCounts::default(),
            read: Vec::new(),
        };
        for s in streams {
            let mut blocks = s.blocks.iter();
            let block = blocks.next().copied().unwrap_or(&[]);
            m.blocks_started += raw::BLOCK_SIZE as u64;
            m.cursors.push(Cursor {
                tid: s.tid,
                skip: replayed.get(&s.tid).map_or(0, |t| t.records),
                release: s.release,
                blocks,
                records: Records::new(block),
                current: block,
                previous: &[],
            });
            m.pending.push(None);
            m.advance(m.cursors.len() - 1);
        }
        m
    }

    /// Loads the next timed record of stream `i` into `pending` and the heap.
    pub(crate) fn advance(&mut self, i: usize) {
        let c = &mut self.cursors[i];
        let counts = &mut self.counts;
        loop {
            let Some(rec) = c.records.next() else {
                counts.malformed_blocks += u64::from(c.records.malformed);
                if c.release && !c.previous.is_empty() {
                    self.read.push(c.previous);
                }
                match c.blocks.next() {
                    Some(b) => {
                        c.records = Records::new(b);
                        c.previous = std::mem::replace(&mut c.current, b);
                        self.blocks_started += raw::BLOCK_SIZE as u64;
                        continue;
                    }
                    None => return,
                }
            };
            if c.skip > 0 {
                c.skip -= 1;
                continue;
            }
            let Some(t) = timed(&rec, self.window, counts) else {
                continue;
            };
            if rec.tag == tag::SAMPLE && self.skip_samples {
                continue;
            }
            self.heads.push(Reverse((t, i)));
            self.pending[i] = Some(rec);
            return;
        }
    }
}

impl<'a> Iterator for Merged<'a> {
    /// A thread, a record's time and the record.
    type Item = (u32, u64, RawRecord<'a>);

    fn next(&mut self) -> Option<(u32, u64, RawRecord<'a>)> {
        let Reverse((time, i)) = self.heads.pop()?;
        let rec = self.pending[i].take()?;
        let tid = self.cursors[i].tid;
        self.advance(i);
        Some((tid, time, rec))
    }
}

/// The time of a record to replay, the record counted in `counts`; None for
/// a definition (untimed) and for a record whose time lies outside the
/// window (damaged).
pub(crate) fn timed(
    rec: &RawRecord<'_>,
    window: TimeWindow,
    counts: &mut LogCounts,
) -> Option<u64> {
    let t = rec.time()?;
    if !window.contains(t) {
        counts.damaged_records += 1;
        return None;
    }
    if !is_definition(rec.tag) {
        counts.last_ns = counts.last_ns.max(t);
    }
    if rec.tag == tag::SAMPLE {
        let bulk = rec
            .payload::<raw::Sample>()
            .is_some_and(|x| x.flags & raw::sample_flags::BULK != 0);
        counts.sample_walks += u64::from(!bulk);
    }
    Some(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tail::test_log::{frees, write_block, write_staging};

    /// Each thread's pointers, in stream order, and the truncated count.
    fn streams_of(path: &Path) -> (Vec<(u32, Vec<u64>)>, u64) {
        let log = ImageLog::open(path).unwrap();
        let (streams, truncated) = log.streams();
        let pointers = streams
            .iter()
            .map(|s| {
                let ptrs = (s.blocks.iter())
                    .flat_map(|b| Records::new(b))
                    .filter_map(|r| r.free().map(|f| f.ptr))
                    .collect();
                (s.tid, ptrs)
            })
            .collect();
        (pointers, truncated)
    }

    #[test]
    fn a_staging_blocks_records_come_at_their_destinations_place_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1.0.mlraw");
        let mut file = std::fs::File::create(&path).unwrap();
        // Thread 7: staging block 0, its records copied to 1 and 3 and now
        // going to 5 (not written: no truncation); thread 8 was killed
        // after copying its staging block 2 to 4 and before starting again.
        write_staging(&mut file, 0, 7, 5, &frees(&[5, 6]));
        write_block(&mut file, 1, 7, &frees(&[1, 2]));
        write_staging(&mut file, 2, 8, 4, &frees(&[10, 11]));
        write_block(&mut file, 3, 7, &frees(&[3, 4]));
        write_block(&mut file, 4, 8, &frees(&[10, 11]));
        assert_eq!(
            streams_of(&path),
            (vec![(7, vec![1, 2, 3, 4, 5, 6]), (8, vec![10, 11])], 0)
        );
        // A block reserved and never written that no staging block names is
        // still counted.
        write_block(&mut file, 6, 8, &frees(&[12]));
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(raw::block_offset(8))
            .unwrap();
        assert_eq!(
            streams_of(&path),
            (vec![(7, vec![1, 2, 3, 4, 5, 6]), (8, vec![10, 11, 12])], 1)
        );
    }
}

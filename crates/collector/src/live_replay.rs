//! The finalizer's replay of an image's log, begun while the program runs.
//!
//! When every block is recorded the replay (a live-block table and per-stack
//! sums over tens of millions of events) is the finalizer's largest cost: 0.8
//! s after a malloc-heavy program of 1 s. One thread follows an image's log
//! as it is written (in place of the collector's main thread, for the
//! definitions and the code read ahead) and replays the records it reads on
//! the core the program leaves; the finalizer carries on from where it
//! stopped. One image at a time: the run's first that records every block,
//! and after it, the next one discovered once it ended (the program a
//! wrapper execs).
//!
//! Records are replayed in the order read only while that order is time
//! order: while the image has one thread. The runtime counts a log's writer
//! threads before any of them reads a time for a record
//! ([`FileHeader::threads_started`]); a record read while that count is 1
//! cannot be preceded by one not yet read. The replay stops for good (the
//! thread goes on following the log) once a second thread starts, or at the
//! first access sample: the finalizer writes samples, and a run with them
//! keeps a row per freed block, which this replay does not.

use crate::code_seen::CodeSeen;
use crate::image::{is_definition, timed, Definitions, Taken, TimeWindow};
use crate::replay::{Replay, Sinks};
use crate::tail::LogTail;
use memlens_convert::symbols::ReadAhead;
use memlens_rawlog::{self as raw, tag, FileHeader};
use rustc_hash::FxHashMap;
use std::borrow::Cow;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The replays of a run: the tables they write (while no image is
/// followed), the run's start (rows' times count from it), and the replays
/// whose images ended.
pub struct ReplayAhead {
    pub(crate) sinks: Option<Sinks>,
    t0: u64,
    pub(crate) replayed: Vec<(ReplayedPart, Replay<'static>)>,
}

/// An image's log followed and replayed by a thread of its own.
pub(crate) struct ReplayFollower {
    /// Set when the image ran its last: the thread reads the log to its end
    /// once more and stops.
    ended: Arc<AtomicBool>,
    thread: JoinHandle<Followed>,
}

/// What a follower leaves.
struct Followed {
    part: ReplayedPart,
    replay: Replay<'static>,
    sinks: Sinks,
}

/// What of a log the replay begun while it was written took.
pub(crate) struct ReplayedPart {
    pub(crate) path: PathBuf,
    /// Every record of the log was replayed.
    pub(crate) complete: bool,
    /// What of each thread's first records was replayed: the finalizer
    /// checks it against its own reading of the log.
    pub(crate) replayed: FxHashMap<u32, Taken>,
    /// A thread's events came out of time order: the log's tail misread.
    pub(crate) disordered: bool,
    /// Blocks whose records end in one that cannot be read.
    pub(crate) malformed_blocks: u64,
    /// Blocks of the log cut short or never written, as the finalizer found
    /// when it checked the replay.
    pub(crate) truncated: u64,
}

/// Live blocks the replay's table has room for from the start: growing it
/// holds the old and the new table at once (100 MB more at 2 million live
/// blocks), while room never used costs address space, not memory.
const LIVE_BLOCKS_AHEAD: u64 = 1 << 21;

/// How long the follower waits when it found nothing new.
const IDLE: Duration = Duration::from_millis(1);

impl ReplayAhead {
    /// The replays of a run started at `t0`, writing the profile in `dir` (a
    /// sites' timeline point every `tick_ns`).
    pub(crate) fn create(dir: &Path, t0: u64, tick_ns: u64) -> crate::Result<ReplayAhead> {
        Ok(ReplayAhead {
            sinks: Some(Sinks::create(dir, tick_ns)?),
            t0,
            replayed: Vec::new(),
        })
    }

    /// A thread following the log at `path` (open as `log`) of process
    /// `pid`'s image, whose code's debug information goes to `read_ahead`;
    /// None while another image is followed, or if it cannot start (the
    /// tables then went with it: the finalizer makes new ones).
    pub(crate) fn follow(
        &mut self,
        path: &Path,
        log: &File,
        pid: u32,
        read_ahead: ReadAhead,
    ) -> Option<ReplayFollower> {
        let header = (memmap2::MmapOptions::new().len(raw::HEADER_SIZE))
            .map_raw_read_only(log)
            .ok()?;
        let ended = Arc::new(AtomicBool::new(false));
        let follower = Follower {
            path: path.to_path_buf(),
            file: log.try_clone().ok()?,
            header,
            pid,
            read_ahead,
            t0: self.t0,
            sinks: self.sinks.take()?,
            ended: Arc::clone(&ended),
        };
        let thread = std::thread::Builder::new()
            .name("memlens-replay".into())
            .spawn(move || follower.run())
            .ok()?;
        Some(ReplayFollower { ended, thread })
    }

    /// Its image ran its last: the follower reads what is left, and the
    /// tables go to the next image.
    pub(crate) fn ended(&mut self, follower: ReplayFollower) {
        follower.ended.store(true, Ordering::Release);
        let f = (follower.thread.join()).unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        self.replayed.push((f.part, f.replay));
        self.sinks = Some(f.sinks);
    }
}

/// What a follower's thread works with.
struct Follower {
    path: PathBuf,
    file: File,
    header: memmap2::MmapRaw,
    pid: u32,
    read_ahead: ReadAhead,
    t0: u64,
    sinks: Sinks,
    ended: Arc<AtomicBool>,
}

impl Follower {
    /// Follows the log until it was read to its end after the image ended.
    fn run(mut self) -> Followed {
        // The program comes first: on a machine of two cores this thread
        // shares the other with the collector.
        // SAFETY: lowers this thread's own priority.
        unsafe {
            libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 10);
        }
        let h = crate::tail::header_of(&self.header);
        let window = TimeWindow::from_start(h.start_ns);
        let defs = Cow::Owned(Definitions::default());
        let mut replay = Replay::new(self.pid, h.settings, defs, self.t0, &self.sinks);
        replay.expect_live_blocks(LIVE_BLOCKS_AHEAD);
        let (mut tail, mut code) = (LogTail::new(), CodeSeen::whole_log());
        // Each thread's records taken, and the time of its last event: one
        // thread's until the replay stops, so a list searched from the thread
        // last found.
        let mut replayed = Vec::<(u32, Taken, u64)>::new();
        let (mut replaying, mut disordered) = (true, false);
        let sinks = &mut self.sinks;
        loop {
            // Read before the log: the read after the image ended is the last.
            let last = self.ended.load(Ordering::Acquire);
            let mut read = false;
            tail.read_new(&self.file, &mut |tid, rec| {
                read = true;
                code.see(&rec);
                replay.defs_mut().see(&rec, window);
                replaying = replaying && in_time_order(h, rec.tag);
                if replaying {
                    let (_, taken, last_ns) = thread_entry(&mut replayed, tid);
                    taken.add(&rec);
                    if let Some(t) = timed(&rec, window, replay.counts_mut()) {
                        if !is_definition(rec.tag) {
                            disordered |= t < *last_ns;
                            *last_ns = t;
                        }
                        replay.record(sinks, tid, t, &rec);
                    }
                }
            });
            code.request_new(&mut |m, addresses| self.read_ahead.resolve(m, addresses));
            // The program is ahead of the replay: its table of live blocks
            // grows to the program's count at once, not by doubling (each
            // doubling holds both tables a moment).
            let (_, _, allocs, frees) = h.totals();
            replay.expect_live_blocks(allocs.saturating_sub(frees));
            if last {
                break;
            }
            if !read {
                std::thread::sleep(IDLE);
            }
        }
        let part = ReplayedPart {
            path: self.path,
            complete: replaying,
            replayed: replayed.into_iter().map(|(tid, t, _)| (tid, t)).collect(),
            disordered,
            malformed_blocks: tail.malformed_blocks,
            truncated: 0,
        };
        Followed {
            part,
            replay,
            sinks: self.sinks,
        }
    }
}

/// Thread `tid`'s entry in `threads`, moved to its end (where the next
/// record's thread, most often the same, is looked for first).
fn thread_entry(threads: &mut Vec<(u32, Taken, u64)>, tid: u32) -> &mut (u32, Taken, u64) {
    if threads.last().is_none_or(|t| t.0 != tid) {
        match threads.iter().position(|t| t.0 == tid) {
            Some(i) => {
                let entry = threads.remove(i);
                threads.push(entry);
            }
            None => threads.push((tid, Taken::default(), 0)),
        }
    }
    threads.last_mut().expect("pushed")
}

/// Whether a record just read, and every one read before it, can be replayed
/// here (see the module's comment). A block freed before the first access
/// sample holds none: its row, which a run with samples keeps, is not needed.
fn in_time_order(header: &FileHeader, tag: u16) -> bool {
    // Read after the record (its own line: the runtime writes it only when a
    // thread starts).
    header.threads_started.load(Ordering::SeqCst) == 1 && tag != tag::SAMPLE
}

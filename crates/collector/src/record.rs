//! `memlens record`: start the target with the runtime preloaded, sample every
//! process of the run from /proc at a fixed interval, reap them all (we are their
//! subreaper, so orphans of a fork come back to us), then finalize.

use crate::finalize::{Definitions, FollowedLogs, RunInfo};
use crate::live_replay::{ReplayAhead, ReplayFollower};
use crate::perf::backends::{self, Kind, Plan};
use crate::perf::counters::Counters;
use crate::perf::{Event, PipeWriter, Ring};
use crate::rescue::{DirWatch, KeptFiles};
use crate::{Error, LiveSamples, Result};
use memlens_convert::symbols::{ReadAhead, Wanted};
use memlens_profile::{RAW_COLLECTOR_LOG, RAW_DIR, RAW_PERF_DATA};
use memlens_rawlog::{self as raw, env, procfs, tag, FileHeader};
use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct RecordConfig {
    pub command: Vec<OsString>,
    pub out_dir: PathBuf,
    pub runtime: PathBuf,
    pub interval_ms: u64,
    pub min_size: Option<u64>,
    pub sample_rate: Option<u64>,
    pub unwinder: Option<String>,
    pub max_frames: Option<u32>,
    pub period: Option<u64>,
    pub no_loads: bool,
    pub no_stores: bool,
    pub keep_raw: bool,
    /// A row for every freed block even when every block is recorded.
    pub keep_blocks: bool,
    pub backend: SamplerChoice,
    /// PEBS load-latency threshold / SPE minimum latency (cycles); 0 for the default.
    pub min_latency: u64,
    /// SPE AUX area per CPU (KiB) and its wake-up watermark (bytes); 0: defaults.
    pub aux_kib: u64,
    pub aux_watermark: u32,
    /// Run the cache model on every access: "size/ways/line" per level.
    pub cache_model: Option<String>,
    /// Sample every access to one cache line in `period` (reuse distance).
    pub sample_lines: bool,
    /// Show capacity and bandwidth on stderr while the program runs, written
    /// by this renderer.
    pub live: Option<crate::live::RenderLive>,
    /// Replace the data of an earlier run in `out_dir`.
    pub force: bool,
    /// Record this running process instead of starting `command`.
    pub attach: Option<u32>,
    /// With `attach`: stop recording after this long.
    pub duration: Option<Duration>,
}

/// Where access samples come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SamplerChoice {
    /// The instrumented build's own samples if the program is instrumented,
    /// else the best hardware sampler this machine has, else none.
    Auto,
    /// Only the instrumented build's samples (`memlens cc`).
    Software,
    /// This perf_event backend, or an error saying why it cannot run.
    Perf(Kind),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetExit {
    Code(i32),
    Signal(i32),
    /// An attached process (`record --pid`): it ended (its status went to
    /// its parent), or memlens stopped recording while it ran on.
    Attached {
        ended: bool,
    },
}

impl TargetExit {
    /// The exit status a shell would show for the target.
    pub fn shell_status(self) -> i32 {
        match self {
            TargetExit::Code(c) => c,
            TargetExit::Signal(s) => 128 + s,
            TargetExit::Attached { .. } => 0,
        }
    }
}

/// A finished run whose raw logs are complete: [`finalize`](crate::finalize)
/// `dir` with `run` to write the profile (a step of its own, so the caller can
/// show its progress).
pub struct RecordOutcome {
    pub dir: PathBuf,
    /// Held until the profile is written.
    pub lock: memlens_profile::DirLock,
    pub exit: TargetExit,
    pub run: RunInfo,
    /// The samples written while the program ran, for the finalizer.
    pub live_samples: Option<LiveSamples>,
    /// The replay of an image begun while it ran, for the finalizer.
    pub replay_ahead: Option<crate::ReplayAhead>,
}

/// Finds the program as the shell would, with a clear error if it cannot run.
fn resolve_program(program: &OsString) -> Result<PathBuf> {
    let p = Path::new(program);
    let candidate = if p.components().count() > 1 || p.is_absolute() {
        Some(p.to_path_buf())
    } else {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join(p))
                .find(|c| c.is_file())
        })
    };
    let shown = p.display();
    let cannot_run = |message: String, not_found| Error::CannotRun { message, not_found };
    let Some(path) = candidate else {
        return Err(cannot_run(
            format!("cannot run '{shown}': not found in PATH; give its path (e.g. ./{shown})"),
            true,
        ));
    };
    let meta = std::fs::metadata(&path).map_err(|_| {
        cannot_run(
            format!(
                "cannot run '{}': no such file; check the path",
                path.display()
            ),
            true,
        )
    })?;
    if !meta.is_file() {
        return Err(cannot_run(
            format!("cannot run '{}': not a regular file", path.display()),
            false,
        ));
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Err(cannot_run(
            format!(
                "cannot run '{}': not executable; run `chmod +x {}`",
                path.display(),
                path.display()
            ),
            false,
        ));
    }
    Ok(path)
}

/// The program was found and is executable, yet exec failed: as `env` does,
/// 127 when a file it needs is missing (its interpreter or loader), else 126.
/// A file that is no program at all (ENOEXEC) never fails here: it runs
/// through /bin/sh, as execvp runs it.
fn cannot_start(program: &Path, e: std::io::Error) -> Error {
    let not_found = e.raw_os_error() == Some(libc::ENOENT);
    let message = match not_found {
        true => format!(
            "cannot run '{}': the interpreter its first line names (or its ELF loader) was not found",
            program.display()
        ),
        false => format!("cannot run '{}': {e}", program.display()),
    };
    Error::CannotRun { message, not_found }
}

static FORWARD_SIGNAL: AtomicI32 = AtomicI32::new(0);

/// Termination asked of memlens is passed on to the run. A terminal's Ctrl-C
/// (sent by the kernel) already reached the whole foreground group, the
/// target included; a signal another process sent to memlens alone did not.
extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let from_terminal = unsafe { (*info).si_code } == libc::SI_KERNEL;
    if !(sig == libc::SIGINT && from_terminal) {
        FORWARD_SIGNAL.store(sig, Ordering::Relaxed);
    }
}

/// The parent of `pid`, from /proc/PID/stat.
fn procfs_ppid(pid: u32) -> Option<u32> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    procfs::stat_field(&stat, 1).map(|p| p as u32)
}

/// Every process descended from `root` (read from /proc): with memlens as
/// their subreaper, the whole tree of the run, orphans included.
fn descendants(root: u32) -> Vec<u32> {
    static HAS_CHILDREN_LISTS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let lists = *HAS_CHILDREN_LISTS.get_or_init(|| {
        // SAFETY: gettid cannot fail.
        let tid = unsafe { libc::gettid() };
        Path::new(&format!("/proc/self/task/{tid}/children")).exists()
    });
    match lists {
        true => descendants_by_children_lists(root),
        false => descendants_by_parents(root),
    }
}

/// [`descendants`] from each thread's list of children (Linux's
/// CONFIG_PROC_CHILDREN): a read per thread of the run's processes, where
/// reading every process's parent costs one per process of the machine,
/// every 100 ms of a run.
fn descendants_by_children_lists(root: u32) -> Vec<u32> {
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", tree[i]));
        for task in tasks.into_iter().flatten().flatten() {
            // A process that ended meanwhile has no list: its children are
            // re-parented to memlens, and found at the next look.
            if let Ok(children) = std::fs::read_to_string(task.path().join("children")) {
                let new = children
                    .split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok());
                tree.extend(new);
            }
        }
        i += 1;
    }
    tree.remove(0);
    tree
}

/// [`descendants`] from every process's parent.
fn descendants_by_parents(root: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some(ppid) = procfs_ppid(pid) {
            parent_of.push((pid, ppid));
        }
    }
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let p = tree[i];
        tree.extend(
            parent_of
                .iter()
                .filter(|&&(_, pp)| pp == p)
                .map(|&(c, _)| c),
        );
        i += 1;
    }
    tree.remove(0);
    tree
}

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
    replay: Option<ReplayFollower>,
}

/// Ready blocks kept for an image: an interval and a half's worth at the
/// rate its threads took them in the last one (what a run leaves unused at
/// its end), at least MIN (a thread starting takes one, for its staging
/// block) and at most MAX.
const MIN_READY_BLOCKS: u64 = 2;
const MAX_READY_BLOCKS: u64 = 64;

/// The log header a mapping of its first HEADER_SIZE bytes holds.
pub(crate) fn header_of(mapping: &memmap2::MmapRaw) -> &FileHeader {
    // SAFETY: the mapping is HEADER_SIZE bytes and FileHeader fits in it.
    unsafe { &*(mapping.as_ptr() as *const FileHeader) }
}

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
        let window = crate::finalize::TimeWindow::from_start(start_ns);
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
            .request_new(&mut |path, wanted| read_ahead.request(path, wanted));
        if let (true, Some(samples)) = (ended, samples) {
            samples.complete(&self.path);
        }
    }
}

pub fn record(cfg: &RecordConfig) -> Result<RecordOutcome> {
    crate::perf::counters::warm_up();
    if let Some(pid) = cfg.attach {
        return crate::attach::attach(cfg, pid);
    }
    let Some(program) = cfg.command.first() else {
        return Err(Error::Usage(
            "no command given; usage: memlens record -- PROGRAM [ARGS...]".into(),
        ));
    };
    let program_path = resolve_program(program)?;
    // Built by `memlens cc`: its accesses are sampled by the runtime.
    let instrumented = memlens_convert::symbols::is_instrumented(&program_path);
    let plan = choose_backend(cfg, instrumented)?;
    if !cfg.runtime.is_file() {
        return Err(Error::Usage(format!(
            "runtime library not found at {}: point MEMLENS_RUNTIME at an existing file, or unset it to use the runtime built into memlens",
            cfg.runtime.display()
        )));
    }
    let (lock, raw_dir) = claim_profile_dir(cfg)?;
    let out_dir = std::fs::canonicalize(&cfg.out_dir).map_err(|e| Error::io(&cfg.out_dir, e))?;
    let watch = DirWatch::new(&out_dir, &raw_dir)?;
    let mut kept = KeptFiles::default();
    let runtime = std::fs::canonicalize(&cfg.runtime).map_err(|e| Error::io(&cfg.runtime, e))?;

    let mut preload = runtime.into_os_string();
    if let Some(existing) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        preload.push(":");
        preload.push(existing);
    }
    let mut cmd = std::process::Command::new(&program_path);
    cmd.arg0(program).args(&cfg.command[1..]);
    // Under qemu-user the program is of another architecture: this runtime
    // preloaded would record the emulator; the runtime `memlens cc --target`
    // linked into the program records it.
    let emulated =
        (program_path.file_name()).is_some_and(|n| n.to_string_lossy().starts_with("qemu-"));
    if !emulated {
        cmd.env("LD_PRELOAD", preload);
    }
    cmd.env(env::name(env::DIR), &out_dir)
        .env(env::name(env::COLLECTOR), "1");
    if let Some(v) = cfg.min_size {
        cmd.env(env::name(env::MIN_SIZE), v.to_string());
    }
    if let Some(v) = cfg.sample_rate {
        cmd.env(env::name(env::SAMPLE_RATE), v.to_string());
    } else if every_block_if_instrumented(cfg, plan.is_some()) {
        cmd.env(env::name(env::EVERY_BLOCK_IF_INSTRUMENTED), "1");
    }
    if let Some(v) = &cfg.unwinder {
        cmd.env(env::name(env::UNWIND), v);
    }
    if let Some(v) = cfg.max_frames {
        cmd.env(env::name(env::MAX_FRAMES), v.to_string());
    }
    if let Some(v) = cfg.period {
        cmd.env(env::name(env::PERIOD), v.to_string());
    }
    if cfg.sample_lines {
        if let SamplerChoice::Perf(kind) = cfg.backend {
            return Err(Error::Usage(format!(
                "line sampling (--reuse) follows the instrumented build's accesses, not {kind:?} samples: drop --backend or use --backend software"
            )));
        }
        cmd.env(env::name(env::SAMPLE_LINES), "1");
    }
    if let Some(spec) = &cfg.cache_model {
        cmd.env(env::name(env::CACHE_MODEL), spec);
        // The machine's calibration prices the modelled levels; a profile
        // keeps its own copy, read wherever it is reported.
        let calibration = memlens_profile::Calibration::default_path();
        if let Ok(c) = memlens_profile::Calibration::read(&calibration) {
            let path = out_dir.join(memlens_profile::CALIBRATION_FILE);
            c.write(&path).map_err(|e| Error::Usage(e.to_string()))?;
            let written = std::fs::File::open(&path).map_err(|e| Error::io(&path, e))?;
            kept.keep(memlens_profile::CALIBRATION_FILE, &written);
        } else {
            eprintln!(
                "memlens: no calibration at {}: modelled levels get no cost; run `memlens calibrate` once",
                calibration.display()
            );
        }
    }
    // One source of access samples per profile: under a perf backend the
    // instrumented build still counts exactly but does not sample.
    if cfg.no_loads || plan.is_some() {
        cmd.env(env::name(env::NO_LOADS), "1");
    }
    if cfg.no_stores || plan.is_some() {
        cmd.env(env::name(env::NO_STORES), "1");
    }
    // Opened on memlens itself, disabled: the target inherits them at fork and
    // they start at its exec.
    let mut perf = match &plan {
        Some(plan) => Some(PerfSession::open(plan, &raw_dir, &[0])?),
        None => None,
    };
    if let Some(perf) = &perf {
        kept.keep(Path::new(RAW_DIR).join(RAW_PERF_DATA), perf.out.file());
    }
    let counters = Counters::open_available();

    // The program starts with the signal mask, ignored signals and standard
    // descriptors memlens was given, not memlens' own.
    crate::inherited::pass_on(&mut cmd);
    // SIGCHLD stays blocked here so that the loop can sleep in sigtimedwait and
    // wake the moment a child ends.
    block_sigchld(true);
    // Orphaned descendants are re-parented to us, so we can wait for all of them.
    // SAFETY: plain prctl.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    let (start_ns, realtime_start_ns) = (now_ns(), realtime_ns());
    let child = cmd.spawn().map_err(|e| cannot_start(&program_path, e))?;
    let child_pid = child.id() as i32;
    // The terminal sends Ctrl-C to the target too; we stay alive to finalize.
    // SAFETY: async-signal-safe handler that only stores an integer.
    unsafe {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }

    let live = (cfg.live).map(|render| crate::live::Live::new(start_ns, render));
    kept.make_room();
    let mut sampler = Sampler::new(&raw_dir, counters, live, kept)?;
    // A modelled sample's cost comes from the calibration the finalizer reads.
    if cfg.cache_model.is_none() {
        sampler.samples = Some(LiveSamples::create(&cfg.out_dir, start_ns)?);
        // A run that samples accesses keeps a row per block (the finalizer
        // decides), which the replay begun during the run does not write.
        let sampled = plan.is_some() || instrumented;
        if cfg.sample_rate == Some(1) && !sampled && !cfg.keep_blocks {
            let tick_ns = cfg.interval_ms.max(1) * 1_000_000;
            sampler.replay = Some(ReplayAhead::create(&cfg.out_dir, start_ns, tick_ns)?);
        }
    }
    if let Some(why) = runtime_cannot_load(&program_path) {
        eprintln!(
            "memlens: {} is {why}: memlens' runtime cannot be loaded into it; recording its resident memory from /proc only (no heap, objects or call sites)",
            program_path.display()
        );
        let exe = std::fs::canonicalize(&program_path).unwrap_or(program_path.clone());
        sampler.follow_untracked(child_pid as u32, exe);
    }
    sampler.define_counters();
    let interval = Duration::from_millis(cfg.interval_ms.max(1));
    let mut next = std::time::Instant::now();
    let mut missed_ticks = 0u64;
    let mut main_exit = None;
    loop {
        let now = std::time::Instant::now();
        if now >= next {
            sampler.tick();
            if let Some(perf) = &mut perf {
                perf.drain();
            }
            next += interval;
            if now > next + interval {
                missed_ticks += ((now - next).as_nanos() / interval.as_nanos()) as u64;
                next = now + interval;
            }
        }
        let sig = FORWARD_SIGNAL.swap(0, Ordering::Relaxed);
        if sig != 0 {
            for pid in descendants(std::process::id()) {
                // SAFETY: a signal to a process of the run.
                unsafe { libc::kill(pid as i32, sig) };
            }
        }
        match reap(&mut sampler)? {
            Reaped::Exits(exits) if !exits.is_empty() => {
                for (pid, exit) in exits {
                    if pid == child_pid {
                        main_exit = Some(exit);
                    }
                }
                continue; // maybe that was the last one: look again at once
            }
            Reaped::Exits(_) => {}
            Reaped::NoChildren => break,
        }
        wait_for_child(next.saturating_duration_since(std::time::Instant::now()));
    }
    block_sigchld(false);
    // Every process of the run ended: what is still followed is complete.
    for (_, (_, w)) in std::mem::take(&mut sampler.watched) {
        sampler.image_ended(w);
    }
    let mut live_samples = sampler.samples.take();
    if let Some(samples) = &mut live_samples {
        samples.flush();
    }
    if let Some(live) = &mut sampler.live {
        live.finish();
    }
    // The exited processes' counts are folded into memlens' events: the totals.
    sampler.read_counters(now_ns());
    if let Some(perf) = perf.take() {
        perf.finish(&raw_dir)?;
    }
    let mut replay_ahead = sampler.replay.take();
    let (read_ahead, followed, kept) = sampler.finish()?;
    // SAFETY: restore default dispositions.
    unsafe {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::signal(sig, libc::SIG_DFL);
        }
    }
    let mut run = RunInfo {
        command: cfg
            .command
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect(),
        interval_ms: cfg.interval_ms,
        cache_model: cfg.cache_model.clone(),
        keep_blocks: cfg.keep_blocks,
        start_ns: Some(start_ns),
        realtime_start_ns: Some(realtime_start_ns),
        end_ns: Some(now_ns()),
        missed_ticks,
        read_ahead: Some(read_ahead),
        attached_ended: false,
        followed: FollowedLogs::default(),
    };
    let (lock, dir) = if watch.removed() {
        // The tables begun while it ran went with it: the finalizer reads
        // every log again.
        (live_samples, replay_ahead) = (None, None);
        crate::rescue::rescue(&out_dir, kept)?
    } else {
        run.followed = followed;
        (lock, cfg.out_dir.clone())
    };
    Ok(RecordOutcome {
        dir,
        lock,
        exit: main_exit.unwrap_or(TargetExit::Code(0)),
        run,
        live_samples,
        replay_ahead,
    })
}

/// Unless the user chose the heap sampling (`--sample-rate`, `--min-size`):
/// every block in each process image built with `memlens cc` whose own
/// instrumentation samples its accesses (each access sample is attributed
/// to the block it landed in, small blocks included: none is "unknown" for
/// want of a record), whatever started it (a script, mpirun, make); the
/// runtime tells per image. Else the runtime's default.
fn every_block_if_instrumented(cfg: &RecordConfig, perf_samples: bool) -> bool {
    cfg.sample_rate.is_none()
        && cfg.min_size.is_none()
        && !perf_samples
        && !(cfg.no_loads && cfg.no_stores)
}

/// Takes the profile directory for this run, with an empty `raw/` (an
/// earlier run, or an interrupted run's raw logs, is kept aside in
/// <dir>.old): one run per directory, written by one memlens at a time.
pub(crate) fn claim_profile_dir(cfg: &RecordConfig) -> Result<(memlens_profile::DirLock, PathBuf)> {
    let (lock, kept_aside) = memlens_profile::claim_dir(&cfg.out_dir, cfg.force)?;
    if let Some(old) = kept_aside {
        eprintln!("{}", memlens_profile::kept_aside_note(&cfg.out_dir, &old));
    }
    let raw_dir = cfg.out_dir.join(memlens_profile::RAW_DIR);
    memlens_profile::create_private_dir(&raw_dir)?;
    Ok((lock, raw_dir))
}

/// The perf backend to open, if any (none by default for an instrumented
/// program); an explicit choice that cannot run is an error.
fn choose_backend(cfg: &RecordConfig, instrumented: bool) -> Result<Option<Plan>> {
    let options = backends::Options {
        period: cfg.period.unwrap_or(0),
        min_latency: cfg.min_latency,
        loads: !cfg.no_loads,
        stores: !cfg.no_stores,
        aux_kib: cfg.aux_kib,
        aux_watermark: cfg.aux_watermark,
    };
    match cfg.backend {
        SamplerChoice::Software => Ok(None),
        SamplerChoice::Perf(kind) => backends::plan(kind, &options).map(Some).map_err(|u| {
            Error::Usage(format!(
                "the {} backend cannot run here: {}; {} (see `memlens doctor`)",
                kind.name(),
                u.reason,
                u.fix
            ))
        }),
        SamplerChoice::Auto if instrumented => Ok(None),
        SamplerChoice::Auto => Ok(Kind::HARDWARE
            .into_iter()
            .find_map(|k| backends::plan(k, &options).ok())),
    }
}

/// The events of a perf backend on every CPU, and the perf.data they go to.
pub(crate) struct PerfSession {
    rings: Vec<Ring>,
    out: PipeWriter,
    /// Kept open until the end: closing them would stop their output.
    _members: Vec<Event>,
}

impl PerfSession {
    /// Opens the plan's events for `tasks` (0: memlens itself, inherited by
    /// the target it starts; else thread ids of a running process, inherited
    /// by the threads they create) on every CPU.
    pub(crate) fn open(plan: &Plan, raw_dir: &Path, tasks: &[i32]) -> Result<PerfSession> {
        let fail = |name: &str, e: std::io::Error| {
            let u = backends::open_error(name, &e);
            Error::Usage(format!("{}; {}", u.reason, u.fix))
        };
        let mut rings = Vec::new();
        let mut members = Vec::new();
        let mut ids = vec![Vec::new(); plan.events.len()];
        // Events are per CPU: the kernel refuses a ring for an inherited per-thread event.
        for cpu in crate::sysinfo::online_cpus() {
            let mut ring: Option<Ring> = None;
            for (i, (name, attr)) in plan.events.iter().enumerate() {
                for &task in tasks {
                    let event = Event::open(attr, task, cpu as i32).map_err(|e| fail(name, e))?;
                    ids[i].push(event.id);
                    match &ring {
                        None => {
                            ring = Some(
                                Ring::map(event, cpu, 512, plan.aux_pages)
                                    .map_err(|e| fail(name, e))?,
                            )
                        }
                        Some(r) => {
                            event.output_to(r).map_err(|e| fail(name, e))?;
                            members.push(event);
                        }
                    }
                }
            }
            rings.extend(ring);
        }
        let path = raw_dir.join(RAW_PERF_DATA);
        let attrs: Vec<_> = plan
            .events
            .iter()
            .zip(ids)
            .map(|((_, attr), ids)| (attr.clone(), ids))
            .collect();
        let mut out = PipeWriter::create(&path, &attrs).map_err(|e| Error::io(&path, e))?;
        if plan.aux_pages > 0 {
            out.write_spe_info(plan.pmu_type)
                .map_err(|e| Error::io(&path, e))?;
            if let Some(conv) = rings.first().and_then(Ring::time_conv) {
                // SPE stamps the generic timer; converted, it gives perf's clock.
                // Rebased on a reading of both, it gives CLOCK_MONOTONIC, the
                // clock of every other time in the profile.
                let conv = match crate::perf::timer_count() {
                    Some(count) => conv.rebased(count, now_ns()),
                    None => conv,
                };
                out.write_user(memlens_decoders::perf_data::user::TIME_CONV, &conv.encode())
                    .map_err(|e| Error::io(&path, e))?;
            }
        }
        eprintln!(
            "memlens: access samples from {} ({}, 1 in {})",
            plan.kind.name(),
            plan.events
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(" + "),
            plan.period
        );
        Ok(PerfSession {
            rings,
            out,
            _members: members,
        })
    }

    /// Saves what the rings hold, flushed each time: if memlens is killed, the
    /// samples up to the last interval stay readable. A write error surfaces at
    /// the final flush.
    pub(crate) fn drain(&mut self) {
        for ring in &mut self.rings {
            let _ = ring.drain(&mut self.out);
        }
        let _ = self.out.flush();
    }

    /// Saves the rest, and says whether all of it reached the disk.
    pub(crate) fn finish(mut self, raw_dir: &Path) -> Result<()> {
        self.drain();
        (self.out.flush()).map_err(|e| Error::io(&raw_dir.join(RAW_PERF_DATA), e))
    }
}

fn sigchld_set() -> libc::sigset_t {
    // SAFETY: initialising a local signal set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        set
    }
}

fn block_sigchld(block: bool) {
    let set = sigchld_set();
    let how = if block {
        libc::SIG_BLOCK
    } else {
        libc::SIG_UNBLOCK
    };
    // SAFETY: changes this thread's mask only.
    unsafe { libc::pthread_sigmask(how, &set, std::ptr::null_mut()) };
}

/// Sleeps until `timeout` passes or a child changes state.
fn wait_for_child(timeout: Duration) {
    let set = sigchld_set();
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: valid set and timeout; the signal information is not needed.
    unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &ts) };
}

enum Reaped {
    Exits(Vec<(i32, TargetExit)>),
    NoChildren,
}

fn reap(sampler: &mut Sampler) -> Result<Reaped> {
    let mut exits = Vec::new();
    loop {
        // Looked at before it is reaped: a zombie's /proc/PID/stat still
        // holds the process's final counts.
        // SAFETY: zeroed siginfo is a valid out value; plain waitid.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
        if unsafe { libc::waitid(libc::P_ALL, 0, &mut info, flags) } < 0 {
            return Ok(if exits.is_empty() {
                Reaped::NoChildren
            } else {
                Reaped::Exits(exits)
            });
        }
        // SAFETY: waitid filled in a child's state (or left the pid 0).
        let pid = unsafe { info.si_pid() };
        if pid == 0 {
            return Ok(Reaped::Exits(exits));
        }
        sampler.counters.reaping(pid as u32);
        let mut status = 0;
        // SAFETY: zeroed rusage is a valid out value.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: plain wait4 of the child just seen ended, with valid out pointers.
        if unsafe { libc::wait4(pid, &mut status, 0, &mut usage) } != pid {
            return Ok(Reaped::Exits(exits));
        }
        let exit = if libc::WIFSIGNALED(status) {
            TargetExit::Signal(libc::WTERMSIG(status))
        } else {
            TargetExit::Code(libc::WEXITSTATUS(status))
        };
        sampler.record_usage(pid as u32, &usage);
        sampler.record_exit(pid as u32, exit);
        exits.push((pid, exit));
    }
}

/// CLOCK_REALTIME, ns since the Unix epoch.
pub(crate) fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

pub(crate) fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub(crate) struct Sampler {
    raw_dir: PathBuf,
    /// Latest image log per pid, with its sequence number.
    watched: HashMap<u32, (u32, Watched)>,
    /// Per pid, the sequence number of its last image that ended (its log,
    /// read to the end, is not followed again).
    ended: HashMap<u32, u32>,
    out: std::io::BufWriter<std::fs::File>,
    numa_nodes: usize,
    buf: Vec<u8>,
    ticks: u64,
    counters: Counters,
    live: Option<crate::live::Live>,
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
    samples: Option<LiveSamples>,
    /// The definitions of the logs followed to their end.
    followed: FollowedLogs,
    /// The replays begun while images that record every block run.
    replay: Option<ReplayAhead>,
    /// Every file of the run, open to the end.
    kept: KeptFiles,
}

/// A mapping as /proc/PID/maps lists it: (start, end, offset, prot, shared,
/// name).
type MapsEntry = (u64, u64, u64, u32, bool, Vec<u8>);

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

/// Why the runtime cannot be loaded into the program at `path`, if it cannot:
/// the dynamic loader does not run for a static program, and ignores
/// LD_PRELOAD paths for a setuid or setgid one.
pub(crate) fn runtime_cannot_load(path: &Path) -> Option<&'static str> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    // SAFETY: getters without preconditions.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if meta.mode() & libc::S_ISUID != 0 && meta.uid() != uid {
        return Some("setuid");
    }
    if meta.mode() & libc::S_ISGID != 0 && meta.gid() != gid {
        return Some("setgid");
    }
    // Only the ELF header and program headers are read, not the whole file.
    use object::read::elf::{FileHeader, ProgramHeader};
    let file = object::ReadCache::new(std::fs::File::open(path).ok()?);
    let header = object::elf::FileHeader64::<object::Endianness>::parse(&file).ok()?;
    let endian = header.endian().ok()?;
    let interp = (header.program_headers(endian, &file).ok()?)
        .iter()
        .any(|ph| ph.p_type(endian) == object::elf::PT_INTERP);
    (!interp).then_some("statically linked")
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
    fn follow_untracked(&mut self, pid: u32, exe: PathBuf) {
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
                self.read_ahead
                    .request(&String::from_utf8_lossy(m.name), Wanted::Debug);
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

    fn record_exit(&mut self, pid: u32, exit: TargetExit) {
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

    fn record_usage(&mut self, pid: u32, usage: &libc::rusage) {
        let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
        let ev = raw::ProcessUsage {
            pid: pid as u64,
            user_ns: ns(usage.ru_utime),
            system_ns: ns(usage.ru_stime),
        };
        self.write(tag::PROCESS_USAGE, &ev);
    }

    fn read_counters(&mut self, time: u64) {
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
    fn define_counters(&mut self) {
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
fn numa_resident(pid: u32) -> [u64; 4] {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The children lists and every process's parent give the same tree.
    #[test]
    fn descendants_from_children_lists_and_from_parents_agree() {
        let mut sh = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30 & (sleep 30 & wait) & wait"])
            .spawn()
            .unwrap();
        let root = sh.id();
        let started = std::time::Instant::now();
        let mut by_parents = descendants_by_parents(root);
        while by_parents.len() < 4 && started.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
            by_parents = descendants_by_parents(root);
        }
        let mut by_lists = descendants_by_children_lists(root);
        for pid in &by_parents {
            // SAFETY: a signal to a sleeper this test started.
            unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
        }
        let _ = sh.kill();
        let _ = sh.wait();
        by_parents.sort_unstable();
        by_lists.sort_unstable();
        assert_eq!(by_parents.len(), 4, "its subshell and three sleepers");
        assert_eq!(by_lists, by_parents);
        assert!(!by_lists.contains(&root));
    }
}

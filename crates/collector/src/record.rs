//! `memlens record`: start the target with the runtime preloaded, sample every
//! process of the run from /proc at a fixed interval, reap them all (we are their
//! subreaper, so orphans of a fork come back to us), then finalize.

use crate::config::{claim_profile_dir, RecordConfig, RecordOutcome, SamplerChoice, TargetExit};
use crate::finalize::{FollowedLogs, RunInfo};
use crate::live_replay::ReplayAhead;
use crate::perf::backends::{self, Kind, Plan};
use crate::perf::counters::Counters;
use crate::perf::session::PerfSession;
use crate::process_tree::{descendants, runtime_cannot_load};
use crate::reaper::{block_sigchld, reap, wait_for_child, Reaped};
use crate::rescue::{DirWatch, KeptFiles};
use crate::sampler::Sampler;
use crate::sysinfo::{now_ns, realtime_ns};
use crate::{Error, LiveSamples, Result};
use memlens_profile::{RAW_DIR, RAW_PERF_DATA};
use memlens_rawlog::env;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

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

    let mut preload = runtime.clone().into_os_string();
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
        // An OpenMP runtime that does not find the runtime's OMPT tool by its
        // symbol (Ubuntu's libomp) loads it by name; tools of the user's own
        // keep theirs, and memlens stands aside.
        if std::env::var_os("OMP_TOOL_LIBRARIES").is_none() {
            cmd.env("OMP_TOOL_LIBRARIES", &runtime);
        }
    }
    pass_settings(&mut cmd, cfg, plan.is_some(), &out_dir, &mut kept)?;
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
    set_termination_handlers(true);

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
    let (main_exit, missed_ticks) =
        follow_until_all_exit(&mut sampler, perf.as_mut(), interval, child_pid)?;
    block_sigchld(false);
    sampler.all_ended();
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
    set_termination_handlers(false);
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

/// The runtime's settings for the program, in its environment (the names
/// rawlog's `env` gives both sides); with a cache model, the machine's
/// calibration copied into the profile. `perf_samples`: a perf backend
/// samples the accesses.
fn pass_settings(
    cmd: &mut std::process::Command,
    cfg: &RecordConfig,
    perf_samples: bool,
    out_dir: &Path,
    kept: &mut KeptFiles,
) -> Result<()> {
    cmd.env(env::name(env::DIR), out_dir)
        .env(env::name(env::COLLECTOR), "1");
    if let Some(v) = cfg.min_size {
        cmd.env(env::name(env::MIN_SIZE), v.to_string());
    }
    if let Some(v) = cfg.sample_rate {
        cmd.env(env::name(env::SAMPLE_RATE), v.to_string());
    } else if every_block_if_instrumented(cfg, perf_samples) {
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
    if cfg.no_loads || perf_samples {
        cmd.env(env::name(env::NO_LOADS), "1");
    }
    if cfg.no_stores || perf_samples {
        cmd.env(env::name(env::NO_STORES), "1");
    }
    Ok(())
}

/// Samples the run every `interval` (draining the perf rings), passes on
/// the termination memlens is asked for, and reaps its processes until
/// none is left: the exit of the program memlens started, and the ticks
/// the sampler missed.
fn follow_until_all_exit(
    sampler: &mut Sampler,
    mut perf: Option<&mut PerfSession>,
    interval: Duration,
    child_pid: i32,
) -> Result<(Option<TargetExit>, u64)> {
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
        match reap(sampler)? {
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
    Ok((main_exit, missed_ticks))
}

/// Termination asked of memlens is passed on to the run ([`on_signal`])
/// while it runs; then the default dispositions come back.
fn set_termination_handlers(forward: bool) {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: an async-signal-safe handler that only stores an integer,
        // or the default disposition.
        unsafe {
            if forward {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
                action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
                libc::sigaction(sig, &action, std::ptr::null_mut());
            } else {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
    }
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

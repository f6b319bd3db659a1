//! `memlens record --pid PID`: a process that is already running, recorded
//! from outside from now on, without stopping or restarting it.
//!
//! What can be seen from outside: its resident memory over time (/proc), its
//! mappings as they appear and go (/proc/PID/maps, every tenth tick), the
//! static variables of the code it maps (ELF symbol tables), and access
//! samples of all its threads from a perf backend (page faults on any
//! machine: first touches of pages from now on). What cannot: its heap
//! blocks and their call stacks (the allocator is hooked by preloading the
//! runtime when a program starts; a block allocated before the attach has no
//! event at all), annotated regions, exact access counts of an instrumented
//! build, and its exit status (it goes to the process's parent).

use crate::config::{claim_profile_dir, RecordConfig, RecordOutcome, SamplerChoice, TargetExit};
use crate::perf::backends::{self, Kind};
use crate::perf::counters::Counters;
use crate::perf::session::PerfSession;
use crate::sampler::{proc_timeline, Sampler};
use crate::sysinfo::{now_ns, realtime_ns};
use crate::{Error, Result, RunInfo};
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// Set by SIGINT, SIGTERM or SIGHUP: stop recording (the process runs on).
static STOP: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_stop(sig: libc::c_int) {
    STOP.store(sig, Ordering::Relaxed);
}

pub fn attach(cfg: &RecordConfig, pid: u32) -> Result<RecordOutcome> {
    let exe = attachable(pid)?;
    let plan = match cfg.backend {
        SamplerChoice::Software => {
            return Err(Error::Usage(
                "an instrumented build's samples come from a run memlens starts (memlens record PROGRAM): with --pid, use --backend auto, page-faults or a hardware backend".into(),
            ))
        }
        SamplerChoice::Perf(kind) => Some(backends::plan(kind, &options(cfg)).map_err(|u| {
            Error::Usage(format!(
                "the {} backend cannot run here: {}; {}",
                kind.name(),
                u.reason,
                u.fix
            ))
        })?),
        // Hardware samples where the machine has them, else page faults;
        // without perf events (paranoid settings) the rest still records.
        SamplerChoice::Auto => (Kind::HARDWARE.into_iter())
            .chain([Kind::PageFaults])
            .find_map(|k| backends::plan(k, &options(cfg)).ok()),
    };
    let (lock, raw_dir) = claim_profile_dir(cfg)?;
    let (start_ns, realtime_start_ns) = (now_ns(), realtime_ns());
    let mut sampler = Sampler::new(&raw_dir, Counters::none(), None, Default::default())?;
    sampler.follow_attached(pid, exe.clone());
    let mut perf = match plan {
        Some(plan) => Some(PerfSession::open(
            &plan.for_running_tasks(),
            &raw_dir,
            &threads(pid),
        )?),
        None => {
            eprintln!("memlens: no perf events here (see `memlens doctor`): recording resident memory and mappings only, no access samples");
            None
        }
    };
    // SAFETY: a handler that only stores an integer.
    unsafe {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::signal(sig, on_stop as *const () as libc::sighandler_t);
        }
    }
    eprintln!(
        "memlens: recording process {pid} ({}){}; Ctrl-C stops recording, the process runs on",
        exe.display(),
        cfg.duration
            .map(|d| format!(" for {} s", d.as_secs_f64()))
            .unwrap_or_default()
    );
    let started = Instant::now();
    let interval = Duration::from_millis(cfg.interval_ms.max(1));
    let mut buf = Vec::new();
    let ended = loop {
        sampler.tick();
        if let Some(perf) = &mut perf {
            perf.drain();
        }
        if proc_timeline(pid, now_ns(), &mut buf).is_none() {
            break true;
        }
        if STOP.load(Ordering::Relaxed) != 0 || cfg.duration.is_some_and(|d| started.elapsed() >= d)
        {
            break false;
        }
        std::thread::sleep(interval);
    };
    // SAFETY: restores the default dispositions.
    unsafe {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::signal(sig, libc::SIG_DFL);
        }
    }
    if let Some(perf) = perf {
        perf.finish(&raw_dir)?;
    }
    let (read_ahead, followed, _) = sampler.finish()?;
    let command = std::fs::read(format!("/proc/{pid}/cmdline"))
        .ok()
        .filter(|c| !c.is_empty())
        .map(|c| {
            (c.split(|&b| b == 0).filter(|a| !a.is_empty()))
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_else(|| vec![exe.display().to_string()]);
    Ok(RecordOutcome {
        dir: cfg.out_dir.clone(),
        lock,
        exit: TargetExit::Attached { ended },
        run: RunInfo {
            command,
            interval_ms: cfg.interval_ms,
            start_ns: Some(start_ns),
            realtime_start_ns: Some(realtime_start_ns),
            end_ns: Some(now_ns()),
            read_ahead: Some(read_ahead),
            attached_ended: ended,
            followed,
            ..RunInfo::default()
        },
        live_samples: None,
        replay_ahead: None,
    })
}

fn options(cfg: &RecordConfig) -> backends::Options {
    backends::Options {
        period: cfg.period.unwrap_or(0),
        min_latency: cfg.min_latency,
        loads: !cfg.no_loads,
        stores: !cfg.no_stores,
        aux_kib: cfg.aux_kib,
        aux_watermark: cfg.aux_watermark,
    }
}

/// The executable of a process this user may record, or why not.
fn attachable(pid: u32) -> Result<PathBuf> {
    if pid == std::process::id() {
        return Err(Error::Usage("--pid names memlens itself".into()));
    }
    let proc = PathBuf::from(format!("/proc/{pid}"));
    if !proc.exists() {
        return Err(Error::Usage(format!(
            "no process {pid}: give the pid of a running process (pgrep NAME finds it)"
        )));
    }
    let exe = std::fs::read_link(proc.join("exe"));
    let maps = std::fs::read(proc.join("maps"));
    match (exe, maps) {
        (Ok(exe), Ok(maps)) if !maps.is_empty() => Ok(exe),
        (Err(e), _) | (_, Err(e)) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            Err(Error::Usage(format!(
                "not permitted to read /proc/{pid}: it is another user's process; run memlens as that user (or with CAP_SYS_PTRACE)"
            )))
        }
        _ => Err(Error::Usage(format!(
            "process {pid} has no memory to record (a kernel thread or a zombie)"
        ))),
    }
}

/// The process's threads now.
fn threads(pid: u32) -> Vec<i32> {
    (std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten())
    .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
    .collect()
}

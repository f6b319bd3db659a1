//! The profile's `meta.json`: each image's process, the run's settings,
//! clock and losses.

use super::collector_log::{kernel_usage, signal_of, CollectorLog};
use super::RunInfo;
use crate::image::{Definitions, ImageHeader};
use crate::replay::Built;
use memlens_convert::perf::Streamed;
use memlens_convert::symbols::LoadedModule;
use memlens_profile::{self as profile, Losses, Meta, Process, StacksUnwound};
use memlens_rawlog as raw;

/// The process row of an image: `images[0]`, followed by the later images
/// of the run (an image ends at its process's exit, at the next exec of the
/// same pid, or when the collector saw the pid end).
pub(super) fn image_process(
    images: &[ImageHeader],
    collector: &CollectorLog,
    defs: &Definitions,
    built: &mut Built,
    modules: &[LoadedModule],
    t0: u64,
) -> Process {
    let (log, later) = (&images[0], &images[1..]);
    let exits = &collector.exits;
    let next_exec = later
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
    Process {
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
        attached: false,
        stacks_unwound: StacksUnwound {
            frame_pointers: log.stacks_walked[raw::walked_by::FRAME_POINTERS]
                + built.counts.sample_walks,
            cached_rules: log.stacks_walked[raw::walked_by::CACHED_RULES],
            libgcc: log.stacks_walked[raw::walked_by::LIBGCC],
        },
        heap_peak: built.heap_peak.take(),
    }
}

/// The profile's meta.json: the run, its settings, clock, processes and
/// losses.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_meta(
    run: &RunInfo,
    images: &[ImageHeader],
    collector: &CollectorLog,
    perf: Option<&Streamed>,
    keep_blocks: bool,
    recorded_command: Vec<String>,
    clock: profile::Clock,
    processes: Vec<Process>,
    losses: Losses,
) -> Meta {
    // The settings of the program that was measured: a script or launcher
    // before it may have run with other heap sampling (each image's own
    // settings are in its rows' provenance).
    let settings = (images.iter().find(|l| l.instrumented))
        .or(images.first())
        .map(|l| l.settings)
        .unwrap_or_default();
    Meta {
        format_version: profile::FORMAT_VERSION,
        memlens_version: env!("CARGO_PKG_VERSION").to_string(),
        command: if run.command.is_empty() {
            recorded_command
        } else {
            run.command.clone()
        },
        host: crate::sysinfo::hostname(),
        cpu: crate::sysinfo::cpu_model(),
        kernel: crate::sysinfo::kernel(),
        backend: {
            let mut b = vec![profile::Backend::Procfs];
            // A run memlens attached to from outside had no runtime.
            if !images.is_empty() || collector.attached.is_empty() {
                b.insert(0, profile::Backend::Preload);
            }
            match perf {
                Some(perf) => b.extend(perf.converted.backends()),
                None if images.iter().any(|l| l.instrumented) => {
                    b.push(profile::Backend::Instrumented)
                }
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
                .unwrap_or(&"unknown")
                .to_string(),
            max_frames: settings.max_frames,
            cache_model: run.cache_model.clone().unwrap_or_default(),
            keep_blocks,
            access_period: perf.map_or(settings.access_period, |p| p.period),
            sample_loads: settings.access_filter & raw::access_filter::LOADS != 0,
            sample_stores: settings.access_filter & raw::access_filter::STORES != 0,
            sample_lines: perf.is_none() && settings.access_filter & raw::access_filter::LINES != 0,
        },
        clock,
        processes,
        losses,
    }
}

/// What an image's log says it lost, added to `losses`.
pub(super) fn add_image_losses(
    losses: &mut Losses,
    log: &ImageHeader,
    truncated: u64,
    built: &Built,
) {
    losses.dropped_events += log.dropped;
    losses.untracked_allocs += log.untracked;
    let fault = |bit| u64::from(log.faults & bit != 0);
    losses.heap_not_hooked += fault(raw::fault::HEAP_NOT_HOOKED);
    losses.heap_sizes_unknown += fault(raw::fault::HEAP_SIZES_UNKNOWN);
    losses.log_lost += fault(raw::fault::LOG_LOST);
    losses.disk_full += fault(raw::fault::DISK_FULL);
    losses.truncated_blocks += truncated + built.counts.malformed_blocks;
    losses.decode_errors += built.counts.damaged_records;
    losses.unmatched_frees += built.unmatched_frees;
}

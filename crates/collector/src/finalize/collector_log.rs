//! What the collector wrote beside the images' logs: capacity samples,
//! threads' traffic, process exits and the kernel's usage of each, counter
//! readings, attached processes' mappings, processes the runtime could not
//! enter.

use crate::image::ImageHeader;
use memlens_convert::symbols::LoadedModule;
use memlens_profile::{self as profile, KernelUsage, Process};
use memlens_rawlog::{self as raw, tag};
use std::collections::HashMap;
use std::path::Path;

/// What the collector wrote: capacity samples, process exits and the kernel's
/// usage of each, counter readings.
#[derive(Default)]
pub(super) struct CollectorLog {
    pub(super) timeline: Vec<raw::Timeline>,
    pub(super) thread_traffic: Vec<raw::ThreadTraffic>,
    pub(super) exits: Vec<raw::ProcessExit>,
    pub(super) usages: Vec<raw::ProcessUsage>,
    /// Images the runtime could not enter, with their executables.
    pub(super) untracked: Vec<(raw::UntrackedProcess, String)>,
    /// Running processes memlens attached to, with their executables.
    pub(super) attached: Vec<(raw::UntrackedProcess, String)>,
    /// Their mappings as they appeared and went, with their names.
    pub(super) mappings: Vec<(raw::Mapping, String)>,
    /// Counter definitions (with name and method) by index, and readings.
    pub(super) counters: HashMap<u32, (raw::CounterDef, String, String)>,
    pub(super) readings: Vec<raw::CounterReading>,
}

pub(super) fn read_collector_log(path: &Path) -> CollectorLog {
    use std::io::Read;
    let mut data = Vec::new();
    let read = memlens_profile::open_regular(path).map(|mut f| f.read_to_end(&mut data));
    if !matches!(read, Ok(Ok(_))) {
        return CollectorLog::default();
    }
    let mut log = CollectorLog::default();
    for rec in raw::Records::new(&data) {
        match rec.tag {
            tag::TIMELINE => log.timeline.extend(rec.payload::<raw::Timeline>()),
            tag::THREAD_TRAFFIC => (log.thread_traffic).extend(rec.payload::<raw::ThreadTraffic>()),
            tag::PROCESS_EXIT => log.exits.extend(rec.payload::<raw::ProcessExit>()),
            tag::PROCESS_USAGE => log.usages.extend(rec.payload::<raw::ProcessUsage>()),
            tag::UNTRACKED_PROCESS | tag::ATTACHED_PROCESS => {
                if let Some(p) = rec.payload::<raw::UntrackedProcess>() {
                    let exe = trailing_text(rec.trailing::<raw::UntrackedProcess>());
                    match rec.tag {
                        tag::ATTACHED_PROCESS => log.attached.push((p, exe)),
                        _ => log.untracked.push((p, exe)),
                    }
                }
            }
            tag::MAPPING => {
                if let Some(m) = rec.payload::<raw::Mapping>() {
                    log.mappings
                        .push((m, trailing_text(rec.trailing::<raw::Mapping>())));
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

/// A record's trailing text (NUL-padded to the record's alignment).
pub(super) fn trailing_text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .trim_end_matches('\0')
        .to_string()
}

/// The per-thread bandwidth timeline, in time since the run started.
pub(super) fn thread_traffic_rows(
    collector: &CollectorLog,
    t0: u64,
) -> Vec<profile::ThreadTrafficPoint> {
    (collector.thread_traffic.iter())
        .map(|t| {
            let (bytes_read, bytes_written, loads, stores) =
                raw::AccessCounters::traffic(&t.counts);
            profile::ThreadTrafficPoint {
                pid: t.pid,
                tid: t.tid,
                time_ns: t.time.saturating_sub(t0),
                bytes_read,
                bytes_written,
                loads,
                stores,
            }
        })
        .collect()
}

/// Counter readings as table rows, scaled and compensated for multiplexing.
pub(super) fn counter_rows(log: &CollectorLog, t0: u64) -> Vec<profile::CounterReading> {
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

/// The mappings of attached processes as allocation rows (one per mapping
/// while it was listed, named as maps names it), and the code they map as
/// modules, with the time each was found.
pub(super) fn attached_mappings(
    log: &CollectorLog,
    t0: u64,
    rows: &mut dyn FnMut(profile::Allocation),
) -> Vec<(u32, u64, LoadedModule)> {
    let mut maps: HashMap<u32, crate::mappings::Mappings> = HashMap::new();
    let mut modules = Vec::new();
    let mut last = t0;
    for (m, name) in &log.mappings {
        let at = m.time.saturating_sub(t0);
        last = last.max(m.time);
        let live = maps.entry(m.pid).or_default();
        if m.present == 0 {
            live.unmap(m.start, m.end - m.start, at, rows);
            continue;
        }
        if m.prot & 4 != 0 && name.starts_with('/') {
            modules.push((
                m.pid,
                m.time,
                LoadedModule::from_mapping(name, m.start, m.end, m.offset),
            ));
        }
        let row = profile::Allocation {
            pid: m.pid,
            kind: "mmap".into(),
            address: m.start,
            size: m.end.saturating_sub(m.start),
            alloc_ns: at,
            est_count: 1.0,
            est_bytes: m.end.saturating_sub(m.start) as f64,
            prot: Some(m.prot as i32),
            map_flags: Some(if m.shared != 0 {
                libc::MAP_SHARED
            } else {
                libc::MAP_PRIVATE
            }),
            name: Some(if name.is_empty() {
                "anonymous".into()
            } else {
                name.clone()
            }),
            ..Default::default()
        };
        live.map(row, at, rows);
    }
    for live in maps.into_values() {
        live.into_rows().for_each(&mut *rows);
    }
    modules
}

/// The processes (or images after an exec) the runtime could not enter: known
/// from the collector alone, they end at their exit or at a later image.
pub(super) fn untracked_processes(
    log: &CollectorLog,
    images: &[ImageHeader],
    t0: u64,
    attached_ended: bool,
) -> Vec<Process> {
    let untracked = (log.untracked.iter()).map(|(u, exe)| (u, exe, false));
    let attached = (log.attached.iter()).map(|(u, exe)| (u, exe, true));
    untracked
        .chain(attached)
        .map(|(u, exe, attached)| {
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
            // An attached process that ended was last seen at its last tick.
            let last_seen = (log.timeline.iter())
                .filter(|t| attached && attached_ended && t.pid == u.pid as u64)
                .map(|t| t.time)
                .max();
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
                end_ns: (next.or(exit.map(|e| e.time)).or(last_seen)).map(|t| t.saturating_sub(t0)),
                exit_code: exit.filter(|e| e.signaled == 0).map(|e| e.status),
                signal: signal_of(exit),
                usage: usage.map(kernel_usage),
                untracked: true,
                attached,
                stacks_unwound: Default::default(),
                heap_peak: None,
            }
        })
        .collect()
}

/// The signal that ended a process the collector reaped, if one did.
pub(super) fn signal_of(exit: Option<&raw::ProcessExit>) -> Option<i32> {
    exit.filter(|e| e.signaled != 0)
        .map(|e| e.status.wrapping_sub(128))
}

pub(super) fn kernel_usage(u: &raw::ProcessUsage) -> KernelUsage {
    KernelUsage {
        user_ns: u.user_ns,
        system_ns: u.system_ns,
    }
}

//! Turns the raw logs of a recording (one per process image, plus the collector's
//! timeline) into the profile's Parquet tables and `meta.json`.
//!
//! It streams: each image's per-thread record streams are merged in time order,
//! and an allocation row is written as soon as its block is freed, so memory grows
//! with the blocks live at once, not with the length of the run. An image whose
//! replay began while it ran ([`crate::live_replay`]) is carried on from there. It reads whatever
//! was published, so a target that crashed or was killed still gives a profile up
//! to that point; blocks cut short are counted as losses.

use crate::image::{
    definitions, read_header, Definitions, ImageHeader, ImageLog, Merged, TimeWindow,
};
use crate::live_replay::{ReplayAhead, ReplayedPart};
use crate::live_samples::{self, LiveSamples};
use crate::replay::{replay, timeline_point, BlockRows, Built, Replay, Sinks};
use crate::{Error, Result};
use memlens_convert::perf::{convert_into, Streamed};
use memlens_convert::symbols::{self, LoadedModule, Symbolizer};
use memlens_decoders::perf_data::PerfData;
use memlens_profile::{
    self as profile, AccessSample, KernelUsage, Losses, Meta, Process, StacksUnwound, StaticObject,
    TableWriter, TimelinePoint,
};
use memlens_rawlog::{self as raw, tag};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// What the launcher knows that the logs do not.
#[derive(Default)]
pub struct RunInfo {
    pub command: Vec<String>,
    pub interval_ms: u64,
    pub start_ns: Option<u64>,
    /// CLOCK_REALTIME read beside `start_ns`.
    pub realtime_start_ns: Option<u64>,
    pub end_ns: Option<u64>,
    pub missed_ticks: u64,
    /// The cache model's geometry ("size/ways/line" per level), when it ran.
    pub cache_model: Option<String>,
    /// A row for every freed block even when every block is recorded.
    pub keep_blocks: bool,
    /// Debug information of the run's modules, read while it ran.
    pub read_ahead: Option<symbols::ReadAhead>,
    /// The process memlens attached to ended while it recorded (else it ran
    /// on when recording stopped).
    pub attached_ended: bool,
    /// The definitions of the logs the collector followed to their end.
    pub followed: FollowedLogs,
}

/// The definitions of each log the collector followed to its end while the
/// run went, by the log's file name: the finalizer's pass over those logs
/// is saved.
#[derive(Default)]
pub struct FollowedLogs(HashMap<PathBuf, Definitions>);

impl FollowedLogs {
    /// The log at `path` was followed to its end.
    pub(crate) fn insert(&mut self, path: &Path, defs: Definitions) {
        self.0
            .insert(crate::live_samples::key(path), defs.by_time());
    }

    fn get(&self, path: &Path) -> Option<&Definitions> {
        self.0.get(&crate::live_samples::key(path))
    }
}

/// What the collector wrote: capacity samples, process exits and the kernel's
/// usage of each, counter readings.
#[derive(Default)]
struct CollectorLog {
    timeline: Vec<raw::Timeline>,
    thread_traffic: Vec<raw::ThreadTraffic>,
    exits: Vec<raw::ProcessExit>,
    usages: Vec<raw::ProcessUsage>,
    /// Images the runtime could not enter, with their executables.
    untracked: Vec<(raw::UntrackedProcess, String)>,
    /// Running processes memlens attached to, with their executables.
    attached: Vec<(raw::UntrackedProcess, String)>,
    /// Their mappings as they appeared and went, with their names.
    mappings: Vec<(raw::Mapping, String)>,
    /// Counter definitions (with name and method) by index, and readings.
    counters: HashMap<u32, (raw::CounterDef, String, String)>,
    readings: Vec<raw::CounterReading>,
}

/// The per-thread bandwidth timeline, in time since the run started.
fn thread_traffic_rows(collector: &CollectorLog, t0: u64) -> Vec<profile::ThreadTrafficPoint> {
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

fn read_collector_log(path: &Path) -> CollectorLog {
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
fn trailing_text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .trim_end_matches('\0')
        .to_string()
}

/// The mappings of attached processes as allocation rows (one per mapping
/// while it was listed, named as maps names it), and the code they map as
/// modules, with the time each was found.
fn attached_mappings(
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
fn untracked_processes(
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

/// The variables of an image's modules, each file's once; the runtime's own
/// variables are not the program's data.
fn variables(pid: u32, modules: &[(u64, LoadedModule)]) -> Vec<StaticObject> {
    let mut seen_paths = HashSet::new();
    (modules.iter())
        .filter(|(_, m)| seen_paths.insert(&m.path) && !m.path.ends_with(profile::RUNTIME_FILE))
        .flat_map(|(_, m)| symbols::static_objects(pid, m))
        .collect()
}

/// The tables and replays begun during the run, once each replay is found
/// to have taken its log's records as this reading of the log gives them: on
/// a difference the tables written so far are dropped (and said so on
/// stderr), and every log is replayed here.
fn checked(ahead: ReplayAhead) -> (Option<Sinks>, Vec<(ReplayedPart, Replay<'static>)>) {
    let mut parts = ahead.replayed;
    let differs = (parts.iter_mut()).find_map(|(part, _)| match check_begun(part) {
        Ok(truncated) => {
            part.truncated = truncated;
            None
        }
        Err(why) => Some(why),
    });
    match differs {
        None => (ahead.sinks, parts),
        Some(why) => {
            eprintln!("memlens: {why}: replaying the run's logs again after the run");
            if let Some(sinks) = ahead.sinks {
                sinks.discard();
            }
            (None, Vec::new())
        }
    }
}

/// The blocks of a log replayed during the run cut short or never written,
/// if the replay took each thread's first records (all of them once
/// complete) as the finalizer reads them.
fn check_begun(part: &ReplayedPart) -> std::result::Result<u64, String> {
    let path = part.path.display();
    if part.disordered {
        return Err(format!(
            "{path}: a thread's events were read out of time order"
        ));
    }
    let image = ImageLog::open(&part.path).map_err(|e| e.to_string())?;
    let (streams, truncated) = image.streams();
    for s in &streams {
        let taken = part.replayed.get(&s.tid).copied().unwrap_or_default();
        let (same, log_bytes) = if part.complete {
            let (bytes, last) = s.whole();
            ((bytes, last) == (taken.bytes, taken.last), bytes)
        } else {
            let first = s.first(taken.records);
            (first == taken, first.bytes)
        };
        if !same {
            return Err(format!(
                "{path}: thread {}'s records replayed while it ran ({} bytes) are not the log's ({log_bytes} bytes)",
                s.tid, taken.bytes
            ));
        }
    }
    if let Some(tid) = (part.replayed.keys()).find(|tid| !streams.iter().any(|s| s.tid == **tid)) {
        return Err(format!(
            "{path}: records replayed of thread {tid}, which the log has none of"
        ));
    }
    Ok(truncated)
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

/// Writes the profile tables and meta.json from `dir/raw`, and keeps the raw
/// logs ([`memlens_profile::remove_raw_files`] removes them). `live` holds the samples written
/// while the run went (record's), whose images are not replayed for them again.
///
/// `progress` hears (done, total) bytes of the raw logs as their events replay.
pub fn finalize(
    dir: &Path,
    run: &RunInfo,
    live: Option<LiveSamples>,
    ahead: Option<ReplayAhead>,
    progress: &dyn Fn(u64, u64),
) -> Result<Meta> {
    let raw_dir = dir.join(memlens_profile::RAW_DIR);
    let mut images = Vec::new();
    for path in raw_logs(&raw_dir)? {
        images.extend(read_header(&path)?);
    }
    let collector = read_collector_log(&raw_dir.join(memlens_profile::RAW_COLLECTOR_LOG));
    let collector_timeline = &collector.timeline;
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

    // Access samples are attributed to blocks: a block a sample of the log
    // hit keeps its row; every block does for perf.data's samples, which
    // the replay does not see.
    let perf_sampled = raw_dir.join(memlens_profile::RAW_PERF_DATA).exists();
    let keep_blocks = run.keep_blocks || perf_sampled;
    let (mut sinks, mut written, mut ahead) =
        open_sinks(dir, run, &images, live, ahead, keep_blocks)?;
    let mut tables = Tables {
        timeline: (collector_timeline.iter())
            .map(|t| timeline_point(t, t0))
            .collect(),
        symbolizer: (run.read_ahead.clone())
            .map_or_else(Symbolizer::default, Symbolizer::with_read_ahead),
        ..Default::default()
    };
    let mut processes = Vec::new();
    let mut losses = Losses {
        missed_ticks: run.missed_ticks,
        ..Default::default()
    };
    let mut last_time = run.end_ns.unwrap_or(0).saturating_sub(t0);
    let mut recorded_command = Vec::new();

    let total: u64 = images.iter().map(|l| l.block_bytes).sum();
    let mut replayed = 0;
    for (i, log) in images.iter().enumerate() {
        let key = crate::live_samples::key(&log.path);
        let begun = (ahead.iter()).position(|(part, _)| live_samples::key(&part.path) == key);
        let begun = begun.map(|i| ahead.swap_remove(i));
        // Samples written while the image ran are not replayed.
        let live = written.remove(&key);
        let report = |bytes| progress(replayed + bytes, total);
        let followed = run.followed.get(&log.path);
        let (mut built, defs, truncated) = replay_image(
            log,
            begun,
            followed,
            live.is_some(),
            t0,
            &mut sinks,
            &report,
        )?;
        // Without a collector, the first image's own record of it.
        if recorded_command.is_empty() {
            recorded_command = defs.command.clone();
        }
        if let Some(live) = live {
            built.pcs.extend(live.pcs);
            built.stack_ids.extend(live.stacks);
        }
        replayed += log.block_bytes;
        progress(replayed, total);
        add_image_losses(&mut losses, log, truncated, &built);
        let modules: Vec<LoadedModule> = defs.modules.iter().map(|(_, m)| m.clone()).collect();
        tables.add_image(log.pid, &defs, &built, &modules, t0);
        last_time = last_time.max(built.counts.last_ns.saturating_sub(t0));
        processes.push(image_process(
            &images[i..],
            &collector,
            &defs,
            &mut built,
            &modules,
            t0,
        ));
        tables.sites.extend(built.sites);
        tables.regions.extend(built.regions);
        tables.threads.extend(built.threads);
        tables.tags.extend(built.tags);
        tables.timeline.extend(built.timeline);
    }
    let attached_modules =
        attached_mappings(&collector, t0, &mut |row| sinks.allocations.push(row));
    for (pid, time, m) in attached_modules {
        tables.add_attached_module(pid, time, m, t0);
    }
    processes.extend(untracked_processes(
        &collector,
        &images,
        t0,
        run.attached_ended,
    ));
    losses.untracked_processes += collector.untracked.len() as u64;
    losses.unseen_ends += (processes.iter())
        .filter(|p| p.end_unseen(&processes))
        .count() as u64;
    // The images' replays are done with it.
    let mut samples = (sinks.samples.take()).expect("the finalizer's sinks have the samples table");
    let perf = perf_samples(&raw_dir, t0, &mut samples);
    if let Some(perf) = &perf {
        let mut code: Vec<&(u32, u64)> = perf.code.iter().collect();
        code.sort_unstable();
        for &(pid, pc) in code {
            tables.add_sampled_instruction(pid, pc);
        }
        // A damaged record that ended the stream is already among them.
        losses.add(&perf.converted.summary.losses);
        last_time = last_time.max(perf.last_ns);
    }
    // Their last rows go to their encoders' threads now, and are encoded
    // while the tables below are written.
    sinks.allocations.flush();
    sinks.site_timeline.flush();
    samples.flush();
    tables.timeline.sort_by_key(|p| (p.pid, p.time_ns));
    last_time = last_time.max(tables.timeline.last().map_or(0, |p| p.time_ns));
    // A collector's ticks without a run from `record` (or an attach): it was
    // killed, and the programs went on unsampled until their end.
    if let (None, Some(last_tick)) = (
        run.start_ns,
        collector_timeline.iter().map(|t| t.time).max(),
    ) {
        losses.unsampled_ms += last_time.saturating_sub(last_tick.saturating_sub(t0)) / 1_000_000;
    }

    let meta = run_meta(
        run,
        &images,
        &collector,
        perf.as_ref(),
        keep_blocks,
        recorded_command,
        profile::Clock {
            source: "CLOCK_MONOTONIC".into(),
            start_ns: t0,
            duration_ns: last_time,
            realtime_start_ns: (run.start_ns.zip(run.realtime_start_ns))
                .map(|(start, realtime)| realtime.saturating_sub(start.saturating_sub(t0))),
        },
        processes,
        losses,
    );
    tables.write(dir, &collector, t0)?;
    sinks.allocations.finish()?;
    sinks.site_timeline.finish()?;
    samples.finish()?;
    // meta.json last: its presence marks a complete profile.
    meta.write(dir)?;
    // The debug information read (libc's alone is ~100 MB of small
    // allocations) is freed beside the rest of the command, not before it;
    // what is still being read ahead is of no use now.
    if let Some(r) = &run.read_ahead {
        r.stop();
    }
    let _ = std::thread::Builder::new().spawn(move || drop(tables));
    Ok(meta)
}

/// The tables the replays stream their rows into: those the replays begun
/// during the run opened (checked), or new ones; the samples table and
/// what its rows already hold; the begun replays to carry on.
#[allow(clippy::type_complexity)]
fn open_sinks(
    dir: &Path,
    run: &RunInfo,
    images: &[ImageHeader],
    live: Option<LiveSamples>,
    ahead: Option<ReplayAhead>,
    keep_blocks: bool,
) -> Result<(
    Sinks,
    HashMap<PathBuf, live_samples::ImageSamples>,
    Vec<(ReplayedPart, Replay<'static>)>,
)> {
    let rows = if keep_blocks {
        BlockRows::All
    } else if images.iter().any(|l| l.instrumented) {
        BlockRows::LargeAndHit
    } else {
        BlockRows::Large
    };
    // Their rows count time from the run's start, as t0 is in a recording.
    let (samples, written) = match live {
        Some(live) => live.into_parts(),
        None => (TableWriter::create(dir)?, HashMap::new()),
    };
    let model_cost = match (
        &run.cache_model,
        profile::Calibration::read(&dir.join(profile::CALIBRATION_FILE)),
    ) {
        (Some(_), Ok(c)) => std::array::from_fn(|code| c.model_level_ns(code as u8)),
        _ => [None; 8],
    };
    // Replays begun while the program ran wrote their rows to the tables
    // already: they go on in the same files, once checked.
    let (sinks, ahead) = match ahead {
        Some(ahead) => checked(ahead),
        None => (None, Vec::new()),
    };
    let mut sinks = match sinks {
        Some(sinks) => sinks,
        None => Sinks::create(dir, run.interval_ms.max(1) * 1_000_000)?,
    };
    (sinks.samples, sinks.rows, sinks.model_cost) = (Some(samples), rows, model_cost);
    Ok((sinks, written, ahead))
}

/// Replays one image's log, or carries on the replay begun while it ran;
/// the image's rows built, its definitions, and the bytes of its log cut
/// short. `samples_written`: its samples went to the table while it ran.
fn replay_image<'d>(
    log: &ImageHeader,
    begun: Option<(ReplayedPart, Replay<'static>)>,
    followed: Option<&'d Definitions>,
    samples_written: bool,
    t0: u64,
    sinks: &mut Sinks,
    report: &dyn Fn(u64),
) -> Result<(Built, Cow<'d, Definitions>, u64)> {
    // A log replayed whole during the run is not opened again (its check
    // read it).
    let mapped;
    let (streams, truncated) = match &begun {
        Some((part, _)) if part.complete => (Vec::new(), part.truncated),
        _ => {
            mapped = ImageLog::open(&log.path)?;
            mapped.streams()
        }
    };
    let window = TimeWindow::of(log);
    let (built, defs) = match begun {
        Some((part, mut image)) => {
            if part.complete {
                image.counts_mut().malformed_blocks += part.malformed_blocks;
            } else {
                let merged = Merged::new(&streams, window, samples_written, &part.replayed);
                image.replay_merged(merged, sinks, report);
            }
            let (built, defs) = image.finish(log, sinks);
            (built, Cow::Owned(defs.into_owned().by_time()))
        }
        None => {
            let defs = match followed {
                Some(defs) => Cow::Borrowed(defs),
                None => Cow::Owned(definitions(&streams, window)),
            };
            let needed = Replay::needs_samples(&log.settings, sinks, samples_written);
            let merged = Merged::new(&streams, window, !needed, &Default::default());
            replay(log, defs, merged, t0, sinks, samples_written, report)
        }
    };
    Ok((built, defs, truncated))
}

/// The tables written whole at the end (the allocations, sites' timelines
/// and samples are streamed), and what symbolizing them needs.
#[derive(Default)]
struct Tables {
    sites: Vec<profile::HeapSite>,
    frames: Vec<profile::Frame>,
    locations: Vec<profile::CodeLocation>,
    regions: Vec<profile::Region>,
    threads: Vec<profile::ThreadRow>,
    tags: Vec<profile::TagRange>,
    timeline: Vec<TimelinePoint>,
    modules: Vec<profile::Module>,
    statics: Vec<StaticObject>,
    symbolizer: Symbolizer,
    /// The (pid, stack id) and (pid, pc) already listed: an exec keeps the
    /// pid, and without address randomization its images share stack ids
    /// and code addresses, which are listed once per process.
    listed: HashSet<(u32, u64)>,
    listed_pcs: HashSet<(u32, u64)>,
    /// Each process's modules (its last image's), for samples of perf backends.
    modules_of: HashMap<u32, Vec<LoadedModule>>,
}

impl Tables {
    /// An image's stacks and code addresses symbolized, its modules and
    /// their variables listed.
    fn add_image(
        &mut self,
        pid: u32,
        defs: &Definitions,
        built: &Built,
        modules: &[LoadedModule],
        t0: u64,
    ) {
        // The modules' variables are read beside the symbolizing, on the
        // core the program left.
        let image_statics = std::thread::scope(|scope| {
            let image_statics = scope.spawn(|| variables(pid, &defs.modules));
            for &id in &built.stack_ids {
                let Some(addrs) = defs.stacks.get(&id) else {
                    continue;
                };
                if self.listed.insert((pid, id)) {
                    (self.frames).extend(self.symbolizer.stack_rows(pid, id, addrs, modules));
                }
            }
            for &pc in &built.pcs {
                if self.listed_pcs.insert((pid, pc)) {
                    (self.locations).push(self.symbolizer.location(pid, pc, modules, true));
                }
            }
            (image_statics.join()).unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        });
        self.statics.extend(image_statics);
        self.modules_of.insert(pid, modules.to_vec());
        for (time, m) in &defs.modules {
            self.modules.push(module_row(pid, *time, m, t0));
        }
    }

    /// A module an attached process mapped (`record --pid`).
    fn add_attached_module(&mut self, pid: u32, time: u64, m: LoadedModule, t0: u64) {
        self.modules.push(module_row(pid, time, &m, t0));
        // A module maps several segments: its variables are listed once.
        let known = self.modules_of.entry(pid).or_default();
        if known.iter().all(|k| k.path != m.path) {
            self.statics.extend(symbols::static_objects(pid, &m));
        }
        known.push(m);
    }

    /// The code of a perf backend's sample: a PMU's or the kernel's sample
    /// names the instruction itself.
    fn add_sampled_instruction(&mut self, pid: u32, pc: u64) {
        let modules = self.modules_of.get(&pid).map_or(&[][..], Vec::as_slice);
        (self.locations).push(self.symbolizer.location(pid, pc, modules, false));
    }

    fn write(&self, dir: &Path, collector: &CollectorLog, t0: u64) -> Result<()> {
        profile::write_table(dir, &self.sites)?;
        profile::write_table(dir, &self.frames)?;
        profile::write_table(dir, &self.locations)?;
        profile::write_table(dir, &self.regions)?;
        profile::write_table(dir, &self.threads)?;
        profile::write_table(dir, &self.tags)?;
        profile::write_table(dir, &self.timeline)?;
        profile::write_table(dir, &thread_traffic_rows(collector, t0))?;
        profile::write_table(dir, &self.modules)?;
        profile::write_table(dir, &self.statics)?;
        profile::write_table(dir, &counter_rows(collector, t0))?;
        Ok(())
    }
}

fn module_row(pid: u32, time: u64, m: &LoadedModule, t0: u64) -> profile::Module {
    profile::Module {
        pid,
        path: m.path.clone(),
        start: m.start,
        end: m.end,
        bias: m.bias,
        load_ns: time.saturating_sub(t0),
    }
}

/// The process row of an image: `images[0]`, followed by the later images
/// of the run (an image ends at its process's exit, at the next exec of the
/// same pid, or when the collector saw the pid end).
fn image_process(
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
fn run_meta(
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
fn add_image_losses(losses: &mut Losses, log: &ImageHeader, truncated: u64, built: &Built) {
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

/// The perf backend's `raw/perf.data` (if the run had one), streamed into the
/// samples table.
fn perf_samples(raw_dir: &Path, t0: u64, sink: &mut TableWriter<AccessSample>) -> Option<Streamed> {
    let file = memlens_profile::open_regular(&raw_dir.join(memlens_profile::RAW_PERF_DATA)).ok()?;
    // SAFETY: read-only map of a file nothing writes any more.
    let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    let perf = PerfData::parse(&map).ok()?;
    Some(convert_into(&perf, t0, |row| sink.push(row)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Taken;
    use crate::tail::test_log::{frees, write_block, write_staging};

    /// A log of thread 7 (records 1-4 copied to block 1, 5-6 staged for
    /// block 2) and of thread 8 (record 10 staged), as the finalizer reads it.
    fn log(dir: &Path) -> PathBuf {
        let path = dir.join("1.0.mlraw");
        let mut file = std::fs::File::create(&path).unwrap();
        file.set_len(raw::HEADER_SIZE as u64).unwrap();
        write_staging(&mut file, 0, 7, 2, &frees(&[5, 6]));
        write_block(&mut file, 1, 7, &frees(&[1, 2, 3, 4]));
        write_staging(&mut file, 3, 8, 4, &frees(&[10]));
        path
    }

    /// What a replay took of the records with these pointers.
    fn taken(ptrs: &[u64]) -> Taken {
        let mut taken = Taken::default();
        let body = frees(ptrs);
        raw::Records::new(&body).for_each(|rec| taken.add(&rec));
        taken
    }

    fn part(path: &Path, complete: bool, replayed: &[(u32, &[u64])]) -> ReplayedPart {
        ReplayedPart {
            path: path.to_path_buf(),
            complete,
            replayed: (replayed.iter().map(|&(tid, ptrs)| (tid, taken(ptrs)))).collect(),
            disordered: false,
            malformed_blocks: 0,
            truncated: 0,
        }
    }

    /// The replay begun during the run is kept only when it took each
    /// thread's first records as the finalizer reads them: a record missed,
    /// taken twice or out of order, or a thread missed, drops it.
    #[test]
    fn a_replay_begun_during_the_run_is_checked_against_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = log(dir.path());
        let all: [(u32, &[u64]); 2] = [(7, &[1, 2, 3, 4, 5, 6]), (8, &[10])];
        assert_eq!(check_begun(&part(&path, true, &all)), Ok(0));
        // Stopped at the second thread: thread 7's first records.
        assert_eq!(check_begun(&part(&path, false, &[(7, &[1, 2, 3])])), Ok(0));
        let wrong: [&[(u32, &[u64])]; 5] = [
            &[(7, &[1, 2, 3, 5, 6]), (8, &[10])],
            &[(7, &[1, 2, 3, 4, 5, 6, 6]), (8, &[10])],
            &[(7, &[1, 2, 3, 4, 5, 6])],
            &[(7, &[1, 2, 3, 4, 5, 6]), (8, &[10]), (9, &[11])],
            &[(7, &[1, 2, 4, 3]), (8, &[10])],
        ];
        for replayed in wrong {
            assert!(
                check_begun(&part(&path, true, replayed)).is_err(),
                "{replayed:?}"
            );
        }
        assert!(check_begun(&part(&path, false, &[(7, &[1, 3])])).is_err());
        let mut disordered = part(&path, true, &all);
        disordered.disordered = true;
        assert!(check_begun(&disordered).is_err());
    }
}

//! Turns the raw logs of a recording (one per process image, plus the collector's
//! timeline) into the profile's Parquet tables and `meta.json`.
//!
//! It streams: each image's per-thread record streams are merged in time order,
//! and an allocation row is written as soon as its block is freed, so memory grows
//! with the blocks live at once, not with the length of the run. An image whose
//! replay began while it ran ([`crate::live_replay`]) is carried on from there. It reads whatever
//! was published, so a target that crashed or was killed still gives a profile up
//! to that point; blocks cut short are counted as losses.

mod collector_log;
mod meta;
mod tables;

use collector_log::{attached_mappings, read_collector_log, untracked_processes};
use meta::{add_image_losses, image_process, run_meta};
use tables::Tables;

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
use memlens_profile::{self as profile, AccessSample, Losses, Meta, TableWriter};
use std::borrow::Cow;
use std::collections::HashMap;
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
    let mut tables = Tables::new(
        (collector_timeline.iter())
            .map(|t| timeline_point(t, t0))
            .collect(),
        (run.read_ahead.clone()).map_or_else(Symbolizer::default, Symbolizer::with_read_ahead),
    );
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
        tables.add_rows(built);
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
    use memlens_rawlog as raw;

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

//! `memlens import`: a perf.data file with PEBS, IBS or Arm SPE samples becomes a
//! memlens profile, so every report works on what users recorded with `perf
//! record` / `perf mem record`; and `memlens export --csv` writes samples in
//! spe-parser's columns.
//!
//! The container, the sample bodies and the hardware formats are read with
//! memlens' own bounded decoders (`memlens_decoders::perf_data`).

mod csv;

pub use csv::export_csv;

pub use memlens_convert::perf::Summary as ImportSummary;
use memlens_convert::perf::{convert_into, first_time, Streamed, Summary};
use memlens_convert::symbols::{LoadedModule, Symbolizer};
use memlens_decoders::perf_data::{feature, PerfData};
use memlens_profile::{
    self as profile, AccessSample, Backend, CodeLocation, Meta, Module, Process,
};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{path}: {detail}; give a perf.data written by `perf record` (file or pipe mode)")]
    NotPerfData { path: PathBuf, detail: String },
    #[error("{path}: {detail}, and no load/store samples precede it; re-record (or copy the file again if it was cut in transfer)")]
    Corrupt { path: PathBuf, detail: String },
    #[error("{path}: no load/store samples ({skipped} samples or SPE records of other operations, {damaged} damaged or cut); record with `perf mem record` or an SPE/IBS event")]
    NoMemorySamples {
        path: PathBuf,
        skipped: u64,
        damaged: u64,
    },
    #[error(transparent)]
    Profile(#[from] profile::ProfileError),
}

/// Imports `file` into the profile directory `out`.
/// `force` replaces the profile already there.
pub fn import(file: &Path, out: &Path, force: bool) -> Result<ImportSummary, ImportError> {
    let not_perf = |detail: String| ImportError::NotPerfData {
        path: file.to_path_buf(),
        detail,
    };
    let unreadable = |e: std::io::Error| not_perf(profile::error_words(&e));
    let f = std::fs::File::open(file).map_err(unreadable)?;
    if f.metadata().is_ok_and(|m| m.is_dir()) {
        return Err(not_perf("it is a directory".into()));
    }
    // SAFETY: the map is read-only and lives for this call; perf.data files are
    // not rewritten in place while being imported.
    let map = unsafe { memmap2::Mmap::map(&f) }.map_err(unreadable)?;
    let perf = PerfData::parse(&map).map_err(|e| not_perf(e.to_string()))?;

    let created = !out.exists();
    let (_lock, kept_aside) = profile::claim_dir(out, force)?;
    if let Some(old) = kept_aside {
        eprintln!("{}", profile::kept_aside_note(out, &old));
    }
    // Rows stream to the table as they are decoded, times relative to the
    // first sample's.
    let start = first_time(&perf).unwrap_or(0);
    let mut writer = profile::TableWriter::<AccessSample>::create(out)?;
    let streamed = convert_into(&perf, start, |row| writer.push(row));
    writer.finish()?;
    let c = &streamed.converted;
    if c.summary.samples == 0 {
        // Nothing to keep: leave no half-written profile behind.
        let _ = std::fs::remove_file(profile::table_path::<AccessSample>(out));
        if created {
            let _ = std::fs::remove_file(out.join(profile::LOCK_FILE));
            let _ = std::fs::remove_dir(out);
        }
    }
    match &c.damage {
        Some(e) if c.summary.samples == 0 => {
            return Err(ImportError::Corrupt {
                path: file.to_path_buf(),
                detail: e.to_string(),
            })
        }
        Some(e) => eprintln!(
            "memlens import: {}: stopped at a {e}; importing what precedes it",
            file.display()
        ),
        None if c.summary.samples == 0 => {
            return Err(ImportError::NoMemorySamples {
                path: file.to_path_buf(),
                skipped: c.summary.skipped,
                damaged: c.summary.losses.decode_errors,
            })
        }
        None => {}
    }

    let text = |bit| perf.string_feature(bit).unwrap_or_default();
    let (host, cpu, kernel) = (
        text(feature::HOSTNAME),
        text(feature::CPUDESC),
        text(feature::OSRELEASE),
    );
    let command = perf.cmdline();
    let access_period = if c.spe_seen { 0 } else { streamed.period };
    write(
        streamed,
        start,
        out,
        Meta {
            format_version: profile::FORMAT_VERSION,
            memlens_version: env!("CARGO_PKG_VERSION").to_string(),
            command,
            host,
            cpu,
            kernel,
            backend: Vec::new(),
            settings: profile::Settings {
                access_period,
                sample_loads: true,
                sample_stores: true,
                ..Default::default()
            },
            ..Default::default()
        },
    )
}

/// Writes the tables other than the samples, and meta.json; the samples'
/// times are relative to `start`.
fn write(
    streamed: Streamed,
    start: u64,
    out: &Path,
    mut meta: Meta,
) -> Result<Summary, ImportError> {
    let Streamed {
        converted: mut c,
        last_ns: end,
        code,
        ..
    } = streamed;
    // Symbolize only against files that are the ones recorded: a library of
    // the same path on this machine is usually another build. Each path is
    // checked once, however many processes mapped it, and only if a sample's
    // code lies in it (a system-wide recording maps every program that ran).
    let mut code: Vec<(u32, u64)> = code.into_iter().collect();
    code.sort_unstable();
    let paths: HashSet<&str> = c
        .modules
        .iter()
        .filter(|(pid, m)| {
            let first = code.partition_point(|&(p, pc)| (p, pc) < (*pid, m.start));
            code.get(first)
                .is_some_and(|&(p, pc)| p == *pid && pc < m.end)
        })
        .map(|(_, m)| m.path.as_str())
        .collect();
    let usable: HashSet<&str> = paths
        .into_iter()
        .filter(|p| {
            c.build_ids
                .get(*p)
                .is_some_and(|id| local_build_id_matches(p, id))
        })
        .collect();
    let mut modules_by_pid: HashMap<u32, Vec<LoadedModule>> = HashMap::new();
    let mut symbolizable_by_pid: HashMap<u32, Vec<LoadedModule>> = HashMap::new();
    for (pid, m) in &c.modules {
        if usable.contains(m.path.as_str()) {
            let module = m.read_module();
            modules_by_pid.entry(*pid).or_default().push(module.clone());
            symbolizable_by_pid.entry(*pid).or_default().push(module);
        } else {
            modules_by_pid
                .entry(*pid)
                .or_default()
                .push(m.unread_module());
        }
    }
    let mut symbolizer = Symbolizer::default();
    let mut locations = Vec::new();
    let pids: HashSet<u32> = code.iter().map(|&(pid, _)| pid).collect();
    for (pid, pc) in code {
        let mods = symbolizable_by_pid
            .get(&pid)
            .map_or(&[][..], |v| v.as_slice());
        let mut loc = symbolizer.location(pid, pc, mods, false);
        if loc.module == "?" || loc.module.is_empty() {
            // Not symbolizable here: name the mapping it fell in, at least.
            if let Some(m) = modules_by_pid
                .get(&pid)
                .and_then(|v| v.iter().rev().find(|m| pc >= m.start && pc < m.end))
            {
                loc.module = memlens_convert::symbols::short_name(&m.path);
                loc.function = format!("{}+{:#x}", loc.module, pc.wrapping_sub(m.bias));
            }
        }
        locations.push(loc);
    }
    profile::write_table::<CodeLocation>(out, &locations)?;
    let mut sampled_pids: Vec<u32> = pids.iter().copied().collect();
    sampled_pids.sort_unstable();
    let module_rows: Vec<Module> = (sampled_pids.iter())
        .flat_map(|pid| {
            modules_by_pid
                .get(pid)
                .into_iter()
                .flatten()
                .map(move |m| (pid, m))
        })
        .map(|(pid, m)| Module {
            pid: *pid,
            path: m.path.clone(),
            start: m.start,
            end: m.end,
            bias: m.bias,
            load_ns: 0,
        })
        .collect();
    profile::write_table(out, &module_rows)?;
    profile::write_table::<profile::Allocation>(out, &[])?;
    profile::write_table::<profile::HeapSite>(out, &[])?;
    profile::write_table::<profile::SiteLivePoint>(out, &[])?;
    profile::write_table::<profile::Frame>(out, &[])?;
    profile::write_table::<profile::Region>(out, &[])?;
    profile::write_table::<profile::ThreadRow>(out, &[])?;
    profile::write_table::<profile::TagRange>(out, &[])?;
    profile::write_table::<profile::TimelinePoint>(out, &[])?;
    profile::write_table::<profile::ThreadTrafficPoint>(out, &[])?;
    profile::write_table::<profile::StaticObject>(out, &[])?;
    profile::write_table::<profile::CounterReading>(out, &[])?;

    let mut backends: Vec<String> = c.backends().iter().map(|b| b.name().into()).collect();
    backends.push(Backend::PerfDataImport.name().into());
    meta.backend = backends.clone();
    meta.clock = profile::Clock {
        source: "perf timestamps of the imported file".into(),
        start_ns: start,
        duration_ns: end,
        // perf.data's header dates the file, not its first sample.
        realtime_start_ns: None,
    };
    meta.processes = sampled_pids
        .into_iter()
        .map(|pid| Process {
            pid,
            exe: c.comms.get(&pid).cloned().unwrap_or_default(),
            start_ns: 0,
            end_ns: Some(end),
            ..Default::default()
        })
        .collect();
    meta.losses = c.summary.losses.clone();
    meta.write(out)?;
    c.summary.backends = backends;
    Ok(c.summary)
}

/// Whether the local file at `path` has the build ID the recording noted for it.
fn local_build_id_matches(path: &str, recorded: &[u8]) -> bool {
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    // Mapped: the note is near the start, and reading whole libraries to find
    // it took half of an import's symbolization time.
    // SAFETY: read-only map, dropped before this returns.
    let Ok(bytes) = (unsafe { memmap2::Mmap::map(&file) }) else {
        return false;
    };
    use object::Object;
    object::File::parse(&*bytes)
        .ok()
        .and_then(|f| f.build_id().ok().flatten().map(|id| id.to_vec()))
        .is_some_and(|id| !id.is_empty() && recorded.starts_with(&id))
}

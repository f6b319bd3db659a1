//! `memlens record`: its arguments, the run, and the summary it prints.

use crate::{default_shown, parse_size, progress, runtime};
use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, ValueEnum};
use memlens_collector::perf::backends::Kind;
use memlens_collector::SamplerChoice;
use memlens_profile::Profile;
use memlens_rawlog::RuntimeSettings;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

#[derive(Args)]
pub(crate) struct RecordArgs {
    /// Profile directory (default: memlens.<program>.<pid>; under MPI, rank=<N> inside -o).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Remove the data of an earlier run in that directory (a profile, or the
    /// raw logs of an interrupted record) instead of moving it to <DIR>.old.
    #[arg(long)]
    force: bool,
    /// Capacity sampling interval in milliseconds.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    interval: u64,
    /// Record every heap block of at least this many bytes with its call stack.
    #[arg(long, value_name = "BYTES", help = default_shown(
        "Record every heap block of at least this many bytes with its call stack",
        RuntimeSettings::DEFAULT.min_size))]
    min_size: Option<u64>,
    /// Sample smaller blocks: one per this many bytes allocated on average (0: none, 1: all).
    #[arg(long, value_name = "BYTES", help = default_shown(
        "Sample smaller blocks: one per this many bytes allocated on average (0: none, 1: all; a program built with memlens cc records all unless --min-size is given)",
        RuntimeSettings::DEFAULT.sample_rate))]
    sample_rate: Option<u64>,
    /// Exact leak hunting, as heaptrack or valgrind do it: every block recorded
    /// with its call stack (--sample-rate 1); the report lists leaks by site
    /// with exact blocks and bytes.
    #[arg(long, conflicts_with = "sample_rate")]
    leaks: bool,
    /// With every block recorded, also write a row for each small freed block
    /// (the `sites` table sums them all; rows cost disk and reading time).
    #[arg(long)]
    keep_blocks: bool,
    /// Call-stack unwinder for recorded blocks.
    #[arg(long, value_enum, help = default_shown(
        "Call-stack unwinder for recorded blocks",
        memlens_rawlog::unwinder::NAMES[RuntimeSettings::DEFAULT.unwinder as usize]))]
    unwind: Option<Unwinder>,
    /// Deepest call stack kept.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=128), help = default_shown(
        "Deepest call stack kept", RuntimeSettings::DEFAULT.max_frames))]
    max_frames: Option<u32>,
    /// Where access samples come from: auto picks the instrumented build's own
    /// samples, else the best hardware sampler (PEBS, IBS, SPE), else none.
    #[arg(long, value_enum, default_value_t = BackendArg::Auto)]
    backend: BackendArg,
    /// One access sample per this many accesses of a class (instrumented),
    /// sampled operations (PEBS, IBS, SPE) or page faults.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..), help = default_shown(
        "One access sample per this many accesses of a class (instrumented), sampled operations (PEBS, IBS, SPE) or page faults; hardware backends have their own default (docs/hardware.md)",
        RuntimeSettings::DEFAULT.access_period))]
    period: Option<u64>,
    /// PEBS load-latency threshold / SPE minimum latency, in cycles.
    #[arg(long, value_name = "CYCLES", default_value_t = 0)]
    min_latency: u64,
    /// SPE: AUX area per CPU, KiB (rounded up to a power-of-two number of pages).
    #[arg(long, value_name = "KIB", default_value_t = 1024)]
    aux_size: u64,
    /// SPE: bytes of new AUX data that wake memlens (default: half the area).
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    aux_watermark: u32,
    /// Run a model of the cache hierarchy on every instrumented access and give
    /// each sample the level it served (modelled): the levels sysfs describes,
    /// or SPEC as "size/ways/line" per level, smallest first (48K/12/64,2M/16/64).
    /// Every access then takes the runtime's slow path.
    #[arg(long, value_name = "SPEC", num_args = 0..=1, default_missing_value = "sysfs", value_parser = parse_cache_spec)]
    cache_model: Option<String>,
    /// Show resident set, live heap, exact bandwidth and the allocation sites
    /// holding the most live memory on stderr while the program runs (redrawn
    /// on a terminal, appended otherwise).
    #[arg(long)]
    live: bool,
    /// Sample for reuse distance: every access to one cache line in N (lines
    /// chosen by address hash) instead of one access in N; N = 1 keeps every
    /// access (exact). Every access then takes the runtime's slow path.
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "1",
          conflicts_with = "period", value_parser = clap::value_parser!(u64).range(1..))]
    reuse: Option<u64>,
    /// Sample stores only (instrumented builds still count loads exactly).
    #[arg(long)]
    no_loads: bool,
    /// Sample loads only (instrumented builds still count stores exactly).
    #[arg(long)]
    no_stores: bool,
    /// Keep the raw event logs next to the tables.
    #[arg(long)]
    keep_raw: bool,
    /// Record a process that is already running, from now on, without
    /// restarting it: its resident memory, mappings, static variables and
    /// page-fault (or hardware) samples; not its heap blocks, regions or exit
    /// status (docs/recording.md). Ctrl-C stops recording; the process runs on.
    #[arg(long, value_name = "PID", conflicts_with_all = ["command", "live", "leaks", "cache_model", "reuse"])]
    pid: Option<u32>,
    /// With --pid: stop recording after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    duration: Option<f64>,
    /// The program and its arguments (after `--`, or after memlens' own
    /// options: everything from the program on is the program's).
    #[arg(
        trailing_var_arg = true,
        required_unless_present = "pid",
        value_name = "COMMAND"
    )]
    command: Vec<OsString>,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum BackendArg {
    Auto,
    /// The instrumented build's samples only (memlens cc).
    Software,
    /// Intel PEBS load latency and precise stores.
    Pebs,
    /// AMD IBS op sampling.
    Ibs,
    /// Arm SPE.
    Spe,
    /// The kernel's page-fault event with data addresses (first touches; any machine).
    PageFaults,
}

/// `--unwind`: its values are rawlog's `unwinder::OPTIONS`, which the
/// runtime reads (test `each_unwind_option_reaches_the_runtime`).
#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum Unwinder {
    /// Frame pointers, validated against the thread's stack (fast).
    Fp,
    /// DWARF call-frame information, each return address's rule cached (complete).
    Dwarf,
    /// DWARF through libgcc's unwinder alone (complete, slower): to compare with,
    /// or if the cached rules misread a program.
    Libgcc,
    /// No call stacks.
    None,
}

/// `--cache-model`'s levels, checked, as the runtime reads them: "sysfs"
/// becomes this machine's data and unified caches.
pub(crate) fn parse_cache_spec(text: &str) -> std::result::Result<String, String> {
    let spec = if text == "sysfs" {
        memlens_collector::sysinfo::cache_levels()
            .iter()
            .map(|c| format!("{}/{}/{}", c.size, c.ways, c.line))
            .collect::<Vec<_>>()
            .join(",")
    } else {
        text.to_string()
    };
    let levels: Vec<&str> = spec.split(',').filter(|l| !l.is_empty()).collect();
    let valid = |level: &str| {
        let parts: Vec<&str> = level.split('/').collect();
        parts.len() == 3
            && parse_size(parts[0]).is_ok()
            && parts[1].parse::<u32>().is_ok_and(|w| w > 0)
            && parts[2].parse::<u32>().is_ok_and(|l| l.is_power_of_two())
    };
    if levels.is_empty() || levels.len() > 4 || !levels.iter().all(|l| valid(l)) {
        return Err(format!(
            "{text:?}: give one to four levels as size/ways/line, smallest first, e.g. 48K/12/64,2M/16/64,32M/16/64 (or no value: the caches sysfs lists)"
        ));
    }
    Ok(levels.join(","))
}

pub(crate) fn mpi_rank() -> Option<u32> {
    [
        "OMPI_COMM_WORLD_RANK",
        "PMIX_RANK",
        "PMI_RANK",
        "SLURM_PROCID",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok()?.parse().ok())
}

pub(crate) fn record(args: RecordArgs) -> Result<i32> {
    let program = match args.pid {
        Some(pid) => Some(format!("pid{pid}")),
        None => args.command.first().map(|c| {
            Path::new(c)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default()
        }),
    };
    let duration = match (args.duration, args.pid) {
        (Some(_), None) => bail!(
            "--duration stops recording a process memlens attached to (--pid); a program memlens starts is recorded until it ends"
        ),
        (Some(d), _) => Some(std::time::Duration::try_from_secs_f64(d).map_err(|_| {
            anyhow!("--duration: give a number of seconds above 0 (at most about 10^19)")
        })?)
        .filter(|d| !d.is_zero())
        .ok_or_else(|| anyhow!("--duration: give a number of seconds above 0"))
        .map(Some)?,
        (None, _) => None,
    };
    let out_dir = match (args.output, mpi_rank()) {
        // Hive-style partition directories: Parquet engines (Spark, DuckDB,
        // Trino, pyarrow) read the job as one dataset with a rank column.
        (Some(dir), Some(rank)) => dir.join(format!("rank={rank}")),
        (Some(dir), None) => dir,
        (None, rank) => {
            let suffix = rank.map(|r| format!(".rank{r}")).unwrap_or_default();
            PathBuf::from(format!(
                "memlens.{}.{}{suffix}",
                program.unwrap_or_default(),
                std::process::id()
            ))
        }
    };
    let cfg = memlens_collector::RecordConfig {
        command: args.command,
        out_dir,
        runtime: runtime::path()?,
        interval_ms: args.interval,
        min_size: args.min_size,
        sample_rate: args.sample_rate.or(args.leaks.then_some(1)),
        keep_blocks: args.keep_blocks,
        unwinder: (args.unwind)
            .and_then(|u| u.to_possible_value())
            .map(|v| v.get_name().to_string()),
        max_frames: args.max_frames,
        period: args.period.or(args.reuse),
        sample_lines: args.reuse.is_some(),
        live: args
            .live
            .then_some(memlens_present::render_live as memlens_collector::RenderLive),
        no_loads: args.no_loads,
        no_stores: args.no_stores,
        keep_raw: args.keep_raw,
        backend: match args.backend {
            BackendArg::Auto => SamplerChoice::Auto,
            BackendArg::Software => SamplerChoice::Software,
            BackendArg::Pebs => SamplerChoice::Perf(Kind::Pebs),
            BackendArg::Ibs => SamplerChoice::Perf(Kind::Ibs),
            BackendArg::Spe => SamplerChoice::Perf(Kind::Spe),
            BackendArg::PageFaults => SamplerChoice::Perf(Kind::PageFaults),
        },
        min_latency: args.min_latency,
        aux_kib: args.aux_size,
        aux_watermark: args.aux_watermark,
        cache_model: args.cache_model,
        force: args.force,
        attach: args.pid,
        duration,
    };
    let mut outcome =
        memlens_collector::record(&cfg).map_err(|e| removed_during_the_run(&cfg.out_dir, e))?;
    let live_samples = outcome.live_samples.take();
    let ahead = outcome.replay_ahead.take();
    progress::bar("writing the profile", |progress| {
        let (dir, run) = (&outcome.dir, &outcome.run);
        memlens_collector::finalize(dir, run, live_samples, ahead, progress)
    })
    .map_err(|e| removed_during_the_run(&cfg.out_dir, e))?;
    // The raw logs go while the summary is read and printed (a directory's
    // removal can wait on the disk: a synchronous discard, 1.4 ms on an ext4
    // mounted with `discard`).
    let removal = (!cfg.keep_raw).then(|| {
        let dir = outcome.dir.clone();
        std::thread::spawn(move || memlens_profile::remove_raw_files(&dir))
    });
    let summary = print_summary(&outcome, &cfg);
    let removed = removal.map(|r| {
        r.join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    });
    summary?;
    removed.transpose()?;
    Ok(outcome.exit.shell_status())
}

/// What `record` tells when its profile is written: the run, its peaks,
/// its top object, what it recorded and lost.
pub(crate) fn print_summary(
    outcome: &memlens_collector::RecordOutcome,
    cfg: &memlens_collector::RecordConfig,
) -> Result<()> {
    // The summary needs no samples: do not read back what may be millions of them.
    let p = Profile::load_for_summary(&outcome.dir).context("reading the profile just written")?;
    // The summary's own figures, not a whole report's (a report computes
    // the data objects twice, and every section).
    let peak = memlens_analysis::peak(&p);
    let top = memlens_analysis::objects_by_peak(&p, &memlens_analysis::data_objects(&p), 1);
    // Names from the program are escaped by the renderer, not here.
    let command = p.meta.command.join(" ");
    let duration = memlens_present::seconds(p.meta.clock.duration_ns);
    let processes = match p.meta.processes.len() {
        1 => "1 process".to_string(),
        n => format!("{n} processes"),
    };
    let lost = p.meta.losses.total();
    let h = memlens_present::human_bytes;
    let mut rows = Vec::new();
    let mut row = |key: &str, value: String| rows.push((key.to_string(), value));
    match outcome.exit {
        memlens_collector::TargetExit::Attached { ended } => row(
            "attached",
            format!(
                "{command} (process {}) for {duration}; {}",
                cfg.attach.unwrap_or_default(),
                if ended {
                    "it ended (its exit status went to its parent)"
                } else {
                    "it runs on"
                }
            ),
        ),
        memlens_collector::TargetExit::Code(c) => row(
            "program",
            format!("{command} exited with {c} after {duration} ({processes})"),
        ),
        memlens_collector::TargetExit::Signal(s) => row(
            "program",
            format!("{command} was killed by signal {s} after {duration} ({processes})"),
        ),
    }
    let heap = if peak.heap_measured {
        format!(
            "{} live heap at {}",
            h(peak.heap_bytes as f64),
            memlens_present::seconds(peak.heap_time_ns)
        )
    } else {
        "heap not measured".into()
    };
    row(
        "peak",
        format!("{} resident, {heap}", h(peak.rss_bytes as f64)),
    );
    row(
        "top object",
        match top.first() {
            Some(o) => format!("{} ({} peak)", o.name, memlens_present::object_peak(o)),
            None => "none recorded".into(),
        },
    );
    let sources = memlens_analysis::sample_sources(&p.meta);
    let access = if !sources.is_empty() {
        let n = memlens_profile::table_rows::<memlens_profile::AccessSample>(&outcome.dir)?;
        format!(
            "{n} access samples ({}, 1 per {} {})",
            memlens_profile::Backend::list(&sources),
            p.meta.settings.access_period,
            memlens_analysis::period_unit(&sources)
        )
    } else {
        "no access samples (build with `memlens cc`, or see `memlens doctor` for hardware samplers)"
            .to_string()
    };
    let blocks = if cfg.attach.is_some() {
        format!("{} mappings", p.allocations.len())
    } else if p.meta.settings.sample_rate == 1 {
        let all: f64 = p.sites.iter().map(|s| s.allocations).sum();
        format!("every block ({all:.0}, in {} sites)", p.sites.len())
    } else {
        format!("{} blocks with events", p.allocations.len())
    };
    row(
        "recorded",
        format!(
            "{blocks}, {access}, {} timeline samples, {lost} lost",
            p.timeline.len()
        ),
    );
    row("next", format!("memlens report {}", outcome.dir.display()));
    eprintln!(
        "memlens: profile written to {}",
        memlens_present::printable(&outcome.dir.to_string_lossy())
    );
    eprint!("{}", memlens_present::render_key_values(rows));
    Ok(())
}

/// A transparent-mode directory has raw/ logs but no tables yet.
/// A run whose profile directory went away under it (the program removed its
/// working directory) is told as such, not as the I/O error that followed.
pub(crate) fn removed_during_the_run(dir: &Path, e: memlens_collector::Error) -> anyhow::Error {
    use memlens_collector::Error::{Io, Profile};
    use memlens_profile::ProfileError::CreateDir;
    // An I/O error once the directory was made, not the failure to make it.
    let after_it_was_made =
        matches!(e, Io { .. } | Profile(_)) && !matches!(e, Profile(CreateDir { .. }));
    if !after_it_was_made || dir.exists() {
        return e.into();
    }
    anyhow::anyhow!(
        "{}: the profile directory was removed while the program ran (by the program, or another process), and the run with it; record into a directory the program leaves alone (-o)",
        dir.display()
    )
}

//! `memlens report` and `memlens plot`: their arguments, a job's report,
//! regions timed by plain runs.

use crate::profile_dir::{load_parts, profile_parts};
use crate::sql::Weight;
use crate::{job, mpi, progress};
use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use memlens_present::{Measure, PlotData};
use memlens_profile::Profile;
use std::path::{Path, PathBuf};

#[derive(Args)]
pub(crate) struct ReportArgs {
    /// Profile directory, or a directory of profiles (MPI ranks) to read together.
    #[arg(required_unless_present = "schema")]
    dir: Option<PathBuf>,
    /// Print the JSON Schema of `--format json` (docs/report.schema.json) and exit.
    #[arg(long, conflicts_with = "dir")]
    schema: bool,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    #[arg(long, default_value = "objects", help = table_help())]
    table: String,
    /// Rows per top-N table.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// Also write the report as one self-contained HTML page (figures inline,
    /// nothing fetched).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// The --html page without the text of the sampled source files (their
    /// lines' numbers and figures only): for a page sent where the code may
    /// not go.
    #[arg(long, requires = "html")]
    html_without_source: bool,
    /// Only this process: its samples, regions, objects and timeline.
    #[arg(long, value_name = "PID", conflicts_with = "thread")]
    pid: Option<u32>,
    /// A job (MPI ranks): this rank's whole report instead of the job's
    /// view across ranks.
    #[arg(long, value_name = "N", conflicts_with_all = ["pid", "thread"])]
    rank: Option<u32>,
    /// A job: each rank's own value under every figure across ranks (and,
    /// in JSON, each rank's capacity series).
    #[arg(long)]
    per_rank: bool,
    /// A job, read as an MPI job itself (`mpirun -n K memlens report JOB
    /// --reduce`): each process reads its share of the ranks, their
    /// aggregates are gathered over MPI, and process 0 writes the report.
    #[arg(long, conflicts_with_all = ["rank", "pid", "thread"])]
    reduce: bool,
    /// Only this thread: its samples, regions and exact counts (capacity
    /// figures stay its process's).
    #[arg(long, value_name = "TID")]
    thread: Option<u32>,
    /// Fold this region's instances onto one (default: the region repeated
    /// most, when one repeats 8 or more times).
    #[arg(long, value_name = "REGION", conflicts_with = "fold_detect")]
    fold: Option<String>,
    /// Fold by the period found in the busiest thread's samples, for loops
    /// nobody annotated.
    #[arg(long)]
    fold_detect: bool,
    /// Phase bins of the folded region.
    #[arg(long, value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=1000))]
    fold_bins: u64,
    /// Show this many frames of each listed object's call stack under it
    /// (JSON always lists them all; the --html page too, under each row
    /// until it is clicked).
    #[arg(long, value_name = "N", default_value_t = 0)]
    stacks: usize,
    /// A profile of the same program built without `memlens cc` (recorded
    /// with `memlens record`, which times its regions and counts nothing):
    /// each region's exact bytes from this profile over its time there, the
    /// bandwidth without memlens' instrumentation. Repeat for several runs:
    /// each region's median time.
    #[arg(long, value_name = "PROFILE")]
    timed_by: Vec<PathBuf>,
    /// Functions that allocate for their callers, beyond libc/libstdc++,
    /// CPython's and Rust's allocation layers: a frame whose function
    /// matches the glob PATTERN, whole or by its base name (`Alloc` for
    /// `double* Alloc<double>(unsigned long)`), is never a site (repeat, or
    /// separate with commas).
    #[arg(long, value_name = "PATTERN", value_delimiter = ',')]
    skip_frames: Vec<String>,
}

/// `--table`'s help, naming the data tables `memlens_present::CSV_TABLES` holds.
fn table_help() -> String {
    let data: Vec<&str> = memlens_present::CSV_TABLES
        .iter()
        .map(|(n, _)| *n)
        .collect();
    format!(
        "With --format csv: which table: one of the data ({}), exact numbers; or a section's table as the text report draws it (peak/peak, access/memory-levels, ...: a wrong name lists them)",
        data.join(", ")
    )
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum Format {
    Text,
    Json,
    Csv,
}

#[derive(Subcommand)]
pub(crate) enum PlotKind {
    /// Resident set and live heap over time, top objects stacked, regions
    /// shaded; for a job (MPI ranks), their band across the ranks.
    Capacity {
        dir: PathBuf,
        /// Output image: .png or .svg.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Sampled address against time, one band per data object (instrumented builds).
    Scatter {
        dir: PathBuf,
        /// Output image: .png or .svg.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Bandwidth over time: exact read/write bytes (instrumented builds) and
    /// memory-traffic counters.
    Bandwidth {
        dir: PathBuf,
        /// Output image: .png or .svg.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// A job's ranks (rows) over time (columns), coloured by resident set
    /// (or live heap with --heap).
    Ranks {
        dir: PathBuf,
        /// Output image: .png or .svg.
        #[arg(short, long)]
        output: PathBuf,
        #[arg(long)]
        heap: bool,
    },
    /// Counting perf events over time (CPU time, page faults, instructions,
    /// memory traffic), one panel each, regions shaded.
    Counters {
        dir: PathBuf,
        /// Output image: .png or .svg.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Flame graph (SVG) of bytes allocated by call stack (or another
    /// allocation measure: --weight), or with --accesses of sampled
    /// accesses by object (under its allocation stack) and code.
    Flame {
        dir: PathBuf,
        /// Output image: .svg.
        #[arg(short, long)]
        output: PathBuf,
        /// What the stacks weigh (samples and accesses: the access flame).
        #[arg(long, value_enum, default_value_t = Weight::AllocSpace, conflicts_with = "accesses")]
        weight: Weight,
        /// The same as --weight accesses.
        #[arg(long)]
        accesses: bool,
        /// With --accesses: the load samples under the memory level that
        /// served each (hardware samples or --cache-model).
        #[arg(long, requires = "accesses")]
        by_level: bool,
    },
    /// A repeated region's instances folded onto one: sampled address and
    /// access rate against the phase of the instance.
    Fold {
        dir: PathBuf,
        /// Output image: .png or .svg.
        #[arg(short, long)]
        output: PathBuf,
        /// The region (default: the most repeated one).
        #[arg(long, conflicts_with = "detect")]
        region: Option<String>,
        /// No region: fold by the period found in the samples.
        #[arg(long)]
        detect: bool,
        /// Phase bins of the rate.
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=1000))]
        bins: u64,
    },
}

pub(crate) fn not_a_job(dir: &Path) -> anyhow::Error {
    anyhow!(
        "{}: not a job of MPI ranks (plot ranks draws a job's)",
        dir.display()
    )
}

/// One profile's plot of `kind`.
pub(crate) fn plot(kind: &PlotKind, p: &Profile, output: &Path) -> Result<()> {
    match kind {
        PlotKind::Capacity { .. } => memlens_present::plot_capacity(&PlotData::new(p), output)?,
        PlotKind::Scatter { .. } => memlens_present::plot_scatter(&PlotData::new(p), output)?,
        PlotKind::Bandwidth { .. } => memlens_present::plot_bandwidth(p, output)?,
        PlotKind::Counters { .. } => memlens_present::plot_counters(p, output)?,
        PlotKind::Flame {
            weight,
            accesses,
            by_level,
            ..
        } => {
            let what = match (accesses, by_level) {
                (true, true) => memlens_present::Flame::LoadsByLevel,
                (true, false) => memlens_present::Flame::Weighed(Measure::Accesses),
                (false, _) => memlens_present::Flame::Weighed(Measure::from(*weight)),
            };
            memlens_present::plot_flame(&PlotData::new(p), what, output)?
        }
        PlotKind::Fold {
            region,
            detect,
            bins,
            ..
        } => {
            let by = memlens_analysis::FoldBy::new(region.as_deref(), *detect);
            memlens_present::plot_fold(&PlotData::new(p), by, *bins as usize, output)?
        }
        PlotKind::Ranks { dir, .. } => return Err(not_a_job(dir)),
    }
    Ok(())
}

/// `memlens report JOB`: the job's view across its ranks.
pub(crate) fn job_report(dir: &Path, job: &job::Job, args: &ReportArgs) -> Result<i32> {
    let mut j = if args.reduce {
        let mpi = mpi::Mpi::init()?;
        let mine = job.summarize(|part| part % mpi.size == mpi.rank)?;
        let Some(all) = mpi.gather(&serde_json::to_vec(&mine)?)? else {
            return Ok(0); // process 0 writes the report
        };
        let mut summaries = Vec::new();
        for bytes in all {
            summaries.extend(serde_json::from_slice::<Vec<memlens_analysis::RankSummary>>(&bytes)?);
        }
        job.assemble(dir, summaries, args.per_rank, args.top)
    } else {
        progress::step(&format!("reading the ranks of {}", dir.display()), || {
            job.report(dir, args.per_rank, args.top)
        })?
    };
    if let Some(path) = &args.html {
        // Under --reduce each process read its share of the ranks: no one
        // process has them all to draw.
        let folder = match args.reduce {
            true => None,
            false => {
                let ranks: Vec<u32> = j.job.ranks.iter().map(|r| r.rank).collect();
                let folder = progress::step(
                    &format!("writing the pages of {} ranks", ranks.len()),
                    || write_rank_pages(dir, job, &ranks, args, path),
                )?;
                Some(folder)
            }
        };
        let page = memlens_present::render_job_html(&j, folder.as_deref());
        memlens_profile::write_private_file(path, page.as_bytes())?;
        match &folder {
            Some(f) => eprintln!(
                "memlens: wrote {} and each rank's page in {f}",
                path.display()
            ),
            None => eprintln!("memlens: wrote {}", path.display()),
        }
    }
    // Each rank's series are data for a plot: listed with --per-rank only.
    if !args.per_rank {
        j.job.rss_by_rank.clear();
        j.job.heap_by_rank.clear();
    }
    let value = || memlens_present::job_value(&j);
    match args.format {
        Format::Text => print!("{}", memlens_present::render_job_text(&j)),
        Format::Json => println!("{}", serde_json::to_string_pretty(&value()?)?),
        Format::Csv => print!(
            "{}",
            memlens_present::report_csv(&value()?, &args.table).map_err(anyhow::Error::msg)?
        ),
    }
    Ok(0)
}

/// One rank's profile: its parts, only its first process when it shares
/// its directory with other ranks.
fn rank_profile(dir: &Path, job: &job::Job, rank: u32) -> Result<Profile> {
    let (rank_parts, pids) = job.rank(rank)?;
    let shared = rank_parts.len() == 1
        && memlens_profile::Meta::read(&rank_parts[0])?.processes.len() > pids.len();
    let mut p = progress::step(&format!("reading rank {rank}"), || {
        load_parts(dir, &rank_parts)
    })?;
    if shared {
        (p.restrict(memlens_profile::Only::Process(pids[0]))).map_err(anyhow::Error::msg)?;
    }
    Ok(p)
}

/// The report of one profile (restricted first to `args`' process or
/// thread, when given) as `args` asks for it.
fn analyse(p: &mut Profile, args: &ReportArgs) -> Result<memlens_present::Report> {
    p.skip_frames =
        memlens_profile::SkipFrames::new(&args.skip_frames).map_err(anyhow::Error::msg)?;
    let options = memlens_present::ReportOptions {
        top: args.top,
        stacks: args.stacks,
        fold: args.fold.clone(),
        fold_detect: args.fold_detect,
        fold_bins: args.fold_bins as usize,
    };
    Ok(progress::step(
        &format!(
            "analysing {} samples, {} allocation sites",
            p.samples.len(),
            p.sites.len()
        ),
        || memlens_present::build_report(p, &options),
    ))
}

/// One profile's report as an HTML page at `path`.
fn write_html(
    p: &Profile,
    r: &mut memlens_present::Report,
    args: &ReportArgs,
    path: &Path,
) -> Result<()> {
    // The page has every frame of each object's stack, under its row
    // until the row is clicked.
    let shown = std::mem::replace(&mut r.stacks_shown, usize::MAX);
    let text = match args.html_without_source {
        true => memlens_present::SourceText::Left,
        false => memlens_present::SourceText::Embedded,
    };
    let page = memlens_present::render_html(p, r, text);
    r.stacks_shown = shown;
    memlens_profile::write_private_file(path, page.as_bytes())?;
    Ok(())
}

/// `report JOB --html FILE`: beside the job's page, each rank's own page in
/// FILE's name with `.ranks` (job.html: job.ranks/rank-N.html), which the
/// job's page links to; the folder's name relative to the job's page.
fn write_rank_pages(
    dir: &Path,
    job: &job::Job,
    ranks: &[u32],
    args: &ReportArgs,
    path: &Path,
) -> Result<String> {
    let folder_name = format!(
        "{}.ranks",
        path.file_stem().unwrap_or_default().to_string_lossy()
    );
    let folder = path.with_file_name(&folder_name);
    std::fs::create_dir_all(&folder)
        .with_context(|| format!("creating {} for the ranks' pages", folder.display()))?;
    for &rank in ranks {
        let mut p = rank_profile(dir, job, rank)?;
        let mut r = analyse(&mut p, args)?;
        write_html(
            &p,
            &mut r,
            args,
            &folder.join(memlens_present::rank_page(rank)),
        )?;
    }
    Ok(folder_name)
}

/// `report --timed-by`: the regions timed by runs of the uninstrumented
/// build.
pub(crate) fn time_by_plain_runs(r: &mut memlens_present::Report, plain: &[PathBuf]) -> Result<()> {
    if r.access.regions.is_empty() {
        bail!("--timed-by: this profile has no regions to time");
    }
    let mut runs = Vec::new();
    for dir in plain {
        let context = || format!("--timed-by {}", dir.display());
        memlens_profile::Meta::read(dir).with_context(context)?;
        let regions: Vec<memlens_profile::Region> =
            memlens_profile::read_table(dir).with_context(context)?;
        if regions.is_empty() {
            bail!(
                "{}: the profile has no regions: record the program built without `memlens cc` (its memlens_region_begin/end marks are timed under `memlens record`)",
                context()
            );
        }
        if regions.iter().any(|r| r.bytes_read.is_some()) {
            bail!(
                "{}: that run counted accesses (a `memlens cc` build), so its times include memlens' costs: record the program built with plain clang or gcc",
                context()
            );
        }
        runs.push((dir.display().to_string(), regions));
    }
    memlens_analysis::time_by_plain_runs(&mut r.access, &runs);
    Ok(())
}

pub(crate) fn report(args: ReportArgs) -> Result<i32> {
    let Some(dir) = args.dir.clone() else {
        println!(
            "{}",
            serde_json::to_string_pretty(&memlens_present::report_schema())?
        );
        return Ok(0);
    };
    let parts = profile_parts(&dir)?;
    let job = job::Job::of(&parts)?;
    let only = match (args.pid, args.thread) {
        (Some(pid), _) => Some(memlens_profile::Only::Process(pid)),
        (_, Some(tid)) => Some(memlens_profile::Only::Thread(tid)),
        _ => None,
    };
    if job.is_some() && args.rank.is_none() && only.is_none() && !args.timed_by.is_empty() {
        bail!("--timed-by times one profile's regions, not a job's: add --rank N");
    }
    let mut p = match (&job, args.rank) {
        (Some(job), None) if only.is_none() => return job_report(&dir, job, &args),
        (None, _) if args.reduce => bail!(
            "--reduce reads a job of MPI ranks: {} is one profile",
            dir.display()
        ),
        (Some(job), Some(rank)) => rank_profile(&dir, job, rank)?,
        (None, Some(_)) => bail!("--rank: {} is not a job of MPI ranks", dir.display()),
        _ => progress::step(&format!("reading {}", dir.display()), || {
            load_parts(&dir, &parts)
        })?,
    };
    if let Some(only) = only {
        p.restrict(only).map_err(anyhow::Error::msg)?;
    }
    let mut r = analyse(&mut p, &args)?;
    if let (true, Some(why)) = (args.fold.is_some() || args.fold_detect, &r.folding.why_not) {
        anyhow::bail!("cannot fold: {why}");
    }
    if !args.timed_by.is_empty() {
        time_by_plain_runs(&mut r, &args.timed_by)?;
    }
    if let Some(path) = &args.html {
        write_html(&p, &mut r, &args, path)?;
        eprintln!("memlens: wrote {}", path.display());
    }
    match args.format {
        Format::Text => print!("{}", memlens_present::render_text(&r)),
        Format::Json => println!("{}", memlens_present::render_json(&r)?),
        Format::Csv => print!(
            "{}",
            memlens_present::report_csv(&memlens_present::report_value(&r)?, &args.table)
                .map_err(anyhow::Error::msg)?
        ),
    }
    Ok(0)
}

//! `memlens sql` and `memlens export`: the profile's tables through the
//! embedded SQL engine, to the terminal or to CSV, JSON and Parquet files;
//! its stacks as collapsed stacks, speedscope, pprof or Firefox Profiler
//! files.

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use memlens_present::{Measure, Stacks};
use memlens_profile::Table as _;
use memlens_sql::{Engine, Format};
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Args)]
pub struct SqlArgs {
    /// Profile directory (or a directory of MPI ranks' profiles: their rows together).
    dir: PathBuf,
    /// One SQL statement (DataFusion's dialect), e.g.
    /// "SELECT kind, sum(size) FROM allocations GROUP BY kind".
    query: String,
    #[arg(long, value_enum, default_value_t = SqlFormat::Table)]
    format: SqlFormat,
    /// Rows shown in a table (0: all); CSV and JSON print every row.
    #[arg(long, default_value_t = 100)]
    max_rows: usize,
    #[command(flatten)]
    limit: MemoryLimit,
}

/// The memory a query may take.
#[derive(Args)]
pub struct MemoryLimit {
    /// Memory a query may take (joins, sorts, aggregates), e.g. 2G
    /// [default: a quarter of the machine's]; past it the query is refused.
    #[arg(long, value_name = "SIZE", value_parser = crate::parse_size)]
    memory_limit: Option<u64>,
}

impl MemoryLimit {
    fn bytes(&self) -> u64 {
        self.memory_limit
            .unwrap_or_else(memlens_sql::default_memory_limit)
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum SqlFormat {
    Table,
    Csv,
    Json,
}

#[derive(Args)]
pub struct ExportArgs {
    /// Profile directory (or a directory of MPI ranks' profiles).
    dir: PathBuf,
    #[arg(long, value_enum, default_value_t = ExportFormat::Csv)]
    format: ExportFormat,
    /// A table to write (repeat for several) [default: every table the profile has].
    #[arg(long, value_name = "NAME", conflicts_with = "sql")]
    table: Vec<String>,
    /// Write the result of this SQL statement instead of tables.
    #[arg(long, value_name = "QUERY")]
    sql: Option<String>,
    /// Output: a file for one table or a query [default: standard output],
    /// a directory for several tables (one file each).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// What the stacks of `collapsed` and `speedscope` weigh, and `pprof`'s
    /// default sample type (`firefox` writes every measure).
    #[arg(long, value_enum, default_value_t = Weight::AllocSpace)]
    weight: Weight,
    #[command(flatten)]
    limit: MemoryLimit,
}

/// The measures a stack export or flame graph can weigh
/// (`memlens_present::Measure`).
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Weight {
    /// Heap blocks and mappings allocated.
    AllocObjects,
    /// Bytes allocated.
    AllocSpace,
    /// Bytes live at the heap's peak.
    InuseSpace,
    /// Heap blocks live at exit.
    LeakedObjects,
    /// Heap bytes live at exit.
    LeakedSpace,
    /// Heap blocks freed by the next heap event after their allocation
    /// (heaptrack's temporary allocations; `record --leaks` profiles).
    TemporaryObjects,
    /// Access samples (instrumented or hardware-sampled runs).
    Samples,
    /// Estimated accesses: samples times the sampling period.
    Accesses,
}

impl From<Weight> for Measure {
    fn from(w: Weight) -> Measure {
        match w {
            Weight::AllocObjects => Measure::AllocObjects,
            Weight::AllocSpace => Measure::AllocSpace,
            Weight::InuseSpace => Measure::InuseSpace,
            Weight::LeakedObjects => Measure::LeakedObjects,
            Weight::LeakedSpace => Measure::LeakedSpace,
            Weight::TemporaryObjects => Measure::TemporaryObjects,
            Weight::Samples => Measure::AccessSamples,
            Weight::Accesses => Measure::Accesses,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ExportFormat {
    Csv,
    Json,
    Parquet,
    /// Arm spe-parser's load/store CSV columns, of the samples.
    SpeParser,
    /// Collapsed stacks (flamegraph.pl, inferno): `root;...;leaf weight`.
    Collapsed,
    /// speedscope's JSON file format (https://www.speedscope.app).
    Speedscope,
    /// pprof's gzipped profile.proto (`go tool pprof`), every measure of
    /// the family a sample type, `--weight` the default one.
    Pprof,
    /// The Firefox Profiler's processed profile (https://profiler.firefox.com):
    /// recorded blocks as allocation samples, access samples, regions as
    /// markers, heap and resident set as memory tracks (`--weight` unused).
    Firefox,
}

pub fn sql(args: SqlArgs) -> Result<i32> {
    let engine = Engine::open(&crate::profile_parts(&args.dir)?, args.limit.bytes())?;
    let format = match args.format {
        SqlFormat::Table => Format::Table {
            max_rows: args.max_rows,
        },
        SqlFormat::Csv => Format::Csv,
        SqlFormat::Json => Format::Json,
    };
    engine.run(&args.query, |schema| format.sink(schema, stdout()))?;
    Ok(0)
}

pub fn export(args: ExportArgs) -> Result<i32> {
    let parts = crate::profile_parts(&args.dir)?;
    let format = match args.format {
        ExportFormat::SpeParser => return export_spe_parser(&args, &parts),
        ExportFormat::Firefox => return export_firefox(&args),
        ExportFormat::Collapsed | ExportFormat::Speedscope | ExportFormat::Pprof => {
            return export_stacks(&args)
        }
        ExportFormat::Csv => Format::Csv,
        ExportFormat::Json => Format::Json,
        ExportFormat::Parquet => Format::Parquet,
    };
    let known: Vec<&str> = (memlens_sql::table_schemas().iter())
        .map(|(name, _)| *name)
        .chain([memlens_profile::ProcessRow::NAME])
        .collect();
    if let Some(unknown) = args.table.iter().find(|t| !known.contains(&t.as_str())) {
        bail!(
            "--table {unknown}: no such table; the tables are {}",
            known.join(", ")
        );
    }
    let engine = Engine::open(&parts, args.limit.bytes())?;
    let select_all = |table: &str| format!("SELECT * FROM \"{table}\"");
    let one = match (&args.sql, args.table.as_slice()) {
        (Some(query), _) => Some(query.clone()),
        (None, [table]) => Some(select_all(table)),
        _ => None,
    };
    if let Some(query) = one {
        let out = match &args.output {
            Some(path) => create(path)?,
            None if format == Format::Parquet => {
                bail!("Parquet is written to a file: give -o FILE.parquet")
            }
            None => stdout(),
        };
        let rows = engine.run(&query, |schema| format.sink(schema, out))?;
        tell_written(args.output.as_deref(), rows, "row", "");
        return Ok(0);
    }
    let Some(dir) = &args.output else {
        bail!("several tables are written as one file each: give -o DIRECTORY (or one --table)");
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    let tables: Vec<&str> = if args.table.is_empty() {
        engine.present_tables().to_vec()
    } else {
        args.table.iter().map(String::as_str).collect()
    };
    for table in tables {
        let path = dir.join(format!("{table}.{}", format.extension()));
        let out = create(&path)?;
        let rows = engine.run(&select_all(table), |schema| format.sink(schema, out))?;
        tell_written(Some(&path), rows, "row", &format!(" of {table}"));
    }
    Ok(0)
}

fn export_spe_parser(args: &ExportArgs, parts: &[PathBuf]) -> Result<i32> {
    if args.sql.is_some() || !args.table.is_empty() {
        bail!("--format spe-parser writes the samples table alone: drop --table and --sql");
    }
    let [part] = parts else {
        bail!("--format spe-parser writes one profile: give one rank's directory");
    };
    let mut out = match &args.output {
        Some(path) => create(path)?,
        None => stdout(),
    };
    let rows = memlens_import::export_csv(part, &mut out)?;
    out.flush().context("writing the samples")?;
    tell_written(args.output.as_deref(), rows, "sample", "");
    Ok(0)
}

/// The profile's stacks weighed by `--weight`, for other tools.
fn export_stacks(args: &ExportArgs) -> Result<i32> {
    if args.sql.is_some() || !args.table.is_empty() {
        bail!("--format collapsed, speedscope and pprof write stacks, not tables: drop --table and --sql");
    }
    let profile = crate::load(&args.dir)?;
    let measure = Measure::from(args.weight);
    let stacks = Stacks::of(&profile, measure).map_err(|e| anyhow::anyhow!(e))?;
    if args.format == ExportFormat::Pprof
        && (args.output.as_deref()).is_none_or(|o| o == Path::new("-"))
        && std::io::IsTerminal::is_terminal(&std::io::stdout())
    {
        bail!("pprof files are binary: give -o FILE.pb.gz (or redirect standard output)");
    }
    let mut out = match &args.output {
        Some(path) => create(path)?,
        None => stdout(),
    };
    let written = match args.format {
        ExportFormat::Pprof => {
            let how = |m: Measure| format!("{}: {}", m.name_and_unit().0, m.how());
            let comments: Vec<String> = std::iter::once(format!(
                "memlens {} profile of {}",
                env!("CARGO_PKG_VERSION"),
                profile.meta.command.join(" ")
            ))
            .chain(stacks.measures.iter().map(|&m| how(m)))
            .collect();
            let duration = profile.meta.clock.duration_ns as i64;
            let modules: Vec<&str> = (profile.meta.processes.iter().map(|p| p.exe.as_str()))
                .chain(profile.modules.iter().map(|m| m.path.as_str()))
                .collect();
            out.write_all(&memlens_present::pprof(
                &stacks, measure, duration, &comments, &modules,
            )?)?;
            stacks.rows.len()
        }
        ExportFormat::Speedscope => {
            let name = args.dir.display().to_string();
            let file = memlens_present::speedscope(&stacks, measure, &name);
            serde_json::to_writer(&mut out, &file)?;
            file["profiles"][0]["samples"]
                .as_array()
                .map_or(0, Vec::len)
        }
        _ => {
            let lines = memlens_present::collapsed(&stacks, measure);
            for line in &lines {
                writeln!(out, "{line}")?;
            }
            lines.len()
        }
    };
    out.flush().context("writing the stacks")?;
    tell_written(args.output.as_deref(), written as u64, "stack", "");
    Ok(0)
}

fn export_firefox(args: &ExportArgs) -> Result<i32> {
    if args.sql.is_some() || !args.table.is_empty() {
        bail!("--format firefox writes the whole profile, not tables: drop --table and --sql");
    }
    let profile = crate::load(&args.dir)?;
    // The tables count from a monotonic origin; meta.json is written when the
    // run ends, so its time less the run's length dates the start.
    let started = std::fs::metadata(args.dir.join("meta.json"))
        .and_then(|m| m.modified())
        .ok()
        .and_then(|end| end.checked_sub(Duration::from_nanos(profile.meta.clock.duration_ns)))
        .unwrap_or(std::time::UNIX_EPOCH);
    let (file, counts) = memlens_present::firefox(&profile, started);
    let mut out = match &args.output {
        Some(path) => create(path)?,
        None => stdout(),
    };
    serde_json::to_writer(&mut out, &file)?;
    out.flush().context("writing the Firefox profile")?;
    // With every block recorded, small freed blocks have no row (the sites
    // sum them): the allocation samples are then the live, large and
    // accessed blocks only.
    let heap_rows = (profile.allocations.iter())
        .filter(|a| a.kind != "mmap")
        .map(|a| a.est_count)
        .sum::<f64>();
    let heap_blocks = profile.sites.iter().map(|s| s.allocations).sum::<f64>();
    if heap_rows < heap_blocks.round() {
        eprintln!(
            "memlens: {:.0} of {heap_blocks:.0} heap blocks have no row of their own and are not allocation samples: record with --keep-blocks to include each",
            heap_blocks - heap_rows
        );
    }
    if let Some(path) = &args.output {
        eprintln!(
            "memlens: wrote {} threads, {} allocations ({} freed), {} access samples and {} region markers to {}; open it at https://profiler.firefox.com",
            counts.threads,
            counts.allocations,
            counts.frees,
            counts.samples,
            counts.markers,
            path.display()
        );
    }
    Ok(0)
}

/// The file `path`, or standard output for `-`.
/// Tells what was written where, unless it went to standard output (`-o -`,
/// or no -o): "wrote 1 row to x.csv", "wrote 2 stacks to y.txt".
fn tell_written(output: Option<&Path>, count: u64, noun: &str, rest: &str) {
    let Some(path) = output.filter(|p| *p != Path::new("-")) else {
        return;
    };
    let plural = if count == 1 { "" } else { "s" };
    eprintln!(
        "memlens: wrote {count} {noun}{plural}{rest} to {}",
        memlens_present::printable(&path.to_string_lossy())
    );
}

fn create(path: &Path) -> Result<Box<dyn Write + Send>> {
    if path == Path::new("-") {
        return Ok(stdout());
    }
    let file = memlens_profile::create_private_file(path)?;
    Ok(Box::new(std::io::BufWriter::new(file)))
}

fn stdout() -> Box<dyn Write + Send> {
    Box::new(std::io::BufWriter::new(std::io::stdout()))
}

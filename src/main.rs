//! memlens: a memory-centric profiler for Linux. The CLI is thin: it turns flags
//! into the collector's and the reports' plain config structs.

mod compile;
mod doctor;
mod job;
mod man;
mod mpi;
mod profile_dir;
mod progress;
mod record;
mod report;
mod runtime;
mod sql;
mod validate;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use profile_dir::{finalize_if_needed, load, load_parts, profile_parts};
use record::{record, RecordArgs};
use report::{not_a_job, plot, report, Format, PlotKind, ReportArgs};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

#[derive(Parser)]
#[command(
    name = "memlens",
    version,
    about = "Memory-centric profiler: capacity, data objects and regions over time",
    after_help = "EXAMPLES:\n  memlens record -o prof -- ./app input.dat\n  memlens report prof\n  memlens report prof --format json > report.json\n  memlens plot capacity prof -o capacity.png"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a program under memlens and write a profile directory.
    #[command(
        after_help = "EXAMPLES:\n  memlens record -o prof -- ./app input.dat\n  memlens record --leaks -o prof -- ./app\n  memlens record --live --interval 50 -- ./app\n  memlens record --cache-model --reuse -o prof -- ./app_built_with_memlens_cc\n  memlens record --pid 1234 --duration 30 -o prof\n  mpirun -n 4 memlens record -o job -- ./app"
    )]
    Record(RecordArgs),
    /// Print the capacity and data-object report of a profile.
    #[command(
        after_help = "EXAMPLES:\n  memlens report prof\n  memlens report prof --stacks 6 --top 20\n  memlens report prof --format json > report.json\n  memlens report prof --format csv --table leaks\n  memlens report prof --html report.html\n  memlens report job --per-rank"
    )]
    #[command(override_usage = "memlens report [OPTIONS] <DIR>\n       memlens report --schema")]
    Report(ReportArgs),
    /// Draw a figure from a profile.
    #[command(
        after_help = "EXAMPLES:\n  memlens plot capacity prof -o capacity.png\n  memlens plot flame prof -o allocations.svg\n  memlens plot flame --accesses prof -o accesses.svg\n  memlens plot bandwidth prof -o bandwidth.png"
    )]
    Plot {
        #[command(subcommand)]
        kind: PlotKind,
    },
    /// Compile C with clang and the access instrumentation (use as CC).
    #[command(disable_help_flag = true)]
    Cc {
        /// Arguments for clang.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Compile C++ with clang++ and the access instrumentation (use as CXX).
    #[command(name = "c++", disable_help_flag = true)]
    Cxx {
        /// Arguments for clang++.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Compile Fortran with flang (through LLVM IR) and the access instrumentation.
    #[command(disable_help_flag = true)]
    Fc {
        /// Arguments for the compiler.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Compile C with gcc and its ThreadSanitizer instrumentation, answered by memlens (use as CC).
    #[command(disable_help_flag = true)]
    Gcc {
        /// Arguments for gcc.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Compile C++ with g++ and its ThreadSanitizer instrumentation, answered by memlens (use as CXX).
    #[command(name = "g++", disable_help_flag = true)]
    Gxx {
        /// Arguments for g++.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Compile Fortran with gfortran and its ThreadSanitizer instrumentation, answered by memlens (use as FC).
    #[command(disable_help_flag = true)]
    Gfortran {
        /// Arguments for gfortran.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Write compiler wrappers into DIR, symlinks to memlens that act by
    /// their name: memlens-cc, memlens-c++, memlens-fc and memlens-clang,
    /// memlens-clang++, memlens-flang (clang's), memlens-gcc, memlens-g++,
    /// memlens-gfortran (GCC's) for CC=, CXX=, FC= (one word, a compiler's
    /// name in it); cc, c++, clang, clang++, flang-new, gcc, g++, gfortran
    /// for PATH=DIR:$PATH builds.
    #[command(
        after_help = "EXAMPLES:\n  memlens wrappers wrappers\n  make CC=$PWD/wrappers/memlens-clang\n  cmake -DCMAKE_C_COMPILER=$PWD/wrappers/memlens-cc ..\n  PATH=$PWD/wrappers:$PATH make"
    )]
    Wrappers { dir: PathBuf },
    /// Print the RUSTFLAGS that instrument a Rust crate (use with codegen-units = 1).
    Rustflags,
    /// Turn the raw logs of a transparent-mode run (LD_PRELOAD alone) into a profile.
    #[command(
        after_help = "EXAMPLES:\n  LD_PRELOAD=/path/to/libmemlens_runtime.so MEMLENS_DIR=prof ./app\n  memlens finalize prof"
    )]
    Finalize {
        /// Profile directory holding raw/ logs.
        dir: PathBuf,
    },
    /// What this machine can do: perf events, PMU, each sampling backend, clang.
    #[command(
        after_help = "EXAMPLES:\n  memlens doctor\n  memlens doctor --validate --output verdict.json"
    )]
    Doctor {
        /// Run a kernel with known accesses under every backend this machine
        /// has and compare each one's per-object figures with the truth;
        /// exits 1 if any is wrong.
        #[arg(long)]
        validate: bool,
        /// Where --validate writes its verdict (JSON, for a bug report).
        #[arg(
            long,
            value_name = "FILE",
            default_value = "memlens-validate.json",
            requires = "validate"
        )]
        output: PathBuf,
    },
    /// Print a shell's completion script (e.g. `memlens completions bash >
    /// /etc/bash_completion.d/memlens`).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff: `memlens man > memlens.1; man ./memlens.1`),
    /// or write it and one page per subcommand with its options
    /// (memlens-record.1, memlens-report.1, ...) into a directory.
    Man {
        /// Write memlens.1 and every subcommand's page here (e.g.
        /// ~/.local/share/man/man1) instead of printing memlens.1.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Measure load latency by working-set size (pointer chase, as lat_mem_rd)
    /// and streaming bandwidth (as bw_mem): the per-level latencies the cache
    /// model uses.
    #[command(
        after_help = "EXAMPLES:\n  memlens calibrate\n  memlens calibrate --max-size 64M --plot latency.png"
    )]
    Calibrate {
        /// Largest working set, e.g. 64M or 1G [default: 4x the last cache, 256M..1G].
        #[arg(long, value_parser = parse_size)]
        max_size: Option<u64>,
        /// Threads of the parallel bandwidth run [default: every CPU].
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4096))]
        threads: Option<u32>,
        /// Where to save the calibration [default: ~/.cache/memlens/calibration.json].
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Also draw the latency curve: .png or .svg.
        #[arg(long)]
        plot: Option<PathBuf>,
    },
    /// Compare two profiles: peaks, data objects, regions, memory levels, counters.
    #[command(
        after_help = "EXAMPLES:\n  memlens diff before after\n  memlens diff before after --format json --top 30"
    )]
    Diff {
        /// The first (baseline) profile.
        a: PathBuf,
        /// The second profile.
        b: PathBuf,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Objects listed (biggest change first).
        #[arg(long, default_value_t = 10)]
        top: usize,
    },
    /// Turn a perf.data with PEBS, IBS or Arm SPE samples into a memlens profile.
    #[command(
        after_help = "EXAMPLES:\n  perf mem record -o perf.data -- ./app\n  memlens import perf.data -o prof"
    )]
    Import {
        /// perf.data written by `perf record` or `perf mem record`.
        file: PathBuf,
        /// Profile directory to write [default: memlens.import.<file name>].
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Remove the profile already in that directory instead of moving it to <DIR>.old.
        #[arg(long)]
        force: bool,
    },
    /// SQL over a profile's tables (embedded Apache DataFusion): allocations,
    /// stacks, regions, samples, locations, tags, threads, timeline, counters,
    /// modules, statics.
    #[command(
        after_help = "EXAMPLES:\n  memlens sql prof \"SELECT stack_id, bytes, leaked_bytes FROM sites ORDER BY bytes DESC LIMIT 5\"\n  memlens sql prof \"SELECT * FROM regions\" --format csv"
    )]
    Sql(sql::SqlArgs),
    /// Write a profile's tables, or a query's result, as CSV, JSON or Parquet;
    /// its samples as Arm spe-parser's CSV; its stacks as collapsed stacks,
    /// speedscope, pprof or Firefox Profiler files.
    #[command(
        after_help = "EXAMPLES:\n  memlens export prof --table sites -o sites.csv\n  memlens export prof --format parquet -o tables\n  memlens export prof --format collapsed --weight leaked-space -o leaks.folded\n  memlens export prof --format pprof --weight inuse-space -o heap.pb.gz\n  memlens export prof --format firefox -o profile.json"
    )]
    Export(sql::ExportArgs),
}

// mimalloc: conversion and Parquet encoding allocate and free column buffers
// across threads; with glibc's allocator importing 280k PEBS samples took 54
// ms, with mimalloc 46 ms (bench/import.sh).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `gettid` for a C library before 2.30, which has none: Rust's standard
/// library calls it, and the release is linked against glibc 2.17's symbols
/// (scripts/release.sh) to run on older clusters. The same system call;
/// defined here, it serves this executable whatever the C library.
#[no_mangle]
pub extern "C" fn gettid() -> libc::pid_t {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as libc::pid_t }
}

/// What memlens was started with (signal mask, ignored signals, closed
/// standard descriptors) is read before Rust's runtime changes it: the
/// program `record` starts gets it unchanged.
#[used]
#[link_section = ".init_array"]
static CAPTURE_INHERITED: extern "C" fn() = memlens_collector::inherited::capture;

fn main() {
    // A closed pipe (memlens report | head) ends quietly, as ripgrep does.
    // SAFETY: restoring the default disposition before any output.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    // Run by a wrapper's name (`memlens wrappers`): that compiler wrapper.
    let mut argv = std::env::args_os();
    let outcome = match argv.next().as_deref().and_then(compile::wrapper_named) {
        Some(wrapper) => compile::wrapper(wrapper, argv.collect()),
        None => match Cli::try_parse() {
            Ok(cli) => run(cli),
            Err(e) => {
                // --help and --version print and succeed; a wrong flag is memlens' own failure.
                let _ = e.print();
                std::process::exit(if e.use_stderr() { exit::FAILED } else { 0 });
            }
        },
    };
    let code = match outcome {
        Ok(code) => code,
        Err(e) => {
            // A path or command line in it may hold control characters.
            eprintln!(
                "memlens: {}",
                memlens_present::printable_document(&format!("{e:#}"))
            );
            exit::of(&e)
        }
    };
    // Everything is written and closed by now; what exit() would add is the
    // allocator's collection of every arena (mimalloc's exit handler: ~1% of
    // a short record's time), of no use to a process that ends.
    let _ = std::io::Write::flush(&mut std::io::stdout());
    // SAFETY: ends the process; nothing of it runs after this.
    unsafe { libc::_exit(code) }
}

/// A flag's help with the runtime's default for it, which applies when the
/// flag is not given (the runtime, not the CLI, holds the defaults).
pub(crate) fn default_shown(help: &str, default: impl std::fmt::Display) -> String {
    format!("{help} [default: {default}]")
}

/// memlens' own exit statuses, as `env` and `timeout` use them, so that a
/// recorded program's own status (passed through) stays distinct.
mod exit {
    use memlens_collector::Error;

    /// memlens itself failed: bad input, a wrong flag, an unreadable profile.
    pub const FAILED: i32 = 125;
    /// The program exists but cannot be run.
    pub const CANNOT_RUN: i32 = 126;
    /// The program was not found.
    pub const NOT_FOUND: i32 = 127;

    pub fn of(e: &anyhow::Error) -> i32 {
        match e.downcast_ref::<Error>() {
            Some(Error::CannotRun {
                not_found: true, ..
            }) => NOT_FOUND,
            Some(Error::CannotRun { .. }) => CANNOT_RUN,
            _ => FAILED,
        }
    }
}

/// "64M", "1G", "4096": bytes, at least a page.
pub(crate) fn parse_size(text: &str) -> std::result::Result<u64, String> {
    memlens_rawlog::parse_size(text.trim().as_bytes())
        .filter(|&n| n >= 4096)
        .ok_or_else(|| format!("{text:?}: give a size of at least 4K, e.g. 64M or 1G"))
}

fn calibrate(
    max_size: Option<u64>,
    threads: Option<u32>,
    output: Option<PathBuf>,
    plot: Option<PathBuf>,
) -> Result<i32> {
    use memlens_collector::calibrate as cal;
    let mut opts = cal::Options::for_machine(&memlens_collector::sysinfo::cache_levels());
    opts.max_bytes = max_size.unwrap_or(opts.max_bytes);
    opts.threads = threads.map_or(opts.threads, |t| t as usize);
    let cal::Measured {
        calibration: c,
        refused,
    } = cal::calibrate(&opts, |what, bytes| {
        eprint!(
            "\rmemlens calibrate: {what} at {:<12}",
            memlens_present::human_bytes(bytes as f64)
        );
    })
    .context("cannot map the calibration buffer; give a smaller --max-size")?;
    eprintln!();
    print!(
        "{}",
        memlens_present::render_calibration(&c, &refused, cal::MAX_BANDWIDTH_SPREAD)
    );
    let path = output.unwrap_or_else(memlens_profile::Calibration::default_path);
    c.write(&path)?;
    println!("\nsaved to {}", path.display());
    if let Some(plot) = plot {
        memlens_present::plot_calibration(&c, &plot)?;
        println!("latency curve drawn in {}", plot.display());
    }
    Ok(0)
}

fn run(cli: Cli) -> Result<i32> {
    match cli.command {
        Command::Record(args) => record(args),
        Command::Report(args) => report(args),
        Command::Plot { kind } => {
            let (dir, output) = match &kind {
                PlotKind::Capacity { dir, output }
                | PlotKind::Scatter { dir, output }
                | PlotKind::Bandwidth { dir, output }
                | PlotKind::Counters { dir, output }
                | PlotKind::Fold { dir, output, .. }
                | PlotKind::Flame { dir, output, .. }
                | PlotKind::Ranks { dir, output, .. } => (dir, output),
            };
            let parts = profile_parts(dir)?;
            let job = job::Job::of(&parts)?;
            let view = || -> Result<memlens_analysis::JobView> {
                match &job {
                    Some(job) => Ok(job.report(dir, false, 0)?.job),
                    None => Err(not_a_job(dir)),
                }
            };
            match &kind {
                PlotKind::Capacity { .. } if job.is_some() => {
                    memlens_present::plot_rank_band(&view()?, output)?
                }
                PlotKind::Ranks { heap, .. } => {
                    let measure = if *heap {
                        memlens_present::RankMeasure::Heap
                    } else {
                        memlens_present::RankMeasure::Rss
                    };
                    memlens_present::plot_rank_map(&view()?, measure, output)?
                }
                _ => plot(&kind, &load_parts(dir, &parts)?, output)?,
            }
            eprintln!("memlens: wrote {}", output.display());
            Ok(0)
        }
        Command::Cc { args } => compile::wrapper("cc", args),
        Command::Cxx { args } => compile::wrapper("c++", args),
        Command::Fc { args } => compile::wrapper("fc", args),
        Command::Gcc { args } => compile::wrapper("gcc", args),
        Command::Gxx { args } => compile::wrapper("g++", args),
        Command::Gfortran { args } => compile::wrapper("gfortran", args),
        Command::Wrappers { dir } => {
            compile::write_wrappers(&dir)?;
            eprintln!(
                "memlens: wrote {} compiler wrappers in {}",
                compile::WRAPPER_NAMES.len(),
                dir.display()
            );
            Ok(0)
        }
        Command::Rustflags => {
            println!("{}", compile::rustflags(&runtime::path()?)?);
            Ok(0)
        }
        Command::Import {
            file,
            output,
            force,
        } => import(&file, output, force),
        Command::Diff { a, b, format, top } => {
            let options = memlens_present::ReportOptions {
                top: memlens_present::DIFF_ROWS,
                ..Default::default()
            };
            let (pa, pb) = (load(&a)?, load(&b)?);
            let d = memlens_present::diff(
                &memlens_present::build_report(&pa, &options),
                &memlens_present::build_report(&pb, &options),
                top,
            );
            match format {
                Format::Json => println!("{}", serde_json::to_string_pretty(&d)?),
                Format::Text => print!("{}", memlens_present::render_diff(&d)),
                Format::Csv => anyhow::bail!("diff prints text or json; use --format json"),
            }
            Ok(0)
        }
        Command::Doctor { validate, output } => {
            if validate {
                return Ok(if validate::validate(&output)? { 0 } else { 1 });
            }
            print!("{}", doctor::report(runtime::path()));
            Ok(0)
        }
        Command::Completions { shell } => {
            let mut cli = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cli, "memlens", &mut std::io::stdout());
            Ok(0)
        }
        Command::Man { dir } => {
            let cli = <Cli as clap::CommandFactory>::command();
            match dir {
                Some(dir) => {
                    man::write_pages(cli, &dir).map_err(|e| {
                        anyhow::anyhow!(
                            "cannot write the manual pages into {}: {}; give --dir a directory you can write",
                            dir.display(),
                            memlens_profile::io_words(&e)
                        )
                    })?;
                    eprintln!("memlens: wrote the manual pages into {}", dir.display());
                }
                None => man::write_page(&cli, &mut std::io::stdout().lock())?,
            }
            Ok(0)
        }
        Command::Calibrate {
            max_size,
            threads,
            output,
            plot,
        } => calibrate(max_size, threads, output, plot),
        Command::Sql(args) => sql::sql(args),
        Command::Export(args) => sql::export(args),
        Command::Finalize { dir } => {
            finalize_if_needed(&dir)?;
            eprintln!(
                "memlens: {} is ready: memlens report {}",
                dir.display(),
                dir.display()
            );
            Ok(0)
        }
    }
}

fn import(file: &Path, output: Option<PathBuf>, force: bool) -> Result<i32> {
    let out = output.unwrap_or_else(|| {
        let name = file
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        PathBuf::from(format!("memlens.import.{name}"))
    });
    let size = std::fs::metadata(file).map_or(0, |m| m.len());
    let s = progress::step(
        &format!(
            "importing {} ({})",
            file.display(),
            memlens_present::human_bytes(size as f64)
        ),
        || memlens_import::import(file, &out, force),
    )?;
    eprintln!("memlens: profile written to {}", out.display());
    eprintln!(
        "  imported   {} load/store samples ({}) from {}",
        s.samples,
        s.backends.join(", "),
        file.display()
    );
    if s.spe.records > 0 {
        eprintln!(
            "  spe        {} records decoded, {} bad bytes skipped, {} cut records",
            s.spe.records, s.spe.bad_bytes, s.spe.partial_records
        );
    }
    eprintln!(
        "  skipped    {} samples that were not loads or stores; {} lost or damaged",
        s.skipped,
        s.losses.total()
    );
    eprintln!("  next       memlens report {}", out.display());
    Ok(0)
}

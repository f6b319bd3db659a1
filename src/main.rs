//! memlens: a memory-centric profiler for Linux. The CLI is thin: it turns flags
//! into the collector's and the reports' plain config structs.

mod compile;
mod doctor;
mod job;
mod man;
mod mpi;
mod progress;
mod runtime;
mod sql;
mod validate;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use memlens_collector::perf::backends::Kind;
use memlens_collector::SamplerChoice;
use memlens_profile::Profile;
use memlens_rawlog::RuntimeSettings;
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

#[derive(Args)]
struct RecordArgs {
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
enum BackendArg {
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
enum Unwinder {
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

#[derive(Args)]
struct ReportArgs {
    /// Profile directory, or a directory of profiles (MPI ranks) to read together.
    #[arg(required_unless_present = "schema")]
    dir: Option<PathBuf>,
    /// Print the JSON Schema of `--format json` (docs/report.schema.json) and exit.
    #[arg(long, conflicts_with = "dir")]
    schema: bool,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// With --format csv: which table: one of the data (objects, allocated,
    /// leaks, regions, access-objects, access-regions, levels-routine,
    /// levels-region, latency, sharing, reuse, reuse-objects, reuse-pairs,
    /// folding, threads), exact numbers; or a section's table as the text
    /// report draws it (peak/peak, access/memory-levels, ...: a wrong name lists them).
    #[arg(long, default_value = "objects")]
    table: String,
    /// Rows per top-N table.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// Also write the report as one self-contained HTML page (figures inline,
    /// nothing fetched).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
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
    /// (JSON always lists them all).
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

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Text,
    Json,
    Csv,
}

#[derive(Subcommand)]
enum PlotKind {
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
    /// Flame graph (SVG) of bytes allocated by call stack, or with --accesses
    /// of sampled accesses by object (under its allocation stack) and code.
    Flame {
        dir: PathBuf,
        /// Output image: .svg.
        #[arg(short, long)]
        output: PathBuf,
        #[arg(long)]
        accesses: bool,
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
fn default_shown(help: &str, default: impl std::fmt::Display) -> String {
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

/// `--cache-model`'s levels, checked, as the runtime reads them: "sysfs"
/// becomes this machine's data and unified caches.
fn parse_cache_spec(text: &str) -> std::result::Result<String, String> {
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

fn not_a_job(dir: &Path) -> anyhow::Error {
    anyhow!(
        "{}: not a job of MPI ranks (plot ranks draws a job's)",
        dir.display()
    )
}

/// One profile's plot of `kind`.
fn plot(kind: &PlotKind, p: &Profile, output: &Path) -> Result<()> {
    match kind {
        PlotKind::Capacity { .. } => memlens_present::plot_capacity(p, output)?,
        PlotKind::Scatter { .. } => memlens_present::plot_scatter(p, output)?,
        PlotKind::Bandwidth { .. } => memlens_present::plot_bandwidth(p, output)?,
        PlotKind::Counters { .. } => memlens_present::plot_counters(p, output)?,
        PlotKind::Flame { accesses, .. } => {
            let what = if *accesses {
                memlens_present::Flame::Accesses
            } else {
                memlens_present::Flame::Allocations
            };
            memlens_present::plot_flame(p, what, output)?
        }
        PlotKind::Fold {
            region,
            detect,
            bins,
            ..
        } => {
            let by = memlens_analysis::FoldBy::new(region.as_deref(), *detect);
            memlens_present::plot_fold(p, by, *bins as usize, output)?
        }
        PlotKind::Ranks { dir, .. } => return Err(not_a_job(dir)),
    }
    Ok(())
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

fn mpi_rank() -> Option<u32> {
    [
        "OMPI_COMM_WORLD_RANK",
        "PMIX_RANK",
        "PMI_RANK",
        "SLURM_PROCID",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok()?.parse().ok())
}

fn record(args: RecordArgs) -> Result<i32> {
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
fn print_summary(
    outcome: &memlens_collector::RecordOutcome,
    cfg: &memlens_collector::RecordConfig,
) -> Result<()> {
    // The summary needs no samples: do not read back what may be millions of them.
    let p = Profile::load_for_summary(&outcome.dir).context("reading the profile just written")?;
    // The summary's own figures, not a whole report's (a report computes
    // the data objects twice, and every section).
    let peak = memlens_analysis::peak(&p);
    let top = memlens_analysis::objects_by_peak(&p, &memlens_analysis::data_objects(&p), 1);
    let command = memlens_present::printable(&p.meta.command.join(" ")).into_owned();
    let duration = memlens_present::seconds(p.meta.clock.duration_ns);
    let processes = match p.meta.processes.len() {
        1 => "1 process".to_string(),
        n => format!("{n} processes"),
    };
    let lost = p.meta.losses.total();
    let h = memlens_present::human_bytes;
    eprintln!(
        "memlens: profile written to {}",
        memlens_present::printable(&outcome.dir.to_string_lossy())
    );
    match outcome.exit {
        memlens_collector::TargetExit::Attached { ended } => eprintln!(
            "  attached   {command} (process {}) for {duration}; {}",
            cfg.attach.unwrap_or_default(),
            if ended {
                "it ended (its exit status went to its parent)"
            } else {
                "it runs on"
            }
        ),
        memlens_collector::TargetExit::Code(c) => {
            eprintln!("  program    {command} exited with {c} after {duration} ({processes})")
        }
        memlens_collector::TargetExit::Signal(s) => eprintln!(
            "  program    {command} was killed by signal {s} after {duration} ({processes})"
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
    eprintln!("  peak       {} resident, {heap}", h(peak.rss_bytes as f64));
    match top.first() {
        Some(o) => eprintln!(
            "  top object {} ({} peak)",
            memlens_present::printable(&o.name),
            memlens_present::object_peak(o)
        ),
        None => eprintln!("  top object none recorded"),
    }
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
    eprintln!(
        "  recorded   {blocks}, {access}, {} timeline samples, {} lost",
        p.timeline.len(),
        lost
    );
    eprintln!("  next       memlens report {}", outcome.dir.display());
    Ok(())
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

/// A transparent-mode directory has raw/ logs but no tables yet.
/// A run whose profile directory went away under it (the program removed its
/// working directory) is told as such, not as the I/O error that followed.
fn removed_during_the_run(dir: &Path, e: memlens_collector::Error) -> anyhow::Error {
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

fn finalize_if_needed(dir: &Path) -> Result<()> {
    if dir.join(memlens_profile::META_FILE).exists() {
        return Ok(());
    }
    if !dir.join(memlens_profile::RAW_DIR).is_dir() {
        bail!(memlens_profile::ProfileError::NotAProfile(
            dir.to_path_buf()
        ));
    }
    // Two reports of a fresh transparent-mode directory: one finalizes it.
    let _lock = memlens_profile::lock_dir(dir, true)?;
    if dir.join(memlens_profile::META_FILE).exists() {
        return Ok(());
    }
    let run = memlens_collector::RunInfo {
        interval_ms: 10,
        ..Default::default()
    };
    // Inside the caller's "reading" step: no bar of its own.
    memlens_collector::finalize(dir, &run, None, None, &|_, _| {})?;
    Ok(())
}

/// One profile directory, or the profiles in its subdirectories (MPI ranks),
/// finalized.
fn profile_parts(dir: &Path) -> Result<Vec<PathBuf>> {
    if !dir.exists() {
        bail!(
            "{}: no such directory; give the directory `memlens record` printed",
            dir.display()
        );
    }
    let is_profile = |p: &Path| {
        p.join(memlens_profile::META_FILE).exists() || p.join(memlens_profile::RAW_DIR).is_dir()
    };
    let mut parts = if is_profile(dir) {
        vec![dir.to_path_buf()]
    } else {
        std::fs::read_dir(dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| is_profile(p))
            .collect()
    };
    parts.sort();
    if parts.is_empty() {
        bail!(memlens_profile::ProfileError::NotAProfile(
            dir.to_path_buf()
        ));
    }
    for part in &parts {
        finalize_if_needed(part)?;
    }
    Ok(parts)
}

/// Loads one profile, or all profiles in subdirectories (MPI ranks) merged.
pub(crate) fn load(dir: &Path) -> Result<Profile> {
    load_parts(dir, &profile_parts(dir)?)
}

/// The profiles `parts` of `dir`, merged when they are several.
fn load_parts(dir: &Path, parts: &[PathBuf]) -> Result<Profile> {
    if let [one] = parts {
        return Ok(Profile::load(one)?);
    }
    let profiles = parts
        .iter()
        .map(|part| Profile::load(part))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(memlens_profile::merge(dir, profiles))
}

/// `memlens report JOB`: the job's view across its ranks.
fn job_report(dir: &Path, job: &job::Job, args: &ReportArgs) -> Result<i32> {
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
        memlens_profile::write_private_file(path, memlens_present::render_job_html(&j).as_bytes())?;
        eprintln!("memlens: wrote {}", path.display());
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

/// `report --timed-by`: the regions timed by runs of the uninstrumented
/// build.
fn time_by_plain_runs(r: &mut memlens_present::Report, plain: &[PathBuf]) -> Result<()> {
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

fn report(args: ReportArgs) -> Result<i32> {
    let Some(dir) = args.dir.clone() else {
        println!(
            "{}",
            serde_json::to_string_pretty(&memlens_present::report_schema())?
        );
        return Ok(0);
    };
    let parts = profile_parts(&dir)?;
    let job = job::Job::of(&parts)?;
    let mut only = match (args.pid, args.thread) {
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
        (Some(job), Some(rank)) => {
            let (rank_parts, pids) = job.rank(rank)?;
            // A rank sharing its directory with others: its first process.
            let shared = rank_parts.len() == 1
                && memlens_profile::Meta::read(&rank_parts[0])?.processes.len() > pids.len();
            if shared {
                only = Some(memlens_profile::Only::Process(pids[0]));
            }
            progress::step(&format!("reading rank {rank}"), || {
                load_parts(&dir, &rank_parts)
            })?
        }
        (None, Some(_)) => bail!("--rank: {} is not a job of MPI ranks", dir.display()),
        _ => progress::step(&format!("reading {}", dir.display()), || {
            load_parts(&dir, &parts)
        })?,
    };
    if let Some(only) = only {
        p.restrict(only).map_err(anyhow::Error::msg)?;
    }
    p.skip_frames =
        memlens_profile::SkipFrames::new(&args.skip_frames).map_err(anyhow::Error::msg)?;
    let options = memlens_present::ReportOptions {
        top: args.top,
        stacks: args.stacks,
        fold: args.fold.clone(),
        fold_detect: args.fold_detect,
        fold_bins: args.fold_bins as usize,
    };
    let mut r = progress::step(
        &format!(
            "analysing {} samples, {} allocation sites",
            p.samples.len(),
            p.sites.len()
        ),
        || memlens_present::build_report(&p, &options),
    );
    if let (true, Some(why)) = (args.fold.is_some() || args.fold_detect, &r.folding.why_not) {
        anyhow::bail!("cannot fold: {why}");
    }
    if !args.timed_by.is_empty() {
        time_by_plain_runs(&mut r, &args.timed_by)?;
    }
    if let Some(path) = &args.html {
        memlens_profile::write_private_file(path, memlens_present::render_html(&p, &r).as_bytes())?;
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

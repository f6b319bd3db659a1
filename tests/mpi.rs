//! MPI jobs: ranks recorded under mpirun (Open MPI's and MPICH's), read as
//! one job, reduced over MPI by the launcher's own library.

mod common;
use common::*;
use std::process::Command;

/// Builds an MPI test program with mpicc (.ci/run installs Open MPI).
fn mpi_program(dir: &std::path::Path, source: &str) -> String {
    let out = dir.join(source.trim_end_matches(".c"));
    let st = Command::new("mpicc")
        .args(["-O1", "-g"])
        .arg(format!("-I{}", root().join("include").display()))
        .arg(root().join("tests/programs").join(source))
        .arg("-o")
        .arg(&out)
        .status()
        .expect("mpicc (.ci/run installs Open MPI)");
    assert!(st.success());
    out.to_string_lossy().into_owned()
}

fn mpirun(ranks: u32) -> Command {
    let mut c = Command::new("mpirun");
    c.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "-n",
        &ranks.to_string(),
    ]);
    c.env("OMPI_MCA_btl", "self,vader");
    c
}

/// A figure across the ranks of a job report: (least, most, rank of the
/// most, most/mean, each rank's value).
fn spread(s: &serde_json::Value) -> (f64, f64, u64, f64, Vec<f64>) {
    let f = |k: &str| s[k].as_f64().unwrap();
    let each = (s["per_rank"].as_array().into_iter().flatten())
        .map(|v| v.as_f64().unwrap())
        .collect();
    (
        f("min"),
        f("max"),
        s["max_rank"].as_u64().unwrap(),
        f("imbalance"),
        each,
    )
}

/// The job view's object allocated at `line` of `source`.
fn object_at<'a>(job: &'a serde_json::Value, source: &str, line: &str) -> &'a serde_json::Value {
    let at = source_line(source, line);
    named(&job["job"]["objects"], &format!("main ({source}:{at})"))
}

#[test]
fn an_mpi_job_is_read_across_its_ranks() {
    let dir = tempdir();
    let app = mpi_program(dir.path(), "mpi_imbalance.c");
    let job = dir.path().join("job");
    let out = mpirun(4)
        .env("MEMLENS_RUNTIME", runtime())
        .arg(memlens())
        .args(["record", "-o"])
        .arg(&job)
        .args(["--", &app])
        .output()
        .unwrap();
    assert_ran(&out);
    assert!((0..4).all(|r| job.join(format!("rank={r}/meta.json")).exists()));
    // Rank r holds (r + 1) x 16 MiB at one site and works (r + 1) x 50 ms in
    // "solve".
    let r = report_json_with(&job, &["--per-rank"]);
    assert_eq!(r["kind"], "job");
    let mib = (1u64 << 20) as f64;
    let field = spread(&object_at(&r, "mpi_imbalance.c", "/* FIELD */")["peak_bytes"]);
    assert_eq!(field.0, 16.0 * mib);
    assert_eq!(field.1, 64.0 * mib);
    assert_eq!(field.2, 3, "the most on rank 3");
    assert!((field.3 - 1.6).abs() < 1e-9, "imbalance {}", field.3);
    assert_eq!(field.4, [16.0, 32.0, 48.0, 64.0].map(|m| m * mib));
    let solve = named(&r["job"]["regions"], "solve");
    let time = spread(&solve["time_ns"]);
    assert_eq!(time.2, 3);
    // Each rank's time as the rank itself measured it around the region's
    // marks (its sleep overshoots by however long a loaded machine takes to
    // wake it: four ranks on two cores).
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut measured = [0.0f64; 4];
    for line in stdout.lines() {
        if let ["rank", r, "solve", ns] = line.split_whitespace().collect::<Vec<_>>()[..] {
            measured[r.parse::<usize>().unwrap()] = ns.parse().unwrap();
        }
    }
    for (rank, (t, own)) in time.4.iter().zip(measured).enumerate() {
        assert!(own >= 50e6 * (rank + 1) as f64, "{stdout}");
        assert!(
            (t - own).abs() < 2e6,
            "rank {rank} in solve {t} ns, by itself {own}"
        );
    }
    // The others wait for the longest (150 + 100 + 50 ms on an idle machine).
    let wait = solve["wait_ns"].as_f64().unwrap();
    let longest = measured.iter().copied().fold(0.0, f64::max);
    let short_of_longest: f64 = measured.iter().map(|t| longest - t).sum();
    assert!(
        (wait - short_of_longest).abs() < 8e6,
        "waiting {wait} ns where the ranks measured {short_of_longest}"
    );
    // The heap's band holds every rank's field at once; each rank's series
    // are kept for the rank x time map.
    let heap = &r["job"]["heap"];
    let most = |k: &str| {
        (heap[k].as_array().unwrap().iter()).fold(0.0f64, |m, v| m.max(v.as_f64().unwrap()))
    };
    assert!(
        most("max") >= 64.0 * mib && most("min") >= 16.0 * mib,
        "{heap}"
    );
    assert_eq!(r["job"]["heap_by_rank"].as_array().unwrap().len(), 4);
    // Without --per-rank, the spreads only.
    let plain = report_json(&job);
    assert!(
        object_at(&plain, "mpi_imbalance.c", "/* FIELD */")["peak_bytes"]["per_rank"].is_null()
    );
    // Sampled objects (blocks under --min-size, MPI's own) are marked ~ in
    // the text, as flagged in the JSON; the 16 MiB field is measured.
    let text = report_text(&job);
    let rows: Vec<&str> = (text.lines())
        .skip_while(|l| !l.starts_with("  OBJECTS BY PEAK BYTES"))
        .skip(2)
        .take_while(|l| !l.is_empty())
        .collect();
    let objects = plain["job"]["objects"].as_array().unwrap();
    let sampled: Vec<bool> = (objects.iter().take(rows.len()))
        .map(|o| o["sampled"] == true)
        .collect();
    let marked: Vec<bool> = rows.iter().map(|l| l.contains(" ~")).collect();
    assert_eq!(marked, sampled, "{text}");
    let field = (text.lines())
        .find(|l| l.contains("mpi_imbalance.c:"))
        .unwrap();
    assert!(!field.contains('~'), "{field}");
    // Read as an MPI job itself: three processes share the four ranks and
    // gather their aggregates; process 0 writes the same report.
    assert_reduced_alike(mpirun(3), &job);
    // One rank's own report.
    let three = report_json_with(&job, &["--rank", "3"]);
    assert_eq!(three["kind"], "profile");
    assert_eq!(three["summary"]["processes"][0]["rank"], 3);
    // The band and the map, drawn from the same view, and in the HTML page.
    for (kind, file) in [("capacity", "band.png"), ("ranks", "map.png")] {
        let image = dir.path().join(file);
        assert_ran(&plot(kind, &job, &image));
        assert!(std::fs::metadata(&image).unwrap().len() > 10_000, "{kind}");
    }
    let html = dir.path().join("job.html");
    let page = html_report(&job, &html);
    assert_eq!(page.matches("<svg").count(), 2, "the band and the map");
    // Beside it, each rank's own page, which a rank selector and the "most
    // at rank" cells open (tests/browser/job_page.py in headless Chromium).
    for rank in 0..4 {
        let own = std::fs::read_to_string(dir.path().join(format!("job.ranks/rank-{rank}.html")));
        assert!(
            own.unwrap().contains("memlens report"),
            "rank {rank}'s page"
        );
    }
    if chromium_for("the job page's rank selector").is_some() {
        let seen = in_browser("job_page.py", &[html.to_str().unwrap(), "3"]);
        assert_eq!(
            seen["rank_errors"],
            serde_json::json!([]),
            "rank page's errors"
        );
        // Sorted by each object's most on one rank, largest first: the field's
        // 64 MiB on rank 3 first.
        let most: Vec<f64> = (seen["most_sorted"].as_array().unwrap().iter())
            .map(|v| v.as_str().unwrap().parse().unwrap())
            .collect();
        assert_eq!(most[0], 64.0 * mib, "{seen}");
        assert!(most.windows(2).all(|w| w[0] >= w[1]), "{seen}");
        assert!(
            (seen["rank_links"][0].as_str().unwrap()).ends_with("/job.ranks/rank-3.html"),
            "{seen}"
        );
        let choices: Vec<&str> = (seen["choices"].as_array().unwrap().iter())
            .map(|c| c.as_str().unwrap())
            .collect();
        assert_eq!(choices.len(), 5, "a choice per rank: {choices:?}");
        assert!((seen["opened"].as_str().unwrap()).ends_with("/job.ranks/rank-3.html"));
        // Rank 3's page: its 64 MiB field first, its own timeline drawn.
        let first = seen["rank_objects"][0].as_array().unwrap();
        assert_eq!(first[0], "64.0 MiB", "{seen}");
        assert!((first.last().unwrap().as_str().unwrap()).contains("mpi_imbalance.c:"));
        assert_eq!(seen["rank_timeline"], 1, "{seen}");
    }
    // SQL reads the ranks' tables as one, each row's rank by its process.
    let sql = Command::new(memlens())
        .args(["sql", "--format", "csv"])
        .arg(&job)
        .arg("SELECT p.rank, max(a.size) AS biggest FROM allocations a JOIN processes p ON a.pid = p.pid GROUP BY p.rank ORDER BY p.rank")
        .output()
        .unwrap();
    assert_ran(&sql);
    assert_eq!(
        String::from_utf8_lossy(&sql.stdout),
        "rank,biggest\n0,16777216\n1,33554432\n2,50331648\n3,67108864\n"
    );
    // The job is one partitioned dataset (rank=N directories) to other
    // Parquet engines: pyarrow's reads the rank as a column.
    let read = "import glob, sys, pyarrow.dataset as ds
job = sys.argv[1]
d = ds.dataset(sorted(glob.glob(job + '/*/allocations.parquet')), format='parquet', partitioning='hive', partition_base_dir=job)
t = d.to_table(columns=['rank', 'size']).to_pandas()
print(' '.join(str(v) for v in t.groupby('rank')['size'].max()))";
    let out = Command::new("python3")
        .args(["-c", read])
        .arg(&job)
        .output()
        .unwrap();
    assert_ran(&out);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "16777216 33554432 50331648 67108864"
    );
    fails_with(
        &["report", job.to_str().unwrap(), "--rank", "9"],
        "no rank 9 in this job",
    );

    // Ranks 2 and 3 as if recorded on another host, booted 1000 s earlier
    // and started 2 s later: their wall-clock starts place them.
    let hosts = dir.path().join("two-hosts");
    for rank in 0..4 {
        let part = format!("rank={rank}");
        copy_profile(&job.join(&part), &hosts.join(&part), |meta| {
            if rank >= 2 {
                meta["host"] = "other".into();
                let clock = &mut meta["clock"];
                let later = |v: &serde_json::Value, by: u64| {
                    serde_json::Value::from(v.as_u64().unwrap() + by)
                };
                clock["start_ns"] = later(&clock["start_ns"], 1_000_000_000_000);
                clock["realtime_start_ns"] = later(&clock["realtime_start_ns"], 2_000_000_000);
            }
        });
    }
    let r = report_json_with(&hosts, &["--per-rank"]);
    let v = &r["job"];
    let base = v["time_base"].as_str().unwrap();
    assert!(
        base.contains("CLOCK_REALTIME") && base.contains("2 hosts"),
        "{base}"
    );
    let bin_ns = v["grid"]["bin_ns"].as_f64().unwrap();
    let first_held = |rank: usize| {
        let series = v["heap_by_rank"][rank].as_array().unwrap();
        series
            .iter()
            .position(|h| h.as_f64().unwrap() > 0.0)
            .unwrap() as f64
            * bin_ns
    };
    assert!(first_held(0) < 1e9 && first_held(1) < 1e9);
    assert!(
        first_held(2) >= 1.9e9 && first_held(3) >= 1.9e9,
        "{} {}",
        first_held(2),
        first_held(3)
    );
}

#[test]
fn ranks_sharing_one_directory_are_read_as_a_job() {
    // Transparent mode: every rank preloads the runtime into one directory.
    let dir = tempdir();
    let app = mpi_program(dir.path(), "mpi_ranks.c");
    let shared = dir.path().join("shared");
    let out = mpirun(2)
        .arg("-x")
        .arg(format!("LD_PRELOAD={}", runtime().display()))
        .arg("-x")
        .arg(format!("MEMLENS_DIR={}", shared.display()))
        .arg(&app)
        .output()
        .unwrap();
    assert_ran(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("sum of ranks 1"));
    let r = report_json_with(&shared, &["--per-rank"]);
    assert_eq!(r["kind"], "job");
    // Rank r owns an (r + 1) MiB block.
    let block = spread(&object_at(&r, "mpi_ranks.c", "malloc(len)")["peak_bytes"]);
    assert_eq!(block.4, [1.0, 2.0].map(|m| m * (1u64 << 20) as f64));
    assert_eq!(block.2, 1);
    let one = report_json_with(&shared, &["--rank", "1"]);
    assert_eq!(one["summary"]["processes"][0]["rank"], 1);
}

/// An MPICH build and job, on a machine where Open MPI is the default MPI:
/// `mpicc.mpich` with `MPICH_CC` naming memlens' wrapper instruments the
/// program; `mpirun.mpich` records each rank (its rank from Hydra's
/// `PMI_RANK`), and `memlens report --reduce` under it loads MPICH's library
/// (integer handles), not Open MPI's, and writes the one-process report.
#[test]
fn an_mpich_job_builds_through_the_wrapper_and_reduces_with_mpich() {
    let dir = tempdir();
    let wrappers = dir.path().join("bin");
    assert_ran(
        &Command::new(memlens())
            .arg("wrappers")
            .arg(&wrappers)
            .output()
            .unwrap(),
    );
    let app = dir.path().join("mpi_ranks");
    let st = Command::new("mpicc.mpich")
        .env("MPICH_CC", wrappers.join("memlens-cc"))
        .env("MEMLENS_RUNTIME", runtime())
        .args(["-O1", "-g"])
        .arg(format!("-I{}", root().join("include").display()))
        .arg(root().join("tests/programs/mpi_ranks.c"))
        .arg("-o")
        .arg(&app)
        .status()
        .expect("mpicc.mpich (.ci/run installs MPICH)");
    assert!(st.success());
    // Without memlens first: Ubuntu 24.04's MPICH 4.2 launches each process
    // of `mpirun.mpich -n 2` as a job of its own ("sum of ranks 0" twice),
    // memlens or not; there the rest says nothing.
    let plain = Command::new("mpirun.mpich")
        .args(["-n", "2"])
        .arg(&app)
        .output()
        .unwrap();
    assert_ran(&plain);
    if !String::from_utf8_lossy(&plain.stdout).contains("sum of ranks 1") {
        eprintln!(
            "needs an MPICH whose mpirun starts one job of 2 ranks: this one starts 2 singletons"
        );
        return;
    }
    let job = dir.path().join("job");
    let out = Command::new("mpirun.mpich")
        .args(["-n", "2"])
        .env("MEMLENS_RUNTIME", runtime())
        .arg(memlens())
        .args(["record", "-o"])
        .arg(&job)
        .arg("--")
        .arg(&app)
        .output()
        .unwrap();
    assert_ran(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("sum of ranks 1"));
    // Rank r memsets its (r + 1) MiB block: counted exactly (the wrapped
    // memset), besides a few bytes of the program's own variables.
    for rank in 0..2u64 {
        let r = report_json_with(&job, &["--rank", &rank.to_string()]);
        let written = r["access"]["bytes_written"].as_u64().unwrap();
        let block = (rank + 1) << 20;
        assert!(
            (block..block + 64).contains(&written),
            "rank {rank} wrote {written} bytes"
        );
    }
    let mut mpirun = Command::new("mpirun.mpich");
    mpirun.args(["-n", "2"]);
    let single = assert_reduced_alike(mpirun, &job);
    let block = spread(&object_at(&single, "mpi_ranks.c", "malloc(len)")["peak_bytes"]);
    assert_eq!(block.4, [1.0, 2.0].map(|m| m * (1u64 << 20) as f64));
}

/// `memlens report --reduce` of `job` under `launcher` (an mpirun and its
/// process count) writes the report one process writes, byte for byte;
/// returns that report.
fn assert_reduced_alike(mut launcher: Command, job: &std::path::Path) -> serde_json::Value {
    let report = ["report", "--format", "json", "--per-rank"];
    let single = Command::new(memlens())
        .args(report)
        .arg(job)
        .output()
        .unwrap();
    assert_ran(&single);
    let reduced = launcher
        .arg(memlens())
        .args(report)
        .arg("--reduce")
        .arg(job)
        .output()
        .unwrap();
    assert_ran(&reduced);
    assert!(
        reduced.stdout == single.stdout,
        "the reduced report differs from one process's"
    );
    serde_json::from_slice(&single.stdout).unwrap()
}

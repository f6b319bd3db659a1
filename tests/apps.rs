//! Real open-source HPC mini-apps nobody here wrote (tests/apps: LULESH and
//! XSBench, vendored with their licenses), built by their own Makefiles
//! through memlens' compiler wrappers and recorded at the defaults, as a user
//! would: the program's output unchanged, every sampled access on a named
//! object, and per-site bytes against valgrind's dhat on the same input.

mod common;

use common::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Copies tests/apps/`app` into `dir` and runs its own `make` there with
/// `vars` and `env`, memlens and its runtime on the PATH as a user's shell
/// has them.
fn make(app: &str, dir: &Path, vars: &[&str], env: &[(&str, &str)]) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let tree = dir.join(app);
    let st = Command::new("cp")
        .arg("-r")
        .arg(root().join("tests/apps").join(app))
        .arg(&tree)
        .status()
        .unwrap();
    assert!(st.success());
    let path = format!(
        "{}:{}",
        memlens().parent().unwrap().display(),
        std::env::var("PATH").unwrap()
    );
    let build = tree.join(match app {
        "xsbench" => "openmp-threading",
        _ => ".",
    });
    let out = Command::new("make")
        .current_dir(&build)
        .env("PATH", path)
        .env("MEMLENS_RUNTIME", runtime())
        .envs(env.iter().copied())
        .args(vars)
        .output()
        .unwrap();
    assert_ran(&out);
    build
}

/// Lines of a program's output that do not report its own timing.
fn untimed(stdout: &[u8]) -> String {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter(|l| {
            !["time", "FOM", "Lookups/s", "Runtime"]
                .iter()
                .any(|w| l.contains(w))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The application frames of a call stack, innermost first, as `file:line`
/// (the allocator and standard-library frames in between differ between
/// peers and are not what names a site).
fn app_frames<'a>(frames: impl Iterator<Item = &'a str>, prefix: &str) -> Vec<String> {
    frames
        .filter_map(|f| {
            let open = f.rfind('(')?;
            let location = f[open + 1..].strip_suffix(')')?;
            let (file, line) = location.rsplit_once(':')?;
            let file = file.rsplit('/').next()?;
            (file.starts_with(prefix) && line.parse::<u32>().is_ok())
                .then(|| format!("{file}:{line}"))
        })
        .collect()
}

/// dhat's per-allocation-site bytes read and written: (app frames, read, written).
fn dhat_sites(json: &Path, prefix: &str) -> Vec<(Vec<String>, f64, f64)> {
    let dhat: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    let table: Vec<&str> = dhat["ftbl"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    dhat["pps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pp| {
            let frames = pp["fs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| table[i.as_u64().unwrap() as usize]);
            (
                app_frames(frames, prefix),
                pp["rb"].as_f64().unwrap(),
                pp["wb"].as_f64().unwrap(),
            )
        })
        .collect()
}

/// LULESH (C++, OpenMP; LLNL's hydrodynamics proxy: persistent mesh arrays
/// and per-time-step temporaries) at the defaults: per allocation site, the
/// bytes read and written that memlens estimates from its samples match
/// dhat's exact counts within 5%, or within twice the report's own 95%
/// bound where a figure has too few samples for 5%; every site dhat ranks
/// in its top ten is one memlens object of the same name; no access is
/// left on `unknown`.
#[test]
fn lulesh_per_site_bytes_match_dhat_within_the_stated_bound() {
    let dir = tempdir();
    let instrumented = make(
        "lulesh",
        &dir.path().join("cc"),
        &["CXX=memlens c++ -DUSE_MPI=0"],
        &[],
    );
    // dhat reads DWARF 4 only.
    let plain = make(
        "lulesh",
        &dir.path().join("plain"),
        &["CXX=clang++-16 -DUSE_MPI=0 -gdwarf-4"],
        &[],
    );
    let args = ["-s", "10", "-i", "500"];
    // One thread: valgrind runs threads one at a time, where libomp's
    // barriers spin for seconds.
    let env = [("OMP_NUM_THREADS", "1")];
    let app = instrumented.join("lulesh2.0");
    let app = app.to_str().unwrap();
    let native = run_native_with(&env, &[&[app][..], &args].concat());
    let profile = dir.path().join("p");
    let recorded = record_with(&env, &profile, &[], &[&[app][..], &args].concat());
    assert_ran(&recorded);
    assert_eq!(untimed(&native.stdout), untimed(&recorded.stdout));
    assert!(untimed(&native.stdout).contains("Iteration count     =  231"));

    let dhat_out = dir.path().join("dhat.json");
    let dhat = Command::new("valgrind")
        .args([
            "--tool=dhat",
            &format!("--dhat-out-file={}", dhat_out.display()),
        ])
        .arg(plain.join("lulesh2.0"))
        .args(args)
        .envs(env)
        .output()
        .expect("valgrind is installed (.ci/run installs it)");
    assert_ran(&dhat);
    // The plain build computes the same answer.
    assert_eq!(untimed(&native.stdout), untimed(&dhat.stdout));

    let report = report_json(&profile);
    assert_accesses_named(&report);

    // Each memlens heap object by its application frames; each dhat site
    // goes to the object whose frames are the longest prefix of its own.
    let objects: Vec<(Vec<String>, &serde_json::Value)> = report["access"]["objects"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["kind"] == "heap")
        .map(|o| {
            (
                app_frames(o["name"].as_str().unwrap().split(" ← "), "lulesh"),
                o,
            )
        })
        .filter(|(frames, _)| !frames.is_empty())
        .collect();
    let object_of = |site: &[String]| {
        objects
            .iter()
            .enumerate()
            .filter(|(_, (frames, _))| site.starts_with(frames))
            .max_by_key(|(_, (frames, _))| frames.len())
            .map(|(i, _)| i)
    };
    let mut sites = dhat_sites(&dhat_out, "lulesh");
    sites.retain(|(frames, _, _)| !frames.is_empty());
    let mut per_object: HashMap<usize, (f64, f64)> = HashMap::new();
    for (frames, read, written) in &sites {
        if let Some(i) = object_of(frames) {
            let e = per_object.entry(i).or_default();
            e.0 += read;
            e.1 += written;
        }
    }
    sites.sort_by(|a, b| (b.1 + b.2).total_cmp(&(a.1 + a.2)));
    let mut checked = Vec::new();
    for (frames, _, _) in sites.iter().take(10) {
        let i = object_of(frames)
            .unwrap_or_else(|| panic!("dhat's site {frames:?} is no memlens object"));
        if checked.contains(&i) {
            continue;
        }
        checked.push(i);
        let (read, written) = per_object[&i];
        let o = objects[i].1;
        for (kind, truth, estimate, bound, samples) in [
            (
                "read",
                read,
                &o["est_bytes_read"],
                &o["read_error"],
                &o["load_samples"],
            ),
            (
                "written",
                written,
                &o["est_bytes_written"],
                &o["written_error"],
                &o["store_samples"],
            ),
        ] {
            let estimate = estimate.as_f64().unwrap();
            let samples = samples.as_u64().unwrap();
            if (1..30).contains(&samples) {
                // Too few samples for the normal bound: the count taken must
                // be a likely Poisson count for dhat's bytes (a site written
                // 1.65 samples' worth took 5: 2.7% likely, 3.0x the truth).
                let expected = truth / (estimate / samples as f64);
                let p = poisson_two_sided(samples, expected);
                assert!(
                    p >= 1e-3,
                    "{}: bytes {kind} {estimate:.0} from {samples} samples, dhat {truth:.0} ({expected:.1} samples' worth): p = {p:.1e}",
                    o["name"]
                );
                continue;
            }
            // No sample of the kind: as loose as one sample's bound.
            let bound = bound.as_f64().unwrap_or(1.96);
            let error = (estimate - truth).abs() / truth.max(1.0);
            assert!(
                error <= (2.0 * bound).max(0.05),
                "{}: bytes {kind} {estimate:.0}, dhat {truth:.0}: {:.1}% off, stated bound ±{:.1}%",
                o["name"],
                100.0 * error,
                100.0 * bound
            );
        }
    }
    assert!(checked.len() >= 8, "{checked:?}");
}

/// XSBench (C, OpenMP; ANL's Monte Carlo cross-section lookup kernel: a few
/// large grids searched at random) with two threads at the defaults: the
/// same output, both threads' accesses on named objects, the grids first.
#[test]
fn xsbench_with_two_threads_names_every_access() {
    let dir = tempdir();
    // The Makefile adds -fopenmp -DOPENMP (and -flto) only when $(CC) names
    // gcc, clang or intel: through the wrapper named memlens-clang it keeps
    // them, as a user's build does.
    let wrappers = wrappers(dir.path());
    let cc = format!("CC={}", wrappers.join("memlens-clang").display());
    let build = make("xsbench", dir.path(), &[&cc], &[]);
    let app = build.join("XSBench");
    let args = [
        app.to_str().unwrap(),
        "-m",
        "event",
        "-s",
        "small",
        "-G",
        "nuclide",
        "-g",
        "1000",
        "-l",
        "200000",
        "-t",
        "2",
    ];
    let native = run_native(&args);
    let profile = dir.path().join("p");
    let recorded = record(&profile, &[], &args);
    assert_eq!(untimed(&native.stdout), untimed(&recorded.stdout));
    assert_eq!(shell_status(&native), shell_status(&recorded));
    assert!(untimed(&native.stdout).contains("Verification checksum: 606054"));

    let report = report_json(&profile);
    assert_accesses_named(&report);
    let samples = report["access"]["samples"].as_f64().unwrap();
    let threads: Vec<u64> = report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["samples"].as_u64().unwrap())
        .collect();
    assert_eq!(threads.len(), 2, "{threads:?}");
    assert!(
        threads.iter().all(|&n| n as f64 > 0.3 * samples),
        "{threads:?}"
    );
    let hottest = objects(&report["access"], "objects");
    assert!(
        hottest[0]["name"].as_str().unwrap().contains("GridInit.c"),
        "{}",
        hottest[0]["name"]
    );
}

/// LULESH as an MPI job of 8 ranks (its domain decomposition needs a cube),
/// built by its Makefile through `mpicxx` with `OMPI_CXX="memlens c++"` and
/// recorded at the defaults: balanced (one region per domain), so each of
/// the program's own objects (mesh arrays, per-step temporaries,
/// communication buffers) has most/mean 1.00 across the ranks. Open MPI's own free lists and libomp's
/// first block differ between ranks for real (docs/jobs.md) and are not
/// checked.
#[test]
fn lulesh_on_eight_ranks_is_balanced_object_by_object() {
    let dir = tempdir();
    // mpicxx runs $OMPI_CXX: memlens' wrapper, as for a user's MPI build.
    let build = make(
        "lulesh",
        &dir.path().join("mpi"),
        &["CXX=mpicxx -DUSE_MPI=1"],
        &[("OMPI_CXX", "memlens c++")],
    );
    let job = dir.path().join("job");
    let out = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-n", "8"])
        .env("OMPI_MCA_btl", "self,vader")
        .env("OMP_NUM_THREADS", "1")
        .env("MEMLENS_RUNTIME", runtime())
        .arg(memlens())
        .args(["record", "-o"])
        .arg(&job)
        .arg("--")
        .arg(build.join("lulesh2.0"))
        // One region per domain: LULESH draws its regions' sizes at random
        // per rank (seeded by the rank), and sizes its per-region
        // temporaries by them: with 11 regions those differ for real.
        .args(["-s", "4", "-i", "10", "-r", "1"])
        .output()
        .unwrap();
    assert_ran(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("MPI tasks           =  8"));
    let r = report_json_with(&job, &["--top", "1000"]);
    let own: Vec<&serde_json::Value> = (r["job"]["objects"].as_array().unwrap().iter())
        .filter(|o| o["kind"] == "heap")
        .filter(|o| {
            let name = o["name"].as_str().unwrap();
            // The program's own allocations: its first frame is LULESH's.
            name.split(" ← ")
                .next()
                .is_some_and(|f| f.contains("(lulesh"))
        })
        .collect();
    assert!(own.len() >= 40, "{} objects of LULESH's own", own.len());
    for o in own {
        let spread = &o["peak_bytes"];
        assert!(
            spread["imbalance"].as_f64().unwrap() <= 1.05,
            "{}: most/mean {}",
            o["name"],
            spread["imbalance"]
        );
    }
}

/// The two-sided p-value of `k` draws of a Poisson variable of mean `mean`.
fn poisson_two_sided(k: u64, mean: f64) -> f64 {
    if mean <= 0.0 {
        return if k == 0 { 1.0 } else { 0.0 };
    }
    let pmf = |i: u64| {
        (-mean + i as f64 * mean.ln() - (1..=i).map(|j| (j as f64).ln()).sum::<f64>()).exp()
    };
    let at_most: f64 = (0..=k).map(pmf).sum();
    let at_least = 1.0 - at_most + pmf(k);
    (2.0 * at_most.min(at_least)).min(1.0)
}

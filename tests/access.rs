//! The instrumented access backend end to end: `memlens cc`, exact bytes per
//! region, sampling accuracy, and programs that run unchanged without memlens.

mod common;
use common::*;
use memlens_profile::{AccessSample, Region, TimelinePoint};
use std::path::{Path, PathBuf};
use std::process::Command;

#[test]
fn region_bytes_are_exact_and_sampling_is_accurate() {
    let dir = tempdir();
    let n: u64 = 1_000_000;
    let chase: u64 = 1 << 18;
    let app = stream_example(
        dir.path(),
        &[&format!("-DN={n}L"), &format!("-DCHASE={chase}L")],
    );
    // Runs unchanged with and without memlens, and the report reads it.
    same_behaviour(&[&app]);
    let p = dir.path().join("p");
    let out = record(&p, &[], &[&app]);
    assert!(out.status.success());
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(
        summary.contains("access samples (instrumented, 1 per 4099 accesses of a class)"),
        "{summary}"
    );

    let regions: Vec<Region> = memlens_profile::read_table(&p).unwrap();
    let per_element = |name: &str| match name {
        "copy" | "scale" => 16,
        "add" | "triad" => 24,
        _ => 0,
    };
    let mut seen = 0;
    for r in &regions {
        let moved = r.bytes_read.unwrap() + r.bytes_written.unwrap();
        if r.name == "chase" {
            assert_eq!(
                (r.bytes_read, r.bytes_written),
                (Some(4 * chase * 8), Some(0))
            );
        } else {
            assert_eq!(
                moved,
                n * per_element(&r.name),
                "{} instance: {r:?}",
                r.name
            );
        }
        seen += 1;
    }
    assert_eq!(seen, 4 * 10 + 1, "every kernel instance and the chase");

    // NMO eq. 1 against the exact counts, held to the bound the sampler's
    // design gives (see `sampling_error_bound`).
    let timeline: Vec<TimelinePoint> = memlens_profile::read_table(&p).unwrap();
    let last = timeline.iter().max_by_key(|t| t.time_ns).unwrap();
    assert_accuracy(last.loads + last.stores, counted_samples(&p), 4099, 1);
    let samples: Vec<AccessSample> = memlens_profile::read_table(&p).unwrap();

    // Seed 001's derived figures from samples alone, recomputed here from the
    // samples and regions tables by brute force: per instance, (samples - 1) x
    // period accesses took the time between its first and last sample.
    let report = report_json(&p);
    for name in ["chase", "scale", "add", "triad"] {
        let r = named(&report["access"]["regions"], name);
        let d = &r["derived"];
        let (mut span, mut loads, mut samples_in, mut exact_loads, mut total_ns) = (0, 0, 0, 0, 0);
        let mut bytes_read = 0.0;
        for instance in regions.iter().filter(|r| r.name == name) {
            let end = instance.end_ns.unwrap();
            let hits: Vec<&AccessSample> = samples
                .iter()
                .filter(|s| !s.is_store && s.tid == instance.tid)
                .filter(|s| (instance.begin_ns..end).contains(&s.time_ns))
                .collect();
            samples_in += hits.len() as u64;
            exact_loads += instance.loads.unwrap();
            total_ns += end - instance.begin_ns;
            if hits.len() >= 2 {
                let between = (hits.len() as u64 - 1) * 4099;
                span += hits.last().unwrap().time_ns - hits[0].time_ns;
                loads += between;
                let mean_size = hits.iter().map(|s| s.size as f64).sum::<f64>() / hits.len() as f64;
                bytes_read += between as f64 * mean_size;
            }
        }
        let same = |v: &serde_json::Value, want: f64| {
            let got = v.as_f64().unwrap();
            assert!(
                (got / want - 1.0).abs() < 1e-9,
                "{name}: {got} vs {want}: {r:#}"
            );
        };
        same(&d["derived_latency_ns"], span as f64 / loads as f64);
        same(&d["est_read_bandwidth"], bytes_read / (span as f64 / 1e9));
        // Its two parts: the access count, held to the sampler's bound (one
        // period per instance's edges, as each instance's first and last
        // sample cut it); the time between samples, which never exceeds the
        // region's and covers it as evenly as the machine ran the program
        // (unequal only when the program was preempted: not asserted).
        let edges = regions.iter().filter(|r| r.name == name).count() as u64;
        let bound = sampling_error_bound(samples_in, 4099, edges * 2);
        let error = (samples_in * 4099).abs_diff(exact_loads) as f64;
        assert!(
            error <= bound,
            "{name}: {samples_in} samples for {exact_loads} loads"
        );
        assert!(span <= total_ns, "{name}");
        eprintln!(
            "{name}: derived {:.3} ns per load, exact {:.3} ({:+.2}%); samples x period \
             {:+.3}% of the exact loads; sampled span {:.2}% of the region's time",
            d["derived_latency_ns"].as_f64().unwrap(),
            r["exact_ns_per_load"].as_f64().unwrap(),
            (d["derived_latency_ns"].as_f64().unwrap() / r["exact_ns_per_load"].as_f64().unwrap()
                - 1.0)
                * 100.0,
            ((samples_in * 4099) as f64 / exact_loads as f64 - 1.0) * 100.0,
            span as f64 / total_ns as f64 * 100.0
        );
    }
}

#[test]
fn a_run_without_samples_has_no_accuracy_to_show() {
    // Fewer accesses than one period: counted exactly, never sampled.
    let (_dir, p) = recorded_stream(&["-DN=1000L", "-DCHASE=64L"], &["--period", "1000000000"]);
    let r = report_json(&p);
    assert!(r["access"]["counted"].as_u64().unwrap() > 0);
    assert!(
        r["access"]["accuracy"].is_null(),
        "{}",
        r["access"]["accuracy"]
    );
    let text = report_text(&p);
    assert!(
        text.contains("sampling accuracy n/a: no sample of the"),
        "{text}"
    );
}

#[test]
fn period_and_filters_are_honoured() {
    let (_dir, p) = recorded_stream(
        &["-DN=200000L", "-DCHASE=4096L"],
        &["--period", "1000", "--no-stores"],
    );
    let samples: Vec<AccessSample> = memlens_profile::read_table(&p).unwrap();
    assert!(
        !samples.is_empty() && samples.iter().all(|s| !s.is_store),
        "loads only"
    );
    let timeline: Vec<TimelinePoint> = memlens_profile::read_table(&p).unwrap();
    let loads = timeline.iter().map(|t| t.loads).max().unwrap() as f64;
    let ratio = counted_samples(&p) as f64 * 1000.0 / loads;
    assert!(
        (ratio - 1.0).abs() < 0.01,
        "period 1000: {} samples for {loads} loads",
        counted_samples(&p)
    );
}

#[test]
fn samples_are_attributed_to_the_objects_and_regions_they_touch() {
    let (_dir, p) = recorded_stream(&["-DN=500000L", "-DCHASE=65536L"], &[]);
    let r = report_json(&p);
    let a = &r["access"];
    assert_eq!(a["available"], true);
    let accuracy = accuracy_of_profile(&p, 4099);
    assert!((a["accuracy"].as_f64().unwrap() - accuracy).abs() < 1e-12);
    // The three arrays and the chase's cycle, named by their allocation lines.
    let source = std::fs::read_to_string(root().join("examples/stream.c")).unwrap();
    let line_of = |needle: &str| {
        let n = source
            .lines()
            .position(|l| l.contains(needle))
            .expect("line in stream.c")
            + 1;
        format!("stream.c:{n}")
    };
    let sites: Vec<String> = [
        "double *a = malloc",
        "double *b = malloc",
        "double *c = malloc",
        "long *next = malloc",
    ]
    .iter()
    .map(|n| line_of(n))
    .collect();
    let names = names(&a["objects"]);
    for site in &sites {
        assert!(
            names.iter().any(|n| n.contains(site.as_str())),
            "{site} missing from {names:?}"
        );
    }
    let chase = named(&a["regions"], "chase");
    assert!(chase["objects"][0][0]
        .as_str()
        .unwrap()
        .starts_with(&format!("make_cycle ({})", sites[3])));
    // The triad reads b and c and writes a: all three are touched, nothing else.
    let triad = named(&a["regions"], "triad");
    assert_eq!(triad["objects"].as_array().unwrap().len(), 3, "{triad}");
    assert_eq!(triad["bytes_read"].as_u64().unwrap(), 10 * 500_000 * 16);
    // Achieved bandwidth: those bytes over the instances' time, as the
    // regions table holds each instance's marks.
    let regions: Vec<Region> = memlens_profile::read_table(&p).unwrap();
    let seconds: f64 = (regions.iter().filter(|r| r.name == "triad"))
        .map(|r| (r.end_ns.expect("finished") - r.begin_ns) as f64 / 1e9)
        .sum();
    let bandwidth = triad["read_bandwidth"].as_f64().unwrap();
    let expected = (10 * 500_000 * 16) as f64 / seconds;
    assert!(
        (bandwidth / expected - 1.0).abs() < 1e-6,
        "{bandwidth} B/s, not {expected}"
    );
}

#[test]
fn uninstrumented_programs_say_how_to_get_access_samples() {
    let dir = tempdir();
    let p = dir.path().join("p");
    assert!(record(&p, &[], &[&program("torture"), "exit", "0"])
        .status
        .success());
    assert_eq!(report_json(&p)["access"]["available"], false);
    let text = Command::new(memlens())
        .arg("report")
        .arg(&p)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&text.stdout)
        .contains("access sampling unavailable: the program was not built with `memlens cc`"));
}

#[test]
fn a_short_period_stays_unbiased() {
    // The jitter is symmetric around the period, so even at period 16 the
    // estimate samples x period matches the exact count (NMO eq. 1, within the
    // sampler's bound).
    let (_dir, p) = recorded_stream(&["-DN=100000L", "-DCHASE=4096L"], &["--period", "16"]);
    let r = report_json(&p);
    let accuracy = accuracy_of_profile(&p, 16);
    assert!((r["access"]["accuracy"].as_f64().unwrap() - accuracy).abs() < 1e-12);
}

/// The recorded profile's NMO accuracy, asserted within the sampler's bound.
fn accuracy_of_profile(p: &std::path::Path, period: u64) -> f64 {
    let timeline: Vec<TimelinePoint> = memlens_profile::read_table(p).unwrap();
    let last = timeline.iter().max_by_key(|t| t.time_ns).unwrap();
    assert_accuracy(last.loads + last.stores, counted_samples(p), period, 1)
}

/// Samples of the accesses the counters count: those of memcpy, memmove and
/// memset calls are of bytes, counted apart.
fn counted_samples(p: &std::path::Path) -> u64 {
    let samples: Vec<AccessSample> = memlens_profile::read_table(p).unwrap();
    samples.iter().filter(|s| !s.bulk).count() as u64
}

#[test]
fn mixed_instrumented_and_plain_libraries() {
    let dir = tempdir();
    let d = dir.path();
    let src = root().join("tests/programs");
    let inc = format!("-I{}", root().join("include").display());
    let cc = |args: &[&str]| {
        let st = Command::new(memlens())
            .env("MEMLENS_RUNTIME", runtime())
            .arg("cc")
            .args(args)
            .current_dir(d)
            .status()
            .unwrap();
        assert!(st.success(), "{args:?}");
    };
    let lib = src.join("mixed_lib.c").to_string_lossy().into_owned();
    cc(&[
        "-O1",
        "-fPIC",
        "-shared",
        "-DSUM=sum_instrumented",
        &lib,
        "-o",
        "libinstr.so",
    ]);
    let st = Command::new("gcc")
        .args([
            "-O1",
            "-fPIC",
            "-shared",
            "-DSUM=sum_plain",
            &lib,
            "-o",
            "libplain.so",
        ])
        .current_dir(d)
        .status()
        .unwrap();
    assert!(st.success());
    let main = src.join("mixed_main.c").to_string_lossy().into_owned();
    cc(&[
        "-O1",
        &inc,
        &main,
        "-o",
        "mixed",
        "-L.",
        "-Wl,-rpath,$ORIGIN",
        "-linstr",
        "-lplain",
    ]);
    let app = d.join("mixed").to_string_lossy().into_owned();
    same_behaviour(&[&app]);
    let p = d.join("p");
    assert!(record(&p, &[], &[&app]).status.success());
    let regions: Vec<Region> = memlens_profile::read_table(&p).unwrap();
    let get = |name: &str| regions.iter().find(|r| r.name == name).unwrap();
    let n = 1u64 << 20;
    // -O1 keeps the loops scalar: one 8-byte access per element.
    assert_eq!(
        (get("fill").stores, get("fill").bytes_written),
        (Some(n), Some(8 * n))
    );
    assert_eq!(
        (
            get("instrumented lib").loads,
            get("instrumented lib").bytes_read
        ),
        (Some(n), Some(8 * n))
    );
    assert_eq!(get("plain lib").loads, Some(0));
}

#[test]
fn fortran_through_flang() {
    // Two sizes: what main touches besides the arrays (I/O setup) is the same in
    // both, so the difference is exactly 24 bytes read and written per element.
    let dir = tempdir();
    let mut totals = Vec::new();
    for n in [1_000_000u64, 2_000_000] {
        let app = dir.path().join(format!("triad{n}"));
        let st = Command::new(memlens())
            .env("MEMLENS_RUNTIME", runtime())
            .args(["fc", "-O2", &format!("-DN={n}")])
            .arg(root().join("tests/programs/triad.F90"))
            .arg("-o")
            .arg(&app)
            .current_dir(dir.path())
            .status()
            .expect("memlens fc (.ci/run installs flang-16)");
        assert!(st.success());
        let app = app.to_string_lossy().into_owned();
        same_behaviour(&[&app]);
        let p = dir.path().join(format!("p{n}"));
        assert!(record(&p, &[], &[&app]).status.success());
        let timeline: Vec<TimelinePoint> = memlens_profile::read_table(&p).unwrap();
        let last = timeline.iter().max_by_key(|t| t.time_ns).unwrap();
        totals.push((last.bytes_read, last.bytes_written));
    }
    let n = 1_000_000u64;
    assert_eq!(
        (totals[1].0 - totals[0].0, totals[1].1 - totals[0].1),
        (24 * n, 24 * n),
        "{totals:?}"
    );
}

#[test]
fn rust_crate_through_rustflags() {
    let dir = tempdir();
    let flags = Command::new(memlens())
        .env("MEMLENS_RUNTIME", runtime())
        .arg("rustflags")
        .output()
        .unwrap();
    assert!(flags.status.success());
    let st = Command::new(env!("CARGO"))
        .args(["build", "--release", "--quiet", "--manifest-path"])
        .arg(root().join("tests/programs/rust_triad/Cargo.toml"))
        .env("RUSTFLAGS", String::from_utf8(flags.stdout).unwrap().trim())
        .env("CARGO_TARGET_DIR", dir.path().join("target"))
        .status()
        .unwrap();
    assert!(st.success());
    let app = dir
        .path()
        .join("target/release/rust_triad")
        .to_string_lossy()
        .into_owned();
    let mut totals = Vec::new();
    for n in ["1000000", "2000000"] {
        same_behaviour(&[&app, n]);
        let p = dir.path().join(format!("p{n}"));
        assert!(record(&p, &[], &[&app, n]).status.success());
        let timeline: Vec<TimelinePoint> = memlens_profile::read_table(&p).unwrap();
        let last = timeline.iter().max_by_key(|t| t.time_ns).unwrap();
        totals.push((last.bytes_read, last.bytes_written));
    }
    // Two sizes: the difference is exactly 24 bytes read and written per element.
    assert_eq!(
        (totals[1].0 - totals[0].0, totals[1].1 - totals[0].1),
        (24_000_000, 24_000_000),
        "{totals:?}"
    );
}

#[test]
fn openmp_threads_each_count_their_share() {
    let dir = tempdir();
    let app = dir.path().join("omp");
    let st = Command::new(memlens())
        .env("MEMLENS_RUNTIME", runtime())
        .args(["cc", "-O2", "-fopenmp"])
        .arg(format!("-I{}", root().join("include").display()))
        .arg(root().join("tests/programs/omp_triad.c"))
        .arg("-o")
        .arg(&app)
        .status()
        .expect("memlens cc -fopenmp (.ci/run installs libomp-16-dev)");
    assert!(st.success());
    let app = app.to_string_lossy().into_owned();
    same_behaviour(&[&app]);
    let p = dir.path().join("p");
    assert!(record(&p, &[], &[&app]).status.success());
    let regions: Vec<Region> = memlens_profile::read_table(&p).unwrap();
    let mut tids: Vec<u32> = regions.iter().map(|r| r.tid).collect();
    tids.sort();
    tids.dedup();
    assert_eq!(tids.len(), 2, "one instance per OpenMP thread: {regions:?}");
    let n = 1u64 << 22;
    let read: u64 = regions.iter().map(|r| r.bytes_read.unwrap()).sum();
    let written: u64 = regions.iter().map(|r| r.bytes_written.unwrap()).sum();
    // Each thread's loop-bounds bookkeeping adds a handful of 8-byte accesses.
    assert!((16 * n..16 * n + 256).contains(&read), "read {read}");
    assert!((8 * n..8 * n + 256).contains(&written), "written {written}");
    let samples: Vec<AccessSample> = memlens_profile::read_table(&p).unwrap();
    let mut sampled: Vec<u32> = samples.iter().map(|s| s.tid).collect();
    sampled.sort();
    sampled.dedup();
    assert!(sampled.len() >= 2, "both threads are sampled");
}

/// The C library's string routines read and write the program's blocks
/// outside instrumented code: `memlens cc` wraps them, and each call counts
/// the bytes its result says it touched (strlen: the string and its
/// terminator; strcmp: both strings to the first difference), exactly, on
/// the objects it touched; every wrapped routine has its wrapper.
#[test]
fn string_routines_count_the_bytes_they_touch_exactly() {
    let dir = tempdir();
    let app = memlens_cc(dir.path(), "strings.c", &["-O2"]);
    let app = app.to_str().unwrap();
    let report = same_behaviour(&[app]);
    let (len, reps) = (1000u64, 100u64);
    let region = |name: &str| {
        let r = named(&report["access"]["regions"], name);
        (
            r["bytes_read"].as_u64().unwrap(),
            r["bytes_written"].as_u64().unwrap(),
        )
    };
    assert_eq!(region("strlen"), (reps * (len + 1), 0));
    assert_eq!(region("strcmp"), (reps * 601 * 2, 0));
    assert_eq!(region("strcpy"), (reps * (len + 1), reps * (len + 1)));
    assert_eq!(region("memchr"), (reps * 601, 0));
    // qsort's element moves are named, not counted.
    let a = &report["access"];
    assert_eq!(
        (a["sort_calls"].as_u64(), a["sort_bytes"].as_u64()),
        (Some(10), Some(10 * len * 4))
    );
    let p = dir.path().join("p");
    assert_ran(&record(&p, &[], &[app]));
    let text = report_text(&p);
    assert!(
        text.contains("the element moves of its 10 qsort calls on 39.1 KiB of arrays"),
        "{text}"
    );
    // Their samples land on the blocks they read.
    let blocks = named(
        &report["access"]["objects"],
        &format!(
            "main (strings.c:{})",
            source_line("strings.c", "*text = malloc")
        ),
    );
    assert!(blocks["bulk_samples"].as_u64().unwrap() > 0, "{blocks}");

    let symbols = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(runtime())
        .output()
        .unwrap();
    let symbols = String::from_utf8_lossy(&symbols.stdout);
    for name in memlens_rawlog::WRAPPED_ROUTINES {
        assert!(
            symbols
                .lines()
                .any(|l| l.ends_with(&format!(" __wrap_{name}"))),
            "the runtime has no __wrap_{name}"
        );
    }
}

/// Samples on memory no object covers say what it is: the program's ELF
/// header (its image outside its symbols), a chunk header between two
/// blocks it writes (heap memory outside the live blocks), and a mapping
/// made by a raw system call (nothing memlens saw), 2^20 accesses each.
#[test]
fn samples_on_no_object_say_what_memory_they_hit() {
    let dir = tempdir();
    let app = memlens_cc(dir.path(), "unknown_memory.c", &["-O2"]);
    let report = same_behaviour(&[app.to_str().unwrap()]);
    let a = &report["access"];
    let kinds: Vec<(&str, u64)> = (a["unattributed_memory"].as_array().unwrap().iter())
        .map(|m| (m["what"].as_str().unwrap(), m["samples"].as_u64().unwrap()))
        .collect();
    let expected = (1u64 << 20) / a["period"].as_u64().unwrap();
    for what in [
        "unknown_memory's image outside its symbols",
        "heap memory outside the blocks live then",
        "memory no recorded block, mapping or image covers",
    ] {
        let n = (kinds.iter().find(|(k, _)| k.starts_with(what)))
            .unwrap_or_else(|| panic!("no {what:?} in {kinds:?}"))
            .1;
        assert!(
            n.abs_diff(expected) * 5 < expected,
            "{what}: {n} of {expected}"
        );
    }
    assert_eq!(
        kinds.iter().map(|k| k.1).sum::<u64>(),
        a["unattributed"].as_u64().unwrap()
    );
}

/// OMPT: a region the master marks around parallel loops counts both
/// threads' accesses exactly (its own and, through the team's tally, the
/// worker's); regions each thread marks inside a parallel region count
/// their own thread's, as before.
#[test]
fn a_region_around_parallel_loops_counts_the_whole_team() {
    let dir = tempdir();
    let app = memlens_cc(dir.path(), "omp_team_region.c", &["-O2", "-fopenmp"]);
    let app = app.to_str().unwrap();
    same_behaviour(&[app]);
    let p = dir.path().join("p");
    assert_ran(&record(&p, &[], &[app]));
    let regions: Vec<Region> = memlens_profile::read_table(&p).unwrap();
    let n = 1u64 << 20;
    let sweep: Vec<&Region> = regions.iter().filter(|r| r.name == "sweep").collect();
    assert_eq!(sweep.len(), 1, "{regions:?}");
    let (read, written) = (
        sweep[0].bytes_read.unwrap(),
        sweep[0].bytes_written.unwrap(),
    );
    // 4 steps of a[i] = 2 * b[i]; the loops' bookkeeping adds a few words.
    assert!((32 * n..32 * n + 1024).contains(&read), "read {read}");
    assert!(
        (32 * n..32 * n + 1024).contains(&written),
        "written {written}"
    );
    let team = sweep[0].team_bytes.unwrap();
    assert!(
        team > (read + written) / 3 && team < (read + written) * 2 / 3,
        "team {team}"
    );
    let inside: Vec<&Region> = regions.iter().filter(|r| r.name == "inside").collect();
    assert_eq!(inside.len(), 2, "one instance per thread: {regions:?}");
    assert!(inside.iter().all(|r| r.team_bytes == Some(0)), "{inside:?}");
    let read: u64 = inside.iter().map(|r| r.bytes_read.unwrap()).sum();
    assert!((16 * n..16 * n + 512).contains(&read), "read {read}");
    let text = report_text(&p);
    assert!(text.contains("sweep +team"), "{text}");
}

/// OMPT (libomp) and interposed GOMP calls (libgomp): with two threads,
/// every context walked inside a parallel region, the worker's as the
/// master's, continues from the OpenMP runtime into the function that
/// opened the region (`solve`) and `main`: access contexts, allocation
/// stacks, and those of a nested region.
#[test]
fn openmp_contexts_reach_the_function_that_opened_the_region() {
    let dir = tempdir();
    // With -g: the outlined bodies are named from the DWARF's declaration
    // lines (without, they keep their symbols' names).
    let app = memlens_cc(dir.path(), "omp_contexts.c", &["-O2", "-g", "-fopenmp"]);
    let app = app.to_str().unwrap();
    let report = same_behaviour(&[app]);
    let line = |text| format!("omp_contexts.c:{}", source_line("omp_contexts.c", text));
    // A stack's frames, checked to continue past the invoker into the opener.
    fn opened(frames: &serde_json::Value) -> Vec<&str> {
        let frames: Vec<&str> = frames
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        let invoker = frames
            .iter()
            .position(|f| f.starts_with("__kmp_invoke_microtask"))
            .unwrap_or_else(|| panic!("no microtask invoker in {frames:?}"));
        assert!(
            frames[invoker + 1].starts_with("solve ") || frames[invoker + 1].starts_with("nested "),
            "{frames:?}"
        );
        // The body clang outlined (`.omp_outlined._debug__`) is named after
        // the function whose source holds it: the one that opened it (GCC's
        // `solve._omp_fn.0` says so itself).
        let opener = frames[invoker + 1].split(' ').next().unwrap();
        assert!(
            frames[invoker - 1].starts_with(&format!("{opener} [OpenMP region] (omp_contexts.c:")),
            "{frames:?}"
        );
        assert!(
            !frames.iter().any(|f| f.starts_with(".omp_outlined")),
            "{frames:?}"
        );
        assert!(frames.iter().any(|f| f.starts_with("main ")), "{frames:?}");
        frames
    }
    // Both threads sample `grid` in the region: one context, theirs.
    let threads = report["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 2);
    assert!(
        threads
            .iter()
            .all(|t| t["samples"].as_u64().unwrap() > 1000),
        "{threads:?}"
    );
    let grid = named(&report["access"]["objects"], "grid [omp_contexts]");
    let sum = &grid["contexts"][0];
    assert!(
        sum["frames"][0]
            .as_str()
            .unwrap()
            .contains(&line("/* SUM */")),
        "{sum}"
    );
    assert!(sum["share"].as_f64().unwrap() > 0.9, "{sum}");
    opened(&sum["frames"]);
    // Each thread's scratch block, allocated in the region: one site.
    let allocated = &report["objects_by_allocated"];
    let scratch = (allocated.as_array().unwrap().iter())
        .find(|o| o["name"].as_str().unwrap().contains(&line("/* SCRATCH */")))
        .unwrap_or_else(|| panic!("no scratch site in {allocated:#}"));
    assert_eq!(
        scratch["allocations"], 16.0,
        "8 steps x 2 threads: {scratch:#}"
    );
    opened(&scratch["frames"]);
    // The nested region's block: both regions' contexts, one inside the other.
    let inner = (allocated.as_array().unwrap().iter())
        .find(|o| o["name"].as_str().unwrap().contains(&line("/* INNER */")))
        .unwrap_or_else(|| panic!("no inner site in {allocated:#}"));
    let frames = opened(&inner["frames"]);
    let nested = frames
        .iter()
        .position(|f| f.starts_with("nested "))
        .unwrap();
    assert!(
        frames[nested..].iter().any(|f| f.starts_with("solve ")),
        "{frames:?}"
    );

    // GCC's libgomp has no OMPT: its team-starting calls are interposed. The
    // same source built by gcc, every block recorded: each thread's scratch
    // block is one site whose stack goes from the outlined body straight to
    // `solve` and `main`, the nested region's inside the outer one's.
    let gcc_app = dir.path().join("omp_gcc");
    let built = Command::new("gcc")
        .args(["-O2", "-g", "-fopenmp"])
        .arg(root().join("tests/programs/omp_contexts.c"))
        .arg("-o")
        .arg(&gcc_app)
        .status()
        .unwrap();
    assert!(built.success());
    let p = dir.path().join("gcc");
    assert_ran(&record(&p, &["--leaks"], &[gcc_app.to_str().unwrap()]));
    let r = report_json_with(&p, &["--top", "100"]);
    let site_frames = |text| {
        let sites: Vec<&serde_json::Value> = (r["objects_by_allocated"].as_array().unwrap().iter())
            .filter(|o| o["name"].as_str().unwrap().contains(&line(text)))
            .collect();
        assert_eq!(sites.len(), 1, "one site for both threads: {sites:#?}");
        assert_eq!(sites[0]["allocations"], 16.0, "{:#}", sites[0]);
        (sites[0]["frames"].as_array().unwrap().iter())
            .map(|f| f.as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let expect = |frames: &[String], order: &[&str]| {
        for (frame, expected) in frames.iter().zip(order) {
            assert!(frame.starts_with(expected), "{frames:?}");
        }
    };
    expect(
        &site_frames("/* SCRATCH */"),
        &["solve._omp_fn.", "solve ", "main "],
    );
    expect(
        &site_frames("/* INNER */"),
        &[
            "nested._omp_fn.",
            "nested ",
            "solve._omp_fn.",
            "solve ",
            "main ",
        ],
    );
}

/// Builds tests/programs/false_sharing.c with `memlens cc`, records it and
/// returns the report's shared lines.
/// The report of `source` built with `opt` and `defines` and recorded.
fn threaded_report(source: &str, opt: &str, defines: &[&str]) -> serde_json::Value {
    let mut flags = vec![opt, "-pthread"];
    flags.extend(defines);
    let (_dir, p) = recorded_program(source, &flags, &[]);
    report_json(&p)
}

fn shared_lines(opt: &str, defines: &[&str]) -> Vec<serde_json::Value> {
    threaded_report("false_sharing.c", opt, defines)["sharing"]
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn adjacent_atomic_counters_are_false_sharing_and_gone_when_padded() {
    let r = threaded_report("atomic_counters.c", "-O2", &[]);
    // Each atomic addition is one load and one store, counted exactly: the
    // two bumping threads did 4 000 000 each, and nothing else instrumented.
    let bumpers: Vec<&serde_json::Value> = (r["threads"].as_array().unwrap().iter())
        .filter(|t| t["loads"] == 4_000_000u64)
        .collect();
    assert_eq!(bumpers.len(), 2, "{:#}", r["threads"]);
    assert!(bumpers.iter().all(|t| t["stores"] == 4_000_000u64));
    let a = &r["access"];
    assert!(a["atomic_samples"].as_u64().unwrap() > 0, "{a}");
    assert!(a["accuracy"].as_f64().unwrap() > 0.99, "{}", a["accuracy"]);
    let lines = r["sharing"].as_array().unwrap();
    let line = (lines.iter())
        .find(|l| l["kind"] == "false sharing")
        .unwrap_or_else(|| panic!("no false sharing in {lines:#?}"));
    assert!(
        line["object"].as_str().unwrap().contains("counters"),
        "{line:#}"
    );
    let bump = format!(
        "atomic_counters.c:{}",
        source_line("atomic_counters.c", "/* BUMP */")
    );
    let mut written = Vec::new();
    for t in line["threads"].as_array().unwrap() {
        assert!(t["atomic"].as_u64().unwrap() > 0, "{t}");
        let at = t["locations"][0]["location"].as_str().unwrap();
        assert!(at.contains(&bump), "{at} is not {bump}");
        // Its calling context: bump, started by the thread library.
        let context = &t["contexts"][0]["frames"];
        assert!(context[0].as_str().unwrap().contains(&bump), "{context}");
        written.push(t["written"].to_string());
    }
    written.sort();
    assert_eq!(written, ["[[0,8]]", "[[8,16]]"], "{line:#}");
    // At least at most of the 20 chunks' boundaries, as in false_sharing.c.
    let switches = line["thread_switches"].as_u64().unwrap();
    assert!(switches >= 8, "{switches} ownership changes: {line:#}");
    // A line of padding between the counters: no line is shared.
    let padded = threaded_report("atomic_counters.c", "-O2", &["-DPADDED"]);
    assert_eq!(
        padded["sharing"],
        serde_json::json!([]),
        "{:#}",
        padded["sharing"]
    );
}

#[test]
fn false_sharing_is_found_with_both_fields_and_lines_and_gone_when_padded() {
    // -O1 too: there the runtime's callbacks take the samples (LTO inlines
    // nothing), and the PCs must still be the program's.
    for opt in ["-O1", "-O2"] {
        false_sharing_found(opt);
    }
    // A line of padding between the fields: no line is shared.
    let padded = shared_lines("-O2", &["-DPADDED"]);
    assert!(padded.is_empty(), "{padded:#?}");
    // A table main fills and two threads then only read: no sharing.
    let (_dir, p) = recorded_program("init_then_read.c", &["-O2", "-pthread"], &[]);
    let r = report_json(&p);
    let table = named(&r["access"]["objects"], "table [init_then_read]");
    let threads: std::collections::BTreeSet<u64> = sql_json(&p, "SELECT DISTINCT tid FROM samples")
        .iter()
        .map(|row| row["tid"].as_u64().unwrap())
        .collect();
    assert!(
        threads.len() >= 3 && table["store_samples"].as_u64().unwrap() > 0,
        "{table}"
    );
    assert_eq!(r["sharing"], serde_json::json!([]), "{:#}", r["sharing"]);
}

#[test]
fn threads_that_reuse_an_address_in_turn_share_no_line() {
    // Each turn's 1 MiB block gets the previous one's address, the other
    // thread's: the same bytes are written by both threads, but never of
    // the same block. Before: "true sharing" of the block's first line.
    let dir = tempdir();
    let app = memlens_cc(dir.path(), "reused_blocks.c", &["-O2", "-pthread"]);
    let p = dir.path().join("p");
    let out = record(&p, &[], &[&app.to_string_lossy()]);
    assert_ran(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let reused: u32 = (stdout.split(' ').nth(1)).map_or(0, |n| n.parse().unwrap());
    assert!(reused > 150, "{stdout}");
    let r = report_json(&p);
    let writes = sql_json(
        &p,
        "SELECT COUNT(DISTINCT tid) AS threads, COUNT(*) AS n FROM samples WHERE is_store",
    );
    assert!(
        writes[0]["threads"] == 2 && writes[0]["n"].as_u64().unwrap() > 100,
        "{writes:?}"
    );
    assert_eq!(r["sharing"], serde_json::json!([]), "{:#}", r["sharing"]);
}

fn false_sharing_found(opt: &str) {
    let (_dir, p) = recorded_program("false_sharing.c", &[opt, "-pthread"], &[]);
    // The section as docs/report.md shows it (from the -O2 build).
    if opt == "-O2" {
        assert_documented_excerpt("docs/report.md", "SHARED CACHE LINES", &report_text(&p));
    }
    let lines = report_json(&p)["sharing"].as_array().unwrap().clone();
    let line = lines
        .iter()
        .find(|l| l["kind"] == "false sharing")
        .unwrap_or_else(|| panic!("no false sharing in {lines:#?}"));
    assert!(
        line["object"].as_str().unwrap().contains("counters"),
        "{line:#}"
    );
    assert_eq!(line["offset_in_object"], 0);
    let threads = line["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 2, "{line:#}");
    // Each thread writes its own 8-byte field, at the line's two offsets, from
    // its own source line.
    let mut seen: Vec<(String, String)> = threads
        .iter()
        .map(|t| {
            (
                t["written"].to_string(),
                t["locations"][0]["location"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(seen[0].0, "[[0,8]]", "{line:#}");
    assert_eq!(seen[1].0, "[[8,16]]", "{line:#}");
    for ((_, location), mark) in seen.iter().zip(["/* FIRST */", "/* SECOND */"]) {
        let at = format!("false_sharing.c:{}", source_line("false_sharing.c", mark));
        assert!(location.contains(&at), "{seen:?} at {at}");
    }
    // The threads meet at a barrier before each of 20 chunks, so the line
    // changes hands at least at every chunk's boundary even when the
    // scheduler runs one thread's chunk before the other's (about 20 hand-
    // offs, three in four with a store on either side: 15 such runs seen on
    // a loaded VM; 732 and 4,343 in idle runs, the threads running at once).
    let switches = line["thread_switches"].as_u64().unwrap();
    assert!(switches >= 8, "{switches} ownership changes: {line:#}");
}

#[test]
fn the_cache_model_changes_level_where_the_chase_crosses_each_cache_size() {
    // This machine's L1d and L2 from sysfs; a last level of eight L2s (this
    // VM's sysfs L3 of 480 MiB would take a chase of a GiB to cross).
    let caches = memlens_collector::sysinfo::cache_levels();
    let (l1, l2) = (caches[0].size, caches[1].size);
    let llc = 8 * l2;
    let spec = format!(
        "{}/{}/{},{}/{}/{},{llc}/16/64",
        l1, caches[0].ways, caches[0].line, l2, caches[1].ways, caches[1].line
    );
    let dir = tempdir();
    let app = memlens_cc(dir.path(), "chase_levels.c", &["-O2"]);
    let sets = [
        (l1 / 4, "L1"),
        (4 * l1, "L2"),
        (2 * l2, "LLC"),
        (2 * llc, "local DRAM"),
    ];
    let mut args: Vec<String> = vec![app.to_string_lossy().into_owned()];
    args.extend(sets.iter().map(|(bytes, _)| bytes.to_string()));
    // A calibration of this machine (small: DRAM is not reached) prices the
    // modelled levels; record keeps a copy in the profile.
    let cache_home = dir.path().join("cache");
    let memlens_with_cache = || {
        let mut c = Command::new(memlens());
        c.env("XDG_CACHE_HOME", &cache_home)
            .env("MEMLENS_RUNTIME", runtime());
        c
    };
    let st = memlens_with_cache()
        .args(["calibrate", "--max-size", "8M", "--threads", "1"])
        .output()
        .unwrap();
    assert!(st.status.success());
    let p = dir.path().join("p");
    let out = memlens_with_cache()
        .args(["record", "--period", "97", "--cache-model", &spec, "-o"])
        .arg(&p)
        .arg("--")
        .args(&args)
        .output()
        .unwrap();
    assert_ran(&out);
    let calibration: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p.join("calibration.json")).unwrap())
            .unwrap();
    let price = |name: &str| {
        calibration["levels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["name"] == name)
            .map(|l| l["ns"].as_f64().unwrap())
    };
    let last_cache = calibration["caches"].as_array().unwrap().last().unwrap()["name"]
        .as_str()
        .unwrap()
        .to_string();
    let prices = [
        price(caches[0].name.as_str()),
        price("L2"),
        price(&last_cache),
        price("DRAM"),
    ];
    let levels = &report_json(&p)["levels"];
    assert!(
        levels["cost"].as_str().unwrap().contains("calibrated"),
        "{levels}"
    );
    assert!(
        levels["method"].as_str().unwrap().starts_with("modelled"),
        "{levels}"
    );
    // Every load sample carries its calling context: the context rows hold
    // as many loads as the routine rows.
    let loads = |rows: &str| -> u64 {
        (levels[rows].as_array().unwrap().iter())
            .map(|r| r["load_samples"].as_u64().unwrap())
            .sum()
    };
    assert!(loads("by_context") > 0);
    assert_eq!(loads("by_context"), loads("by_routine"), "{levels}");
    let names: Vec<&str> = levels["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    for (bytes, level) in sets {
        let row = levels["by_region"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == format!("ws-{bytes}"))
            .unwrap_or_else(|| panic!("no region ws-{bytes}: {levels}"));
        let at = names.iter().position(|n| *n == level).unwrap();
        let pct = row["percent"][at].as_f64().unwrap();
        assert!(pct > 95.0, "{bytes} B should be served by {level}: {row}");
        // All served by one level: its cost is that level's calibrated latency
        // (none for DRAM, which the small calibration did not reach).
        if pct == 100.0 {
            let k = sets.iter().position(|s| s.1 == level).unwrap();
            match (row["mean_cost"].as_f64(), prices[k]) {
                (Some(cost), Some(price)) => {
                    assert!((cost - price).abs() < 1e-9 * price, "{row}: {price} ns")
                }
                (cost, price) => assert_eq!(cost, price, "{row}"),
            }
        }
    }
    // Each sample carries its modelled level's calibrated cost.
    let by_code = [
        (1u8, prices[0]),
        (3, prices[1]),
        (4, prices[2]),
        (5, prices[3]),
    ];
    let samples: Vec<AccessSample> = memlens_profile::read_table(&p).unwrap();
    assert!(!samples.is_empty());
    for s in &samples {
        let want = by_code.iter().find(|c| c.0 == s.level).and_then(|c| c.1);
        assert_eq!(s.model_cost_ns, want, "level {}", s.level);
    }
    // Without the calibration, the regions' levels as docs/report.md shows them.
    std::fs::remove_file(p.join(memlens_profile::CALIBRATION_FILE)).unwrap();
    assert_documented_excerpt("docs/report.md", "  BY REGION", &report_text(&p));
}

/// The reuse histogram of the object named `name` (its symbol, then the module).
fn reuse_of(report: &serde_json::Value, name: &str) -> serde_json::Value {
    report["reuse"]["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"].as_str().unwrap().starts_with(name))
        .unwrap_or_else(|| panic!("no reuse row for {name}: {:#}", report["reuse"]))["histogram"]
        .clone()
}

/// (from, reuses) per bin.
fn bins(h: &serde_json::Value) -> Vec<(u64, f64)> {
    h["bins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["from"].as_u64().unwrap(), b["reuses"].as_f64().unwrap()))
        .collect()
}

/// Records tests/programs/reuse_patterns.c with `--reuse RATE`.
fn reuse_profile(
    dir: &std::path::Path,
    app: &std::path::Path,
    rate: &str,
    args: &[&str],
) -> serde_json::Value {
    let p = dir.join(format!("reuse-{rate}"));
    let mut command = vec![app.to_string_lossy().into_owned()];
    command.extend(args.iter().map(|a| a.to_string()));
    let command: Vec<&str> = command.iter().map(String::as_str).collect();
    let out = record(&p, &["--reuse", rate], &command);
    assert_ran(&out);
    report_json(&p)
}

/// docs/report.md's reuse view is what the report prints for its command.
#[test]
fn the_documented_reuse_view_is_the_reports() {
    let dir = tempdir();
    let app = memlens_cc(dir.path(), "reuse_patterns.c", &["-O2"]);
    let p = dir.path().join("p");
    let args = [app.to_str().unwrap(), "300", "4", "8192", "300000", "777"];
    assert_ran(&record(&p, &["--reuse", "1"], &args));
    assert_documented_excerpt("docs/report.md", "REUSE DISTANCE", &report_text(&p));
}

#[test]
fn reuse_distances_equal_the_brute_force_answer() {
    let dir = tempdir();
    let app = memlens_cc(dir.path(), "reuse_patterns.c", &["-O2"]);
    let (cyclic_lines, sweeps, random_lines, accesses, seed) =
        (300u64, 4u64, 500u64, 40_000usize, 12345u64);
    let args = [cyclic_lines, sweeps, random_lines, accesses as u64, seed].map(|n| n.to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let report = reuse_profile(dir.path(), &app, "1", &args);
    assert_eq!(report["reuse"]["exact"], true, "{:#}", report["reuse"]);

    // Cyclic sweep: the first sweep's lines are cold, every other access sees
    // all the other lines in between.
    let cyclic = reuse_of(&report, "cyclic_data");
    assert_eq!(cyclic["cold"].as_f64(), Some(cyclic_lines as f64));
    assert_eq!(
        cyclic["reuses"].as_f64(),
        Some((cyclic_lines * (sweeps - 1)) as f64)
    );
    assert_eq!(
        cyclic["mean_distance"].as_f64(),
        Some((cyclic_lines - 1) as f64)
    );
    assert_eq!(bins(&cyclic), [(256, (cyclic_lines * (sweeps - 1)) as f64)]);
    let load = format!(
        "reuse_patterns.c:{}",
        source_line("reuse_patterns.c", "sum += cyclic_data")
    );
    let pair = report["reuse"]["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["object"].as_str().unwrap().starts_with("cyclic_data"))
        .unwrap();
    assert!(
        pair["use_location"].as_str().unwrap().contains(&load),
        "{pair:#}"
    );
    assert!(
        pair["reuse_location"].as_str().unwrap().contains(&load),
        "{pair:#}"
    );
    // Both ends carry their full calling context: the load, called from main.
    for context in ["use_context", "reuse_context"] {
        let frames = pair[context].as_array().unwrap();
        assert!(frames[0].as_str().unwrap().contains(&load), "{pair:#}");
        assert!(
            frames
                .iter()
                .any(|f| f.as_str().unwrap().starts_with("main (")),
            "{pair:#}"
        );
    }
    // The only pair on cyclic_data: all of the object's reuses, none cold.
    assert_eq!(pair["histogram"]["bins"], cyclic["bins"]);
    assert_eq!(pair["histogram"]["reuses"], cyclic["reuses"]);
    assert_eq!(pair["histogram"]["cold"], 0.0);

    // Random lines: replay the program's draw and count distinct lines between
    // each use and reuse by definition.
    let mut x = seed;
    let lines: Vec<u64> = (0..accesses)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % random_lines
        })
        .collect();
    let mut expected: std::collections::BTreeMap<u64, f64> = Default::default();
    let (mut cold, mut sum) = (0u64, 0u64);
    let mut stamp = vec![usize::MAX; random_lines as usize];
    for i in 0..accesses {
        let mut distinct = 0u64;
        let found = (0..i).rev().find(|&j| {
            if lines[j] == lines[i] {
                return true;
            }
            if stamp[lines[j] as usize] != i {
                stamp[lines[j] as usize] = i;
                distinct += 1;
            }
            false
        });
        match found {
            None => cold += 1,
            Some(_) => {
                let bin = if distinct == 0 {
                    0
                } else {
                    1u64 << (63 - distinct.leading_zeros())
                };
                *expected.entry(bin).or_default() += 1.0;
                sum += distinct;
            }
        }
    }
    let random = reuse_of(&report, "random_data");
    assert_eq!(random["accesses"].as_f64(), Some(accesses as f64));
    assert_eq!(random["cold"].as_f64(), Some(cold as f64));
    assert_eq!(bins(&random), expected.into_iter().collect::<Vec<_>>());
    let mean = sum as f64 / (accesses as u64 - cold) as f64;
    assert!((random["mean_distance"].as_f64().unwrap() - mean).abs() < 1e-9 * mean);
}

#[test]
fn sampled_lines_estimate_reuse_within_stated_tolerance() {
    // SHARDS at 1 line in 8 over 8192 random lines (~1000 chosen) against the
    // exact stream: mean distance within 3%, the cumulative share at every
    // power-of-two distance within 1.5 points (six runs: -1.2% to +0.7%, and
    // 0.5 points at most; the lines chosen change with the arrays' addresses).
    let dir = tempdir();
    let app = memlens_cc(dir.path(), "reuse_patterns.c", &["-O2"]);
    let args = ["300", "4", "8192", "300000", "777"];
    let exact = reuse_of(&reuse_profile(dir.path(), &app, "1", &args), "random_data");
    let report = reuse_profile(dir.path(), &app, "8", &args);
    assert_eq!(report["reuse"]["exact"], false);
    assert!(report["reuse"]["method"]
        .as_str()
        .unwrap()
        .contains("SHARDS"));
    let estimate = reuse_of(&report, "random_data");
    let mean = |h: &serde_json::Value| h["mean_distance"].as_f64().unwrap();
    assert!(
        (mean(&estimate) / mean(&exact) - 1.0).abs() < 0.03,
        "{} vs {}",
        mean(&estimate),
        mean(&exact)
    );
    let cumulative = |h: &serde_json::Value, below: u64| {
        let total = h["reuses"].as_f64().unwrap();
        bins(h)
            .iter()
            .filter(|b| b.0 < below)
            .map(|b| b.1)
            .sum::<f64>()
            / total
    };
    for k in 0..16 {
        let (a, b) = (cumulative(&estimate, 1 << k), cumulative(&exact, 1 << k));
        assert!((a - b).abs() < 0.015, "below {}: {a} vs {b}", 1 << k);
    }
    // The exact run made every access a sample: its HTML page paints the
    // 300 000 dots into one PNG layer of the scatter and stays small (a
    // circle element per sample made it 28 MB).
    let page = html_report(&dir.path().join("reuse-1"), &dir.path().join("reuse.html"));
    assert!(page.len() < 3 << 20, "{} bytes", page.len());
    assert!(page.contains("<image x=") && page.contains("href=\"data:image/png;base64,"));
    let circles = page.matches("<circle").count();
    assert!(circles < 100, "{circles} circles");
}

/// Per phase bin of the folded region "iteration": each array's share of the
/// bin's samples and mean position in the array (0 start, 1 end).
fn folded_shape(p: &std::path::Path) -> Vec<std::collections::BTreeMap<String, (f64, f64)>> {
    let out = Command::new(memlens())
        .args([
            "report",
            "--format",
            "json",
            "--fold",
            "iteration",
            "--fold-bins",
            "12",
        ])
        .arg(p)
        .output()
        .unwrap();
    assert_ran(&out);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let f = &report["folding"];
    // Instances preempted long enough to double are left out (many, on a
    // loaded 2-core machine).
    assert!(
        f["folded"].as_f64().unwrap() >= 0.5 * f["instances"].as_f64().unwrap(),
        "{f:#}"
    );
    let (exact, est) = (
        f["exact_accesses_per_instance"].as_f64().unwrap(),
        f["est_accesses_per_instance"].as_f64().unwrap(),
    );
    // samples x period over the folded instances, within the sampler's bound
    // (each instance cut at both ends, for each of its access classes).
    let folded = f["folded"].as_u64().unwrap();
    let bound = sampling_error_bound(
        f["samples"].as_u64().unwrap(),
        f["period"].as_u64().unwrap(),
        folded * 2 * 10,
    );
    assert!(
        ((est - exact) * folded as f64).abs() <= bound,
        "{est} vs {exact} per instance"
    );
    f["bins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            let total = b["samples"].as_f64().unwrap();
            b["objects"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| {
                    let name = o["name"]
                        .as_str()
                        .unwrap()
                        .split(' ')
                        .next()
                        .unwrap()
                        .to_string();
                    (
                        name,
                        (
                            o["samples"].as_f64().unwrap() / total,
                            o["mean_offset"].as_f64().unwrap(),
                        ),
                    )
                })
                .collect()
        })
        .collect()
}

#[test]
fn a_coarsely_sampled_loop_folds_to_the_finely_sampled_iteration() {
    // tests/programs/fold_phases.c: 1000 iterations at the default period
    // (~12 samples per iteration) against 96 at period 256 (~190 per
    // iteration). Tolerance: each array's share of a twelfth of the iteration
    // within 0.2; its mean position within 0.2 in the bins inside a copy where
    // both runs have it in 30% of the bin (next to a copy's end the mean
    // position jumps from the end of one array to the start of another, and
    // a phase shift of 0.03 moved it by 0.26). Measured over six runs, three
    // beside two busy loops: up to 0.14 and 0.07. WORK=16 makes each element's
    // cost arithmetic (~110 us iterations), so the copies last alike at both
    // periods: with bare copies (40 us) and period 16 the fine run's timing
    // was the runtime's own, whose log takes ~0.2 ms to map and fault in a new
    // 64 KiB block on this VM, every 2048 samples. The instances that still
    // meet one, or the scheduler, are pruned as outliers.
    let dir = tempdir();
    let app = memlens_cc(dir.path(), "fold_phases.c", &["-O2", "-DWORK=16"]);
    let app = app.to_string_lossy();
    let coarse = dir.path().join("coarse");
    let fine = dir.path().join("fine");
    for (p, flags, iterations) in [
        (&coarse, vec![], "1000"),
        (&fine, vec!["--period", "256"], "96"),
    ] {
        let out = record(p, &flags, &[&app, iterations]);
        assert_ran(&out);
    }
    let image = dir.path().join("fold.svg");
    let out = plot("fold", &coarse, &image);
    assert_ran(&out);
    let svg = std::fs::read_to_string(&image).unwrap();
    assert!(svg.contains("region iteration folded") && svg.contains("phase of the instance"));
    // Fewer than 8 instances are folded only when asked for by name.
    let out = Command::new(memlens())
        .args(["report", "--fold", "nosuch"])
        .arg(&fine)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no finished instance of region \"nosuch\"")
    );
    // The section's head as docs/report.md shows it (its rows' objects come
    // in either order: a copy's source and destination get as many samples).
    let out = Command::new(memlens())
        .args(["report", "--fold", "iteration", "--fold-bins", "12"])
        .arg(&coarse)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let documented = documented_block("docs/report.md", "FOLDING");
    let mut head: Vec<&str> = documented[..4].iter().map(String::as_str).collect();
    head.push("...");
    let at = text.find("\nFOLDING\n").expect("a FOLDING section") + 1;
    assert_documented_output(&head, &text[at..]);
    let (coarse, fine) = (folded_shape(&coarse), folded_shape(&fine));
    assert_eq!((coarse.len(), fine.len()), (12, 12));
    let share = |bin: &std::collections::BTreeMap<String, (f64, f64)>, array: &str| {
        bin.get(array).copied().unwrap_or((0.0, 0.0))
    };
    for (k, (c, f)) in coarse.iter().zip(&fine).enumerate() {
        // The known shape: each third copies between two arrays, sweeping them.
        let absent = ["third", "first", "second"][k / 4];
        let inner = k % 4 == 1 || k % 4 == 2;
        for array in ["first", "second", "third"] {
            let (sc, oc) = share(c, array);
            let (sf, of) = share(f, array);
            assert!((sc - sf).abs() < 0.2, "bin {k} {array}: {c:?} vs {f:?}");
            if inner && sc > 0.3 && sf > 0.3 {
                assert!((oc - of).abs() < 0.2, "bin {k} {array}: {c:?} vs {f:?}");
            }
        }
        for run in [c, f] {
            if inner {
                assert!(share(run, absent).0 < 0.1, "bin {k}: {run:?}");
            }
        }
    }
    for run in [&coarse, &fine] {
        let offsets: Vec<f64> = (0..4).map(|k| share(&run[k], "first").1).collect();
        assert!(offsets.windows(2).all(|w| w[0] < w[1]), "{offsets:?}");
    }
}

#[test]
fn sample_times_keep_the_real_clock_between_its_readings() {
    // The runtime stamps a sample from the time stamp counter, interpolated
    // from its thread's last reading of CLOCK_MONOTONIC (at most 50 us old),
    // at a rate measured against that clock. fold_phases at WORK=16 loads at
    // a steady pace (~40 ns an element); at period 64 a load sample comes
    // every ~2.5 us, twenty to a reading. Their typical gap, the median,
    // must equal the pace over 64 samples, which spans readings and so is
    // the real clock's. A rate off by a third shows as a median gap off by
    // a third (too fast: gaps stretched, then samples held at the reading
    // they overtook; too slow: gaps shrunk, then a jump at each reading).
    // Measured: within 3%; jitter of the period is +-12.5% per gap.
    let dir = tempdir();
    let app = memlens_cc(dir.path(), "fold_phases.c", &["-O2", "-DWORK=16"]);
    let p = dir.path().join("p");
    let out = record(
        &p,
        &["--period", "64", "--no-stores"],
        &[&app.to_string_lossy(), "100"],
    );
    assert_ran(&out);
    let mut times: Vec<u64> = memlens_profile::read_table::<AccessSample>(&p)
        .unwrap()
        .iter()
        .map(|s| s.time_ns)
        .collect();
    times.sort_unstable();
    assert!(times.len() > 10_000, "{} samples", times.len());
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let gap = median(times.windows(2).map(|w| (w[1] - w[0]) as f64).collect());
    let pace = median(
        times
            .windows(65)
            .map(|w| (w[64] - w[0]) as f64 / 64.0)
            .collect(),
    );
    eprintln!("median gap {gap:.0} ns, pace over 64 samples {pace:.0} ns");
    assert!(
        (gap / pace - 1.0).abs() < 0.15,
        "gap {gap} ns, pace {pace} ns"
    );
}

#[test]
fn what_record_reads_while_the_program_runs_equals_the_finalizers_replay() {
    // `record` writes each image's samples and gathers its definitions
    // (stacks, modules, strings, exit) as it follows the logs, complete once
    // the image's process exited or exec'd; the finalizer alone (`memlens
    // finalize` of the same raw logs) reads them from the logs. Both must
    // give the same rows: a thread, the main thread, a forked child and the
    // image it execs (tests/programs/fork_samples.c).
    let dir = tempdir();
    let app = memlens_cc(dir.path(), "fork_samples.c", &["-O2", "-pthread"]);
    let p = dir.path().join("p");
    assert_ran(&record(&p, &["--keep-raw"], &[&app.to_string_lossy()]));
    let replayed = dir.path().join("q");
    std::fs::create_dir_all(replayed.join("raw")).unwrap();
    for f in std::fs::read_dir(p.join("raw")).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, replayed.join("raw").join(f.file_name().unwrap())).unwrap();
    }
    let out = Command::new(memlens())
        .arg("finalize")
        .arg(&replayed)
        .output()
        .unwrap();
    assert_ran(&out);
    // A table's rows by `key`, sorted.
    fn sorted_rows<T: memlens_profile::Table, K: Ord>(
        p: &std::path::Path,
        key: impl Fn(&T) -> K,
    ) -> Vec<K> {
        let mut rows: Vec<K> = (memlens_profile::read_table::<T>(p).unwrap().iter())
            .map(key)
            .collect();
        rows.sort_unstable();
        rows
    }
    // Times as the clock read them: the two count from different starts.
    let rows = |p: &std::path::Path| {
        let start = memlens_profile::Meta::read(p).unwrap().clock.start_ns;
        sorted_rows(p, |s: &AccessSample| {
            let t = start + s.time_ns;
            (
                s.pid, s.tid, t, s.pc, s.address, s.size, s.is_store, s.stack_id, s.cpu, s.bulk,
            )
        })
    };
    let (live, replayed_rows) = (rows(&p), rows(&replayed));
    let streams: std::collections::BTreeSet<(u32, u32)> = live.iter().map(|r| (r.0, r.1)).collect();
    assert_eq!(streams.len(), 3, "{streams:?}");
    assert!(live.len() > 500, "{} samples", live.len());
    assert!(
        live == replayed_rows,
        "{} rows live, {} replayed",
        live.len(),
        replayed_rows.len()
    );
    // Every sampled code address is symbolized in both.
    let pcs = |p: &std::path::Path| {
        let located: std::collections::BTreeSet<(u32, u64)> =
            memlens_profile::read_table::<memlens_profile::CodeLocation>(p)
                .unwrap()
                .iter()
                .map(|l| (l.pid, l.pc))
                .collect();
        located
    };
    let sampled: std::collections::BTreeSet<(u32, u64)> = live.iter().map(|r| (r.0, r.3)).collect();
    assert!(sampled.is_subset(&pcs(&p)) && sampled.is_subset(&pcs(&replayed)));
    // Each sample's context was walked by frame pointers (the program's
    // blocks by DWARF rules), a bulk copy's once for all its samples of a
    // direction: the runtime counts those, the finalizer the others from the
    // sample records.
    let bulk = live.iter().filter(|r| r.9).count();
    assert!(bulk > 400, "{bulk} bulk samples");
    let mut expected: std::collections::BTreeMap<u32, u64> = Default::default();
    for r in live.iter().filter(|r| !r.9) {
        *expected.entry(r.0).or_default() += 1;
    }
    // The parent (the process with two threads) made 400 copies, each one's
    // source and destination sampled, with a walk each.
    let parent = streams
        .iter()
        .map(|s| s.0)
        .find(|&pid| streams.iter().filter(|s| s.0 == pid).count() == 2);
    *expected.get_mut(&parent.unwrap()).unwrap() += 2 * 400;
    for profile in [&p, &replayed] {
        let mut walks: std::collections::BTreeMap<u32, u64> = Default::default();
        for proc in memlens_profile::Meta::read(profile).unwrap().processes {
            *walks.entry(proc.pid).or_default() += proc.stacks_unwound.frame_pointers;
        }
        assert_eq!(walks, expected, "{}", profile.display());
    }
    // The tables the definitions make: symbolized stacks, modules (their
    // load times as the clock read them), variables, and how each image ended.
    let frames = |p: &std::path::Path| {
        sorted_rows(p, |f: &memlens_profile::Frame| {
            (
                f.pid,
                f.stack_id,
                f.depth,
                f.address,
                f.function.clone(),
                f.line,
            )
        })
    };
    let modules = |p: &std::path::Path| {
        let start = memlens_profile::Meta::read(p).unwrap().clock.start_ns;
        sorted_rows(p, |m: &memlens_profile::Module| {
            (
                m.pid,
                m.path.clone(),
                m.start,
                m.end,
                m.bias,
                start + m.load_ns,
            )
        })
    };
    let statics = |p: &std::path::Path| {
        sorted_rows(p, |s: &memlens_profile::StaticObject| {
            (s.pid, s.name.clone(), s.address, s.size)
        })
    };
    let ends = |p: &std::path::Path| {
        let meta = memlens_profile::Meta::read(p).unwrap();
        let mut ends: Vec<_> = (meta.processes.iter())
            .map(|q| {
                (
                    q.pid,
                    q.exec_seq,
                    q.exit_code,
                    q.end_ns.map(|t| t + meta.clock.start_ns),
                )
            })
            .collect();
        ends.sort_unstable();
        ends
    };
    assert!(frames(&p).len() > 10 && statics(&p).iter().any(|s| s.1 == "mine"));
    assert_eq!(frames(&p), frames(&replayed));
    assert_eq!(modules(&p), modules(&replayed));
    assert_eq!(statics(&p), statics(&replayed));
    assert_eq!(ends(&p).len(), 3, "{:?}", ends(&p));
    assert_eq!(ends(&p), ends(&replayed));
}

#[test]
fn threads_have_exact_counts_and_a_report_of_their_own() {
    // Ticks every millisecond: the workers' traffic is read many times.
    let (_dir, p) = recorded_program(
        "false_sharing.c",
        &["-O2", "-pthread"],
        &["--interval", "1"],
    );
    let report = report_json(&p);
    let threads = report["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 3, "{threads:#?}");
    // Each worker increments its counter ROUNDS times: a load and a store each.
    const ROUNDS: u64 = 10_000_000;
    let workers: Vec<&serde_json::Value> =
        threads.iter().filter(|t| t["loads"] == ROUNDS).collect();
    assert_eq!(workers.len(), 2, "{threads:#?}");
    for t in &workers {
        assert_eq!(t["stores"], ROUNDS);
        assert_eq!(t["final_counts"], true);
        assert!(t["end_ns"].as_u64() > t["start_ns"].as_u64());
    }
    // Each worker's traffic over time: cumulative, rising, and never past
    // its exact total (each point is the count it last published).
    for t in &workers {
        let points = sql_json(
            &p,
            &format!("SELECT time_ns, stores, bytes_written FROM thread_timeline WHERE tid = {} ORDER BY time_ns", t["tid"]),
        );
        assert!(points.len() >= 2, "{} points: {points:?}", points.len());
        let stores: Vec<u64> = points
            .iter()
            .map(|r| r["stores"].as_u64().unwrap())
            .collect();
        assert!(stores.windows(2).all(|w| w[0] <= w[1]), "{stores:?}");
        assert!(*stores.last().unwrap() <= ROUNDS, "{stores:?}");
        assert!(points
            .iter()
            .all(|r| r["bytes_written"].as_u64() == Some(8 * r["stores"].as_u64().unwrap())));
    }
    let summed: u64 = threads
        .iter()
        .map(|t| t["loads"].as_u64().unwrap() + t["stores"].as_u64().unwrap())
        .sum();
    assert_eq!(summed, report["access"]["counted"].as_u64().unwrap());

    // One thread's view: its samples, its exact counts, no sharing with itself.
    let tid = workers[0]["tid"].as_u64().unwrap();
    let out = report_view(&p, &["--thread", &tid.to_string()]);
    assert_ran(&out);
    let view: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(view["summary"]["only"]["Thread"], tid);
    assert_eq!(view["access"]["counted"], 2 * ROUNDS);
    assert_eq!(view["access"]["samples"], workers[0]["samples"]);
    assert!(
        view["access"]["accuracy"].as_f64().unwrap() > 0.98,
        "{:#}",
        view["access"]
    );
    assert_eq!(view["sharing"].as_array().unwrap().len(), 0);
    // The process view keeps both workers; a thread or process not there is refused.
    let pid = workers[0]["pid"].as_u64().unwrap();
    let out = report_view(&p, &["--pid", &pid.to_string()]);
    let view: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(view["access"]["counted"], report["access"]["counted"]);
    for bad in [["--thread", "4000000000"], ["--pid", "4000000000"]] {
        let out = report_view(&p, &bad);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("no thread 4000000000") || err.contains("no process 4000000000"),
            "{err}"
        );
    }
}

#[test]
fn c_names_are_reported_as_the_program_spells_them() {
    let (_dir, p) = recorded_program("c_names.c", &["-O2", "-g"], &[]);
    let r = report_json(&p);
    let objects = r["access"]["objects"].as_array().unwrap();
    // One-letter statics keep their names (demangling read them as types).
    for name in ["a", "b", "c", "quads"] {
        let o = named(&r["access"]["objects"], &format!("{name} [c_names]"));
        assert_eq!(o["kind"], "static", "{o}");
    }
    for o in objects {
        let name = o["name"].as_str().unwrap();
        assert!(
            !["signed char", "bool", "char"].contains(&name.split(" [").next().unwrap()),
            "{name}"
        );
        for line in o["lines"].as_array().unwrap() {
            // Never a line 0: a merged instruction is named without a line.
            let at = line["location"].as_str().unwrap();
            assert!(!at.contains(":0)"), "{at}");
        }
    }
    // The functions f and g, not "float" and "__float128".
    let lines_of = |name: &str| -> Vec<String> {
        named(&r["access"]["objects"], &format!("{name} [c_names]"))["lines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["location"].as_str().unwrap().to_string())
            .collect()
    };
    let f_line = source_line("c_names.c", "a[i] = b[i] + s * c[i]");
    assert!(
        lines_of("b").contains(&format!("f (c_names.c:{f_line})")),
        "{:?}",
        lines_of("b")
    );
    assert!(
        lines_of("quads")
            .iter()
            .all(|l| l.starts_with("g (c_names.c")),
        "{:?}",
        lines_of("quads")
    );
}

/// An object's estimated (bytes read, bytes written), in MiB.
fn est_mib(report: &serde_json::Value, name: &str) -> (f64, f64) {
    let o = named(&report["access"]["objects"], name);
    let mib = |k: &str| o[k].as_f64().unwrap() / (1u64 << 20) as f64;
    (mib("est_bytes_read"), mib("est_bytes_written"))
}

#[test]
fn bulk_copies_are_attributed_to_the_objects_they_touch() {
    // STREAM's copy kernel becomes a memcpy at -O2: each array's bytes,
    // copy and initialisation included, within 3% of the truth.
    let n = 1_000_000u64;
    let (_dir, p) = recorded_stream(
        &[&format!("-DN={n}L"), "-DCHASE=4096L"],
        &["--period", "1009"],
    );
    let r = report_json(&p);
    let a = &r["access"];
    assert!(a["bulk_samples"].as_u64().unwrap() > 0, "no memcpy sampled");
    let pass = (n * 8) as f64 / (1u64 << 20) as f64;
    // The truth, in passes over one array (10 repetitions): a is read by copy
    // and add, written by the initialisation and triad; b read by add and
    // triad, written by the initialisation and scale; c read by scale and
    // triad, written by copy and add (clang drops its initialisation, which
    // the copy overwrites: the exact count below checks it).
    let written_passes = 11 + 11 + 20;
    let exact_written = a["bytes_written"].as_u64().unwrap() as f64 / (1u64 << 20) as f64;
    assert!(
        (exact_written - written_passes as f64 * pass).abs() < 1.0,
        "{exact_written} MiB written"
    );
    let site = |line: &str| {
        format!(
            "main (stream.c:{})",
            1 + std::fs::read_to_string(root().join("examples/stream.c"))
                .unwrap()
                .lines()
                .position(|l| l.contains(line))
                .unwrap()
        )
    };
    for (array, read, written) in [("a", 20.0, 11.0), ("b", 20.0, 11.0), ("c", 20.0, 20.0)] {
        let (r_mib, w_mib) = est_mib(&r, &site(&format!("double *{array} = malloc")));
        for (what, est, truth) in [("read", r_mib, read), ("written", w_mib, written)] {
            let err = est / (truth * pass) - 1.0;
            assert!(
                err.abs() < 0.03,
                "{array} {what}: {est:.1} MiB, {:+.1}%",
                err * 100.0
            );
        }
    }
    // The copy region lists the two arrays it touches, and its bandwidth
    // from samples alone is near the exact one.
    let copy = named(&a["regions"], "copy");
    let touched: Vec<&str> = (copy["objects"].as_array().unwrap().iter())
        .map(|o| o[0].as_str().unwrap())
        .collect();
    assert_eq!(touched.len(), 2, "{copy}");
    assert!(
        touched.contains(&site("double *a = malloc").as_str()),
        "{copy}"
    );
    assert!(
        touched.contains(&site("double *c = malloc").as_str()),
        "{copy}"
    );
    // The samples of counted accesses alone give the accuracy.
    assert!(a["accuracy"].as_f64().unwrap() > 0.99, "{}", a["accuracy"]);

    // memset writes, memmove and memcpy read and write: 40 MiB each way.
    let (_dir, p) = recorded_program("bulk.c", &["-O2", "-g"], &["--period", "1009"]);
    let r = report_json(&p);
    for (name, read, written) in [
        ("zeroed [bulk]", 40.0, 40.0),
        ("moved [bulk]", 40.0, 40.0),
        ("copied [bulk]", 0.0, 40.0),
    ] {
        let (r_mib, w_mib) = est_mib(&r, name);
        assert!(
            (r_mib - read).abs() <= 0.03 * read.max(1.0),
            "{name} read {r_mib}"
        );
        assert!(
            (w_mib - written).abs() <= 0.03 * written,
            "{name} written {w_mib}"
        );
    }
    for (region, objects) in [
        ("memset", vec!["zeroed [bulk]"]),
        ("memmove", vec!["moved [bulk]"]),
        ("memcpy", vec!["copied [bulk]", "zeroed [bulk]"]),
    ] {
        let mut touched: Vec<&str> = (named(&r["access"]["regions"], region)["objects"]
            .as_array()
            .unwrap()
            .iter())
        .map(|o| o[0].as_str().unwrap())
        .collect();
        touched.sort();
        assert_eq!(touched, objects, "{region}");
    }
}

#[test]
fn access_contexts_split_one_routine_by_its_callers() {
    // sum() reads the array from often() three times as often as from
    // seldom(): one access line, two calling contexts, 3:1.
    let (dir, p) = recorded_program("contexts.c", &["-O2", "-g"], &[]);
    let r = report_json(&p);
    let data = &r["access"]["objects"][0];
    let at = |mark: &str| format!("(contexts.c:{})", source_line("contexts.c", mark));
    let read = format!("sum {}", at("/* READ */"));
    let samples_via = |caller: &str| -> u64 {
        let caller = format!("{caller} {}", at(&format!("/* {} ", caller.to_uppercase())));
        (data["contexts"].as_array().unwrap().iter())
            .filter(|c| c["frames"][0] == read.as_str() && c["frames"][1] == caller.as_str())
            .map(|c| c["samples"].as_u64().unwrap())
            .sum()
    };
    let (often, seldom) = (samples_via("often"), samples_via("seldom"));
    assert!(often > 0 && seldom > 0, "{:#}", data["contexts"]);
    let share = often as f64 / (often + seldom) as f64;
    assert!(
        (share - 0.75).abs() < 0.075,
        "often {often}, seldom {seldom}"
    );
    // The flame graph of accesses nests the two callers under the array.
    let svg = dir.path().join("access.svg");
    assert_ran(&plot_with("flame", &["--accesses"], &p, &svg));
    let svg = std::fs::read_to_string(&svg).unwrap();
    for caller in ["often", "seldom"] {
        assert!(svg.contains(&format!("{caller} (contexts.c:")), "{caller}");
    }
    assert!(svg.contains(&format!("load at {read}")));
}

#[test]
fn a_process_phase_counts_every_threads_bytes() {
    // Main marks a phase and a region around two threads that write an
    // array's halves: the phase has all 8 000 000 bytes, main's region none.
    let (_dir, p) = recorded_program("process_phase.c", &["-O2", "-g", "-pthread"], &[]);
    let r = report_json(&p);
    let regions = &r["access"]["regions"];
    let phase = named(regions, "fill [process]");
    let written = phase["bytes_written"].as_u64().unwrap();
    assert!((8_000_000..8_004_096).contains(&written), "{phase}");
    assert!(
        phase["objects"][0][0]
            .as_str()
            .unwrap()
            .starts_with("main (process_phase.c:"),
        "{phase}"
    );
    let region = named(regions, "fill");
    assert!(region["bytes_written"].as_u64().unwrap() < 4096, "{region}");
    // One thread's view leaves the phase out: its counts are the process's.
    let tid = r["threads"][0]["tid"].as_u64().unwrap().to_string();
    let one = report_view(&p, &["--thread", &tid]);
    assert_ran(&one);
    let one: serde_json::Value = serde_json::from_slice(&one.stdout).unwrap();
    let names = names(&one["access"]["regions"]);
    assert!(!names.iter().any(|n| n.contains("[process]")), "{names:?}");
}

#[test]
fn a_program_built_by_another_memlens_records_with_one_runtime() {
    // `memlens cc` links the program to the runtime of its own install; a
    // memlens installed elsewhere (or its embedded copy in the cache)
    // preloads its own. The runtime names itself (DT_SONAME), so ld.so
    // takes the preloaded one for the program's need: before, both were
    // loaded, each opened a log, and the second's zero counts were the
    // process's last timeline point.
    let dir = tempdir();
    let app = memlens_cc(dir.path(), "init_then_read.c", &["-O2", "-pthread"]);
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let copy = elsewhere.join(memlens_profile::RUNTIME_FILE);
    std::fs::copy(runtime(), &copy).unwrap();
    let p = dir.path().join("p");
    let runtime_elsewhere = [("MEMLENS_RUNTIME", copy.to_str().unwrap())];
    assert_ran(&record_with(
        &runtime_elsewhere,
        &p,
        &[],
        &[&app.to_string_lossy()],
    ));
    let meta = memlens_profile::Meta::read(&p).unwrap();
    assert_eq!(meta.processes.len(), 1, "{:?}", meta.processes);
    // Main writes the table 100 000 times, two readers load it 2 million
    // times each: the last capacity point holds every thread's exact counts.
    let threads = memlens_profile::read_table::<memlens_profile::ThreadRow>(&p).unwrap();
    let loads: u64 = threads.iter().map(|t| t.loads.unwrap_or(0)).sum();
    assert!(loads >= 4_000_000, "{loads} loads");
    let timeline = memlens_profile::read_table::<TimelinePoint>(&p).unwrap();
    let last = timeline.iter().max_by_key(|t| t.time_ns).unwrap();
    assert_eq!(last.loads, loads, "{timeline:?}");
}

#[test]
fn exact_counts_equal_cachegrinds_data_references_of_the_programs_code() {
    // The same source built uninstrumented by the same compiler, under
    // cachegrind: its data reads and writes in stream.c's main (the hot
    // loops spill nothing) are what memlens counts exactly; memcpy's own
    // references in libc are counted by memlens as bytes, apart.
    let dir = tempdir();
    let plain = plain_build(dir.path(), "examples/stream.c", &["-O2", "-g"]);
    let out_file = dir.path().join("cg.out");
    let cg = Command::new("valgrind")
        .args(["--tool=cachegrind", "--cache-sim=yes"])
        .arg(format!("--cachegrind-out-file={}", out_file.display()))
        .arg(&plain)
        .output()
        .unwrap();
    assert_ran(&cg);
    let annotated = Command::new("cg_annotate").arg(&out_file).output().unwrap();
    let annotated = String::from_utf8_lossy(&annotated.stdout);
    // Columns: Ir I1mr ILmr Dr D1mr DLmr Dw ..., each count then its share.
    let main = (annotated.lines())
        .find(|l| l.trim_end().ends_with("examples/stream.c:main"))
        .unwrap_or_else(|| panic!("{annotated}"));
    let counts: Vec<u64> = (main.split_whitespace())
        .filter_map(|w| w.replace(',', "").parse().ok())
        .collect();
    let (reads, writes) = (counts[3], counts[6]);
    let app = stream_example(dir.path(), &[]);
    let p = dir.path().join("p");
    assert_ran(&record(&p, &[], &[&app]));
    let r = report_json(&p);
    let thread = &r["threads"][0];
    let (loads, stores) = (
        thread["loads"].as_u64().unwrap(),
        thread["stores"].as_u64().unwrap(),
    );
    let near = |a: u64, b: u64| a.abs_diff(b) <= b / 100_000;
    assert!(near(loads, reads), "loads {loads}, cachegrind {reads}");
    assert!(near(stores, writes), "stores {stores}, cachegrind {writes}");
}

#[test]
fn counts_stay_exact_across_calls_throws_and_longjmps() {
    // The pass keeps a function's countdowns in registers and writes them
    // back at calls: a count lost or doubled there, on a throw's landing pad
    // or after a longjmp, would change these. The pass is built for each
    // clang's LLVM, and the fast path written in its dialect: with clang-14
    // (typed pointers, no LTO), 15, 16 and 19 (.ci/run installs them) the
    // counts are the same.
    for clang in ["clang-14", "clang-15", "clang-16", "clang-19"] {
        let dir = tempdir();
        // The C driver compiles a .cpp as C++; the C++ and math libraries are named.
        let app = memlens_cc_with(
            &[("MEMLENS_CLANG", clang)],
            dir.path(),
            "calls_and_jumps.cpp",
            &["-O2", "-lstdc++", "-lm"],
        );
        let p = dir.path().join("p");
        assert_ran(&record(&p, &[], &[&app.to_string_lossy()]));
        assert_calls_and_jumps_counted(&report_json(&p), &app, clang);

        // STREAM's kernels, whose copy loop the optimizer makes a memcpy.
        let stream = memlens_cc_with(
            &[("MEMLENS_CLANG", clang)],
            dir.path(),
            "stream_timed.c",
            &["-O2"],
        );
        let p = dir.path().join("stream");
        assert_ran(&record(&p, &[], &[&stream.to_string_lossy(), "2"]));
        assert_stream_regions_exact(&report_json(&p), clang);
    }
}

#[test]
fn small_blocks_are_attributed_at_the_defaults_and_only_those_hit_keep_rows() {
    // 20 000 rows of 216 bytes, one malloc each, read 50 times over, and
    // 100 050 short-lived blocks: at the defaults every block of an
    // instrumented program is recorded, each sample finds its block, and a
    // small block keeps a row only if a sample hit it. Before: the rows
    // were under --min-size and unsampled, most samples "unknown".
    let (dir, p) = recorded_program("small_blocks.c", &["-O2"], &[]);
    let r = report_json(&p);
    assert_accesses_named(&r);
    let a = &r["access"];
    let row = format!(
        "main (small_blocks.c:{})",
        source_line("small_blocks.c", "/* ROW */")
    );
    let rows = named(&a["objects"], &row);
    let read = rows["est_bytes_read"].as_f64().unwrap();
    let truth = 50.0 * 20_000.0 * 216.0;
    assert!(
        (read / truth - 1.0).abs() < 0.05,
        "rows read {read}, truth {truth}"
    );
    // Rows of their own: the blocks samples hit (and the few large ones),
    // not one per block.
    let n = sql_json(&p, "SELECT COUNT(*) AS n FROM allocations")[0]["n"]
        .as_u64()
        .unwrap();
    let samples = a["samples"].as_u64().unwrap();
    assert!(
        n <= samples + 100 && n < 100_000,
        "{n} rows for {samples} samples"
    );
    let temporaries = named(
        &r["objects_by_allocated"],
        &format!(
            "main (small_blocks.c:{})",
            source_line("small_blocks.c", "/* TEMPORARY */")
        ),
    );
    assert_eq!(temporaries["allocations"], 100_000.0, "{temporaries}");

    // Started by a shell, as a script or a launcher would: the runtime
    // tells the instrumented image itself, and records its every block.
    let app = memlens_cc(dir.path(), "small_blocks.c", &["-O2"]);
    let through_shell = dir.path().join("sh");
    let script = format!("{} > /dev/null", app.display());
    assert_ran(&record(&through_shell, &[], &["sh", "-c", &script]));
    let r = report_json(&through_shell);
    assert_accesses_named(&r);
    assert_eq!(r["summary"]["settings"]["sample_rate"], 1);
}

#[test]
fn regions_timed_by_runs_of_the_plain_build_give_its_bandwidth() {
    // STREAM's kernels built plain (clang-16 -O2) and recorded: the timing
    // run. Its program times each kernel itself and prints the bandwidth, the
    // truth. The `memlens cc` build recorded at the defaults gives the exact
    // bytes; `--timed-by` puts them over the timing run's region times.
    let dir = tempdir();
    let plain = plain_build(dir.path(), "tests/programs/stream_timed.c", &["-O2"]);
    let app = memlens_cc(dir.path(), "stream_timed.c", &["-O2"]);
    // Three timing runs: each region's median time; the truth, the median
    // of the program's own figures.
    let kernels = ["copy", "scale", "add", "triad"];
    let mut truths: Vec<Vec<f64>> = vec![Vec::new(); kernels.len()];
    let mut timed_by = Vec::new();
    for run in 0..3 {
        let timed = dir.path().join(format!("timed{run}"));
        let out = record(&timed, &[], &[plain.to_str().unwrap()]);
        assert_ran(&out);
        let printed = String::from_utf8_lossy(&out.stdout).into_owned();
        for (k, name) in kernels.iter().enumerate() {
            let truth: f64 = (printed.lines())
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .and_then(|l| l.trim_end_matches(" bytes/s").parse().ok())
                .unwrap_or_else(|| panic!("{name} in {printed}"));
            truths[k].push(truth);
        }
        timed_by.extend(["--timed-by".to_string(), timed.display().to_string()]);
    }
    let counted = dir.path().join("counted");
    assert_ran(&record(&counted, &[], &[app.to_str().unwrap()]));
    let timed_by: Vec<&str> = timed_by.iter().map(String::as_str).collect();
    let r = report_json_with(&counted, &timed_by);
    assert_eq!(
        r["access"]["plain_run"]["unmatched"],
        serde_json::json!([]),
        "{r:#}"
    );
    for (k, name) in kernels.iter().enumerate() {
        truths[k].sort_by(f64::total_cmp);
        let truth = truths[k][1];
        let region = named(&r["access"]["regions"], name);
        let t = &region["plain"];
        let without =
            t["read_bandwidth"].as_f64().unwrap() + t["write_bandwidth"].as_f64().unwrap();
        let with = region["read_bandwidth"].as_f64().unwrap()
            + region["write_bandwidth"].as_f64().unwrap();
        eprintln!(
            "{name}: the plain build's own timer {:.2} GB/s (median of 3 runs); --timed-by {:.2} GB/s; the counted run {:.2} GB/s",
            truth / 1e9,
            without / 1e9,
            with / 1e9
        );
        // The same runs' marks and timer, the counted run's exact bytes:
        // within the issue's 10% (within 3% on an idle machine; 4.6% once
        // with two builds running beside the test).
        assert!(
            (without / truth - 1.0).abs() <= 0.10,
            "{name}: {without} against {truth}"
        );
    }
    // Sampling's own time inside a region is measured (copy is a memcpy,
    // whose bytes the wrapper counts without the per-block slow path).
    let triad = named(&r["access"]["regions"], "triad");
    assert!(triad["slow_path_ns"].as_u64().unwrap() > 0, "{triad:#}");

    // A timing run that did other work times nothing, and says why.
    let fewer = dir.path().join("fewer");
    assert_ran(&record(&fewer, &[], &[plain.to_str().unwrap(), "3"]));
    let r = report_json_with(&counted, &["--timed-by", fewer.to_str().unwrap()]);
    let unmatched = r["access"]["plain_run"]["unmatched"].as_array().unwrap();
    assert_eq!(unmatched.len(), 4, "{unmatched:?}");
    assert!(unmatched[0]
        .as_str()
        .unwrap()
        .ends_with(": ran 3 times there, 10 here"));
    assert!(r["access"]["regions"][0]["plain"].is_null());
    // A counted run is no timing run.
    let out = report_view(&counted, &["--timed-by", counted.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("that run counted accesses"));
}

#[test]
fn wrappers_compile_by_their_names_and_from_a_masquerade_directory() {
    // `memlens wrappers DIR`: `cc` first on PATH compiles with the
    // instrumentation (and finds the real clang past itself); `memlens-c++`
    // is one word for CXX=.
    let dir = tempdir();
    let wrappers = wrappers(dir.path());
    let path = format!("{}:{}", wrappers.display(), std::env::var("PATH").unwrap());
    let c_app = dir.path().join("triad");
    let st = Command::new("cc")
        .env("PATH", &path)
        .env("MEMLENS_RUNTIME", runtime())
        .args(["-O2", &format!("-I{}", root().join("include").display())])
        .arg(root().join("tests/programs/omp_triad.c"))
        .args(["-fopenmp", "-o"])
        .arg(&c_app)
        .status()
        .unwrap();
    assert!(st.success());
    let cxx_app = dir.path().join("calls");
    let st = Command::new(wrappers.join("memlens-c++"))
        .env("MEMLENS_RUNTIME", runtime())
        .arg("-O2")
        .arg(root().join("tests/programs/calls_and_jumps.cpp"))
        .arg("-o")
        .arg(&cxx_app)
        .status()
        .unwrap();
    assert!(st.success());
    for app in [&c_app, &cxx_app] {
        let p = dir.path().join(format!(
            "{}.prof",
            app.file_name().unwrap().to_string_lossy()
        ));
        assert_ran(&record(&p, &[], &[app.to_str().unwrap()]));
        let r = report_json(&p);
        assert!(
            r["access"]["bytes_counted"].as_bool().unwrap(),
            "{}",
            app.display()
        );
        assert!(
            r["access"]["samples"].as_u64().unwrap() > 0,
            "{}",
            app.display()
        );
    }
    // Asked for help by its wrapper name, it says what memlens adds.
    let help = Command::new(wrappers.join("memlens-cc"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&help.stdout).starts_with("memlens cc: clang with memlens"));
}

#[test]
fn the_wrapper_compiles_with_the_clang_the_build_names() {
    // Without MEMLENS_CLANG, a build's $CC naming a clang is the compiler
    // (its version is in the executable's .comment); a $CC of another kind
    // (gcc) is passed over for a clang on PATH.
    let dir = tempdir();
    let comment = |cc: &str| {
        let app = dir.path().join(format!("calls-{cc}"));
        let out = Command::new(memlens())
            .env_remove("MEMLENS_CLANG")
            .env("CC", cc)
            .env("MEMLENS_RUNTIME", runtime())
            .args(["cc", "-O2"])
            .arg(root().join("tests/programs/calls_and_jumps.cpp"))
            .args(["-lstdc++", "-lm", "-o"])
            .arg(&app)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && !stderr.contains("note:"),
            "CC={cc}: {stderr}"
        );
        let out = Command::new("readelf")
            .args(["-p", ".comment"])
            .arg(&app)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(comment("clang-15").contains("clang version 15."));
    assert!(comment("clang-14").contains("clang version 14."));
    let other = comment("gcc");
    assert!(other.contains("clang version"), "{other}");
}

/// tests/programs/build_systems copied into `dir`: the same OpenMP triad
/// as a CMake and an Autotools project.
fn build_system_project(dir: &Path) -> PathBuf {
    let tree = dir.join("src");
    let st = Command::new("cp")
        .arg("-r")
        .arg(root().join("tests/programs/build_systems"))
        .arg(&tree)
        .status()
        .unwrap();
    assert!(st.success());
    tree
}

/// Runs a build step in `dir` with the runtime named, as a user's build.
fn build_step(dir: &Path, program: &str, args: &[&str]) {
    let out = Command::new(program)
        .current_dir(dir)
        .env("MEMLENS_RUNTIME", runtime())
        .args(args)
        .output()
        .unwrap();
    assert_ran(&out);
}

/// The project's triad, built through memlens-cc, recorded with two
/// threads: its parallel region counts the team's bytes, 10 x 2 M x (16
/// read, 8 written) plus the few loads each thread's outlined body makes of
/// its shared variables, and both threads are sampled.
fn assert_triad_counted(app: &Path, dir: &Path) {
    let p = dir.join("p");
    assert_ran(&record_with(
        &[("OMP_NUM_THREADS", "2")],
        &p,
        &[],
        &[app.to_str().unwrap()],
    ));
    let r = report_json(&p);
    let triad = named(&r["access"]["regions"], "triad");
    let (read, written) = (
        triad["bytes_read"].as_u64().unwrap(),
        triad["bytes_written"].as_u64().unwrap(),
    );
    assert!(read.abs_diff(320_000_000) < 10_000, "{triad:#}");
    assert!(written.abs_diff(160_000_000) < 10_000, "{triad:#}");
    let sampled = (r["threads"].as_array().unwrap().iter())
        .filter(|t| t["samples"].as_u64().unwrap() > 1000)
        .count();
    assert_eq!(sampled, 2, "{:#}", r["threads"]);
}

#[test]
fn a_cmake_project_builds_through_memlens_cc_with_its_openmp() {
    // CMake finds OpenMP for the compiler given as
    // -DCMAKE_C_COMPILER=.../memlens-cc (one word, from `memlens wrappers`).
    let dir = tempdir();
    let wrappers = wrappers(dir.path());
    let tree = build_system_project(dir.path());
    let cc = format!(
        "-DCMAKE_C_COMPILER={}",
        wrappers.join("memlens-cc").display()
    );
    let include = format!("-DMEMLENS_INCLUDE={}", root().join("include").display());
    build_step(
        &tree,
        "cmake",
        &[
            "-S",
            ".",
            "-B",
            "build",
            &cc,
            &include,
            "-DCMAKE_BUILD_TYPE=Release",
        ],
    );
    build_step(&tree, "cmake", &["--build", "build"]);
    assert_triad_counted(&tree.join("build/triad"), dir.path());
}

#[test]
fn an_autotools_project_builds_through_memlens_cc_with_its_openmp() {
    // configure, given CC=.../memlens-cc, finds the compiler working and
    // its OpenMP flag (AC_OPENMP), and make builds with them.
    let dir = tempdir();
    let wrappers = wrappers(dir.path());
    let tree = build_system_project(dir.path());
    build_step(&tree, "autoreconf", &["-i"]);
    let cc = format!("CC={}", wrappers.join("memlens-cc").display());
    build_step(&tree, "./configure", &[&cc]);
    let include = format!("MEMLENS_INCLUDE={}", root().join("include").display());
    build_step(&tree, "make", &[&include]);
    assert_triad_counted(&tree.join("triad"), dir.path());
}

#[test]
fn fortran_module_runs_with_and_without_memlens() {
    let dir = tempdir();
    let d = dir.path();
    let src = d.join("app.f90");
    std::fs::write(
        &src,
        "program app\n use memlens\n use iso_c_binding\n implicit none\n real(8), allocatable, target :: grid(:)\n allocate(grid(100000))\n call memlens_region_begin(\"solve\")\n call memlens_tag(\"grid\", grid, int(size(grid) * 8, c_size_t))\n grid = 1.0d0\n call memlens_region_end(\"solve\")\n print *, sum(grid)\nend program\n",
    )
    .unwrap();
    let r = root();
    let run = |args: &[&str]| {
        let st = Command::new(args[0])
            .args(&args[1..])
            .current_dir(d)
            .status()
            .expect("compiler (.ci/run installs gfortran)");
        assert!(st.success(), "{args:?}");
    };
    let inc = format!("-I{}", r.join("include").display());
    run(&[
        "gcc",
        "-c",
        &inc,
        r.join("fortran/memlens_f.c").to_str().unwrap(),
        "-o",
        "memlens_f.o",
    ]);
    run(&[
        "gfortran",
        "-c",
        r.join("fortran/memlens.f90").to_str().unwrap(),
        "-o",
        "memlens.o",
    ]);
    run(&[
        "gfortran",
        "app.f90",
        "memlens.o",
        "memlens_f.o",
        "-o",
        "app",
    ]);
    let app = d.join("app").to_string_lossy().into_owned();
    let rep = same_behaviour(&[&app]);
    assert_eq!(rep["regions"][0]["name"], "solve");
    let tag = objects(&rep, "objects_by_peak")
        .into_iter()
        .find(|o| o["kind"] == "tag")
        .expect("tag");
    assert_eq!(tag["name"], "grid");
    assert_eq!(tag["peak_bytes"].as_f64().unwrap(), 800000.0);
}

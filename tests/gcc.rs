//! Access profiling of code built by GCC's own compilers: `memlens gcc`,
//! `g++` and `gfortran` compile with GCC's ThreadSanitizer instrumentation,
//! whose calls memlens' shim answers (crates/runtime/gcc/tsan_shim.c). The
//! counts are checked against the same truths as the clang path's.

mod common;

use common::*;
use std::process::Command;

fn recorded(app: &std::path::Path, args: &[&str]) -> serde_json::Value {
    let p = app.with_extension("prof");
    let mut command = vec![app.to_str().unwrap()];
    command.extend(args);
    assert_ran(&record(&p, &[], &command));
    report_json(&p)
}

#[test]
fn gcc_builds_count_every_access_exactly_as_clang_builds_do() {
    let dir = tempdir();
    // The calls, throws and longjmps of the clang path's exact-count test:
    // GCC's build makes the same loads and stores, to the byte.
    let app = memlens_compile(
        "g++",
        &[],
        dir.path(),
        "calls_and_jumps.cpp",
        &["-O2", "-lm"],
    );
    assert_calls_and_jumps_counted(&recorded(&app, &[]), &app, "g++");

    // STREAM's kernels in their regions: each region's exact bytes.
    let stream = memlens_compile("gcc", &[], dir.path(), "stream_timed.c", &["-O2"]);
    assert_stream_regions_exact(&recorded(&stream, &["2"]), "gcc");

    // Fortran: two arrays filled, one updated from both, one summed.
    let axpy = memlens_compile("gfortran", &[], dir.path(), "axpy.f90", &["-O2"]);
    let r = recorded(&axpy, &[]);
    let thread = &r["threads"][0];
    assert_eq!(thread["loads"].as_u64(), Some(3_000_000), "{thread}");
    assert_eq!(thread["stores"].as_u64(), Some(3_000_000), "{thread}");
    let arrays = named(
        &r["access"]["objects"],
        &format!(
            "axpy (axpy.f90:{})",
            source_line("axpy.f90", "allocate(x(n), y(n))")
        ),
    );
    let est = arrays["est_bytes_read"].as_f64().unwrap();
    assert!((est / 24e6 - 1.0).abs() < 0.05, "{arrays}");
}

#[test]
fn gcc_atomics_run_as_written_and_are_counted() {
    // Two threads bump adjacent atomic counters: the shim does each
    // addition (the totals print right) and counts it as a load and a
    // store; the line is false sharing.
    let dir = tempdir();
    let app = memlens_compile(
        "gcc",
        &[],
        dir.path(),
        "atomic_counters.c",
        &["-O2", "-pthread"],
    );
    let p = dir.path().join("p");
    let out = record(&p, &[], &[app.to_str().unwrap()]);
    assert_ran(&out);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "4000000 4000000\n");
    let r = report_json(&p);
    let bumpers: Vec<&serde_json::Value> = (r["threads"].as_array().unwrap().iter())
        .filter(|t| t["loads"] == 4_000_000u64 && t["stores"] == 4_000_000u64)
        .collect();
    assert_eq!(bumpers.len(), 2, "{:#}", r["threads"]);
    assert!(r["access"]["atomic_samples"].as_u64().unwrap() > 0);
    let sharing = r["sharing"].as_array().unwrap();
    assert!(
        (sharing.iter())
            .any(|l| l["kind"] == "false sharing"
                && l["object"].as_str().unwrap().contains("counters")),
        "{sharing:#?}"
    );
}

#[test]
fn gcc_wrappers_keep_a_makefiles_openmp_and_leave_real_threadsanitizer_alone() {
    let dir = tempdir();
    let d = dir.path();
    // A Makefile that looks for "gcc" in $(CC) to add its OpenMP flag,
    // built with CC=memlens-gcc: the team's bytes are counted.
    let wrappers = wrappers(d);
    std::fs::write(
        d.join("Makefile"),
        format!(
            "ifneq (,$(findstring gcc,$(CC)))\nOMP = -fopenmp\nendif\ntriad: {src}\n\t$(CC) -O2 $(OMP) -I{inc} $< -o $@\n",
            src = root().join("tests/programs/omp_triad.c").display(),
            inc = root().join("include").display(),
        ),
    )
    .unwrap();
    let out = Command::new("make")
        .current_dir(d)
        .env("MEMLENS_RUNTIME", runtime())
        .arg(format!("CC={}", wrappers.join("memlens-gcc").display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = recorded(&d.join("triad"), &[]);
    let threads = r["threads"].as_array().unwrap();
    let counting = threads
        .iter()
        .filter(|t| t["loads"].as_u64().unwrap() > 0)
        .count();
    assert!(counting >= 2, "the OpenMP team counts: {threads:#?}");
    assert!(r["access"]["bytes_counted"].as_bool().unwrap());

    // A program built with the real ThreadSanitizer, recorded: memlens'
    // runtime defines none of its entry points, so libtsan still runs it
    // (and finds its race: two threads' 1 000 unordered increments each;
    // a race of one access each goes unreported about once in 1 000 runs by
    // ThreadSanitizer's design, google/sanitizers#1576, and did once in CI).
    let src = d.join("race.c");
    std::fs::write(
        &src,
        "#include <pthread.h>\n#include <stdio.h>\nint shared;\nvoid *bump(void *a) { for (int i = 0; i < 1000; i++) shared++; return a; }\nint main(void) { pthread_t t; pthread_create(&t, 0, bump, 0); bump(0); pthread_join(t, 0); printf(\"%d\\n\", shared > 0); return 0; }\n",
    )
    .unwrap();
    let tsan = d.join("race");
    let st = Command::new("gcc")
        .args(["-O1", "-g", "-fsanitize=thread", "-pthread"])
        .arg(&src)
        .arg("-o")
        .arg(&tsan)
        .status()
        .unwrap();
    assert!(st.success());
    let p = d.join("race.prof");
    let out = record(&p, &[], &[tsan.to_str().unwrap()]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1\n");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("WARNING: ThreadSanitizer: data race"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

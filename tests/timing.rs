//! Measurements of time that must not share the CPUs with other tests: each
//! test binary runs alone, while the tests inside one binary run in parallel.
//! On this 2-core VM, access.rs's heavy siblings preempting a 44 ms loop made
//! its period undetectable (seen in a clean-clone CI run).

mod common;
use common::*;
use memlens_profile::Region;

#[test]
fn the_period_of_an_unannotated_loop_is_found_and_a_loop_free_run_has_none() {
    // fold_phases with 64 Ki doubles an array: ~110 us iterations. Told to
    // ignore the annotation, the report finds the period from the samples
    // alone; it must be within 10% of the median spacing of the annotated
    // iterations' starts (measured: 0.7% mostly, 6.1% in one clean-clone CI
    // run on this VM; a harmonic, half or twice the period, is off by 50% or more).
    let dir = tempdir();
    let app = memlens_cc(dir.path(), "fold_phases.c", &["-O2", "-DN=65536"]);
    let p = dir.path().join("loop");
    assert_ran(&record(&p, &[], &[&app.to_string_lossy(), "400"]));
    let out = report_view(&p, &["--fold-detect"]);
    assert_ran(&out);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let f = &report["folding"];
    assert!(
        f["how"].as_str().unwrap().starts_with("period detected"),
        "{f:#}"
    );
    let regions: Vec<Region> = memlens_profile::read_table(&p).unwrap();
    let mut starts: Vec<u64> = regions.iter().map(|r| r.begin_ns).collect();
    starts.sort_unstable();
    let mut spacing: Vec<u64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
    spacing.sort_unstable();
    let median = spacing[spacing.len() / 2] as f64;
    let period = f["mean_ns"].as_f64().unwrap();
    assert!(
        (period / median - 1.0).abs() < 0.10,
        "{period} ns vs {median} ns"
    );

    // A pointer chase repeats nothing: no period is claimed.
    let app = memlens_cc(dir.path(), "chase_levels.c", &["-O2"]);
    let p = dir.path().join("chase");
    assert_ran(&record(
        &p,
        &["--period", "97"],
        &[&app.to_string_lossy(), "16777216"],
    ));
    let out = report_view(&p, &["--fold-detect"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no repeating pattern"));
}

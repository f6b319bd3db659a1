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
    // alone. The truth is the annotated iterations' spacing, which the machine
    // moves: alone on a core an iteration takes ~80 us, beside a busy process
    // ~135 us, and a run can alternate between the two (a clean-clone CI run
    // found 77.6 us against a median spacing of 115 us). So the period must be
    // the spacing of a real share of the iterations (a quarter, within 10%),
    // which a harmonic (half, a third or twice every spacing) never is.
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
    let period = f["mean_ns"].as_f64().unwrap();
    let matching = spacing
        .iter()
        .filter(|&&s| (period / s as f64 - 1.0).abs() < 0.10)
        .count();
    let quartiles = [1, 2, 3].map(|q| spacing[spacing.len() * q / 4]);
    eprintln!(
        "period {period:.0} ns; spacing quartiles {quartiles:?} ns; {matching} of {} within 10%",
        spacing.len()
    );
    assert!(
        matching * 4 >= spacing.len(),
        "period {period} ns matches {matching} of {} spacings (quartiles {quartiles:?} ns)",
        spacing.len()
    );

    // The same loop annotated every second iteration: the period the samples
    // show is half the annotated spacing, which contradicts the program's
    // own mark of what repeats, so it is refused and the region named.
    let p = dir.path().join("loop-every-2");
    assert_ran(&record(&p, &[], &[&app.to_string_lossy(), "400", "2"]));
    let out = report_view(&p, &["--fold-detect"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("is not the spacing of its annotated region iteration (")
            && stderr.contains("--fold iteration"),
        "{stderr}"
    );
    let out = report_view(&p, &["--fold", "iteration"]);
    assert_ran(&out);

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

//! Measurements of time that must not share the CPUs with other tests: each
//! test binary runs alone, while the tests inside one binary run in parallel.
//! The detected period's instances are checked against the annotated
//! iterations' spacing in time, which heavy siblings on this 2-core VM move.

mod common;
use common::*;
use memlens_profile::Region;

#[test]
fn the_period_of_an_unannotated_loop_is_found_and_a_loop_free_run_has_none() {
    // fold_phases with 64 Ki doubles an array, 400 iterations. Told to ignore
    // the annotation, the report finds the period from the samples alone, on
    // the thread's progress (samples, each one 1 per period accesses): the
    // truth is the exact accesses of an annotated iteration. The machine
    // moves the loop's speed (on this VM a run went from 35 to 62 us
    // iterations halfway, and time-based detection then found nothing), and
    // the run with SLOW slows the second half to twice the time by
    // arithmetic without memory accesses (time-based detection claimed a
    // 35.5 us period there, half an iteration's accesses in the slow half).
    let dir = tempdir();
    let app = memlens_cc(dir.path(), "fold_phases.c", &["-O2", "-DN=65536"]);
    for (name, args) in [
        ("loop", ["400", "1", "0"]),
        ("slowed", ["400", "1", "30000"]),
    ] {
        let p = dir.path().join(name);
        let mut argv = vec![app.to_str().unwrap()];
        argv.extend(args);
        assert_ran(&record(&p, &[], &argv));
        let out = report_view(&p, &["--fold-detect"]);
        assert_ran(&out);
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let f = &report["folding"];
        assert!(
            f["how"].as_str().unwrap().starts_with("period detected"),
            "{f:#}"
        );
        let regions: Vec<Region> = memlens_profile::read_table(&p).unwrap();
        let mut exact: Vec<u64> = (regions.iter())
            .map(|r| r.loads.unwrap() + r.stores.unwrap())
            .collect();
        exact.sort_unstable();
        let exact = exact[exact.len() / 2] as f64;
        let found = f["est_accesses_per_instance"].as_f64().unwrap();
        // The instances are mapped back to wall time: their mean duration
        // lies among the annotated iterations' spacings.
        let mut starts: Vec<u64> = regions.iter().map(|r| r.begin_ns).collect();
        starts.sort_unstable();
        let mut spacing: Vec<u64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
        spacing.sort_unstable();
        let (low, high) = (spacing[spacing.len() / 10], spacing[spacing.len() * 9 / 10]);
        let mean = f["mean_ns"].as_f64().unwrap();
        eprintln!(
            "{name}: period {found:.0} accesses against {exact:.0} exact; mean {mean:.0} ns, spacings {low}..{high} ns"
        );
        assert!(
            (found / exact - 1.0).abs() < 0.01,
            "{name}: {found} vs {exact}"
        );
        assert!(
            mean >= 0.9 * low as f64 && mean <= 1.1 * high as f64,
            "{name}: {mean} ns outside {low}..{high}"
        );
    }

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

//! `memlens calibrate` on this machine: a latency curve whose plateaus follow
//! the cache sizes, bandwidth figures, the saved JSON and the plot.

mod common;
use common::*;
use std::process::Command;

#[test]
fn calibration_measures_each_cache_level_and_saves_it() {
    let dir = tempdir();
    let json = dir.path().join("calibration.json");
    let svg = dir.path().join("latency.svg");
    let out = Command::new(memlens())
        .args(["calibrate", "--max-size", "8M", "--threads", "2", "-o"])
        .arg(&json)
        .arg("--plot")
        .arg(&svg)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_ran(&out);
    assert!(text.contains("LATENCY CURVE\n  measured"), "{text}");

    let c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let points: Vec<(u64, f64)> = c["latency"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["bytes"].as_u64().unwrap(), p["ns"].as_f64().unwrap()))
        .collect();
    assert_eq!(points.first().unwrap().0, 4096);
    assert_eq!(points.last().unwrap().0, 8 << 20);
    let level = |name: &str| {
        c["levels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["name"] == name)
            .map(|l| l["ns"].as_f64().unwrap())
    };
    // Whatever the machine, a load served by L1 is faster than one served by
    // L2, and a working set four times L2 is slower still.
    let caches = c["caches"].as_array().unwrap();
    let l2_size = caches
        .iter()
        .find(|k| k["name"] == "L2")
        .map(|k| k["size"].as_u64().unwrap());
    // Where the kernel describes L1d and L2 (it does on every machine we run
    // on), both plateaus must be found; only without sysfs' cache entries is
    // there nothing to compare.
    let index = |i: u32| format!("/sys/devices/system/cpu/cpu0/cache/index{i}/size");
    if std::path::Path::new(&index(2)).exists() {
        let (l1, l2) = (
            level("L1d").expect("L1d plateau"),
            level("L2").expect("L2 plateau"),
        );
        let l2_size = l2_size.expect("L2 size from sysfs");
        assert!(l1 > 0.2 && l1 * 1.5 < l2, "L1d {l1} ns, L2 {l2} ns");
        let (bytes, ns) = *points
            .iter()
            .find(|p| p.0 >= 4 * l2_size)
            .expect("a point beyond L2");
        assert!(ns > 1.5 * l2, "{bytes} B: {ns} ns, L2 {l2} ns");
    } else {
        eprintln!("{} absent: no cache level to compare", index(2));
    }
    // Each bandwidth figure is the median of seven runs; one whose middle
    // runs spread over 25% is refused, said so and not saved.
    let bandwidth = c["bandwidth"].as_array().unwrap();
    let refused = text.matches("REFUSED, not saved").count();
    assert_eq!(
        bandwidth.len() + refused,
        6,
        "read, write, copy with 1 and 2 threads: {text}"
    );
    for b in bandwidth {
        let runs: Vec<f64> = (b["runs_gib_per_s"].as_array().unwrap().iter())
            .map(|r| r.as_f64().unwrap())
            .collect();
        let median = b["gib_per_s"].as_f64().unwrap();
        assert_eq!(runs.len(), 7, "{b}");
        assert!(runs.windows(2).all(|w| w[0] <= w[1]), "{b}");
        assert_eq!(median, runs[3], "{b}");
        assert!(median > 0.1 && (runs[5] - runs[1]) / median <= 0.25, "{b}");
    }
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(plot.contains("measured latency") && plot.contains("L1d size (sysfs)"));

    // A size that is not one gets a one-line error naming the fix.
    let bad = Command::new(memlens())
        .args(["calibrate", "--max-size", "lots"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("e.g. 64M or 1G"));
}

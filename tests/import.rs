//! `memlens import` and `memlens export --csv` on real recordings
//! (tests/fixtures): the imported samples carry exactly what `perf report -D` /
//! `perf script` printed for the same files; damaged files give one clear error.

mod common;

use common::{
    assert_documented_excerpt, assert_ran, html_report, memlens, root, sql_json, tempdir,
};
use memlens_profile::{read_table, AccessSample, Meta};
use std::path::Path;
use std::process::{Command, Output};

fn import(file: &Path, out: &Path) -> Output {
    Command::new(memlens())
        .arg("import")
        .arg(file)
        .arg("-o")
        .arg(out)
        .output()
        .unwrap()
}

fn fixture(rel: &str) -> std::path::PathBuf {
    root().join("tests/fixtures").join(rel)
}

#[test]
fn pebs_samples_equal_perf_report() {
    let dir = tempdir();
    let out = dir.path().join("pebs");
    let o = import(&fixture("pebs-skx-loadlat/perf.data"), &out);
    assert_ran(&o);
    let meta = Meta::read(&out).unwrap();
    assert!(meta.backend.contains(&"pebs".to_string()));
    assert_eq!(meta.settings.access_period, 10009);
    let samples: Vec<AccessSample> = read_table(&out).unwrap();

    // perf report -D: "CPU TIME OFFSET [SIZE]: PERF_RECORD_SAMPLE(IP, MISC): PID/TID:
    // IP period: P addr: A", then "weight: W,...", then "data_src: D".
    let dump = std::fs::read_to_string(fixture("pebs-skx-loadlat/perf.data.report-D-samples.txt"))
        .unwrap();
    let mut expected = Vec::new();
    let lines: Vec<&str> = dump.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        if !l.contains("PERF_RECORD_SAMPLE") {
            continue;
        }
        let f: Vec<&str> = l.split_whitespace().collect();
        let cpu: u32 = f[0].parse().unwrap();
        let time: u64 = f[1].parse().unwrap();
        let (pid, tid) = f[6].trim_end_matches(':').split_once('/').unwrap();
        let ip = u64::from_str_radix(f[7].trim_start_matches("0x"), 16).unwrap();
        let addr = u64::from_str_radix(f[11].trim_start_matches("0x"), 16).unwrap();
        let weight: u32 = lines[i + 1]
            .split_whitespace()
            .nth(2)
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let data_src = u64::from_str_radix(
            lines[i + 2]
                .split_whitespace()
                .nth(2)
                .unwrap()
                .trim_start_matches("0x"),
            16,
        )
        .unwrap();
        expected.push((
            time,
            cpu,
            pid.parse::<u32>().unwrap(),
            tid.parse::<u32>().unwrap(),
            ip,
            addr,
            weight,
            data_src,
        ));
    }
    assert_eq!(expected.len(), 14);
    expected.sort();
    // The table keeps the file's record order; compare in time order.
    let mut ours: Vec<_> = samples
        .iter()
        .map(|s| {
            (
                meta.clock.start_ns + s.time_ns,
                s.cpu,
                s.pid,
                s.tid,
                s.pc,
                s.address,
                s.latency.unwrap(),
                s.data_src,
            )
        })
        .collect();
    ours.sort();
    assert_eq!(ours, expected);
    // Levels from the data sources: 5 fill-buffer, 4 L1, 1 L2, 4 L3 hits.
    let mut levels = [0u32; 10];
    for s in &samples {
        levels[s.level as usize] += 1;
        assert!(!s.is_store);
    }
    assert_eq!(&levels[1..5], &[4, 5, 1, 4]);

    // The report says where the figures come from and tabulates the levels.
    let report = Command::new(memlens())
        .arg("report")
        .arg(&out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(text.contains("14 hardware samples (pebs)"), "{text}");
    assert!(
        text.contains("fill buffer") && text.contains("LLC"),
        "{text}"
    );
    assert!(text.contains("imported perf.data holds samples"), "{text}");
    assert_documented_excerpt("docs/report.md", "  LATENCY BY LEVEL", &text);
    // The loads' flame graph by level: each level's frame weighs its
    // samples x period.
    let svg = dir.path().join("levels.svg");
    let flame = Command::new(memlens())
        .args(["plot", "flame", "--accesses", "--by-level", "-o"])
        .arg(&svg)
        .arg(&out)
        .output()
        .unwrap();
    assert_ran(&flame);
    let svg = std::fs::read_to_string(&svg).unwrap();
    for (level, samples) in [("L1", 4), ("fill buffer", 5), ("L2", 1), ("LLC", 4)] {
        // inferno groups the digits: 40036 as 40,036.
        let n = (samples * 10009).to_string();
        let (thousands, rest) = n.split_at(n.len() - 3);
        let title = format!("<title>[{level}] ({thousands},{rest} accesses,");
        assert!(svg.contains(&title), "{title} in {svg}");
    }
    // The HTML page draws it under the levels' tables, from its tree.
    let page = html_report(&out, &dir.path().join("report.html"));
    assert!(page.contains("aria-label=\"sampled loads by the memory level"));
    for level in ["L1", "fill buffer", "L2", "LLC"] {
        assert!(page.contains(&format!("\"[{level}]\"")), "{level}");
    }
    // Every table of a profile is there to query, empty or not.
    let rows = sql_json(
        &out,
        "select (select count(*) from samples) as samples, (select count(*) from thread_timeline) as traffic",
    );
    assert_eq!(rows, [serde_json::json!({"samples": 14, "traffic": 0})]);
}

#[test]
fn pebs_level_tables_and_latency_distributions_equal_perf_script() {
    let dir = tempdir();
    let out = dir.path().join("p");
    assert!(import(&fixture("pebs-skx-loadlat/perf.data"), &out)
        .status
        .success());
    // perf script's own account: each load's level (its LVL text) and weight.
    let text =
        std::fs::read_to_string(fixture("pebs-skx-loadlat/perf.data.perf-script.txt")).unwrap();
    let mut expected: std::collections::BTreeMap<&str, Vec<u32>> = Default::default();
    for line in text.lines().filter(|l| l.contains("|OP LOAD|")) {
        let level = match line
            .split("|LVL ")
            .nth(1)
            .unwrap()
            .split('|')
            .next()
            .unwrap()
        {
            "L1 or L1 hit" => "L1",
            "LFB/MAB or LFB/MAB hit" => "fill buffer",
            "L2 or L2 hit" => "L2",
            "L3 or L3 hit" => "LLC",
            other => panic!("level {other} not in this fixture's table"),
        };
        let weight: u32 = line
            .split("BLK")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        expected.entry(level).or_default().push(weight);
    }
    let report = common::report_json(&out);
    let tables = &report["levels"];
    for d in tables["latency"].as_array().unwrap() {
        let mut w = expected.remove(d["level"].as_str().unwrap()).unwrap();
        w.sort_unstable();
        assert_eq!(d["samples"], w.len(), "{d}");
        assert_eq!(d["min"], w[0], "{d}");
        assert_eq!(d["max"], *w.last().unwrap(), "{d}");
        // The sample at rank round((n - 1) / 2), the upper one of two middles.
        assert_eq!(d["median"], w[w.len() / 2], "{d}");
        let mean = w.iter().map(|&x| f64::from(x)).sum::<f64>() / w.len() as f64;
        assert!((d["mean"].as_f64().unwrap() - mean).abs() < 1e-9, "{d}");
    }
    assert!(
        expected.is_empty(),
        "levels missing from the report: {expected:?}"
    );
    // The same table as CSV: a header and one row per level.
    let csv = Command::new(memlens())
        .args(["report", "--format", "csv", "--table", "latency"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(csv.status.success());
    let csv = String::from_utf8(csv.stdout).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert!(
        lines[0].starts_with("level,samples,mean,min,median,p90,p99,max"),
        "{csv}"
    );
    assert_eq!(
        lines.len(),
        1 + tables["latency"].as_array().unwrap().len(),
        "{csv}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("fill buffer,5,")),
        "{csv}"
    );
    // Each routine's shares are of its own loads and add up to 100%.
    for row in tables["by_routine"].as_array().unwrap() {
        let sum: f64 = row["percent"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_f64().unwrap())
            .sum();
        assert!((sum - 100.0).abs() < 1e-9, "{row}");
    }
}

/// `perf` run on the same file, the peers memlens' hardware figures stand
/// beside: the text of `perf c2c report` / `perf mem report --stdio`.
fn perf_report(args: &[&str], file: &Path) -> String {
    let o = Command::new("perf")
        .args(args)
        .arg("--stdio")
        .arg("-i")
        .arg(file)
        .output()
        .expect("perf (linux-perf) is needed: .ci/run installs it");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn pebs_levels_locks_shared_lines_and_data_objects_agree_with_perf_c2c_and_perf_mem() {
    let file = fixture("pebs-skx-loadlat/perf.data");
    let dir = tempdir();
    let out = dir.path().join("p");
    assert_ran(&import(&file, &out));
    let report = common::report_json(&out);
    let access = &report["access"];

    // perf c2c's "Trace Event Information": loads by level, locked accesses.
    let c2c = perf_report(&["c2c", "report"], &file);
    let count = |name: &str| -> u64 {
        let line = (c2c.lines())
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("perf c2c printed no {name:?}:\n{c2c}"));
        line.rsplit(':').next().unwrap().trim().parse().unwrap()
    };
    let levels = access["levels"].as_array().unwrap();
    let samples_at = |level: &str| {
        (levels.iter())
            .find(|l| l["level"] == level)
            .map_or(0, |l| l["samples"].as_u64().unwrap())
    };
    assert_eq!(samples_at("L1"), count("Load L1D hit"));
    assert_eq!(samples_at("fill buffer"), count("Load Fill Buffer Hit"));
    assert_eq!(samples_at("L2"), count("Load L2D hit"));
    assert_eq!(samples_at("LLC"), count("Load LLC hit"));
    assert_eq!(access["samples"], count("Load Operations"));
    assert_eq!(
        access["atomic_samples"],
        count("Locked Load/Store Operations")
    );
    assert!(count("Locked Load/Store Operations") > 0);
    // No line here was touched by two threads with one writing (c2c's
    // question): memlens finds none either.
    assert_eq!(count("Total Shared Cache Lines"), 0);
    assert_eq!(
        report["sharing"].as_array().unwrap().len(),
        0,
        "{}",
        report["sharing"]
    );

    // perf mem's data objects: the same anonymous memory and images.
    let mem = perf_report(
        &[
            "mem",
            "report",
            "--sort",
            "dso_daddr",
            "-F",
            "sample,dso_daddr",
        ],
        &file,
    );
    let objects: std::collections::BTreeMap<&str, u64> = (mem.lines())
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (n, name) = l.trim().split_once(char::is_whitespace).unwrap();
            (name.trim(), n.parse().unwrap())
        })
        .collect();
    let unknown = access["unattributed_memory"].as_array().unwrap();
    let memlens_count = |what: &str| {
        (unknown.iter())
            .filter(|u| u["what"].as_str().unwrap().starts_with(what))
            .map(|u| u["samples"].as_u64().unwrap())
            .sum::<u64>()
    };
    assert_eq!(
        memlens_count("anonymous memory"),
        objects["anon"],
        "{objects:?} {unknown:?}"
    );
    assert_eq!(
        memlens_count("borglet's image"),
        objects["borglet"],
        "{objects:?} {unknown:?}"
    );
    // perf leaves the kernel's data unnamed; memlens says it is the kernel's
    // (each such address in perf script's account is in the upper half).
    let script =
        std::fs::read_to_string(fixture("pebs-skx-loadlat/perf.data.perf-script.txt")).unwrap();
    let kernel_data = (script.lines())
        .filter(|l| l.contains("|OP "))
        .filter(|l| {
            let addr = l
                .split(": ")
                .nth(2)
                .unwrap()
                .split_whitespace()
                .next()
                .unwrap();
            u64::from_str_radix(addr, 16).unwrap() >> 63 == 1
        })
        .count() as u64;
    assert_eq!(memlens_count("kernel memory"), kernel_data);
    assert!(
        kernel_data > 0 && kernel_data <= objects["[unknown]"],
        "{objects:?}"
    );
    assert_eq!(access["unattributed"], access["samples"]);
}

#[test]
fn spe_samples_equal_perf_script_and_export_as_spe_parser_csv() {
    let dir = tempdir();
    let out = dir.path().join("spe");
    let o = import(
        &fixture("spe-hiperf-raw/hiperf-192.wrapped.perf.data"),
        &out,
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.contains("4 records decoded"), "{stderr}");
    let samples: Vec<AccessSample> = read_table(&out).unwrap();
    // perf script: the load and the store of the four records (two are branches).
    let got: Vec<_> = samples
        .iter()
        .map(|s| (s.is_store, s.address, s.data_src, s.latency, s.pc))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                false,
                0xffffffe5aead80b0,
                0x88000142,
                Some(8),
                0xffffffc08420e068
            ),
            (true, 0x5a812b7360, 0x88000004, Some(10), 0x59f2b9270c),
        ]
    );
    assert_eq!(samples[0].issue_latency, Some(6));
    assert_eq!(samples[0].translation_latency, Some(1));
    // The level table's SPE breakdown: the L1 load's LAT 8 TOT, 6 ISSUE and 1
    // XLAT of `perf report -D`, execution derived as 8 - 6 - 1.
    let report = common::report_json(&out);
    let spe = &report["levels"]["spe_latency"];
    assert_eq!(spe.as_array().map(Vec::len), Some(1), "{spe:#}");
    let l1 = &spe[0];
    assert_eq!(l1["level"], "L1");
    assert_eq!(
        [
            &l1["samples"],
            &l1["total"],
            &l1["issue"],
            &l1["translation"],
            &l1["execution"]
        ]
        .map(|v| v.as_f64().unwrap()),
        [1.0, 8.0, 6.0, 1.0, 1.0]
    );

    let csv = Command::new(memlens())
        .args(["export", "--format", "spe-parser"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(csv.status.success());
    let text = String::from_utf8(csv.stdout).unwrap();
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(
        rows[0],
        "cpu,op,pc,el,atomic,excl,ar,subclass,event,issue_lat,total_lat,vaddr,xlat_lat,paddr,data_source,ts"
    );
    assert_eq!(
        rows[1],
        "0,LD,0xffffffc08420e068,1,false,false,false,GP-REG,RETIRED:L1D-ACCESS:TLB-ACCESS,6,8,0xffffffe5aead80b0,1,,L1,389297091246406"
    );
    assert_eq!(
        rows[2],
        "0,ST,0x59f2b9270c,0,false,false,false,GP-REG,RETIRED:TLB-ACCESS,7,10,0x5a812b7360,1,,unknown,389297091265312"
    );
}

#[test]
fn damaged_and_foreign_files_give_one_clear_error() {
    let dir = tempdir();
    // Not a perf.data at all.
    let junk = dir.path().join("junk.data");
    std::fs::write(&junk, b"this is not a perf.data file, just text\n").unwrap();
    let o = import(&junk, &dir.path().join("a"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(125));
    assert!(
        err.contains("not a perf.data file") && err.lines().count() == 1,
        "{err}"
    );

    // The corrupt SPE stream: bad packets skipped, only a branch left.
    let o = import(
        &fixture("spe-hiperf-raw/hiperf-112.wrapped.perf.data"),
        &dir.path().join("b"),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(125));
    assert!(err.contains("no load/store samples"), "{err}");
    assert!(
        !dir.path().join("b").exists(),
        "a failed import leaves no directory"
    );

    // Truncated PEBS files: every cut either imports what precedes it or says
    // the file is damaged; never a crash.
    let full = std::fs::read(fixture("pebs-skx-loadlat/perf.data")).unwrap();
    for cut in [
        0,
        50,
        104,
        500,
        2120,
        4000,
        200_000,
        full.len() / 2,
        full.len() - 3,
    ] {
        let f = dir.path().join(format!("cut-{cut}.data"));
        std::fs::write(&f, &full[..cut]).unwrap();
        let o = import(&f, &dir.path().join(format!("cut-{cut}")));
        let err = String::from_utf8_lossy(&o.stderr);
        match o.status.code() {
            Some(0) => assert!(err.contains("imported"), "{cut}: {err}"),
            Some(125) => assert!(err.starts_with("memlens: "), "{cut}: {err}"),
            other => panic!("cut at {cut}: exit {other:?}: {err}"),
        }
    }
}

/// xorshift64*, so a failing mutant reproduces.
fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

#[test]
fn mutated_perf_data_imports_or_fails_with_one_line_quickly() {
    let dir = tempdir();
    let spe = std::fs::read(fixture("spe-hiperf-raw/hiperf-192.wrapped.perf.data")).unwrap();
    // An AUXTRACE record claiming 8 GiB of payload (found by mutation; the
    // container crate used before allocated it and ran for half a minute).
    let mut huge = spe.clone();
    huge[300] = 2;
    let mut inputs = vec![huge];
    // Crashes the cargo-fuzz targets found (fuzz/run.sh), kept as regressions.
    for entry in std::fs::read_dir(fixture("fuzz-regressions")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "data") {
            inputs.push(std::fs::read(path).unwrap());
        }
    }
    let mut state = 0xfeed_beef_u64;
    for _ in 0..300 {
        let mut v = spe.clone();
        for _ in 0..1 + next(&mut state) % 4 {
            let i = (next(&mut state) % v.len() as u64) as usize;
            v[i] ^= 1 << (next(&mut state) % 8);
        }
        if next(&mut state).is_multiple_of(4) {
            v.truncate((next(&mut state) % v.len() as u64) as usize);
        }
        inputs.push(v);
    }
    let started = std::time::Instant::now();
    for (i, v) in inputs.iter().enumerate() {
        let f = dir.path().join("mutant.data");
        std::fs::write(&f, v).unwrap();
        match memlens_import::import(&f, &dir.path().join(format!("m{i}")), false) {
            Ok(summary) => assert!(summary.samples > 0),
            Err(e) => assert_eq!(e.to_string().lines().count(), 1, "mutant {i}: {e}"),
        }
    }
    // Generous bound for a debug build: each mutant is a 536-byte file.
    assert!(started.elapsed().as_secs() < 60, "{:?}", started.elapsed());
}

#[test]
fn import_over_a_profile_refuses_or_replaces_it_whole() {
    // A recorded profile (with an allocations table) then an import into it:
    // the recorded one kept aside in p.old; with --force, no table of the
    // old profile remains.
    let dir = tempdir();
    let out = dir.path().join("p");
    let rec = Command::new(memlens())
        .env("MEMLENS_RUNTIME", common::runtime())
        .args(["record", "-o"])
        .arg(&out)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_ran(&rec);
    assert!(out.join("counters.parquet").exists());
    let pebs = fixture("pebs-skx-loadlat/perf.data");
    let o = import(&pebs, &out);
    assert_ran(&o);
    let aside = dir.path().join("p.old");
    assert!(aside.join("counters.parquet").exists() && aside.join("meta.json").exists());
    let o = Command::new(memlens())
        .arg("import")
        .arg(&pebs)
        .arg("-o")
        .arg(&out)
        .arg("--force")
        .output()
        .unwrap();
    assert_ran(&o);
    // Import writes its own (empty) timeline and counters: the record's are gone.
    assert!(read_table::<memlens_profile::TimelinePoint>(&out)
        .unwrap()
        .is_empty());
    assert!(read_table::<memlens_profile::CounterReading>(&out)
        .unwrap()
        .is_empty());
    assert!(Meta::read(&out)
        .unwrap()
        .backend
        .contains(&"pebs".to_string()));
}

//! Allocation profiling at heaptrack's depth: every block recorded
//! (`record --leaks`) gives exact totals, temporaries, the peak, bytes at the
//! peak and leaks by caller, checked against the program's known figures and
//! against valgrind's dhat and massif and heaptrack on the same program.

mod common;
use common::*;
use memlens_profile::{Allocation, HeapSite, Meta};
use std::path::Path;
use std::process::Command;

const MIB: u64 = 1 << 20;

/// A listed object's call stack, innermost frame first.
fn frames_of(object: &serde_json::Value) -> Vec<&str> {
    object["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect()
}

/// Builds tests/programs/`lib` as lib`name`.so (position-independent, with
/// `lib_flags`) and tests/programs/`main` linked with it as `name`, in
/// `dir`; returns the program's path.
fn program_with_library(
    dir: &Path,
    lib: &str,
    lib_flags: &[&str],
    main: &str,
    name: &str,
) -> std::path::PathBuf {
    let src = root().join("tests/programs");
    let gcc = |args: &[&str]| {
        let st = Command::new("gcc")
            .args(args)
            .current_dir(dir)
            .status()
            .unwrap();
        assert!(st.success(), "gcc {args:?}");
    };
    let (lib, main) = (src.join(lib), src.join(main));
    let so = format!("lib{name}.so");
    let shared = ["-O1", "-shared", "-fPIC", lib.to_str().unwrap(), "-o", &so];
    gcc(&[&shared[..], lib_flags].concat());
    let link = format!("-l{name}");
    gcc(&[
        "-O1",
        main.to_str().unwrap(),
        "-L.",
        &link,
        "-Wl,-rpath,$ORIGIN",
        "-o",
        name,
    ]);
    dir.join(name)
}

/// The sites whose stacks hold `function`.
fn sites_in<'a>(p: &Path, sites: &'a [HeapSite], function: &str) -> Vec<&'a HeapSite> {
    let stacks = sql_json(
        p,
        &format!("SELECT DISTINCT stack_id FROM stacks WHERE function = '{function}'"),
    );
    let ids: Vec<u64> = stacks
        .iter()
        .map(|s| s["stack_id"].as_str().unwrap().parse::<u64>().unwrap())
        .collect();
    sites.iter().filter(|s| ids.contains(&s.stack_id)).collect()
}

/// The site whose stack holds `function`, alone.
fn site_in<'a>(p: &Path, sites: &'a [HeapSite], function: &str) -> &'a HeapSite {
    let found = sites_in(p, sites, function);
    assert_eq!(found.len(), 1, "{function}: {found:?}");
    found[0]
}

#[test]
fn every_block_gives_exact_temporaries_peak_and_leaks_by_caller() {
    let dir = tempdir();
    let p = dir.path().join("p");
    let out = record(&p, &["--leaks"], &[&program("heap_measures")]);
    assert_ran(&out);
    let sites: Vec<HeapSite> = memlens_profile::read_table(&p).unwrap();
    // Each site's timeline runs up to its totals: its last point's running
    // sums are the site's, and they never fall.
    let points: Vec<memlens_profile::SiteLivePoint> = memlens_profile::read_table(&p).unwrap();
    for s in &sites {
        let mine: Vec<_> = (points.iter())
            .filter(|t| (t.pid, t.stack_id, &t.group) == (s.pid, s.stack_id, &s.group))
            .collect();
        let last = mine.last().expect("a site has timeline points");
        assert_eq!(
            (last.allocations, last.bytes, last.temporary),
            (Some(s.allocations), Some(s.bytes), s.temporary),
            "{s:?}"
        );
        // What a point adds came between its previous point and it.
        for w in mine.windows(2) {
            if let (Some(from), Some(to)) = (w[1].allocated_from_ns, w[1].allocated_to_ns) {
                assert!(
                    w[0].time_ns <= from && from <= to && to <= w[1].time_ns,
                    "{w:?}"
                );
            }
        }
        assert!(mine.windows(2).all(|w| w[0].bytes <= w[1].bytes
            && w[0].allocations <= w[1].allocations
            && w[0].temporary <= w[1].temporary));
    }

    // 10000 blocks of 40 bytes, each freed before the next allocation.
    let temp = site_in(&p, &sites, "temporaries");
    assert_eq!((temp.allocations, temp.bytes), (10_000.0, 400_000.0));
    assert_eq!(temp.temporary, Some(10_000));
    assert_eq!((temp.peak_bytes, temp.bytes_at_peak), (40.0, 0.0));
    // 1000 blocks of 24 bytes live together, the 100 MiB block among them.
    let kept: Vec<&HeapSite> = {
        let ids = sql_json(
            &p,
            "SELECT DISTINCT stack_id FROM stacks WHERE function = 'kept' AND depth <= 1",
        );
        sites
            .iter()
            .filter(|s| {
                ids.iter()
                    .any(|i| i["stack_id"].as_str() == Some(s.stack_id.to_string().as_str()))
            })
            .filter(|s| s.allocations == 1000.0)
            .collect()
    };
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(kept[0].temporary, Some(0));
    assert_eq!(
        (kept[0].peak_bytes, kept[0].bytes_at_peak),
        (24_000.0, 24_000.0)
    );
    // The heap's peak is the instant the 100 MiB block was live, exact to
    // the byte in requested bytes, though it lasted ~1 ms between two ticks.
    let meta = Meta::read(&p).unwrap();
    let peak = meta.processes[0].heap_peak.clone().expect("exact peak");
    let live_then: f64 = sites.iter().map(|s| s.bytes_at_peak).sum();
    assert_eq!(peak.requested_bytes as f64, live_then);
    assert!(
        peak.requested_bytes >= 100 * MIB + 32_000 && peak.requested_bytes < 100 * MIB + 64_000,
        "{peak:?}"
    );
    assert!(peak.usable_bytes >= peak.requested_bytes);
    // malloc(0) is a block like any other.
    let zero: Vec<&HeapSite> = sites.iter().filter(|s| s.bytes == 0.0).collect();
    assert_eq!(zero.len(), 1);
    assert_eq!((zero[0].allocations, zero[0].temporary), (11.0, Some(11)));

    // Only the rows that need to be rows: large blocks and blocks still live
    // (the 10000 temporaries and 1000 kept blocks are in their sites' sums).
    let rows: Vec<Allocation> = memlens_profile::read_table(&p).unwrap();
    let heap_rows = rows.iter().filter(|a| a.kind != "stack").count();
    assert!(heap_rows < 30, "{heap_rows} rows");
    assert!(rows.iter().any(|a| a.size == 100 * MIB));

    // Leaks through the wrapper are told apart by caller, exact.
    let r = report_json(&p);
    // record's summary gives the report's peak and top object.
    let summary = String::from_utf8_lossy(&out.stderr);
    let bytes = |v: &serde_json::Value| memlens_present::human_bytes(v.as_f64().unwrap());
    let top = &r["objects_by_peak"][0];
    for line in [
        format!(
            "  peak        {} resident, {} live heap at {}",
            bytes(&r["peak"]["rss_bytes"]),
            bytes(&r["peak"]["heap_bytes"]),
            memlens_present::seconds(r["peak"]["heap_time_ns"].as_u64().unwrap())
        ),
        format!(
            "  top object  {} ({} peak)",
            top["name"].as_str().unwrap(),
            bytes(&top["peak_bytes"])
        ),
    ] {
        assert!(summary.lines().any(|l| l == line), "{line:?} in {summary}");
    }
    let leaks: Vec<(String, f64, f64)> = r["leaks"]["sites"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["name"].as_str().unwrap().starts_with("xmalloc"))
        .map(|o| {
            (
                o["name"].as_str().unwrap().to_string(),
                o["leaked_blocks"].as_f64().unwrap(),
                o["leaked_bytes"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(leaks.len(), 3, "{leaks:?}");
    for (caller, blocks) in [("leak_a", 3.0), ("leak_b", 5.0), ("leak_c", 7.0)] {
        let (name, b, bytes) = leaks
            .iter()
            .find(|l| l.0.contains(&format!("← {caller} (")))
            .unwrap_or_else(|| panic!("{caller} in {leaks:?}"));
        assert_eq!((*b, *bytes), (blocks, 100.0 * blocks), "{name}");
    }
    let text = report_text(&p);
    assert!(
        text.contains("xmalloc (heap_measures.c:22) ← leak_b (heap_measures.c:"),
        "{text}"
    );
    assert!(text.contains("exact: every block replayed"), "{text}");
    // JSON lists each object's whole stack; the text shows --stacks frames
    // of it from the site out; a wrapper the user names is no site.
    let frames = frames_of(&r["leaks"]["sites"][1]);
    assert!(
        frames.contains(&"xmalloc (heap_measures.c:22)"),
        "{frames:?}"
    );
    assert!(frames.iter().any(|f| f.starts_with("main (")), "{frames:?}");
    let text = Command::new(memlens())
        .args(["report", "--stacks", "2", "--skip-frames", "xmalloc"])
        .arg(&p)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    let leak_c = text
        .lines()
        .position(|l| l.contains("700 B") && l.contains("leak_c (heap_measures.c:38)"))
        .unwrap_or_else(|| panic!("{text}"));
    let under: Vec<&str> = text
        .lines()
        .skip(leak_c + 1)
        .take(2)
        .map(str::trim)
        .collect();
    assert_eq!(under[0], "at leak_c (heap_measures.c:38)", "{text}");
    assert!(under[1].starts_with("at main (heap_measures.c:"), "{text}");

    // The same run's peers: dhat's totals and peak, heaptrack's temporaries
    // and leaks.
    let figure = dhat_figures(&program("heap_measures"));
    let total_blocks: f64 = sites.iter().map(|s| s.allocations).sum();
    let total_bytes: f64 = sites.iter().map(|s| s.bytes).sum();
    // dhat counts malloc(0) as one byte.
    assert_eq!(
        figure("Total:"),
        (total_bytes as u64 + 11, total_blocks as u64)
    );
    assert_eq!(figure("At t-gmax:").0, peak.requested_bytes);
    // massif, asked for its exact peak: the largest heap of its snapshots.
    let massif_out = dir.path().join("massif.out");
    let st = Command::new("valgrind")
        .args(["--tool=massif", "--peak-inaccuracy=0.0"])
        .arg(format!("--massif-out-file={}", massif_out.display()))
        .arg(program("heap_measures"))
        .output()
        .unwrap();
    assert!(st.status.success());
    let snapshots = std::fs::read_to_string(&massif_out).unwrap();
    let massif_peak = (snapshots.lines())
        .filter_map(|l| l.strip_prefix("mem_heap_B=")?.parse::<u64>().ok())
        .max();
    assert_eq!(massif_peak, Some(peak.requested_bytes));
    let xmalloc_leaks: f64 = leaks.iter().map(|l| l.2).sum();
    // valgrind frees libc's stdout buffer at exit (__libc_freeres).
    assert_eq!(figure("At t-end:"), (xmalloc_leaks as u64, 15));

    let trace = dir.path().join("heaptrack");
    let st = Command::new("heaptrack")
        .arg("-o")
        .arg(&trace)
        .arg(program("heap_measures"))
        .output()
        .expect("heaptrack is installed (.ci/run installs it)");
    assert!(st.status.success());
    let printed = Command::new("heaptrack_print")
        .arg(dir.path().join("heaptrack.zst"))
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&printed.stdout);
    let temporaries: u64 = sites.iter().filter_map(|s| s.temporary).sum();
    assert!(
        printed.contains(&format!("temporary memory allocations: {temporaries} ")),
        "{printed}"
    );
    let leaked: f64 = sites.iter().map(|s| s.leaked_bytes).sum();
    assert!(
        printed.contains(&format!("total memory leaked: {:.2}K", leaked / 1000.0)),
        "{leaked} {printed}"
    );
}

/// A C++ program's heap from its first block: libstdc++'s emergency
/// exception pool, allocated by its constructor before the runtime's ran,
/// is recorded when the runtime starts, so the blocks, bytes and peak equal
/// dhat's to the byte.
#[test]
fn a_cpp_programs_heap_from_its_first_block_equals_dhats() {
    let dir = tempdir();
    let p = dir.path().join("p");
    assert_ran(&record(&p, &["--leaks"], &[&program("mapstr")]));
    let sites: Vec<HeapSite> = memlens_profile::read_table(&p).unwrap();
    let total = (
        sites.iter().map(|s| s.bytes).sum::<f64>() as u64,
        sites.iter().map(|s| s.allocations).sum::<f64>() as u64,
    );
    let figure = dhat_figures(&program("mapstr"));
    assert_eq!(total, figure("Total:"));
    let r = report_json(&p);
    assert_eq!(
        r["peak"]["heap_bytes"].as_u64(),
        Some(figure("At t-gmax:").0)
    );
}

/// heaptrack's temporary allocations (a block whose free is the next event
/// after an allocation of its site and size) on real programs: sort, an
/// SQL query in sqlite3 (whose string builder reallocates as it grows) and
/// CPython, recorded with `--leaks`, against heaptrack on the same command.
/// heaptrack's count includes one of its own (its libstdc++'s constructor,
/// measured on `true`); the C library's locale loading differs by an
/// allocation or two under heaptrack's launcher.
#[test]
fn temporaries_are_heaptracks_on_real_programs() {
    // The programs' work depends on the locale: sort in the C locale
    // compares bytes (1 temporary), in C.UTF-8 it collates (50 for 1,000
    // lines). Set here, not taken from the machine (a fresh chroot has none).
    const LOCALE: [(&str, &str); 1] = [("LC_ALL", "C.UTF-8")];
    let dir = tempdir();
    let heaptrack_temporaries = |name: &str, command: &[&str]| -> u64 {
        let trace = dir.path().join(name);
        let out = Command::new("heaptrack")
            .envs(LOCALE)
            .arg("-o")
            .arg(&trace)
            .args(command)
            .output()
            .expect("heaptrack is installed (.ci/run installs it)");
        assert!(out.status.success(), "heaptrack {command:?}");
        let printed = Command::new("heaptrack_print")
            .arg(dir.path().join(format!("{name}.zst")))
            .output()
            .unwrap();
        let printed = String::from_utf8_lossy(&printed.stdout);
        let line = (printed.lines())
            .find_map(|l| l.strip_prefix("temporary memory allocations: "))
            .unwrap_or_else(|| panic!("{printed}"));
        line.split_whitespace().next().unwrap().parse().unwrap()
    };
    let own = heaptrack_temporaries("true", &["/bin/true"]);
    let lines = dir.path().join("lines");
    let text: String = (0..100_000u64)
        .map(|i| format!("{}\n", i.wrapping_mul(0x9e37_79b9_7f4a_7c15) % 1_000_003))
        .collect();
    std::fs::write(&lines, text).unwrap();
    let sql = "create table t(a, b); with recursive c(x) as (select 1 union all \
               select x + 1 from c where x < 20000) insert into t select x, \
               printf('%08d-abc', x * 7) from c; select count(*), max(b) from t \
               group by a % 10 order by 2 limit 3;";
    let programs: [(&str, Vec<&str>); 3] = [
        (
            "sort",
            vec!["/usr/bin/sort", "--parallel=1", lines.to_str().unwrap()],
        ),
        ("sqlite3", vec!["/usr/bin/sqlite3", ":memory:", sql]),
        (
            "python3",
            vec![
                "/usr/bin/python3",
                "-c",
                "import json; print(len(json.loads(json.dumps([{'a': i} for i in range(20000)]))))",
            ],
        ),
    ];
    for (name, command) in programs {
        let p = dir.path().join(format!("{name}.memlens"));
        assert_ran(&record_with(&LOCALE, &p, &["--leaks"], &command));
        let sites: Vec<HeapSite> = memlens_profile::read_table(&p).unwrap();
        let ours: u64 = sites.iter().filter_map(|s| s.temporary).sum();
        let theirs = heaptrack_temporaries(name, &command) - own;
        assert!(
            ours.abs_diff(theirs) <= 2,
            "{name}: {ours} temporaries, heaptrack {theirs}"
        );
        assert!(ours > 10, "{name}: {ours}");
    }
}

/// Three sites in one line of one function (a map's nodes, the key strings
/// and the temporaries they are built from, all inlined from the standard
/// library's headers) share their site and callers: each is named by the
/// frame below the site that tells it apart, as heaptrack shows them.
#[test]
fn sites_of_one_line_are_told_apart_by_the_frames_below_it() {
    let dir = tempdir();
    let p = dir.path().join("p");
    assert_ran(&record(&p, &["--leaks"], &[&program("mapstr")]));
    let r = report_json(&p);
    let line = source_line("mapstr.cpp", "m[std::string");
    let built: Vec<String> = objects(&r, "objects_by_allocated")
        .into_iter()
        .filter(|o| o["allocations"].as_f64() == Some(100_000.0))
        .map(|o| o["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(built.len(), 3, "{built:?}");
    let site = format!(" ← build (mapstr.cpp:{line})");
    for name in &built {
        let (below, _) = name.split_once(&site).unwrap_or_else(|| panic!("{name}"));
        assert!(!below.is_empty(), "{name}");
        assert_eq!(
            built.iter().filter(|n| n.starts_with(below)).count(),
            1,
            "{built:?}"
        );
    }
    assert!(built.iter().any(|n| n.contains("operator[]")), "{built:?}");
}

#[test]
fn the_call_stacks_of_one_source_line_are_one_object_whose_peak_is_bounded() {
    let dir = tempdir();
    let p = dir.path().join("p");
    assert_ran(&record(&p, &["--leaks"], &[&program("unrolled_sites")]));
    // Eight and two call stacks, one source line each.
    let stacks = sql_json(
        &p,
        "select count(*) as n from sites where allocations = 1000",
    );
    assert_eq!(stacks[0]["n"], 10, "{stacks:?}");
    let r = report_json(&p);
    let object = |comment: &str| {
        let line = source_line("unrolled_sites.c", comment);
        let objects = objects(&r, "objects_by_peak");
        let o = (objects.iter())
            .find(|o| {
                o["name"]
                    .as_str()
                    .unwrap()
                    .contains(&format!("unrolled_sites.c:{line})"))
            })
            .unwrap_or_else(|| panic!("no object of line {line}: {objects:#?}"));
        let peak = o["peak_bytes"].as_f64().unwrap();
        let at_most = o["peak_bytes_at_most"].as_f64().unwrap_or(peak);
        assert!(peak >= o["bytes_at_peak"].as_f64().unwrap(), "{o:#?}");
        (o["allocations"].as_f64().unwrap(), peak, at_most)
    };
    // Eight blocks of 100 to 107 bytes live together: 828 at most at once.
    let (allocations, at_least, at_most) = object("the kept blocks");
    assert_eq!(allocations, 8000.0);
    assert!(
        at_least <= 828.0 && 828.0 <= at_most,
        "{at_least} {at_most}"
    );
    assert!(at_least >= 107.0, "{at_least}");
    // One 1000-byte block at a time, from two places.
    let (allocations, at_least, at_most) = object("the churned blocks");
    assert_eq!(allocations, 2000.0);
    assert_eq!(at_least, 1000.0);
    assert!(at_most <= 2000.0, "{at_most}");
    // record's summary reads the sites' timelines only for such objects,
    // and finds the same peaks.
    let peaks = |p: memlens_profile::Profile| -> Vec<(String, f64, Option<f64>)> {
        let objects = memlens_analysis::data_objects(&p).list;
        (objects.into_iter())
            .filter(|o| o.kind == memlens_analysis::ObjectKind::Heap)
            .map(|o| (o.name, o.peak_bytes, o.peak_bytes_at_most))
            .collect()
    };
    let summarized = memlens_profile::Profile::load_for_summary(&p).unwrap();
    assert!(summarized.site_timeline.is_empty() && summarized.site_timeline_unread);
    let whole = memlens_profile::Profile::load(&p).unwrap();
    assert!(!whole.site_timeline.is_empty());
    assert_eq!(peaks(summarized), peaks(whole));
}

/// The sites' figures that do not depend on where the profile's clock
/// starts, by stack.
fn site_figures(p: &Path) -> Vec<(u64, [f64; 7], Option<u64>)> {
    let sites: Vec<HeapSite> = memlens_profile::read_table(p).unwrap();
    let mut figures: Vec<_> = (sites.iter())
        .map(|s| {
            let sums = [s.allocations, s.bytes, s.usable_bytes, s.peak_bytes];
            let at_end = [s.bytes_at_peak, s.leaked, s.leaked_bytes];
            (
                s.stack_id,
                [&sums[..], &at_end[..]].concat().try_into().unwrap(),
                s.temporary,
            )
        })
        .collect();
    figures.sort_by_key(|f| f.0);
    figures
}

#[test]
fn a_replay_begun_while_the_program_runs_gives_the_finalizers_figures() {
    // The collector replays the log of a program recording every block while
    // it runs, in the order it reads it, as long as the program has one
    // thread; once a second thread starts the finalizer merges the rest. The
    // sites come out as when the finalizer replays the whole log after the
    // run (the profile finalized again from its raw log). Run alone, and
    // exec'd by a wrapper (whose image is followed first).
    let late_threads = program("late_threads");
    replayed_during_the_run_as_after_it(&[&late_threads]);
    replayed_during_the_run_as_after_it(&["env", &late_threads]);
}

#[test]
fn a_block_freed_by_one_thread_and_reallocated_by_another_keeps_its_order() {
    // 100,000 hand-offs, each a free and the same block's reallocation on
    // another thread a cache line's trip later: every free matches its
    // allocation only if the threads' times agree to within that (with each
    // thread interpolating its own clock, or the counter read ahead of the
    // load that saw the free, 39 to 383 came out unmatched).
    let dir = tempdir();
    let p = dir.path().join("p");
    let out = record(&p, &["--leaks"], &[&program("handoff")]);
    assert_ran(&out);
    let reused: u64 = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .expect("the program's count");
    assert!(
        reused > 90_000,
        "the allocator gave the block back {reused} times"
    );
    let r = report_json(&p);
    assert_eq!(r["losses"]["unmatched_frees"], 0, "{}", r["losses"]);
    // Each block freed before the next allocation, none left.
    let sites: Vec<HeapSite> = memlens_profile::read_table(&p).unwrap();
    let handed = sites.iter().find(|s| s.allocations == 100_000.0);
    let handed = handed.expect("the handed block's site");
    assert_eq!((handed.temporary, handed.leaked), (Some(100_000), 0.0));
}

/// Records `command` (late_threads.c) with every block and checks its figures.
fn replayed_during_the_run_as_after_it(command: &[&str]) {
    let dir = tempdir();
    let p = dir.path().join("p");
    assert_ran(&record(&p, &["--leaks", "--keep-raw"], command));
    let r = report_json(&p);
    for loss in ["truncated_blocks", "unmatched_frees", "dropped_events"] {
        assert_eq!(r["losses"][loss], 0, "{loss}: {}", r["losses"]);
    }
    let sites: Vec<HeapSite> = memlens_profile::read_table(&p).unwrap();
    let (churned, handed) = (site_in(&p, &sites, "churn"), site_in(&p, &sites, "produce"));
    assert_eq!((churned.allocations, churned.leaked), (1_000_000.0, 0.0));
    assert_eq!((handed.allocations, handed.leaked), (200_000.0, 200.0));
    // Freed right after their allocation: all the main thread's blocks but
    // every thousandth; of the producer's, those the consumer freed before
    // the producer's next allocation (as the threads' timing has it).
    assert_eq!(churned.temporary, Some(999_000));
    assert!(handed.temporary.is_some_and(|n| n < 199_800));
    let during = site_figures(&p);
    std::fs::remove_file(p.join("meta.json")).unwrap();
    let out = Command::new(memlens())
        .arg("finalize")
        .arg(&p)
        .output()
        .unwrap();
    assert_ran(&out);
    assert_eq!(during, site_figures(&p));
}

#[test]
fn log_blocks_keep_every_event_in_order_and_only_staging_blocks_are_made_ready() {
    // Two threads allocating and freeing 1000000 blocks each, every block
    // recorded: 4 M events, about 1000 log blocks, each staged in its
    // thread's staging block and copied to the next block of the log. A
    // block taken out of a thread's order would put frees before their
    // allocations (unmatched frees, wrong leaks); one lost would drop events.
    let dir = tempdir();
    let p = dir.path().join("p");
    let out = record(&p, &["--leaks", "--keep-raw"], &[&program("churn")]);
    assert_ran(&out);
    let r = report_json(&p);
    let losses = &r["losses"];
    for loss in ["truncated_blocks", "unmatched_frees", "dropped_events"] {
        assert_eq!(losses[loss], 0, "{loss}: {losses}");
    }
    let leaked: f64 = (r["leaks"]["sites"].as_array().unwrap().iter())
        .filter(|o| o["name"].as_str().unwrap().contains("churn (churn.c:"))
        .map(|o| o["leaked_blocks"].as_f64().unwrap())
        .sum();
    assert_eq!(leaked, 2000.0, "{:#}", r["leaks"]);
    let sites: Vec<HeapSite> = memlens_profile::read_table(&p).unwrap();
    let allocated: f64 = (sites_in(&p, &sites, "churn").iter())
        .map(|s| s.allocations)
        .sum();
    assert_eq!(allocated, 2_000_000.0);
    // The log's own account: blocks in use, blocks taken ready, and those
    // still marked ready at the end (written for no one). Only a thread's
    // staging block, mapped, needs one made ready (its disk space written
    // ahead); the blocks records are copied to get theirs as they are
    // written, never zeros first.
    let bytes = std::fs::read(raw_log(&p)).unwrap();
    let at = std::mem::offset_of!(memlens_rawlog::FileHeader, ready_taken);
    let taken = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    let magic_of = |block: usize| {
        let off = memlens_rawlog::block_offset(block as u64) as usize;
        u32::from_le_bytes(bytes[off..off + 4].try_into().unwrap())
    };
    let blocks = (bytes.len() - memlens_rawlog::HEADER_SIZE) / memlens_rawlog::BLOCK_SIZE;
    let used = (0..blocks)
        .filter(|&b| magic_of(b) == memlens_rawlog::BLOCK_MAGIC)
        .count();
    let unused = (0..blocks)
        .filter(|&b| magic_of(b) == memlens_rawlog::READY_MAGIC)
        .count();
    eprintln!(
        "{used} blocks used, {taken} of them made ready by the collector; {unused} ready left"
    );
    assert!(used >= 900, "{used} blocks used");
    assert!(
        taken <= 2,
        "{taken} taken ready for 2 threads' staging blocks"
    );
    assert!(unused <= 64, "{unused} left ready, {used} used");
}

#[test]
fn keep_blocks_writes_every_row_and_the_same_sums() {
    let dir = tempdir();
    let p = dir.path().join("p");
    assert_ran(&record(
        &p,
        &["--sample-rate", "1", "--keep-blocks"],
        &[&program("heap_measures")],
    ));
    let rows: Vec<Allocation> = memlens_profile::read_table(&p).unwrap();
    let sites: Vec<HeapSite> = memlens_profile::read_table(&p).unwrap();
    let heap: Vec<&Allocation> = rows.iter().filter(|a| a.kind != "stack").collect();
    let blocks: f64 = sites.iter().map(|s| s.allocations).sum();
    assert_eq!(heap.len() as f64, blocks);
    let bytes: u64 = heap.iter().map(|a| a.size).sum();
    assert_eq!(bytes as f64, sites.iter().map(|s| s.bytes).sum::<f64>());
}

#[test]
fn cpython_sites_are_named_past_its_allocators() {
    // Every object the interpreter allocates goes through pymalloc: the
    // sites are the interpreter's code that asked, not its allocator.
    let dir = tempdir();
    let p = dir.path().join("p");
    let script = "d = [{'k': str(i), 'v': [i] * 3} for i in range(20000)]";
    assert_ran(&record(&p, &["--leaks"], &["python3", "-c", script]));
    let r = report_json(&p);
    let names = names(&r["objects_by_allocated"]);
    assert!(!names.is_empty());
    for name in &names {
        for layer in [
            "_PyObject_Malloc",
            "PyMem_",
            "_PyObject_ArenaMmap",
            "new_arena",
        ] {
            assert!(!name.starts_with(layer), "{name} in {names:?}");
        }
    }
}

#[test]
fn blocks_from_before_the_runtime_are_recorded_when_it_starts() {
    // The library's constructor runs before the preloaded runtime's and
    // allocates 8 MiB that main frees; main then holds 4 MiB for 100 ms.
    // The runtime kept the block and records it when it starts, as a group
    // of its own: the free finds it, and the live heap reads 4 MiB while
    // main holds its block, not 0 or 12.
    let dir = tempdir();
    let d = dir.path();
    let exe = program_with_library(d, "early_lib.c", &[], "early_block.c", "early_block");
    let p = d.join("p");
    assert_ran(&record(&p, &["--leaks"], &[exe.to_str().unwrap()]));
    let r = report_json(&p);
    assert_eq!(r["losses"]["unmatched_frees"], 0, "{}", r["losses"]);
    let early = objects(&r, "objects_by_allocated")
        .into_iter()
        .find(|o| {
            o["kind"] == "group"
                && o["name"]
                    .as_str()
                    .unwrap()
                    .starts_with("allocated before memlens started")
        })
        .unwrap_or_else(|| panic!("{}", r["objects_by_allocated"]));
    assert!(
        early["allocated_bytes"].as_f64().unwrap() >= (8 * MIB) as f64,
        "{early}"
    );
    assert_eq!(early["leaked_bytes"].as_f64(), Some(0.0), "{early}");
    let timeline: Vec<memlens_profile::TimelinePoint> = memlens_profile::read_table(&p).unwrap();
    let before = timeline.iter().map(|t| t.heap_before_start).max().unwrap();
    assert!(before < 64 * 1024, "{before}");
    let holding = (timeline.iter())
        .filter(|t| (4 * MIB..4 * MIB + 64 * 1024).contains(&t.heap_live))
        .count();
    let live: Vec<u64> = timeline.iter().map(|t| t.heap_live).collect();
    assert!(holding >= 3, "{live:?}");
}

#[test]
fn code_no_symbol_covers_is_named_by_module_and_offset() {
    // A stripped library keeps only its exported symbols: the static
    // function that allocates lies past an exported one's end, and must not
    // be named after it (its frame reads module and offset; the object is
    // named by the exported function that called it).
    let dir = tempdir();
    let d = dir.path();
    let exe = program_with_library(
        d,
        "stripped_lib.c",
        &["-fno-omit-frame-pointer", "-g"],
        "stripped_main.c",
        "stripped",
    );
    // Its debug information kept apart first, as a debuginfod client caches
    // it: <cache>/<build id>/debuginfo.
    let cache = d.join("debuginfod");
    let notes = Command::new("readelf")
        .args(["-n", "libstripped.so"])
        .current_dir(d)
        .output();
    let notes = String::from_utf8(notes.unwrap().stdout).unwrap();
    let build_id = notes
        .split("Build ID: ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap();
    std::fs::create_dir_all(cache.join(build_id)).unwrap();
    let debuginfo = cache.join(build_id).join("debuginfo");
    let st = Command::new("objcopy")
        .args(["--only-keep-debug", "libstripped.so"])
        .arg(&debuginfo)
        .current_dir(d)
        .status()
        .unwrap();
    assert!(st.success());
    let st = Command::new("strip")
        .args(["--strip-unneeded", "libstripped.so"])
        .current_dir(d)
        .status()
        .unwrap();
    assert!(st.success());
    // The site of the 500 000 bytes the library allocates, recorded with `env`.
    let site_of = |profile: &str, env: &[(&str, &str)]| {
        let p = d.join(profile);
        let out = record_with(env, &p, &["--unwind", "fp"], &[exe.to_str().unwrap()]);
        assert_ran(&out);
        let r = report_json(&p);
        objects(&r, "objects_by_allocated")
            .into_iter()
            .find(|o| o["allocated_bytes"].as_f64() == Some(500_000.0))
            .unwrap_or_else(|| panic!("{:#}", r["objects_by_allocated"]))
    };
    let site = site_of("p", &[]);
    let frames = frames_of(&site);
    assert!(frames[0].starts_with("libstripped.so+0x"), "{frames:?}");
    // The object is named by the library's function the program entered,
    // the first frame with a name: the offset would tell a user nothing.
    let name = site["name"].as_str().unwrap();
    assert!(
        name.starts_with("exported_entry [libstripped.so]"),
        "{name}"
    );

    // With the debuginfod cache, the same code has its names and lines.
    let site = site_of(
        "with-debuginfo",
        &[("DEBUGINFOD_CACHE_PATH", cache.to_str().unwrap())],
    );
    let name = site["name"].as_str().unwrap();
    assert!(
        name.starts_with("hidden_alloc (stripped_lib.c:6)"),
        "{name}"
    );
}

/// The largest resident set, MiB, of a command and of the processes it
/// waited for. Started by a small process (python, as `bench/lib.sh`),
/// not by this one: a process's peak as `wait4` gives it includes its
/// parent's resident set at the exec (the kernel keeps the larger across
/// it), and this test process holds other tests' logs.
fn peak_mib(cmd: &mut Command) -> u64 {
    let out = Command::new("python3")
        .args(["-c", PEAK_OF_CHILD])
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .envs(cmd.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let (status, peak) = text.trim().split_once(' ').expect("status and peak");
    assert_eq!(status, "0", "{cmd:?}");
    peak.parse().unwrap()
}

const PEAK_OF_CHILD: &str = "import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)";

/// Every command's peak memory, MiB, for `pairs` malloc/free pairs recorded
/// block by block (nothing live at once): record, finalize, report, report
/// --html, and the raw log's size.
fn every_block_peaks(dir: &Path, exe: &str, pairs: &str) -> [u64; 5] {
    let p = dir.join(format!("p{pairs}"));
    let record = peak_mib(
        Command::new(memlens())
            .env("MEMLENS_RUNTIME", runtime())
            .args(["record", "--leaks", "--keep-raw", "-o"])
            .arg(&p)
            .args(["--", exe, pairs, "0"]),
    );
    let raw: u64 = std::fs::read_dir(p.join("raw"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    let sites: Vec<HeapSite> = memlens_profile::read_table(&p).unwrap();
    let calls: f64 = sites.iter().map(|s| s.allocations).sum();
    assert!(calls >= pairs.parse::<f64>().unwrap(), "{calls}");
    std::fs::remove_file(p.join("meta.json")).unwrap();
    let finalize = peak_mib(Command::new(memlens()).arg("finalize").arg(&p));
    let report = peak_mib(Command::new(memlens()).arg("report").arg(&p));
    let html = peak_mib(
        Command::new(memlens())
            .arg("report")
            .arg(&p)
            .arg("--html")
            .arg(dir.join("r.html")),
    );
    std::fs::remove_dir_all(&p).unwrap();
    [record, finalize, report, html, raw >> 20]
}

#[test]
fn every_block_memory_is_bounded_by_live_blocks_not_calls() {
    // 3 and 9 million malloc/free calls, nothing live at once: three times
    // the raw log, and no command holds more of it (the symbolizer's debug
    // information, libc's included where libc6-dbg is installed, is a
    // fixed part).
    let dir = tempdir();
    let d = dir.path();
    let exe = d.join("malloc_heavy");
    let st = Command::new("gcc")
        .args(["-O2", "-g"])
        .arg(root().join("bench/malloc_heavy.c"))
        .arg("-o")
        .arg(&exe)
        .status()
        .unwrap();
    assert!(st.success());
    let exe = exe.to_str().unwrap();
    let small = every_block_peaks(d, exe, "1500000");
    let large = every_block_peaks(d, exe, "4500000");
    eprintln!("[record, finalize, report, html MiB, raw log MiB]: {small:?} then {large:?}");
    assert!(large[4] > 2 * small[4] + 30, "{small:?} {large:?}");
    for (command, (s, l)) in ["record", "finalize", "report", "html"]
        .iter()
        .zip(small.iter().zip(&large))
    {
        assert!(*l < s + 25 && *l < 200, "{command}: {s} then {l} MiB");
    }
}

#[test]
fn a_region_holds_no_block_freed_before_it() {
    // Ticks every second: the one before the region saw the freed 64 MiB.
    let dir = tempdir();
    let exe = dir.path().join("freed_before_region");
    let st = Command::new("gcc")
        .args(["-O1", "-g"])
        .arg(format!("-I{}", root().join("include").display()))
        .arg(root().join("tests/programs/freed_before_region.c"))
        .arg("-o")
        .arg(&exe)
        .status()
        .unwrap();
    assert!(st.success());
    let region = |extra: &[&str]| {
        let p = dir.path().join(format!("p{}", extra.len()));
        let mut flags = vec!["--interval", "1000"];
        flags.extend(extra);
        assert_ran(&record(&p, &flags, &[exe.to_str().unwrap()]));
        named(&report_json(&p)["regions"], "after").clone()
    };
    // Every block recorded: exact, 1 MiB over what lived before.
    let exact = region(&["--leaks"]);
    assert_eq!(exact["heap_exact"], true);
    let peak = exact["heap_peak"].as_u64().unwrap();
    assert!((MIB..MIB + 64 * 1024).contains(&peak), "{exact}");
    assert_eq!(exact["heap_growth"], 0, "{exact}");
    // At the defaults, read at ticks inside the region: none fell in its
    // 0.3 s, so no figure, rather than the tick before it.
    let ticks = region(&[]);
    assert_eq!(ticks["heap_exact"], false);
    assert!(
        ticks["heap_peak"].as_u64().is_none_or(|p| p < 8 * MIB),
        "{ticks}"
    );
}

/// The runtime reuses a call path's walk while the stack words it read are
/// unchanged; a fork child writes a log of its own, and the stack its first
/// blocks come from (the one its parent walked last) must be defined in it.
#[test]
fn a_fork_child_defines_the_stack_its_parent_walked_last() {
    let dir = tempdir();
    let p = dir.path().join("p");
    let out = record(&p, &["--leaks"], &[&program("fork_same_path")]);
    assert_ran(&out);
    let named: Vec<u32> = sql_json(
        &p,
        "SELECT DISTINCT pid FROM stacks WHERE function = 'grab' ORDER BY pid",
    )
    .iter()
    .map(|r| r["pid"].as_u64().unwrap() as u32)
    .collect();
    assert_eq!(
        named.len(),
        2,
        "grab's stack defined in both processes: {named:?}"
    );
    let sites: Vec<HeapSite> = memlens_profile::read_table(&p).unwrap();
    let leaked: Vec<(u32, f64, f64)> = sites_in(&p, &sites, "grab")
        .iter()
        .filter(|s| s.leaked > 0.0)
        .map(|s| (s.pid, s.leaked, s.leaked_bytes))
        .collect();
    assert_eq!(leaked.len(), 1, "{leaked:?}");
    assert!(named.contains(&leaked[0].0), "{leaked:?} {named:?}");
    assert_eq!((leaked[0].1, leaked[0].2), (4.0, 1200.0), "{leaked:?}");
}

#[test]
fn a_regions_heap_growth_is_exact_at_the_defaults() {
    // 50 steps, each far shorter than a tick, keeps one 4000-byte block:
    // the growth comes from the runtime's counters read at each step's
    // ends (usable bytes), at the defaults as with every block recorded
    // (requested bytes). Before: the ticks nearest each end, 0 or any
    // multiple of what a tick saw.
    let dir = tempdir();
    let growth = |extra: &[&str]| {
        let p = dir.path().join(format!("p{}", extra.len()));
        let out = record(&p, extra, &[&program("region_heap")]);
        assert_ran(&out);
        let usable: i64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        let r = report_json(&p);
        let step = named(&r["regions"], "step");
        (
            step["heap_growth"].as_i64().unwrap(),
            step["heap_growth_exact"].clone(),
            usable,
        )
    };
    let (at_defaults, exact, usable) = growth(&[]);
    assert_eq!((at_defaults, exact), (50 * usable, serde_json::json!(true)));
    let (every_block, exact, _) = growth(&["--leaks"]);
    assert_eq!((every_block, exact), (50 * 4000, serde_json::json!(true)));
}

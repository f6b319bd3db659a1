//! Every output of a recorded profile beyond the text report: plots and flame
//! graphs, the HTML report in a browser, `diff`, SQL and `export`, the Python
//! example, and the live view while the program runs.

mod common;
use common::*;
use memlens_profile::{ThreadRow, TimelinePoint};
use std::path::Path;
use std::process::Command;

#[test]
fn scatter_and_bandwidth_plots() {
    // A tick every 2 ms: the bandwidth lines have points however fast the
    // machine runs the program.
    let (dir, p) = recorded_stream(&["-DN=300000L", "-DCHASE=65536L"], &["--interval", "2"]);
    for kind in ["scatter", "bandwidth"] {
        for ext in ["png", "svg"] {
            let img = dir.path().join(format!("{kind}.{ext}"));
            assert_ran(&plot(kind, &p, &img));
        }
    }
    let report = report_json(&p);
    // The scatter: one dot per sample of each band's object, the bands named
    // with the report's sample counts, and the legend's two dots.
    let scatter = image::Svg::read(&dir.path().join("scatter.svg"));
    let mut dots = 2;
    for o in report["access"]["objects"].as_array().unwrap() {
        let samples = o["samples"].as_u64().unwrap();
        let band = format!("{} ({samples})", o["name"].as_str().unwrap());
        assert!(scatter.has_text(&band), "no band {band}");
        dots += samples as usize;
    }
    assert_eq!(scatter.circles, dots);
    assert!(scatter.has_text("loads") && scatter.has_text("stores"));
    // The bandwidth plot: read and written lines peak at the highest rates
    // between two points of the exact counts: none at the process's start,
    // each timeline tick, its threads' totals at its end (a slow first tick
    // makes the first interval the fastest).
    let timeline: Vec<TimelinePoint> = memlens_profile::read_table(&p).unwrap();
    let threads: Vec<ThreadRow> = memlens_profile::read_table(&p).unwrap();
    let process = &report["summary"]["processes"][0];
    let (start, end) = (
        process["start_ns"].as_u64().unwrap(),
        process["end_ns"].as_u64().unwrap(),
    );
    let mut counts = vec![(start, 0, 0)];
    counts.extend(
        timeline
            .iter()
            .map(|t| (t.time_ns, t.bytes_read, t.bytes_written)),
    );
    let total =
        |bytes: fn(&ThreadRow) -> Option<u64>| threads.iter().map(|t| bytes(t).unwrap()).sum();
    if end > counts.last().unwrap().0 {
        counts.push((end, total(|t| t.bytes_read), total(|t| t.bytes_written)));
    }
    let gib = (1u64 << 30) as f64;
    let peak = |bytes: fn(&(u64, u64, u64)) -> u64| {
        counts
            .windows(2)
            .map(|w| (bytes(&w[1]) - bytes(&w[0])) as f64 / ((w[1].0 - w[0].0) as f64 / 1e9) / gib)
            .fold(0.0, f64::max)
    };
    let bandwidth = image::Svg::read(&dir.path().join("bandwidth.svg"));
    let png = image::Png::read(&dir.path().join("bandwidth.png"));
    let pixel = (bandwidth.y_value(0.0) - bandwidth.y_value(1.0)).abs();
    for (color, name, rate) in [
        ("#1F77B4", "read", peak(|c| c.1)),
        ("#D62728", "written", peak(|c| c.2)),
    ] {
        assert!(bandwidth.has_text(name));
        let line = bandwidth.lines(color);
        assert_eq!(line.len(), 1, "{name}");
        let top = line[0].points.iter().map(|p| p.1).fold(f64::MAX, f64::min);
        let drawn = bandwidth.y_value(top);
        assert!(
            (drawn - rate).abs() <= 1.5 * pixel,
            "{name}: {drawn} GiB/s drawn, peak {rate}; counts (ns, read, written) {counts:?}; processes {:?}",
            report["summary"]["processes"]
        );
        // Written is drawn over read (equal in copy and scale).
        let share = png.share_drawn(&bandwidth, line[0], &["#D62728"]);
        assert_eq!(share, 1.0, "{name}: {share} of its points drawn in the PNG");
    }
    // Without instrumentation there is nothing to draw, and memlens says why.
    let plain = dir.path().join("plain");
    assert!(record(&plain, &[], &[&program("torture"), "exit", "0"])
        .status
        .success());
    let out = plot("scatter", &plain, &dir.path().join("x.png"));
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).contains("build the program with `memlens cc`"));
}

#[test]
fn the_html_report_is_one_file_that_renders_in_headless_chromium() {
    let (dir, p) = recorded_stream(&["-DN=200000L", "-DCHASE=4096L"], &[]);
    let html = dir.path().join("report.html");
    let page = html_report(&p, &html);
    // Self-contained: figures inline, nothing to fetch.
    assert!(
        page.matches("<svg").count() >= 4,
        "capacity, bandwidth, scatter, fold"
    );
    for fetch in ["src=\"http", "href=\"http", "<link", "src=\"//", "@import"] {
        assert!(!page.contains(fetch), "fetches something: {fetch}");
    }
    for id in [
        "run",
        "peak",
        "objects",
        "access",
        "folding",
        "provenance",
        "losses",
    ] {
        assert!(page.contains(&format!("id=\"{id}\"")), "no section {id}");
    }
    // The navigation links to the sections the page has, and to all of them.
    let nav = page
        .split_once("<nav>")
        .unwrap()
        .1
        .split_once("</nav>")
        .unwrap()
        .0;
    let links: Vec<&str> = nav
        .split("href=\"#")
        .skip(1)
        .map(|l| l.split('"').next().unwrap())
        .collect();
    let ids: Vec<&str> = page
        .split("<h2 id=\"")
        .skip(1)
        .map(|l| l.split('"').next().unwrap())
        .collect();
    assert_eq!(links, ids);
    // Both renderings draw the same tables: each HTML row's cells are on one
    // line of the text report, in order (the text cuts long ones with `…`).
    let text = String::from_utf8(
        Command::new(memlens())
            .arg("report")
            .arg(&p)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let rows = html_rows(&page);
    assert!(rows.len() > 40, "{} rows", rows.len());
    // The JSON report carries the same sections and rows.
    let json: serde_json::Value = serde_json::from_slice(&report_view(&p, &[]).stdout).unwrap();
    let sections = json["sections"].as_array().unwrap();
    let json_ids: Vec<&str> = sections.iter().map(|s| s["id"].as_str().unwrap()).collect();
    // The page's own interactive timeline draws what the JSON holds under
    // `timeline`, not a section.
    assert_eq!(ids[0], "timeline");
    assert_eq!(json_ids, ids[1..]);
    assert!(!json["timeline"]["time_ns"].as_array().unwrap().is_empty());
    let json_rows: Vec<Vec<String>> = (sections.iter())
        .flat_map(|s| s["tables"].as_array().unwrap())
        .flat_map(|t| t["rows"].as_array().unwrap())
        .map(|row| {
            (row["cells"].as_array().unwrap().iter())
                .map(|c| c.as_str().unwrap().to_string())
                .filter(|c| !c.is_empty())
                .collect()
        })
        .collect();
    assert_eq!(json_rows, rows);
    // So does a section's table in CSV.
    let csv = Command::new(memlens())
        .args([
            "report",
            "--format",
            "csv",
            "--table",
            "access/top-objects-by-estimated-accesses",
        ])
        .arg(&p)
        .output()
        .unwrap();
    assert_ran(&csv);
    let objects = (sections.iter().find(|s| s["id"] == "access").unwrap()["tables"].as_array())
        .unwrap()
        .iter()
        .find(|t| t["title"] == "Top objects by estimated accesses")
        .unwrap()["rows"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(
        String::from_utf8_lossy(&csv.stdout).lines().count(),
        1 + objects
    );
    for cells in rows {
        let on_one_line = text.lines().any(|line| {
            let mut rest = line;
            cells.iter().all(|cell| {
                let cell: String = cell.chars().take(24).collect();
                let cell = cell.trim_end_matches('…');
                rest.find(cell)
                    .map(|at| rest = &rest[at + cell.len()..])
                    .is_some()
            })
        });
        assert!(on_one_line, "{cells:?} is in no line of the text report");
    }
    // Chromium runs the page's script to its end (it marks the body) without
    // an uncaught error, and draws it.
    let Some(browser) = common::chromium_for("the HTML report's rendering") else {
        return;
    };
    let chromium = |extra: &[&str]| {
        Command::new(&browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
            ])
            .args(["--enable-logging=stderr", "--v=0"])
            .args(extra)
            .arg(format!("file://{}", html.display()))
            .output()
            .unwrap()
    };
    let dom = chromium(&["--dump-dom"]);
    let log = String::from_utf8_lossy(&dom.stderr);
    assert!(
        String::from_utf8_lossy(&dom.stdout).contains("<body data-ready=\"yes\">"),
        "{log}"
    );
    assert!(!log.contains("Uncaught"), "{log}");
    let shot = dir.path().join("report.png");
    let out = chromium(&[
        "--window-size=1280,2000",
        &format!("--screenshot={}", shot.display()),
    ]);
    assert!(out.status.success());
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 50_000,
        "{} bytes",
        png.len()
    );
}

/// The HTML report driven in headless Chromium through Selenium
/// (tests/browser/report_page.py): a click on a heading sorts the rows by
/// the number behind each rounded cell, again in reverse, a name column
/// A to Z; the filter box keeps the rows that name what is typed; a drag
/// across the timeline keeps the objects live in the selected range, and
/// the counters' charts under it, whose rates add up to the readings,
/// follow it; a search in the allocations' flame graph highlights the
/// matching frames;
/// the flame graph weighed by leaked bytes draws main's two leaks.
#[test]
fn the_html_report_sorts_filters_and_selects_a_time_range_in_a_browser() {
    if common::chromium_for("sorting the HTML report's tables").is_none() {
        return;
    }
    let dir = tempdir();
    let p = dir.path().join("p");
    assert_ran(&record(&p, &["--leaks"], &[&program("phases")]));
    let html = dir.path().join("report.html");
    html_report(&p, &html);
    let seen = in_browser(
        "report_page.py",
        &[html.to_str().unwrap(), "objects", "allocs", "make_matrix"],
    );
    let numbers = |key: &str| -> Vec<f64> {
        (seen[key].as_array().unwrap().iter())
            .map(|v| v.as_str().unwrap().parse().unwrap())
            .collect()
    };
    // phases.c: 400,000 list nodes in one group, the other objects one each.
    let largest_first = numbers("first_click");
    assert_eq!(largest_first[0], 400_000.0, "{seen}");
    assert!(largest_first.windows(2).all(|w| w[0] >= w[1]), "{seen}");
    assert_eq!(seen["first_sort"], "descending");
    let smallest_first = numbers("second_click");
    assert!(smallest_first.windows(2).all(|w| w[0] <= w[1]), "{seen}");
    assert_eq!(seen["second_sort"], "ascending");
    let names: Vec<&str> = (seen["by_name"].as_array().unwrap().iter())
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(names.windows(2).all(|w| w[0] <= w[1]), "{names:?}");
    let rows = seen["rows"].as_array().unwrap().len();
    assert_eq!(names.len(), rows, "sorting keeps every row");
    // The two matrices' sites, and only they.
    let filtered = seen["filtered"].as_array().unwrap();
    assert_eq!(filtered.len(), 2, "{seen}");
    for row in filtered {
        let object = row.as_array().unwrap().last().unwrap().as_str().unwrap();
        assert!(object.starts_with("make_matrix (phases.c:19)"), "{object}");
    }
    // An object's stack, folded until its row is clicked: every frame.
    let hidden: Vec<bool> = (seen["hidden_stack"].as_array().unwrap().iter())
        .map(|v| v.as_bool().unwrap())
        .collect();
    assert!(
        !hidden.is_empty() && hidden.iter().all(|shown| !shown),
        "{seen}"
    );
    let stack: Vec<&str> = (seen["stack"].as_array().unwrap().iter())
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(stack.len(), hidden.len(), "{seen}");
    assert!(
        stack.iter().all(|f| f.trim_start().starts_with("at ")),
        "{stack:?}"
    );
    assert!(
        stack.iter().any(|f| f.contains("main (phases.c:")),
        "{stack:?}"
    );
    // A drag across the timeline from the end of "mapped" to the run's end:
    // the objects table keeps the rows live in the range, so an object freed
    // before it (the mapping and one matrix, freed at the end of "mapped")
    // is left out.
    let (lo, hi) = (
        seen["selected"][0].as_f64().unwrap(),
        seen["selected"][1].as_f64().unwrap(),
    );
    assert!(lo < hi, "{seen}");
    let mut freed_before = 0;
    for row in seen["in_range"].as_array().unwrap() {
        let (first, last) = (
            row["first"].as_f64().unwrap(),
            row["last"].as_f64().unwrap(),
        );
        let live = last >= lo && first <= hi;
        assert_eq!(row["shown"], live, "{row} in {lo}..{hi}");
        freed_before += (last < lo) as usize;
    }
    assert!(freed_before >= 1, "{seen}");
    // Every chart under the timeline (bandwidth, counters) follows its range.
    let ranges = seen["chart_ranges"].as_array().unwrap();
    assert!(ranges.len() >= 3, "timeline and two counters: {seen}");
    for range in ranges {
        assert_eq!(range, &seen["selected"], "{seen}");
    }
    // The counters' charts: page faults and CPU time, each rate over its
    // interval (the page scales CPU time's ns/s to CPUs busy); integrated
    // from the second reading on, the recorded readings' growth.
    let titles = seen["counter_titles"].as_array().unwrap();
    assert!(titles[0]
        .as_str()
        .unwrap()
        .starts_with("page-faults in faults/s (measured"));
    assert!(titles[1]
        .as_str()
        .unwrap()
        .starts_with("task-clock in CPUs busy"));
    let readings: Vec<memlens_profile::CounterReading> = memlens_profile::read_table(&p).unwrap();
    let counters = &seen["counters"];
    let t: Vec<f64> = (counters["t"].as_array().unwrap().iter())
        .map(|v| v.as_f64().unwrap())
        .collect();
    for series in counters["series"].as_array().unwrap() {
        let name = series["name"].as_str().unwrap();
        let points: Vec<(f64, f64)> = (t.iter().zip(series["values"].as_array().unwrap()))
            .filter_map(|(&t, v)| Some((t, v.as_f64()?)))
            .collect();
        let integral: f64 = points.windows(2).map(|w| w[1].1 * (w[1].0 - w[0].0)).sum();
        let mut own: Vec<&memlens_profile::CounterReading> =
            readings.iter().filter(|r| r.name == name).collect();
        own.sort_by_key(|r| r.time_ns);
        assert_eq!(points.len() + 1, own.len(), "{name}: a rate per interval");
        let grown = own[own.len() - 1].value - own[1].value;
        assert!(
            (integral - grown).abs() <= 1e-6 * grown.max(1.0),
            "{name}: {integral} against {grown}"
        );
    }
    // Under that range the flame graphs weigh what came in it: the
    // allocations made after "mapped" ends are main's two leaks (1 MiB and
    // stdout's 4 KiB buffer), no matrix, no list node; bytes at the heap's
    // peak, of one instant, stays whole-run and says so.
    let flames = seen["range_flames"].as_array().unwrap();
    let root = |i: usize| flames[i]["root"].as_str().unwrap_or_default().to_string();
    assert!(root(0).starts_with("all (1,052,672 bytes, 100"), "{seen}");
    let frames: Vec<&str> = (seen["range_frames"].as_array().unwrap().iter())
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        frames.iter().any(|f| f.starts_with("main (phases.c:65)")),
        "{frames:?}"
    );
    assert!(
        !frames
            .iter()
            .any(|f| f.contains("make_matrix") || f.contains("build_list")),
        "{frames:?}"
    );
    // So does its caller/callee view: main, printf's path to its buffer.
    let functions = seen["range_functions"].as_array().unwrap();
    assert!(
        functions.contains(&serde_json::json!("main")),
        "{functions:?}"
    );
    assert!(
        functions
            .iter()
            .any(|f| f.as_str().unwrap().contains("printf")),
        "{functions:?}"
    );
    assert!(
        !functions.contains(&serde_json::json!("make_matrix")),
        "{functions:?}"
    );
    for (i, flame) in flames.iter().enumerate() {
        let note = flame["note"].as_str().unwrap();
        match i {
            2 => assert_eq!(
                note,
                "the whole run: the profile does not split this measure by time"
            ),
            _ => assert!(note.starts_with("what came between"), "{note}"),
        }
    }
    assert_eq!(
        seen["whole_note"], "the whole run",
        "a double-click undoes the range"
    );
    // The allocations' flame graph drawn by the page: a search for
    // make_matrix highlights its two call stacks' frames.
    assert!(seen["flame_frames"].as_u64().unwrap() > 5, "{seen}");
    let height = seen["flame_height"].as_u64().unwrap();
    assert!(height > 100 && height < 560, "{height}");
    let highlighted: Vec<&str> = (seen["highlighted"].as_array().unwrap().iter())
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(highlighted.len(), 2, "{highlighted:?}");
    assert!(highlighted
        .iter()
        .all(|f| f.starts_with("make_matrix (phases.c:19)")));
    assert!(
        seen["matched"].as_str().unwrap().starts_with("matched: "),
        "{seen}"
    );
    // phases.c's four phases, shaded on the timeline in their order.
    assert_eq!(
        seen["regions"],
        serde_json::json!(["init", "list", "mapped", "teardown"])
    );
    let note = seen["range_note"].as_str().unwrap();
    assert!(
        note.starts_with("tables keep the objects live between"),
        "{note}"
    );
    eprintln!(
        "report page loaded in {:.2} s",
        seen["load_s"].as_f64().unwrap()
    );
    // The caller/callee view of make_matrix: its two sites' bytes, called
    // from main; it calls nothing the profile records.
    let sandwich = &seen["sandwich"];
    assert_eq!(
        sandwich["functions"],
        serde_json::json!(["make_matrix"]),
        "{sandwich}"
    );
    assert!(
        (sandwich["title"].as_str().unwrap()).starts_with("make_matrix: 40.0 MiB"),
        "{sandwich}"
    );
    assert_eq!(sandwich["callers"][0], "make_matrix", "{sandwich}");
    assert_eq!(sandwich["callers"][1], "main", "{sandwich}");
    assert_eq!(
        sandwich["callees"],
        serde_json::json!(["make_matrix"]),
        "{sandwich}"
    );
    // The flame graph by the measures the profile has (phases.c has no
    // temporary allocation: not offered); by leaked bytes, its root holds
    // the two blocks main leaves (1 MiB and 4 KiB), drawn at full height.
    assert_eq!(
        seen["measures"],
        serde_json::json!([
            "bytes allocated",
            "blocks allocated",
            "bytes live at the heap's peak",
            "bytes leaked (live at exit)"
        ])
    );
    assert_eq!(seen["shown_views"], 1, "{seen}");
    let root = seen["leaked_root"].as_str().unwrap();
    assert!(root.starts_with("all (1,052,672 bytes, 100"), "{root}");
    assert!(seen["leaked_height"].as_u64().unwrap() > 50, "{seen}");
}

/// The source lines of STREAM: each kernel's line carries the bytes its
/// loop moves (samples x period against the loop's exact bytes, within the
/// sampler's bound), the arrays it touches and its region; the HTML page's
/// source pane, driven in headless Chromium (tests/browser/stream_page.py),
/// opens at the most sampled line with the file's text, at an object's
/// hottest line from the link under its row, at a region's and a
/// function's, and at a flame graph frame's line from the link a click on
/// the frame offers; the bandwidth chart under the timeline shows the exact
/// totals, a thread's on a click, and follows the timeline's range, and so
/// does the pane (the lines sampled in it).
#[test]
fn source_lines_carry_each_kernels_bytes_and_the_page_shows_them_beside_the_code() {
    // Long enough for several of the collector's ticks (the thread's bandwidth).
    let n = 1_000_000u64;
    let (dir, p) = recorded_stream(&[&format!("-DN={n}L"), "-DCHASE=4096L"], &[]);
    let r = report_json(&p);
    let code: Vec<String> = std::fs::read_to_string(root().join("examples/stream.c"))
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    let line_of = |text: &str| 1 + code.iter().position(|l| l.contains(text)).unwrap() as u64;
    let lines = r["source"]["lines"].as_array().unwrap();
    let figures = |line: u64| {
        (lines.iter())
            .find(|l| l["line"] == line && l["file"].as_str().unwrap().ends_with("stream.c"))
            .unwrap_or_else(|| panic!("no line {line}: {lines:#?}"))
    };
    // STREAM's triad reads b and c and writes a, 10 times.
    let triad = figures(line_of("a[i] = b[i] + scalar * c[i]"));
    let period = r["source"]["period"].as_u64().unwrap();
    for (field, class, exact) in [
        ("est_bytes_read", "load_samples", 2 * n * 8 * 10),
        ("est_bytes_written", "store_samples", n * 8 * 10),
    ] {
        let samples = triad[class].as_u64().unwrap();
        // Each sample 8 bytes; the bound holds accesses, times 8 for bytes.
        let bound = 8.0 * sampling_error_bound(samples, period, 20);
        let error = (triad[field].as_f64().unwrap() - exact as f64).abs();
        assert!(error <= bound, "{field}: {triad:#} against {exact}");
    }
    let objects: Vec<&str> = (triad["objects"].as_array().unwrap().iter())
        .map(|o| o[0].as_str().unwrap())
        .collect();
    let mut sorted = objects.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [
            "main (stream.c:35)",
            "main (stream.c:36)",
            "main (stream.c:37)"
        ],
        "{triad:#}"
    );
    assert_eq!(triad["regions"].as_array().unwrap().len(), 1, "{triad:#}");
    assert_eq!(triad["regions"][0][0], "triad");

    if common::chromium_for("the HTML report's source pane").is_none() {
        return;
    }
    let html = dir.path().join("report.html");
    html_report(&p, &html);
    let seen = in_browser(
        "stream_page.py",
        &[
            html.to_str().unwrap(),
            "main (stream.c:35)",
            "triad",
            "make_cycle",
        ],
    );
    // Each view at its most sampled line, with the file's own text.
    let most = |pick: &dyn Fn(&serde_json::Value) -> u64| {
        // Ties: the first line, as the pane picks.
        let best = (lines.iter())
            .max_by_key(|l| (pick(l), std::cmp::Reverse(l["line"].as_u64().unwrap())))
            .unwrap();
        (best["line"].as_u64().unwrap(), pick(best))
    };
    let in_list = |list: &serde_json::Value, name: &str| {
        (list.as_array().unwrap().iter())
            .find(|e| e[0] == name)
            .map_or(0, |e| e[1].as_u64().unwrap())
    };
    let expected = [
        ("all", most(&|l| l["samples"].as_u64().unwrap())),
        (
            "object",
            most(&|l| in_list(&l["objects"], "main (stream.c:35)")),
        ),
        ("region", most(&|l| in_list(&l["regions"], "triad"))),
        (
            "function",
            most(&|l| match l["function"] == "make_cycle" {
                true => l["samples"].as_u64().unwrap(),
                false => 0,
            }),
        ),
    ];
    for (view, (line, samples)) in expected {
        let v = &seen[view];
        assert_eq!(v["line"], line, "{view}: {seen:#}");
        assert_eq!(v["samples"], samples.to_string(), "{view}: {seen:#}");
        assert_eq!(v["code"], code[line as usize - 1], "{view}: {seen:#}");
        assert_eq!(v["rows"], code.len(), "every line of the file: {seen:#}");
    }
    // Under the timeline, the bandwidth: the exact totals shown, the one
    // thread's own hidden until its legend entry is clicked; it follows a
    // range set on the timeline.
    let series: Vec<(&str, bool)> = (seen["bandwidth_series"].as_array().unwrap().iter())
        .map(|s| (s[0].as_str().unwrap(), s[1].as_bool().unwrap()))
        .collect();
    assert_eq!(
        series[..2],
        [("read (exact)", true), ("written (exact)", true)]
    );
    assert!(
        series[2..]
            .iter()
            .all(|(name, shown)| name.starts_with("tid ") && !shown),
        "{series:?}"
    );
    assert_eq!(seen["thread_shown"], true);
    let range = seen["bandwidth_range"].as_array().unwrap();
    assert_eq!(range[0], range[2], "{seen}");
    assert_eq!(range[1], range[3], "{seen}");
    assert!(seen["object"]["of"]
        .as_str()
        .unwrap()
        .starts_with("object: main (stream.c:35)"));
    assert!(seen["region"]["of"]
        .as_str()
        .unwrap()
        .starts_with("region: triad"));
    assert!(
        (seen["link"].as_str().unwrap()).starts_with(&format!(
            "hottest source line: stream.c:{}",
            expected[1].1 .0
        )),
        "{seen:#}"
    );
    // A click on the access flame graph's heaviest load frame offers its
    // line; the link opens the pane at it among all samples.
    let frame = seen["frame"].as_str().unwrap();
    let line: usize = (frame.split("(stream.c:").nth(1))
        .and_then(|rest| rest.split(')').next()?.parse().ok())
        .unwrap_or_else(|| panic!("{frame}"));
    assert!(frame.starts_with("load at "), "{frame}");
    assert!(
        (seen["frame_offer"].as_str().unwrap())
            .ends_with(&format!("show stream.c:{line} in the source pane")),
        "{seen:#}"
    );
    let opened = &seen["frame_line"];
    assert_eq!(opened["line"], line, "{seen:#}");
    assert_eq!(opened["of"], "all samples", "{seen:#}");
    assert_eq!(opened["code"], code[line - 1], "{seen:#}");
    // After a range is selected on the timeline, the pane shows the lines
    // sampled in it: those whose first and last samples (the JSON's)
    // overlap it.
    let (lo, hi) = (range[0].as_f64().unwrap(), range[1].as_f64().unwrap());
    let mut in_range: Vec<u64> = (lines.iter())
        .filter(|l| l["file"].as_str().unwrap().ends_with("stream.c"))
        .filter(|l| {
            let seconds = |key: &str| l[key].as_f64().unwrap() / 1e9;
            seconds("first_ns") <= hi && seconds("last_ns") >= lo
        })
        .map(|l| l["line"].as_u64().unwrap())
        .collect();
    in_range.sort_unstable();
    assert!(!in_range.is_empty());
    assert_eq!(seen["range_lines"], serde_json::json!(in_range), "{seen:#}");
    assert!(
        (seen["range_why"].as_str().unwrap()).starts_with("(the lines sampled between"),
        "{seen:#}"
    );
    // And the access flame graph weighs the samples of the range widened to
    // its slices: as many accesses as the samples between the slices'
    // bounds (a sample within 1 us of a bound either way), times the period.
    let flame = &seen["range_flame"];
    let width = flame["seconds"].as_f64().unwrap();
    let (from, to) = ((lo / width).floor() * width, (hi / width).ceil() * width);
    assert!(
        (flame["note"].as_str().unwrap())
            .starts_with(&format!("what came between {from:.3} s and {to:.3} s")),
        "{flame}"
    );
    let samples: Vec<memlens_profile::SampleCore> = memlens_profile::read_table(&p).unwrap();
    let period = memlens_profile::Meta::read(&p)
        .unwrap()
        .settings
        .access_period as f64;
    let between = |margin: f64| {
        (samples.iter())
            .filter(|s| {
                let t = s.time_ns as f64 / 1e9;
                t >= from + margin && t < to - margin
            })
            .count() as f64
            * period
    };
    let root = flame["root"].as_str().unwrap();
    let accesses: f64 = (root.strip_prefix("all (").and_then(|r| r.split(' ').next()))
        .map(|n| n.replace(',', "").parse().unwrap())
        .unwrap_or_else(|| panic!("{root}"));
    assert!(
        between(1e-6) <= accesses && accesses <= between(-1e-6) && accesses > 0.0,
        "{accesses} against {} .. {}",
        between(1e-6),
        between(-1e-6)
    );
}

#[test]
fn a_long_loops_html_report_stays_a_few_megabytes() {
    // 100 000 annotated iterations of ~13 us, ticks every ms, ~600 000
    // samples: a rectangle per iteration on three plots and a circle per
    // sample made this page 72 MB. Instances less than a pixel apart are one
    // band, dense dots one PNG layer, lines one point set per pixel column.
    let dir = tempdir();
    let app = memlens_cc(dir.path(), "fold_phases.c", &["-O2"]);
    let p = dir.path().join("p");
    assert_ran(&record(
        &p,
        &["--interval", "1"],
        &[&app.to_string_lossy(), "100000"],
    ));
    let page = html_report(&p, &dir.path().join("report.html"));
    assert!(page.len() < 3 << 20, "{} bytes", page.len());
    // Every plot is there: capacity, bandwidth, the scatter and the fold
    // (both painted as layers), and the iterations' band on the time plots.
    assert!(page.matches("<svg").count() >= 4);
    assert_eq!(page.matches("href=\"data:image/png;base64,").count(), 2);
    let rects = page.matches("<rect").count();
    assert!(rects < 100, "{rects} rectangles");
    assert!(page.contains(">\niteration\n</text>") || page.contains(">iteration</text>"));
}

#[test]
fn a_many_rank_jobs_map_is_one_layer_of_pixels() {
    // One rank of 300 ticks (`sleep 0.3` at --interval 1: the map's 200 time
    // bins) copied as 150 ranks: 30 000 cells, a rectangle each before (the
    // map's SVG was 2.6 MB), now painted into one PNG (17 KB).
    let dir = tempdir();
    let rank = dir.path().join("rank");
    assert_ran(&record(&rank, &["--interval", "1"], &["sleep", "0.3"]));
    let job = dir.path().join("job");
    for r in 0..150 {
        copy_profile(&rank, &job.join(format!("rank={r}")), |meta| {
            for p in meta["processes"].as_array_mut().unwrap() {
                p["rank"] = r.into();
            }
        });
    }
    let svg = dir.path().join("map.svg");
    assert_ran(&plot("ranks", &job, &svg));
    let map = std::fs::read_to_string(&svg).unwrap();
    assert_eq!(map.matches("href=\"data:image/png;base64,").count(), 1);
    assert!(map.len() < 200_000, "{} bytes", map.len());
    assert!(map.matches("<rect").count() < 100);
    let page = html_report(&job, &dir.path().join("job.html"));
    assert!(page.len() < 1 << 20, "{} bytes", page.len());
    // A job's page has no interactive timeline (its ranks' map instead).
    assert!(page.contains("var MEMLENS_TIMELINE = null;"));
    assert_eq!(page.matches("href=\"data:image/png;base64,").count(), 1);
}

/// The cells of every HTML table row, unescaped.
fn html_rows(page: &str) -> Vec<Vec<String>> {
    let unescape = |s: &str| {
        s.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&#x27;", "'")
            .replace("&#x2f;", "/")
            .replace("&amp;", "&")
    };
    page.split("<tr")
        .skip(1)
        .map(|row| {
            row.split_once('>')
                .unwrap()
                .1
                .split_once("</tr>")
                .unwrap()
                .0
        })
        .filter(|row| row.contains("<td") && !row.contains("class=\"detail\""))
        .map(|row| {
            row.split("<td")
                .skip(1)
                .map(|cell| {
                    unescape(
                        cell.split_once('>')
                            .unwrap()
                            .1
                            .split_once("</td>")
                            .unwrap()
                            .0,
                    )
                })
                .filter(|cell| !cell.is_empty())
                .collect()
        })
        .collect()
}

#[test]
fn the_python_example_reads_the_same_numbers_as_the_report() {
    let (_dir, p) = recorded_stream(&["-DN=200000L", "-DCHASE=4096L"], &[]);
    let out = Command::new("python3")
        .arg(root().join("examples/load_profile.py"))
        .arg(&p)
        .output()
        .expect("python3 with pyarrow and pandas (.ci/run installs them)");
    assert_ran(&out);
    let py: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let report = report_json(&p);
    for r in report["access"]["regions"].as_array().unwrap() {
        let name = r["name"].as_str().unwrap();
        assert_eq!(py["regions"][name]["bytes_read"], r["bytes_read"], "{name}");
        assert_eq!(py["regions"][name]["instances"], r["instances"], "{name}");
    }
    let samples: u64 = py["samples_per_thread"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(samples, report["access"]["samples"].as_u64().unwrap());
    // The largest site is one of the three STREAM arrays, 200 000 doubles.
    assert_eq!(py["sites"][0]["bytes"], 1_600_000.0);
    assert!(py["sites"][0]["site"]
        .as_str()
        .unwrap()
        .contains("stream.c:3"));
}

#[test]
fn diff_shows_what_doubling_the_arrays_changes() {
    // The live heap peak is read at timeline ticks: enough repeats and ticks that
    // some land while the arrays live, also on a loaded machine. The chase's
    // cycle (4 KiB) lives briefly, whether a tick sees it moves the ratio < 0.1%.
    let flags = ["--interval", "2"];
    let (_a_dir, a) = recorded_stream(&["-DN=200000L", "-DCHASE=512L", "-DREPEAT=100"], &flags);
    let (_b_dir, b) = recorded_stream(&["-DN=400000L", "-DCHASE=512L", "-DREPEAT=100"], &flags);
    let out = Command::new(memlens())
        .args(["diff", "--format", "json"])
        .args([&a, &b])
        .output()
        .unwrap();
    assert_ran(&out);
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The three arrays are recorded exactly: each doubles.
    let doubled: Vec<&serde_json::Value> = d["objects"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["name"].as_str().unwrap().contains("stream.c:3"))
        .collect();
    assert_eq!(doubled.len(), 3, "{d:#}");
    for o in doubled {
        assert_eq!(o["peak_bytes"]["relative"], 1.0, "{o}");
    }
    // Exact bytes of every kernel double; the chase's stay.
    for r in d["regions"].as_array().unwrap() {
        let want = if r["name"] == "chase" { 0.0 } else { 1.0 };
        assert_eq!(r["bytes_read"]["relative"], want, "{r}");
    }
    let heap = &d["peaks"][1];
    assert_eq!(heap["name"], "live heap");
    assert!(
        (heap["relative"].as_f64().unwrap() - 1.0).abs() < 0.01,
        "{heap}"
    );
    // Text by default.
    let out = Command::new(memlens())
        .arg("diff")
        .args([&a, &b])
        .output()
        .unwrap();
    assert_ran(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("+100.0%  read"));
}

#[test]
fn diff_finds_the_padded_buffers_and_the_false_sharing_gone() {
    // Two threads write their own buffer of one block: 32 bytes each share a
    // cache line; padded to 96 they do not. Recorded with the buffers' block
    // above --min-size, so that it is an object of its own.
    let dir = tempdir();
    let profile = |buf: u32| {
        let exe = memlens_cc(
            dir.path(),
            "thread_buffers.c",
            &["-O1", "-g", &format!("-DBUF={buf}")],
        );
        let exe = std::fs::rename(&exe, dir.path().join(format!("buffers{buf}")))
            .map(|()| dir.path().join(format!("buffers{buf}")))
            .unwrap();
        let p = dir.path().join(format!("p{buf}"));
        assert_ran(&record(
            &p,
            &["--min-size", "64", "--period", "997"],
            &[exe.to_str().unwrap()],
        ));
        p
    };
    let (a, b) = (profile(32), profile(96));
    // As docs/report.md shows it.
    let text = Command::new(memlens()).arg("diff").args([&a, &b]).output();
    let text = String::from_utf8(text.unwrap().stdout).unwrap();
    assert_documented_excerpt("docs/report.md", "DATA OBJECTS THAT CHANGED", &text);
    let out = Command::new(memlens())
        .args(["diff", "--format", "json", "--top", "40"])
        .args([&a, &b])
        .output()
        .unwrap();
    assert_ran(&out);
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let buffers = format!(
        "main (thread_buffers.c:{})",
        source_line("thread_buffers.c", "/* BUFFERS */")
    );
    let objects = d["objects"].as_array().unwrap();
    let changed = named(&d["objects"], &buffers);
    assert_eq!(changed["peak_bytes"]["a"], 64.0);
    assert_eq!(changed["peak_bytes"]["b"], 192.0);
    // Nothing unchanged is listed (the programs' statics match, though the
    // two executables have different names), and only these buffers grew.
    for o in objects {
        let (pa, pb) = (&o["peak_bytes"]["a"], &o["peak_bytes"]["b"]);
        assert!(
            pa != pb
                || o["allocated_bytes"]["a"] != o["allocated_bytes"]["b"]
                || o["est_accesses"]["a"] != o["est_accesses"]["b"],
            "{o}"
        );
        if o["name"] != buffers.as_str() {
            assert_eq!(pa, pb, "only the buffers changed size: {o}");
        }
    }
    assert!(d["unchanged_objects"].as_u64().unwrap() >= 5, "{d:#}");
    // The line both threads wrote was falsely shared, and no longer is.
    let line = (d["sharing"].as_array().unwrap().iter())
        .find(|s| s["object"] == buffers.as_str())
        .unwrap_or_else(|| panic!("{:#}", d["sharing"]));
    assert_eq!(line["kind_a"], "false sharing");
    assert!(line["kind_b"].is_null(), "{line}");
}

/// The count inferno prints for a flame graph's root ("all (1,234 bytes, 100%)").
fn flame_total(svg: &str) -> u64 {
    let at = svg.find("<title>all (").expect("a root frame") + "<title>all (".len();
    let digits: String = svg[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(|c| *c != ',')
        .collect();
    digits.parse().unwrap()
}

#[test]
fn flame_graphs_weigh_allocated_bytes_and_sampled_accesses() {
    let (dir, p) = recorded_stream(&["-DN=200000L", "-DCHASE=4096L"], &[]);
    let allocs = dir.path().join("alloc.svg");
    assert_ran(&plot("flame", &p, &allocs));
    let svg = std::fs::read_to_string(&allocs).unwrap();
    let rows: Vec<memlens_profile::Allocation> = memlens_profile::read_table(&p).unwrap();
    let bytes: u64 = rows
        .iter()
        .filter(|a| a.kind != "stack")
        .map(|a| a.est_bytes.round() as u64)
        .sum();
    assert_eq!(flame_total(&svg), bytes);
    assert!(svg.contains("main (stream.c:35)"), "the arrays' site");

    let accesses = dir.path().join("access.svg");
    assert_ran(&plot_with("flame", &["--accesses"], &p, &accesses));
    let svg = std::fs::read_to_string(&accesses).unwrap();
    let report = report_json(&p);
    let samples = report["access"]["samples"].as_u64().unwrap();
    assert_eq!(
        flame_total(&svg),
        samples * report["access"]["period"].as_u64().unwrap()
    );
    assert!(svg.contains("[main (stream.c:35)]") && svg.contains("load at main (stream.c:"));
}

/// Stacks for other tools, weighed by heap measures with known values: the
/// three callers of the leaking wrapper with 300, 500 and 700 bytes.
#[test]
fn stacks_export_as_collapsed_and_speedscope_with_known_weights() {
    let dir = tempdir();
    let p = dir.path().join("p");
    assert_ran(&record(&p, &["--leaks"], &[&program("heap_measures")]));
    let export_of = |profile: &Path, format: &str, weight: &str, more: &[&str]| {
        output_within(
            Command::new(memlens())
                .args(["export", "--format", format, "--weight", weight])
                .args(more)
                .arg(profile),
        )
    };
    let export = |format: &str, weight: &str| {
        let out = export_of(&p, format, weight, &[]);
        assert_ran(&out);
        String::from_utf8(out.stdout).unwrap()
    };
    let leaked = export("collapsed", "leaked-space");
    // `-o -` is standard output.
    let dash = export_of(&p, "collapsed", "leaked-space", &["-o", "-"]);
    assert_eq!(String::from_utf8_lossy(&dash.stdout), leaked);
    let leaf = |caller: &str| {
        let line = (leaked.lines())
            .find(|l| l.contains(&format!(";{caller} (heap_measures.c:")))
            .unwrap_or_else(|| panic!("no stack through {caller}: {leaked}"));
        let (stack, weight) = line.rsplit_once(' ').unwrap();
        assert!(stack.ends_with(";xmalloc (heap_measures.c:22)"), "{line}");
        assert!(
            stack.starts_with("main (heap_measures.c:")
                || stack.contains(";main (heap_measures.c:"),
            "{line}"
        );
        weight.parse::<u64>().unwrap()
    };
    assert_eq!(
        [leaf("leak_a"), leaf("leak_b"), leaf("leak_c")],
        [300, 500, 700]
    );
    // inferno reads them: its flame graph's root is their sum.
    let mut svg = Vec::new();
    inferno::flamegraph::from_lines(
        &mut inferno::flamegraph::Options::default(),
        leaked.lines(),
        &mut svg,
    )
    .unwrap();
    let total: u64 = (leaked.lines())
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(flame_total(&String::from_utf8(svg).unwrap()), total);

    // speedscope: every sample a list of frames, root first, its weight the
    // site's; allocated bytes add up to the sites' table.
    let file: serde_json::Value =
        serde_json::from_str(&export("speedscope", "alloc-space")).unwrap();
    let frames = file["shared"]["frames"].as_array().unwrap();
    let profile = &file["profiles"][0];
    assert_eq!(
        (profile["type"].as_str(), profile["unit"].as_str()),
        (Some("sampled"), Some("bytes"))
    );
    let (samples, weights) = (
        profile["samples"].as_array().unwrap(),
        profile["weights"].as_array().unwrap(),
    );
    assert_eq!(samples.len(), weights.len());
    let sites: Vec<memlens_profile::HeapSite> = memlens_profile::read_table(&p).unwrap();
    let bytes: u64 = sites.iter().map(|s| s.bytes.round() as u64).sum();
    let weighed: u64 = weights.iter().map(|w| w.as_u64().unwrap()).sum();
    assert_eq!(weighed, bytes + mapped_bytes(&p));
    assert_eq!(profile["endValue"].as_u64(), Some(weighed));
    let temporaries = samples
        .iter()
        .zip(weights)
        .find(|(s, _)| {
            let names: Vec<&str> = (s.as_array().unwrap().iter())
                .map(|i| {
                    frames[i.as_u64().unwrap() as usize]["name"]
                        .as_str()
                        .unwrap()
                })
                .collect();
            let main = names.iter().position(|n| *n == "main");
            main.is_some() && names.last() == Some(&"temporaries")
        })
        .expect("the temporaries' stack, main before it");
    assert_eq!(temporaries.1.as_u64(), Some(400_000));

    // heaptrack's temporary allocations, counted when every block is
    // recorded: `temporaries` frees each of its 10,000 blocks before the
    // next allocation; the flame graph by them has the sites' sum at its root.
    let temporary = export("collapsed", "temporary-objects");
    assert!(
        (temporary.lines())
            .any(|l| l.contains(";temporaries (heap_measures.c:") && l.ends_with(" 10000")),
        "{temporary}"
    );
    let flame = dir.path().join("temporary.svg");
    assert_ran(&plot_with(
        "flame",
        &["--weight", "temporary-objects"],
        &p,
        &flame,
    ));
    let svg = std::fs::read_to_string(&flame).unwrap();
    let counted: u64 = sites.iter().filter_map(|s| s.temporary).sum();
    assert!(counted >= 10_000);
    assert_eq!(flame_total(&svg), counted);
    assert!(svg.contains("temporary allocations by call stack"));
    // Blocks sampled by bytes (the default): no count, and memlens says how
    // to get one.
    let sampled = dir.path().join("sampled");
    assert_ran(&record(&sampled, &[], &[&program("heap_measures")]));
    let out = export_of(&sampled, "collapsed", "temporary-objects", &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("record again with `--leaks`"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");

    // The report's ids are strings: 64-bit hashes lose digits as doubles.
    let report = report_json(&p);
    let ids: Vec<&serde_json::Value> = (report["objects_by_peak"].as_array().unwrap().iter())
        .map(|o| &o["stack_id"])
        .collect();
    assert!(
        ids.iter()
            .all(|id| id.as_str().is_some_and(|s| s.parse::<u64>().is_ok())),
        "{ids:?}"
    );
    assert!(ids
        .iter()
        .any(|id| id.as_str().unwrap().parse::<u64>().unwrap() > 1 << 53));
}

/// pprof's own reader, `go tool pprof`, reads the export: each leaking
/// caller's trace under the wrapper with its exact leaked bytes, and every
/// heap measure a sample type.
#[test]
fn stacks_export_as_pprof_read_by_go_tool_pprof() {
    let dir = tempdir();
    let p = dir.path().join("p");
    assert_ran(&record(&p, &["--leaks"], &[&program("heap_measures")]));
    let file = dir.path().join("heap.pb.gz");
    assert_ran(&output_within(
        Command::new(memlens())
            .args([
                "export",
                "--format",
                "pprof",
                "--weight",
                "leaked-space",
                "-o",
            ])
            .arg(&file)
            .arg(&p),
    ));
    let pprof = |args: &[&str]| {
        let out = output_within(
            Command::new("go")
                .args(["tool", "pprof"])
                .args(args)
                .arg(&file),
        );
        assert_ran(&out);
        // Nothing to complain of: the main binary is named (its mapping).
        assert!(
            out.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let traces = pprof(&["-traces"]);
    assert!(traces.starts_with("File: heap_measures\n"), "{traces}");
    assert!(traces.contains("Type: leaked_space"), "{traces}");
    // Each trace: its value and leaf on the first line, callers below; the
    // bytes of every trace through `caller` summed (Go 1.19's pprof prints
    // one trace of 300B for leak_a's three blocks, Go 1.22's three of 100B).
    let leak = |caller: &str| -> u64 {
        (traces.split("-----------+"))
            .filter_map(|block| {
                let lines: Vec<&str> = block.lines().skip(1).map(str::trim).collect();
                let (value, leaf) = lines.first()?.split_once(char::is_whitespace)?;
                (leaf.trim() == "xmalloc" && lines.get(1) == Some(&caller))
                    .then(|| value.strip_suffix('B')?.parse::<u64>().ok())?
            })
            .sum()
    };
    assert_eq!(leak("leak_a"), 300, "{traces}");
    assert_eq!(leak("leak_b"), 500, "{traces}");
    assert_eq!(leak("leak_c"), 700, "{traces}");
    let types = pprof(&["-sample_index=alloc_objects", "-top", "-nodecount=3"]);
    assert!(types.contains("Type: alloc_objects"), "{types}");
    // Its blocks are dhat's, every one.
    let total = (types.split_once("Total samples = "))
        .and_then(|(_, rest)| rest.split_whitespace().next()?.parse::<u64>().ok());
    assert_eq!(
        total,
        Some(dhat_figures(&program("heap_measures"))("Total:").1),
        "{types}"
    );
    assert!(
        types
            .lines()
            .any(|l| l.contains("temporaries") && l.trim_start().starts_with("10000 ")),
        "10000 temporaries allocated: {types}"
    );
    // With every block recorded, heaptrack's temporaries are a sample type.
    let temporary = pprof(&["-sample_index=temporary_objects", "-top", "-nodecount=3"]);
    assert!(
        (temporary.lines())
            .any(|l| l.contains("temporaries") && l.trim_start().starts_with("10000 ")),
        "{temporary}"
    );
}

/// The Firefox Profiler's processed format: every recorded block an
/// allocation sample and its free a negative one, so what stays (the
/// profiler's "retained memory") is each leaking caller's exact bytes;
/// access samples on their threads under their object; regions as markers
/// with their exact bytes.
#[test]
fn firefox_profile_with_allocations_samples_and_region_markers() {
    let dir = tempdir();
    let p = dir.path().join("p");
    assert_ran(&record(
        &p,
        &["--leaks", "--keep-blocks"],
        &[&program("heap_measures")],
    ));
    let (fx, stderr) = firefox_export(&p);
    assert!(!stderr.contains("--keep-blocks"), "{stderr}");
    let threads = fx["threads"].as_array().unwrap();
    assert_eq!(threads[0]["isMainThread"], true);
    let allocations = &threads[0]["nativeAllocations"];
    let weights: Vec<i64> = json_column(allocations, "weight");
    let addresses: Vec<i64> = json_column(allocations, "memoryAddress");
    let stacks = allocations["stack"].as_array().unwrap();
    let rows: Vec<memlens_profile::Allocation> = memlens_profile::read_table(&p).unwrap();
    let blocks: Vec<&memlens_profile::Allocation> =
        rows.iter().filter(|a| a.kind != "stack").collect();
    let freed = blocks.iter().filter(|a| a.free_ns.is_some()).count();
    assert_eq!(weights.len(), blocks.len() + freed);
    let allocated: i64 = weights.iter().filter(|&&w| w > 0).sum();
    let row_bytes: f64 = blocks.iter().map(|a| a.est_bytes).sum();
    assert_eq!(allocated, row_bytes.round() as i64);
    // Retained: allocations whose address was not freed after them.
    let mut live: std::collections::HashMap<i64, usize> = Default::default();
    for (i, (&w, &address)) in weights.iter().zip(&addresses).enumerate() {
        if w > 0 {
            live.insert(address, i);
        } else {
            live.remove(&address);
        }
    }
    let retained_through = |caller: &str| -> i64 {
        (live.values())
            .filter(|&&i| {
                let stack = stacks[i].as_u64().map(|s| fx_stack(&threads[0], s));
                stack.is_some_and(|names| {
                    names.iter().any(|n| n.starts_with(&format!("{caller} (")))
                        && names.last().is_some_and(|n| n.starts_with("xmalloc ("))
                })
            })
            .map(|&i| weights[i])
            .sum()
    };
    assert_eq!(
        ["leak_a", "leak_b", "leak_c"].map(retained_through),
        [300, 500, 700]
    );
    // All that is retained is what the program allocated and never freed:
    // not the main thread's stack, which the profile has as an object.
    assert!(rows.iter().any(|a| a.kind == "stack"));
    let never_freed: f64 = (blocks.iter())
        .filter(|a| a.free_ns.is_none())
        .map(|a| a.est_bytes.round())
        .sum();
    let retained: i64 = live.values().map(|&i| weights[i]).sum();
    assert_eq!(retained, never_freed as i64);
    // Without --keep-blocks, freed small blocks have no row: said.
    let q = dir.path().join("q");
    assert_ran(&record(&q, &["--leaks"], &[&program("heap_measures")]));
    let (_, stderr) = firefox_export(&q);
    assert!(stderr.contains("record with --keep-blocks"), "{stderr}");

    // Access samples and region markers of an instrumented run.
    let (_dir, s) = recorded_stream(&["-DN=200000L", "-DREPEAT=2"], &[]);
    let (fx, _) = firefox_export(&s);
    let threads = fx["threads"].as_array().unwrap();
    let samples: Vec<memlens_profile::SampleCore> = memlens_profile::read_table(&s).unwrap();
    let exported: u64 = (threads.iter())
        .map(|t| t["samples"]["length"].as_u64().unwrap())
        .sum();
    assert_eq!(exported, samples.len() as u64);
    assert!(exported > 0);
    // Each sample's leaf is the access, under the object it hit.
    let main = &threads[0];
    let first = fx_stack(main, main["samples"]["stack"][0].as_u64().unwrap());
    let leaf = first.last().unwrap();
    assert!(
        leaf.starts_with("load at ") || leaf.starts_with("store at "),
        "{first:?}"
    );
    assert!(
        first.iter().any(|n| n.starts_with('[')),
        "no object in {first:?}"
    );
    let regions: Vec<memlens_profile::Region> = memlens_profile::read_table(&s).unwrap();
    let markers = &main["markers"];
    assert_eq!(markers["length"].as_u64(), Some(regions.len() as u64));
    let strings = main["stringArray"].as_array().unwrap();
    for (k, data) in markers["data"].as_array().unwrap().iter().enumerate() {
        let name = strings[markers["name"][k].as_u64().unwrap() as usize]
            .as_str()
            .unwrap();
        let bytes_read = data["bytesRead"].as_f64().unwrap();
        assert!(bytes_read > 0.0, "{name}: no bytes");
        assert!(
            (regions.iter())
                .any(|r| r.name == name && r.bytes_read.map(|b| b as f64) == Some(bytes_read)),
            "marker {name} with {bytes_read} bytes read is no region"
        );
    }
    assert!(fx["counters"].as_array().unwrap().len() >= 2);

    // A program not built with memlens: its regions' traffic was not
    // measured, and no marker field says it was 0.
    let phases = dir.path().join("phases");
    assert_ran(&record(&phases, &[], &[&program("phases")]));
    let (fx, _) = firefox_export(&phases);
    let markers = &fx["threads"][0]["markers"];
    let data = markers["data"].as_array().unwrap();
    assert!(!data.is_empty(), "{markers}");
    for d in data {
        assert_eq!(d["type"], "MemlensRegion", "{d}");
        assert!(d.get("bytesRead").is_none(), "{d}");
    }
}

/// `memlens export --format firefox` of a profile: the file and the messages.
fn firefox_export(p: &Path) -> (serde_json::Value, String) {
    let out = output_within(
        Command::new(memlens())
            .args(["export", "--format", "firefox"])
            .arg(p),
    );
    assert_ran(&out);
    (
        serde_json::from_slice(&out.stdout).unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json_column(table: &serde_json::Value, column: &str) -> Vec<i64> {
    (table[column].as_array().unwrap().iter())
        .map(|v| v.as_i64().unwrap())
        .collect()
}

/// A Firefox thread's stack `index` as its functions' names, root first.
fn fx_stack(thread: &serde_json::Value, index: u64) -> Vec<String> {
    let table = |t: &str, c: &str, i: u64| thread[t][c][i as usize].as_u64();
    let mut names = Vec::new();
    let mut at = Some(index);
    while let Some(s) = at {
        let frame = table("stackTable", "frame", s).unwrap();
        let func = table("frameTable", "func", frame).unwrap();
        let name = table("funcTable", "name", func).unwrap();
        names.push(
            thread["stringArray"][name as usize]
                .as_str()
                .unwrap()
                .to_string(),
        );
        at = table("stackTable", "prefix", s);
    }
    names.reverse();
    names
}

/// Bytes of the profile's mappings (their rows).
fn mapped_bytes(p: &Path) -> u64 {
    let rows: Vec<memlens_profile::Allocation> = memlens_profile::read_table(p).unwrap();
    (rows.iter())
        .filter(|a| a.kind == "mmap")
        .map(|a| a.est_bytes.round() as u64)
        .sum()
}

#[test]
fn live_view_prints_capacity_and_exact_bandwidth_while_the_program_runs() {
    let dir = tempdir();
    let app = memlens_cc(dir.path(), "fold_phases.c", &["-O2", "-DN=65536"]);
    let p = dir.path().join("p");
    let stop = dir.path().join("stop");
    // The program copies until the test has seen three updates and tells it to
    // stop: as many updates on a fast machine as on a slow one.
    let mut lines = Vec::new();
    let args = [&*app.to_string_lossy(), "until", &*stop.to_string_lossy()];
    let (status, err) = record_streaming(&p, &["--live"], &args, |line| {
        if line.contains(" s  resident ") {
            lines.push(line.to_owned());
            if lines.len() == 3 {
                std::fs::write(&stop, "").unwrap();
            }
        }
    });
    assert!(status.success(), "{err}");
    assert!(lines.len() >= 3, "{err}");
    let times: Vec<f64> = lines
        .iter()
        .map(|l| {
            l["memlens:".len()..]
                .trim_start()
                .split(' ')
                .next()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    // Updates at most every 0.5 s (times are printed to 0.1 s); later ones
    // depend on the machine's load, not on memlens.
    assert!(times.windows(2).all(|w| w[1] - w[0] >= 0.4), "{times:?}");
    // Three 1.5 MiB arrays are resident and copied between them all along.
    for l in &lines {
        assert!(l.contains("(exact)") && l.contains("1 process"), "{l}");
        assert!(!l.contains("read         0 B/s"), "{l}");
    }
}

/// `memlens sql DIR QUERY` that must fail: its one-line error (exit status 2).
fn sql_error(p: &std::path::Path, query: &str) -> String {
    let out = Command::new(memlens())
        .arg("sql")
        .arg(p)
        .arg(query)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    err
}

#[test]
fn sql_over_the_profile_gives_the_reports_numbers() {
    let (_dir, p) = recorded_stream(&["-DN=200000L", "-DCHASE=4096L"], &[]);
    let report = report_json(&p);

    let regions = sql_json(
        &p,
        "SELECT name, count(*) AS instances, sum(bytes_read) AS bytes_read \
         FROM regions GROUP BY name ORDER BY name",
    );
    let reported = report["access"]["regions"].as_array().unwrap();
    assert_eq!(regions.len(), reported.len());
    for r in reported {
        let row = regions.iter().find(|row| row["name"] == r["name"]).unwrap();
        assert_eq!(row["bytes_read"], r["bytes_read"], "{row}");
        assert_eq!(row["instances"], r["instances"], "{row}");
    }
    // docs/profile.md's session, run on this profile.
    let session = documented_block("docs/profile.md", "$ memlens sql p ");
    let dir = tempdir();
    std::os::unix::fs::symlink(&p, dir.path().join("p")).unwrap();
    assert_documented_session(&session, dir.path());

    let counted = sql_json(&p, "SELECT count(*) AS n FROM samples");
    assert_eq!(counted[0]["n"], report["access"]["samples"]);

    // A join: the largest allocation site is one of the three STREAM arrays.
    let sites = sql_json(
        &p,
        "SELECT s.function, s.file, s.line, sum(a.est_bytes) AS bytes \
         FROM allocations a JOIN stacks s ON a.pid = s.pid AND a.stack_id = s.stack_id \
         WHERE s.depth = 0 GROUP BY s.function, s.file, s.line ORDER BY bytes DESC LIMIT 1",
    );
    assert_eq!(sites[0]["bytes"], 1_600_000.0, "{sites:?}");
    assert!(sites[0]["file"].as_str().unwrap().ends_with("stream.c"));

    // The text table: a header, rows up to --max-rows, and what was left out.
    let out = Command::new(memlens())
        .args(["sql", "--max-rows", "2"])
        .arg(&p)
        .arg("SELECT name, begin_ns FROM regions ORDER BY begin_ns")
        .output()
        .unwrap();
    assert_ran(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    let rows = sql_json(&p, "SELECT count(*) AS n FROM regions")[0]["n"].clone();
    assert!(text.contains("| name"), "{text}");
    assert!(
        text.contains(&format!("({rows} rows, the first 2 shown")),
        "{text}"
    );

    // A mistake gets one line that says how to see the tables.
    let err = sql_error(&p, "SELECT * FROM no_such_table");
    assert!(
        err.contains("no_such_table") && err.contains("SHOW TABLES"),
        "{err}"
    );

    // Read-only: nothing is created, changed or written.
    let written = p.join("written.csv");
    for (query, kind) in [
        (format!("COPY (SELECT 1) TO '{}'", written.display()), "DML"),
        ("INSERT INTO regions SELECT * FROM regions".into(), "DML"),
        ("CREATE TABLE t AS SELECT 1".into(), "DDL"),
        (
            "CREATE EXTERNAL TABLE e STORED AS CSV LOCATION '/etc/passwd'".into(),
            "DDL",
        ),
        (
            "SET datafusion.execution.batch_size = 1".into(),
            "Statement",
        ),
    ] {
        let err = sql_error(&p, &query);
        assert!(
            err.contains("only reads a profile") && err.contains(kind),
            "{query}: {err}"
        );
    }
    assert!(!written.exists());

    // A table file deleted from the profile is named, never read as empty.
    std::fs::remove_file(p.join("tags.parquet")).unwrap();
    let err = sql_error(&p, "SELECT count(*) FROM regions");
    assert!(err.contains("tags.parquet: missing"), "{err}");
}

#[test]
fn export_writes_tables_and_query_results_readable_back() {
    // Ticks every millisecond: the per-thread timeline has points.
    let (dir, p) = recorded_stream(&["-DN=100000L", "-DCHASE=4096L"], &["--interval", "1"]);
    let regions: Vec<Region> = memlens_profile::read_table(&p).unwrap();
    let samples: Vec<AccessSample> = memlens_profile::read_table(&p).unwrap();

    // Every table as Parquet: memlens' own reader reads them back whole.
    let parquet = dir.path().join("parquet");
    let out = Command::new(memlens())
        .args(["export", "--format", "parquet", "-o"])
        .arg(&parquet)
        .arg(&p)
        .output()
        .unwrap();
    assert_ran(&out);
    fn same<T: memlens_profile::Table + PartialEq + std::fmt::Debug>(a: &Path, b: &Path) -> usize {
        let (ours, exported) = (
            memlens_profile::read_table::<T>(a).unwrap(),
            memlens_profile::read_table::<T>(b).unwrap(),
        );
        assert!(ours == exported, "{} differs", T::NAME);
        ours.len()
    }
    use memlens_profile::*;
    let rows = [
        same::<Allocation>(&p, &parquet),
        same::<HeapSite>(&p, &parquet),
        same::<SiteLivePoint>(&p, &parquet),
        same::<Frame>(&p, &parquet),
        same::<Region>(&p, &parquet),
        same::<AccessSample>(&p, &parquet),
        same::<CodeLocation>(&p, &parquet),
        same::<TagRange>(&p, &parquet),
        same::<ThreadRow>(&p, &parquet),
        same::<TimelinePoint>(&p, &parquet),
        same::<ThreadTrafficPoint>(&p, &parquet),
        same::<CounterReading>(&p, &parquet),
        same::<Module>(&p, &parquet),
        same::<StaticObject>(&p, &parquet),
    ];
    // Every table but tags (the example tags nothing) has rows; beside them
    // the processes of meta.json as a table, and nothing else.
    assert_eq!(rows.iter().filter(|&&n| n > 0).count(), 13, "{rows:?}");
    let processes: Vec<ProcessRow> = read_table(&parquet).unwrap();
    let meta = Meta::read(&p).unwrap();
    assert_eq!(
        processes.iter().map(|r| r.pid).collect::<Vec<_>>(),
        meta.processes.iter().map(|r| r.pid).collect::<Vec<_>>()
    );
    let files = std::fs::read_dir(&parquet).unwrap().count();
    assert_eq!(files, rows.len() + 1, "one file per table");

    // One table as CSV on standard output.
    let out = Command::new(memlens())
        .args(["export", "--table", "regions"])
        .arg(&p)
        .output()
        .unwrap();
    assert_ran(&out);
    let csv = String::from_utf8(out.stdout).unwrap();
    let mut lines = csv.lines();
    assert!(lines
        .next()
        .unwrap()
        .starts_with("pid,tid,name,begin_ns,end_ns"));
    assert_eq!(lines.count(), regions.len());

    // A query's result as JSON in a file.
    let json = dir.path().join("stores.json");
    let out = Command::new(memlens())
        .args(["export", "--format", "json", "-o"])
        .arg(&json)
        .arg("--sql")
        .arg("SELECT tid, count(*) AS stores FROM samples WHERE is_store GROUP BY tid")
        .arg(&p)
        .output()
        .unwrap();
    assert_ran(&out);
    let rows: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let stores: u64 = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["stores"].as_u64().unwrap())
        .sum();
    assert_eq!(stores, samples.iter().filter(|s| s.is_store).count() as u64);
    assert!(stores > 0);

    // A damaged table file is named, with its fix.
    std::fs::write(p.join("regions.parquet"), b"not parquet at all").unwrap();
    let err = sql_error(&p, "SELECT count(*) FROM samples");
    assert!(
        err.contains("regions.parquet: not a readable Parquet table"),
        "{err}"
    );
}

/// Characters that must never reach a terminal or an XML file raw.
fn raw_controls(text: &str) -> Vec<char> {
    (text.chars())
        .filter(|&c| {
            (c.is_control() && c != '\n')
                || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
        .collect()
}

#[test]
fn names_from_the_program_are_escaped_in_every_text_and_image() {
    let dir = tempdir();
    let p = dir.path().join("p");
    let out = record(&p, &["--leaks"], &[&program("hostile_names")]);
    assert_ran(&out);
    let summary = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(raw_controls(&summary), Vec::<char>::new(), "{summary}");
    assert!(
        summary.contains(r"top object  group\e[2J\r\n\x7f"),
        "{summary}"
    );

    let report = report_text(&p);
    assert_eq!(raw_controls(&report), Vec::<char>::new());
    for shown in [
        r"region\e]0;retitled\a\e[31m",
        r"group\e[2J\r\n\x7f",
        // C1 CSI, and an invalid byte read as U+FFFD.
        "tag\\e]0;retitled\\a\\u{9b}1m\u{fffd}",
        // The leaked block's site: a symbol with ESC and a right-to-left override.
        r"alloc\e[2J\u{202e}evil",
    ] {
        assert!(report.contains(shown), "{shown} not in {report}");
    }

    let sql = Command::new(memlens())
        .args(["sql", p.to_str().unwrap(), "select name from tags"])
        .output()
        .unwrap();
    let sql = String::from_utf8(sql.stdout).unwrap();
    assert_eq!(raw_controls(&sql), Vec::<char>::new(), "{sql}");
    assert!(sql.contains(r"tag\e]0;retitled"), "{sql}");

    // An error naming a program given with ESC in its path.
    let missing = record(&dir.path().join("q"), &[], &["/no\x1b[31mwhere"]);
    let error = String::from_utf8_lossy(&missing.stderr).into_owned();
    assert!(!missing.status.success());
    assert_eq!(raw_controls(&error), Vec::<char>::new(), "{error}");
    assert!(error.contains(r"/no\e[31mwhere"), "{error}");

    for kind in ["capacity", "counters", "flame"] {
        let svg = dir.path().join(format!("{kind}.svg"));
        assert_ran(&plot(kind, &p, &svg));
        let text = std::fs::read_to_string(&svg).unwrap();
        assert_eq!(raw_controls(&text), Vec::<char>::new(), "{kind}");
        // inferno's flame graph declares the SVG DTD.
        let options = roxmltree::ParsingOptions {
            allow_dtd: true,
            ..Default::default()
        };
        if let Err(e) = roxmltree::Document::parse_with_options(&text, options) {
            panic!("{kind}: not well-formed XML: {e}");
        }
    }
}

/// The lines of each live update (the status line and the sites under it)
/// drawn after `marker` and before `until`, but the first.
fn live_updates<'a>(err: &'a str, marker: &str, until: &str) -> Vec<Vec<&'a str>> {
    let from = err
        .find(marker)
        .unwrap_or_else(|| panic!("{marker}: {err}"));
    let to = err[from..].find(until).map_or(err.len(), |i| from + i);
    let mut updates: Vec<Vec<&str>> = Vec::new();
    for line in err[from..to].lines() {
        if line.starts_with("memlens: ") && line.contains(" s  resident ") {
            updates.push(vec![line]);
        } else if let Some(update) = updates.last_mut() {
            update.push(line);
        }
    }
    // The first update may have read the logs just before the phase's memory
    // was in place and printed after its marker: it is left out.
    assert!(
        updates.len() >= 2,
        "fewer than two updates after {marker}: {err}"
    );
    updates.remove(0);
    updates
}

/// The live bytes an update shows for a site, in MiB, and whether estimated.
fn site_mib(update: &[&str], site: &str) -> Option<(f64, bool)> {
    let line = update
        .iter()
        .find(|l| l.contains(&format!("{site} (live_sites.c:")))?;
    let estimated = line.trim_start().starts_with('~');
    let mut words = line.split_whitespace().map(|w| w.trim_start_matches('~'));
    let value: f64 = words.find(|w| !w.is_empty())?.parse().ok()?;
    let unit = words.next()?;
    Some((
        if unit == "MiB" { value } else { value / 1024.0 },
        estimated,
    ))
}

#[test]
fn live_view_follows_the_top_allocation_sites_as_they_change() {
    let dir = tempdir();
    let app = dir.path().join("live_sites");
    let source = root().join("tests/programs/live_sites.c");
    let built = Command::new("gcc")
        .args(["-O1", "-g"])
        .arg(&source)
        .arg("-o")
        .arg(&app)
        .status()
        .unwrap();
    assert!(built.success());
    let app = app.to_string_lossy();
    // Each phase is held until three updates were drawn after its marker
    // (the first may predate its memory: `live_updates` leaves it out).
    let go = dir.path().join("go");
    std::fs::create_dir(&go).unwrap();
    let mut phase: Option<(String, usize)> = None;
    let (status, err) = record_streaming(
        &dir.path().join("p"),
        &["--live", "--sample-rate", "16384"],
        &[&app, &go.to_string_lossy()],
        |line| {
            if let Some(name) = line.strip_prefix("PHASE ") {
                phase = Some((name.to_owned(), 0));
            } else if line.contains(" s  resident ") {
                if let Some((name, updates)) = &mut phase {
                    *updates += 1;
                    if *updates == 3 {
                        std::fs::write(go.join(&*name), "").unwrap();
                    }
                }
            }
        },
    );
    assert!(status.success(), "{err}");
    // Phase one: its six exact 4 MiB blocks, nothing of what comes later.
    let one = live_updates(&err, "PHASE one", "END one");
    assert!(
        one.iter()
            .all(|u| site_mib(u, "site_one") == Some((24.0, false))),
        "{one:?}"
    );
    assert!(
        one.iter().all(|u| site_mib(u, "site_two").is_none()),
        "{one:?}"
    );
    // Phase two: site one is gone; the forked child's site is listed with it.
    let two = live_updates(&err, "PHASE two", "END two");
    assert!(
        two.iter()
            .all(|u| site_mib(u, "site_two") == Some((40.0, false))),
        "{two:?}"
    );
    assert!(
        two.iter().all(|u| site_mib(u, "site_one").is_none()),
        "{two:?}"
    );
    assert!(
        two.iter()
            .any(|u| u[0].contains("2 processes")
                && site_mib(u, "child_site") == Some((16.0, false))),
        "{two:?}"
    );
    // Phase three: 10 MiB of 256-byte blocks, seen only through byte sampling
    // (about 640 sampled blocks: the estimate is within 25% far beyond 3 sigma).
    let three = live_updates(&err, "PHASE three", "END three");
    for update in &three {
        let (mib, estimated) = site_mib(update, "small_blocks").expect("listed");
        assert!(estimated && (7.5..12.5).contains(&mib), "{update:?}");
        assert!(site_mib(update, "site_two").is_none(), "{update:?}");
    }
    // On a terminal the block is redrawn in place: back up over the last one.
    let command = format!(
        "MEMLENS_RUNTIME={} {} record --live -o {} -- {app}",
        runtime().display(),
        memlens().display(),
        dir.path().join("q").display(),
    );
    let out = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .output()
        .unwrap();
    assert_ran(&out);
    let terminal = String::from_utf8_lossy(&out.stdout);
    assert!(terminal.contains("\u{1b}[2F\r\u{1b}[J"), "{terminal:?}");
}

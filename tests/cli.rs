//! The CLI end to end: the bundled example, bad input and mistakes in one line, the manual pages and completions, the wrappers' help, spinners, the doctor.

mod common;
use common::*;
use std::process::Command;

/// The README's main job, `examples/run.sh`, with this build: its two reports
/// show the figures the README describes, and its plots are drawn.
#[test]
fn the_main_job_runs_and_shows_what_the_readme_says() {
    let dir = tempdir();
    let out = output_within(
        Command::new("bash")
            .arg(root().join("examples/run.sh"))
            .env("MEMLENS", memlens())
            .env("MEMLENS_RUNTIME", runtime())
            .env("OUT", dir.path()),
    );
    assert_ran(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let (phases, stream) = stdout
        .split_once("memlens report: ")
        .unwrap()
        .1
        .split_once("memlens report: ")
        .unwrap();
    let row = |report: &str, needle: &str| -> String {
        report
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle}: {report}"))
            .to_owned()
    };
    // phases.c: an 8 MiB static table, two matrices, a 400 000-node list
    // grouped into one object, a tagged 64 MiB mapping and a leak.
    for (needle, words) in [
        ("lookup_table [phases]", ["8.0 MiB", "static"]),
        ("staging buffer", ["64.0 MiB", "tag"]),
        ("main (phases.c:52)", ["64.0 MiB", "mmap"]),
        ("list nodes", ["400000", "group"]),
    ] {
        let line = row(phases, needle);
        assert!(words.iter().all(|w| line.contains(w)), "{line}");
    }
    let matrices: Vec<&str> = phases
        .lines()
        .filter(|l| l.contains("make_matrix (phases.c:19)"))
        .collect();
    assert!(
        matrices.iter().any(|l| l.contains("32.0 MiB"))
            && matrices.iter().any(|l| l.contains("8.0 MiB"))
    );
    assert!(row(phases, "process ").ends_with(", exit 0"));
    assert!(
        phases.contains("1.0 MiB of heap still live (exact, usable bytes)"),
        "{phases}"
    );
    // stream.c: exact bytes per region (N = 4 M doubles, 10 runs of each
    // kernel: 16 B per element for copy and scale, 24 B for add and triad),
    // the arrays each kernel touches, and the sampling accuracy.
    let access_regions = stream.split_once("REGIONS (bytes exact").unwrap().1;
    for (region, read, written) in [
        ("copy", "305.2 MiB", "305.2 MiB"),
        ("scale", "305.2 MiB", "305.2 MiB"),
        ("add", "610.4 MiB", "305.2 MiB"),
        ("triad", "610.4 MiB", "305.2 MiB"),
        ("chase", "32.0 MiB", "0 B"),
    ] {
        let line = row(access_regions, &format!("  {region} "));
        // Columns are two or more spaces apart: region, runs, time, read, written.
        let cells: Vec<&str> = line
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        let runs = if region == "chase" { "1" } else { "10" };
        assert_eq!(
            (cells[0], cells[1], cells[3], cells[4]),
            (region, runs, read, written),
            "{line}"
        );
    }
    assert!(row(access_regions, "  triad  ").contains("main (stream.c:37)"));
    // NMO's accuracy within what the jittered sampler allows for this many
    // samples: the numbers the report states, as the tests of the access
    // profile check them.
    let number_after = |needle: &str, after: &str| -> u64 {
        let line = row(stream, needle);
        let rest = line.split_once(after).unwrap().1;
        rest.split_whitespace().next().unwrap().parse().unwrap()
    };
    let samples = number_after(" samples, 1 per ", "") - number_after("samples of memcpy", "; ");
    let period = number_after(" samples, 1 per ", " samples, 1 per ");
    let counted = number_after("sampling accuracy", " against ");
    let accuracy = assert_accuracy(counted, samples, period, 1);
    assert!(
        row(stream, "sampling accuracy").contains(&format!("{:.3}%", 100.0 * accuracy)),
        "{stream}"
    );
    assert!(row(stream, "process ").ends_with(", exit 0"));
    // The raw logs are gone once each profile is written (removed beside the
    // summary, joined before record exits).
    for name in ["profile", "stream-profile"] {
        assert!(
            !dir.path().join(name).join("raw").exists(),
            "{name}/raw left"
        );
    }
    // The plots the script draws.
    let profile = dir.path().join("profile");
    let svg = dir.path().join("capacity.svg");
    assert_ran(&plot("capacity", &profile, &svg));
    image::assert_capacity_plot(
        &report_json(&profile),
        &svg,
        &dir.path().join("capacity.png"),
    );
    for plot in ["scatter", "bandwidth", "counters"] {
        let png = image::Png::read(&dir.path().join(format!("{plot}.png")));
        assert_eq!((png.width, png.height), (1200, 700), "{plot}");
    }
}

/// The README's quick start, run as written in a directory holding the
/// checkout's `examples/` and `include/`: every command prints what the
/// README shows (any figures; `...` for what it leaves out).
#[test]
fn the_readme_quick_start_prints_what_it_shows() {
    let block = documented_block("README.md", "$ gcc");
    let dir = tempdir();
    for part in ["examples", "include"] {
        std::os::unix::fs::symlink(root().join(part), dir.path().join(part)).unwrap();
    }
    assert_documented_session(&block, dir.path());
}

#[test]
fn example_report_has_objects_regions_and_leak() {
    let dir = tempdir();
    let p = dir.path().join("p");
    let out = record(&p, &["--interval", "5"], &[&program("phases")]);
    assert_ran(&out);
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(
        summary.contains(&format!("next        memlens report {}", p.display())),
        "{summary}"
    );
    let r = report_json(&p);
    let by_peak = objects(&r, "objects_by_peak");
    let find = |kind: &str, pred: &dyn Fn(&serde_json::Value) -> bool| {
        by_peak
            .iter()
            .find(|o| o["kind"] == kind && pred(o))
            .cloned()
    };
    let matrix = find("heap", &|o| {
        o["peak_bytes"].as_f64() == Some((32u64 << 20) as f64)
    })
    .expect("32 MiB matrix");
    assert_eq!(matrix["site"]["function"], "make_matrix");
    assert!(matrix["site"]["file"]
        .as_str()
        .unwrap()
        .ends_with("phases.c"));
    assert!(find("static", &|o| o["name"]
        .as_str()
        .unwrap()
        .starts_with("lookup_table"))
    .is_some());
    let group = find("group", &|o| o["name"] == "list nodes").expect("synthetic object");
    assert_eq!(group["allocations"].as_f64().unwrap(), 400000.0);
    assert!(find("tag", &|o| o["name"] == "staging buffer").is_some());
    assert!(find("mmap", &|o| o["peak_bytes"].as_f64()
        == Some((64u64 << 20) as f64))
    .is_some());
    // libc's and ld.so's own variables are one row per library, after every
    // object of the program; the C startup files' variables are not its own.
    let listed: Vec<&str> = by_peak
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    let first_library = listed
        .iter()
        .position(|n| n.starts_with("statics of "))
        .expect("library rows");
    assert!(
        listed[first_library..]
            .iter()
            .all(|n| n.starts_with("statics of ")),
        "{listed:?}"
    );
    assert!(
        listed
            .iter()
            .any(|n| n.starts_with("statics of libc.so.6 (")),
        "{listed:?}"
    );
    assert!(
        !listed
            .iter()
            .any(|n| n.contains("[libc.so.6]") || n.starts_with("__abi_tag")),
        "{listed:?}"
    );
    // The leak recorded exactly (a small block the byte sampler picked, such
    // as stdout's buffer, may be listed too, as an estimate).
    let leaks: Vec<_> = objects(&r["leaks"], "sites")
        .into_iter()
        .filter(|l| l["provenance"] == "measured")
        .collect();
    assert_eq!(leaks.len(), 1, "{leaks:?}");
    assert_eq!(
        leaks[0]["leaked_bytes"].as_f64().unwrap(),
        (1u64 << 20) as f64
    );
    let regions = names(&r["regions"]);
    for name in ["init", "list", "mapped", "teardown"] {
        assert!(regions.contains(&name.to_string()), "{regions:?}");
    }
    // The live heap peak (exact) holds both matrices and the list at least.
    assert!(r["peak"]["heap_bytes"].as_u64().unwrap() >= (40u64 << 20));
    // The text report and the plot work on the same profile.
    let text = Command::new(memlens())
        .arg("report")
        .arg(&p)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&text.stdout).contains("TOP DATA OBJECTS BY PEAK BYTES"));
    let images = ["svg", "png"].map(|ext| dir.path().join(format!("cap.{ext}")));
    for img in &images {
        assert_ran(&plot("capacity", &p, img));
    }
    image::assert_capacity_plot(&r, &images[0], &images[1]);
}

/// A binary on its own (copied, or installed by `cargo install`) records with
/// the runtime built into it, written once to a private per-user cache; a
/// cache directory others can write is refused for the next candidate.
#[test]
fn a_copied_binary_records_with_its_embedded_runtime() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir();
    let bin = dir.path().join("bin/memlens");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::copy(memlens(), &bin).unwrap();
    let (cache, tmp) = (dir.path().join("cache"), dir.path().join("tmp"));
    std::fs::create_dir_all(&tmp).unwrap();
    let record_alone = |prof: &str| {
        let out = output_within(
            Command::new(&bin)
                .env_remove("MEMLENS_RUNTIME")
                .env("XDG_CACHE_HOME", &cache)
                .env("TMPDIR", &tmp)
                .args(["record", "--leaks", "-o"])
                .arg(dir.path().join(prof))
                .arg("--")
                .arg(program("heap_measures")),
        );
        assert_ran(&out);
        // Every block recorded: the heap's peak, exact (over 100 MiB).
        let meta = memlens_profile::Meta::read(&dir.path().join(prof)).unwrap();
        let peak = meta.processes[0]
            .heap_peak
            .clone()
            .expect("every block replayed");
        assert!(peak.requested_bytes > 100 << 20, "{peak:?}");
        peak.requested_bytes
    };
    let cached = |base: &std::path::Path| -> Vec<std::path::PathBuf> {
        let Ok(entries) = std::fs::read_dir(base) else {
            return Vec::new();
        };
        entries
            .map(|e| e.unwrap().path().join("libmemlens_runtime.so"))
            .filter(|p| p.is_file())
            .collect()
    };
    let peak = record_alone("first");
    let written = cached(&cache.join("memlens"));
    assert_eq!(written.len(), 1, "{written:?}");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&cache.join("memlens")), 0o700);
    assert_eq!(mode(written[0].parent().unwrap()), 0o700);
    // The same file serves the next run.
    let before = std::fs::metadata(&written[0]).unwrap().modified().unwrap();
    assert_eq!(record_alone("second"), peak);
    assert_eq!(
        std::fs::metadata(&written[0]).unwrap().modified().unwrap(),
        before
    );
    // A cache others could write into is not used: the runtime goes to TMPDIR.
    std::fs::set_permissions(
        cache.join("memlens"),
        std::fs::Permissions::from_mode(0o777),
    )
    .unwrap();
    record_alone("third");
    let uid = unsafe { libc::getuid() };
    assert_eq!(cached(&tmp.join(format!("memlens-{uid}"))).len(), 1);
}

/// The validation kit: every backend this machine has (the instrumented
/// build and page faults here) against a kernel with known accesses.
#[test]
fn doctor_validates_every_backend_against_known_accesses() {
    let dir = tempdir();
    let file = dir.path().join("validate.json");
    let out = output_within(
        Command::new(memlens())
            .env("MEMLENS_RUNTIME", runtime())
            .args(["doctor", "--validate", "--output"])
            .arg(&file),
    );
    assert_ran(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("verdict: every figure within 10% of the truth"),
        "{text}"
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(v["pass"], true);
    let checks = v["checks"].as_array().unwrap();
    for backend in ["software", "page-faults"] {
        assert_eq!(
            checks.iter().filter(|c| c["backend"] == backend).count(),
            if backend == "software" { 6 } else { 3 },
            "{v:#}"
        );
    }
    // Each figure against the kernel's own truth (src/validate/kernel.c: 4,
    // 8 and 16 MiB arrays written once and read 4, 2 and 1 times; 4 KiB
    // pages), within the 10% the verdict allows, checked here rather than
    // taken from memlens' own pass marks.
    let mib = (1u64 << 20) as f64;
    for c in checks {
        let (size, reads) = match c["object"].as_str().unwrap() {
            "small" => (4.0 * mib, 4.0),
            "medium" => (8.0 * mib, 2.0),
            "large" => (16.0 * mib, 1.0),
            other => panic!("unknown array {other}"),
        };
        let truth = match c["figure"].as_str().unwrap() {
            "bytes read" => size * reads,
            "bytes written" => size,
            "pages first touched" => size / 4096.0,
            other => panic!("unknown figure {other}"),
        };
        assert_eq!(c["expected"].as_f64(), Some(truth), "{c}");
        let measured = c["measured"].as_f64().unwrap();
        assert!((measured - truth).abs() <= 0.1 * truth, "{c}");
    }
}

/// Shell completions that the shell accepts, and a manual page man renders.
#[test]
fn completions_and_manual_page() {
    let dir = tempdir();
    let bash = dir.path().join("memlens.bash");
    let out = output_within(Command::new(memlens()).args(["completions", "bash"]));
    assert_ran(&out);
    std::fs::write(&bash, &out.stdout).unwrap();
    // Sourced, it completes memlens' subcommands.
    let script = format!(
        "source {}; COMP_WORDS=(memlens rep); COMP_CWORD=1; _memlens memlens rep memlens; echo ${{COMPREPLY[@]}}",
        bash.display()
    );
    let out = output_within(Command::new("bash").arg("-c").arg(&script));
    assert_ran(&out);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "report");
    let man = output_within(Command::new(memlens()).arg("man"));
    assert_ran(&man);
    let text = String::from_utf8_lossy(&man.stdout);
    assert!(
        text.contains(".TH memlens 1") && text.contains("record"),
        "{text}"
    );
}

/// The published schema is the one this build writes by (every test's JSON
/// report is checked against it in `report_json`).
#[test]
fn the_published_report_schema_is_current() {
    let out = output_within(Command::new(memlens()).args(["report", "--schema"]));
    assert_ran(&out);
    let published = std::fs::read(root().join("docs/report.schema.json")).unwrap();
    assert!(
        out.stdout == published,
        "docs/report.schema.json is out of date: memlens report --schema > docs/report.schema.json"
    );
}

#[test]
fn bad_input_gets_a_clear_error() {
    let dir = tempdir();
    let o = dir.path().join("p").to_string_lossy().into_owned();
    fails_with(
        &["record", "-o", &o, "--", "no-such-program-xyz"],
        "not found in PATH",
    );
    fails_with(
        &["record", "-o", &o, "--", "./no/such/file"],
        "no such file",
    );
    let not_exec = dir.path().join("data.txt");
    std::fs::write(&not_exec, "hello").unwrap();
    fails_with(
        &["record", "-o", &o, "--", not_exec.to_str().unwrap()],
        "not executable",
    );
    fails_with(
        &["record", "--interval", "0", "--", "true"],
        "invalid value",
    );
    fails_with(&["record", "--bogus", "--", "true"], "unexpected argument");
    fails_with(
        &["record", "--pid", "999999999", "-o", &o],
        "no process 999999999",
    );
    fails_with(
        &["record", "--duration", "1", "-o", &o, "true"],
        "--duration stops recording a process memlens attached to",
    );
    // memlens' own failures exit as `env` does: 125, 126 not runnable, 127
    // not found; the program's own status passes through.
    let status = |args: &[&str]| {
        let out = Command::new(memlens())
            .env("MEMLENS_RUNTIME", runtime())
            .args(args)
            .output();
        out.unwrap().status.code()
    };
    assert_eq!(
        status(&["record", "-o", &o, "--", "no-such-program-xyz"]),
        Some(127)
    );
    assert_eq!(
        status(&["record", "-o", &o, "--", not_exec.to_str().unwrap()]),
        Some(126)
    );
    assert_eq!(status(&["record", "--bogus", "--", "true"]), Some(125));
    assert_eq!(status(&["report", "/no/such/dir"]), Some(125));
    // Without `--`, the program and its own flags.
    let elsewhere = tempdir();
    let own = elsewhere.path().join("own").to_string_lossy().into_owned();
    assert_eq!(
        status(&["record", "-o", &own, "sh", "-c", "exit 2"]),
        Some(2)
    );
    fails_with(
        &["report", dir.path().to_str().unwrap()],
        "no memlens profile here",
    );
    fails_with(&["report", "/no/such/dir"], "no such directory");
    // A corrupt table names the file and the fix.
    let p = dir.path().join("good");
    assert!(record(&p, &[], &["true"]).status.success());
    std::fs::write(p.join("allocations.parquet"), b"garbage").unwrap();
    fails_with(
        &["report", p.to_str().unwrap()],
        "allocations.parquet: not a readable Parquet table",
    );
}

#[test]
fn long_steps_show_a_spinner_on_a_terminal_only() {
    // Under a pseudo-terminal (util-linux `script`) record and report name
    // what they are doing, then clear the line; into a pipe they write none of that.
    let dir = tempdir();
    let p = dir.path().join("p");
    let piped = record(&p, &[], &[&program("phases")]);
    assert_ran(&piped);
    assert!(!String::from_utf8_lossy(&piped.stderr).contains("writing the profile"));
    let command = format!(
        "MEMLENS_RUNTIME={} {} record -o {} -- {}",
        runtime().display(),
        memlens().display(),
        dir.path().join("q").display(),
        program("phases")
    );
    // What a shell command draws on a terminal.
    let on_terminal = |command: &str| {
        // A terminal that draws: a CI's TERM may be unset or "dumb", where
        // progress is rightly not drawn.
        let out = Command::new("script")
            .args(["-qec", command, "/dev/null"])
            .env("TERM", "xterm-256color")
            .output()
            .unwrap();
        assert_ran(&out);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let terminal = on_terminal(&command);
    // Writing the profile counts its work: a bar with the share done.
    assert!(
        terminal.contains("memlens: writing the profile ["),
        "{terminal:?}"
    );
    let command = format!("{} report {} > /dev/null", memlens().display(), p.display());
    let terminal = on_terminal(&command);
    assert!(terminal.contains("memlens: analysing"), "{terminal:?}");
    // Cleared: the last thing drawn erases the line.
    assert!(terminal.trim_end().ends_with("\u{1b}[2K"), "{terminal:?}");
    let out = Command::new(memlens())
        .arg("report")
        .arg(&p)
        .output()
        .unwrap();
    assert_ran(&out);
    let piped = String::from_utf8_lossy(&out.stderr);
    assert!(!piped.contains("analysing"), "{piped}");
}

/// Common mistakes, each told in one line of words: what is wrong and what
/// to do, never a Rust error's Debug text or an OS error number.
#[test]
fn mistakes_are_told_in_one_line_of_words() {
    let dir = tempdir();
    let p = dir.path().join("p");
    assert_ran(&record(&p, &[], &[&program("churn")]));
    let profile = p.to_str().unwrap();
    let missing = dir.path().join("no/such/dir");
    let into = |name: &str| missing.join(name).to_string_lossy().into_owned();
    let mistakes: Vec<Vec<String>> = vec![
        vec![
            "plot".into(),
            "capacity".into(),
            profile.into(),
            "-o".into(),
            into("x.png"),
        ],
        vec![
            "plot".into(),
            "capacity".into(),
            profile.into(),
            "-o".into(),
            into("x.svg"),
        ],
        vec![
            "plot".into(),
            "flame".into(),
            profile.into(),
            "-o".into(),
            into("f.svg"),
        ],
        vec![
            "report".into(),
            profile.into(),
            "--html".into(),
            into("r.html"),
        ],
        vec![
            "export".into(),
            profile.into(),
            "--format".into(),
            "pprof".into(),
            "-o".into(),
            into("x.pb.gz"),
        ],
        vec!["sql".into(), profile.into(), "SELEC 1".into()],
        vec![
            "sql".into(),
            profile.into(),
            "select nope from sites".into(),
        ],
        vec!["report".into(), into("profile")],
        vec!["record".into(), "--".into(), into("program")],
        vec!["import".into(), into("perf.data")],
        vec!["import".into(), profile.into()],
        vec![
            "plot".into(),
            "flame".into(),
            profile.into(),
            "-o".into(),
            into("x.png"),
        ],
        vec![
            "record".into(),
            "-o".into(),
            "/proc/memlens".into(),
            "--".into(),
            "true".into(),
        ],
    ];
    for args in &mistakes {
        let out = Command::new(memlens()).args(args).output().unwrap();
        let error = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "{args:?} succeeded");
        assert_eq!(error.lines().count(), 1, "{args:?}: {error}");
        for debug_text in ["Os {", "Error(", "os error", "{ ", "kind:"] {
            assert!(!error.contains(debug_text), "{args:?}: {error}");
        }
        assert!(error.starts_with("memlens"), "{args:?}: {error}");
        // A directory that could not be made is not one "removed while the
        // program ran"; a flame graph is not written into a .png.
        if args.contains(&"/proc/memlens".to_string()) {
            assert!(error.contains("cannot make this directory"), "{error}");
        }
        if args.contains(&"flame".to_string()) && args.last().is_some_and(|a| a.ends_with(".png")) {
            assert!(error.contains("use a .svg file name"), "{error}");
        }
    }
}

/// `memlens man --dir` writes the page memlens.1 refers to for every
/// subcommand, each with its options.
#[test]
fn every_subcommand_has_the_manual_page_the_main_page_names() {
    let dir = tempdir();
    let out = Command::new(memlens())
        .args(["man", "--dir", dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert_ran(&out);
    let main_page = std::fs::read_to_string(dir.path().join("memlens.1")).unwrap();
    let named: Vec<&str> = (main_page.split("memlens\\-").skip(1))
        .filter_map(|rest| rest.split_once("(1)").map(|(name, _)| name))
        .filter(|name| !name.contains(char::is_whitespace))
        .collect();
    assert!(named.len() >= 15, "{named:?}");
    for name in named {
        let page = dir
            .path()
            .join(format!("memlens-{}.1", name.replace("\\-", "-")));
        assert!(page.exists(), "{} is named but not written", page.display());
    }
    let record = std::fs::read_to_string(dir.path().join("memlens-record.1")).unwrap();
    for option in ["\\-\\-leaks", "\\-\\-sample\\-rate", "\\-\\-output"] {
        assert!(record.contains(option), "memlens-record.1 lacks {option}");
    }
    // Its examples under EXAMPLES, a line each, as typed.
    let (_, examples) = record
        .split_once(".SH EXAMPLES")
        .expect("an EXAMPLES section");
    assert!(examples.contains("\\&memlens record \\-\\-leaks \\-o prof \\-\\- ./app\n"));
    assert!(!record.contains("EXTRA"));
}

/// The examples each command's help ends with (and its manual page shows)
/// are command lines memlens accepts. Each is run with an unknown flag put
/// after its own arguments, and clap must stop at that flag, having taken
/// every argument before it (names and counts); then as written in an empty
/// directory, where memlens must get past its arguments (their values) to
/// its own error about the missing profile or program, unless it would
/// start real work there (calibrate, doctor, --pid).
#[test]
fn every_commands_examples_are_command_lines_memlens_accepts() {
    let help = |args: &[&str]| {
        let out = output_within(Command::new(memlens()).args(args).arg("--help"));
        assert_ran(&out);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // The commands, read from the help (the compiler wrappers pass --help
    // to the compiler).
    let subcommands = |text: &str| -> Vec<String> {
        let Some((_, listed)) = text.split_once("Commands:\n") else {
            return Vec::new();
        };
        (listed.lines().take_while(|l| l.starts_with("  ")))
            .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
            .filter(|name| !["help", "cc", "c++", "fc"].contains(&name.as_str()))
            .collect()
    };
    let mut commands = vec![Vec::<String>::new()];
    let mut with_examples = Vec::new();
    let dir = tempdir();
    let mut checked = 0;
    while let Some(command) = commands.pop() {
        let args: Vec<&str> = command.iter().map(String::as_str).collect();
        let text = help(&args);
        for sub in subcommands(&text) {
            commands.push([command.clone(), vec![sub]].concat());
        }
        let Some((_, examples)) = text.split_once("EXAMPLES:\n") else {
            continue;
        };
        with_examples.push(command.join(" "));
        for line in examples.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let Some(at) = line.find("memlens ") else {
                continue; // the program's own step (perf, LD_PRELOAD)
            };
            let line = &line[at..];
            let end = [" -- ", " > "].iter().filter_map(|s| line.find(s)).min();
            let end = end.unwrap_or(line.len());
            let probe = format!("{} --zz-probe{}", &line[..end], &line[end..]);
            let out = run_shell(&probe, dir.path());
            let error = String::from_utf8_lossy(&out.stderr);
            assert!(
                !out.status.success() && error.contains("unexpected argument '--zz-probe' found"),
                "`{line}` (help of memlens {}): {error}",
                command.join(" ")
            );
            let runs_here = ["memlens calibrate", "memlens doctor", "--pid"];
            if !runs_here.iter().any(|work| line.contains(work)) {
                let out = run_shell(line, dir.path());
                let error = String::from_utf8_lossy(&out.stderr);
                assert!(error.starts_with("memlens: "), "`{line}`: {error}");
            }
            checked += 1;
        }
    }
    with_examples.sort();
    let expected = [
        "",
        "calibrate",
        "diff",
        "doctor",
        "export",
        "finalize",
        "import",
        "plot",
        "record",
        "report",
        "sql",
        "wrappers",
    ];
    assert_eq!(with_examples, expected);
    assert!(checked >= 30, "{checked} examples");
}

/// What export tells it wrote: counted in words, and nothing about a file
/// when it wrote to standard output.
#[test]
fn export_tells_what_it_wrote_where() {
    let dir = tempdir();
    let p = dir.path().join("p");
    assert_ran(&record(&p, &[], &[&program("churn")]));
    let export = |args: &[&str]| {
        let out = Command::new(memlens())
            .arg("export")
            .arg(&p)
            .args(args)
            .output()
            .unwrap();
        assert_ran(&out);
        String::from_utf8(out.stderr).unwrap()
    };
    let one = dir.path().join("one.csv");
    let told = export(&["--sql", "select 1 as x", "-o", one.to_str().unwrap()]);
    assert_eq!(told, format!("memlens: wrote 1 row to {}\n", one.display()));
    assert_eq!(export(&["--format", "collapsed", "-o", "-"]), "");
}

/// `memlens cc --help` leads with what memlens adds, then clang's options.
#[test]
fn a_wrappers_help_leads_with_memlens_own() {
    let out = Command::new(memlens())
        .args(["cc", "--help"])
        .output()
        .unwrap();
    assert_ran(&out);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.starts_with("memlens cc: clang with memlens' access instrumentation"),
        "{help}"
    );
    let ours = help.find("MEMLENS_RUNTIME").unwrap();
    let clangs = help
        .find("OVERVIEW: clang")
        .expect("clang's own help follows");
    assert!(ours < clangs);
}

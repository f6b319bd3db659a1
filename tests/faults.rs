//! The fault suite: a profile with every table filled (the STREAM example built
//! with `memlens cc`), damaged in the ways disks and people damage files —
//! a table deleted, cut short, bits flipped in its data or its footer, a run
//! of bytes zeroed, meta.json cut or flipped — then read by every command that
//! reads profiles. Each must answer or fail with an error line naming the
//! problem (exit status 2), never crash.

mod common;
use common::*;
use std::path::Path;
use std::process::Command;

/// A fixed xorshift: the same damage on every run.
struct Dice(u64);

impl Dice {
    fn next(&mut self, below: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % below as u64) as usize
    }
}

#[derive(Clone, Copy, Debug)]
enum Damage {
    Delete,
    Truncate,
    FlipData,
    FlipFooter,
    Zero,
}

fn damage(file: &Path, how: Damage, dice: &mut Dice) {
    if let Damage::Delete = how {
        std::fs::remove_file(file).unwrap();
        return;
    }
    let mut data = std::fs::read(file).unwrap();
    let len = data.len();
    match how {
        Damage::Truncate => data.truncate(dice.next(len)),
        Damage::Zero => {
            let at = dice.next(len);
            let end = (at + 64).min(len);
            data[at..end].fill(0);
        }
        Damage::FlipData | Damage::FlipFooter => {
            // A Parquet file ends with its footer, its length (4 bytes) and "PAR1".
            let footer = if len > 8 && file.extension().is_some_and(|e| e == "parquet") {
                u32::from_le_bytes(data[len - 8..len - 4].try_into().unwrap()) as usize
            } else {
                0
            };
            let from = match how {
                Damage::FlipFooter => len.saturating_sub(8 + footer),
                _ => 0,
            };
            for _ in 0..=dice.next(3) {
                let at = from + dice.next(len - from);
                data[at] ^= 1 << dice.next(8);
            }
        }
        Damage::Delete => unreachable!(),
    }
    std::fs::write(file, data).unwrap();
}

#[test]
fn damaged_profiles_give_an_error_line_never_a_crash() {
    let dir = tempdir();
    let app = stream_example(dir.path(), &["-DN=100000L", "-DCHASE=4096L"]);
    let good = dir.path().join("good");
    assert_ran(&record(&good, &[], &[&app]));
    let files = profile_files(&good);
    assert!(files.len() >= 12, "{files:?}");

    let kinds = [
        Damage::Delete,
        Damage::Truncate,
        Damage::FlipData,
        Damage::FlipFooter,
        Damage::Zero,
    ];
    let mut dice = Dice(0x9e37_79b9_7f4a_7c15);
    let mut failures = Vec::new();
    let mut refused = 0;
    // Every file gets every kind of damage once, then random ones; footers
    // often (1-3 flipped bits in a footer crashed a reader in about 2% of
    // cases: the Arrow schema embedded there, column chunk offsets).
    let cases: Vec<(String, Damage)> = (files.iter())
        .flat_map(|f| kinds.map(|k| (f.clone(), k)))
        .chain((0..80).map(|i| {
            let how = if i % 2 == 0 {
                Damage::FlipFooter
            } else {
                kinds[dice.next(5)]
            };
            (files[dice.next(files.len())].clone(), how)
        }))
        .collect();
    for (file, how) in cases {
        let bad = dir.path().join("bad");
        let _ = std::fs::remove_dir_all(&bad);
        std::fs::create_dir(&bad).unwrap();
        for f in &files {
            std::fs::copy(good.join(f), bad.join(f)).unwrap();
        }
        damage(&bad.join(&file), how, &mut dice);
        let b = bad.to_str().unwrap();
        let out_dir = dir.path().join("out");
        let _ = std::fs::remove_dir_all(&out_dir);
        let png = dir.path().join("c.png");
        let (g, o, i) = (
            good.to_str().unwrap(),
            out_dir.to_str().unwrap(),
            png.to_str().unwrap(),
        );
        for args in readers(b, g, o, i) {
            let out = Command::new(memlens()).args(&args).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            // A query, or a report over a table it reads (all but the
            // modules and the per-thread timeline), with that table deleted
            // must say so, not read it as empty.
            let unread = ["modules.parquet", "thread_timeline.parquet"];
            let must_refuse = matches!(how, Damage::Delete)
                && (args[0] == "sql" || (args[0] == "report" && !unread.contains(&file.as_str())));
            match out.status.code() {
                Some(0) if must_refuse && file.ends_with(".parquet") => {
                    failures.push(format!("{file} deleted {args:?}: read as empty"))
                }
                Some(0) => {}
                // Export reports each table written before the damaged one.
                Some(125) if err.lines().last().is_some_and(|l| l.starts_with("memlens")) => {
                    refused += 1;
                    let last = err.lines().last().unwrap();
                    if args[0] != "export" && err.lines().count() != 1 {
                        failures.push(format!("{file} {how:?} {args:?}: several lines: {err}"));
                    } else if matches!(how, Damage::Delete) && !last.contains(&file) {
                        failures.push(format!("{file} deleted {args:?}: not named: {last}"));
                    }
                }
                code => failures.push(format!("{file} {how:?} {args:?}: status {code:?}: {err}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The damage is seen: most cases are refused, with their file named.
    assert!(refused > 100, "only {refused} refusals");
}

/// The tables and meta.json of profile `p`, sorted.
fn profile_files(p: &Path) -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(p)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".parquet") || n == "meta.json")
        .collect();
    files.sort();
    files
}

/// `torture hold` recorded into `dir/name`: a small whole profile.
fn held_profile(dir: &Path, name: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    assert_ran(&record(&p, &[], &[&program("torture"), "hold"]));
    p
}

/// The commands that read a profile, on profile `p` (`out` for their files).
fn readers<'a>(p: &'a str, good: &'a str, out: &'a str, png: &'a str) -> [Vec<&'a str>; 6] {
    [
        vec!["report", p],
        vec!["report", "--format", "json", p],
        vec!["sql", p, "SELECT count(*) FROM samples"],
        vec!["diff", good, p],
        vec!["plot", "capacity", p, "-o", png],
        vec!["export", "--format", "csv", "-o", out, p],
    ]
}

#[test]
fn files_that_are_not_regular_are_refused_not_read() {
    // A profile from someone else may hold, in a file's place, a link to
    // /dev/zero (every reader grew to 7-8 GB before), a FIFO (every reader
    // waited forever) or a directory. Each reader refuses it, naming it.
    let dir = tempdir();
    let good = held_profile(dir.path(), "good");
    let files = profile_files(&good);
    let mut failures = Vec::new();
    type MakeStandIn = fn(&Path);
    let stand_ins: [(&str, MakeStandIn); 3] = [
        ("link to /dev/zero", |f| {
            std::os::unix::fs::symlink("/dev/zero", f).unwrap()
        }),
        ("FIFO", |f| {
            let c = std::ffi::CString::new(f.to_str().unwrap()).unwrap();
            // SAFETY: a NUL-terminated path.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        }),
        ("directory", |f| std::fs::create_dir(f).unwrap()),
    ];
    for file in &files {
        for (what, make) in &stand_ins {
            let bad = dir.path().join("bad");
            let _ = std::fs::remove_dir_all(&bad);
            copy_profile(&good, &bad, |_| {});
            std::fs::remove_file(bad.join(file)).unwrap();
            make(&bad.join(file));
            let out_dir = dir.path().join("out");
            let _ = std::fs::remove_dir_all(&out_dir);
            let png = dir.path().join("c.png");
            let (b, g) = (bad.to_str().unwrap(), good.to_str().unwrap());
            for args in readers(b, g, out_dir.to_str().unwrap(), png.to_str().unwrap()) {
                let out = output_within(Command::new(memlens()).args(&args));
                let err = String::from_utf8_lossy(&out.stderr);
                match out.status.code() {
                    Some(0) => {} // a table this command does not read
                    Some(125) if err.lines().count() == 1 && err.contains(file.as_str()) => {}
                    Some(125)
                        if args[0] == "export"
                            && err.lines().last().unwrap().contains(file.as_str()) => {}
                    code => failures.push(format!(
                        "{file} as a {what}, {args:?}: status {code:?}: {err}"
                    )),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn strings_of_any_length_are_rendered_cut_never_a_panic() {
    // A command line of 100 000 arguments, a host name of 70 000 characters:
    // the text renderer's column widths panicked past 65 535 (status 101).
    let dir = tempdir();
    let good = held_profile(dir.path(), "good");
    let long = dir.path().join("long");
    copy_profile(&good, &long, |meta| {
        meta["command"] = (0..100_000).map(|i| format!("arg{i}")).collect();
        meta["host"] = "h".repeat(70_000).into();
    });
    let html = dir.path().join("r.html");
    for args in [
        vec!["report", long.to_str().unwrap()],
        vec!["report", "--format", "json", long.to_str().unwrap()],
        vec![
            "report",
            long.to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
        ],
    ] {
        let out = output_within(Command::new(memlens()).args(&args));
        assert_ran(&out);
        // The text cuts what it shows; JSON and HTML keep the data whole.
        if args.len() == 2 {
            let text = String::from_utf8_lossy(&out.stdout);
            let longest = text.lines().map(|l| l.chars().count()).max().unwrap_or(0);
            assert!(longest < 2000, "a line of {longest} characters");
        }
    }
}

#[test]
fn sql_refuses_what_it_cannot_run_within_its_limits() {
    let dir = tempdir();
    let p = dir.path().join("p");
    assert_ran(&record(&p, &["--leaks"], &[&program("torture"), "threads"]));
    let ps = p.to_str().unwrap();
    let sql = |extra: &[&str], query: &str| {
        output_within(
            Command::new(memlens())
                .arg("sql")
                .args(extra)
                .arg(ps)
                .arg(query),
        )
    };
    let refused = |out: &std::process::Output, what: &str| {
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{err}");
        assert!(err.contains(what) && err.lines().count() == 1, "{err}");
    };
    // A chain of 2 000 additions overflowed the stack (abort, status 134).
    let chain = |n: usize| format!("SELECT 1{}", "+1".repeat(n));
    refused(&sql(&[], &chain(2000)), "2000 operators, more than the 500");
    assert_ran(&sql(&[], &chain(499)));
    // A four-way cross join of the allocations (10^8 rows and more) under a
    // 64 MiB limit: refused once the limit is reached, not grown without end.
    let rows = sql_json(&p, "SELECT count(*) AS n FROM allocations")[0]["n"]
        .as_u64()
        .unwrap();
    assert!(rows > 100, "{rows} allocations");
    let join = "SELECT count(*), array_agg(a.address) FROM allocations a \
                CROSS JOIN allocations b CROSS JOIN allocations c CROSS JOIN allocations d";
    refused(
        &sql(&["--memory-limit", "64M"], join),
        "more memory than its limit",
    );
}

/// Runs `memlens args` to its end: its standard output and its peak
/// resident set (KiB, from wait4's usage of that process alone).
#[allow(clippy::zombie_processes)] // reaped by wait4, which gives its usage
fn with_peak_memory(args: &[&str]) -> (Vec<u8>, i64) {
    use std::io::Read;
    let mut child = Command::new(memlens())
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = Vec::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut stdout)
        .unwrap();
    let (mut status, mut usage) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
    // SAFETY: waits for the child this test started, into locals.
    let reaped = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert!(reaped > 0 && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    (stdout, usage.ru_maxrss)
}

#[test]
fn a_timeline_of_millions_of_readings_is_reported_in_bounded_memory() {
    // 2 000 000 readings of one process (5.5 hours at 10 ms) with one high
    // resident set a third of the way: before, `report` grew ~330 bytes a
    // row (4 M rows 1.35 GB); now the timeline is thinned as it is read.
    let dir = tempdir();
    let small = held_profile(dir.path(), "small");
    let huge = dir.path().join("huge");
    copy_profile(&small, &huge, |_| {});
    let grow = r#"
import sys, pyarrow as pa, pyarrow.parquet as pq
path, n = sys.argv[1], 2_000_000
t = pq.read_table(path)
first = t.slice(0, 1).to_pylist()[0]
cols = {name: [first[name]] * n for name in t.column_names}
cols["time_ns"] = [i * 10_000_000 for i in range(n)]
cols["rss"] = [(i % 1000) * 4096 + (1 << 30 if i == n // 3 else 0) for i in range(n)]
pq.write_table(pa.Table.from_pydict(cols, schema=t.schema), path)
"#;
    let made = Command::new("python3")
        .args(["-c", grow])
        .arg(huge.join("timeline.parquet"))
        .output()
        .expect("python3 with pyarrow (.ci/run installs it)");
    assert_ran(&made);
    let (_, small_kib) = with_peak_memory(&["report", small.to_str().unwrap()]);
    let (out, huge_kib) = with_peak_memory(&["report", huge.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains("resident  1.0 GiB at 6666."), "{text}");
    assert!(
        text.contains("2000000 readings merged 32 at a time into 62500"),
        "{text}"
    );
    // Read whole, the rows alone took over 600 MB.
    assert!(
        huge_kib < small_kib + 200 * 1024,
        "{small_kib} KiB, then {huge_kib} KiB"
    );
}

#[test]
fn raw_logs_that_are_not_regular_files_are_not_read() {
    // Finalizing raw logs (as `report` does for a directory that was never
    // finalized): a FIFO in a process log's place and a link to /dev/zero in
    // the collector log's place must neither block nor grow the reader.
    let dir = tempdir();
    let good = dir.path().join("good");
    assert_ran(&record(
        &good,
        &["--keep-raw"],
        &[&program("torture"), "hold"],
    ));
    let bad = dir.path().join("bad");
    std::fs::create_dir_all(bad.join("raw")).unwrap();
    for log in std::fs::read_dir(good.join("raw")).unwrap().flatten() {
        let to = bad.join("raw").join(log.file_name());
        let name = log.file_name().to_string_lossy().into_owned();
        if name.ends_with(".mlraw") {
            let c = std::ffi::CString::new(to.to_str().unwrap()).unwrap();
            // SAFETY: a NUL-terminated path.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        } else {
            std::os::unix::fs::symlink("/dev/zero", &to).unwrap();
        }
    }
    let out = output_within(Command::new(memlens()).arg("report").arg(&bad));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(
        err.contains("not a regular file") && err.lines().count() == 1,
        "{err}"
    );
}

/// Truncated and corrupted raw logs (what a killed process or a bad disk leaves)
/// give a profile or a one-line error, never a crash: the log of a threaded
/// program with no samples, and of an instrumented one with regions and samples.
/// (This build checks overflow, so a garbage count that reaches a sum panics.)
#[test]
fn corrupt_raw_logs_never_crash_the_finalizer() {
    let dir = tempdir();
    let folds = memlens_cc(dir.path(), "fold_phases.c", &["-O1", "-g"]);
    let runs: [&[&str]; 2] = [
        &[&program("torture"), "threads"],
        &[&folds.to_string_lossy(), "200"],
    ];
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for (run, args) in runs.iter().enumerate() {
        let p = dir.path().join(format!("p{run}"));
        assert_ran(&record(&p, &["--keep-raw"], args));
        let log = raw_log(&p);
        let bytes = std::fs::read(&log).unwrap();
        for case in 0..24 {
            let mut data = bytes.clone();
            match case % 4 {
                0 => data.truncate((next() as usize) % data.len()),
                1 => {
                    for _ in 0..64 {
                        let i = (next() as usize) % data.len();
                        data[i] = next() as u8;
                    }
                }
                2 => {
                    // Scribble over a whole stretch of records.
                    let start = (next() as usize) % data.len();
                    let end = (start + 4096).min(data.len());
                    for b in &mut data[start..end] {
                        *b = next() as u8;
                    }
                }
                _ => {
                    // Extreme values in the header's counters and settings.
                    for _ in 0..8 {
                        let i = (8 + (next() as usize) % 4088) & !7;
                        let word = [u64::MAX, 0, i64::MAX as u64, next()][case / 4 % 4];
                        data[i..i + 8].copy_from_slice(&word.to_le_bytes());
                    }
                }
            }
            let case_dir = dir.path().join(format!("case{run}-{case}"));
            std::fs::create_dir_all(case_dir.join("raw")).unwrap();
            std::fs::write(case_dir.join("raw").join(log.file_name().unwrap()), &data).unwrap();
            let out = Command::new(memlens())
                .args(["report", "--format", "json"])
                .arg(&case_dir)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            let code = out.status.code().expect("memlens must not die of a signal");
            assert!(
                code == 0 || code == 125,
                "run {run} case {case}: exit {code}: {err}"
            );
            if code == 125 {
                assert_eq!(
                    err.trim().lines().count(),
                    1,
                    "run {run} case {case}: one-line error: {err}"
                );
            }
        }
    }
}

#[test]
fn a_raw_log_of_another_format_is_named_not_misread() {
    // The raw log's layout changes between memlens versions: one written by
    // another version is refused with its format and the fix, in one line.
    let dir = tempdir();
    let p = dir.path().join("p");
    assert_ran(&record(&p, &["--keep-raw"], &[&program("phases")]));
    std::fs::remove_file(p.join(memlens_profile::META_FILE)).unwrap();
    let log = raw_log(&p);
    let mut bytes = std::fs::read(&log).unwrap();
    let at = std::mem::offset_of!(memlens_rawlog::FileHeader, version);
    bytes[at..at + 4].copy_from_slice(&(memlens_rawlog::VERSION - 1).to_le_bytes());
    std::fs::write(&log, &bytes).unwrap();
    let out = Command::new(memlens())
        .arg("finalize")
        .arg(&p)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(
        err.contains(&format!("raw log format {}", memlens_rawlog::VERSION - 1))
            && err.contains("finalize it with the memlens that recorded it")
            && err.trim().lines().count() == 1,
        "{err}"
    );
}

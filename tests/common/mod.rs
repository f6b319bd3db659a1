//! Shared helpers: build the real test programs once, run them natively and
//! under `memlens record`, and read the JSON report.
#![allow(dead_code)]

pub mod image;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn memlens() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_memlens"))
}

/// The runtime built beside the memlens binary (`cargo build` builds both).
pub fn runtime() -> PathBuf {
    let p = memlens().parent().unwrap().join("libmemlens_runtime.so");
    assert!(
        p.exists(),
        "{} missing: run `cargo build --workspace` first",
        p.display()
    );
    p
}

/// Directory holding the compiled test programs.
pub fn programs() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let out =
            std::env::temp_dir().join(format!("memlens-test-programs-{}", std::process::id()));
        std::fs::create_dir_all(&out).unwrap();
        let src = root().join("tests/programs");
        let inc = root().join("include");
        let cc = |args: &[&str]| {
            let st = Command::new(args[0])
                .args(&args[1..])
                .status()
                .expect("compiler runs");
            assert!(st.success(), "build failed: {args:?}");
        };
        let s = |p: &str| src.join(p).to_string_lossy().into_owned();
        let o = |p: &str| out.join(p).to_string_lossy().into_owned();
        let i = format!("-I{}", inc.display());
        cc(&[
            "gcc",
            "-O1",
            "-g",
            "-fno-omit-frame-pointer",
            &i,
            &s("torture.c"),
            "-o",
            &o("torture"),
            "-ldl",
            "-lpthread",
        ]);
        cc(&[
            "gcc",
            "-O1",
            "-g",
            "-fno-pie",
            "-no-pie",
            &s("non_pie_malloc.c"),
            "-o",
            &o("non_pie_malloc"),
        ]);
        // Its loops unrolled: one source line, several call stacks.
        cc(&[
            "gcc",
            "-O2",
            "-g",
            &s("unrolled_sites.c"),
            "-o",
            &o("unrolled_sites"),
        ]);
        // Names with control characters: clang's assembler takes them in a
        // symbol's name, GNU as does not.
        cc(&[
            "clang-16",
            "-O1",
            "-g",
            &i,
            &s("hostile_names.c"),
            "-o",
            &o("hostile_names"),
        ]);
        // No dynamic loader runs for it: the runtime cannot enter.
        cc(&[
            "gcc",
            "-O1",
            "-static",
            &i,
            &s("torture.c"),
            "-o",
            &o("torture_static"),
            "-lpthread",
        ]);
        cc(&[
            "gcc",
            "-O1",
            "-g",
            "-fPIC",
            "-shared",
            &s("plugin.c"),
            "-o",
            &o("libplugin.so"),
        ]);
        // Code a frame-pointer walk cannot follow: stacks come from DWARF.
        let no_frame_pointers = [
            "gcc",
            "-O2",
            "-g",
            "-fomit-frame-pointer",
            "-fno-optimize-sibling-calls",
        ];
        cc(&[
            &no_frame_pointers[..],
            &["-fPIC", "-shared", &s("call_stacks_lib.c")],
            &["-o", &o("libcall_stacks_lib.so")],
        ]
        .concat());
        cc(&[
            &no_frame_pointers[..],
            &[&s("call_stacks.c"), "-o", &o("call_stacks")],
            &[
                "-L",
                &o(""),
                "-lcall_stacks_lib",
                "-Wl,-rpath,$ORIGIN",
                "-lpthread",
            ],
        ]
        .concat());
        cc(&["gcc", "-O1", &s("spin.c"), "-o", &o("spin"), "-lpthread"]);
        cc(&[
            "gcc",
            "-O1",
            &s("inherited.c"),
            "-o",
            &o("inherited"),
            "-lpthread",
        ]);
        cc(&["gcc", "-O1", &s("own_malloc.c"), "-o", &o("own_malloc")]);
        cc(&[
            "gcc",
            "-O1",
            &s("region_heap.c"),
            "-o",
            &o("region_heap"),
            "-ldl",
        ]);
        cc(&[
            "gcc",
            "-O1",
            "-g",
            &s("heap_measures.c"),
            "-o",
            &o("heap_measures"),
        ]);
        cc(&[
            "gcc",
            "-O1",
            "-g",
            &s("fork_same_path.c"),
            "-o",
            &o("fork_same_path"),
        ]);
        cc(&[
            "gcc",
            "-O1",
            "-g",
            &s("first_touch.c"),
            "-o",
            &o("first_touch"),
            "-lpthread",
        ]);
        cc(&[
            "gcc",
            "-O1",
            "-g",
            &s("fork_touch.c"),
            "-o",
            &o("fork_touch"),
        ]);
        cc(&[
            "gcc",
            "-O1",
            "-g",
            "-fno-omit-frame-pointer",
            &s("churn.c"),
            "-o",
            &o("churn"),
            "-lpthread",
        ]);
        cc(&[
            "gcc",
            "-O1",
            "-g",
            &s("late_threads.c"),
            "-o",
            &o("late_threads"),
            "-lpthread",
        ]);
        cc(&[
            "gcc",
            "-O1",
            "-g",
            &s("handoff.c"),
            "-o",
            &o("handoff"),
            "-lpthread",
        ]);
        cc(&[
            "g++",
            "-O1",
            "-g",
            &s("exceptions.cpp"),
            "-o",
            &o("exceptions"),
        ]);
        cc(&["g++", "-O2", "-g", &s("mapstr.cpp"), "-o", &o("mapstr")]);
        cc(&[
            "gcc",
            "-O2",
            "-g",
            "-fno-omit-frame-pointer",
            &i,
            &root().join("examples/phases.c").to_string_lossy(),
            "-o",
            &o("phases"),
        ]);
        out
    })
}

/// Line number of the first source line of tests/programs/`file` containing `text`.
pub fn source_line(file: &str, text: &str) -> usize {
    let source = std::fs::read_to_string(root().join("tests/programs").join(file)).unwrap();
    1 + source.lines().position(|l| l.contains(text)).unwrap()
}

pub fn program(name: &str) -> String {
    programs().join(name).to_string_lossy().into_owned()
}

/// Whether the test runs as root, which it needs for `what`; if not, it
/// says so on stderr (shown with --nocapture) and the caller returns: the
/// suite passes as any user, and CI, as root, runs these too.
pub fn root_for(what: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("needs root ({what}): not run as uid {}", unsafe {
            libc::geteuid()
        });
    }
    root
}

/// A headless-capable Chromium on PATH (Debian's `chromium`, Ubuntu's
/// snap `chromium-browser`, Google's build); if none, it says so on stderr
/// and the caller returns: Ubuntu 24.04 ships Chromium only as a snap, which
/// a container cannot run. `.ci/run` installs Debian's.
pub fn chromium_for(what: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
        .find(|candidate| {
            Command::new(candidate)
                .arg("--version")
                .output()
                .is_ok_and(|out| out.status.success())
        });
    if found.is_none() {
        eprintln!(
            "needs a Chromium ({what}): none of chromium, chromium-browser, google-chrome runs"
        );
    }
    found
}

/// `python3 tests/browser/SCRIPT ARGS...` (headless Chromium through
/// Selenium): what it saw, after checking that the page got ready and its
/// console had no error.
pub fn in_browser(script: &str, args: &[&str]) -> serde_json::Value {
    let out = Command::new("python3")
        .arg(root().join("tests/browser").join(script))
        .args(args)
        .output()
        .unwrap();
    assert_ran(&out);
    let seen: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(seen["ready"], "yes", "{seen}");
    assert_eq!(
        seen["errors"],
        serde_json::json!([]),
        "console errors: {seen}"
    );
    seen
}

pub fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("memlens-test")
        .tempdir()
        .unwrap()
}

pub fn run_native(args: &[&str]) -> Output {
    run_native_with(&[], args)
}

/// Runs the program with extra environment variables.
pub fn run_native_with(env: &[(&str, &str)], args: &[&str]) -> Output {
    output_within(
        Command::new(args[0])
            .args(&args[1..])
            .envs(env.iter().copied()),
    )
}

/// `memlens record -o DIR -- args`; returns the memlens process output.
pub fn record(dir: &Path, extra: &[&str], args: &[&str]) -> Output {
    record_with(&[], dir, extra, args)
}

/// `record` with extra environment variables for memlens and the program.
pub fn record_with(env: &[(&str, &str)], dir: &Path, extra: &[&str], args: &[&str]) -> Output {
    output_within(record_command(dir, extra, args).envs(env.iter().copied()))
}

/// The command `memlens record -o DIR extra -- args`, with this build's runtime.
pub fn record_command(dir: &Path, extra: &[&str], args: &[&str]) -> Command {
    let mut cmd = Command::new(memlens());
    cmd.env("MEMLENS_RUNTIME", runtime())
        .arg("record")
        .arg("-o")
        .arg(dir)
        .args(extra)
        .arg("--")
        .args(args);
    cmd
}

/// Starts `cmd` in a process group of its own, with a watchdog that kills the
/// group if it still runs after two minutes (a hang); `Watchdog::finish` says
/// whether it did.
pub fn spawn_watched(
    cmd: &mut Command,
    stdout: std::process::Stdio,
) -> (std::process::Child, Watchdog) {
    use std::os::unix::process::CommandExt;
    use std::sync::atomic::{AtomicBool, Ordering};
    let child = cmd
        .process_group(0)
        .stdout(stdout)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("command runs");
    let pgid = child.id() as i32;
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let thread = std::thread::spawn({
        let done = done.clone();
        move || {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
            while !done.load(Ordering::Relaxed) {
                if std::time::Instant::now() > deadline {
                    // SAFETY: signal to the process group this test started.
                    unsafe { libc::kill(-pgid, libc::SIGKILL) };
                    return true;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            false
        }
    });
    (child, Watchdog { done, thread })
}

pub struct Watchdog {
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<bool>,
}

impl Watchdog {
    /// Stops watching (the command has ended); true if it was killed as hung.
    pub fn finish(self) -> bool {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// A command's output; a command still running after two minutes has hung:
/// its whole process group is killed and the test fails saying so.
pub fn output_within(cmd: &mut Command) -> Output {
    let (child, watchdog) = spawn_watched(cmd, std::process::Stdio::piped());
    let out = child.wait_with_output().expect("command runs");
    assert!(
        !watchdog.finish(),
        "{cmd:?} hung: killed after 120 s; stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `memlens record -o DIR extra -- args` with its standard error read as it
/// is written: `on_line` sees each line (and may tell the program to go on,
/// so that a test waits for what it needs instead of for a time). Returns the
/// exit status and the whole standard error; after two minutes the process
/// group is killed and the test fails.
pub fn record_streaming(
    dir: &Path,
    extra: &[&str],
    args: &[&str],
    mut on_line: impl FnMut(&str),
) -> (std::process::ExitStatus, String) {
    use std::io::BufRead;
    let (mut child, watchdog) = spawn_watched(
        &mut record_command(dir, extra, args),
        std::process::Stdio::null(),
    );
    let mut err = String::new();
    for line in std::io::BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        on_line(&line);
        err += &line;
        err.push('\n');
    }
    let status = child.wait().unwrap();
    assert!(
        !watchdog.finish(),
        "{args:?} hung: killed after 120 s; stderr: {err}"
    );
    (status, err)
}

/// Runs a program in transparent mode: the runtime preloaded, writing to `dir`.
pub fn run_transparent(dir: &Path, args: &[&str]) -> Output {
    output_within(
        Command::new(args[0])
            .args(&args[1..])
            .env("LD_PRELOAD", runtime())
            .env("MEMLENS_DIR", dir),
    )
}

/// `memlens plot KIND [EXTRA...] PROFILE -o IMAGE`.
pub fn plot_with(kind: &str, extra: &[&str], profile: &Path, image: &Path) -> Output {
    Command::new(memlens())
        .args(["plot", kind])
        .args(extra)
        .arg(profile)
        .arg("-o")
        .arg(image)
        .output()
        .unwrap()
}

/// `memlens plot KIND PROFILE -o IMAGE`.
pub fn plot(kind: &str, profile: &Path, image: &Path) -> Output {
    plot_with(kind, &[], profile, image)
}

/// `memlens sql DIR QUERY --format json`: the result rows.
pub fn sql_json(p: &Path, query: &str) -> Vec<serde_json::Value> {
    let out = Command::new(memlens())
        .args(["sql", "--format", "json"])
        .arg(p)
        .arg(query)
        .output()
        .unwrap();
    assert_ran(&out);
    serde_json::from_slice::<serde_json::Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// The element of a JSON array whose `name` is `name`.
pub fn named<'a>(list: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    list.as_array()
        .and_then(|a| a.iter().find(|o| o["name"] == name))
        .unwrap_or_else(|| panic!("no {name} in {list}"))
}

pub fn report_json(dir: &Path) -> serde_json::Value {
    report_json_with(dir, &[])
}

/// `memlens report --format json --top 50 EXTRA... DIR` (EXTRA's own
/// `--top` if it has one), checked against the published schema.
pub fn report_json_with(dir: &Path, extra: &[&str]) -> serde_json::Value {
    let top: &[&str] = if extra.contains(&"--top") {
        &[]
    } else {
        &["--top", "50"]
    };
    let out = Command::new(memlens())
        .args(["report", "--format", "json"])
        .args(top)
        .args(extra)
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "report failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_matches_schema(&out.stdout);
    serde_json::from_slice(&out.stdout).expect("report is JSON")
}

/// The text report of a profile (`memlens report DIR`).
pub fn report_text(dir: &Path) -> String {
    let out = Command::new(memlens())
        .arg("report")
        .arg(dir)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Asserts that at most 2% of a report's access samples hit no recorded
/// object (issue 45's bar for real codes at the defaults).
pub fn assert_accesses_named(report: &serde_json::Value) {
    let a = &report["access"];
    let unknown = a["unattributed"].as_f64().unwrap() / a["samples"].as_f64().unwrap();
    assert!(
        unknown <= 0.02,
        "{:.2}% of the samples on no object",
        100.0 * unknown
    );
}

/// Checks a JSON report against the published schema, docs/report.schema.json,
/// with Python's jsonschema (its objects admit no other fields, so a field the
/// schema does not describe fails too).
pub fn assert_matches_schema(report: &[u8]) {
    const VALIDATE: &str = "import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(json.load(sys.stdin)))
if error: sys.exit(f'at {error.json_path}: {error.message[:300]}')";
    let mut child = Command::new("python3")
        .args(["-c", VALIDATE])
        .arg(root().join("docs/report.schema.json"))
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 with jsonschema (.ci/run installs it)");
    child.stdin.take().unwrap().write_all(report).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the JSON report does not match docs/report.schema.json: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs natively and under memlens; asserts the program's stdout and exit status
/// are the same; returns the report.
pub fn same_behaviour(args: &[&str]) -> serde_json::Value {
    same_behaviour_with(&[], args)
}

/// `same_behaviour` with extra environment variables in both runs.
pub fn same_behaviour_with(env: &[(&str, &str)], args: &[&str]) -> serde_json::Value {
    let native = run_native_with(env, args);
    let dir = tempdir();
    let profile = dir.path().join("p");
    let traced = record_with(env, &profile, &[], args);
    assert_eq!(
        String::from_utf8_lossy(&native.stdout),
        String::from_utf8_lossy(&traced.stdout),
        "output changed under memlens; stderr: {}",
        String::from_utf8_lossy(&traced.stderr)
    );
    assert_eq!(
        shell_status(&native),
        shell_status(&traced),
        "exit status changed under memlens; stderr: {}",
        String::from_utf8_lossy(&traced.stderr)
    );
    report_json(&profile)
}

pub fn shell_status(o: &Output) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    o.status
        .code()
        .unwrap_or_else(|| 128 + o.status.signal().unwrap())
}

pub fn objects(report: &serde_json::Value, list: &str) -> Vec<serde_json::Value> {
    report[list].as_array().cloned().unwrap_or_default()
}

/// The `name` field of every element of a JSON array.
pub fn names(list: &serde_json::Value) -> Vec<String> {
    list.as_array()
        .map(|a| {
            a.iter()
                .map(|o| o["name"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Asserts that a command succeeded, showing its stderr when it did not.
pub fn assert_ran(out: &Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Builds `source` (relative to the repository) uninstrumented with
/// clang-16 and `flags` into `dir`/plain: the program as users build it.
pub fn plain_build(dir: &Path, source: &str, flags: &[&str]) -> PathBuf {
    let plain = dir.join("plain");
    let st = Command::new("clang-16")
        .args(flags)
        .arg(format!("-I{}", root().join("include").display()))
        .arg(root().join(source))
        .arg("-o")
        .arg(&plain)
        .status()
        .unwrap();
    assert!(st.success(), "clang-16 {source}");
    plain
}

/// `memlens wrappers DIR/bin`: the compiler wrappers' directory.
pub fn wrappers(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    let out = Command::new(memlens())
        .arg("wrappers")
        .arg(&bin)
        .output()
        .unwrap();
    assert_ran(&out);
    bin
}

/// Builds tests/programs/`source` with `memlens cc` and `flags` into `dir`.
pub fn memlens_cc(dir: &Path, source: &str, flags: &[&str]) -> PathBuf {
    memlens_cc_with(&[], dir, source, flags)
}

/// [`memlens_cc`] with `env` set (`MEMLENS_CLANG`: the compiler).
/// As [`memlens_cc`] with `env` set; the build must take memlens' pass
/// plugin and fast path (no note that it fell back to a callback per access).
pub fn memlens_cc_with(env: &[(&str, &str)], dir: &Path, source: &str, flags: &[&str]) -> PathBuf {
    memlens_compile("cc", env, dir, source, flags)
}

/// tests/programs/`source` built into `dir` by `memlens WRAPPER` (cc, gcc,
/// gfortran...) with `env` set, without a note from the wrapper.
pub fn memlens_compile(
    wrapper: &str,
    env: &[(&str, &str)],
    dir: &Path,
    source: &str,
    flags: &[&str],
) -> PathBuf {
    let app = dir.join(source.split('.').next().unwrap());
    let out = Command::new(memlens())
        .env("MEMLENS_RUNTIME", runtime())
        .envs(env.iter().copied())
        .arg(wrapper)
        .args(flags)
        .arg(format!("-I{}", root().join("include").display()))
        .arg(root().join("tests/programs").join(source))
        .arg("-o")
        .arg(&app)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "memlens cc {source} ({env:?}): {stderr}"
    );
    assert!(
        !stderr.contains("note:"),
        "memlens cc {source} ({env:?}): {stderr}"
    );
    app
}

/// Builds examples/stream.c with `memlens cc` (clang: .ci/run installs clang-16).
pub fn stream_example(dir: &std::path::Path, defines: &[&str]) -> String {
    let out = dir.join("stream");
    let st = Command::new(memlens())
        .env("MEMLENS_RUNTIME", runtime())
        .args(["cc", "-O2"])
        .arg(format!("-I{}", root().join("include").display()))
        .args(defines)
        .arg(root().join("examples/stream.c"))
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap();
    assert!(st.success(), "memlens cc failed");
    out.to_string_lossy().into_owned()
}

/// A copy of profile `from` (its tables and meta.json) at `to`, its
/// meta.json edited by `edit`: a rank of a synthetic job.
pub fn copy_profile(from: &Path, to: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    std::fs::create_dir_all(to).unwrap();
    for f in std::fs::read_dir(from).unwrap() {
        let f = f.unwrap().path();
        if f.extension().is_some_and(|e| e == "parquet" || e == "json") {
            std::fs::copy(&f, to.join(f.file_name().unwrap())).unwrap();
        }
    }
    let path = to.join("meta.json");
    let mut meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut meta);
    std::fs::write(&path, serde_json::to_vec(&meta).unwrap()).unwrap();
}

/// `memlens report PROFILE --html HTML` (a profile or a job): the page.
pub fn html_report(p: &Path, html: &Path) -> String {
    let out = Command::new(memlens())
        .arg("report")
        .arg(p)
        .arg("--html")
        .arg(html)
        .output()
        .unwrap();
    assert_ran(&out);
    std::fs::read_to_string(html).unwrap()
}

/// A process image's raw log in a profile recorded with `--keep-raw`.
pub fn raw_log(p: &Path) -> PathBuf {
    (std::fs::read_dir(p.join("raw")).unwrap().flatten())
        .map(|e| e.path())
        .find(|f| f.extension().is_some_and(|x| x == "mlraw"))
        .unwrap()
}

/// `memlens report --format json VIEW... DIR`.
pub fn report_view(p: &Path, view: &[&str]) -> Output {
    Command::new(memlens())
        .args(["report", "--format", "json"])
        .args(view)
        .arg(p)
        .output()
        .unwrap()
}

/// Builds tests/programs/`source` with `memlens cc` and `flags`, records it
/// with `record_flags`; returns the temporary directory (keep it alive) and
/// the profile.
pub fn recorded_program(
    source: &str,
    flags: &[&str],
    record_flags: &[&str],
) -> (tempfile::TempDir, PathBuf) {
    let dir = tempdir();
    let app = memlens_cc(dir.path(), source, flags);
    let p = dir.path().join("p");
    assert_ran(&record(&p, record_flags, &[&app.to_string_lossy()]));
    (dir, p)
}

/// Builds the stream example with `defines`, records it with `flags`; returns the
/// temporary directory (keep it alive) and the profile.
pub fn recorded_stream(
    defines: &[&str],
    flags: &[&str],
) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempdir();
    let app = stream_example(dir.path(), defines);
    let p = dir.path().join("p");
    let out = record(&p, flags, &[&app]);
    assert_ran(&out);
    (dir, p)
}

/// The most `samples x period` may differ from the exact count it estimates:
/// each sample's interval is the period plus a uniform jitter of +-period/8
/// (variance ((2j+1)^2 - 1) / 12), so over n samples the sum strays by 4
/// standard deviations at most (one chance in 15 000); each stream (thread and
/// access class) that starts or stops between two samples adds up to a period.
pub fn sampling_error_bound(samples: u64, period: u64, streams: u64) -> f64 {
    let j = (period / 8) as f64;
    let sd = (((2.0 * j + 1.0).powi(2) - 1.0) / 12.0 * samples as f64).sqrt();
    4.0 * sd + (streams * period) as f64
}

/// NMO eq. 1, `1 - |counted - samples x period| / counted`, within the
/// sampler's bound for `threads` threads, each with its 10 access classes.
pub fn assert_accuracy(counted: u64, samples: u64, period: u64, threads: u64) -> f64 {
    let error = counted.abs_diff(samples * period) as f64;
    let bound = sampling_error_bound(samples, period, threads * 10);
    let accuracy = 1.0 - error / counted as f64;
    eprintln!(
        "accuracy {accuracy:.5} ({samples} samples at period {period} for {counted} accesses; \
         allowed >= {:.5})",
        1.0 - bound / counted as f64
    );
    assert!(
        error <= bound,
        "accuracy {accuracy}: {samples} samples at period {period} for {counted} accesses \
         (allowed: {})",
        1.0 - bound / counted as f64
    );
    accuracy
}

/// A line as documentation shows it: numbers (decimal, hex; signed) as `N` and runs
/// of spaces or dashes as one, so a transcript holds across runs whose
/// figures and column widths differ.
fn shape(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.trim_end().chars().peekable();
    while let Some(c) = chars.next() {
        // A number's sign is the number's (a change of +0.2% or -0.1%).
        let signed = matches!(c, '+' | '-') && chars.peek().is_some_and(char::is_ascii_digit);
        if signed && matches!(out.chars().last(), None | Some(' ' | '(')) {
            continue;
        }
        if c.is_ascii_digit() {
            if c == '0' && chars.peek() == Some(&'x') {
                chars.next();
            }
            while chars
                .peek()
                .is_some_and(|&d| d.is_ascii_hexdigit() || d == '.')
            {
                chars.next();
            }
            out.push('N');
        } else if c == ' ' || c == '-' {
            while chars.peek() == Some(&c) {
                chars.next();
            }
            out.push(c);
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether an output line is what a documented line shows, `...` in it
/// standing for any text.
fn shows(documented: &str, actual: &str) -> bool {
    let (documented, actual) = (shape(documented), shape(actual));
    let mut parts = documented.split("...");
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = actual.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    for (i, part) in parts.iter().enumerate() {
        if i == parts.len() - 1 {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

/// Asserts `actual` is the output `documented` shows: its lines in order,
/// a line `...` standing for any lines (none included), `...` within a line
/// for any text, numbers for any numbers.
pub fn assert_documented_output(documented: &[&str], actual: &str) {
    let actual: Vec<&str> = actual.lines().collect();
    // Each run of documented lines between `...` lines, placed where it
    // first fits after the one before.
    let chunks: Vec<&[&str]> = documented.split(|l| l.trim() == "...").collect();
    let mut from = 0;
    for (i, chunk) in chunks.iter().enumerate() {
        if chunk.is_empty() {
            continue;
        }
        let fits = |at: usize| {
            at + chunk.len() <= actual.len()
                && chunk.iter().zip(&actual[at..]).all(|(d, a)| shows(d, a))
        };
        let at = match (i, i == chunks.len() - 1) {
            // Unless elided, the first lines start the output and the last end it.
            (0, _) => Some(0).filter(|&at| fits(at)),
            (_, true) => {
                Some(actual.len().saturating_sub(chunk.len())).filter(|&at| at >= from && fits(at))
            }
            _ => (from..actual.len()).find(|&at| fits(at)),
        };
        let Some(at) = at else {
            panic!(
                "the documented lines\n{}\nare not in the output (from line {from}):\n{}",
                chunk.join("\n"),
                actual[from.min(actual.len())..].join("\n")
            );
        };
        from = at + chunk.len();
    }
    if documented.last().is_some_and(|l| l.trim() != "...") {
        assert_eq!(
            from,
            actual.len(),
            "the output goes on past what is documented:\n{}",
            actual[from.min(actual.len())..].join("\n")
        );
    }
}

/// The lines of the fenced block of `doc` (a path from the checkout's root)
/// whose opening fence is followed by a line starting with `first`.
pub fn documented_block(doc: &str, first: &str) -> Vec<String> {
    let text = std::fs::read_to_string(root().join(doc)).unwrap();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.starts_with("```") {
            let block: Vec<String> = (lines.by_ref())
                .take_while(|l| !l.starts_with("```"))
                .map(str::to_string)
                .collect();
            if block.first().is_some_and(|l| l.starts_with(first)) {
                return block;
            }
        }
    }
    panic!("{doc} has no block starting with {first:?}")
}

/// Runs a shell command line in `dir` as a user would type it, with
/// memlens on the PATH (and its runtime found).
pub fn run_shell(line: &str, dir: &Path) -> Output {
    let bin = memlens().parent().unwrap().to_path_buf();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    output_within(
        Command::new("bash")
            .args(["-c", line])
            .current_dir(dir)
            .env("PATH", &path)
            .env("MEMLENS_RUNTIME", runtime()),
    )
}

/// Waits (up to 20 s) until `ready` holds: tests wait for the event they
/// need, not for a time a loaded machine may exceed.
pub fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let started = std::time::Instant::now();
    while !ready() {
        assert!(started.elapsed().as_secs() < 20, "waited 20 s for {what}");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Runs the commands of a documented terminal session (`$ ` lines, a
/// command going on while a quote is open) in `dir` with memlens on the
/// PATH, and asserts each prints what the session shows.
pub fn assert_documented_session(block: &[String], dir: &Path) {
    let mut commands: Vec<(String, Vec<&str>)> = Vec::new();
    let mut open_quote = false;
    for line in block {
        match commands.last_mut() {
            Some((command, _)) if open_quote => {
                command.push('\n');
                command.push_str(line);
            }
            _ if line.starts_with("$ ") => commands.push((line[2..].to_string(), Vec::new())),
            Some((_, shown)) => shown.push(line),
            None => panic!("a documented session starts with a command: {line}"),
        }
        if line.starts_with("$ ") || open_quote {
            open_quote ^= line.matches('"').count() % 2 == 1;
        }
    }
    assert!(!commands.is_empty());
    for (command, shown) in commands {
        let out = run_shell(&format!("{command} 2>&1"), dir);
        assert_ran(&out);
        assert_documented_output(&shown, &String::from_utf8_lossy(&out.stdout));
    }
}

/// Asserts the block of `doc` starting with `first` is an excerpt of
/// `output`: from its line starting with `first` on (what follows the
/// block is not claimed).
pub fn assert_documented_excerpt(doc: &str, first: &str, output: &str) {
    let mut block = documented_block(doc, first);
    block.push("...".into());
    let from = output
        .lines()
        .position(|l| l.starts_with(first))
        .unwrap_or_else(|| panic!("no line {first:?} in\n{output}"));
    let rest: Vec<&str> = output.lines().skip(from).collect();
    let block: Vec<&str> = block.iter().map(String::as_str).collect();
    assert_documented_output(&block, &rest.join("\n"));
}

/// dhat's summary of a run of `program`: for a label ("Total:", "At
/// t-gmax:", "At t-end:"), its bytes and blocks.
pub fn dhat_figures(program: &str) -> impl Fn(&str) -> (u64, u64) {
    let dhat = Command::new("valgrind")
        .args(["--tool=dhat", "--dhat-out-file=/dev/null"])
        .arg(program)
        .output()
        .expect("valgrind is installed (.ci/run installs it)");
    let dhat = String::from_utf8_lossy(&dhat.stderr).into_owned();
    move |label: &str| {
        let line = (dhat.lines().find(|l| l.contains(label)))
            .unwrap_or_else(|| panic!("no {label} in {dhat}"));
        let n: Vec<u64> = line
            .split_whitespace()
            .filter_map(|w| w.replace(',', "").parse().ok())
            .collect();
        (n[n.len() - 2], n[n.len() - 1])
    }
}

/// calls_and_jumps.cpp recorded (`r`, its report; `app`, its executable):
/// its loads and stores counted exactly, whatever compiler (`built_by`)
/// built it, and its samples at its own line in its array, whose bytes
/// they estimate within 5%.
pub fn assert_calls_and_jumps_counted(r: &serde_json::Value, app: &Path, built_by: &str) {
    let (rounds, n) = (2000u64, 1000u64);
    let thrown = (0..rounds).filter(|r| r % 3 == 0).count() as u64;
    let jumped = (0..rounds).filter(|r| r % 5 == 0).count() as u64;
    // Per round: the sink's load and store, inner's n loads and stores, a
    // store after the try or in the catch; per jump a load and a store;
    // the final printf's load.
    let loads = rounds + rounds * n + jumped + 1;
    let stores8 = rounds + rounds * n + rounds + jumped;
    let thread = &r["threads"][0];
    let counts = ["loads", "stores", "bytes_read", "bytes_written"].map(|k| thread[k].as_u64());
    let truth = [loads, stores8 + thrown, 8 * loads, 8 * stores8 + 4 * thrown].map(Some);
    assert_eq!(counts, truth, "{built_by}: {thread}");
    // Every sample's address is the access's own: they fall in `data`
    // (all but 1 in 1,600 accesses are its).
    let a = &r["access"];
    let samples = a["samples"].as_f64().unwrap();
    let data = named(
        &a["objects"],
        &format!("data [{}]", app.file_name().unwrap().to_string_lossy()),
    );
    assert!(
        samples > 100.0 && data["samples"].as_f64().unwrap() >= 0.99 * samples,
        "{built_by}: {data}"
    );
    let line = format!(
        "calls_and_jumps.cpp:{}",
        source_line("calls_and_jumps.cpp", "// n loads, n stores")
    );
    let at = data["lines"][0]["location"].as_str().unwrap();
    assert!(at.contains(&line), "{built_by}: {at}, not {line}");
    let near = |est: &serde_json::Value, truth: u64| {
        (est.as_f64().unwrap() / truth as f64 - 1.0).abs() < 0.05
    };
    assert!(
        near(
            &data["est_bytes_read"],
            8 * (rounds * n + rounds + jumped + 1)
        ),
        "{built_by}: {data}"
    );
    assert!(
        near(&data["est_bytes_written"], 8 * rounds * n),
        "{built_by}: {data}"
    );
}

/// stream_timed.c recorded with 2 rounds: each kernel's region has its
/// exact bytes, whatever compiler (`built_by`) built it (the copy loop
/// perhaps made a memcpy, which the runtime counts by wrapping it).
pub fn assert_stream_regions_exact(r: &serde_json::Value, built_by: &str) {
    let array = 2 * 4_000_000 * 8u64;
    for (name, arrays_read) in [("copy", 1), ("scale", 1), ("add", 2), ("triad", 2)] {
        let region = named(&r["access"]["regions"], name);
        let bytes = ["bytes_read", "bytes_written"].map(|k| region[k].as_u64());
        assert_eq!(
            bytes,
            [Some(arrays_read * array), Some(array)],
            "{built_by}: {region}"
        );
    }
}

/// Runs memlens with `args`, which must fail with `needle` in its error.
pub fn fails_with(args: &[&str], needle: &str) {
    let out = Command::new(memlens())
        .env("MEMLENS_RUNTIME", runtime())
        .args(args)
        .output()
        .unwrap();
    assert!(!out.status.success(), "{args:?} should fail");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(needle),
        "{args:?}: expected '{needle}' in: {err}"
    );
}

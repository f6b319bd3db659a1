//! `memlens record --pid`: a process that already runs, recorded from outside
//! from the attach on, and left running as it was.

mod common;
use common::*;
use std::io::{BufRead, BufReader, Lines, Write};
use std::path::Path;
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, Stdio};

/// tests/programs/attach_target.c built with gcc (threads, debug lines).
fn target(dir: &Path) -> String {
    let exe = dir.join("attach_target");
    let st = Command::new("gcc")
        .args(["-O1", "-g", "-pthread"])
        .arg(root().join("tests/programs/attach_target.c"))
        .arg("-o")
        .arg(&exe)
        .status()
        .unwrap();
    assert!(st.success());
    exe.to_string_lossy().into_owned()
}

/// The target, started and waiting for its order (it printed "ready").
struct Target {
    child: Child,
    watchdog: Watchdog,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl Target {
    fn start(exe: &str) -> Target {
        let (mut child, watchdog) =
            spawn_watched(Command::new(exe).stdin(Stdio::piped()), Stdio::piped());
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        assert_eq!(stdout.next().unwrap().unwrap(), "ready");
        Target {
            child,
            watchdog,
            stdin,
            stdout,
        }
    }

    fn pid(&self) -> String {
        self.child.id().to_string()
    }

    /// Its remaining output and exit status once it ends.
    fn finish(mut self) -> (Vec<String>, Option<i32>) {
        drop(self.stdin);
        let rest: Vec<String> = self.stdout.map(Result::unwrap).collect();
        let status = self.child.wait().unwrap();
        assert!(!self.watchdog.finish(), "the target hung");
        (rest, status.code())
    }
}

/// `memlens record --pid PID -o OUT EXTRA...`, once its standard error says
/// that it records.
fn attach(
    pid: &str,
    out: &Path,
    extra: &[&str],
) -> (Child, Watchdog, Lines<BufReader<ChildStderr>>) {
    let mut cmd = Command::new(memlens());
    cmd.args(["record", "--pid", pid, "-o"])
        .arg(out)
        .args(extra);
    let (mut child, watchdog) = spawn_watched(&mut cmd, Stdio::null());
    let mut err = BufReader::new(child.stderr.take().unwrap()).lines();
    for line in err.by_ref() {
        if line.unwrap().contains("Ctrl-C stops recording") {
            return (child, watchdog, err);
        }
    }
    panic!("memlens ended before it recorded: {:?}", child.wait());
}

/// memlens' exit status and the rest of its standard error.
fn finished(
    mut child: Child,
    watchdog: Watchdog,
    err: Lines<BufReader<ChildStderr>>,
) -> (Option<i32>, String) {
    let err: Vec<String> = err.map(Result::unwrap).collect();
    let status = child.wait().unwrap();
    assert!(!watchdog.finish(), "memlens hung: {err:?}");
    (status.code(), err.join("\n"))
}

fn access_object<'a>(r: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    named(&r["access"]["objects"], name)
}

#[test]
fn a_running_process_is_recorded_from_outside_and_ends_as_it_would() {
    let dir = tempdir();
    let exe = target(dir.path());
    let native = {
        let t = Target::start(&exe);
        writeln!(&t.stdin, "go").unwrap();
        t.finish()
    };
    assert_eq!(native, (vec!["done 2".to_string()], Some(3)));

    let t = Target::start(&exe);
    let profile = dir.path().join("attached");
    let (recorder, watchdog, err) = attach(&t.pid(), &profile, &[]);
    writeln!(&t.stdin, "go").unwrap();
    // The same output and status as without memlens.
    assert_eq!(t.finish(), native);
    let (status, err) = finished(recorder, watchdog, err);
    assert_eq!(status, Some(0), "{err}");
    assert!(err.contains("it ended"), "{err}");

    let r = report_json(&profile);
    let p = &r["summary"]["processes"][0];
    assert_eq!(
        (p["attached"].as_bool(), p["exit_code"].is_null()),
        (Some(true), true)
    );
    assert!(p["end_ns"].as_u64().is_some(), "{p}");
    assert_eq!(r["peak"]["heap_measured"], false);
    // The 64 MiB mapping made after the attach (anonymous mappings are one
    // object), and the static table of the program.
    let anonymous = named(&r["objects_by_peak"], "anonymous");
    assert!(
        anonymous["peak_bytes"].as_f64().unwrap() >= (64u64 << 20) as f64,
        "{anonymous}"
    );
    let table = named(&r["objects_by_peak"], "table [attach_target]");
    assert_eq!(table["peak_bytes"].as_f64(), Some((1u64 << 20) as f64));
    // Every first touch of a page is a page-fault sample, from the thread
    // started after the attach: 16384 pages of the mapping at the touching
    // line, 256 of the table.
    let touch = format!(
        "toucher (attach_target.c:{})",
        1 + std::fs::read_to_string(root().join("tests/programs/attach_target.c"))
            .unwrap()
            .lines()
            .position(|l| l.contains("/* TOUCH */"))
            .unwrap()
    );
    let at_touch: u64 = (access_object(&r, "anonymous")["lines"]
        .as_array()
        .unwrap()
        .iter())
    .filter(|l| l["location"] == touch.as_str())
    .map(|l| l["samples"].as_u64().unwrap())
    .sum();
    assert_eq!(at_touch, 16384, "{:#}", access_object(&r, "anonymous"));
    assert_eq!(access_object(&r, "table [attach_target]")["samples"], 256);
    // The report says what attach could not see.
    let text = report_text(&profile);
    for said in [
        "attached at",
        "ended at",
        "memlens attached to a running process",
    ] {
        assert!(text.contains(said), "{said}: {text}");
    }
}

#[test]
fn recording_stops_when_asked_and_the_process_runs_on() {
    let dir = tempdir();
    let exe = target(dir.path());
    for stop in ["--duration", "SIGINT"] {
        let t = Target::start(&exe);
        writeln!(&t.stdin, "wait").unwrap();
        let profile = dir.path().join(stop);
        let extra: &[&str] = if stop == "--duration" {
            &["--duration", "0.5"]
        } else {
            &[]
        };
        let (recorder, watchdog, err) = attach(&t.pid(), &profile, extra);
        if stop == "SIGINT" {
            // SAFETY: a signal to the memlens this test started.
            unsafe { libc::kill(recorder.id() as i32, libc::SIGINT) };
        }
        let (status, err) = finished(recorder, watchdog, err);
        assert_eq!(status, Some(0), "{stop}: {err}");
        assert!(err.contains("it runs on"), "{stop}: {err}");
        // Still running, and it ends as it would have.
        // SAFETY: signal 0 only checks that the process exists.
        assert_eq!(unsafe { libc::kill(t.child.id() as i32, 0) }, 0, "{stop}");
        assert_eq!(t.finish(), (vec![], Some(0)), "{stop}");
        let r = report_json(&profile);
        assert!(r["summary"]["processes"][0]["end_ns"].is_null(), "{stop}");
        assert!(r["peak"]["rss_bytes"].as_u64().unwrap() > 0, "{stop}");
    }
}

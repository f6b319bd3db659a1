//! What memlens must never do to the user: mix two runs in one directory, leave
//! a run behind when asked to stop, show its profiles to other users, or let a
//! caller steer a setuid program's writes.

mod common;
use common::*;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `memlens record -o DIR -- args` started in the background, its output piped.
fn spawn_record(dir: &std::path::Path, args: &[&str]) -> std::process::Child {
    Command::new(memlens())
        .env("MEMLENS_RUNTIME", runtime())
        .args(["record", "-o"])
        .arg(dir)
        .arg("--")
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// The pids of the processes whose runtime has started a log in profile
/// directory `dir` (its raw/PID.0.mlraw files).
fn logged_pids(dir: &std::path::Path) -> Vec<String> {
    let entries = std::fs::read_dir(dir.join("raw")).into_iter().flatten();
    (entries.flatten())
        .filter(|e| header_written(&e.path()))
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            name.strip_suffix(".0.mlraw").map(str::to_string)
        })
        .collect()
}

/// Whether a raw log's header is complete (its magic, written last, is
/// there): a process killed before is no process of the profile.
fn header_written(log: &std::path::Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 8];
    let read = std::fs::File::open(log).and_then(|mut f| f.read_exact(&mut magic));
    read.is_ok() && u64::from_le_bytes(magic) == memlens_rawlog::MAGIC
}

/// Asserts that memlens refused with one error line saying `what`.
fn refused_with(out: &std::process::Output, what: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(err.contains(what), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn a_directory_holds_one_run() {
    let dir = tempdir();
    let p = dir.path().join("p");
    assert_ran(&record(&p, &[], &[&program("torture"), "hold"]));

    // A second record into it keeps the first aside, whole, in p.old (as
    // perf keeps perf.data.old), and says so.
    let again = record(&p, &[], &["true"]);
    assert_ran(&again);
    assert!(
        stderr(&again).contains("p.old (--force replaces it instead)"),
        "{}",
        stderr(&again)
    );
    assert_eq!(
        report_json(&p)["summary"]["command"],
        serde_json::json!(["true"])
    );
    let old = dir.path().join("p.old");
    assert_eq!(report_json(&old)["summary"]["command"][1], "hold");
    // A third replaces p.old with the second; --force keeps nothing aside.
    assert_ran(&record(&p, &[], &["echo", "third"]));
    assert_eq!(
        report_json(&old)["summary"]["command"],
        serde_json::json!(["true"])
    );
    assert_ran(&record(&p, &["--force"], &["true"]));
    assert_eq!(
        report_json(&old)["summary"]["command"],
        serde_json::json!(["true"])
    );

    // The raw logs of a record killed before it finalized are not merged into
    // the next run: kept aside, where they still finalize.
    let killed = dir.path().join("killed");
    let mut rec = spawn_record(&killed, &[&program("torture"), "hold"]);
    // Killed once the program's log is there (it holds its blocks 200 ms).
    let logs = || std::fs::read_dir(killed.join("raw")).map_or(0, |d| d.count());
    wait_until("the program's log", || {
        logs() >= 2 && !logged_pids(&killed).is_empty()
    });
    let pids = logged_pids(&killed);
    // SAFETY: a signal to the memlens this test started.
    unsafe { libc::kill(rec.id() as i32, libc::SIGKILL) };
    rec.wait().unwrap();
    wait_until("the orphaned program's end", || {
        (pids.iter()).all(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
    });
    assert_ran(&record(&killed, &[], &["true"]));
    let r = report_json(&killed);
    assert_eq!(r["summary"]["command"], serde_json::json!(["true"]));
    let pids = r["summary"]["processes"].as_array().unwrap().len();
    assert_eq!(pids, 1, "only the new run's process");
    let aside = dir.path().join("killed.old");
    assert!(std::fs::read_dir(aside.join("raw")).unwrap().count() >= 2);
    let r = report_json(&aside);
    assert!(
        !r["summary"]["processes"].as_array().unwrap().is_empty(),
        "{r:#}"
    );
}

#[test]
fn two_records_into_one_directory_do_not_mix() {
    let dir = tempdir();
    let p = dir.path().join("p");
    // The first runs until the test says so, the second starts once the
    // first's program runs.
    let go_on = dir.path().join("go-on");
    let wait = format!("while [ ! -e {} ]; do sleep 0.01; done", go_on.display());
    let first = spawn_record(&p, &["sh", "-c", &wait]);
    wait_until("the first run's program", || !logged_pids(&p).is_empty());
    let second = record(&p, &[], &["true"]);
    std::fs::write(&go_on, "").unwrap();
    refused_with(&second, "another memlens is writing this profile");
    let first = first.wait_with_output().unwrap();
    assert!(first.status.success(), "{}", stderr(&first));
    assert_eq!(
        report_json(&p)["summary"]["command"],
        serde_json::json!(["sh", "-c", wait])
    );
}

#[test]
fn termination_reaches_the_whole_run() {
    // The shell forks sleep: SIGTERM to memlens must end the grandchild too,
    // not leave memlens waiting for it for 30 s.
    let dir = tempdir();
    let p = dir.path().join("p");
    let started = std::time::Instant::now();
    let rec = spawn_record(&p, &["sh", "-c", "sleep 30; echo done"]);
    // Signalled once both the shell and its sleep run.
    wait_until("the shell and its sleep", || logged_pids(&p).len() >= 2);
    // SAFETY: a signal to the memlens this test started.
    unsafe { libc::kill(rec.id() as i32, libc::SIGTERM) };
    let out = rec.wait_with_output().unwrap();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "memlens waited for the run after SIGTERM"
    );
    assert_eq!(shell_status(&out), 128 + 15, "{}", stderr(&out));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("done"));
    // The shell died of SIGTERM; sleep too, though its status is known only
    // when memlens, not the dying shell, reaped it.
    let r = report_json(&p);
    let procs = r["summary"]["processes"].as_array().unwrap();
    assert!(procs.len() >= 2, "{procs:?}");
    assert_eq!(procs[0]["signal"], 15, "{procs:?}");
    assert!(
        procs
            .iter()
            .all(|p| p["exit_code"].is_null() && p["signal"] != 0),
        "{procs:?}"
    );
}

#[test]
fn profiles_are_private_and_foreign_directories_refused() {
    let dir = tempdir();
    let p = dir.path().join("p");
    assert_ran(&record(&p, &[], &[&program("torture"), "hold"]));
    let mode = |f: &std::path::Path| std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&p), 0o700);
    for entry in std::fs::read_dir(&p).unwrap().flatten() {
        let path = entry.path();
        let want = if path.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode(&path), want, "{}", path.display());
    }
    // Transparent mode: the runtime makes the directory and logs private too.
    let t = dir.path().join("t");
    assert_ran(&run_transparent(&t, &[&program("torture"), "hold"]));
    assert_eq!(mode(&t), 0o700);
    for log in std::fs::read_dir(t.join("raw")).unwrap().flatten() {
        assert_eq!(mode(&log.path()), 0o600, "{}", log.path().display());
    }

    // A directory that belongs to someone else is not written into.
    if !root_for("giving a directory to another user") {
        return;
    }
    let foreign = dir.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).unwrap();
    let out = record(&foreign, &[], &["true"]);
    refused_with(&out, "belongs to another user (uid 65534)");
    assert_eq!(std::fs::read_dir(&foreign).unwrap().count(), 0);
    // Nor by the runtime in transparent mode.
    assert_ran(&run_transparent(&foreign, &[&program("torture"), "hold"]));
    assert_eq!(std::fs::read_dir(&foreign).unwrap().count(), 0);
}

#[test]
fn setuid_programs_ignore_the_callers_memlens_settings() {
    // A setuid-root program linked with the runtime (as `memlens cc` links it)
    // run by nobody with MEMLENS_DIR set: the runtime must not write as root.
    if !root_for("a setuid-root program") {
        return;
    }
    let dir = tempdir();
    let d = dir.path();
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    let lib = d.join("libmemlens_runtime.so");
    std::fs::copy(runtime(), &lib).unwrap();
    let src = d.join("app.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\n#include <stdlib.h>\n\
         int main(void) { char *p = malloc(1 << 20); p[0] = 1; printf(\"ok\\n\"); free(p); return 0; }\n",
    )
    .unwrap();
    let app = d.join("app");
    let st = Command::new("gcc")
        .arg(&src)
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{}", d.display()))
        .arg("-o")
        .arg(&app)
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::set_permissions(&app, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let target = d.join("written-as-root");
    // Runs as nobody; the program's output is always the same.
    let run = |app: &std::path::Path| {
        let out = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(app)
            .env("MEMLENS_DIR", &target)
            .output()
            .unwrap();
        assert_eq!(out.stdout, b"ok\n", "{}", stderr(&out));
    };
    run(&app);
    assert!(
        !target.exists(),
        "a setuid program wrote the caller's MEMLENS_DIR"
    );
    // The same program without the setuid bit does record (the check is real).
    std::fs::set_permissions(&app, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
    run(&app);
    assert!(target.join("raw").is_dir());
}

#[test]
fn a_full_disk_loses_only_what_did_not_fit() {
    // A 2 MiB file system (tmpfs, in a mount namespace of the test's own)
    // fills while every block of 64 threads is recorded: the program runs as
    // usual, record says what could not be written and how to finish, and
    // once there is room the raw logs become a profile that counts the loss.
    if !root_for("mounting a small file system") {
        return;
    }
    let dir = tempdir();
    let d = dir.path();
    let small = d.join("small");
    std::fs::create_dir(&small).unwrap();
    let script = format!(
        "mount -t tmpfs -o size=2m none {small} || exit 99
         MEMLENS_RUNTIME={rt} {memlens} record -o {small}/p --sample-rate 1 -- {torture} threads >{d}/out 2>{d}/err
         echo $? >{d}/rc
         mount -o remount,size=256m {small}
         {memlens} finalize {small}/p 2>{d}/fin || exit 98
         {memlens} report --format json {small}/p >{d}/report.json",
        small = small.display(),
        rt = runtime().display(),
        memlens = memlens().display(),
        torture = program("torture"),
        d = d.display(),
    );
    let out = output_within(
        Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg(&script),
    );
    assert_ran(&out);
    let read = |f: &str| std::fs::read_to_string(d.join(f)).unwrap();
    assert_eq!(
        read("out"),
        String::from_utf8_lossy(&run_native(&[&program("torture"), "threads"]).stdout)
    );
    assert_eq!(read("rc").trim(), "125", "memlens' own failure");
    let err = read("err");
    let last = err.lines().last().unwrap();
    assert!(
        last.contains("cannot be written") && last.contains("memlens finalize"),
        "{err}"
    );
    let r: serde_json::Value = serde_json::from_str(&read("report.json")).unwrap();
    assert_eq!(r["losses"]["disk_full"], 1, "{:#}", r["losses"]);
    assert!(r["losses"]["dropped_events"].as_u64().unwrap() > 0);
    // What was written before the disk filled is there.
    let recorded: f64 = objects(&r, "objects_by_allocated")
        .iter()
        .map(|o| o["allocations"].as_f64().unwrap())
        .sum();
    assert!(recorded > 1000.0, "{recorded} allocations recorded");
}

#[test]
fn memlens_writes_through_no_link_and_moves_only_its_own_files() {
    let dir = tempdir();
    // -o naming a link: refused, nothing written where it points (before:
    // the profile went into the link's target).
    let target = dir.path().join("target");
    std::fs::create_dir(&target).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    refused_with(&record(&link, &[], &["true"]), "is a symbolic link");
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);

    // A directory with the user's own raw/ and files, and no run: nothing
    // moved aside (before: raw/ went to a hidden .old/raw/), nothing removed.
    let own = dir.path().join("own");
    std::fs::create_dir_all(own.join("raw")).unwrap();
    let theirs = [
        own.join("raw/mine.txt"),
        own.join("raw/looks-like.mlraw"),
        own.join("notes.txt"),
    ];
    for f in &theirs {
        std::fs::write(f, "the user's own\n").unwrap();
    }
    for extra in [&[][..], &[][..], &["--force"][..]] {
        let out = record(&own, extra, &[&program("torture"), "hold"]);
        assert_ran(&out);
        for f in &theirs {
            assert_eq!(
                std::fs::read_to_string(f).unwrap(),
                "the user's own\n",
                "{extra:?} {}",
                f.display()
            );
        }
        report_json(&own);
    }
    // The second run moved the first run's files aside, and only those;
    // --force removed the second's, and only those.
    let old = dir.path().join("own.old");
    assert!(old.join("meta.json").exists());
    for f in ["notes.txt", "raw/mine.txt", "raw/looks-like.mlraw"] {
        assert!(!old.join(f).exists(), "{f} moved");
    }
}

#[test]
fn what_is_made_from_a_profile_is_as_private_as_the_profile() {
    // Before: reports, plots and exports were written 0644 (the umask's).
    let dir = tempdir();
    let p = dir.path().join("p");
    assert_ran(&record(&p, &[], &[&program("torture"), "hold"]));
    let out = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let ps = p.to_string_lossy().into_owned();
    for args in [
        vec!["report", &ps, "--html", &out("r.html")],
        vec!["plot", "capacity", &ps, "-o", &out("c.png")],
        vec!["plot", "capacity", &ps, "-o", &out("c.svg")],
        vec!["plot", "flame", &ps, "-o", &out("f.svg")],
        vec!["export", "--format", "csv", "-o", &out("tables"), &ps],
        vec!["export", "--format", "pprof", "-o", &out("a.pb.gz"), &ps],
    ] {
        // SAFETY: umask only sets this process's mask (inherited by memlens).
        let old = unsafe { libc::umask(0o022) };
        assert_ran(&Command::new(memlens()).args(&args).output().unwrap());
        unsafe { libc::umask(old) };
    }
    let mode = |f: &str| std::fs::metadata(out(f)).unwrap().permissions().mode() & 0o777;
    for f in ["r.html", "c.png", "c.svg", "f.svg", "a.pb.gz"] {
        assert_eq!(mode(f), 0o600, "{f}");
    }
    assert_eq!(mode("tables"), 0o700);
    for table in std::fs::read_dir(out("tables")).unwrap().flatten() {
        assert_eq!(
            table.metadata().unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
}

#[test]
fn a_killed_record_leaves_a_profile_that_says_what_it_lacks() {
    // memlens killed 0.3 s into a 1.5 s run: the program goes on and its log
    // is whole, the collector's samples stop. Before: the command was empty
    // and LOSSES said "none" over a 1.2 s hole in the timeline.
    let dir = tempdir();
    let p = dir.path().join("p");
    let mut rec = spawn_record(&p, &["sleep", "1.5"]);
    wait_until("the program's log", || !logged_pids(&p).is_empty());
    let pid = logged_pids(&p).remove(0);
    std::thread::sleep(std::time::Duration::from_millis(300));
    // SAFETY: a signal to the memlens this test started.
    unsafe { libc::kill(rec.id() as i32, libc::SIGKILL) };
    rec.wait().unwrap();
    wait_until("the program's end", || {
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
    });
    let r = report_json(&p);
    assert_eq!(r["summary"]["command"], serde_json::json!(["sleep", "1.5"]));
    let unsampled = r["losses"]["unsampled_ms"].as_u64().unwrap();
    assert!((500..1500).contains(&unsampled), "{unsampled} ms unsampled");
}

//! The list that breaks preloaded profilers, run with real programs: none may
//! crash, hang, or change the program's output or exit status, and the profile
//! must say what happened.

mod common;
use common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

fn processes(r: &serde_json::Value) -> Vec<serde_json::Value> {
    r["summary"]["processes"].as_array().cloned().unwrap()
}

#[test]
fn threads_cross_thread_free_and_tls_destructors() {
    let r = same_behaviour(&[&program("torture"), "threads"]);
    // 64 blocks of 200000 bytes were allocated by workers and freed by main.
    let site = objects(&r, "objects_by_allocated")
        .into_iter()
        .find(|o| o["site"]["function"] == "worker" && o["provenance"] == "measured")
        .expect("worker's large blocks are an object");
    assert_eq!(site["allocations"].as_f64().unwrap(), 64.0);
    assert_eq!(site["leaked_bytes"].as_f64().unwrap(), 0.0);
    // 64 worker threads and the main thread, each with its stack.
    assert_eq!(r["thread_stacks"]["threads"], 65);
}

#[test]
fn fork_without_exec_and_fork_exec_get_their_own_parts() {
    let r = same_behaviour(&[&program("torture"), "forks"]);
    let procs = processes(&r);
    let mut pids: Vec<i64> = procs.iter().map(|p| p["pid"].as_i64().unwrap()).collect();
    pids.dedup();
    assert_eq!(
        pids.len(),
        3,
        "parent, forked child, exec'd child: {procs:?}"
    );
    assert_eq!(procs.len(), 4, "the exec'd child has two images: {procs:?}");
    let codes: Vec<i64> = procs
        .iter()
        .filter_map(|p| p["exit_code"].as_i64())
        .collect();
    assert!(
        codes.contains(&3) && codes.contains(&7) && codes.contains(&0),
        "{codes:?}"
    );
    // The forked child's own 500000-byte block is attributed to the child.
    let parent = procs.iter().find(|p| p["exit_code"] == 0).unwrap()["pid"].clone();
    let child_obj = objects(&r, "objects_by_allocated")
        .into_iter()
        .find(|o| o["allocated_bytes"].as_f64() == Some(500000.0))
        .expect("child's block recorded");
    assert_ne!(child_obj["pid"], parent);
}

/// Without address randomization an exec'd image of the same program has the same
/// stacks at the same addresses under the same pid: each stack is listed once, so
/// a join of blocks and stacks counts every block once.
#[test]
fn reexec_without_address_randomization_lists_each_stack_once() {
    let dir = tempdir();
    let p = dir.path().join("p");
    let args = [
        "setarch",
        "x86_64",
        "-R",
        &program("torture"),
        "reexec",
        "2",
    ];
    let out = record(&p, &[], &args);
    assert_ran(&out);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "image 2\nimage 1\nimage 0\n"
    );
    let repeated = sql_json(
        &p,
        "SELECT pid, stack_id, depth FROM stacks GROUP BY pid, stack_id, depth HAVING count(*) > 1",
    );
    assert!(repeated.is_empty(), "{repeated:?}");
    let blocks = sql_json(
        &p,
        "SELECT count(DISTINCT a.pid) AS pids, count(*) AS n, count(DISTINCT a.stack_id) AS stacks \
         FROM allocations a JOIN stacks s ON a.pid = s.pid AND a.stack_id = s.stack_id \
         WHERE a.size = 1048576 AND s.depth = 0",
    );
    assert_eq!(blocks[0]["pids"], 1, "{blocks:?}");
    assert_eq!(blocks[0]["n"], 3, "{blocks:?}");
    assert_eq!(blocks[0]["stacks"], 1, "{blocks:?}");
}

#[test]
fn dlopen_dlclose() {
    let lib = program("libplugin.so");
    let r = same_behaviour(&[&program("torture"), "dlopen", &lib]);
    let site = objects(&r, "objects_by_allocated")
        .into_iter()
        .find(|o| o["site"]["function"] == "plugin_work")
        .expect("allocations inside the dlopen'd library are symbolized");
    assert_eq!(site["allocations"].as_f64().unwrap(), 3000.0);
    assert!(site["site"]["file"].as_str().unwrap().ends_with("plugin.c"));
}

/// Each test block of call_stacks (sizes 1001 to 1008) with its stack's
/// functions, innermost first, recorded with `unwind`.
/// The chain of functions of each case's allocation, and how many stacks each
/// unwinder walked ([frame pointers, cached rules, libgcc]).
fn call_stack_chains(unwind: &str) -> (Vec<serde_json::Value>, [u64; 3]) {
    let dir = tempdir();
    let p = dir.path().join("p");
    let flags = ["--sample-rate", "1", "--unwind", unwind];
    assert_ran(&record(&p, &flags, &[&program("call_stacks")]));
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(p.join("meta.json")).unwrap()).unwrap();
    let by = &meta["processes"][0]["stacks_unwound"];
    let by = ["frame_pointers", "cached_rules", "libgcc"].map(|k| by[k].as_u64().unwrap());
    let chains = sql_json(
        &p,
        "SELECT a.size, string_agg(s.function, ' < ' ORDER BY s.depth) AS chain \
         FROM allocations a JOIN stacks s ON a.pid = s.pid AND a.stack_id = s.stack_id \
         WHERE a.size BETWEEN 1001 AND 1008 GROUP BY a.size ORDER BY a.size",
    );
    (chains, by)
}

/// Every allocation's stack in code built without frame pointers is whole:
/// through a shared library and back, libc, alloca and large frames, a signal
/// handler, a thread and a recursion, each down to where its stack starts; and
/// the cached rules give libgcc's stacks.
#[test]
fn dwarf_stacks_are_whole_without_frame_pointers() {
    let (rows, by) = call_stack_chains("dwarf");
    let (libgcc_rows, libgcc_by) = call_stack_chains("libgcc");
    assert_eq!(rows, libgcc_rows);
    eprintln!("stacks unwound [fp, cached rules, libgcc]: dwarf {by:?}, libgcc {libgcc_by:?}");
    // Every stack is counted under the unwinder that walked it, and the cached
    // rules walked them all but the signal handler's (its frame is the kernel's
    // sigreturn trampoline, which the rules hand to libgcc).
    assert_eq!(libgcc_by[0] + libgcc_by[1], 0, "{libgcc_by:?}");
    assert_eq!(by[0], 0, "{by:?}");
    assert_eq!(by[1] + by[2], libgcc_by[2], "{by:?} vs {libgcc_by:?}");
    assert!(by[2] <= 1, "{by:?}");
    let chain = |size: u64| -> String {
        let row = rows.iter().find(|r| r["size"] == size);
        let row = row.unwrap_or_else(|| panic!("no block of {size} bytes in {rows:?}"));
        row["chain"].as_str().unwrap().to_owned()
    };
    let from_main = |size: u64, callers: &str| {
        let c = chain(size);
        let whole = format!("leaf < {callers} < main < ");
        assert!(c.starts_with(&whole), "{size}: {c}");
        assert!(c.ends_with("< _start"), "{size}: {c}");
    };
    from_main(1001, "chain_c < chain_b < chain_a");
    from_main(1002, "from_lib < lib_inner < lib_outer");
    from_main(1003, "with_alloca < with_alloca");
    from_main(1004, "big_frame");
    from_main(1008, &["recurse"; 21].join(" < "));
    // Through libc's own frames (qsort, the signal return) to the caller
    // (`raise`, or glibc's internal `__GI_raise` where libc6-dbg names it).
    for (size, inner, outer) in [
        (1005, "compare", " < sort_and_allocate < main"),
        (1006, "on_signal", "raise < main"),
    ] {
        let c = chain(size);
        assert!(c.starts_with(&format!("leaf < {inner} < ")), "{size}: {c}");
        assert!(
            c.contains(&format!("{outer} < ")) && c.ends_with("< _start"),
            "{size}: {c}"
        );
    }
    let thread = chain(1007);
    assert!(thread.starts_with("leaf < thread_main < "), "{thread}");
    assert!(!thread.split(" < ").any(|f| f == "main"), "{thread}");
}

#[test]
fn longjmp_out_of_allocating_frames() {
    same_behaviour(&[&program("torture"), "longjmp"]);
}

#[test]
fn cxx_exceptions_and_new_delete() {
    let r = same_behaviour(&[&program("exceptions")]);
    // 2000 vectors of 400000 bytes (allocated through operator new).
    let site = objects(&r, "objects_by_allocated")
        .into_iter()
        .find(|o| o["allocations"].as_f64() == Some(2000.0))
        .expect("vector storage recorded");
    assert_eq!(site["allocated_bytes"].as_f64().unwrap(), 2000.0 * 400000.0);
}

#[test]
fn exit_paths_keep_their_status() {
    let torture = program("torture");
    for args in [["exit", "5"], ["_exit", "6"], ["abort", ""]] {
        let argv: Vec<&str> = [torture.as_str(), args[0], args[1]]
            .into_iter()
            .filter(|a| !a.is_empty())
            .collect();
        let r = same_behaviour(&argv);
        let p = &processes(&r)[0];
        match args[0] {
            "abort" => assert_eq!(p["signal"], 6),
            _ => assert_eq!(
                p["exit_code"].as_i64().unwrap(),
                args[1].parse::<i64>().unwrap()
            ),
        }
    }
}

#[test]
fn signals_during_malloc() {
    // 2 million blocks of up to 5000 bytes, each freed at once, under a timer
    // signal every 200 us: a count lost or doubled in a hook the signal
    // interrupted would leave heap live. What stays is stdout's buffer.
    let r = same_behaviour(&[&program("torture"), "signals"]);
    assert_eq!(r["peak"]["heap_measured"], true);
    let peak = r["peak"]["heap_bytes"].as_u64().unwrap();
    assert!((1..64 << 10).contains(&peak), "peak live heap {peak}");
    let at_exit = r["leaks"]["heap_live_at_exit"][0]["bytes"]
        .as_u64()
        .unwrap();
    assert!(at_exit <= 8 << 10, "{at_exit} bytes live at exit");
}

#[test]
fn huge_static_object() {
    let r = same_behaviour(&[&program("torture"), "bigstatic"]);
    let huge = objects(&r, "objects_by_peak")
        .into_iter()
        .find(|o| o["kind"] == "static" && o["name"].as_str().unwrap().starts_with("huge "))
        .expect("static object from the symbol table");
    assert_eq!(huge["peak_bytes"].as_f64().unwrap(), (256u64 << 20) as f64);
}

#[test]
fn static_objects_are_at_their_runtime_address() {
    // The program prints where the (PIE, so relocated) array really is.
    let dir = tempdir();
    let p = dir.path().join("p");
    let out = record(&p, &[], &[&program("torture"), "bigstatic"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let printed = stderr
        .lines()
        .find_map(|l| l.strip_prefix("huge at 0x"))
        .map(|h| u64::from_str_radix(h.trim(), 16).unwrap())
        .expect("program printed its address");
    let r = report_json(&p);
    let huge = objects(&r, "objects_by_peak")
        .into_iter()
        .find(|o| o["kind"] == "static" && o["name"].as_str().unwrap().starts_with("huge "))
        .unwrap();
    assert_eq!(huge["address"].as_u64().unwrap(), printed);
}

#[test]
fn custom_allocator_on_mmap() {
    let r = same_behaviour(&[&program("torture"), "arena"]);
    let maps: Vec<_> = objects(&r, "objects_by_allocated")
        .into_iter()
        .filter(|o| o["kind"] == "mmap" && o["site"]["function"] == "arena")
        .collect();
    let total: f64 = maps
        .iter()
        .map(|o| o["allocated_bytes"].as_f64().unwrap())
        .sum();
    // 16 MiB arena + 1 MiB mapping, then the 4 MiB it was remapped to.
    assert_eq!(total, (21u64 << 20) as f64, "{maps:?}");
    assert!(
        maps.iter().all(|o| o["leaked_bytes"].as_f64() == Some(0.0)),
        "all unmapped: {maps:?}"
    );
}

fn died_with_data(mode: &str, signal: i64) {
    let dir = tempdir();
    let profile = dir.path().join("p");
    let out = record(&profile, &[], &[&program("torture"), mode]);
    assert_eq!(out.status.code(), Some(128 + signal as i32));
    let r = report_json(&profile);
    assert_eq!(processes(&r)[0]["signal"], signal);
    // The ten 1 MiB blocks made before death are in the profile.
    let site = objects(&r, "objects_by_allocated")
        .into_iter()
        .find(|o| o["site"]["function"] == "allocate_some")
        .expect("blocks from before the death");
    assert_eq!(site["allocations"].as_f64().unwrap(), 10.0);
    assert_eq!(r["regions"][0]["name"], "before death");
    // Its blocks were in use when it died: the report does not call them leaks.
    let text = report_text(&profile);
    assert!(
        text.contains(&format!(
            "was killed by signal {signal}: its blocks below were live when it died"
        )),
        "{text}"
    );
}

/// A grandchild killed by SIGKILL (a shell's background job): memlens sees
/// neither an exit nor the signal, and says so, in LOSSES and where the
/// leaks are listed, its 100 held blocks marked as live when it died.
#[test]
fn a_grandchild_killed_unseen_has_no_leaks_and_a_loss() {
    let dir = tempdir();
    let p = dir.path().join("p");
    let script = format!(
        "{} hold & sleep 0.1; kill -9 $!; wait; exit 0",
        program("torture")
    );
    assert_ran(&record(&p, &[], &["sh", "-c", &script]));
    let r = report_json(&p);
    assert_eq!(r["losses"]["unseen_ends"], 1, "{}", r["losses"]);
    let text = report_text(&p);
    assert!(text.contains("ended without memlens seeing how"), "{text}");
    let held = (text.lines())
        .skip_while(|l| *l != "LEAKS AT EXIT")
        .find(|l| l.contains("hold (torture.c:"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(held.ends_with(", live when it died]"), "{held}");
}

#[test]
fn crashing_target_leaves_a_readable_profile() {
    died_with_data("crash", 11);
}

#[test]
fn sigkilled_target_leaves_a_readable_profile() {
    died_with_data("sigkill", 9);
}

#[test]
fn sampled_small_blocks_estimate_the_true_count() {
    // 16 threads x 4 rounds x 20000 blocks of 16..215 bytes in `worker`. At one
    // sample per 16 KiB there are ~9000 samples: the standard error is about 1%.
    let dir = tempdir();
    let p = dir.path().join("p");
    let out = record(
        &p,
        &["--sample-rate", "16384"],
        &[&program("torture"), "threads"],
    );
    assert!(out.status.success());
    let r = report_json(&p);
    let est: f64 = objects(&r, "objects_by_allocated")
        .iter()
        .filter(|o| o["site"]["function"] == "worker" && o["provenance"] == "sampled_scaled")
        .map(|o| o["allocations"].as_f64().unwrap())
        .sum();
    let truth = 16.0 * 4.0 * 20000.0;
    assert!(
        (est / truth - 1.0).abs() < 0.05,
        "estimated {est} for {truth}"
    );
}

#[test]
fn thread_asking_for_its_own_stack_first_does_not_hang() {
    // glibc's pthread_getattr_np reallocs while it holds the thread's lock.
    let r = same_behaviour(&[&program("torture"), "getattr"]);
    assert_eq!(r["thread_stacks"]["threads"], 2);
}

#[test]
fn program_closing_every_descriptor_keeps_its_files_and_the_log() {
    // The program closes descriptors 3..1023, opens its own file, puts it under
    // numbers 900..1023 as well, then allocates 2000 recorded blocks.
    let dir = tempdir();
    let own = dir.path().join("own.txt");
    let own = own.to_str().unwrap();
    let r = same_behaviour(&[&program("torture"), "closefds", own]);
    assert_eq!(std::fs::read(own).unwrap(), b"hello\n");
    let site = objects(&r, "objects_by_allocated")
        .into_iter()
        .find(|o| o["site"]["function"] == "closefds")
        .expect("blocks allocated after the descriptors were closed");
    assert_eq!(site["allocations"].as_f64().unwrap(), 2000.0);
    assert_eq!(r["losses"]["log_lost"], 0);
    assert_eq!(r["losses"]["dropped_events"], 0);
}

/// Debian's jemalloc, tcmalloc and mimalloc (`.ci/run` installs them).
const ALLOCATORS: [&str; 3] = [
    "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
    "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
    "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2",
];

#[test]
fn preloaded_allocators_keep_working_and_their_heap_is_counted() {
    for lib in ALLOCATORS {
        assert!(
            std::path::Path::new(lib).exists(),
            "{lib} missing: run .ci/run"
        );
        let env = [("LD_PRELOAD", lib)];
        for mode in ["threads", "forks"] {
            same_behaviour_with(&env, &[&program("torture"), mode]);
        }
        same_behaviour_with(&env, &[&program("exceptions")]);
        // 100 blocks of 100000 bytes held for 200 ms: the peak live heap is
        // their usable sizes (each allocator rounds up to its size classes).
        let r = same_behaviour_with(&env, &[&program("torture"), "hold"]);
        let peak = r["peak"]["heap_bytes"].as_f64().unwrap();
        assert!(
            (10.0e6..12.0e6).contains(&peak),
            "{lib}: peak live heap {peak}"
        );
        let objects = objects(&r, "objects_by_allocated");
        // The allocator's own mappings (jemalloc's arenas) are not the program's.
        let mappings: Vec<_> = objects.iter().filter(|o| o["kind"] == "mmap").collect();
        assert!(mappings.is_empty(), "{lib}: {mappings:?}");
        let site = objects
            .into_iter()
            .find(|o| o["site"]["function"] == "hold")
            .unwrap_or_else(|| panic!("{lib}: held blocks recorded"));
        assert_eq!(site["allocations"].as_f64().unwrap(), 100.0, "{lib}");
        assert_eq!(site["leaked_bytes"].as_f64().unwrap(), 0.0, "{lib}");
        assert_eq!(r["losses"]["heap_not_hooked"], 0, "{lib}");
    }
}

#[test]
fn a_non_pie_programs_own_plt_entry_for_malloc_is_no_loss() {
    // The case itself: malloc undefined in the executable, with an address.
    let symbols = std::process::Command::new("readelf")
        .args(["-W", "--dyn-syms"])
        .arg(program("non_pie_malloc"))
        .output()
        .unwrap();
    let symbols = String::from_utf8_lossy(&symbols.stdout);
    let malloc: Vec<&str> = (symbols.lines())
        .find(|l| {
            l.split_whitespace()
                .nth(7)
                .is_some_and(|n| n.starts_with("malloc"))
        })
        .unwrap_or_else(|| panic!("{symbols}"))
        .split_whitespace()
        .collect();
    assert!(
        malloc[6] == "UND" && !malloc[1].trim_start_matches('0').is_empty(),
        "{malloc:?}"
    );
    let dir = tempdir();
    let p = dir.path().join("p");
    assert_ran(&record(&p, &["--leaks"], &[&program("non_pie_malloc")]));
    let r = report_json(&p);
    assert_eq!(r["losses"]["heap_not_hooked"], 0, "{}", r["losses"]);
    let site = objects(&r, "objects_by_allocated")
        .into_iter()
        .find(|o| o["site"]["function"] == "main")
        .unwrap_or_else(|| panic!("{}", r["objects_by_allocated"]));
    assert_eq!(site["allocations"].as_f64(), Some(100.0));
    assert_eq!(site["leaked_bytes"].as_f64(), Some(50_000.0));
    // With another allocator ahead of the runtime it is a loss again.
    let preload = format!("{}:{}", ALLOCATORS[0], runtime().display());
    let p = dir.path().join("q");
    let out = output_within(
        std::process::Command::new(program("non_pie_malloc"))
            .env("LD_PRELOAD", preload)
            .env("MEMLENS_DIR", &p),
    );
    assert_ran(&out);
    assert_eq!(report_json(&p)["losses"]["heap_not_hooked"], 1);
}

#[test]
fn allocator_placed_before_the_runtime_is_reported() {
    // Transparent mode with jemalloc first in LD_PRELOAD: malloc never reaches
    // the runtime, and the report must say so rather than show an empty heap.
    let dir = tempdir();
    let p = dir.path().join("p");
    let preload = format!("{}:{}", ALLOCATORS[0], runtime().display());
    let out = output_within(
        std::process::Command::new(program("torture"))
            .arg("hold")
            .env("LD_PRELOAD", preload)
            .env("MEMLENS_DIR", &p),
    );
    assert_ran(&out);
    let r = report_json(&p);
    assert_eq!(r["losses"]["heap_not_hooked"], 1);
}

#[test]
fn static_programs_are_sampled_from_proc_and_keep_their_status() {
    // Run directly: the runtime cannot enter, which memlens says, and the
    // resident memory of its 10 MB held for 200 ms is still recorded.
    let dir = tempdir();
    let p = dir.path().join("p");
    let out = record(&p, &[], &[&program("torture_static"), "hold"]);
    assert_ran(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is statically linked"), "{err}");
    assert!(err.contains("heap not measured"), "{err}");
    let r = report_json(&p);
    let procs = processes(&r);
    assert_eq!(procs.len(), 1, "{procs:?}");
    assert_eq!(procs[0]["untracked"], true);
    assert_eq!(procs[0]["exit_code"], 0);
    assert!(r["peak"]["rss_bytes"].as_f64().unwrap() > 10.0e6);
    assert_eq!(r["peak"]["heap_measured"], false);
    assert_eq!(r["losses"]["untracked_processes"], 1);

    // Run by a script: the shell is recorded, the static image it execs is
    // followed from /proc and counted as a loss; the script's status is kept.
    let q = dir.path().join("q");
    let script = format!("{} hold; exit 4", program("torture_static"));
    let out = record(&q, &[], &["sh", "-c", &script]);
    assert_eq!(out.status.code(), Some(4));
    let r = report_json(&q);
    let procs = processes(&r);
    let untracked: Vec<_> = procs.iter().filter(|p| p["untracked"] == true).collect();
    assert_eq!(untracked.len(), 1, "{procs:?}");
    assert!(untracked[0]["exe"]
        .as_str()
        .unwrap()
        .ends_with("torture_static"));
    assert_eq!(r["peak"]["heap_measured"], true);
    assert_eq!(r["losses"]["untracked_processes"], 1);
    // Its resident memory is in the timeline under its pid.
    let pid = untracked[0]["pid"].as_u64().unwrap();
    let rows = sql_json(
        &q,
        &format!("SELECT max(rss) AS rss FROM timeline WHERE pid = {pid}"),
    );
    assert!(rows[0]["rss"].as_f64().unwrap() > 10.0e6, "{rows:?}");
}

#[test]
fn a_grandchild_returning_from_main_has_its_status() {
    // glibc passes main's return value to exit from inside libc, where no
    // interposed exit sees it; the runtime wraps main instead. The shell is
    // memlens' child, the program its child (as cc1 under gcc).
    let dir = tempdir();
    let src = dir.path().join("r3.c");
    std::fs::write(&src, "int main(void) { return 3; }\n").unwrap();
    let exe = dir.path().join("r3");
    let st = std::process::Command::new("gcc")
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .status()
        .unwrap();
    assert!(st.success());
    let p = dir.path().join("p");
    let script = format!("{}; exit 0", exe.display());
    assert_ran(&record(&p, &[], &["sh", "-c", &script]));
    let r = report_json(&p);
    let procs = processes(&r);
    let grandchild = procs
        .iter()
        .find(|x| x["exe"].as_str().unwrap().ends_with("/r3"))
        .unwrap_or_else(|| panic!("{procs:?}"));
    assert_eq!(grandchild["exit_code"], 3, "{procs:?}");
}

/// Runs `args` natively and under `memlens record`, each started by a parent
/// that blocks SIGUSR2, ignores SIGPIPE and SIGINT and closes standard input
/// (as a shell's `trap '' PIPE INT` and `<&-` do); returns both outputs.
fn from_a_parent_that_changed_its_signals(args: &[&str]) -> (Output, Output) {
    use std::os::unix::process::CommandExt;
    let prepare = |cmd: &mut Command| {
        // SAFETY: async-signal-safe calls in the child before exec.
        unsafe {
            cmd.pre_exec(|| {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, libc::SIGUSR2);
                libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
                libc::signal(libc::SIGPIPE, libc::SIG_IGN);
                libc::signal(libc::SIGINT, libc::SIG_IGN);
                libc::close(0);
                Ok(())
            })
        };
    };
    let mut native = Command::new(args[0]);
    native.args(&args[1..]);
    prepare(&mut native);
    let dir = tempdir();
    let mut recorded = record_command(&dir.path().join("p"), &[], args);
    prepare(&mut recorded);
    (output_within(&mut native), output_within(&mut recorded))
}

#[test]
fn the_program_gets_the_signal_state_and_descriptors_memlens_was_given() {
    // Before: SIGCHLD blocked (memlens' own), SIGPIPE back to its default,
    // signals 32 and 33 ignored (posix_spawn's), fd 0 open on /dev/null.
    let (native, recorded) =
        from_a_parent_that_changed_its_signals(&[&program("inherited"), "state"]);
    let native_out = String::from_utf8_lossy(&native.stdout);
    let mask = |name: &str| {
        let line = native_out.lines().find(|l| l.starts_with(name)).unwrap();
        u64::from_str_radix(line[name.len()..].trim(), 16).unwrap()
    };
    let bit = |sig: i32| 1u64 << (sig - 1);
    assert_eq!(mask("SigBlk:"), bit(libc::SIGUSR2), "{native_out}");
    let both = bit(libc::SIGPIPE) | bit(libc::SIGINT);
    assert_eq!(mask("SigIgn:") & both, both, "{native_out}");
    assert!(native_out.contains("fd 0 closed"), "{native_out}");
    assert_eq!(
        native_out,
        String::from_utf8_lossy(&recorded.stdout),
        "{}",
        String::from_utf8_lossy(&recorded.stderr)
    );
    // A program waiting in pause() for its child's SIGCHLD wakes (before: its
    // alarm killed it, status 142).
    same_behaviour(&[&program("inherited"), "sigchld"]);
}

#[test]
fn cancellation_never_acts_inside_the_hooks() {
    // Threads with a cancel request pending allocate 100 kB blocks (each
    // recorded, so log blocks are written from inside malloc): natively no
    // cancellation point is reached until pthread_testcancel. Before: every
    // thread was cancelled inside malloc, reported as log blocks cut short.
    let r = same_behaviour(&[&program("inherited"), "cancel"]);
    assert_eq!(r["losses"]["truncated_blocks"], 0, "{}", r["losses"]);
    let r = same_behaviour(&[&program("inherited"), "async"]);
    assert_eq!(r["losses"]["truncated_blocks"], 0, "{}", r["losses"]);
}

#[test]
fn a_program_with_its_own_malloc_is_not_called_before_main() {
    // It sets its allocator up in main and aborts on an earlier call: before,
    // the runtime's start read the main thread's stack through glibc, which
    // allocates (fopen). Its heap cannot be seen, and the report says why.
    let r = same_behaviour(&[&program("own_malloc")]);
    assert_eq!(r["losses"]["heap_not_hooked"], 1, "{}", r["losses"]);
}

#[test]
fn failing_allocations_leave_errno_as_the_c_library_does() {
    same_behaviour(&[&program("torture"), "failures"]);
}

#[test]
fn files_that_are_no_program_run_as_execvp_runs_them() {
    let dir = tempdir();
    // No #! line: execvp hands it to /bin/sh (env, make and shells do too).
    let script = dir.path().join("no-interpreter-line");
    std::fs::write(&script, "echo ran by sh\nexit 3\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = script.to_string_lossy().into_owned();
    let native = run_native(&["env", &script]);
    let recorded = record(&dir.path().join("sh"), &[], &[&script]);
    assert_eq!(shell_status(&native), 3);
    assert_eq!(
        shell_status(&recorded),
        3,
        "{}",
        String::from_utf8_lossy(&recorded.stderr)
    );
    assert_eq!(native.stdout, recorded.stdout);
    // An interpreter that is not there: 127, as env says, on one line.
    let missing = dir.path().join("missing-interpreter");
    std::fs::write(&missing, "#!/nonexistent/interpreter\necho no\n").unwrap();
    std::fs::set_permissions(&missing, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = record(&dir.path().join("p"), &[], &[&missing.to_string_lossy()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(127), "{err}");
    assert!(
        err.contains("interpreter") && err.lines().count() == 1,
        "{err}"
    );
}

#[test]
fn a_profile_directory_the_program_removes_is_written_from_the_open_files() {
    // The default profile directory is in the working directory, which the
    // program removes (its own `rm -rf`): the run up to then and after it
    // comes from the files memlens holds open, written to $TMPDIR, and the
    // directory stays removed while the program runs. Before: exit 125, the
    // run lost.
    let dir = tempdir();
    let (cwd, tmp) = (dir.path().join("work"), dir.path().join("tmp"));
    std::fs::create_dir(&cwd).unwrap();
    std::fs::create_dir(&tmp).unwrap();
    let out = output_within(
        Command::new(memlens())
            .env("MEMLENS_RUNTIME", runtime())
            .env("TMPDIR", &tmp)
            .current_dir(&cwd)
            .args(["record", "--", &program("torture"), "removes_cwd"]),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "removed 1\n", "{err}");
    assert!(err.contains("was removed while the program ran"), "{err}");
    let written: Vec<_> = std::fs::read_dir(&tmp).unwrap().flatten().collect();
    assert_eq!(written.len(), 1, "{err}");
    let profile = written[0].path();
    assert!(err.contains(&*profile.to_string_lossy()), "{err}");
    // Both blocks: the one allocated before the removal and the one after.
    let r = report_json(&profile);
    let peak = r["peak"]["heap_bytes"].as_u64().unwrap();
    assert!((80_000_000..81_000_000).contains(&peak), "{}", r["peak"]);
    // `-o` whose parent stays: the profile is written where the user asked
    // (a log removed before memlens first looked, within 10 ms, is lost).
    let asked = dir.path().join("kept").join("p");
    std::fs::create_dir(asked.parent().unwrap()).unwrap();
    let out = record(
        &asked,
        &[],
        &[
            "sh",
            "-c",
            &format!(
                "sleep 0.2; rm -rf '{}'; ls '{}'",
                asked.display(),
                asked.parent().unwrap().display()
            ),
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        out.stdout.is_empty(),
        "re-created while the program ran: {err}"
    );
    assert!(err.contains("was removed while the program ran"), "{err}");
    assert_eq!(
        report_json(&asked)["summary"]["processes"][0]["exit_code"],
        0
    );
}

#[test]
fn a_runtime_without_frame_pointers_is_refused_at_build_time() {
    // RUSTFLAGS in the environment replaces .cargo/config.toml's frame
    // pointers; such a runtime read a memset wrapper's fill byte as its
    // frame and crashed the program it profiled (LULESH, at its first
    // std::vector). The build stops and says what to add; with the flag
    // added it builds.
    let dir = tempdir();
    let check = |rustflags: &str| {
        Command::new(env!("CARGO"))
            .args([
                "check",
                "--quiet",
                "-p",
                "memlens-runtime",
                "--manifest-path",
            ])
            .arg(root().join("Cargo.toml"))
            .env("RUSTFLAGS", rustflags)
            .env("CARGO_TARGET_DIR", dir.path())
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let out = check("-C target-cpu=x86-64-v2");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("add `-C force-frame-pointers=yes` to RUSTFLAGS"),
        "{stderr}"
    );
    let out = check("-C target-cpu=x86-64-v2 -C force-frame-pointers=yes");
    assert_ran(&out);
}

/// The highest GLIBC_x.y symbol version `file` needs (objdump -T), as
/// (x, y).
fn glibc_needed(file: &Path) -> (u32, u32) {
    let out = Command::new("objdump")
        .arg("-T")
        .arg(file)
        .output()
        .unwrap();
    assert!(out.status.success(), "objdump -T {}", file.display());
    let text = String::from_utf8_lossy(&out.stdout);
    (text.split("GLIBC_").skip(1))
        .filter_map(|rest| {
            let version: String = rest
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let (major, minor) = version.split_once('.')?;
            Some((
                major.parse().ok()?,
                minor
                    .trim_end_matches('.')
                    .split('.')
                    .next()?
                    .parse()
                    .ok()?,
            ))
        })
        .max()
        .unwrap_or((0, 0))
}

#[test]
fn the_runtime_for_older_clusters_needs_glibc_2_17_and_records() {
    // Built as scripts/release.sh builds it, by cargo-zigbuild against
    // glibc 2.17's symbols (RHEL/CentOS 7 and newer), for x86_64 and
    // aarch64: no symbol of a newer C library, and the x86_64 one records
    // every block of a threaded program here as the usual build does.
    let dir = tempdir();
    for target in ["x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu"] {
        let out = Command::new(env!("CARGO"))
            .current_dir(root())
            .args([
                "zigbuild",
                "--quiet",
                "--release",
                "-p",
                "memlens-runtime",
                "--target",
            ])
            .arg(format!("{target}.2.17"))
            .arg("--target-dir")
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "cargo zigbuild (.ci/run installs cargo-zigbuild and zig): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let built = dir
            .path()
            .join(target)
            .join("release/libmemlens_runtime.so");
        assert!(
            glibc_needed(&built) <= (2, 17),
            "{target}: {:?}",
            glibc_needed(&built)
        );
    }
    let old = dir
        .path()
        .join("x86_64-unknown-linux-gnu/release/libmemlens_runtime.so");
    let p = dir.path().join("p");
    let out = record_with(
        &[("MEMLENS_RUNTIME", old.to_str().unwrap())],
        &p,
        &["--leaks"],
        &[&program("torture"), "threads"],
    );
    assert_ran(&out);
    assert_eq!(
        out.stdout,
        run_native(&[&program("torture"), "threads"]).stdout
    );
    let r = report_json(&p);
    assert_eq!(r["losses"]["dropped_events"], 0, "{:#}", r["losses"]);
    let blocks: f64 = objects(&r, "objects_by_allocated")
        .iter()
        .map(|o| o["allocations"].as_f64().unwrap())
        .sum();
    assert!(blocks > 1000.0, "{blocks} blocks recorded");
}

#[test]
fn transparent_preload_mode_with_env_configuration() {
    let dir = tempdir();
    let p = dir.path().join("t");
    let out = Command::new(program("phases"))
        .env("LD_PRELOAD", runtime())
        .env("MEMLENS_DIR", &p)
        .env("MEMLENS_INTERVAL", "5")
        .env("MEMLENS_MIN_SIZE", "1M")
        .output()
        .unwrap();
    assert!(out.status.success());
    let r = report_json(&p);
    assert_eq!(r["summary"]["settings"]["min_size"], 1 << 20);
    assert!(
        r["peak"]["samples"].as_u64().unwrap() >= 3,
        "the runtime's own sampler ran"
    );
    // Without a collector the runtime records the command line and the exit
    // status itself.
    assert_eq!(
        r["summary"]["command"],
        serde_json::json!([program("phases")])
    );
    assert_eq!(r["summary"]["processes"][0]["exit_code"], 0);
    assert!(r["peak"]["rss_bytes"].as_u64().unwrap() > (40u64 << 20));
}

#[test]
fn each_unwind_option_reaches_the_runtime() {
    // `--unwind`'s values are rawlog's spellings: each reaches the runtime
    // through MEMLENS_UNWIND and comes back as the profile's name of it.
    use memlens_rawlog::unwinder::{NAMES, OPTIONS};
    let dir = tempdir();
    for (option, name) in OPTIONS.iter().zip(NAMES) {
        let out = dir.path().join(option);
        assert_ran(
            &Command::new(memlens())
                .env("MEMLENS_RUNTIME", runtime())
                .args(["record", "--unwind", option, "-o"])
                .arg(&out)
                .args(["--", "true"])
                .output()
                .unwrap(),
        );
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("meta.json")).unwrap()).unwrap();
        assert_eq!(meta["settings"]["unwinder"], name, "--unwind {option}");
    }
}

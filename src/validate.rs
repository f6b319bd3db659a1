//! `memlens doctor --validate`: runs a kernel whose accesses are known under
//! every access backend this machine has, and compares what each reports per
//! object with the truth: the instrumented build's bytes read and written
//! (sampled and scaled), the page-fault sampler's first touches, the
//! hardware samplers' (PEBS, IBS, SPE) shares of load and store samples.
//! Prints a verdict per figure and writes them to a file for a bug report.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

const KERNEL: &str = include_str!("validate/kernel.c");
/// The kernel's arrays, their bytes, and how many times each is read.
const ARRAYS: [(&str, f64, f64); 3] = [
    ("small", 4.0 * MIB, 4.0),
    ("medium", 8.0 * MIB, 2.0),
    ("large", 16.0 * MIB, 1.0),
];
const MIB: f64 = 1024.0 * 1024.0;
const PAGE: f64 = 4096.0;
/// Largest error of a sampled figure that passes.
const TOLERANCE: f64 = 0.10;

/// One figure of one backend against the truth.
#[derive(serde::Serialize)]
struct Check {
    backend: &'static str,
    object: &'static str,
    figure: &'static str,
    expected: f64,
    measured: f64,
    error: f64,
    pass: bool,
}

/// A backend that could not run, and why.
#[derive(serde::Serialize)]
struct Skipped {
    backend: &'static str,
    reason: String,
}

pub fn validate(output: &Path) -> Result<bool> {
    let dir = tempfile_dir()?;
    let source = dir.join("kernel.c");
    std::fs::write(&source, KERNEL)?;
    let memlens = std::env::current_exe().context("finding memlens' own binary")?;
    let (mut checks, mut skipped) = (Vec::new(), Vec::new());
    let mut add = |backend: &'static str, found: Result<Vec<Check>>| match found {
        Ok(found) => checks.extend(found),
        Err(e) => skipped.push(Skipped {
            backend,
            reason: format!("{e:#}"),
        }),
    };
    // The instrumented build: exact counts, one access in the period sampled.
    let instrumented = dir.join("kernel-cc");
    add(
        "software",
        build(Command::new(&memlens).arg("cc"), &source, &instrumented)
            .and_then(|()| record(&memlens, &dir, "software", &instrumented, &[]))
            .map(|report| software_checks(&report)),
    );
    // The page-fault sampler: every fault sampled, one per page first touched.
    let plain = dir.join("kernel-gcc");
    add(
        "page-faults",
        build(&mut Command::new("cc"), &source, &plain)
            .and_then(|()| record(&memlens, &dir, "page-faults", &plain, &["--period", "1"]))
            .map(|report| page_fault_checks(&report)),
    );
    for backend in ["pebs", "ibs", "spe"] {
        add(
            backend,
            record(&memlens, &dir, backend, &plain, &[])
                .map(|report| hardware_checks(backend, &report)),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    let pass = print_checks(&checks, &skipped);
    let file = serde_json::json!({
        "memlens_version": env!("CARGO_PKG_VERSION"),
        "kernel": memlens_collector::sysinfo::kernel(),
        "cpu": memlens_collector::sysinfo::cpu_model(),
        "tolerance": TOLERANCE,
        "checks": checks,
        "skipped": skipped,
        "pass": pass,
    });
    std::fs::write(output, serde_json::to_string_pretty(&file)?)
        .with_context(|| format!("writing {}", output.display()))?;
    println!("  written to {}", output.display());
    Ok(pass)
}

/// Each array's exact bytes read and written, from the instrumented
/// build's samples.
fn software_checks(report: &serde_json::Value) -> Vec<Check> {
    let mut checks = Vec::new();
    for (name, bytes, reads) in ARRAYS {
        let o = object(report, name);
        checks.push(check(
            "software",
            name,
            "bytes read",
            bytes * reads,
            o["est_bytes_read"].as_f64(),
        ));
        checks.push(check(
            "software",
            name,
            "bytes written",
            bytes,
            o["est_bytes_written"].as_f64(),
        ));
    }
    checks
}

/// Each array's pages first touched, one fault sampled each.
fn page_fault_checks(report: &serde_json::Value) -> Vec<Check> {
    (ARRAYS.iter())
        .map(|(name, bytes, _)| {
            check(
                "page-faults",
                name,
                "pages first touched",
                bytes / PAGE,
                object(report, name)["samples"].as_f64(),
            )
        })
        .collect()
}

/// A hardware sampler's share of the load and store samples in each array
/// (loads a third each; stores 1/7, 2/7, 4/7).
fn hardware_checks(backend: &'static str, report: &serde_json::Value) -> Vec<Check> {
    let total = |field: &str| -> f64 {
        ARRAYS
            .iter()
            .map(|(n, ..)| object(report, n)[field].as_f64().unwrap_or(0.0))
            .sum()
    };
    let (loads, stores) = (total("load_samples"), total("store_samples"));
    let written: f64 = ARRAYS.iter().map(|(_, bytes, _)| bytes).sum();
    let read: f64 = ARRAYS.iter().map(|(_, bytes, reads)| bytes * reads).sum();
    let mut checks = Vec::new();
    for (name, bytes, reads) in ARRAYS {
        let o = object(report, name);
        let share = |field: &str, of: f64| o[field].as_f64().map(|v| v / of.max(1.0));
        checks.push(check(
            backend,
            name,
            "share of loads",
            bytes * reads / read,
            share("load_samples", loads),
        ));
        checks.push(check(
            backend,
            name,
            "share of stores",
            bytes / written,
            share("store_samples", stores),
        ));
    }
    checks
}

/// The checks and the backends not run, as a table and a verdict; whether
/// every check passed.
fn print_checks(checks: &[Check], skipped: &[Skipped]) -> bool {
    println!("memlens doctor --validate: each backend against a kernel with known accesses\n");
    println!(
        "  {:<12} {:<8} {:<20} {:>14} {:>14} {:>7}  verdict",
        "backend", "object", "figure", "expected", "measured", "error"
    );
    // Shares with three decimals, counts whole.
    let figure = |v: f64| {
        if v < 1.0 {
            format!("{v:.3}")
        } else {
            format!("{v:.0}")
        }
    };
    for c in checks {
        println!(
            "  {:<12} {:<8} {:<20} {:>14} {:>14} {:>6.1}%  {}",
            c.backend,
            c.object,
            c.figure,
            figure(c.expected),
            figure(c.measured),
            c.error * 100.0,
            if c.pass { "ok" } else { "WRONG" }
        );
    }
    for s in skipped {
        println!("  {:<12} not run: {}", s.backend, s.reason);
    }
    let pass = !checks.is_empty() && checks.iter().all(|c| c.pass);
    let verdict = match (pass, checks.is_empty()) {
        (_, true) => "no backend could run".to_string(),
        (true, false) => format!("every figure within {:.0}% of the truth", TOLERANCE * 100.0),
        (false, false) => {
            "some figures are wrong: attach the file below to a bug report".to_string()
        }
    };
    println!("\n  verdict: {verdict}");
    pass
}

fn check(
    backend: &'static str,
    object: &'static str,
    figure: &'static str,
    expected: f64,
    measured: Option<f64>,
) -> Check {
    let measured = measured.unwrap_or(0.0);
    let error = (measured - expected).abs() / expected;
    Check {
        backend,
        object,
        figure,
        expected,
        measured,
        error,
        pass: error <= TOLERANCE,
    }
}

fn tempfile_dir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("memlens-validate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

fn build(compiler: &mut Command, source: &Path, exe: &Path) -> Result<()> {
    let out = compiler
        .args(["-O2", "-g"])
        .arg(source)
        .arg("-o")
        .arg(exe)
        .output()
        .context("running the compiler")?;
    if !out.status.success() {
        bail!("the kernel did not build: {}", failure(&out.stderr));
    }
    Ok(())
}

/// The last line of a failed memlens command, without its prefix.
fn failure(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let last = text.lines().last().unwrap_or_default();
    last.trim_start_matches("memlens: ").to_string()
}

/// Records `exe` with `backend` and returns its JSON report.
fn record(
    memlens: &Path,
    dir: &Path,
    backend: &str,
    exe: &Path,
    extra: &[&str],
) -> Result<serde_json::Value> {
    let profile = dir.join(format!("profile-{backend}"));
    let out = Command::new(memlens)
        .args(["record", "--force", "--backend", backend, "-o"])
        .arg(&profile)
        .args(extra)
        .arg("--")
        .arg(exe)
        .output()
        .context("running memlens record")?;
    if !out.status.success() {
        bail!("{}", failure(&out.stderr));
    }
    let out = Command::new(memlens)
        .args(["report", "--format", "json"])
        .arg(&profile)
        .output()?;
    if !out.status.success() {
        bail!("{}", failure(&out.stderr));
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// The array's entry among the objects the samples were attributed to.
fn object<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    static NONE: serde_json::Value = serde_json::Value::Null;
    (report["access"]["objects"].as_array().into_iter().flatten())
        .find(|o| {
            o["name"]
                .as_str()
                .is_some_and(|n| n == name || n.starts_with(&format!("{name} ")))
        })
        .unwrap_or(&NONE)
}

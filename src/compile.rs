//! `memlens cc` / `memlens c++`: clang with the instrumentation the access backend
//! needs, usable as CC/CXX in make or CMake.

use anyhow::{bail, Result};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Flags added to every compile: load/store callbacks (`func` is needed for clang
/// to emit them at all), frame pointers, 128-bit vectors (the callbacks have no
/// 32- or 64-byte variants), and no sanitizer runtime of clang's own (its weak
/// callbacks would shadow ours).
const INSTRUMENT: &[&str] = &[
    "-fsanitize-coverage=func,trace-loads,trace-stores",
    "-fno-sanitize-link-runtime",
    "-fno-omit-frame-pointer",
    "-mprefer-vector-width=128",
];

/// clang from MEMLENS_CLANG / MEMLENS_CLANGXX, or the newest clang[-N] on PATH.
fn find_clang(cxx: bool) -> Result<PathBuf> {
    let var = if cxx {
        "MEMLENS_CLANGXX"
    } else {
        "MEMLENS_CLANG"
    };
    if let Some(p) = std::env::var_os(var) {
        return Ok(PathBuf::from(p));
    }
    let base = if cxx { "clang++" } else { "clang" };
    let path = std::env::var_os("PATH").unwrap_or_default();
    let candidates =
        std::iter::once(base.to_string()).chain((14..=21).rev().map(|v| format!("{base}-{v}")));
    for name in candidates {
        if let Some(found) = std::env::split_paths(&path)
            .map(|d| d.join(&name))
            .find(|p| p.is_file())
        {
            return Ok(found);
        }
    }
    bail!("no {base} found on PATH: install clang (e.g. `apt-get install clang-16`) or set {var}")
}

fn is_link(args: &[OsString]) -> bool {
    !args
        .iter()
        .any(|a| matches!(a.to_str(), Some("-c" | "-S" | "-E" | "-M" | "-MM")))
}

fn has_debug_info(args: &[OsString]) -> bool {
    args.iter().any(|a| {
        a.to_str()
            .is_some_and(|s| s.starts_with("-g") && s != "-g0")
    })
}

/// Flags that let the compiler use 256/512-bit vectors in code it cannot keep at
/// 128 bits (intrinsics): those accesses get no callback.
fn wide_vectors(args: &[OsString]) -> bool {
    args.iter().any(|a| {
        a.to_str().is_some_and(|s| {
            s.starts_with("-mavx")
                || s == "-march=native"
                || s.starts_with("-march=skylake")
                || s.starts_with("-march=haswell")
        })
    })
}

pub fn compile(cxx: bool, args: Vec<OsString>, runtime: &Path) -> Result<i32> {
    let clang = find_clang(cxx)?;
    let mut cmd = Command::new(&clang);
    cmd.args(INSTRUMENT);
    if !has_debug_info(&args) {
        // Line tables symbolize sampled accesses to file:line.
        cmd.arg("-gline-tables-only");
    }
    cmd.args(&args);
    if is_link(&args) {
        let Some(dir) = runtime.parent().filter(|_| runtime.is_file()) else {
            bail!(
                "runtime library not found at {}; build it with `cargo build --release` or set MEMLENS_RUNTIME",
                runtime.display()
            );
        };
        // The callbacks live in the runtime: link it, and find it at run time.
        // Without `memlens record` it stays idle and the program runs as usual.
        cmd.arg(format!("-L{}", dir.display()))
            .arg(format!("-Wl,-rpath,{}", dir.display()))
            .arg("-lmemlens_runtime")
            .arg("-Wl,--wrap=memcpy,--wrap=memmove,--wrap=memset");
    }
    if wide_vectors(&args) {
        eprintln!(
            "memlens cc: note: 256/512-bit vector accesses written with intrinsics get no callback and are not counted; auto-vectorized loops are kept at 128 bits"
        );
    }
    let status = cmd
        .status()
        .map_err(|e| anyhow::anyhow!("cannot run {}: {e}", clang.display()))?;
    Ok(status.code().unwrap_or(1))
}

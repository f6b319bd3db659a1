//! `memlens gcc`, `g++` and `gfortran`: GCC's own compilers with the
//! ThreadSanitizer instrumentation at compile time (`-fsanitize=thread`: a
//! call before every load and store the optimized code makes, every atomic
//! as a call), whose entry points memlens' shim implements in place of
//! libtsan (`crates/runtime/gcc/tsan_shim.c`): the same counts, samples
//! and atomics as the clang path, at a call per access.

use super::{compiler_of, find_compiler, has_debug_info, is_link, runtime_link_args, tempdir};
use anyhow::{bail, Result};
use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

/// The entry points the instrumentation calls, compiled (without it) into
/// every executable and shared library the wrapper links.
const SHIM: &str = include_str!("../../crates/runtime/gcc/tsan_shim.c");

/// GCC's driver links libtsan for `-fsanitize=thread` (`-ltsan` and, in an
/// executable, `libtsan_preinit.o`, which calls `__tsan_init`, the shim's):
/// a linker script of that name with nothing in it, first on the library
/// path, takes its place.
const NO_LIBTSAN: &str = "/* memlens: ThreadSanitizer's entry points are memlens' shim */\n";

/// Whether `wrapper` is one of GCC's.
pub(crate) fn is_gcc(wrapper: &str) -> bool {
    compiler_of(wrapper).is_ok_and(|c| c.gcc)
}

pub(crate) fn compile(wrapper: &str, args: Vec<OsString>, runtime: &Path) -> Result<i32> {
    let gcc = find_compiler(wrapper)?;
    let mut cmd = Command::new(&gcc);
    // The instrumentation without its predefined macro: the program
    // compiles as it would without memlens (code that tests for
    // ThreadSanitizer would call its annotation functions).
    // Without the calls at each function's entry and exit: the shim's
    // are empty (contexts come from the sampled access's frame-pointer walk).
    cmd.args([
        "-fsanitize=thread",
        "-U__SANITIZE_THREAD__",
        "--param=tsan-instrument-func-entry-exit=0",
        "-fno-omit-frame-pointer",
    ]);
    if !has_debug_info(&args) {
        // Line tables symbolize sampled accesses to file:line.
        cmd.arg("-g1");
    }
    cmd.args(&args);
    // The shim and the stand-in libtsan, kept until the link is done.
    let mut _link_dir = None;
    if is_link(&args) {
        let dir = _link_dir.insert(tempdir::Dir::new()?);
        let shim = dir.path().join("memlens_tsan_shim.o");
        let source = dir.path().join("memlens_tsan_shim.c");
        std::fs::write(&source, SHIM)?;
        let built = Command::new(&gcc)
            .args(["-x", "c", "-O2", "-fPIC", "-fno-omit-frame-pointer", "-c"])
            .arg(&source)
            .arg("-o")
            .arg(&shim)
            .status()?;
        if !built.success() {
            bail!(
                "{} could not compile memlens' ThreadSanitizer shim",
                gcc.display()
            );
        }
        std::fs::write(dir.path().join("libtsan.so"), NO_LIBTSAN)?;
        // `-x none`: the objects after a build's own `-x` are taken by
        // their names again.
        cmd.args(["-x", "none"])
            .arg(&shim)
            .arg(format!("-L{}", dir.path().display()))
            .args(runtime_link_args(runtime)?);
    }
    memlens_collector::inherited::pass_on(&mut cmd);
    let status = cmd
        .status()
        .map_err(|e| anyhow::anyhow!("cannot run {}: {e}", gcc.display()))?;
    Ok(status.code().unwrap_or(1))
}

/// `memlens doctor`'s line: the gcc `memlens gcc` runs, and whether it
/// compiles with the instrumentation; else why not and the fix.
pub(crate) fn doctor_check() -> Result<String, (String, String)> {
    let compiler = compiler_of("gcc").map_err(|e| (e.to_string(), String::new()))?;
    let var = compiler.var;
    let gcc = (compiler.find()).map_err(|e| {
        (
            e.to_string(),
            format!("apt-get install {}", compiler.package),
        )
    })?;
    let dir = tempdir::Dir::new()
        .map_err(|e| (e.to_string(), "set TMPDIR to a writable directory".into()))?;
    let source = dir.path().join("probe.c");
    let built = std::fs::write(&source, "int probe(int *p) { return *p; }\n")
        .ok()
        .and_then(|()| {
            (Command::new(&gcc)
                .args(["-fsanitize=thread", "-c"])
                .arg(&source))
            .arg("-o")
            .arg(dir.path().join("probe.o"))
            .output()
            .ok()
        });
    match built {
        Some(out) if out.status.success() => Ok(format!(
            "{}: memlens gcc, g++ and gfortran count every access (a call each)",
            gcc.display()
        )),
        _ => Err((
            format!("{} cannot compile with -fsanitize=thread", gcc.display()),
            format!("a GCC with ThreadSanitizer (x86_64 or aarch64 Linux), or set {var}"),
        )),
    }
}

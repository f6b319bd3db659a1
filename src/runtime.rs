//! Where the preload runtime is: named by MEMLENS_RUNTIME, built beside this
//! binary (a cargo build tree, or an install with `lib/memlens/`), or else the
//! copy embedded in this binary (see build.rs), written once to a private
//! per-user cache so that a copied or `cargo install`ed binary records as is.

use anyhow::{bail, Context, Result};
use memlens_profile::RUNTIME_FILE;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

static EMBEDDED: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libmemlens_runtime.so"));
const EMBEDDED_HASH: &str = include_str!(concat!(env!("OUT_DIR"), "/runtime_hash.txt"));

/// The variable naming the runtime library to use.
pub const VAR: &str = "MEMLENS_RUNTIME";

/// The runtime library to preload and link instrumented programs with.
pub fn path() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os(VAR) {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().unwrap_or_default();
    let dir = exe.parent().unwrap_or(Path::new("."));
    let installed = [
        dir.join(RUNTIME_FILE),
        dir.join("../lib/memlens").join(RUNTIME_FILE),
    ];
    if let Some(found) = installed.into_iter().find(|p| p.is_file()) {
        return Ok(found);
    }
    embedded()
}

/// The embedded runtime's file in the cache, written if not there yet:
/// `$XDG_CACHE_HOME/memlens/<hash>/` (or `~/.cache/...`), else
/// `$TMPDIR/memlens-<uid>/<hash>/`. Each directory is the user's own and
/// 0700: a runtime others could replace would run inside every profiled
/// program.
fn embedded() -> Result<PathBuf> {
    let mut errors = Vec::new();
    for base in cache_bases() {
        match write_cached(&base) {
            Ok(p) => return Ok(p),
            Err(e) => errors.push(format!("{}: {e:#}", base.display())),
        }
    }
    bail!(
        "cannot write the runtime library to a cache directory ({}); set MEMLENS_RUNTIME to a copy of it, or XDG_CACHE_HOME to a writable directory",
        errors.join("; ")
    )
}

fn cache_bases() -> Vec<PathBuf> {
    let env_dir = |var| {
        std::env::var_os(var)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let mut bases = Vec::new();
    if let Some(xdg) = env_dir("XDG_CACHE_HOME") {
        bases.push(xdg.join("memlens"));
    } else if let Some(home) = env_dir("HOME") {
        bases.push(home.join(".cache/memlens"));
    }
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let tmp = env_dir("TMPDIR").unwrap_or_else(|| PathBuf::from("/tmp"));
    bases.push(tmp.join(format!("memlens-{uid}")));
    bases
}

fn write_cached(base: &Path) -> Result<PathBuf> {
    let dir = base.join(EMBEDDED_HASH.trim());
    private_dir(base)?;
    private_dir(&dir)?;
    let file = dir.join(RUNTIME_FILE);
    if fs::metadata(&file).is_ok_and(|m| m.len() == EMBEDDED.len() as u64) {
        return Ok(file);
    }
    // Written under a name of this process's, then renamed: another memlens
    // starting at the same moment sees the whole file or none.
    let partial = dir.join(format!(".{RUNTIME_FILE}.{}", std::process::id()));
    let mut out = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o700)
        .open(&partial)
        .with_context(|| format!("creating {}", partial.display()))?;
    out.write_all(EMBEDDED)
        .and_then(|()| out.sync_all())
        .with_context(|| format!("writing {}", partial.display()))?;
    fs::rename(&partial, &file).with_context(|| format!("renaming to {}", file.display()))?;
    Ok(file)
}

/// Makes `dir` (mode 0700) or checks that the existing one is this user's and
/// writable by nobody else.
fn private_dir(dir: &Path) -> Result<()> {
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .with_context(|| format!("creating {}", dir.display()))?;
            return Ok(());
        }
        Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
    }
    let meta = fs::symlink_metadata(dir).with_context(|| format!("reading {}", dir.display()))?;
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    if !meta.is_dir() || meta.uid() != uid || meta.permissions().mode() & 0o022 != 0 {
        bail!(
            "{} is not a private directory of this user's",
            dir.display()
        );
    }
    Ok(())
}

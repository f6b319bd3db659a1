//! A profile's parts (one directory, or a job's ranks) found and loaded,
//! a run left unfinished finalized first.

use anyhow::{bail, Context, Result};
use memlens_profile::Profile;
use std::path::{Path, PathBuf};

pub(crate) fn finalize_if_needed(dir: &Path) -> Result<()> {
    if dir.join(memlens_profile::META_FILE).exists() {
        return Ok(());
    }
    if !dir.join(memlens_profile::RAW_DIR).is_dir() {
        bail!(memlens_profile::ProfileError::NotAProfile(
            dir.to_path_buf()
        ));
    }
    // Two reports of a fresh transparent-mode directory: one finalizes it.
    let _lock = memlens_profile::lock_dir(dir, true)?;
    if dir.join(memlens_profile::META_FILE).exists() {
        return Ok(());
    }
    let run = memlens_collector::RunInfo {
        interval_ms: 10,
        ..Default::default()
    };
    // Inside the caller's "reading" step: no bar of its own.
    memlens_collector::finalize(dir, &run, None, None, &|_, _| {})?;
    Ok(())
}

/// One profile directory, or the profiles in its subdirectories (MPI ranks),
/// finalized.
pub(crate) fn profile_parts(dir: &Path) -> Result<Vec<PathBuf>> {
    if !dir.exists() {
        bail!(
            "{}: no such directory; give the directory `memlens record` printed",
            dir.display()
        );
    }
    let is_profile = |p: &Path| {
        p.join(memlens_profile::META_FILE).exists() || p.join(memlens_profile::RAW_DIR).is_dir()
    };
    let mut parts = if is_profile(dir) {
        vec![dir.to_path_buf()]
    } else {
        std::fs::read_dir(dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| is_profile(p))
            .collect()
    };
    parts.sort();
    if parts.is_empty() {
        bail!(memlens_profile::ProfileError::NotAProfile(
            dir.to_path_buf()
        ));
    }
    for part in &parts {
        finalize_if_needed(part)?;
    }
    Ok(parts)
}

/// Loads one profile, or all profiles in subdirectories (MPI ranks) merged.
pub(crate) fn load(dir: &Path) -> Result<Profile> {
    load_parts(dir, &profile_parts(dir)?)
}

/// The profiles `parts` of `dir`, merged when they are several.
pub(crate) fn load_parts(dir: &Path, parts: &[PathBuf]) -> Result<Profile> {
    if let [one] = parts {
        return Ok(Profile::load(one)?);
    }
    let profiles = parts
        .iter()
        .map(|part| Profile::load(part))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(memlens_profile::merge(dir, profiles))
}

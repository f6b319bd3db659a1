//! The profile directory and its files: made private to their user, locked
//! while written, read only as regular files of bounded size, and the
//! words an I/O error is told in.

use crate::{ProfileError, Result, CALIBRATION_FILE, META_FILE};
use std::fs::File;
use std::path::{Path, PathBuf};

/// Makes the profile directory `dir`, private to its user (mode 0700) like
/// perf.data; an existing one must be the user's own, so that nobody else's
/// links or files inside can redirect what memlens writes.
pub fn create_private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let io = |cause| ProfileError::CreateDir {
        path: dir.to_path_buf(),
        cause,
    };
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_symlink() => Err(ProfileError::Link(dir.to_path_buf())),
        Ok(m) if !m.is_dir() => Err(ProfileError::NotADirectory(dir.to_path_buf())),
        Ok(m) => {
            // SAFETY: geteuid has no preconditions.
            let me = unsafe { libc::geteuid() };
            if m.uid() != me {
                return Err(ProfileError::NotOwned {
                    path: dir.to_path_buf(),
                    owner: m.uid(),
                });
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(io)?;
            }
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(dir)
                .map_err(io)
        }
        Err(e) => Err(io(e)),
    }
}

/// The file a profile directory is locked through.
pub const LOCK_FILE: &str = ".memlens.lock";

/// An exclusive lock on a profile directory, held while a run or an import
/// writes it (released when dropped).
pub struct DirLock {
    _file: File,
}

/// Locks `dir` (which must exist) for writing; if another memlens holds it,
/// waits for it when `wait`, else says so.
pub fn lock_dir(dir: &Path, wait: bool) -> Result<DirLock> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .map_err(|cause| ProfileError::Io { path, cause })?;
    let mode = if wait {
        libc::LOCK_EX
    } else {
        libc::LOCK_EX | libc::LOCK_NB
    };
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(file.as_raw_fd(), mode) } != 0 {
        return Err(ProfileError::Busy(dir.to_path_buf()));
    }
    Ok(DirLock { _file: file })
}

/// Takes `dir` for a new run: made private if new and locked. An earlier
/// run's data there is moved to `<dir>.old` (replacing what that held, as
/// perf keeps perf.data.old), or removed when `force`; runs never mix.
/// Returns the lock, and where the earlier run went.
pub fn claim_dir(dir: &Path, force: bool) -> Result<(DirLock, Option<PathBuf>)> {
    create_private_dir(dir)?;
    let lock = lock_dir(dir, false)?;
    if !holds_run(dir) {
        return Ok((lock, None));
    }
    if force {
        clear_run(dir)?;
        return Ok((lock, None));
    }
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(".old");
    let old = dir.with_file_name(name);
    create_private_dir(&old)?;
    let _old_lock = lock_dir(&old, false)?;
    clear_run(&old)?;
    let raw = dir.join(RAW_DIR);
    let old_raw = old.join(RAW_DIR);
    let raw_logs = raw_files(dir);
    if !raw_logs.is_empty() {
        create_private_dir(&old_raw)?;
    }
    let moving = (run_files(dir).into_iter().map(|f| (old.clone(), f)))
        .chain(raw_logs.into_iter().map(|f| (old_raw.clone(), f)));
    for (to_dir, from) in moving {
        let to = to_dir.join(from.file_name().unwrap_or_default());
        std::fs::rename(&from, &to).map_err(|cause| ProfileError::Io { path: from, cause })?;
    }
    // raw/ itself stays if the user keeps files of their own in it.
    let _ = std::fs::remove_dir(&raw);
    Ok((lock, Some(old)))
}

/// The files of a run in a profile directory: its tables, meta.json and the
/// machine calibration it was priced with (its raw logs are in raw/). Only
/// files memlens wrote count, each recognised by its name and its first
/// bytes: a user's own files there are never moved or removed.
fn run_files(dir: &Path) -> Vec<PathBuf> {
    let tables = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .filter(|p| starts_with(p, b"PAR1"));
    [META_FILE, CALIBRATION_FILE]
        .into_iter()
        .map(|f| dir.join(f))
        .filter(|f| starts_with(f, b"{"))
        .chain(tables)
        .collect()
}

/// The name of the directory of raw logs inside a profile directory.
pub const RAW_DIR: &str = "raw";

/// The files in `dir`'s raw/ that memlens wrote: the runtime's logs
/// (`*.mlraw`, starting with the raw log's magic), the collector's log and a
/// perf backend's perf.data (by their names and, for perf.data, its magic).
fn raw_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir.join(RAW_DIR))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| match p.file_name().and_then(|n| n.to_str()) {
            Some(RAW_COLLECTOR_LOG) => regular(p),
            Some(RAW_PERF_DATA) => starts_with(p, b"PERFILE2"),
            Some(n) if n.ends_with(".mlraw") => {
                starts_with(p, &memlens_rawlog::MAGIC.to_le_bytes())
            }
            _ => false,
        })
        .collect()
}

/// The collector's log in raw/ (timeline, exits, untracked processes).
pub const RAW_COLLECTOR_LOG: &str = "collector.mltl";

/// A perf backend's samples in raw/, saved while the run goes on.
pub const RAW_PERF_DATA: &str = "perf.data";

fn regular(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
}

/// Whether `path` is a regular file (not a link) whose content starts with `magic`.
fn starts_with(path: &Path, magic: &[u8]) -> bool {
    use std::io::Read;
    let mut head = vec![0; magic.len()];
    open_regular(path).is_ok_and(|mut f| f.read_exact(&mut head).is_ok() && head == magic)
}

/// Whether `dir` holds data of a run: a profile, or raw logs.
fn holds_run(dir: &Path) -> bool {
    !raw_files(dir).is_empty() || !run_files(dir).is_empty()
}

/// Removes a run's data from `dir` (see [`holds_run`]), leaving other files.
fn clear_run(dir: &Path) -> Result<()> {
    remove_raw_files(dir)?;
    for f in run_files(dir) {
        std::fs::remove_file(&f).map_err(|cause| ProfileError::Io { path: f, cause })?;
    }
    Ok(())
}

/// Removes the raw logs memlens wrote in `dir`'s raw/, and raw/ itself if
/// nothing else is left in it.
pub fn remove_raw_files(dir: &Path) -> Result<()> {
    for f in raw_files(dir) {
        std::fs::remove_file(&f).map_err(|cause| ProfileError::Io { path: f, cause })?;
    }
    let raw = dir.join(RAW_DIR);
    match std::fs::remove_dir(&raw) {
        Err(e)
            if e.raw_os_error() == Some(libc::ENOTEMPTY)
                || e.kind() == std::io::ErrorKind::NotFound =>
        {
            Ok(())
        }
        r => r.map_err(|cause| ProfileError::Io { path: raw, cause }),
    }
}

/// Opens a file of a profile for reading, only if it is a regular file. A
/// profile someone else made may hold a link to /dev/zero or a FIFO in a
/// file's place, which would make a reader grow without end or wait forever:
/// the last component is not followed, and opening a FIFO does not wait.
pub fn open_regular(path: &Path) -> Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let not_regular = || ProfileError::NotARegularFile(path.to_path_buf());
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|cause| match cause.raw_os_error() {
            Some(libc::ELOOP) => not_regular(),
            _ => ProfileError::Io {
                path: path.to_path_buf(),
                cause,
            },
        })?;
    match file.metadata() {
        Ok(m) if m.is_file() => Ok(file),
        Ok(_) => Err(not_regular()),
        Err(cause) => Err(ProfileError::Io {
            path: path.to_path_buf(),
            cause,
        }),
    }
}

/// Reads a whole text file of a profile (meta.json, a calibration): a
/// regular file of at most `limit` bytes.
pub fn read_small_text(path: &Path, limit: u64) -> Result<String> {
    use std::io::Read;
    let file = open_regular(path)?;
    let io = |cause| ProfileError::Io {
        path: path.to_path_buf(),
        cause,
    };
    let size = file.metadata().map_err(io)?.len();
    if size > limit {
        return Err(ProfileError::TooLarge {
            path: path.to_path_buf(),
            size,
            limit,
        });
    }
    let mut text = String::new();
    file.take(limit).read_to_string(&mut text).map_err(io)?;
    Ok(text)
}

/// What a user is told when [`claim_dir`] kept an earlier run aside.
pub fn kept_aside_note(dir: &Path, old: &Path) -> String {
    format!(
        "memlens: moved the earlier run in {} to {} (--force replaces it instead)",
        dir.display(),
        old.display()
    )
}

/// Writes a whole file readable by its user only (see [`create_private_file`]).
pub fn write_private_file(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    create_private_file(path)?
        .write_all(bytes)
        .map_err(|cause| ProfileError::Output {
            path: path.to_path_buf(),
            cause,
        })
}

/// What went wrong writing a file, in words (the system's message without
/// its error number).
pub fn io_words(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "its directory does not exist".into(),
        _ => error_words(e),
    }
}

/// What went wrong with a file, in words.
pub fn error_words(e: &std::io::Error) -> String {
    use std::io::ErrorKind::*;
    match e.kind() {
        NotFound => "no such file or directory".into(),
        PermissionDenied => "permission denied".into(),
        StorageFull => "the disk is full".into(),
        ReadOnlyFilesystem => "the file system is read-only".into(),
        IsADirectory => "it is a directory".into(),
        NotADirectory => "a part of its path is not a directory".into(),
        _ => {
            let text = e.to_string();
            match text.split_once(" (os error") {
                Some((words, _)) => words.to_lowercase(),
                None => text,
            }
        }
    }
}

/// Creates (or truncates) a file of the profile, readable by its user only;
/// what is made from a profile (a report, a plot, an export) is as private
/// as the profile. A file that exists keeps the mode it has.
pub fn create_private_file(path: &Path) -> Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|cause| ProfileError::Output {
            path: path.to_path_buf(),
            cause,
        })
}

//! A profile directory removed while the program ran: the default one is in
//! the program's working directory, which a program (a test harness, a build
//! step) may remove. The files of the run stay readable through the
//! descriptors memlens holds, and are written to a new directory.

use crate::{Error, Result};
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Descriptors memlens leaves to itself (perf rings, debug information read
/// ahead, the tables it writes) below its open-file limit.
const OWN_DESCRIPTORS: u64 = 512;

/// The files of the run, each open to the end, by its path in the profile.
pub(crate) struct KeptFiles {
    files: Vec<(PathBuf, File)>,
    /// How many may be kept open.
    room: usize,
    /// Files not kept: past the room, or their descriptor could not be duplicated.
    not_kept: u64,
}

impl Default for KeptFiles {
    fn default() -> Self {
        KeptFiles {
            files: Vec::new(),
            room: 64,
            not_kept: 0,
        }
    }
}

impl KeptFiles {
    /// Raises memlens' own limit on open files to the hard limit, to keep a
    /// log of every process of the run open. Called once the program has
    /// started: it and its children keep the limit they were given.
    pub(crate) fn make_room(&mut self) {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: get/setrlimit with a valid struct.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
                return;
            }
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max.min(1 << 20),
                ..limit
            };
            if raised.rlim_cur > limit.rlim_cur
                && libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0
            {
                limit = raised;
            }
        }
        self.room = (limit.rlim_cur.saturating_sub(OWN_DESCRIPTORS) as usize).max(self.room);
    }

    /// Keeps `file`, at `path` in the profile directory, open to the end of the run.
    pub(crate) fn keep(&mut self, path: impl Into<PathBuf>, file: &File) {
        if self.files.len() >= self.room {
            self.not_kept += 1;
            return;
        }
        match file.try_clone() {
            Ok(kept) => self.files.push((path.into(), kept)),
            Err(_) => self.not_kept += 1,
        }
    }
}

/// The profile directory and its raw/ as created: whether a program removed them.
pub(crate) struct DirWatch {
    dirs: Vec<File>,
}

impl DirWatch {
    pub(crate) fn new(out_dir: &Path, raw_dir: &Path) -> Result<DirWatch> {
        let open = |dir: &Path| File::open(dir).map_err(|e| Error::io(dir, e));
        Ok(DirWatch {
            dirs: vec![open(out_dir)?, open(raw_dir)?],
        })
    }

    /// A directory removed has no links left, though it stays open.
    pub(crate) fn removed(&self) -> bool {
        (self.dirs.iter()).any(|d| d.metadata().is_ok_and(|m| m.nlink() == 0))
    }
}

/// Writes the kept files of a run whose profile directory `old` (absolute)
/// was removed to a new directory: `old` again if its parent is still
/// there, else one in the temporary directory. Returns it, locked, and says
/// so on one line.
pub(crate) fn rescue(old: &Path, kept: KeptFiles) -> Result<(memlens_profile::DirLock, PathBuf)> {
    let name = old.file_name().unwrap_or_default().to_os_string();
    let temp = std::env::temp_dir();
    let candidates = std::iter::once(old.to_path_buf())
        .filter(|p| p.parent().is_some_and(Path::is_dir))
        .chain((0..1000).map(|n| {
            let mut name = name.clone();
            if n > 0 {
                name.push(format!(".{n}"));
            }
            temp.join(name)
        }));
    let Some(dir) = candidates.into_iter().find(|p| !p.exists()) else {
        return Err(Error::Usage(format!(
            "{}: the profile directory was removed while the program ran, and no new one could be made in {}; set TMPDIR to a writable directory",
            old.display(),
            temp.display()
        )));
    };
    let lock = write_to(&dir, &kept)?;
    let lost = match kept.not_kept {
        0 => String::new(),
        n => format!(" ({n} files of the run past memlens' open-file limit are lost)"),
    };
    eprintln!(
        "memlens: {} was removed while the program ran; the run up to then, and its processes already started, are written from the files memlens held open to {}{lost}",
        old.display(),
        dir.display()
    );
    Ok((lock, dir))
}

fn write_to(dir: &Path, kept: &KeptFiles) -> Result<memlens_profile::DirLock> {
    use std::os::fd::AsRawFd;
    let (lock, _) = memlens_profile::claim_dir(dir, false)?;
    for (path, file) in &kept.files {
        let to = dir.join(path);
        if let Some(parent) = to.parent() {
            memlens_profile::create_private_dir(parent)?;
        }
        let mut out = memlens_profile::create_private_file(&to)?;
        // Opened anew for reading, from its start: a file removed is still
        // reachable through its descriptor's link in /proc.
        File::open(format!("/proc/self/fd/{}", file.as_raw_fd()))
            .and_then(|mut from| std::io::copy(&mut from, &mut out))
            .map_err(|e| Error::io(&to, e))?;
    }
    Ok(lock)
}

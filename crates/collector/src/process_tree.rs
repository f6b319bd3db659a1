//! The run's processes as /proc shows them: the tree under memlens, and
//! whether the runtime can enter a program at all.

use memlens_rawlog::procfs;
use std::path::Path;

/// The parent of `pid`, from /proc/PID/stat.
pub(crate) fn procfs_ppid(pid: u32) -> Option<u32> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    procfs::stat_field(&stat, 1).map(|p| p as u32)
}

/// Every process descended from `root` (read from /proc): with memlens as
/// their subreaper, the whole tree of the run, orphans included.
pub(crate) fn descendants(root: u32) -> Vec<u32> {
    static HAS_CHILDREN_LISTS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let lists = *HAS_CHILDREN_LISTS.get_or_init(|| {
        // SAFETY: gettid cannot fail.
        let tid = unsafe { libc::gettid() };
        Path::new(&format!("/proc/self/task/{tid}/children")).exists()
    });
    match lists {
        true => descendants_by_children_lists(root),
        false => descendants_by_parents(root),
    }
}

/// [`descendants`] from each thread's list of children (Linux's
/// CONFIG_PROC_CHILDREN): a read per thread of the run's processes, where
/// reading every process's parent costs one per process of the machine,
/// every 100 ms of a run.
fn descendants_by_children_lists(root: u32) -> Vec<u32> {
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", tree[i]));
        for task in tasks.into_iter().flatten().flatten() {
            // A process that ended meanwhile has no list: its children are
            // re-parented to memlens, and found at the next look.
            if let Ok(children) = std::fs::read_to_string(task.path().join("children")) {
                let new = children
                    .split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok());
                tree.extend(new);
            }
        }
        i += 1;
    }
    tree.remove(0);
    tree
}

/// [`descendants`] from every process's parent.
fn descendants_by_parents(root: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some(ppid) = procfs_ppid(pid) {
            parent_of.push((pid, ppid));
        }
    }
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let p = tree[i];
        tree.extend(
            parent_of
                .iter()
                .filter(|&&(_, pp)| pp == p)
                .map(|&(c, _)| c),
        );
        i += 1;
    }
    tree.remove(0);
    tree
}

/// Why the runtime cannot be loaded into the program at `path`, if it cannot:
/// the dynamic loader does not run for a static program, and ignores
/// LD_PRELOAD paths for a setuid or setgid one.
pub(crate) fn runtime_cannot_load(path: &Path) -> Option<&'static str> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    // SAFETY: getters without preconditions.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if meta.mode() & libc::S_ISUID != 0 && meta.uid() != uid {
        return Some("setuid");
    }
    if meta.mode() & libc::S_ISGID != 0 && meta.gid() != gid {
        return Some("setgid");
    }
    // Only the ELF header and program headers are read, not the whole file.
    use object::read::elf::{FileHeader, ProgramHeader};
    let file = object::ReadCache::new(std::fs::File::open(path).ok()?);
    let header = object::elf::FileHeader64::<object::Endianness>::parse(&file).ok()?;
    let endian = header.endian().ok()?;
    let interp = (header.program_headers(endian, &file).ok()?)
        .iter()
        .any(|ph| ph.p_type(endian) == object::elf::PT_INTERP);
    (!interp).then_some("statically linked")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The children lists and every process's parent give the same tree.
    #[test]
    fn descendants_from_children_lists_and_from_parents_agree() {
        let mut sh = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30 & (sleep 30 & wait) & wait"])
            .spawn()
            .unwrap();
        let root = sh.id();
        let started = std::time::Instant::now();
        let mut by_parents = descendants_by_parents(root);
        while by_parents.len() < 4 && started.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
            by_parents = descendants_by_parents(root);
        }
        let mut by_lists = descendants_by_children_lists(root);
        for pid in &by_parents {
            // SAFETY: a signal to a sleeper this test started.
            unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
        }
        let _ = sh.kill();
        let _ = sh.wait();
        by_parents.sort_unstable();
        by_lists.sort_unstable();
        assert_eq!(by_parents.len(), 4, "its subshell and three sleepers");
        assert_eq!(by_lists, by_parents);
        assert!(!by_lists.contains(&root));
    }
}

//! What memory an address no object covers is: an image, the heap around
//! recorded blocks, a mapping, the kernel's; for the samples left unattributed.

use crate::Profile;
use memlens_profile::Backend;
use std::collections::BTreeMap;

/// Tells what memory an address no object covers is: the kernel's, a loaded
/// image's bytes outside its symbols, memory mapped without a file, memory a
/// block or mapping held at another time (the allocator's free chunks and
/// headers), or memory memlens saw nothing map.
pub(super) struct MemoryMap {
    /// (pid, start) -> (end, what its bytes are) of each mapping the profile
    /// lists (an import lists perf's, anonymous ones included).
    images: BTreeMap<(u32, u64), (u64, String)>,
    /// (pid, start) -> end of the merged extents any allocation row held.
    held: BTreeMap<(u32, u64), u64>,
    every_block: bool,
    /// An imported perf.data: no blocks, mappings or statics were recorded.
    imported: bool,
}

impl MemoryMap {
    pub(super) fn new(p: &Profile) -> Self {
        let imported = p.meta.has(Backend::PerfDataImport);
        let images = (p.modules.iter())
            .map(|m| {
                let name = m.path.rsplit('/').next().unwrap_or(&m.path);
                let what = if is_anonymous(&m.path) {
                    "anonymous memory (mapped without a file: heap arenas, thread stacks, JIT code)".to_string()
                } else if imported {
                    format!("{name}'s image (an import names no static variables)")
                } else {
                    format!("{name}'s image outside its symbols (relocations, a stripped library's data)")
                };
                ((m.pid, m.start), (m.end, what))
            })
            .collect();
        let mut extents: Vec<(u32, u64, u64)> = (p.allocations.iter())
            .map(|a| {
                (
                    a.pid,
                    a.address,
                    a.address.saturating_add(a.usable_size.max(a.size)),
                )
            })
            .collect();
        extents.sort_unstable();
        let mut held = BTreeMap::new();
        let mut last: Option<(u32, u64, u64)> = None;
        for (pid, start, end) in extents {
            match &mut last {
                Some((p, _, e)) if *p == pid && start <= e.saturating_add(HEADER_GAP) => {
                    *e = (*e).max(end)
                }
                _ => {
                    if let Some((p, s, e)) = last.replace((pid, start, end)) {
                        held.insert((p, s), e);
                    }
                }
            }
        }
        if let Some((p, s, e)) = last {
            held.insert((p, s), e);
        }
        MemoryMap {
            images,
            held,
            every_block: p.meta.settings.sample_rate == 1,
            imported,
        }
    }

    /// Looked up for every sample on no object: described once per image.
    pub(super) fn what(&self, pid: u32, addr: u64) -> &str {
        // Linux gives the kernel the upper half of the address space (x86-64
        // and AArch64 alike).
        if addr >> 63 == 1 {
            return "kernel memory (touched by the kernel in a system call or interrupt)";
        }
        let image = (self.images.range(..=(pid, addr)).next_back())
            .filter(|(&(p, _), (end, _))| p == pid && *end > addr);
        if let Some((_, (_, what))) = image {
            return what;
        }
        let held = (self.held.range(..=(pid, addr)).next_back())
            .is_some_and(|(&(p, _), &end)| p == pid && end > addr);
        if held {
            "heap memory outside the blocks live then (the allocator's chunk headers and free chunks, or a block touched after its free)"
        } else if self.imported {
            "memory no mapping in the perf.data covers (mapped before perf started, or not its process's)"
        } else if self.every_block {
            "memory no recorded block, mapping or image covers (mapped before memlens started, by a raw system call, or by the kernel)"
        } else {
            "memory no recorded block, mapping or image covers (heap blocks the byte sampler skipped: `--leaks` records every block)"
        }
    }
}

/// Bytes between two blocks that are still the allocator's (glibc's chunk
/// header is 16, jemalloc and mimalloc have none).
const HEADER_GAP: u64 = 32;

/// Names perf gives mappings without a file (`//anon`, `/anon_hugepage`,
/// `[heap]`, `[stack]`), and shared anonymous memory.
fn is_anonymous(path: &str) -> bool {
    [
        "//anon",
        "/anon_hugepage",
        "[heap]",
        "[stack",
        "[anon:",
        "/dev/zero",
        "/SYSV",
        "/memfd:",
    ]
    .iter()
    .any(|prefix| path.starts_with(prefix))
}

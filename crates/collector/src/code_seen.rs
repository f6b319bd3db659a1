//! Which modules a running image's code addresses fall in, for the debug
//! information read ahead while it runs: its call stacks and sampled
//! accesses name the modules the finalizer will symbolize, usually a few of
//! those it maps (STREAM's frames are in the program and libc, not in libm,
//! ld.so or libgcc_s, whose DWARF read ahead cost the run ~10 ms of the
//! second core and 9 MB).

use crate::finalize::{module_def, stack_def};
use memlens_convert::symbols::LoadedModule;
use memlens_rawlog::{self as raw, tag, RawRecord};
use std::collections::HashSet;

/// Log bytes looked at per image; past them a long run's every module is
/// read ahead as it is mapped, and the log is not read twice while it runs
/// (unless its samples are written while it runs).
const FOLLOWED_BYTES: u64 = 64 << 20;

pub(crate) struct CodeSeen {
    /// The image's modules as its runtime logged them.
    modules: Vec<LoadedModule>,
    /// Code addresses seen since the last [`CodeSeen::request_new`].
    addresses: Vec<u64>,
    /// Modules whose debug information was asked for, by index.
    requested: HashSet<usize>,
    followed: u64,
}

impl CodeSeen {
    pub(crate) fn new() -> CodeSeen {
        CodeSeen {
            modules: Vec::new(),
            addresses: Vec::new(),
            requested: HashSet::new(),
            followed: 0,
        }
    }

    /// Whether the log is still looked at for code (else its process's
    /// mapped code is read ahead whole, as it appears).
    pub(crate) fn following(&self) -> bool {
        self.followed < FOLLOWED_BYTES
    }

    /// One record of the log, in each thread's order.
    #[inline]
    pub(crate) fn see(&mut self, rec: &RawRecord<'_>) {
        if !self.following() {
            return;
        }
        self.followed += rec.body.len() as u64;
        match rec.tag {
            tag::MODULE => self.modules.extend(module_def(rec).map(|(_, m)| m)),
            tag::STACK => (self.addresses).extend(stack_def(rec).into_iter().flat_map(|s| s.1)),
            tag::SAMPLE => (self.addresses).extend(rec.payload::<raw::Sample>().map(|s| s.pc)),
            _ => {}
        }
    }

    /// Hands `request` each module the stacks and samples seen since the
    /// last call fall in, once.
    pub(crate) fn request_new(&mut self, request: &mut dyn FnMut(&str)) {
        for addr in std::mem::take(&mut self.addresses) {
            // The latest module over the address, as the finalizer picks it.
            let Some(i) = (self.modules.iter()).rposition(|m| addr >= m.start && addr < m.end)
            else {
                continue; // a module not logged yet: the finalizer reads it
            };
            if self.requested.insert(i) {
                // The symbolizer takes a module by its canonical path.
                let path = &self.modules[i].path;
                let canonical = std::fs::canonicalize(path)
                    .map_or(path.clone(), |p| p.to_string_lossy().into_owned());
                request(&canonical);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tail::test_log::{push, write_block};
    use crate::tail::LogTail;

    fn module(body: &mut Vec<u8>, path: &str, start: u64, end: u64) {
        let m = raw::Module {
            start,
            end,
            path_len: path.len() as u32,
            ..Default::default()
        };
        push(body, tag::MODULE, &m, path.as_bytes());
    }

    #[test]
    fn only_modules_that_stacks_and_samples_fall_in_are_requested() {
        let mut body = Vec::new();
        module(&mut body, "/nonexistent/program", 0x1000, 0x2000);
        module(&mut body, "/nonexistent/libc.so.6", 0x10000, 0x20000);
        module(&mut body, "/nonexistent/libm.so.6", 0x30000, 0x40000);
        module(&mut body, "/nonexistent/plugin.so", 0x50000, 0x60000);
        let frames: Vec<u8> = [0x1234u64, 0x10500, 0x1300]
            .iter()
            .flat_map(|a| a.to_le_bytes())
            .collect();
        let stack = raw::StackDef {
            id: 7,
            frames: 3,
            _pad: 0,
        };
        push(&mut body, tag::STACK, &stack, &frames);
        // A sample in code no stack of the log passes through.
        let sample = raw::Sample {
            pc: 0x50010,
            stack: 7,
            ..Default::default()
        };
        push(&mut body, tag::SAMPLE, &sample, &[]);
        // An address outside every module is left to the finalizer.
        let sample = raw::Sample {
            pc: 0x99999,
            ..Default::default()
        };
        push(&mut body, tag::SAMPLE, &sample, &[]);

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1.0.mlraw");
        write_block(&mut std::fs::File::create(&path).unwrap(), 0, 1, &body);
        let log = std::fs::File::open(&path).unwrap();
        let (mut tail, mut seen) = (LogTail::new(), CodeSeen::new());
        let mut requested = Vec::new();
        let mut update = |seen: &mut CodeSeen, requested: &mut Vec<String>| {
            tail.read_new(&log, &mut |_, rec| seen.see(&rec));
            seen.request_new(&mut |p| requested.push(p.to_string()));
        };
        update(&mut seen, &mut requested);
        assert_eq!(
            requested,
            [
                "/nonexistent/program",
                "/nonexistent/libc.so.6",
                "/nonexistent/plugin.so"
            ]
        );
        // Each once: the log read again asks for nothing more.
        update(&mut seen, &mut requested);
        assert_eq!(requested.len(), 3);
        assert!(seen.following());
    }
}

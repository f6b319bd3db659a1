//! The code addresses a running image's log names (its stacks' return
//! addresses, its instrumented accesses' PCs), by module, for the symbolizer
//! that works while it runs: the finalizer then finds them resolved, and
//! reads the DWARF of the modules they fall in only (STREAM's frames are in
//! the program and libc, not in libm, ld.so or libgcc_s, whose DWARF read
//! ahead cost the run ~10 ms of the second core and 9 MB).

use crate::image::{module_def, stack_def};
use memlens_convert::symbols::LoadedModule;
use memlens_rawlog::{self as raw, tag, RawRecord};
use std::collections::HashSet;

/// Log bytes looked at per image by a reader that reads the log for its
/// code alone; past them a long run's every module is read ahead as it is
/// mapped, and the log is not read twice while it runs (unless its samples
/// are written while it runs). A replay during the run reads every record:
/// it looks at all of them.
const FOLLOWED_BYTES: u64 = 64 << 20;

pub(crate) struct CodeSeen {
    /// The image's modules as its runtime logged them.
    modules: Vec<LoadedModule>,
    /// Log bytes looked at before the reader stops looking.
    limit: u64,
    /// Code addresses seen since the last [`CodeSeen::request_new`].
    addresses: Vec<u64>,
    /// Every address handed on (each once).
    requested: HashSet<u64>,
    followed: u64,
}

impl CodeSeen {
    /// For a reader of the log's code alone.
    pub(crate) fn new() -> CodeSeen {
        CodeSeen::looking_at(FOLLOWED_BYTES)
    }

    /// For a replay during the run, which reads the whole log anyway.
    pub(crate) fn whole_log() -> CodeSeen {
        CodeSeen::looking_at(u64::MAX)
    }

    fn looking_at(limit: u64) -> CodeSeen {
        CodeSeen {
            modules: Vec::new(),
            limit,
            addresses: Vec::new(),
            requested: HashSet::new(),
            followed: 0,
        }
    }

    /// Whether the log is still looked at for code (else its process's
    /// mapped code is read ahead whole, as it appears).
    pub(crate) fn following(&self) -> bool {
        self.followed < self.limit
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
            tag::STACK => {
                let frames = stack_def(rec).map(|s| s.1).unwrap_or_default();
                self.addresses.extend(frames);
            }
            tag::SAMPLE => self
                .addresses
                .extend(rec.payload::<raw::Sample>().map(|s| s.pc)),
            _ => {}
        }
    }

    /// The module an address falls in, by index: the latest logged over it,
    /// as the finalizer picks it.
    fn module_of(&self, addr: u64) -> Option<usize> {
        (self.modules.iter()).rposition(|m| addr >= m.start && addr < m.end)
    }

    /// Hands `resolve` the addresses seen since the last call and never
    /// before, by the module they fall in (an address outside every module
    /// logged so far is left to the finalizer).
    pub(crate) fn request_new(&mut self, resolve: &mut dyn FnMut(&LoadedModule, Vec<u64>)) {
        let mut by_module: Vec<(usize, Vec<u64>)> = Vec::new();
        for addr in std::mem::take(&mut self.addresses) {
            let Some(i) = self.module_of(addr) else {
                continue;
            };
            if !self.requested.insert(addr) {
                continue;
            }
            match by_module.iter_mut().find(|(m, _)| *m == i) {
                Some((_, addrs)) => addrs.push(addr),
                None => by_module.push((i, vec![addr])),
            }
        }
        for (i, addrs) in by_module {
            resolve(&self.modules[i], addrs);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tail::test_log::{push, write_block};
    use crate::tail::LogTail;

    fn module(body: &mut Vec<u8>, path: &str, start: u64, end: u64) {
        module_at(
            body,
            &LoadedModule {
                path: path.into(),
                start,
                end,
                bias: 0,
            },
        );
    }

    fn module_at(body: &mut Vec<u8>, m: &LoadedModule) {
        let (path, start, end, bias) = (&m.path, m.start, m.end, m.bias);
        let m = raw::Module {
            start,
            end,
            bias,
            path_len: path.len() as u32,
            ..Default::default()
        };
        push(body, tag::MODULE, &m, path.as_bytes());
    }

    #[test]
    fn each_address_in_a_module_is_handed_on_once_with_its_module() {
        let mut body = Vec::new();
        module(&mut body, "/nonexistent/program", 0x1000, 0x2000);
        module(&mut body, "/nonexistent/libc.so.6", 0x10000, 0x20000);
        module(&mut body, "/nonexistent/libm.so.6", 0x30000, 0x40000);
        module(&mut body, "/nonexistent/plugin.so", 0x50000, 0x60000);
        stack(&mut body, 7, &[0x10500, 0x1234, 0x1300]);
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

        let mut log = Followed::new();
        log.write(0, &body);
        assert_eq!(
            log.requested(),
            [
                ("/nonexistent/libc.so.6".to_string(), vec![0x10500]),
                ("/nonexistent/program".to_string(), vec![0x1234, 0x1300]),
                ("/nonexistent/plugin.so".to_string(), vec![0x50010]),
            ]
        );
        // Each once: a later stack through the same code asks for its new
        // address alone.
        body.clear();
        stack(&mut body, 8, &[0x1240, 0x1234, 0x1300]);
        log.write(1, &body);
        assert_eq!(
            log.requested(),
            [("/nonexistent/program".to_string(), vec![0x1240])]
        );
        assert!(log.seen.following());
    }

    /// A log written block by block, followed as the collector does.
    struct Followed {
        _dir: tempfile::TempDir,
        file: std::fs::File,
        log: std::fs::File,
        tail: LogTail,
        seen: CodeSeen,
    }

    impl Followed {
        fn new() -> Followed {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("1.0.mlraw");
            let file = std::fs::File::create(&path).unwrap();
            let log = std::fs::File::open(&path).unwrap();
            let (tail, seen) = (LogTail::new(), CodeSeen::new());
            Followed {
                _dir: dir,
                file,
                log,
                tail,
                seen,
            }
        }

        fn write(&mut self, index: u64, body: &[u8]) {
            write_block(&mut self.file, index, 1, body);
        }

        /// The addresses handed on since the last call, with their
        /// modules' paths, reading what is new.
        fn requested(&mut self) -> Vec<(String, Vec<u64>)> {
            let seen = &mut self.seen;
            self.tail.read_new(&self.log, &mut |_, rec| seen.see(&rec));
            let mut requested = Vec::new();
            seen.request_new(&mut |m, addrs| requested.push((m.path.clone(), addrs)));
            requested
        }
    }

    fn stack(body: &mut Vec<u8>, id: u64, frames: &[u64]) {
        let def = raw::StackDef {
            id,
            frames: frames.len() as u32,
            _pad: 0,
        };
        let bytes: Vec<u8> = frames.iter().flat_map(|a| a.to_le_bytes()).collect();
        push(body, tag::STACK, &def, &bytes);
    }
}

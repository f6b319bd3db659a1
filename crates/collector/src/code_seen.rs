//! Which modules a running image's code addresses fall in, for the debug
//! information read ahead while it runs: its call stacks and sampled
//! accesses name the modules the finalizer will symbolize, usually a few of
//! those it maps (STREAM's frames are in the program and libc, not in libm,
//! ld.so or libgcc_s, whose DWARF read ahead cost the run ~10 ms of the
//! second core and 9 MB).

use crate::image::{module_def, stack_def};
use memlens_convert::symbols::{is_c_library, LoadedModule, Wanted};
use memlens_rawlog::{self as raw, tag, RawRecord};
use std::collections::HashSet;

/// Log bytes looked at per image; past them a long run's every module is
/// read ahead as it is mapped, and the log is not read twice while it runs
/// (unless its samples are written while it runs).
const FOLLOWED_BYTES: u64 = 64 << 20;

pub(crate) struct CodeSeen {
    /// The image's modules as its runtime logged them.
    modules: Vec<LoadedModule>,
    /// Code addresses seen since the last [`CodeSeen::request_new`], and
    /// whether each is one of a stack's outermost frames in the C library.
    addresses: Vec<(u64, bool)>,
    /// What was asked for of each module, by index.
    requested: HashSet<(usize, Wanted)>,
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
            tag::STACK => {
                let frames = stack_def(rec).map(|s| s.1).unwrap_or_default();
                let entry = self.c_library_entry(&frames);
                let flagged = frames
                    .iter()
                    .enumerate()
                    .map(|(k, &a)| (a, entry.contains(&k)));
                self.addresses.extend(flagged);
            }
            tag::SAMPLE => {
                (self.addresses).extend(rec.payload::<raw::Sample>().map(|s| (s.pc, false)))
            }
            _ => {}
        }
    }

    /// The module an address falls in, by index: the latest logged over it,
    /// as the finalizer picks it.
    fn module_of(&self, addr: u64) -> Option<usize> {
        (self.modules.iter()).rposition(|m| addr >= m.start && addr < m.end)
    }

    /// The frames of a stack (innermost first) that are its outermost run in
    /// the C library, before the program's `_start` if it comes last: the
    /// process's and threads' entry functions, which the symbolizer names
    /// from the symbol table (`memlens_convert::symbols`). Only a frame in
    /// any other of its functions asks for the C library's DWARF. (A stack
    /// cut short inside the C library is taken for entry frames too: the
    /// finalizer then reads its DWARF itself, later but the same.) Judged by
    /// module, not symbol: reading libc's symbol table here stalled the
    /// collector's ticks by tens of milliseconds.
    fn c_library_entry(&self, frames: &[u64]) -> std::ops::Range<usize> {
        let in_c_library = |a: u64| {
            self.module_of(a)
                .is_some_and(|i| is_c_library(&self.modules[i].path))
        };
        let mut end = frames.len();
        if end > 0 && !in_c_library(frames[end - 1]) {
            end -= 1;
        }
        let mut start = end;
        while start > 0 && in_c_library(frames[start - 1]) {
            start -= 1;
        }
        start..end
    }

    /// Hands `request` each module the stacks and samples seen since the
    /// last call fall in, once: its function symbols for a C library entry
    /// frame, its DWARF for any other.
    pub(crate) fn request_new(&mut self, request: &mut dyn FnMut(&str, Wanted)) {
        for (addr, entry) in std::mem::take(&mut self.addresses) {
            let Some(i) = self.module_of(addr) else {
                continue; // a module not logged yet: the finalizer reads it
            };
            let wanted = if entry {
                Wanted::Functions
            } else {
                Wanted::Debug
            };
            if !self.requested.insert((i, wanted)) {
                continue;
            }
            // The symbolizer takes a module by its canonical path.
            let path = &self.modules[i].path;
            let canonical = std::fs::canonicalize(path)
                .map_or(path.clone(), |p| p.to_string_lossy().into_owned());
            request(&canonical, wanted);
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
    fn only_modules_that_stacks_and_samples_fall_in_are_requested() {
        let mut body = Vec::new();
        module(&mut body, "/nonexistent/program", 0x1000, 0x2000);
        module(&mut body, "/nonexistent/libc.so.6", 0x10000, 0x20000);
        module(&mut body, "/nonexistent/libm.so.6", 0x30000, 0x40000);
        module(&mut body, "/nonexistent/plugin.so", 0x50000, 0x60000);
        // A C library function called back into the program (qsort's
        // comparison, say): not an entry frame.
        let frames: Vec<u8> = [0x10500u64, 0x1234, 0x1300]
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

        let mut log = Followed::new();
        log.write(0, &body);
        let (debug, functions) = log.requested();
        assert_eq!(
            debug,
            [
                "/nonexistent/libc.so.6",
                "/nonexistent/program",
                "/nonexistent/plugin.so"
            ]
        );
        assert!(functions.is_empty(), "{functions:?}");
        // Each once: the log read again asks for nothing more.
        assert_eq!(log.requested(), (vec![], vec![]));
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

        /// The modules whose DWARF was asked for since the last call, and
        /// those whose function symbols alone were, reading what is new.
        fn requested(&mut self) -> (Vec<String>, Vec<String>) {
            let seen = &mut self.seen;
            self.tail.read_new(&self.log, &mut |_, rec| seen.see(&rec));
            let (mut debug, mut functions) = (Vec::new(), Vec::new());
            seen.request_new(&mut |p, wanted| match wanted {
                Wanted::Debug => debug.push(p.to_string()),
                Wanted::Functions => functions.push(p.to_string()),
            });
            (debug, functions)
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

    #[test]
    fn the_c_library_is_not_read_for_its_entry_functions_alone() {
        // A thread of this process: its outermost frames are the C library's
        // thread entry (start_thread, clone3), as glibc's backtrace finds them.
        let entry = std::thread::spawn(|| {
            let mut buf = [std::ptr::null_mut(); 64];
            // SAFETY: glibc's backtrace fills at most the buffer's length.
            let n = unsafe { libc::backtrace(buf.as_mut_ptr(), buf.len() as i32) } as usize;
            buf[n.saturating_sub(2)..n]
                .iter()
                .map(|&a| a as u64)
                .collect::<Vec<u64>>()
        })
        .join()
        .unwrap();
        let maps = std::fs::read("/proc/self/maps").unwrap();
        let libc = (maps.split(|&b| b == b'\n'))
            .filter_map(memlens_rawlog::procfs::maps_line)
            .find(|m| (m.start..m.end).contains(&entry[1]))
            .map(|m| {
                let path = String::from_utf8_lossy(m.name);
                LoadedModule::from_mapping(&path, m.start, m.end, m.offset)
            })
            .unwrap();
        assert!(libc.path.contains("/libc.so"), "{}", libc.path);
        let mut body = Vec::new();
        module(&mut body, "/nonexistent/program", 0x1000, 0x2000);
        module_at(&mut body, &libc);
        stack(&mut body, 1, &[0x1234, entry[0], entry[1]]);
        let mut log = Followed::new();
        log.write(0, &body);
        // Its function symbols are read ahead instead, once.
        let (debug, functions) = log.requested();
        assert_eq!(debug, ["/nonexistent/program"]);
        assert_eq!(functions.len(), 1, "{functions:?}");
        assert!(functions[0].contains("/libc.so"), "{functions:?}");
        // A frame in any other function of the C library needs its DWARF.
        body.clear();
        let malloc = libc::malloc as *const () as u64 + 4;
        stack(&mut body, 2, &[malloc, 0x1234, entry[0], entry[1]]);
        log.write(1, &body);
        let (debug, functions) = log.requested();
        assert_eq!(debug.len(), 1, "{debug:?}");
        assert!(debug[0].contains("/libc.so"), "{debug:?}");
        assert!(functions.is_empty(), "{functions:?}");
    }
}

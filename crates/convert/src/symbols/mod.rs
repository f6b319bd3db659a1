//! Symbolization of return addresses (function, file:line, inlined frames) with
//! addr2line, and static data objects from ELF symbol tables, both with the load
//! bias the runtime recorded.

use memlens_profile::{CodeLocation, Frame};
use std::collections::HashMap;
use std::path::Path;

mod elf;
mod files;
mod openmp;
mod read_ahead;
use elf::FunctionTables;
pub use elf::{is_c_library, static_objects};
use files::{debug_file, module_file};
pub use read_ahead::ReadAhead;

/// A loaded object as the runtime saw it.
#[derive(Clone, Debug)]
pub struct LoadedModule {
    pub path: String,
    pub start: u64,
    pub end: u64,
    pub bias: u64,
}

impl LoadedModule {
    /// A module as one of its mappings shows it (/proc/PID/maps, perf's MMAP
    /// records): the load bias from the ELF segment the mapping is of, so
    /// that a non-PIE executable, loaded where it was linked, gets 0;
    /// `start - offset` when the file cannot be read.
    pub fn from_mapping(path: &str, start: u64, end: u64, offset: u64) -> LoadedModule {
        let segment_bias = || {
            use object::{Object, ObjectSegment};
            let file = object::ReadCache::new(std::fs::File::open(path).ok()?);
            let elf = object::File::parse(&file).ok()?;
            // A mapping starts at its segment's first page: lld packs
            // segments without padding, so that page often ends the segment
            // before (Rust programs: the code's mapping at offset 0x12a000,
            // its segment at 0x12aa70, read-only data below it). A mapping
            // split off later in a segment (after RELRO's mprotect) starts
            // inside it. Pages of 4, 16 or 64 KiB (a profile from another
            // machine).
            let first_page = |at: u64| {
                [0x1000u64, 0x4000, 0x10000]
                    .iter()
                    .any(|page| at & !(page - 1) == offset)
            };
            let segment =
                (elf.segments().find(|s| first_page(s.file_range().0))).or_else(|| {
                    elf.segments().find(|s| {
                        let (at, size) = s.file_range();
                        offset >= at && offset - at < size.max(1)
                    })
                })?;
            Some(
                start
                    .wrapping_sub(offset)
                    .wrapping_add(segment.file_range().0)
                    .wrapping_sub(segment.address()),
            )
        };
        LoadedModule {
            path: path.to_string(),
            start,
            end,
            bias: segment_bias().unwrap_or(start.wrapping_sub(offset)),
        }
    }
}

#[derive(Default)]
pub struct Symbolizer {
    /// Each module's DWARF by its canonical path (/lib is /usr/lib on
    /// Debian: the runtime names modules as ld.so did, /proc/PID/maps with
    /// links resolved).
    loaders: HashMap<String, Option<addr2line::Loader>>,
    canonical: HashMap<String, String>,
    functions: FunctionTables,
    /// Work done while the program ran, taken over at the first lookup.
    read_ahead: Option<ReadAhead>,
    /// Frames found for each module offset looked up: a return address
    /// recurs in many stacks (a compiler's allocation wrappers in tens of
    /// thousands), and looking it up and demangling its names again was most
    /// of the symbolizing.
    resolved: HashMap<String, HashMap<u64, Vec<SymbolFrame>>>,
    /// Where the functions of each module with OpenMP bodies outlined by
    /// clang are defined, which names those bodies.
    definitions: HashMap<String, openmp::Definitions>,
}

/// One frame a code address resolves to: module, function, file, line, and
/// whether it is inlined into the next.
pub type SymbolFrame = (String, String, String, u32, bool);

impl Drop for Symbolizer {
    fn drop(&mut self) {
        if let Some(r) = &self.read_ahead {
            r.stop();
        }
    }
}

/// `path` with its links resolved, found once per path (looked up for every
/// address symbolized, without copying the path).
fn canonical_path<'a>(known: &'a mut HashMap<String, String>, path: &str) -> &'a str {
    if !known.contains_key(path) {
        let canonical = std::fs::canonicalize(path)
            .ok()
            .and_then(|p| p.into_os_string().into_string().ok())
            .unwrap_or_else(|| path.to_string());
        known.insert(path.to_string(), canonical);
    }
    &known[path]
}

impl Symbolizer {
    /// A symbolizer that goes on from what `read_ahead` did.
    pub fn with_read_ahead(read_ahead: ReadAhead) -> Symbolizer {
        let mut symbolizer = Symbolizer::default();
        symbolizer.read_ahead = Some(read_ahead);
        symbolizer
    }

    /// Takes over what the read-ahead did (once, at the first lookup: it
    /// works on until then).
    fn adopt_read_ahead(&mut self) {
        if let Some(r) = self.read_ahead.take() {
            *self = r.take();
        }
    }

    fn has_loader(&mut self, path: &str) -> bool {
        let canonical = canonical_path(&mut self.canonical, path);
        self.loaders.contains_key(canonical)
    }

    fn loader(&mut self, path: &str) -> Option<&addr2line::Loader> {
        let canonical = canonical_path(&mut self.canonical, path);
        if !self.loaders.contains_key(canonical) {
            let loader = addr2line::Loader::new(debug_file(path)).ok();
            self.loaders.insert(canonical.to_string(), loader);
        }
        self.loaders[canonical].as_ref()
    }

    /// Whether return address `addr` of module `m` is in one of the C
    /// library's entry functions (named from its symbol table alone).
    fn is_entry_function(&mut self, m: &LoadedModule, addr: u64) -> bool {
        let probe = addr.wrapping_sub(m.bias).wrapping_sub(1);
        self.functions.entry_function(&m.path, probe).is_some()
    }

    /// Frames for one return address, innermost (inlined) first. `depth` numbers
    /// them after the frames already emitted for this stack.
    pub fn frames(
        &mut self,
        modules: &[LoadedModule],
        addr: u64,
        is_return: bool,
    ) -> Vec<SymbolFrame> {
        self.adopt_read_ahead();
        let Some(m) = modules
            .iter()
            .rev()
            .find(|m| addr >= m.start && addr < m.end)
        else {
            return vec![("?".into(), format!("{addr:#x}"), String::new(), 0, false)];
        };
        // A return address points after the call: look up the call itself.
        let probe = addr.wrapping_sub(m.bias).wrapping_sub(is_return as u64);
        if let Some(known) =
            (self.resolved.get(&m.path)).and_then(|by_offset| by_offset.get(&probe))
        {
            return known.clone();
        }
        let frames = self.resolve(m, probe);
        (self.resolved.entry(m.path.clone()).or_default()).insert(probe, frames.clone());
        frames
    }

    /// Frames for offset `probe` of module `m`: they depend on the file
    /// alone, not on where a process mapped it.
    fn resolve(&mut self, m: &LoadedModule, probe: u64) -> Vec<SymbolFrame> {
        let module = short_name(&m.path);
        if let Some(name) = self.functions.entry_function(&m.path, probe) {
            return vec![(module, name.to_string(), String::new(), 0, false)];
        }
        let Some(loader) = self.loader(&m.path) else {
            // An unreadable file: the module and offset, as perf prints them.
            return vec![(
                module.clone(),
                format!("{module}+{probe:#x}"),
                String::new(),
                0,
                false,
            )];
        };
        let mut out = Vec::new();
        if let Ok(mut iter) = loader.find_frames(probe) {
            while let Ok(Some(f)) = iter.next() {
                let function = f
                    .function
                    .as_ref()
                    .and_then(|n| n.raw_name().ok().map(|raw| demangle(&raw)))
                    .unwrap_or_default();
                let (file, line) = f
                    .location
                    .as_ref()
                    .map(|l| (l.file.unwrap_or("").to_string(), l.line.unwrap_or(0)))
                    .unwrap_or_default();
                out.push((module.clone(), function, file, line, true));
            }
        }
        if let Some(last) = out.last_mut() {
            last.4 = false; // the outermost of an inline chain is the real frame
        }
        if out.is_empty() || out.iter().all(|f| f.1.is_empty()) {
            // Without debug information: the symbol whose extent holds the
            // address, else the module and offset (as perf prints them).
            let name = (self.functions.containing(&m.path, probe))
                .map(demangle)
                .unwrap_or_else(|| format!("{module}+{probe:#x}"));
            let (file, line) = out.first().map(|f| (f.2.clone(), f.3)).unwrap_or_default();
            out = vec![(module, name, file, line, false)];
        }
        if out.iter().any(|f| openmp::is_outlined(&f.1)) {
            self.name_outlined(m, &mut out);
        }
        out
    }

    /// Outlined OpenMP bodies among `frames` named after their function.
    fn name_outlined(&mut self, m: &LoadedModule, frames: &mut [SymbolFrame]) {
        let definitions = (self.definitions.entry(m.path.clone()))
            .or_insert_with(|| openmp::Definitions::read(&debug_file(&m.path)));
        for frame in frames.iter_mut().filter(|f| openmp::is_outlined(&f.1)) {
            if let Some(name) = definitions.outlined_name(&frame.2, frame.3) {
                frame.1 = name;
            }
        }
    }

    /// The source location of one sampled access. `after_access`: the address
    /// follows the access (an instrumentation callback's return address), so the
    /// access itself is looked up; hardware samples give the exact PC.
    pub fn location(
        &mut self,
        pid: u32,
        pc: u64,
        modules: &[LoadedModule],
        after_access: bool,
    ) -> CodeLocation {
        let frames = self.frames(modules, pc, after_access);
        // The innermost frame outside the inlined callback is where the access is
        // written in the program.
        let (module, function, file, line, _) = frames
            .into_iter()
            .find(|f| !f.1.starts_with("__sanitizer_cov_"))
            .unwrap_or_default();
        CodeLocation {
            pid,
            pc,
            module,
            function,
            file,
            line,
        }
    }

    /// Symbolized rows for one stack.
    pub fn stack_rows(
        &mut self,
        pid: u32,
        stack_id: u64,
        addrs: &[u64],
        modules: &[LoadedModule],
    ) -> Vec<Frame> {
        let mut rows = Vec::new();
        for &addr in addrs {
            for (module, function, file, line, inlined) in self.frames(modules, addr, true) {
                // The runtime's wrapper of main sits between main and libc.
                if module == memlens_profile::RUNTIME_FILE {
                    continue;
                }
                rows.push(Frame {
                    pid,
                    stack_id,
                    depth: rows.len() as u32,
                    address: addr,
                    module,
                    function,
                    file,
                    line,
                    inlined,
                });
            }
        }
        // Ubuntu 24.04's glibc (2.39) lets the walk go on below start_thread
        // to clone3, where Debian 12's (2.36) ends it: the wrapper is left
        // out, so that a thread's stacks, and the objects and contexts they
        // name, read the same on both (`memlens diff` matches them).
        if rows.last().is_some_and(is_thread_entry_trampoline) {
            rows.pop();
        }
        rows
    }
}

/// The system call wrapper that starts a thread, below `start_thread`.
fn is_thread_entry_trampoline(f: &Frame) -> bool {
    matches!(
        f.function.as_str(),
        "clone3" | "__clone3" | "clone" | "__clone"
    ) && is_c_library(&f.module)
}

/// A symbol's name as the program spells it: demangled only when it is
/// mangled (C++ and Rust legacy `_Z...`, Rust v0 `_R...`). Demangling every
/// name reads a C variable `a` or function `f` as the Itanium type codes for
/// `signed char` and `float`.
pub fn demangle(name: &str) -> String {
    if name.starts_with("_Z") || name.starts_with("_R") {
        addr2line::demangle_auto(name.into(), None).into_owned()
    } else {
        name.to_string()
    }
}

pub fn short_name(path: &str) -> String {
    Path::new(path)
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.to_string())
}

/// Whether `program` was built by `memlens cc`: it calls the sanitizer
/// coverage callbacks the runtime provides.
pub fn is_instrumented(program: &Path) -> bool {
    use object::{Object, ObjectSection};
    let Some(data) = module_file(program) else {
        return false;
    };
    let Ok(file) = object::File::parse(&data) else {
        return false;
    };
    // Its callbacks imported from the preloaded runtime (named in the
    // dynamic string table), or defined in it (the runtime's fast path linked
    // in by LTO, or a static build: the symbol table's). The tables are
    // searched whole: reading every symbol's name took 0.1 s for a compiler
    // that exports its 31,000 functions to plugins.
    let name_start = memchr::memmem::Finder::new(b"\0__sanitizer_cov_");
    [".dynstr", ".strtab"].into_iter().any(|table| {
        (file.section_by_name(table))
            .and_then(|s| s.data().ok())
            .is_some_and(|names| name_start.find(names).is_some())
    })
}

#[cfg(test)]
mod tests {
    use super::elf::FunctionSymbols;
    use super::{
        demangle, is_thread_entry_trampoline, static_objects, LoadedModule, ReadAhead, Symbolizer,
    };
    use memlens_profile::Frame;

    /// Return addresses of a thread of this process, outermost last (the C
    /// library's thread entry), and the C library's mapping that holds it.
    fn thread_stack_and_libc() -> (Vec<u64>, LoadedModule) {
        let stack = std::thread::spawn(|| {
            let mut buf = [std::ptr::null_mut(); 64];
            // SAFETY: glibc's backtrace fills at most the buffer's length.
            let n = unsafe { libc::backtrace(buf.as_mut_ptr(), buf.len() as i32) };
            buf[..n as usize]
                .iter()
                .map(|&a| a as u64)
                .collect::<Vec<u64>>()
        })
        .join()
        .unwrap();
        let libc = mapping_of(*stack.last().unwrap());
        assert!(libc.path.contains("/libc.so"), "{}", libc.path);
        (stack, libc)
    }

    /// The module of this process that holds `addr`, from /proc/self/maps.
    fn mapping_of(addr: u64) -> LoadedModule {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        maps.lines()
            .find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let (start, end) = f[0].split_once('-')?;
                let (start, end) = (
                    u64::from_str_radix(start, 16).ok()?,
                    u64::from_str_radix(end, 16).ok()?,
                );
                let offset = u64::from_str_radix(f[2], 16).ok()?;
                let path = f.get(5)?;
                (start..end)
                    .contains(&addr)
                    .then(|| LoadedModule::from_mapping(path, start, end, offset))
            })
            .expect("the address is mapped from a file")
    }

    #[test]
    fn the_c_librarys_entry_functions_are_named_without_its_dwarf() {
        let (stack, libc) = thread_stack_and_libc();
        let modules = [libc];
        let mut symbolizer = Symbolizer::default();
        let outermost = symbolizer.frames(&modules, *stack.last().unwrap(), true);
        assert_eq!(outermost.len(), 1, "{outermost:?}");
        let (module, function, file, line, inlined) = &outermost[0];
        assert_eq!(module, "libc.so.6");
        assert!(
            ["clone3", "clone"].contains(&function.as_str()),
            "{function}"
        );
        assert_eq!((file.as_str(), *line, *inlined), ("", 0, false));
        assert!(
            symbolizer.loaders.is_empty(),
            "the C library's DWARF was read"
        );
        // Any other function of the C library gets its source line from its
        // DWARF (libc6-dbg, which .ci/run installs).
        let malloc = libc::malloc as *const () as u64 + 4;
        let frames = symbolizer.frames(&modules, malloc, false);
        assert!(
            frames.iter().any(|f| f.2.ends_with("malloc.c") && f.3 > 0),
            "{frames:?}: is libc6-dbg installed?"
        );
        assert_eq!(symbolizer.loaders.len(), 1);
    }

    /// The load bias of this test program's code mapping, as ld.so has it:
    /// Rust links with lld, which packs segments without padding, so the
    /// code mapping's first page also holds the end of the read-only data.
    #[test]
    fn a_code_mapping_gets_its_own_segments_bias() {
        extern "C" fn main_bias(
            info: *mut libc::dl_phdr_info,
            _: usize,
            out: *mut libc::c_void,
        ) -> i32 {
            // SAFETY: ld.so hands the callback valid entries; the first is the program.
            unsafe { *(out as *mut u64) = (*info).dlpi_addr };
            1
        }
        let mut bias = 0u64;
        // SAFETY: the callback writes one u64 through the pointer it is given.
        unsafe {
            libc::dl_iterate_phdr(Some(main_bias), &mut bias as *mut u64 as *mut libc::c_void)
        };
        let code = a_code_mapping_gets_its_own_segments_bias as *const () as u64;
        assert_eq!(mapping_of(code).bias, bias);
    }

    #[test]
    fn what_was_resolved_ahead_is_taken_over_whatever_path_names_the_module() {
        let (stack, libc) = thread_stack_and_libc();
        let exe = mapping_of(stack[0]);
        let link = std::env::temp_dir().join(format!("memlens-read-ahead-{}", std::process::id()));
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&exe.path, &link).unwrap();
        let linked = LoadedModule {
            path: link.to_str().unwrap().to_string(),
            ..exe.clone()
        };
        let read_ahead = ReadAhead::default();
        // The program's DWARF asked for by its name (as /proc shows it), its
        // frame resolved by its link's name (as the runtime logged it).
        read_ahead.request_debug(&exe.path);
        read_ahead.resolve(&linked, vec![stack[0]]);
        read_ahead.resolve(&libc, vec![*stack.last().unwrap()]);
        let started = std::time::Instant::now();
        while read_ahead.pending() {
            assert!(
                started.elapsed().as_secs() < 60,
                "the read-ahead thread never ended its work"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let mut symbolizer = Symbolizer::with_read_ahead(read_ahead.clone());
        let frames = symbolizer.frames(std::slice::from_ref(&linked), stack[0], true);
        std::fs::remove_file(&link).unwrap();
        assert!(
            frames.iter().any(|f| f.1.contains("thread_stack_and_libc")),
            "{frames:?}"
        );
        // One reading of the program's DWARF, none of the C library's (its
        // thread entry is named from its symbol table), both frames found.
        assert_eq!(symbolizer.loaders.len(), 1);
        let probe = |m: &LoadedModule, addr: u64| addr - m.bias - 1;
        let libc_probe = probe(&libc, *stack.last().unwrap());
        assert!(symbolizer.resolved[&libc.path].contains_key(&libc_probe));
        assert!(symbolizer.resolved[&linked.path].contains_key(&probe(&linked, stack[0])));
        // Taken over: the thread takes no more work.
        read_ahead.resolve(&libc, vec![stack[0]]);
        assert!(!read_ahead.pending());
    }

    /// A non-PIE program holds its own copy of `stdout`, named in its symbol
    /// table `stdout@GLIBC_2.2.5` and in its dynamic one `stdout`: one
    /// variable, named as the program names it.
    #[test]
    fn a_variable_is_named_without_its_version_and_listed_once() {
        let dir = tempfile::tempdir().unwrap();
        let (source, program) = (dir.path().join("out.c"), dir.path().join("out"));
        std::fs::write(&source, "#include <stdio.h>\nint counter = 7;\nint main(void) { fputs(\"x\\n\", stdout); return counter; }\n").unwrap();
        let built = std::process::Command::new("gcc")
            .args(["-O2", "-no-pie", "-o"])
            .args([&program, &source])
            .status()
            .unwrap();
        assert!(built.success());
        let module = LoadedModule {
            path: program.to_string_lossy().into_owned(),
            start: 0x400000,
            end: 0x500000,
            bias: 0,
        };
        let names: Vec<String> = static_objects(1, &module)
            .into_iter()
            .map(|o| o.name)
            .collect();
        let count = |n: &str| names.iter().filter(|m| *m == n).count();
        assert_eq!((count("stdout"), count("counter")), (1, 1), "{names:?}");
        assert!(names.iter().all(|n| !n.contains('@')), "{names:?}");
    }

    /// A module file cut short or damaged (replaced while it was read, a
    /// bad download) gives fewer symbols or none, never a panic: names past
    /// the string table, extents past the address space.
    #[test]
    fn a_damaged_module_file_reads_without_a_panic() {
        use object::{Object, ObjectSection};
        let (_, libc) = thread_stack_and_libc();
        let bytes = std::fs::read(&libc.path).unwrap();
        assert!(FunctionSymbols::read(&libc.path).0.len() > 1000);
        let (at, size) = (object::File::parse(&*bytes).unwrap())
            .section_by_name(".dynsym")
            .and_then(|s| s.file_range())
            .unwrap();
        let entries = (at as usize..(at + size) as usize).step_by(24);
        let mut names_past = bytes.clone();
        let mut extents_past = bytes.clone();
        for e in entries.step_by(3) {
            names_past[e..e + 4].copy_from_slice(&u32::MAX.to_le_bytes());
            extents_past[e + 8..e + 16].copy_from_slice(&(u64::MAX - 8).to_le_bytes());
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("libc.so.6");
        for damaged in [&bytes[..64], &names_past, &extents_past] {
            std::fs::write(&path, damaged).unwrap();
            let module = LoadedModule {
                path: path.to_string_lossy().into_owned(),
                ..libc.clone()
            };
            let functions = FunctionSymbols::read(&module.path);
            assert!(functions
                .containing(u64::MAX - 4)
                .is_none_or(|f| !f.is_empty()));
            static_objects(1, &module);
        }
    }

    #[test]
    fn only_the_c_librarys_clone_is_a_thread_entry_trampoline() {
        let frame = |module: &str, function: &str| Frame {
            module: module.into(),
            function: function.into(),
            ..Default::default()
        };
        assert!(is_thread_entry_trampoline(&frame("libc.so.6", "clone3")));
        assert!(is_thread_entry_trampoline(&frame("libc.so.6", "__clone")));
        assert!(!is_thread_entry_trampoline(&frame("app", "clone3")));
        assert!(!is_thread_entry_trampoline(&frame(
            "libc.so.6",
            "start_thread"
        )));
    }

    #[test]
    fn only_mangled_names_are_demangled() {
        for c_name in ["a", "b", "c", "f", "main", "i", "_start", "x"] {
            assert_eq!(demangle(c_name), c_name);
        }
        assert_eq!(demangle("_Z3fooi"), "foo(int)");
        assert_eq!(
            demangle("_ZN5alloc3vec3Vec3new17h0123456789abcdefE"),
            "alloc::vec::Vec::new"
        );
        assert_eq!(demangle("_RNvCs1234_7mycrate3foo"), "mycrate::foo");
    }
}

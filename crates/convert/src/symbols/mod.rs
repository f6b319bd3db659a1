//! Symbolization of return addresses (function, file:line, inlined frames) with
//! addr2line, and static data objects from ELF symbol tables, both with the load
//! bias the runtime recorded.

use memlens_profile::{CodeLocation, Frame, StaticObject};
use object::Object;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

mod read_ahead;
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

/// A module's function symbols with their extents (`.symtab` and `.dynsym`),
/// sorted by address.
#[derive(Default)]
struct FunctionSymbols(Vec<(u64, u64, String)>);

impl FunctionSymbols {
    fn read(path: &str) -> FunctionSymbols {
        let Some(data) = module_file(path) else {
            return FunctionSymbols::default();
        };
        let mut v: Vec<(u64, u64, &str)> = (elf_symbols(&data, object::elf::STT_FUNC).iter())
            .map(|s| (s.start, s.start.saturating_add(s.size), s.name))
            .collect();
        // Of the names one address has (glibc's `__GI___clone3`, `__clone3`
        // and `clone3`; `__libc_start_main` and its `_impl` and `_alias_N`),
        // the one a program calls: not an internal alias, the shortest.
        let rank = |name: &str| (name.starts_with("__GI_"), name.len());
        v.sort_unstable_by(|a, b| (a.0, rank(a.2), a.2).cmp(&(b.0, rank(b.2), b.2)));
        v.dedup_by_key(|s| s.0);
        let named = v
            .into_iter()
            .map(|(start, end, name)| (start, end, name.to_string()));
        FunctionSymbols(named.collect())
    }

    /// The function whose extent holds `addr`: a stripped library's static
    /// function is not the exported one before it.
    fn containing(&self, addr: u64) -> Option<&str> {
        let i = self.0.partition_point(|s| s.0 <= addr);
        let (_, end, name) = self.0.get(i.checked_sub(1)?)?;
        (addr < *end).then_some(name.as_str())
    }
}

/// A defined symbol of an ELF file, outside thread-local sections, its name
/// without its version (`__libc_start_main@@GLIBC_2.34`, `stdout@GLIBC_2.2.5`).
/// A name that is not UTF-8 is no symbol, as object's `Symbol::name` has it.
struct ElfSymbol<'data> {
    start: u64,
    size: u64,
    name: &'data str,
}

/// The defined symbols of one ELF type (`STT_FUNC`, `STT_OBJECT`) and of
/// non-zero size in `.symtab` and `.dynsym`. Read from the tables' raw
/// entries and their string tables read whole: object's `Symbol::name` reads
/// each name through the file's cache on its own, 6 ms for libc's 10 000
/// symbols, all of it after the program has ended.
fn elf_symbols<'data, R: object::ReadRef<'data>>(data: R, st_type: u8) -> Vec<ElfSymbol<'data>> {
    use object::{elf, Endianness, FileKind};
    match FileKind::parse(data) {
        Ok(FileKind::Elf64) => elf_symbols_of::<elf::FileHeader64<Endianness>, R>(data, st_type),
        Ok(FileKind::Elf32) => elf_symbols_of::<elf::FileHeader32<Endianness>, R>(data, st_type),
        _ => None,
    }
    .unwrap_or_default()
}

fn elf_symbols_of<'data, Elf, R>(data: R, st_type: u8) -> Option<Vec<ElfSymbol<'data>>>
where
    Elf: object::read::elf::FileHeader<Endian = object::Endianness>,
    R: object::ReadRef<'data>,
{
    use object::read::elf::{SectionHeader, Sym};
    use object::SymbolIndex;
    let header = Elf::parse(data).ok()?;
    let endian = header.endian().ok()?;
    let sections = header.sections(endian, data).ok()?;
    let thread_local = |index| {
        (sections.section(index).ok())
            .is_some_and(|s| s.sh_flags(endian).into() & u64::from(object::elf::SHF_TLS) != 0)
    };
    let mut out = Vec::new();
    for kind in [object::elf::SHT_SYMTAB, object::elf::SHT_DYNSYM] {
        let Ok(table) = sections.symbols(endian, data, kind) else {
            continue;
        };
        let Some(strings) =
            (sections.section(table.string_section()).ok()).and_then(|s| s.data(endian, data).ok())
        else {
            continue;
        };
        for (i, sym) in table.symbols().iter().enumerate() {
            let size: u64 = sym.st_size(endian).into();
            if sym.st_type() != st_type || size == 0 || !sym.is_definition(endian) {
                continue;
            }
            let section = table.symbol_section(endian, sym, SymbolIndex(i));
            if section.ok().flatten().is_some_and(thread_local) {
                continue;
            }
            let Some(name) = (strings.get(sym.st_name(endian) as usize..))
                .and_then(|s| s.split(|&b| b == 0 || b == b'@').next())
                .and_then(|s| std::str::from_utf8(s).ok())
            else {
                continue;
            };
            out.push(ElfSymbol {
                start: sym.st_value(endian).into(),
                size,
                name,
            });
        }
    }
    Some(out)
}

/// The function symbols of each module asked about, read once per module.
#[derive(Default)]
struct FunctionTables(HashMap<String, FunctionSymbols>);

/// The C library's functions that start the process's and its threads'
/// code, outermost in nearly every stack. They are named from the symbol
/// table alone, so that a run whose stacks reach the C library only through
/// them never reads its DWARF: with libc6-dbg, 10 MB to decompress and index,
/// 30 to 50 ms of the core the program leaves and a wait at its end, for
/// `libc_start_call_main.h:58`.
const ENTRY_FUNCTIONS: [&str; 5] = [
    "__libc_start_call_main",
    "__libc_start_main",
    "start_thread",
    "clone3",
    "clone",
];

impl FunctionTables {
    /// The function of the module at `path` whose extent holds `probe` (a
    /// link-time address).
    fn containing(&mut self, path: &str, probe: u64) -> Option<&str> {
        (self.0.entry(path.to_string()))
            .or_insert_with(|| FunctionSymbols::read(&debug_file(path)))
            .containing(probe)
    }

    /// The process or thread entry function of the C library that `probe`
    /// falls in, when the module at `path` is the C library.
    fn entry_function(&mut self, path: &str, probe: u64) -> Option<&str> {
        if !is_c_library(path) {
            return None;
        }
        self.containing(path, probe)
            .filter(|f| ENTRY_FUNCTIONS.contains(f))
    }
}

/// The module at `path` is the C library (glibc's `libc.so.6`, or an older
/// `libc-2.31.so`).
pub fn is_c_library(path: &str) -> bool {
    // Asked for every frame: the name is looked at in place, not copied.
    let name = Path::new(path).file_name().and_then(|n| n.to_str());
    name.is_some_and(|n| n.starts_with("libc.so") || n.starts_with("libc-"))
}

/// A module's file, read as it is parsed: only its headers and the sections
/// asked for (reading it whole copied every byte, libc's 2 MB for one build
/// id); a file cut short while it is read is an error, not a fault.
fn module_file(path: impl AsRef<Path>) -> Option<object::ReadCache<WindowedFile>> {
    let file = std::fs::File::open(path).ok()?;
    Some(object::ReadCache::new(WindowedFile::new(file)))
}

/// A file read through a window of [`WindowedFile::SIZE`] bytes. object's
/// `ReadCache` reads each symbol name with a seek and a read of 256 bytes:
/// 20 000 system calls for libc's symbol table, 10 to 20 ms of the
/// finalizer. The names lie together in the string table, so one read of
/// the window serves hundreds; a read as large as the window (a section's
/// data) goes to the file directly.
struct WindowedFile {
    file: std::fs::File,
    pos: u64,
    window: Vec<u8>,
    /// The file offset of the window's first byte.
    at: u64,
}

impl WindowedFile {
    const SIZE: usize = 64 << 10;

    fn new(file: std::fs::File) -> WindowedFile {
        WindowedFile {
            file,
            pos: 0,
            window: Vec::new(),
            at: 0,
        }
    }
}

impl std::io::Read for WindowedFile {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::os::unix::fs::FileExt;
        if buf.len() >= Self::SIZE {
            let n = self.file.read_at(buf, self.pos)?;
            self.pos += n as u64;
            return Ok(n);
        }
        if !(self.at..self.at + self.window.len() as u64).contains(&self.pos) {
            self.window.resize(Self::SIZE, 0);
            let n = self.file.read_at(&mut self.window, self.pos)?;
            self.window.truncate(n);
            self.at = self.pos;
        }
        let from = (self.pos - self.at) as usize;
        let n = buf.len().min(self.window.len() - from);
        buf[..n].copy_from_slice(&self.window[from..from + n]);
        self.pos += n as u64;
        Ok(n)
    }
}

impl std::io::Seek for WindowedFile {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        use std::io::SeekFrom;
        let pos = match to {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => self.file.metadata()?.len().checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        self.pos = pos.ok_or(std::io::ErrorKind::InvalidInput)?;
        Ok(self.pos)
    }
}

/// Where a module's debug information lies: the separate debug file its
/// build id names under `/usr/lib/debug/.build-id/` (Debian's -dbg and
/// -dbgsym packages) or in a debuginfod client's cache
/// (`$DEBUGINFOD_CACHE_PATH`, else `~/.cache/debuginfod_client`), else the
/// module itself.
fn debug_file(path: &str) -> String {
    let separate = (|| {
        let data = module_file(path)?;
        let id = object::File::parse(&data).ok()?.build_id().ok()??;
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        let (dir, rest) = hex.split_at_checked(2)?;
        let env = |var| {
            std::env::var_os(var)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let debuginfod = env("DEBUGINFOD_CACHE_PATH").or_else(|| {
            let cache = env("XDG_CACHE_HOME").or_else(|| Some(env("HOME")?.join(".cache")));
            Some(cache?.join("debuginfod_client"))
        });
        let candidates = [
            Some(PathBuf::from(format!(
                "/usr/lib/debug/.build-id/{dir}/{rest}.debug"
            ))),
            debuginfod.map(|d| d.join(&hex).join("debuginfo")),
        ];
        candidates.into_iter().flatten().find(|c| c.is_file())
    })();
    separate.map_or_else(|| path.to_string(), |p| p.to_string_lossy().into_owned())
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
        out
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

/// Data symbols (variables) of a module at their runtime addresses.
pub fn static_objects(pid: u32, m: &LoadedModule) -> Vec<StaticObject> {
    let Some(data) = module_file(&m.path) else {
        return Vec::new();
    };
    let mut seen = HashSet::new();
    let module = short_name(&m.path);
    (elf_symbols(&data, object::elf::STT_OBJECT).iter())
        .filter(|s| seen.insert((s.start, s.name)))
        .map(|s| StaticObject {
            pid,
            module: module.clone(),
            name: demangle(s.name),
            address: s.start.wrapping_add(m.bias),
            size: s.size,
        })
        .collect()
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
    use super::{
        demangle, is_thread_entry_trampoline, static_objects, FunctionSymbols, LoadedModule,
        ReadAhead, Symbolizer, WindowedFile,
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
    fn a_windowed_file_reads_what_the_file_holds() {
        use std::io::{Read, Seek, SeekFrom};
        let bytes: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, &bytes).unwrap();
        let mut f = WindowedFile::new(std::fs::File::open(&path).unwrap());
        // Seeks back and forth, reads within, across and past the window,
        // one as large as the window, and at the end of the file.
        for (at, len) in [
            (0, 10),
            (5, 300),
            (65_530, 20),
            (100, 65_536),
            (131_000, 1),
            (199_990, 50),
            (300_000, 4),
        ] {
            f.seek(SeekFrom::Start(at)).unwrap();
            let mut buf = vec![0; len];
            let mut got = 0;
            while got < len {
                match f.read(&mut buf[got..]).unwrap() {
                    0 => break,
                    n => got += n,
                }
            }
            let want = &bytes[(at as usize).min(bytes.len())..(at as usize + len).min(bytes.len())];
            assert_eq!(&buf[..got], want, "at {at}, {len} bytes");
        }
        assert_eq!(f.seek(SeekFrom::End(-1)).unwrap(), 199_999);
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

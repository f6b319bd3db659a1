//! A module's ELF symbol tables: its functions with their extents, read
//! once per module, and the C library's entry functions named from them.

use super::{debug_file, demangle, module_file, short_name, LoadedModule};
use memlens_profile::StaticObject;
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// A module's function symbols with their extents (`.symtab` and `.dynsym`),
/// sorted by address.
#[derive(Default)]
pub(super) struct FunctionSymbols(pub(super) Vec<(u64, u64, String)>);

impl FunctionSymbols {
    pub(super) fn read(path: &str) -> FunctionSymbols {
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
    pub(super) fn containing(&self, addr: u64) -> Option<&str> {
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
pub(super) struct FunctionTables(HashMap<String, FunctionSymbols>);

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
    pub(super) fn containing(&mut self, path: &str, probe: u64) -> Option<&str> {
        (self.0.entry(path.to_string()))
            .or_insert_with(|| FunctionSymbols::read(&debug_file(path)))
            .containing(probe)
    }

    /// The process or thread entry function of the C library that `probe`
    /// falls in, when the module at `path` is the C library.
    pub(super) fn entry_function(&mut self, path: &str, probe: u64) -> Option<&str> {
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

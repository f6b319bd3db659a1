//! Names for the bodies clang outlines from OpenMP regions: their symbols
//! are `.omp_outlined._debug__.62` and `.omp_outlined..63`, which say nothing
//! of the code a reader wrote; memlens names them after the function whose
//! source holds them, `CalcEnergyForElems(…) [OpenMP region]`, as VTune
//! (`CalcEnergyForElems$omp$parallel`) and GCC (`solve._omp_fn.0`) do. That
//! function is the one defined last before the body's line in its file (a
//! region's body lies inside its function's source), by the declaration
//! lines of the module's DWARF subprograms, inlined ones included (HPC codes
//! inline the functions that open regions). `-gline-tables-only`, `memlens
//! cc`'s default without `-g`, has no declaration lines: there the symbol's
//! name stays, as no guess from symbols would be right for inlined
//! functions. Read with gimli, once per module with outlined bodies:
//! addr2line's loader keeps its DWARF to itself.

use addr2line::gimli;
use gimli::{AttributeValue, Reader};
use std::collections::HashMap;
use std::path::Path;

/// Whether `function` is a body clang outlined from an OpenMP region.
pub(super) fn is_outlined(function: &str) -> bool {
    function.starts_with(".omp_outlined.")
}

/// Where a module's functions are defined, by file and line.
#[derive(Default)]
pub(super) struct Definitions {
    /// By file name (its last component: a frame's file may be spelled
    /// otherwise), the (line, name) of each function defined in it, sorted.
    by_file: HashMap<String, Vec<(u64, String)>>,
}

impl Definitions {
    /// The definitions in the DWARF of the file at `path` (none when it has
    /// no readable DWARF or no declaration lines).
    pub fn read(path: &str) -> Definitions {
        let mut found = Definitions::default();
        if let Ok(data) = std::fs::read(path) {
            // Damaged DWARF keeps what was read before the damage.
            let _ = found.add_all(&data);
        }
        for lines in found.by_file.values_mut() {
            lines.sort();
        }
        found
    }

    fn add_all(&mut self, data: &[u8]) -> Result<(), gimli::Error> {
        use object::{Object, ObjectSection};
        let Ok(file) = object::File::parse(data) else {
            return Ok(());
        };
        let endian = match file.is_little_endian() {
            true => gimli::RunTimeEndian::Little,
            false => gimli::RunTimeEndian::Big,
        };
        let sections = gimli::DwarfSections::load(|id| -> Result<_, gimli::Error> {
            let data = (file.section_by_name(id.name()))
                .and_then(|s| s.uncompressed_data().ok())
                .unwrap_or_default();
            Ok(data)
        })?;
        let dwarf = sections.borrow(|s| gimli::EndianSlice::new(s, endian));
        let mut units = dwarf.units();
        while let Some(header) = units.next()? {
            let unit = dwarf.unit(header)?;
            self.add_unit(&dwarf, &unit)?;
        }
        Ok(())
    }

    /// The unit's function definitions that are the program's own (not
    /// declarations, not the compiler's artificial ones).
    fn add_unit<R: Reader>(
        &mut self,
        dwarf: &gimli::Dwarf<R>,
        unit: &gimli::Unit<R>,
    ) -> Result<(), gimli::Error> {
        let mut entries = unit.entries();
        while let Some((_, entry)) = entries.next_dfs()? {
            if entry.tag() != gimli::DW_TAG_subprogram
                || flag(entry, gimli::DW_AT_declaration)
                || flag(entry, gimli::DW_AT_artificial)
            {
                continue;
            }
            let (Some(AttributeValue::Udata(line)), Some(file)) = (
                entry.attr_value(gimli::DW_AT_decl_line)?,
                entry.attr_value(gimli::DW_AT_decl_file)?,
            ) else {
                continue;
            };
            let (Some(name), Some(file)) =
                (name_of(dwarf, unit, entry)?, file_name(dwarf, unit, file)?)
            else {
                continue;
            };
            self.by_file.entry(file).or_default().push((line, name));
        }
        Ok(())
    }

    /// The name for an outlined body at `file:line`: the function defined
    /// last before it, with "[OpenMP region]"; `None` when none is.
    pub fn outlined_name(&self, file: &str, line: u32) -> Option<String> {
        let lines = self.by_file.get(&last_component(file))?;
        let before = lines.partition_point(|l| l.0 <= line as u64);
        let (_, name) = lines.get(before.checked_sub(1)?)?;
        Some(format!("{} [OpenMP region]", super::demangle(name)))
    }
}

fn flag<R: Reader>(entry: &gimli::DebuggingInformationEntry<R>, at: gimli::DwAt) -> bool {
    matches!(entry.attr_value(at), Ok(Some(AttributeValue::Flag(true))))
}

/// A subprogram's linkage name (mangled, as addr2line names frames), else
/// its name; a definition of a declaration (a C++ method) by the latter's.
fn name_of<R: Reader>(
    dwarf: &gimli::Dwarf<R>,
    unit: &gimli::Unit<R>,
    entry: &gimli::DebuggingInformationEntry<R>,
) -> Result<Option<String>, gimli::Error> {
    let own = |e: &gimli::DebuggingInformationEntry<R>| -> Result<Option<String>, gimli::Error> {
        for at in [gimli::DW_AT_linkage_name, gimli::DW_AT_name] {
            if let Some(value) = e.attr_value(at)? {
                let name = dwarf.attr_string(unit, value)?;
                return Ok(Some(name.to_string_lossy()?.into_owned()));
            }
        }
        Ok(None)
    };
    if let Some(name) = own(entry)? {
        return Ok(Some(name));
    }
    match entry.attr_value(gimli::DW_AT_specification)? {
        Some(AttributeValue::UnitRef(offset)) => own(&unit.entry(offset)?),
        _ => Ok(None),
    }
}

/// The last component of the file a `DW_AT_decl_file` index names.
fn file_name<R: Reader>(
    dwarf: &gimli::Dwarf<R>,
    unit: &gimli::Unit<R>,
    file: AttributeValue<R>,
) -> Result<Option<String>, gimli::Error> {
    let (AttributeValue::FileIndex(index), Some(program)) = (file, unit.line_program.as_ref())
    else {
        return Ok(None);
    };
    let Some(entry) = program.header().file(index) else {
        return Ok(None);
    };
    let name = dwarf.attr_string(unit, entry.path_name())?;
    Ok(Some(last_component(&name.to_string_lossy()?)))
}

fn last_component(path: &str) -> String {
    Path::new(path)
        .file_name()
        .map_or_else(|| path.to_string(), |n| n.to_string_lossy().into_owned())
}

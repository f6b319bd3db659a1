//! Names from the profiled program as memlens shows them: escaped, code
//! labelled `function (file:line)`, and the frames that are never an
//! allocation site.

use crate::Frame;

/// A string from the profiled program (a name given through the annotation
/// API, a symbol, a path, a command line) as it may be shown: control
/// characters (C0, DEL, C1) and the bidirectional controls that reorder a
/// line written escaped (`\e`, `\a`, `\n`, `\x7f`, `\u{202e}`), so that it
/// can neither drive a terminal nor break a line, a table or an XML file.
pub fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    escape_unsafe(s, false)
}

/// A whole document written for a viewer (an SVG image) through
/// [`printable`], its line breaks kept: the program's strings in it cannot
/// make it ill-formed XML or reorder its text.
pub fn printable_document(s: &str) -> std::borrow::Cow<'_, str> {
    escape_unsafe(s, true)
}

fn escape_unsafe(s: &str, keep_lines: bool) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| {
        (c.is_control() && !(keep_lines && c == '\n'))
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !s.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            c if !unsafe_char(c) => out.push(c),
            '\x1b' => out.push_str("\\e"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            c if c.is_ascii_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `function (file:line)`, or `function [module]` without line information:
/// how every site and code location is named. Line 0 is an instruction the
/// compiler made from several source lines (a load sunk out of the branches
/// of a switch): it is named by its function and file only.
pub fn code_label(function: &str, file: &str, line: u32, module: &str) -> String {
    let file = file.rsplit('/').next().unwrap_or(file);
    match (file, line) {
        // Code no symbol covers is named module+offset already.
        ("", _) if function.starts_with(module) => function.to_string(),
        ("", _) => format!("{function} [{module}]"),
        (file, 0) => format!("{function} ({file}, lines merged)"),
        (file, line) => format!("{function} ({file}:{line})"),
    }
}

/// Functions that allocate on behalf of their callers in the runtimes
/// programs are built on, as (module name part, function name prefix): a
/// site is never named after them. CPython's object and memory allocators
/// and its arenas (in the interpreter or libpython), and Rust's global
/// allocator entry points and standard library (its collections grow where
/// the program calls them, as libstdc++'s do for C++).
const ALLOCATION_LAYERS: [(&str, &str); 14] = [
    ("python", "_PyObject_Malloc"),
    ("python", "PyObject_Malloc"),
    ("python", "_PyObject_Calloc"),
    ("python", "_PyObject_Realloc"),
    ("python", "PyMem_"),
    ("python", "_PyMem_"),
    ("python", "pymalloc_"),
    ("python", "_PyObject_Arena"),
    ("python", "new_arena"),
    ("python", "allocate_from_new_pool"),
    ("", "__rust_"),
    ("", "__rdl_"),
    ("", "alloc::"),
    ("", "std::"),
];

/// A function's qualified name without its return type, template arguments
/// or argument list: `Alloc` for `double* Alloc<double>(unsigned long)`,
/// `std::vector::_M_realloc_insert` for its instantiation, a C function's
/// name as it is.
pub fn base_name(function: &str) -> std::borrow::Cow<'_, str> {
    let mut depth = 0i32;
    let (mut start, mut end) = (0, function.len());
    for (i, c) in function.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            ' ' if depth == 0 => start = i + 1,
            '(' if depth == 0 && i > start => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    let name = function.get(start..end).unwrap_or(function);
    if !name.contains('<') {
        return std::borrow::Cow::Borrowed(name);
    }
    let mut depth = 0;
    let bare: String = (name.chars())
        .filter(|&c| {
            let outside = depth == 0 && c != '<';
            match c {
                '<' => depth += 1,
                '>' => depth -= 1,
                _ => {}
            }
            outside
        })
        .collect();
    std::borrow::Cow::Owned(bare)
}

/// Which frames of a stack are not its allocation site: the C and C++
/// runtime libraries, code inlined from system headers, the allocation
/// layers of CPython and Rust, and the user's own (`--skip-frames`: globs
/// matched against a function's whole name or its base name, see
/// [`base_name`]).
#[derive(Clone, Debug, Default)]
pub struct SkipFrames {
    patterns: Vec<glob::Pattern>,
}

impl SkipFrames {
    /// The user's patterns (`*` any characters, `?` one, `[...]` a class);
    /// an error names a pattern that is no glob.
    pub fn new(patterns: &[String]) -> std::result::Result<SkipFrames, String> {
        let patterns = (patterns.iter())
            .map(|p| glob::Pattern::new(p).map_err(|e| format!("--skip-frames {p:?}: {e}")))
            .collect::<std::result::Result<_, _>>()?;
        Ok(SkipFrames { patterns })
    }

    fn is_runtime(f: &Frame) -> bool {
        [
            "libc.so",
            "libstdc++.so",
            "libgcc_s.so",
            "ld-linux",
            "libc++.so",
            "libm.so",
        ]
        .iter()
        .any(|m| f.module.starts_with(m))
    }

    /// The frame allocates for its caller: not a site.
    pub fn skips(&self, f: &Frame) -> bool {
        Self::is_runtime(f)
            // Code inlined from system headers (std::vector internals).
            || f.file.starts_with("/usr/include")
            || f.file.starts_with("/usr/lib")
            || Self::is_allocation_layer(f)
            || (self.patterns.iter())
                .any(|p| p.matches(&f.function) || p.matches(&base_name(&f.function)))
    }

    /// A frame of a language runtime's allocator (CPython's pymalloc,
    /// Rust's alloc): where within it a block was made is its own business.
    pub fn is_allocation_layer(f: &Frame) -> bool {
        let function = f.function.trim_start_matches('<');
        (ALLOCATION_LAYERS.iter())
            .any(|(module, prefix)| f.module.contains(module) && function.starts_with(prefix))
    }

    /// Where a stack (innermost frame first) allocated: the first frame not
    /// skipped, so `operator new`, `strdup` and `PyObject_Malloc` show their
    /// caller; failing that the first outside the runtime libraries. A
    /// stripped library's internal function, named only by its module and
    /// offset, allocates for the library's function its caller entered (an
    /// OpenMP runtime's team and thread data for `omp_get_max_threads` or
    /// `__kmpc_fork_call`): that function, the first named frame of the
    /// same module, is the site.
    pub fn site<'a>(&self, frames: &'a [Frame]) -> Option<&'a Frame> {
        let first = frames
            .iter()
            .position(|f| !self.skips(f))
            .or_else(|| frames.iter().position(|f| !Self::is_runtime(f)))
            .unwrap_or(0);
        let f = frames.get(first)?;
        if !is_unnamed(f) {
            return Some(f);
        }
        let mut same_module = frames[first..].iter().take_while(|g| g.module == f.module);
        Some(same_module.find(|g| !is_unnamed(g)).unwrap_or(f))
    }
}

/// A frame the symbolizer could only name by its module and offset
/// (`libomp.so.5+0xae21f`: no symbol, no debug information).
fn is_unnamed(f: &Frame) -> bool {
    f.file.is_empty()
        && (f.function.strip_prefix(f.module.as_str())).is_some_and(|rest| rest.starts_with("+0x"))
}

/// The allocation site of a stack with the default frames skipped.
pub fn site_frame(frames: &[Frame]) -> Option<&Frame> {
    SkipFrames::default().site(frames)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_strings_are_shown_with_their_controls_escaped() {
        use super::{printable, printable_document};
        assert!(matches!(
            printable("main (a.c:3)"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(
            printable("a\x1b[2J\x07\r\n\t\0\x7f"),
            r"a\e[2J\a\r\n\t\0\x7f"
        );
        assert_eq!(
            printable("\u{9b}1m \u{202e}cba \u{2066}"),
            r"\u{9b}1m \u{202e}cba \u{2066}"
        );
        assert_eq!(printable("naïve → ok"), "naïve → ok");
        assert_eq!(printable_document("<a>\x1b</a>\n"), "<a>\\e</a>\n");
    }

    #[test]
    fn skip_patterns_match_whole_names_not_substrings() {
        assert_eq!(base_name("double* Alloc<double>(unsigned long)"), "Alloc");
        assert_eq!(
            base_name("std::vector<int, std::allocator<int> >::_M_realloc_insert<int const&>(int*, int const&)"),
            "std::vector::_M_realloc_insert"
        );
        assert_eq!(base_name("make_matrix"), "make_matrix");
        let frame = |function: &str| Frame {
            function: function.into(),
            module: "app".into(),
            ..Default::default()
        };
        let skip = SkipFrames::new(&["Alloc".into(), "pool_*".into()]).unwrap();
        // Before, "Alloc" skipped AllocNodeData too (a substring).
        assert!(skip.skips(&frame("double* Alloc<double>(unsigned long)")));
        assert!(!skip.skips(&frame("AllocNodeData(Mesh&)")));
        assert!(skip.skips(&frame("pool_get")));
        assert!(!skip.skips(&frame("mempool_get")));
        assert!(SkipFrames::new(&["[".into()])
            .unwrap_err()
            .contains("--skip-frames \"[\""));
    }

    #[test]
    fn a_stripped_librarys_internal_frames_leave_the_site_to_its_entry_point() {
        let frame = |module: &str, function: &str, file: &str| Frame {
            module: module.into(),
            function: function.into(),
            file: file.into(),
            ..Default::default()
        };
        let omp = |function: &str| frame("libomp.so.5", function, "");
        let main = frame("lulesh2.0", "main", "lulesh.cc");
        let skip = SkipFrames::default();
        // LULESH's largest block at the defaults: libomp's, made for the
        // program's first omp_get_max_threads.
        let stack = [
            omp("libomp.so.5+0xae21f"),
            omp("libomp.so.5+0x4adbe"),
            omp("omp_get_max_threads"),
            main.clone(),
        ];
        assert_eq!(skip.site(&stack).unwrap().function, "omp_get_max_threads");
        // No named frame in the module: the offset names the site still,
        // not the program's frame beyond it.
        let stack = [omp("libomp.so.5+0xae21f"), main.clone()];
        assert_eq!(skip.site(&stack).unwrap().function, "libomp.so.5+0xae21f");
        // A named site is the site, whatever follows.
        let stack = [frame("lulesh2.0", "Allocate", "lulesh.h"), main];
        assert_eq!(skip.site(&stack).unwrap().function, "Allocate");
        // A module whose name is a prefix of the function's is not an offset.
        assert!(!is_unnamed(&frame("libfoo.so", "libfoo.so_init", "")));
    }
}

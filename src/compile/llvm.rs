//! The LLVM side of `memlens cc`: the IR of the access fast path and
//! countdown in the dialect of the user's clang, the tools of its version
//! (ld.lld, llvm-config), and the pass plugin built against it.

use super::tempdir;
use anyhow::{bail, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// "0": clang's wrappers build without LTO.
pub(super) const LTO_VAR: &str = "MEMLENS_LTO";

/// The fast path of the access callbacks, compiled to bitcode and linked into
/// executables so that link-time optimization inlines it into the loops.
const FASTPATH_TEMPLATE: &str = include_str!("../../crates/runtime/sancov/fastpath.ll.in");

/// The fast path's IR: the template's callback once per access class, in the
/// runtime's class order (loads then stores, 1 to 16 bytes).
pub(super) fn fastpath_ir(dialect: IrDialect) -> String {
    let (head, rest) = FASTPATH_TEMPLATE
        .split_once("; CALLBACK\n")
        .expect("template has a CALLBACK section");
    let (callback, _) = rest.split_once("; END").expect("template has an END mark");
    let mut ir = head.to_string();
    let names = ["load", "store"]
        .iter()
        .flat_map(|kind| [1, 2, 4, 8, 16].map(|size| format!("__sanitizer_cov_{kind}{size}")));
    for (class, name) in names.enumerate() {
        ir += &callback
            .replace("@NAME@", &name)
            .replace("@CLASS@", &class.to_string());
    }
    dialect.spell(&ir)
}

/// How a clang's LLVM spells the fast path's pointers and memory
/// attributes: LLVM 14 has typed pointers (opaque ones from 15), and the
/// `memory(...)` attribute came with 16.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct IrDialect {
    major: u32,
}

impl IrDialect {
    /// The dialect of `clang`'s LLVM: its name's version (clang-16), else
    /// `clang -dumpversion`'s (asked once per process: a build runs the
    /// wrapper per file), the newest when it does not say.
    pub(super) fn of(clang: &Path) -> IrDialect {
        static ASKED: std::sync::Mutex<Vec<(PathBuf, IrDialect)>> =
            std::sync::Mutex::new(Vec::new());
        let suffix = (clang.file_name().and_then(|n| n.to_str()))
            .and_then(|n| n.rsplit_once('-'))
            .and_then(|(_, v)| v.parse().ok());
        if let Some(major) = suffix {
            return IrDialect { major };
        }
        let mut asked = ASKED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(&(_, dialect)) = asked.iter().find(|(c, _)| c == clang) {
            return dialect;
        }
        let major = Command::new(clang)
            .arg("-dumpversion")
            .output()
            .ok()
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .and_then(|v| v.trim().split('.').next()?.parse().ok())
            .unwrap_or(u32::MAX);
        asked.push((clang.to_path_buf(), IrDialect { major }));
        IrDialect { major }
    }

    /// Whether its lld links LTO code with the runtime's `--wrap`s: LLVM
    /// 14's names no symbol in a call that LTO makes to a wrapped function
    /// (STREAM's copy loop made `memcpy`: "symbol lookup error: undefined
    /// symbol: " at start), so below 15 the build does without LTO.
    fn wraps_through_lto(self) -> bool {
        self.major >= 15
    }

    fn known_major(self) -> Option<u32> {
        (self.major != u32::MAX).then_some(self.major)
    }

    /// The template's placeholders for types and attributes, written.
    fn spell(self, template: &str) -> String {
        let opaque = self.major >= 15;
        let pick = |new: &'static str, old: &'static str| if opaque { new } else { old };
        let memory = self.major >= 16;
        template
            .replace(
                "@COUNTDOWN_PTR@",
                pick(
                    "@memlens_countdown",
                    "bitcast ([10 x i64]* @memlens_countdown to i8*)",
                ),
            )
            .replace("@COUNTDOWNS@", pick("ptr", "[10 x i64]*"))
            .replace("@I64PTR@", pick("ptr", "i64*"))
            .replace("@PTR@", pick("ptr", "i8*"))
            .replace(
                "@INACCESSIBLE@",
                if memory {
                    "memory(inaccessiblemem: readwrite)"
                } else {
                    "inaccessiblememonly"
                },
            )
            .replace(
                "@NO_MEMORY@",
                if memory { "memory(none)" } else { "readnone" },
            )
    }
}

/// The LLVM tool `base` of clang's version: `base-N` for clang-N or a clang
/// whose `-dumpversion` says N, else `base`; beside clang first (an LLVM's
/// own bin directory), then on PATH.
fn llvm_sibling(clang: &Path, base: &str) -> Option<PathBuf> {
    let name = clang.file_name()?.to_str()?;
    let suffix = (name.rsplit_once('-').map(|(_, v)| v))
        .filter(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit()));
    let major = match suffix {
        Some(v) => Some(v.to_string()),
        None => IrDialect::of(clang).known_major().map(|m| m.to_string()),
    };
    let names: Vec<String> = (major.iter().map(|v| format!("{base}-{v}")))
        .chain(suffix.is_none().then(|| base.to_string()))
        .collect();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = clang.parent().map(Path::to_path_buf).into_iter();
    (dirs.chain(std::env::split_paths(&path)))
        .flat_map(|d| names.iter().map(move |n| d.join(n)))
        .find(|p| p.is_file())
}

/// The major version of `clang`'s LLVM, if it says.
pub(crate) fn llvm_major(clang: &Path) -> Option<u32> {
    IrDialect::of(clang).known_major()
}

/// Whether `clang`'s llvm-config (which locates the headers the pass plugin
/// is built against) is installed.
pub(crate) fn has_llvm_config(clang: &Path) -> bool {
    llvm_sibling(clang, "llvm-config").is_some()
}

/// The ld.lld a build with `clang` links its LTO objects with: none when
/// `MEMLENS_LTO=0` or when that LLVM's lld cannot link LTO code with the
/// runtime's wraps (see [`IrDialect::wraps_through_lto`]).
pub(crate) fn lto_linker(clang: &Path) -> Option<PathBuf> {
    find_lld(clang)
        .filter(|_| std::env::var_os(LTO_VAR).is_none_or(|v| v != "0"))
        .filter(|_| IrDialect::of(clang).wraps_through_lto())
}

/// ld.lld next to clang (clang-16 -> ld.lld-16) or on PATH: LTO needs it.
pub(crate) fn find_lld(clang: &Path) -> Option<PathBuf> {
    llvm_sibling(clang, "ld.lld")
}

/// The pass plugin: atomic read-modify-writes reported to the runtime, and
/// on x86-64 loads and stores counted per block.
const PASS_PLUGIN: &str = include_str!("../../crates/runtime/sancov/pass.cpp");

/// The pass plugin built for `clang`'s LLVM, from the user's cache or built
/// there once (against llvm-N-dev's headers, which `llvm-config-N` locates).
/// None, with a note the first time, when it cannot be built: the program is
/// then instrumented with sancov's callback per access, without counting
/// atomics.
pub(super) fn pass_plugin(clang: &Path) -> Option<PathBuf> {
    use std::hash::{Hash, Hasher};
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?
        .join("memlens");
    let llvm_config = llvm_sibling(clang, "llvm-config");
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (PASS_PLUGIN, &llvm_config).hash(&mut hasher);
    let plugin = cache.join(format!("pass-{:016x}.so", hasher.finish()));
    let failed = plugin.with_extension("failed");
    if plugin.is_file() {
        return Some(plugin);
    }
    if failed.exists() {
        return None;
    }
    let built = (|| -> Result<()> {
        let Some(llvm_config) = llvm_config else {
            bail!("no llvm-config for {} on PATH", clang.display());
        };
        let flags = Command::new(&llvm_config).arg("--cxxflags").output()?;
        let flags = String::from_utf8(flags.stdout)?;
        std::fs::create_dir_all(&cache)?;
        let dir = tempdir::Dir::new()?;
        let src = dir.path().join("pass.cpp");
        std::fs::write(&src, PASS_PLUGIN)?;
        let partial = dir.path().join("pass.so");
        // clang-16 -> clang++-16, the same compiler's C++ driver.
        let name = clang
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("clang");
        let cxx = clang.with_file_name(match name.strip_prefix("clang++") {
            Some(_) => name.to_string(),
            None => name.replacen("clang", "clang++", 1),
        });
        let out = Command::new(&cxx)
            .args(["-shared", "-fPIC", "-O2"])
            .args(flags.split_whitespace())
            // LLVM 14's flags say C++14; the plugin needs 17 (std::optional).
            .arg("-std=c++17")
            .arg(&src)
            .arg("-o")
            .arg(&partial)
            .output()?;
        if !out.status.success() {
            bail!(
                "{} failed: {}",
                cxx.display(),
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .next()
                    .unwrap_or("")
            );
        }
        // Copied then renamed: parallel builds (make -j) each see a whole file.
        let staged = plugin.with_extension(format!("{}.tmp", std::process::id()));
        std::fs::copy(&partial, &staged)?;
        std::fs::rename(&staged, &plugin)?;
        Ok(())
    })();
    match built {
        Ok(()) => Some(plugin),
        Err(e) => {
            eprintln!(
                "memlens cc: note: every access will call the runtime and atomic read-modify-writes will not be counted ({e}); install llvm-{}-dev (its headers build memlens' pass plugin) and remove {}",
                llvm_major(clang).map_or("N".to_string(), |m| m.to_string()),
                failed.display()
            );
            let _ = std::fs::create_dir_all(&cache);
            let _ = std::fs::write(&failed, e.to_string());
            None
        }
    }
}

/// The countdown array alone (the fast path's definition of it), for a
/// module counted per block that does not link the fast path: each
/// executable and shared library has its own, hidden.
pub(super) fn countdown_ir(dialect: IrDialect) -> String {
    let ir: String = (FASTPATH_TEMPLATE.lines())
        .filter(|l| l.starts_with("@memlens_countdown") || l.starts_with("@llvm.used"))
        .map(|l| format!("{l}\n"))
        .collect();
    dialect.spell(&ir)
}

/// Compiles IR to an object (bitcode with `lto`) in a fresh temporary
/// directory.
pub(super) fn ir_object(
    clang: &Path,
    name: &str,
    ir: &str,
    lto: bool,
) -> Result<(tempdir::Dir, PathBuf)> {
    let dir = tempdir::Dir::new()?;
    let src = dir.path().join(format!("{name}.ll"));
    std::fs::write(&src, ir)?;
    let obj = dir.path().join(format!("{name}.o"));
    let st = Command::new(clang)
        .args(["-O2", "-fPIC", "-Wno-override-module", "-c"])
        .args(lto.then_some("-flto"))
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .status()?;
    if !st.success() {
        bail!("{} could not compile memlens' {name}", clang.display());
    }
    Ok((dir, obj))
}

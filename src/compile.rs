//! `memlens cc` / `memlens c++`: clang with the instrumentation the access backend
//! needs, usable as CC/CXX in make or CMake.

mod gcc;
mod llvm;

pub(crate) use gcc::doctor_check as gcc_doctor_check;
use llvm::{countdown_ir, fastpath_ir, ir_object, pass_plugin, IrDialect, LTO_VAR};
pub(crate) use llvm::{find_lld, has_llvm_config, llvm_major, lto_linker};

use anyhow::{bail, Context, Result};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Flags added to every compile: frame pointers, 128-bit vectors (the
/// callbacks have no 32- or 64-byte variants), and no sanitizer runtime of
/// clang's own (its weak callbacks would shadow ours).
const INSTRUMENT: &[&str] = &[
    "-fno-sanitize-link-runtime",
    "-fno-omit-frame-pointer",
    "-mprefer-vector-width=128",
];

/// A callback per load and store (`func` is needed for clang to emit them at
/// all): where the pass plugin does not count them per block.
const PER_ACCESS: &str = "-fsanitize-coverage=func,trace-loads,trace-stores";

/// The names memlens answers to as a compiler (symlinks to it, see
/// `memlens wrappers`), each with the wrapper it acts as: one word for
/// build systems that take one (`CC=memlens-cc`, `which $CC`), with the
/// compiler's name in it for Makefiles that look for one (`memlens-clang`),
/// and the compilers' own names for a directory put first on PATH (as
/// ccache's masquerade directory).
pub const WRAPPER_NAMES: &[(&str, &str)] = &[
    ("memlens-cc", "cc"),
    ("memlens-clang", "cc"),
    ("memlens-c++", "c++"),
    ("memlens-clang++", "c++"),
    ("memlens-fc", "fc"),
    ("memlens-flang", "fc"),
    ("cc", "cc"),
    ("clang", "cc"),
    ("c++", "c++"),
    ("clang++", "c++"),
    ("flang-new", "fc"),
    ("memlens-gcc", "gcc"),
    ("memlens-g++", "g++"),
    ("memlens-gfortran", "gfortran"),
    ("gcc", "gcc"),
    ("g++", "g++"),
    ("gfortran", "gfortran"),
];

/// The wrapper memlens acts as when run by the name `argv0`, if any.
pub fn wrapper_named(argv0: &std::ffi::OsStr) -> Option<&'static str> {
    let name = Path::new(argv0).file_name()?.to_str()?;
    (WRAPPER_NAMES.iter())
        .find(|(n, _)| *n == name)
        .map(|&(_, wrapper)| wrapper)
}

/// This memlens executable, its links resolved.
fn this_memlens() -> std::io::Result<PathBuf> {
    std::env::current_exe().and_then(std::fs::canonicalize)
}

/// Whether `candidate` is this memlens (a wrapper symlink in a directory
/// ahead on PATH): running it as the compiler would call memlens again.
fn is_this_memlens(candidate: &Path) -> bool {
    matches!((this_memlens(), std::fs::canonicalize(candidate)), (Ok(a), Ok(b)) if a == b)
}

/// A tool from its environment variable; else the compiler the build names
/// in `build_var` ($CC, $CXX) when that is one of `base`'s kind (`base`,
/// `base-N` or a path to one); else the newest `base[-N]` on PATH
/// (memlens' own wrappers passed over: a build whose $CC is memlens).
fn find_tool(var: &str, build_var: &str, base: &str, package: &str) -> Result<PathBuf> {
    if let Some(p) = std::env::var_os(var) {
        return Ok(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let named = std::env::var_os(build_var).map(PathBuf::from);
    let on_path = |name: &Path| -> Option<PathBuf> {
        match name.components().count() {
            1 => std::env::split_paths(&path)
                .map(|d| d.join(name))
                .find(|p| p.is_file()),
            _ => Some(name.to_path_buf()).filter(|p| p.is_file()),
        }
    };
    let of_kind = |name: &Path| {
        (name.file_name().and_then(|n| n.to_str())).is_some_and(|n| {
            n == base
                || (n.strip_prefix(base).and_then(|v| v.strip_prefix('-')))
                    .is_some_and(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit()))
        })
    };
    if let Some(found) = (named.filter(|n| of_kind(n)).as_deref())
        .and_then(on_path)
        .filter(|p| !is_this_memlens(p))
    {
        return Ok(found);
    }
    let candidates =
        std::iter::once(base.to_string()).chain((14..=21).rev().map(|v| format!("{base}-{v}")));
    for name in candidates {
        if let Some(found) = std::env::split_paths(&path)
            .map(|d| d.join(&name))
            .find(|p| p.is_file() && !is_this_memlens(p))
        {
            return Ok(found);
        }
    }
    bail!("no {base} found on PATH: install it (e.g. `apt-get install {package}`) or set {var}")
}

/// A compiler memlens wraps: `memlens <wrapper>` runs it.
pub(crate) struct Compiler {
    pub wrapper: &'static str,
    /// Its executable's name (`name-N`, a version, also matches).
    pub base: &'static str,
    /// The variable naming it for memlens.
    pub var: &'static str,
    /// The variable a build names it by (`CC=clang-19` chooses clang-19).
    pub build_var: &'static str,
    /// The Debian package installing it, for the message when none is found.
    pub package: &'static str,
    /// GCC's (ThreadSanitizer's instrumentation, `gcc.rs`), else LLVM's.
    pub gcc: bool,
}

impl Compiler {
    /// Its executable: the one `var` names, else the build's, else PATH's.
    pub fn find(&self) -> Result<PathBuf> {
        find_tool(self.var, self.build_var, self.base, self.package)
    }
}

/// Every compiler memlens wraps: clang's (sanitizer coverage and the pass)
/// and GCC's (its ThreadSanitizer instrumentation, `gcc.rs`).
const COMPILERS: [Compiler; 6] = [
    Compiler {
        wrapper: "cc",
        base: "clang",
        var: "MEMLENS_CLANG",
        build_var: "CC",
        package: "clang-16",
        gcc: false,
    },
    Compiler {
        wrapper: "c++",
        base: "clang++",
        var: "MEMLENS_CLANGXX",
        build_var: "CXX",
        package: "clang-16",
        gcc: false,
    },
    Compiler {
        wrapper: "fc",
        base: "flang-new",
        var: "MEMLENS_FLANG",
        build_var: "FC",
        package: "flang-16",
        gcc: false,
    },
    Compiler {
        wrapper: "gcc",
        base: "gcc",
        var: "MEMLENS_GCC",
        build_var: "CC",
        package: "gcc",
        gcc: true,
    },
    Compiler {
        wrapper: "g++",
        base: "g++",
        var: "MEMLENS_GXX",
        build_var: "CXX",
        package: "g++",
        gcc: true,
    },
    Compiler {
        wrapper: "gfortran",
        base: "gfortran",
        var: "MEMLENS_GFORTRAN",
        build_var: "FC",
        package: "gfortran",
        gcc: true,
    },
];

/// The compiler `memlens <wrapper>` runs.
pub(crate) fn compiler_of(wrapper: &str) -> Result<&'static Compiler> {
    (COMPILERS.iter())
        .find(|c| c.wrapper == wrapper)
        .with_context(|| format!("memlens wraps no compiler as `{wrapper}`"))
}

/// The executable of `memlens <wrapper>`'s compiler.
pub(crate) fn find_compiler(wrapper: &str) -> Result<PathBuf> {
    compiler_of(wrapper)?.find()
}

pub(crate) fn find_clang(cxx: bool) -> Result<PathBuf> {
    find_compiler(if cxx { "c++" } else { "cc" })
}

fn is_link(args: &[OsString]) -> bool {
    !args
        .iter()
        .any(|a| matches!(a.to_str(), Some("-c" | "-S" | "-E" | "-M" | "-MM")))
}

fn has_debug_info(args: &[OsString]) -> bool {
    args.iter().any(|a| {
        a.to_str()
            .is_some_and(|s| s.starts_with("-g") && s != "-g0")
    })
}

/// Flags that let the compiler use 256/512-bit vectors in code it cannot keep at
/// 128 bits (intrinsics): those accesses get no callback.
fn wide_vectors(args: &[OsString]) -> bool {
    args.iter().any(|a| {
        a.to_str().is_some_and(|s| {
            s.starts_with("-mavx")
                || s == "-march=native"
                || s.starts_with("-march=skylake")
                || s.starts_with("-march=haswell")
        })
    })
}

/// Whether the build optimizes enough for link-time optimization to inline
/// the fast path: LLVM's LTO pipeline at -O1 inlines nothing, and a called fast
/// path would give its own address as every sample's PC.
fn inlines_at_link(args: &[OsString]) -> bool {
    let level = args
        .iter()
        .filter_map(|a| a.to_str()?.strip_prefix("-O"))
        .next_back();
    matches!(level, Some(l) if !matches!(l, "" | "0" | "1" | "g"))
}

/// The architecture the build targets: `--target`'s (`aarch64-linux-gnu`
/// gives aarch64), else this machine's.
fn target_arch(args: &[OsString]) -> String {
    let mut triple = None;
    let mut iter = args.iter().filter_map(|a| a.to_str());
    while let Some(a) = iter.next() {
        if let Some(t) = a.strip_prefix("--target=") {
            triple = Some(t);
        } else if a == "-target" || a == "--target" {
            triple = iter.next();
        }
    }
    match triple.and_then(|t| t.split('-').next()) {
        Some("arm64") => "aarch64".to_string(),
        Some(arch) => arch.to_string(),
        None => std::env::consts::ARCH.to_string(),
    }
}

/// The runtime to link a build for `arch` with: `runtime` for this machine's
/// architecture or when MEMLENS_RUNTIME names it; else the runtime cargo built
/// for that target beside this one (target/aarch64-unknown-linux-gnu/release
/// next to target/release), or an installed one in `<arch>/` beside it.
fn target_runtime(runtime: &Path, arch: &str) -> Result<PathBuf> {
    if arch == std::env::consts::ARCH || std::env::var_os(crate::runtime::VAR).is_some() {
        return Ok(runtime.to_path_buf());
    }
    let name = memlens_profile::RUNTIME_FILE;
    let dir = runtime.parent().unwrap_or(Path::new("."));
    let profile = dir.file_name().unwrap_or_default();
    let candidates = [
        dir.join(format!("../{arch}-unknown-linux-gnu"))
            .join(profile)
            .join(name),
        dir.join(arch).join(name),
    ];
    match candidates.iter().find(|c| c.is_file()) {
        Some(found) => Ok(found.clone()),
        None => bail!(
            "no {arch} runtime beside {}: build it with `cargo build --release -p memlens-runtime --target {arch}-unknown-linux-gnu` (and its linker, e.g. gcc-{arch}-linux-gnu), or set MEMLENS_RUNTIME to it",
            runtime.display()
        ),
    }
}

fn is_shared(args: &[OsString]) -> bool {
    args.iter().any(|a| a == "-shared")
}

/// A temporary directory removed on drop (the fast path object lives there during
/// the link).
pub(crate) mod tempdir {
    use std::path::{Path, PathBuf};

    pub struct Dir(PathBuf);

    impl Dir {
        pub fn new() -> std::io::Result<Dir> {
            let base = std::env::temp_dir();
            for n in 0..1000u32 {
                let p = base.join(format!("memlens-cc-{}-{n}", std::process::id()));
                match std::fs::create_dir(&p) {
                    Ok(()) => return Ok(Dir(p)),
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                    Err(e) => return Err(e),
                }
            }
            Err(std::io::Error::other("no free temporary directory name"))
        }

        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// `memlens cc`, `c++` or `fc` (`wrapper`): the compiler run with the
/// instrumentation; with `--help`, what memlens adds comes before the
/// compiler's own options.
pub fn wrapper(wrapper: &str, args: Vec<OsString>) -> Result<i32> {
    if args.iter().any(|a| a == "--help" || a == "-help") {
        let Compiler {
            base: compiler,
            build_var: use_as,
            var: variable,
            ..
        } = compiler_of(wrapper)?;
        let (adds, lto) = match compiler_of(wrapper)?.gcc {
            true => (
                "GCC's ThreadSanitizer instrumentation\n(-fsanitize=thread, its calls answered by memlens instead of libtsan),\n-g1 without -g",
                String::new(),
            ),
            false => (
                "the\ninstrumentation, -gline-tables-only without -g, -flto with ld.lld (the\nruntime's fast path inlined)",
                format!("\n  {:<16} no -flto (every access calls into the runtime: slower)", format!("{LTO_VAR}=0")),
            ),
        };
        println!(
            "memlens {wrapper}: {compiler} with memlens' access instrumentation (use as {use_as}=\"memlens {wrapper}\", or {use_as}=memlens-{wrapper} from `memlens wrappers DIR`)

Every load and store of the code it compiles is counted exactly per thread and
region, and sampled for the access profile; every heap block of the program is
recorded. Its arguments are the compiler's, passed on; it adds {adds} and, at link, the memlens runtime. The program
runs as usual outside `memlens record -- ./program`.

Environment:
  {variable:<16} the compiler to run (default: ${use_as} if it names one, else found on PATH)
  {runtime_var:<16} the runtime library to link (default: the one built into memlens){lto}

See docs/access-profiling.md. The compiler's own options follow.
",
            runtime_var = crate::runtime::VAR,
        );
        std::io::Write::flush(&mut std::io::stdout())?;
    }
    let runtime = crate::runtime::path()?;
    match wrapper {
        "fc" => compile_fortran(args, &runtime),
        gcc if gcc::is_gcc(gcc) => gcc::compile(gcc, args, &runtime),
        cxx => compile(cxx == "c++", args, &runtime),
    }
}

/// `memlens wrappers DIR`: every name of [`WRAPPER_NAMES`] in `dir`, a
/// symlink to this memlens.
pub fn write_wrappers(dir: &Path) -> Result<()> {
    let this = this_memlens().context("finding this memlens")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (name, _) in WRAPPER_NAMES {
        let link = dir.join(name);
        match std::fs::symlink_metadata(&link) {
            Ok(m) if m.file_type().is_symlink() => std::fs::remove_file(&link)
                .with_context(|| format!("replacing {}", link.display()))?,
            Ok(_) => bail!(
                "{} exists and is not a symlink: choose an empty directory",
                link.display()
            ),
            Err(_) => {}
        }
        std::os::unix::fs::symlink(&this, &link)
            .with_context(|| format!("writing {}", link.display()))?;
    }
    Ok(())
}

pub fn compile(cxx: bool, args: Vec<OsString>, runtime: &Path) -> Result<i32> {
    compile_with(find_clang(cxx)?, args, runtime, &[])
}

fn is_fortran(arg: &OsString) -> bool {
    let ext = Path::new(arg)
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("");
    matches!(
        ext,
        "f" | "F" | "f90" | "F90" | "f95" | "F95" | "f03" | "F03" | "f08" | "F08" | "for"
    )
}

/// `memlens fc`: flang has no sanitizer-coverage option, so each Fortran source
/// goes through flang to LLVM IR, and clang instruments and compiles the IR; the
/// link adds flang's runtime libraries.
pub fn compile_fortran(args: Vec<OsString>, runtime: &Path) -> Result<i32> {
    let flang = find_compiler("fc")?;
    let clang = find_clang(false)?;
    let ir_dir = tempdir::Dir::new()?;
    // Flags flang understands for the front end; output, linking and inputs stay
    // with the clang step.
    let mut front: Vec<&OsString> = Vec::new();
    let mut iter = args.iter().peekable();
    while let Some(a) = iter.next() {
        let s = a.to_str().unwrap_or("");
        if s == "-o" {
            iter.next();
        } else if (s.starts_with("-O")
            || s.starts_with("-I")
            || s.starts_with("-D")
            || s.starts_with("-J")
            || s.starts_with("-f"))
            && !is_fortran(a)
        {
            front.push(a);
        }
    }
    let mut clang_args = Vec::new();
    for (k, a) in args.iter().enumerate() {
        if !is_fortran(a) {
            clang_args.push(a.clone());
            continue;
        }
        let stem = Path::new(a)
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("src");
        let ll = ir_dir.path().join(format!("{stem}.{k}.ll"));
        let st = Command::new(&flang)
            .args(&front)
            .args(["-S", "-emit-llvm"])
            .arg(a)
            .arg("-o")
            .arg(&ll)
            .status()?;
        if !st.success() {
            return Ok(st.code().unwrap_or(1));
        }
        clang_args.push(ll.into_os_string());
    }
    // flang-new-16 lives in /usr/lib/llvm-16/bin; its runtime in ../lib.
    let flang_lib = std::fs::canonicalize(&flang)?
        .parent()
        .map(|b| b.join("../lib"))
        .unwrap_or_default();
    let link: Vec<OsString> = vec![
        format!("-L{}", flang_lib.display()).into(),
        "-lFortran_main".into(),
        "-lFortranRuntime".into(),
        "-lFortranDecimal".into(),
        "-lstdc++".into(),
        "-lm".into(),
    ];
    compile_with(clang, clang_args, runtime, &link)
}

fn compile_with(
    clang: PathBuf,
    args: Vec<OsString>,
    runtime: &Path,
    link_extra: &[OsString],
) -> Result<i32> {
    let lld = lto_linker(&clang);
    let mut cmd = Command::new(&clang);
    cmd.args(INSTRUMENT);
    let plugin = pass_plugin(&clang);
    if let Some(plugin) = &plugin {
        cmd.arg(format!("-fpass-plugin={}", plugin.display()));
    }
    // The plugin counts x86-64 code's accesses per block (it reads the
    // module's target, as `target_arch` reads the arguments).
    let arch = target_arch(&args);
    let per_block = plugin.is_some() && arch == "x86_64";
    if !per_block {
        cmd.arg(PER_ACCESS);
    }
    // With LTO the fast path is inlined into instrumented loops and its countdown
    // kept in a register (STREAM 1.1x idle); without lld, every access calls into
    // the runtime (about 1.4x).
    if let Some(lld) = &lld {
        cmd.arg("-flto");
        if is_link(&args) {
            cmd.arg(format!("-fuse-ld={}", lld.display()));
        }
    }
    if !has_debug_info(&args) {
        // Line tables symbolize sampled accesses to file:line.
        cmd.arg("-gline-tables-only");
    }
    cmd.args(&args);
    let mut _object_dir = None;
    if is_link(&args) {
        // The fast path's IR takes the access's address with x86-64 assembly.
        // Below -O2 the runtime's callbacks serve (slower, PCs from return addresses).
        let object =
            if lld.is_some() && !is_shared(&args) && inlines_at_link(&args) && arch == "x86_64" {
                Some(ir_object(
                    &clang,
                    "fastpath",
                    &fastpath_ir(IrDialect::of(&clang)),
                    true,
                )?)
            } else if per_block {
                let ir = countdown_ir(IrDialect::of(&clang));
                Some(ir_object(&clang, "countdown", &ir, false)?)
            } else {
                None
            };
        if let Some((dir, obj)) = object {
            cmd.arg(obj);
            _object_dir = Some(dir);
        }
        cmd.args(runtime_link_args(&target_runtime(runtime, &arch)?)?)
            .args(link_extra);
    }
    if wide_vectors(&args) {
        eprintln!(
            "memlens cc: note: 256/512-bit vector accesses written with intrinsics get no callback and are not counted; auto-vectorized loops are kept at 128 bits"
        );
    }
    // The compiler gets the signal state the build gave memlens.
    memlens_collector::inherited::pass_on(&mut cmd);
    let status = cmd
        .status()
        .map_err(|e| anyhow::anyhow!("cannot run {}: {e}", clang.display()))?;
    Ok(status.code().unwrap_or(1))
}

/// The link flags of an instrumented build: the runtime (the callbacks'
/// slow paths live there), found at run time too, and the wraps of the C
/// library's data-moving routines. Without `memlens record` the runtime
/// stays idle and the program runs as usual.
fn runtime_link_args(runtime: &Path) -> Result<Vec<String>> {
    let dir = runtime_dir(runtime)?;
    Ok(vec![
        format!("-L{}", dir.display()),
        format!("-Wl,-rpath,{}", dir.display()),
        "-lmemlens_runtime".to_string(),
        wrap_flags(),
    ])
}

/// The directory of the runtime library `runtime`, which must exist.
fn runtime_dir(runtime: &Path) -> Result<&Path> {
    runtime.parent().filter(|_| runtime.is_file()).with_context(|| {
        format!(
            "runtime library not found at {}: point {} at an existing file, or unset it to use the runtime built into memlens",
            runtime.display(),
            crate::runtime::VAR
        )
    })
}

/// The linker flag that sends instrumented code's calls of the C library
/// routines that move its data to the runtime's wrappers.
fn wrap_flags() -> String {
    let wraps: Vec<String> = (memlens_rawlog::WRAPPED_ROUTINES.iter())
        .map(|name| format!("--wrap={name}"))
        .collect();
    format!("-Wl,{}", wraps.join(","))
}

/// `memlens rustflags`: the RUSTFLAGS that instrument a Rust crate's loads and
/// stores and link the runtime (build with `codegen-units = 1`).
pub fn rustflags(runtime: &Path) -> Result<String> {
    let dir = runtime_dir(runtime)?;
    let dir = std::fs::canonicalize(dir)?;
    Ok([
        "-Cpasses=sancov-module".to_string(),
        "-Cllvm-args=-sanitizer-coverage-level=1".into(),
        "-Cllvm-args=-sanitizer-coverage-trace-loads".into(),
        "-Cllvm-args=-sanitizer-coverage-trace-stores".into(),
        "-Cforce-frame-pointers=yes".into(),
        format!("-Clink-arg=-L{}", dir.display()),
        "-Clink-arg=-lmemlens_runtime".into(),
        format!("-Clink-arg=-Wl,-rpath,{}", dir.display()),
    ]
    .join(" "))
}

//! The runtime's shared object names itself (DT_SONAME): a program built by
//! `memlens cc` needs `libmemlens_runtime.so`, and a runtime of that name
//! preloaded by `memlens record` (from another install, or the embedded
//! copy in the cache) then satisfies the need. Without the name, ld.so loaded
//! the program's own copy beside the preloaded one: two runtimes in one
//! process, each with a log, the second's counts zero.
//!
//! It must be built with frame pointers: its entry points read their caller
//! through their own frame (`unwind::return_address`), and without them that
//! register holds anything (a memset wrapper read its fill byte as a frame
//! and crashed the program it profiled). `.cargo/config.toml` asks for them,
//! but RUSTFLAGS in the environment, or a build started outside the
//! repository (`--manifest-path`), replaces that: such a build stops here
//! and says what to add.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmemlens_runtime.so");
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    if !forces_frame_pointers(&flags) {
        println!(
            "cargo::error=memlens-runtime must be built with `-C force-frame-pointers=yes` (its entry points read their caller by them; without, the profiled program crashes): RUSTFLAGS, or a build from outside the repository, replaced .cargo/config.toml's; add `-C force-frame-pointers=yes` to RUSTFLAGS, or build from the repository's directory"
        );
    }
}

/// Whether rustc's flags (separated by 0x1f) end with frame pointers forced
/// on: the last `force-frame-pointers` codegen option given wins.
fn forces_frame_pointers(flags: &str) -> bool {
    let words: Vec<&str> = flags.split('\x1f').collect();
    let mut forced = false;
    for (i, word) in words.iter().enumerate() {
        let option = match word.strip_prefix("-C") {
            Some("") => words.get(i + 1).copied().unwrap_or(""),
            Some(attached) => attached,
            None if word.starts_with("--codegen=") => &word["--codegen=".len()..],
            None => continue,
        };
        if let Some(value) = option.strip_prefix("force-frame-pointers") {
            forced = matches!(value, "" | "=yes" | "=y" | "=on" | "=true" | "=always");
        }
    }
    forced
}

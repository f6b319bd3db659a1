//! Builds the preload runtime for the target and embeds it in the `memlens`
//! binary, so that `cargo install` and a copied binary record as they are
//! (src/runtime.rs writes it to a per-user cache on first use).
//!
//! Cargo cannot yet depend on a cdylib's artifact (unstable "bindeps"), so
//! this runs a nested `cargo build` of the runtime crate in a target
//! directory of its own under OUT_DIR.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let root = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    let target = env::var("TARGET").expect("set by cargo");
    for dir in ["crates/runtime", "crates/rawlog", "crates/cachemodel"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    println!(
        "cargo:rerun-if-changed={}",
        root.join("Cargo.lock").display()
    );
    // Linked at a fixed address: a position-independent memlens spent 3 of
    // the 4 ms it takes to start applying its 232 000 relative relocations
    // (a recorded program waits for that; ASLR of the profiler's own image
    // buys nothing for a tool run by its user).
    println!("cargo:rustc-link-arg-bins=-no-pie");
    let runtime = build_runtime(&root, &out, &target);
    let bytes = std::fs::read(&runtime)
        .unwrap_or_else(|e| panic!("reading the runtime {}: {e}", runtime.display()));
    let embedded = out.join("libmemlens_runtime.so");
    std::fs::write(&embedded, &bytes).expect("writing the embedded runtime");
    // Its cache directory's name: a hash of its bytes, so a new runtime never
    // meets an old one's file.
    std::fs::write(
        out.join("runtime_hash.txt"),
        format!("{:016x}", fnv1a(&bytes)),
    )
    .expect("writing the runtime's hash");
}

/// The runtime, optimized whatever the outer profile (a debug build of it is
/// several times slower inside every malloc), without debug information (its
/// frames never reach a profile), with frame pointers (its unwinder walks
/// its own frames by them).
fn build_runtime(root: &Path, out: &Path, target: &str) -> PathBuf {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let target_dir = out.join("runtime-target");
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root)
        .args(["build", "--release", "--locked", "-p", "memlens-runtime"])
        .args(["--target", target])
        .arg("--target-dir")
        .arg(&target_dir)
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env("CARGO_PROFILE_RELEASE_STRIP", "debuginfo")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .env("RUSTFLAGS", "-C force-frame-pointers=yes");
    if env::var_os("CARGO_NET_OFFLINE").is_some() {
        cmd.arg("--offline");
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("running cargo for the runtime: {e}"));
    assert!(status.success(), "building the runtime failed: {status}");
    target_dir
        .join(target)
        .join("release")
        .join("libmemlens_runtime.so")
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

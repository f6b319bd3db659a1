//! Arm under emulation: `memlens cc --target=aarch64-linux-gnu` builds an
//! instrumented aarch64 program linked with the aarch64 runtime, qemu-user
//! runs it under `memlens record`, and this machine's memlens reads the
//! profile. .ci/run installs the Rust target, Debian's cross gcc and qemu-user.

mod common;
use common::*;
use memlens_profile::Region;
use std::process::Command;

#[test]
fn an_aarch64_stream_under_qemu_has_exact_bytes_and_accurate_samples() {
    // The aarch64 runtime, built by cargo with the cross linker that
    // .cargo/config.toml names, in a target directory of its own.
    let target_dir = root().join("target/aarch64-tests");
    let st = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "-p", "memlens-runtime"])
        .args(["--target", "aarch64-unknown-linux-gnu"])
        .env("CARGO_TARGET_DIR", &target_dir)
        .current_dir(root())
        .status()
        .unwrap();
    assert!(st.success(), "the aarch64 runtime did not build");
    let arm_runtime = target_dir.join("aarch64-unknown-linux-gnu/debug/libmemlens_runtime.so");

    let dir = tempdir();
    let app = dir.path().join("stream");
    let n = 100_000u64;
    let st = Command::new(memlens())
        .env("MEMLENS_RUNTIME", &arm_runtime)
        .args(["cc", "--target=aarch64-linux-gnu", "-O2", "-g"])
        .arg(format!("-I{}", root().join("include").display()))
        .args([format!("-DN={n}L"), "-DCHASE=4096L".into()])
        .arg(root().join("examples/stream.c"))
        .arg("-o")
        .arg(&app)
        .status()
        .unwrap();
    assert!(st.success(), "memlens cc --target=aarch64-linux-gnu");
    // An aarch64 executable: ELF machine 183.
    let elf = std::fs::read(&app).unwrap();
    assert_eq!(u16::from_le_bytes([elf[18], elf[19]]), 183);

    let p = dir.path().join("p");
    let qemu = [
        "qemu-aarch64",
        "-L",
        "/usr/aarch64-linux-gnu",
        app.to_str().unwrap(),
    ];
    assert_ran(&record(&p, &[], &qemu));
    // One process: the program's own runtime recorded it, not the emulator.
    let r = report_json(&p);
    assert_eq!(r["summary"]["processes"].as_array().unwrap().len(), 1);
    let regions: Vec<Region> = memlens_profile::read_table(&p).unwrap();
    let per_element = |name: &str| match name {
        "copy" | "scale" => 16,
        "add" | "triad" => 24,
        _ => 0,
    };
    let kernels: Vec<&Region> = regions
        .iter()
        .filter(|r| per_element(&r.name) > 0)
        .collect();
    assert_eq!(kernels.len(), 40, "ten instances of four kernels");
    for r in kernels {
        let moved = r.bytes_read.unwrap() + r.bytes_written.unwrap();
        assert_eq!(moved, n * per_element(&r.name), "{r:?}");
    }
    let accuracy = r["access"]["accuracy"].as_f64().unwrap();
    assert!(accuracy > 0.99, "accuracy {accuracy}");
    // The copy kernel is a memcpy on aarch64 too: its arrays are named.
    let copy = named(&r["access"]["regions"], "copy");
    assert_eq!(copy["objects"].as_array().unwrap().len(), 2, "{copy}");
}

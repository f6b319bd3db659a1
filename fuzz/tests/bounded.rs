//! Every fuzz target run in every test run on a fixed number of deterministic
//! mutations of real inputs (bit flips, insertions, deletions, cuts, random
//! runs), so a reader that panics, or drops without counting, fails the tests
//! even where nobody runs libFuzzer. A failure names the seed and iteration.

use std::path::{Path, PathBuf};
use std::process::Command;

/// xorshift64*: deterministic, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(rng: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..1 + rng.below(8) {
        match rng.below(5) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 => {
                let i = rng.below(v.len() + 1);
                v.insert(i, rng.next() as u8);
            }
            2 if !v.is_empty() => {
                let i = rng.below(v.len());
                v.remove(i);
            }
            3 => v.truncate(rng.below(v.len() + 1)),
            _ => {
                let i = rng.below(v.len() + 1);
                let n = rng.below(16);
                let junk: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                v.splice(i..i, junk);
            }
        }
    }
    v
}

/// Runs `target` on each seed, which it must accept, then on `iterations`
/// mutants of them in turn, of which some must get past its first check;
/// says which one failed.
fn run(target: fn(&[u8]) -> bool, seeds: &[Vec<u8>], iterations: usize, seed: u64) {
    assert!(!seeds.is_empty());
    for (i, s) in seeds.iter().enumerate() {
        assert!(target(s), "seed {i} refused");
    }
    let mut rng = Rng(seed);
    let mut accepted = 0;
    for i in 0..iterations {
        let input = mutate(&mut rng, &seeds[i % seeds.len()]);
        match std::panic::catch_unwind(|| target(&input)) {
            Ok(true) => accepted += 1,
            Ok(false) => {}
            Err(_) => {
                let kept = std::env::temp_dir().join(format!("memlens-fuzz-failure-{seed:x}-{i}"));
                std::fs::write(&kept, &input).unwrap();
                panic!(
                    "mutant {i} of seed {seed:#x} failed; input kept in {}",
                    kept.display()
                );
            }
        }
    }
    eprintln!("{accepted} of {iterations} mutants got past the first check");
    assert!(accepted > 0, "every mutant was refused at once");
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

fn files(dir: &str, suffix: &str) -> Vec<Vec<u8>> {
    let mut out: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(fixtures().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    out.sort();
    out.into_iter().map(|(_, b)| b).collect()
}

#[test]
fn spe_decoder() {
    let mut seeds = files("spe-hiperf-raw", ".spe");
    seeds.extend(files("spe-vectors", ".spe"));
    // The target's first byte chooses where the stream is split.
    let seeds: Vec<Vec<u8>> = seeds
        .into_iter()
        .map(|s| [&[128u8][..], &s].concat())
        .collect();
    run(
        memlens_fuzz::spe_decoder,
        &seeds,
        40_000,
        0x9e37_79b9_7f4a_7c15,
    );
}

#[test]
fn sample_and_registers() {
    // Random layouts and bodies: the target reads its layout from the input.
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let seeds: Vec<Vec<u8>> = (0..64)
        .map(|_| (0..33 + rng.below(200)).map(|_| rng.next() as u8).collect())
        .collect();
    run(
        memlens_fuzz::sample_and_registers,
        &seeds,
        100_000,
        0x1234_5678_9abc_def1,
    );
}

#[test]
fn perf_data() {
    let mut seeds = files("spe-hiperf-raw", ".wrapped.perf.data");
    seeds.extend(files("fuzz-regressions", ".perf.data"));
    run(
        memlens_fuzz::perf_data,
        &seeds,
        20_000,
        0x5eed_0f9e_7fda_7a01,
    );
    // The real PEBS file (1.2 MB): its header and attributes, its feature
    // sections and its first records mutated in place.
    let pebs = std::fs::read(fixtures().join("pebs-skx-loadlat/perf.data")).unwrap();
    let data_end = 2120 + 1_237_752;
    let mut rng = Rng(0xfeed_0f9e_7fda_7a01);
    for region in [0..2120, data_end..pebs.len(), 2120..12_000] {
        for _ in 0..300 {
            let mut v = pebs.clone();
            v.splice(region.clone(), mutate(&mut rng, &pebs[region.clone()]));
            let _ = memlens_fuzz::perf_data(&v);
        }
    }
}

/// Raw logs of real runs in transparent mode (the runtime built beside this
/// test), packed as the target reads them: a single-threaded program with
/// regions, tags, a group and mmaps, and one with threads and forks.
fn raw_log_seeds() -> Vec<Vec<u8>> {
    let exe = std::env::current_exe().unwrap();
    let runtime = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("libmemlens_runtime.so");
    assert!(
        runtime.exists(),
        "{} missing: run `cargo build --workspace` first",
        runtime.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut seeds = Vec::new();
    for (source, args) in [
        ("examples/phases.c", &[][..]),
        ("tests/programs/torture.c", &["threads"][..]),
    ] {
        let app = dir
            .path()
            .join(source.rsplit('/').next().unwrap().trim_end_matches(".c"));
        let built = Command::new("gcc")
            .args(["-O1", "-pthread"])
            .arg(format!("-I{}", root.join("include").display()))
            .arg(root.join(source))
            .arg("-o")
            .arg(&app)
            .arg("-ldl")
            .status()
            .unwrap();
        assert!(built.success(), "{source}");
        let out = dir.path().join(format!("{}.prof", app.display()));
        let ran = Command::new(&app)
            .args(args)
            .env("LD_PRELOAD", &runtime)
            .env("MEMLENS_DIR", &out)
            .env("MEMLENS_SAMPLE_RATE", "4096")
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(ran.success(), "{source}");
        for log in std::fs::read_dir(out.join("raw")).unwrap() {
            let log = log.unwrap().path();
            if log.extension().is_some_and(|e| e == "mlraw") {
                seeds.push(memlens_fuzz::pack(&std::fs::read(log).unwrap()));
            }
        }
    }
    seeds
}

/// `MEMLENS_FUZZ_SEEDS=DIR` also writes the seeds there (`fuzz/run.sh` seeds
/// libFuzzer's corpus with them).
#[test]
fn raw_log() {
    let seeds = raw_log_seeds();
    if let Some(dir) = std::env::var_os("MEMLENS_FUZZ_SEEDS") {
        for (i, s) in seeds.iter().enumerate() {
            std::fs::write(Path::new(&dir).join(format!("seed-{i}")), s).unwrap();
        }
    }
    run(memlens_fuzz::raw_log, &seeds, 150, 0x0dd_ba11_5eed);
}

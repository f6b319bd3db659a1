#!/usr/bin/env bash
# Coverage-guided fuzzing: each target of fuzz/fuzz_targets/ for SECONDS
# (default 120) under libFuzzer, seeded with the real recordings in
# tests/fixtures, perf.data files Linux perf records here, and raw logs of two
# real runs. Stable Rust is enough: the targets are built with LLVM's coverage
# instrumentation, as cargo-fuzz builds them less its nightly-only address
# sanitizer, in target/fuzz/. Crashes land in fuzz/artifacts/TARGET/.
# Usage: bash fuzz/run.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-120}
targets="spe_decoder sample_and_registers perf_data raw_log"
fixtures=tests/fixtures
for t in $targets; do mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"; done
cp "$fixtures"/spe-hiperf-raw/*.spe "$fixtures"/spe-vectors/*.spe fuzz/corpus/spe_decoder/
cp "$fixtures"/spe-hiperf-raw/*.perf.data "$fixtures"/fuzz-regressions/*.perf.data fuzz/corpus/perf_data/
if command -v perf >/dev/null; then
    perf record -q -e page-faults,minor-faults -c 1 -d -o fuzz/corpus/perf_data/faults-file.data -- true
    perf record -q -e page-faults -c 1 -d -o - -- true > fuzz/corpus/perf_data/faults-pipe.data
fi
head -c 4096 /dev/urandom > fuzz/corpus/sample_and_registers/random
# The bounded test's raw-log seeds (real runs of the runtime, packed).
cargo build --workspace -q
MEMLENS_FUZZ_SEEDS="$PWD/fuzz/corpus/raw_log" cargo test -q -p memlens-fuzz --test bounded raw_log >/dev/null
host=$(rustc -vV | sed -n 's/^host: //p')
RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks" \
    cargo build -q --release -p memlens-fuzz --bins --target "$host" --target-dir target/fuzz
for t in $targets; do
    echo "== $t"
    "target/fuzz/$host/release/$t" -max_total_time="$seconds" -max_len=65536 \
        -artifact_prefix="fuzz/artifacts/$t/" "fuzz/corpus/$t" 2>&1 | grep -E "^Done|^==|ERROR|panicked" || true
done

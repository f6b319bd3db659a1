#!/usr/bin/env bash
# Runs each fuzz target for SECONDS (default 120), seeded with the real
# recordings in tests/fixtures. Needs a nightly toolchain and cargo-fuzz
# (`cargo install cargo-fuzz`). Crashes land in fuzz/artifacts/TARGET/.
# Usage: bash fuzz/run.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-120}
fixtures=../tests/fixtures
mkdir -p corpus/spe_decoder corpus/perf_data corpus/sample_and_registers corpus/raw_log
cp "$fixtures"/spe-hiperf-raw/*.spe "$fixtures"/spe-vectors/*.spe corpus/spe_decoder/
cp "$fixtures"/spe-hiperf-raw/*.perf.data corpus/perf_data/
# Small valid files with samples, in both modes, from Linux perf when it is here.
if command -v perf >/dev/null; then
    perf record -q -e page-faults,minor-faults -c 1 -d -o corpus/perf_data/faults-file.data -- true
    perf record -q -e page-faults -c 1 -d -o - -- true > corpus/perf_data/faults-pipe.data
fi
# Raw logs of two instrumented runs (heap, regions, samples, threads), packed
# as fuzz_targets/raw_log.rs reads them: 1 KiB of header, 4 KiB of each block.
cargo build --release --manifest-path ../Cargo.toml -q
memlens=../target/release/memlens
seeds=$(mktemp -d)
"$memlens" cc -O1 -I../include ../examples/phases.c -o "$seeds/phases"
"$memlens" cc -O1 -pthread ../tests/programs/false_sharing.c -o "$seeds/false_sharing"
for app in phases false_sharing; do
    "$memlens" record --keep-raw -o "$seeds/$app.prof" -- "$seeds/$app" >/dev/null 2>&1
    for log in "$seeds/$app.prof"/raw/*.mlraw; do
        python3 -c 'import sys; d = open(sys.argv[1], "rb").read()
packed = d[:1024] + b"".join(d[o:o + 4096] for o in range(256 << 10, len(d), 64 << 10))
open(sys.argv[2], "wb").write(packed)' "$log" "corpus/raw_log/$app-$(basename "$log")"
    done
done
rm -rf "$seeds"
for target in spe_decoder sample_and_registers perf_data raw_log; do
    cargo +nightly fuzz run "$target" -- -max_total_time="$seconds" -max_len=65536 2>&1 | tail -4
done

#!/usr/bin/env bash
# Runs each fuzz target for SECONDS (default 120), seeded with the real
# recordings in tests/fixtures. Needs a nightly toolchain and cargo-fuzz
# (`cargo install cargo-fuzz`). Crashes land in fuzz/artifacts/TARGET/.
# Usage: bash fuzz/run.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-120}
fixtures=../tests/fixtures
mkdir -p corpus/spe_decoder corpus/perf_data corpus/sample_and_registers
cp "$fixtures"/spe-hiperf-raw/*.spe "$fixtures"/spe-vectors/*.spe corpus/spe_decoder/
cp "$fixtures"/spe-hiperf-raw/*.perf.data corpus/perf_data/
# Small valid files with samples, in both modes, from Linux perf when it is here.
if command -v perf >/dev/null; then
    perf record -q -e page-faults,minor-faults -c 1 -d -o corpus/perf_data/faults-file.data -- true
    perf record -q -e page-faults -c 1 -d -o - -- true > corpus/perf_data/faults-pipe.data
fi
for target in spe_decoder sample_and_registers perf_data; do
    cargo +nightly fuzz run "$target" -- -max_total_time="$seconds" -max_len=65536 2>&1 | tail -4
done

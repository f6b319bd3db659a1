#!/usr/bin/env bash
# The runtime's event clock, measured outside the runtime (bench/clock/): the
# order of stamps handed between two threads, and each stamp against
# clock_gettime, on an idle machine and beside four busy loops.
# Usage: bash bench/clock.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet --manifest-path bench/clock/Cargo.toml --target-dir bench/out/clock
bin=bench/out/clock/release/memlens-clock-bench
echo "## idle"
"$bin"
echo "## beside four busy loops"
pids=()
for _ in 1 2 3 4; do
    sh -c 'while :; do :; done' &
    pids+=($!)
done
trap 'kill "${pids[@]}" 2>/dev/null' EXIT
"$bin"

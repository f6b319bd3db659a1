#!/usr/bin/env bash
# Overhead of the instrumented access backend: an uninstrumented clang -O2 build
# against the `memlens cc` build under `memlens record` (default period), for the
# STREAM kernels and for the pointer chase of examples/stream.c, measured in one
# run as ratios of median wall times. Usage: bash bench/access.sh [repeats]
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-7}
out=bench/out
mkdir -p "$out"
cargo build --release --quiet
memlens=target/release/memlens
clang=$(command -v clang-16 || command -v clang)

source bench/lib.sh

printf '%-10s %-40s %8s %8s\n' kernel configuration ms ratio
for kernel in stream chase; do
    if [ $kernel = stream ]; then defs=(-DN=8000000L -DCHASE=1024L); else defs=(-DN=1024L -DCHASE=4194304L); fi
    "$clang" -O2 -Iinclude "${defs[@]}" examples/stream.c -o "$out/$kernel-plain"
    $memlens cc -O2 -Iinclude "${defs[@]}" examples/stream.c -o "$out/$kernel-memlens"
    base=$(median_ms "$out/$kernel-plain")
    printf '%-10s %-40s %8d %8s\n' $kernel "clang -O2 (uninstrumented)" "$base" 1.00
    ms=$(median_ms "$out/$kernel-memlens")
    printf '%-10s %-40s %8d %8.2f\n' $kernel "memlens cc build, not recording" "$ms" "$(echo "$ms / $base" | bc -l)"
    ms=$(median_ms $memlens record -o "$out/prof" -- "$out/$kernel-memlens")
    printf '%-10s %-40s %8d %8.2f\n' $kernel "memlens record (period 4099)" "$ms" "$(echo "$ms / $base" | bc -l)"
done

#!/usr/bin/env bash
# The main job on the bundled examples: build memlens; record examples/phases.c
# (capacity and data objects) and examples/stream.c built with `memlens cc` (exact
# bytes per region and access samples); print both reports; draw the capacity plot.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-16 >/dev/null || ! command -v ld.lld-16 >/dev/null; then
    apt-get update -qq && apt-get install -y -qq clang-16 lld-16
fi
cargo build --release --quiet
memlens=target/release/memlens
mkdir -p examples/out
rm -rf examples/out/profile examples/out/stream-profile

gcc -O2 -g -fno-omit-frame-pointer -Iinclude examples/phases.c -o examples/out/phases
$memlens record -o examples/out/profile -- examples/out/phases
$memlens report examples/out/profile
$memlens plot capacity examples/out/profile -o examples/out/capacity.png

$memlens cc -O2 -Iinclude examples/stream.c -o examples/out/stream
$memlens record -o examples/out/stream-profile -- examples/out/stream
$memlens report examples/out/stream-profile
$memlens plot scatter examples/out/stream-profile -o examples/out/scatter.png
$memlens plot bandwidth examples/out/stream-profile -o examples/out/bandwidth.png
$memlens plot counters examples/out/stream-profile -o examples/out/counters.png

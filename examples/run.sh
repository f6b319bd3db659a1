#!/usr/bin/env bash
# The main job on the bundled examples: build memlens; record examples/phases.c
# (capacity and data objects) and examples/stream.c built with `memlens cc` (exact
# bytes per region and access samples); print both reports; draw the plots.
# MEMLENS=path/to/memlens uses that build instead of building one (the tests run
# this script with their debug build); OUT=dir writes there, not examples/out.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-16 >/dev/null || ! command -v ld.lld-16 >/dev/null || ! command -v llvm-config-16 >/dev/null; then
    apt-get update -qq && apt-get install -y -qq clang-16 lld-16 llvm-16-dev
fi
memlens=${MEMLENS:-}
if [ -z "$memlens" ]; then
    cargo build --release --quiet
    memlens=target/release/memlens
fi
out=${OUT:-examples/out}
mkdir -p "$out"
rm -rf "$out/profile" "$out/stream-profile"

gcc -O2 -g -fno-omit-frame-pointer -Iinclude examples/phases.c -o "$out/phases"
"$memlens" record -o "$out/profile" -- "$out/phases"
"$memlens" report "$out/profile"
"$memlens" plot capacity "$out/profile" -o "$out/capacity.png"

"$memlens" cc -O2 -Iinclude examples/stream.c -o "$out/stream"
"$memlens" record -o "$out/stream-profile" -- "$out/stream"
"$memlens" report "$out/stream-profile"
"$memlens" plot scatter "$out/stream-profile" -o "$out/scatter.png"
"$memlens" plot bandwidth "$out/stream-profile" -o "$out/bandwidth.png"
"$memlens" plot counters "$out/stream-profile" -o "$out/counters.png"

#!/usr/bin/env bash
# The main job on the bundled example: build memlens, build examples/phases.c with
# the annotation header, record it, print the report, draw the capacity plot.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
mkdir -p examples/out
gcc -O2 -g -fno-omit-frame-pointer -Iinclude examples/phases.c -o examples/out/phases
rm -rf examples/out/profile
target/release/memlens record -o examples/out/profile -- examples/out/phases
target/release/memlens report examples/out/profile
target/release/memlens plot capacity examples/out/profile -o examples/out/capacity.png

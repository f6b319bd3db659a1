#!/usr/bin/env bash
# What interposing malloc costs on bench/malloc.sh's program before memlens
# does anything of its own: native; a preload that only forwards to glibc;
# one that counts every block exactly and samples as memlens' fast path
# does (bench/interposer.c); memlens' runtime preloaded alone; and
# `memlens record` at the defaults (the runtime plus memlens' start, its
# collector and the profile written at the end). Ratios of median wall
# times, measured in one run. Usage: bash bench/interposer.sh [repeats]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
repeats=${1:-11}
gcc -O2 -g bench/malloc_heavy.c -o "$out/malloc_heavy"
gcc -O2 -shared -fPIC -DFORWARD_ONLY bench/interposer.c -o "$out/forward.so"
gcc -O2 -shared -fPIC bench/interposer.c -o "$out/count.so"
runtime=target/release/libmemlens_runtime.so
configs=("native" "preload: forward only" "preload: exact counts + sampling"
    "memlens runtime preloaded alone" "memlens record (defaults)")
cmds=("$out/malloc_heavy" "env LD_PRELOAD=$out/forward.so $out/malloc_heavy"
    "env LD_PRELOAD=$out/count.so $out/malloc_heavy"
    "env LD_PRELOAD=$runtime MEMLENS_DIR=$out/prof MEMLENS_COLLECTOR=1 $out/malloc_heavy"
    "$memlens record -o $out/prof -- $out/malloc_heavy")
interleaved_medians "${cmds[@]}"
ratio_table "${configs[@]}"

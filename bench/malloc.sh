#!/usr/bin/env bash
# Recording overhead on a malloc-heavy program: native vs memlens (default settings,
# and a few variants) vs heaptrack when installed, measured in one run and reported
# as ratios of median wall times. Usage: bash bench/malloc.sh [repeats]
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-5}
out=bench/out
mkdir -p "$out"
cargo build --release --quiet
gcc -O2 -g bench/malloc_heavy.c -o "$out/malloc_heavy"
memlens=target/release/memlens

source bench/lib.sh

native=$(median_ms "$out/malloc_heavy")
printf '%-44s %8s %8s\n' "configuration" "ms" "ratio"
printf '%-44s %8d %8s\n' "native" "$native" "1.00"
row() {
    local name=$1; shift
    local ms; ms=$(median_ms "$@")
    printf '%-44s %8d %8.2f\n' "$name" "$ms" "$(echo "$ms / $native" | bc -l)"
}
row "memlens record (defaults)" $memlens record -o "$out/prof" -- "$out/malloc_heavy"
row "memlens record --unwind fp" $memlens record -o "$out/prof" --unwind fp -- "$out/malloc_heavy"
row "memlens record --sample-rate 64K" $memlens record -o "$out/prof" --sample-rate 65536 -- "$out/malloc_heavy"
row "memlens record --sample-rate 1 (every block)" $memlens record -o "$out/prof" --sample-rate 1 -- "$out/malloc_heavy"
if command -v heaptrack >/dev/null; then
    row "heaptrack" heaptrack -o "$out/heaptrack" "$out/malloc_heavy"
else
    echo "heaptrack: not installed (apt-get install heaptrack) - skipped"
fi

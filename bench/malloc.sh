#!/usr/bin/env bash
# Recording overhead on a malloc-heavy program: native vs memlens (default settings,
# a few variants, and --live following every block's events) vs heaptrack when
# installed, measured in one run and reported as ratios of median wall times. Usage: bash bench/malloc.sh [repeats]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
repeats=${1:-5}
gcc -O2 -g bench/malloc_heavy.c -o "$out/malloc_heavy"

configs=("native" "memlens record (defaults)" "memlens record --unwind fp"
    "memlens record --sample-rate 64K" "memlens record --sample-rate 1 (every block)"
    "memlens record --sample-rate 1 --live")
record="$memlens record -o $out/prof"
cmds=("$out/malloc_heavy" "$record -- $out/malloc_heavy" "$record --unwind fp -- $out/malloc_heavy"
    "$record --sample-rate 65536 -- $out/malloc_heavy" "$record --sample-rate 1 -- $out/malloc_heavy"
    "$record --sample-rate 1 --live -- $out/malloc_heavy")
if command -v heaptrack >/dev/null; then
    configs+=("heaptrack")
    cmds+=("heaptrack -o $out/heaptrack $out/malloc_heavy")
else
    echo "heaptrack: not installed (apt-get install heaptrack) - skipped"
fi
interleaved_medians "${cmds[@]}"
printf '%-44s %8s %8s\n' "configuration" "ms" "ratio"
for i in "${!configs[@]}"; do
    printf '%-44s %8d %8s\n' "${configs[i]}" "${medians[i]}" "$(ratio "${medians[i]}" "${medians[0]}")"
done

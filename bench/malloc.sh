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
    "memlens record --sample-rate 64K" "memlens record --leaks (every block)"
    "memlens record --leaks --live")
record="$memlens record -o $out/prof"
cmds=("$out/malloc_heavy" "$record -- $out/malloc_heavy" "$record --unwind fp -- $out/malloc_heavy"
    "$record --sample-rate 65536 -- $out/malloc_heavy" "$record --leaks -- $out/malloc_heavy"
    "$record --leaks --live -- $out/malloc_heavy")
# jemalloc's own sampled heap profiler (one sample per 512 KiB, as memlens'
# default) against plain jemalloc: the cost a built-in profiler has.
jemalloc=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
if [ -e "$jemalloc" ]; then
    configs+=("jemalloc" "jemalloc prof:true,lg_prof_sample:19")
    cmds+=("env LD_PRELOAD=$jemalloc $out/malloc_heavy"
        "env LD_PRELOAD=$jemalloc MALLOC_CONF=prof:true,lg_prof_sample:19 $out/malloc_heavy")
else
    echo "jemalloc: not installed (apt-get install libjemalloc2) - skipped"
fi
if command -v heaptrack >/dev/null; then
    configs+=("heaptrack")
    cmds+=("heaptrack -o $out/heaptrack $out/malloc_heavy")
else
    echo "heaptrack: not installed (apt-get install heaptrack) - skipped"
fi
interleaved_medians "${cmds[@]}"
ratio_table "${configs[@]}"

# Peak memory of recording every block and of each command reading the
# profile: bounded by live blocks and distinct stacks, not by the run's calls.
echo
printf '%-44s %8s\n' "every block: command" "peak MiB"
rm -rf "$out/prof"
printf '%-44s %8s\n' "native" "$(peak_mib "$out/malloc_heavy")"
printf '%-44s %8s\n' "memlens record --leaks" "$(peak_mib $memlens record --leaks -o "$out/prof" -- "$out/malloc_heavy")"
rm -rf "$out/prof.live"
printf '%-44s %8s\n' "memlens record --leaks --live" "$(peak_mib $memlens record --leaks --live -o "$out/prof.live" -- "$out/malloc_heavy")"
rm -rf "$out/prof.live"
printf '%-44s %8s\n' "memlens report" "$(peak_mib $memlens report "$out/prof")"
printf '%-44s %8s\n' "memlens report --html" "$(peak_mib $memlens report "$out/prof" --html "$out/report.html")"
printf '%-44s %8s\n' "memlens plot capacity" "$(peak_mib $memlens plot capacity "$out/prof" -o "$out/capacity.png")"
if command -v heaptrack >/dev/null; then
    rm -f "$out"/heaptrack.*
    printf '%-44s %8s\n' "heaptrack" "$(peak_mib heaptrack -o "$out/heaptrack" "$out/malloc_heavy")"
fi

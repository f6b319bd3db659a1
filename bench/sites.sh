#!/usr/bin/env bash
# Every block recorded on programs with many allocation sites: a generated C
# program whose 12,000 functions allocate through one wrapper (1.5 M blocks,
# 12,000 sites all named by the same `xmalloc` frame, told apart by their
# callers), and GCC's C++ compiler proper (cc1plus -O2 on the vendored
# LULESH's lulesh.cc: thousands of sites behind xmalloc and the GC
# allocator). Native, `memlens record --leaks` and heaptrack in interleaved
# rounds, then reading each recording: `memlens report` against
# `heaptrack_print` of heaptrack's file. Ratios of median wall times to the
# first row of each table. Usage: bash bench/sites.sh [repeats]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
repeats=${1:-5}
command -v heaptrack >/dev/null || { echo "heaptrack not found: apt-get install heaptrack" >&2; exit 1; }

# f0..f11999 each allocate and free one block of its own size through
# xmalloc; main calls every one 125 times. (A size that changed with the
# round made heaptrack 1.4.0's interpreter fail, std::bad_alloc at 19 GB,
# from 36,000 distinct size-and-stack pairs; 24,000 passed.)
awk 'BEGIN {
    n = 12000
    print "#include <stdlib.h>"
    print "void *volatile sink;"
    print "__attribute__((noinline)) static void *xmalloc(size_t n) { void *p = malloc(n); if (!p) abort(); return p; }"
    for (i = 0; i < n; i++)
        printf "__attribute__((noinline)) static void f%d(void) { sink = xmalloc(%d); free(sink); }\n", i, 16 + i % 64
    printf "static void (*const fns[])(void) = {"
    for (i = 0; i < n; i++) printf "%sf%d", (i ? "," : ""), i
    print "};"
    print "int main(int argc, char **argv) {"
    print "    int reps = argc > 1 ? atoi(argv[1]) : 125;"
    print "    for (int r = 0; r < reps; r++)"
    print "        for (unsigned i = 0; i < sizeof fns / sizeof *fns; i++) fns[i]();"
    print "    return 0;"
    print "}"
}' >"$out/sites.c"
gcc -O2 -g "$out/sites.c" -o "$out/sites"

# The compiler proper as the driver runs it (g++ -### shows the command),
# without the driver's own processes.
cc1plus=$(g++ -print-prog-name=cc1plus)
compile="$cc1plus -quiet -imultiarch x86_64-linux-gnu -D_GNU_SOURCE -DUSE_MPI=0 -O2 tests/apps/lulesh/lulesh.cc -o $out/lulesh.s"

record="$memlens record --leaks -o $out/prof"
for program in sites compile; do
    if [ $program = sites ]; then cmd="$out/sites"; else cmd=$compile; fi
    echo
    echo "## $program: recording"
    interleaved_medians "$cmd" "$record -- $cmd" "heaptrack -o $out/heaptrack $cmd"
    ratio_table native "memlens record --leaks" heaptrack

    # One recording of each kept for reading, outside the timings.
    rm -rf "$out/prof-$program" "$out/heaptrack-$program".*
    # shellcheck disable=SC2086 # the command is a space-separated string
    $memlens record --leaks -o "$out/prof-$program" -- $cmd >/dev/null 2>&1
    # shellcheck disable=SC2086
    heaptrack -o "$out/heaptrack-$program" $cmd >/dev/null 2>&1
    echo
    echo "## $program: reading the recording"
    interleaved_medians "heaptrack_print -f $(ls "$out/heaptrack-$program".*)" \
        "$memlens report $out/prof-$program"
    ratio_table heaptrack_print "memlens report"
done

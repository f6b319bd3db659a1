#!/usr/bin/env bash
# Overhead of the instrumented access backend: an uninstrumented clang -O2 build
# against the `memlens cc` build, idle and under `memlens record` (default period),
# for the STREAM kernels and for the pointer chase of examples/stream.c. The three
# configurations run interleaved in one run; ratios of median wall times. Then
# the recording modes in which every access takes the runtime's slow path, on
# the example as built (93 M accesses): `--reuse 64` and `--cache-model` against
# the default recording (exact `--reuse`, 40-odd seconds a run, is left out).
# Usage: bash bench/access.sh [repeats]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
repeats=${1:-7}
clang=$(command -v clang-16 || command -v clang)

printf '%-10s %-40s %8s %8s\n' kernel configuration ms ratio
for kernel in stream chase; do
    if [ $kernel = stream ]; then defs=(-DN=8000000L -DCHASE=1024L); else defs=(-DN=1024L -DCHASE=4194304L); fi
    "$clang" -O2 -Iinclude "${defs[@]}" examples/stream.c -o "$out/$kernel-plain"
    $memlens cc -O2 -Iinclude "${defs[@]}" examples/stream.c -o "$out/$kernel-memlens"
    interleaved_medians "$out/$kernel-plain" "$out/$kernel-memlens" \
        "$memlens record -o $out/prof -- $out/$kernel-memlens"
    names=("clang -O2 (uninstrumented)" "memlens cc build, not recording" "memlens record (period 4099)")
    for i in 0 1 2; do
        printf '%-10s %-40s %8d %8s\n' $kernel "${names[i]}" "${medians[i]}" "$(ratio "${medians[i]}" "${medians[0]}")"
    done
done

$memlens cc -O2 -Iinclude examples/stream.c -o "$out/example-memlens"
record="$memlens record -o $out/prof"
interleaved_medians "$record -- $out/example-memlens" "$record --reuse 64 -- $out/example-memlens" \
    "$record --cache-model -- $out/example-memlens"
names=("memlens record (period 4099)" "memlens record --reuse 64" "memlens record --cache-model")
for i in 0 1 2; do
    printf '%-10s %-40s %8d %8s\n' example "${names[i]}" "${medians[i]}" "$(ratio "${medians[i]}" "${medians[0]}")"
done

#!/usr/bin/env bash
# Overhead of the instrumented access backend: an uninstrumented clang -O2 build
# against the `memlens cc` build, idle and under `memlens record` (default period),
# for the STREAM kernels and for the pointer chase of examples/stream.c. The three
# configurations run interleaved in one run; ratios of median wall times. Then
# the recording modes in which every access takes the runtime's slow path, on
# the example as built (93 M accesses): `--reuse 64` and `--cache-model` against
# the default recording (exact `--reuse`, 40-odd seconds a run, is left out).
# Last, an allocation-heavy program built with `memlens cc`, whose every block
# is recorded at the defaults, against byte sampling.
# Usage: bash bench/access.sh [repeats]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
repeats=${1:-7}
clang=$(command -v clang-16 || command -v clang)

# print_medians KERNEL NAME...: a row per configuration just measured, its
# median and its ratio to the first's.
print_medians() {
    local kernel=$1 i
    shift
    local -a names=("$@")
    for i in "${!names[@]}"; do
        printf '%-10s %-40s %8d %8s\n' "$kernel" "${names[i]}" "${medians[i]}" "$(ratio "${medians[i]}" "${medians[0]}")"
    done
}

printf '%-10s %-40s %8s %8s\n' kernel configuration ms ratio
for kernel in stream chase; do
    if [ $kernel = stream ]; then defs=(-DN=8000000L -DCHASE=1024L); else defs=(-DN=1024L -DCHASE=4194304L); fi
    "$clang" -O2 -Iinclude "${defs[@]}" examples/stream.c -o "$out/$kernel-plain"
    $memlens cc -O2 -Iinclude "${defs[@]}" examples/stream.c -o "$out/$kernel-memlens"
    interleaved_medians "$out/$kernel-plain" "$out/$kernel-memlens" \
        "$memlens record -o $out/prof -- $out/$kernel-memlens"
    print_medians $kernel "clang -O2 (uninstrumented)" "memlens cc build, not recording" "memlens record (period 4099)"
done

$memlens cc -O2 -Iinclude examples/stream.c -o "$out/example-memlens"
record="$memlens record -o $out/prof"
interleaved_medians "$record -- $out/example-memlens" "$record --reuse 64 -- $out/example-memlens" \
    "$record --cache-model -- $out/example-memlens"
print_medians example "memlens record (period 4099)" "memlens record --reuse 64" "memlens record --cache-model"

# An allocation-heavy program built with memlens cc: its every block is
# recorded at the defaults (each sample's block known), against the byte
# sampling that is the default for uninstrumented programs.
$memlens cc -O2 bench/malloc_heavy.c -o "$out/malloc_heavy-memlens"
interleaved_medians "$out/malloc_heavy-memlens" "$record -- $out/malloc_heavy-memlens" \
    "$record --sample-rate 524288 -- $out/malloc_heavy-memlens"
print_medians malloc "memlens cc build, not recording" "memlens record (every block)" "memlens record --sample-rate 524288"

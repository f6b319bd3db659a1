#!/usr/bin/env bash
# Call-stack cost with every block recorded, on deep stacks: a C++ compile
# (g++ -O2 -c tests/programs/exceptions.cpp, ~300 K blocks in 3 processes,
# ~23 frames a stack). Times the compile natively and under
# `memlens record --sample-rate 1` with each unwinder, as memlens reports the
# program's run ("exited with 0 after X s", writing the profile excluded), in
# interleaved rounds; prints medians and ratios to native, then the mean frames
# per distinct stack each unwinder found (frame pointers stop at the first
# function built without them: Debian's cc1plus is).
# Usage: bash bench/unwind.sh [repeats]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
repeats=${1:-5}
compile=(g++ -O2 -c tests/programs/exceptions.cpp -o "$out/exceptions.o")
unwinders=(libgcc dwarf fp)
declare -A times=()
for _ in $(seq "$repeats"); do
    t0=${EPOCHREALTIME/[.,]/}
    "${compile[@]}"
    t1=${EPOCHREALTIME/[.,]/}
    times[native]+="$(((t1 - t0) / 1000)) "
    for u in "${unwinders[@]}"; do
        rm -rf "$out/prof-$u"
        seconds=$($memlens record --sample-rate 1 --unwind "$u" -o "$out/prof-$u" -- "${compile[@]}" 2>&1 |
            sed -n 's/.*exited with 0 after \([0-9.]*\) s.*/\1/p')
        times[$u]+="$(echo "$seconds * 1000 / 1" | bc) "
    done
done
median() {
    printf '%s\n' $1 | sort -n | sed -n "$(((repeats + 1) / 2))p"
}
native=$(median "${times[native]}")
printf '%-46s %8s %8s\n' "configuration" "ms" "ratio"
printf '%-46s %8d %8s\n' "native" "$native" "1.00"
for u in "${unwinders[@]}"; do
    m=$(median "${times[$u]}")
    printf '%-46s %8d %8s\n' "memlens record --sample-rate 1 --unwind $u" "$m" "$(ratio "$m" "$native")"
done
printf '%-46s %8s\n' "unwinder" "frames per stack"
for u in "${unwinders[@]}"; do
    frames=$($memlens sql --format csv "$out/prof-$u" \
        "SELECT round(avg(n), 2) AS f FROM (SELECT pid, stack_id, count(*) AS n FROM stacks GROUP BY pid, stack_id)" | tail -1)
    printf '%-46s %8s\n' "$u" "$frames"
done

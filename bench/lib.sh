# Shared by the benchmark scripts, sourced from the repository root.
#
# The common start: release build, output directory bench/out ($out), the
# memlens binary ($memlens).
out=bench/out
mkdir -p "$out"
cargo build --release --quiet
memlens=target/release/memlens
# memlens' builds with the compiler of the plain ones (clang-16), whatever
# newer clang is on PATH.
export MEMLENS_CLANG=${MEMLENS_CLANG:-clang-16} MEMLENS_CLANGXX=${MEMLENS_CLANGXX:-clang++-16}

#
# interleaved_medians CMD...: runs each command (a string, split on spaces) once
# per round for $repeats rounds, round-robin so that drift in the machine's speed
# (frequent in a VM) hits every configuration alike, removing $out/prof (and
# heaptrack files) and syncing before each run. Sets the array `medians` to each command's
# median wall time in ms.
interleaved_medians() {
    local n=$# r i t0 t1
    local -a cmds=("$@")
    local -A times=()
    for r in $(seq "$repeats"); do
        for ((i = 0; i < n; i++)); do
            rm -rf "$out/prof" "$out"/heaptrack.*
            # Earlier runs' files written back now, not inside the next timing.
            sync
            # bash's clock in microseconds: no `date` process inside the timing.
            t0=${EPOCHREALTIME/[.,]/}
            # shellcheck disable=SC2086 # each command is a space-separated string
            ${cmds[i]} >/dev/null 2>&1
            t1=${EPOCHREALTIME/[.,]/}
            times[$i]+="$(((t1 - t0) / 1000)) "
        done
    done
    medians=()
    for ((i = 0; i < n; i++)); do
        medians+=("$(printf '%s\n' ${times[$i]} | sort -n | sed -n "$(((repeats + 1) / 2))p")")
    done
}

# ratio MS BASE: MS / BASE with two decimals.
ratio() {
    printf '%.2f' "$(echo "$1 / $2" | bc -l)"
}

# ratio_table NAME...: a row per configuration named, with its median from
# `interleaved_medians` and its ratio to the first one's.
ratio_table() {
    local -a names=("$@")
    local i
    printf '%-44s %8s %8s\n' "configuration" "ms" "ratio"
    for i in "${!names[@]}"; do
        printf '%-44s %8d %8s\n' "${names[i]}" "${medians[i]}" "$(ratio "${medians[i]}" "${medians[0]}")"
    done
}

# peak_mib CMD...: runs the command once (output discarded) and prints the
# largest resident set, MiB, of it and every process it waited for.
peak_mib() {
    python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)' "$@"
}

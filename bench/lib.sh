# Shared by the benchmark scripts: median wall time of a command over $repeats runs,
# in ms, removing $out/prof (and heaptrack files) before each run.
median_ms() {
    local times=()
    for _ in $(seq "$repeats"); do
        rm -rf "$out/prof" "$out"/heaptrack.*
        local t0 t1
        t0=$(date +%s%N)
        "$@" >/dev/null 2>&1
        t1=$(date +%s%N)
        times+=($(( (t1 - t0) / 1000000 )))
    done
    printf '%s\n' "${times[@]}" | sort -n | sed -n "$(( (repeats + 1) / 2 ))p"
}

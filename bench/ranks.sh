#!/usr/bin/env bash
# Reading a job in bounded memory: `memlens report JOB` keeps each rank's
# aggregates only, so its peak memory grows with ranks x distinct objects,
# not with the job's events. Records bench/mpi_sites.c under Open MPI
# (oversubscribed) with 16 and 64 ranks, and 64 ranks with ten times the
# events; then a synthetic job of 1000 small rank profiles (one recorded
# rank copied, its rank renumbered). Prints each report's time and peak
# resident set (MiB) beside one rank's. Usage: bash bench/ranks.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
command -v mpicc >/dev/null || { echo "mpicc not found: apt-get install libopenmpi-dev openmpi-bin" >&2; exit 1; }
mpicc -O1 -g -Iinclude bench/mpi_sites.c -o "$out/mpi_sites"
export OMPI_MCA_btl=self,vader
record_job() { # ranks blocks dir
    rm -rf "$3"
    mpirun --allow-run-as-root --oversubscribe -n "$1" $memlens record -o "$3" -- "$out/mpi_sites" "$2" >/dev/null 2>&1
}
measure() { # label dir [args]
    local label=$1 dir=$2
    shift 2
    local t0=${EPOCHREALTIME/[.,]/}
    local mib
    mib=$(peak_mib $memlens report "$dir" "$@")
    local t1=${EPOCHREALTIME/[.,]/}
    printf '%-44s %8d %10s\n' "$label" "$(((t1 - t0) / 1000))" "$mib"
}
printf '%-44s %8s %10s\n' "job (ranks x blocks per rank)" "ms" "peak MiB"
record_job 16 100000 "$out/job16"
record_job 64 100000 "$out/job64"
record_job 64 1000000 "$out/job64x10"
measure "one rank's report (--rank 0 of 64 x 100000)" "$out/job64" --rank 0
measure "16 x 100000" "$out/job16"
measure "64 x 100000" "$out/job64"
measure "one rank's report (--rank 0 of 64 x 1000000)" "$out/job64x10" --rank 0
measure "64 x 1000000 (ten times the events)" "$out/job64x10"
rm -rf "$out/job1000"
mkdir -p "$out/job1000"
python3 - "$out/job64/rank-0" "$out/job1000" <<'PY'
import json, os, shutil, sys
src, dst = sys.argv[1], sys.argv[2]
for r in range(1000):
    part = os.path.join(dst, f"rank-{r}")
    shutil.copytree(src, part, ignore=shutil.ignore_patterns(".memlens.lock"))
    meta_path = os.path.join(part, "meta.json")
    meta = json.load(open(meta_path))
    for p in meta["processes"]:
        p["rank"] = r
    json.dump(meta, open(meta_path, "w"))
PY
measure "1000 x 100000 (synthetic: rank 0 copied)" "$out/job1000"

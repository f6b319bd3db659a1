#!/usr/bin/env bash
# What the collector's /proc readings cost: one read of a process's status,
# statm, smaps_rollup and numa_maps, timed over many reads (Python open().read(),
# so the figure includes Python's per-call cost) of a process holding 500 MiB.
# Usage: bash bench/procfs.sh [repeats]
set -euo pipefail
cd "$(dirname "$0")/.."
python3 - <<'PY'
import os, time, mmap
held = mmap.mmap(-1, 500 << 20)
for i in range(0, len(held), 4096):
    held[i] = 1
pid = os.getpid()
print(f"{'file':<14} {'us per read':>12}")
for name, n in [("status", 20000), ("statm", 20000), ("smaps_rollup", 200), ("numa_maps", 200)]:
    path = f"/proc/{pid}/{name}"
    t0 = time.perf_counter()
    for _ in range(n):
        with open(path) as f:
            f.read()
    print(f"{name:<14} {(time.perf_counter() - t0) / n * 1e6:>12.1f}")
PY

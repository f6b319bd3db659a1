#!/usr/bin/env bash
# Every benchmark the docs quote, one after the other, each printing its table;
# the whole output also goes to bench/out/all.txt. About 25 minutes on the
# 2-core VM (bench/calibrate.sh, which takes no repeats, 10 of them).
# Usage: bash bench/all.sh [repeats]   (default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-5}
mkdir -p bench/out
{
    echo "# bench/all.sh $repeats, $(date -u +%F), $(nproc) CPUs, $(uname -r)"
    for script in malloc interposer unwind sites access apps import report procfs ranks; do
        echo
        echo "## bash bench/$script.sh $repeats"
        bash "bench/$script.sh" "$repeats"
    done
    echo
    echo "## bash bench/calibrate.sh"
    bash bench/calibrate.sh
    echo
    echo "## bash bench/clock.sh"
    bash bench/clock.sh
} 2>&1 | tee bench/out/all.txt

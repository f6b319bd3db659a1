#!/usr/bin/env bash
# The release build's cost: a clean `cargo build --release` of memlens (and
# its embedded runtime) in a fresh target directory, its wall and CPU time,
# and the binary's size and sections. Run it on a quiet machine: the time is
# the figure (issue target: 12 min on a 2-core VM, binary 60 MB).
# Usage: bash bench/build.sh [target-dir]   (default: a temporary directory,
# removed afterwards; the registry's sources are not downloaded again)
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:-$(mktemp -d "${TMPDIR:-/tmp}/memlens-build.XXXXXX")}
[ $# -ge 1 ] || trap 'rm -rf "$target"' EXIT
cargo fetch --quiet
/usr/bin/time -f "wall %e s, user %U s, system %S s, max RSS %M KiB" \
    cargo build --release --quiet --bin memlens --target-dir "$target" 2>&1 | tail -1
binary="$target/release/memlens"
echo "binary $(stat -c %s "$binary") bytes"
size -A "$binary" | awk '$1 == ".text" || $1 == ".rodata" || $1 == ".eh_frame" { printf "%-10s %6.1f MB\n", $1, $2 / 1e6 }'

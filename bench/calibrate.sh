#!/usr/bin/env bash
# `memlens calibrate` beside a peer run on the same machine in the same run:
# tinymembench (bench/peers/tinymembench, MIT, unmodified), its dependent
# random-read latency by block size with MADV_HUGEPAGE (calibrate uses huge
# pages where it can) and its memset / memcpy bandwidth over 32 MiB, the
# buffer calibrate gets here with --max-size 32M.
#
# tinymembench prints latency as the time beyond an L1 hit, so its figure
# plus calibrate's L1 plateau is what calibrate measures; it counts a copy's
# bytes once, calibrate counts them read and written (twice).
# Usage: bash bench/calibrate.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
peer="$out/tinymembench"
rm -rf "$peer" && cp -r bench/peers/tinymembench "$peer"
make -s -C "$peer" >/dev/null 2>&1
"$memlens" calibrate --max-size 32M -o "$out/calibration.json" >"$out/calibrate.txt" 2>/dev/null
"$peer/tinymembench" >"$out/tinymembench.txt"
python3 - "$out/calibration.json" "$out/tinymembench.txt" "$out/calibrate.txt" <<'EOF'
import json, re, sys

cal = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
printed = open(sys.argv[3]).read()
l1 = cal["levels"][0]["ns"]
ours = {p["bytes"]: p["ns"] for p in cal["latency"]}

# The MADV_HUGEPAGE table, else the first (kernels without THP).
tables = text.split("block size : single random read")[1:]
table = next((t for t in tables if t.startswith(" / dual random read, [MADV_HUGEPAGE]")), tables[0])
peer = {int(m[1]): float(m[2]) for m in re.finditer(r"^\s*(\d+) :\s+([\d.]+) ns", table, re.M)}

print(f"latency, ns per dependent load (tinymembench + calibrate's L1 plateau {l1:.2f} ns)")
print(f"{'working set':>12} {'calibrate':>10} {'tinymembench':>13} {'ratio':>6}")
for size in sorted(set(ours) & set(peer)):
    if size < 8192:
        continue
    theirs = peer[size] + l1
    print(f"{size // 1024:>9} KiB {ours[size]:>10.2f} {theirs:>13.2f} {ours[size] / theirs:>6.2f}")

def peer_gib(name):
    m = re.search(r"^\s*" + re.escape(name) + r"\s*:\s*([\d.]+) MB/s", text, re.M)
    return float(m[1]) * 1e6 / 2**30

# calibrate's printed medians, the refused ones too (their spread says why).
# tinymembench prints the best of its repeats: calibrate's fastest run beside it.
bw = {
    (m[1], int(m[2])): (float(m[3]), float(m[4]), "REFUSED" in m[5])
    for m in re.finditer(r"^\s*(\w+)\s+(\d+) thread\(s\) over .*?([\d.]+) GiB/s\s+\d+ runs [\d.]+ \.\. ([\d.]+)(.*)$", printed, re.M)
}
print("\nbandwidth over 32 MiB, one thread, GiB/s (*: calibrate refused it, its runs spread over 25%)")
print(f"{'figure':<30} {'calibrate median':>16} {'fastest':>8} {'tinymembench best':>17} {'ratio of bests':>14}")
rows = [
    ("write vs standard memset", "write", 1, "standard memset"),
    ("write vs C fill", "write", 1, "C fill"),
    ("copy / 2 vs standard memcpy", "copy", 2, "standard memcpy"),
    ("copy / 2 vs C copy", "copy", 2, "C copy"),
]
for name, kind, per_byte, peer_name in rows:
    median, fastest, refused = bw[(kind, 1)]
    median, fastest = median / per_byte, fastest / per_byte
    theirs = peer_gib(peer_name)
    mark = "*" if refused else " "
    print(f"{name:<30} {median:>15.2f}{mark} {fastest:>8.2f} {theirs:>17.2f} {fastest / theirs:>14.2f}")
EOF

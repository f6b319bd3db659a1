#!/usr/bin/env bash
# perf.data decoding and import against Linux perf on the same files: a ~200 MB
# Arm SPE file built from the real hiperf records, and a PEBS file of 280k
# samples built from the real Skylake-SP recording (bench/mkperf.py). perf script
# prints the fields the fixtures' reference outputs were made with. Commands run
# interleaved; ratios of median wall times, perf script = 1.
# Usage: bash bench/import.sh [repeats]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
repeats=${1:-5}
cargo build --release --quiet -p memlens-decoders --example spe_decode
command -v perf >/dev/null || { echo "perf not found: apt-get install linux-perf" >&2; exit 1; }

python3 bench/mkperf.py spe tests/fixtures/spe-hiperf-raw/hiperf-192.wrapped.perf.data "$out/spe-big.data" 200
python3 bench/mkperf.py pebs tests/fixtures/pebs-skx-loadlat/perf.data "$out/pebs-big.data" 20000
rm -rf "$out/prof"
echo "SPE file: $(du -m "$out/spe-big.data" | cut -f1) MB, $($memlens import "$out/spe-big.data" -o "$out/prof" 2>&1 | grep -o '[0-9]* load/store samples')"
rm -rf "$out/prof"
echo "PEBS file: $(du -m "$out/pebs-big.data" | cut -f1) MB, $($memlens import "$out/pebs-big.data" -o "$out/prof" 2>&1 | grep -o '[0-9]* load/store samples')"

printf '%-50s %8s %8s\n' command ms speedup
interleaved_medians "perf script -i $out/spe-big.data -F hw:cpu,tid,event,ip,addr,data_src,weight,period" \
    "target/release/examples/spe_decode $out/spe-big.data" \
    "$memlens import $out/spe-big.data -o $out/prof"
names=("perf script (SPE)" "memlens SPE decoder (spe_decode example)" "memlens import (SPE, decode + Parquet profile)")
for i in 0 1 2; do
    printf '%-50s %8d %8s\n' "${names[i]}" "${medians[i]}" "$(ratio "${medians[0]}" "${medians[i]}")"
done
interleaved_medians "perf script -i $out/pebs-big.data -F comm,tid,cpu,time,event,ip,addr,data_src,weight,ins_lat" \
    "$memlens import $out/pebs-big.data -o $out/prof"
names=("perf script (PEBS)" "memlens import (PEBS, Parquet profile)")
for i in 0 1; do
    printf '%-50s %8d %8s\n' "${names[i]}" "${medians[i]}" "$(ratio "${medians[0]}" "${medians[i]}")"
done

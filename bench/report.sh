#!/usr/bin/env bash
# Analysis at scale: record examples/stream.c (built with memlens cc) at period 10,
# about 25 million access samples, then time `memlens report` and measure its peak
# memory (GNU time's maximum resident set); then the HTML page of the same profile:
# its time, size, and its load time in headless Chromium (when Python has
# Selenium, as .ci/run's environment does: PYTHON=target/ci-python/bin/python3).
# Usage: bash bench/report.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
$memlens cc -O2 -Iinclude examples/stream.c -o "$out/stream-memlens"
rm -rf "$out/big"
$memlens record -o "$out/big" --period 10 -- "$out/stream-memlens" >/dev/null
samples=$($memlens report "$out/big" | grep -o '^  [0-9]* samples, 1 per' | head -1 | awk '{print $1}')
/usr/bin/time -f "%e %M" -o "$out/report.time" $memlens report "$out/big" >/dev/null
read -r secs kb < "$out/report.time"
echo "samples: $samples"
echo "report: $secs s, peak RSS $((kb / 1024)) MiB"
echo "per million samples: $(echo "$secs / ($samples / 1000000)" | bc -l | cut -c1-5) s"
/usr/bin/time -f "%e %M" -o "$out/html.time" $memlens report "$out/big" --html "$out/big.html" >/dev/null 2>&1
read -r secs kb < "$out/html.time"
echo "report --html: $secs s, peak RSS $((kb / 1024)) MiB, page $(( $(stat -c %s "$out/big.html") / 1024 )) KiB"
python=${PYTHON:-python3}
if $python -c "import selenium" 2>/dev/null; then
    $python bench/page_load.py "$out/big.html"
else
    echo "page load: not measured ($python has no selenium)"
fi

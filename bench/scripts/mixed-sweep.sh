#!/usr/bin/env bash
# The mixed-zoo sweep of docs/benchmarks.md: symphony against work-conserving
# on the 1080Ti zoo (35 models, 64 GPUs, even popularity) at three SLO scales
# and two burstiness levels. Prints one CSV row per cell.
# Usage: bench/scripts/mixed-sweep.sh [path/to/symphony]
set -euo pipefail
bin=${1:-symphony}
base=$(dirname "$0")/../../testdata/workloads/mixed-1080ti.yaml
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "slo_scale,arrival,symphony_rps,work_conserving_rps,ratio"
for scale in 0.8 1.0 1.5; do
  for arrival in gamma:0.3 gamma:1; do
    w=$tmp/w.yaml
    sed -e "s/arrival: poisson/arrival: $arrival/" -e "s/^\(  *\)profiles: 1080ti/\1profiles: 1080ti\n\1slo_scale: $scale/" "$base" > "$w"
    s=$("$bin" sim -f "$w" --policy symphony --find-goodput --json --quiet | python3 -c 'import json,sys; print(json.load(sys.stdin)["goodput_search"]["goodput_rps"])')
    c=$("$bin" sim -f "$w" --policy work-conserving --find-goodput --json --quiet | python3 -c 'import json,sys; print(json.load(sys.stdin)["goodput_search"]["goodput_rps"])')
    python3 -c "print('$scale,$arrival,%.0f,%.0f,%.3f' % ($s, $c, $s/$c))"
  done
done

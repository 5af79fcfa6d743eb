#!/usr/bin/env bash
# Priority levels under overload, in the simulator (issue 17): for each
# per-model rate, testdata/workloads/priority.yaml (four ResNet50s on 8
# GPUs, a quarter of the requests at level 1) beside the same load without
# levels (its priority_mix lines deleted). Prints a Markdown table: goodput
# and each level's bad rate with levels, goodput and bad rate without.
#
# Usage: bench/scripts/priority-levels.sh [RATE ...]   (default 600 1000 1170 1500 2000 3000)
set -euo pipefail
cd "$(dirname "$0")/../.."
make -s build
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rates=("$@")
[[ ${#rates[@]} -gt 0 ]] || rates=(600 1000 1170 1500 2000 3000)
echo "| rate per model | offered rps | goodput rps | level 1 bad % | level 0 bad % | without levels: goodput rps | bad % |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for r in "${rates[@]}"; do
  sed "s/rate: 1170/rate: $r/" testdata/workloads/priority.yaml >"$tmp/levels.yaml"
  sed '/priority_mix/d' "$tmp/levels.yaml" >"$tmp/none.yaml"
  bin/symphony sim -f "$tmp/levels.yaml" --json --quiet >"$tmp/levels.json"
  bin/symphony sim -f "$tmp/none.yaml" --json --quiet >"$tmp/none.json"
  python3 - "$r" "$tmp/levels.json" "$tmp/none.json" <<'PY'
import json, sys
rate, lv, no = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
p = {x["level"]: x for x in lv["priorities"]}
print(f'| {rate} | {lv["offered_rps"]:.0f} | {lv["goodput_rps"]:.1f} | {100*p[1]["bad_rate"]:.2f} | {100*p[0]["bad_rate"]:.2f} | {no["goodput_rps"]:.1f} | {100*no["bad_rate"]:.2f} |')
PY
done

#!/usr/bin/env bash
# The gateway path against the embedded client (issue 14): README's
# "Running a cluster by hand" as separate processes on loopback (a
# scheduler serving demo.yaml, two backends of 4 GPUs, a frontend with the
# KServe v2 gateway), then `symphony bench` of demo.yaml through the
# gateway and through an embedded frontend in turn, RUNS times each, in one
# sitting, printing each run's goodput, bad rate and drop reasons.
# Usage: bench/scripts/gateway-vs-embedded.sh [BIN] [RUNS]
set -euo pipefail
bin=${1:-bin/symphony}
runs=${2:-2}
wl=testdata/workloads/demo.yaml
sched=127.0.0.1:7100
gw=http://127.0.0.1:8000
pids=()
cleanup() { kill -TERM "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT
"$bin" scheduler -f "$wl" --addr "$sched" >/dev/null 2>&1 & pids+=($!)
"$bin" backend --scheduler "$sched" --gpus 4 --name b1 >/dev/null 2>&1 & pids+=($!)
"$bin" backend --scheduler "$sched" --gpus 4 --name b2 >/dev/null 2>&1 & pids+=($!)
"$bin" frontend --scheduler "$sched" --http-addr "${gw#http://}" >/dev/null 2>&1 & pids+=($!)
for _ in $(seq 100); do curl -sf "$gw/v2/health/ready" >/dev/null && break; sleep 0.2; done
curl -sf "$gw/v2/health/ready" >/dev/null || { echo "gateway not ready at $gw" >&2; exit 1; }
for i in $(seq "$runs"); do
  for via in "--gateway $gw" "--scheduler $sched"; do
    # shellcheck disable=SC2086 # $via is two words on purpose
    "$bin" bench -f "$wl" $via --json --quiet | python3 -c '
import json, sys
d = json.load(sys.stdin)
print("%-11s run %s  goodput %7.1f req/s  bad %5.2f%%  %s" % (sys.argv[1], sys.argv[2], d["goodput_rps"], 100 * d["bad_rate"], d.get("drop_reasons") or {}))
' "${via%% *}" "$i"
  done
done

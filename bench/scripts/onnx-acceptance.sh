#!/usr/bin/env bash
# The ONNX acceptance measurements (issue 16) in one command, for a quiet
# machine: how a live cluster running the benchmark ResNet on ONNX Runtime
# keeps to its profile, and how its goodput compares with the simulator's.
#
#  1. build, make onnxruntime (unless SYMPHONY_ONNXRUNTIME_LIB names the
#     library already) and make models (.cache/models/resnet);
#  2. profile the model with one ONNX Runtime thread, as the backend runs
#     it, into its config.yaml (plots and JSON in OUT);
#  3. write a workload (OUT/workload-70.yaml) at LOAD (0.7) of the rate the
#     profile sustains on GPUS backend "GPUs" (one core each);
#  4. start a scheduler serving the repository and an ONNX backend with
#     GPUS GPUs, one intra-op thread each, on loopback;
#  5. symphony bench of that workload: profile adherence (targets: real/ℓ(b)
#     p50 within 10% of 1, p99 within 25%);
#  6. symphony sim --find-goodput on the same workload, then symphony bench
#     at the simulator's goodput rate (targets: bad rate <= 2%, live goodput
#     >= 85% of the simulator's);
#  7. print a summary table; OUT holds every run's JSON, CSV and charts, and
#     summary.json / summary.csv.
#
# GPUS defaults to half the cores (at least 1): each backend GPU runs its
# batches on one core of its own, the last GPUS cores (symphony backend
# --executor-cpus; the profile is measured the same way, --executor-cpu),
# and the scheduler, the frontend and the load generator run on the others
# (taskset -c), as a GPU is no CPU that other processes share; on a 2-core
# machine, CPU 1 runs the batches and CPU 0 everything else. PIN=0 leaves
# every process wherever the kernel puts it (the figures without pinning).
#
# Usage: bench/scripts/onnx-acceptance.sh [OUT]      (default out/onnx-acceptance)
# Environment: DURATION (60s) and WARMUP (10s) of each live run and the
# simulator's; PROFILE_RUNS (30) timed batches per size; GPUS; LOAD (0.7);
# PIN (1, above); TAIL_QUANTILE (the scheduler's --tail-quantile; unset: its
# default; 0 plans deadlines on the profile alone).
# A smoke test: DURATION=5s WARMUP=2s PROFILE_RUNS=5 bench/scripts/onnx-acceptance.sh
# Exit status: 0 when every target is met, 3 when one is missed, else an error.
set -euo pipefail
out=${1:-out/onnx-acceptance}
duration=${DURATION:-60s}
warmup=${WARMUP:-10s}
profile_runs=${PROFILE_RUNS:-30}
cores=$(nproc)
gpus=${GPUS:-$(( cores / 2 > 0 ? cores / 2 : 1 ))}
load=${LOAD:-0.7}
pin=${PIN:-1}
sched_flags=()
[[ -n ${TAIL_QUANTILE:-} ]] && sched_flags=(--tail-quantile "$TAIL_QUANTILE")
repo=.cache/models
model=resnet
bin=bin/symphony
bench=bin/symphony-bench

cd "$(dirname "$0")/../.."
mkdir -p "$out"
log() { printf '== %s\n' "$*" >&2; }

log "build"
make -s build
if [[ -z "${SYMPHONY_ONNXRUNTIME_LIB:-}" || ! -f "${SYMPHONY_ONNXRUNTIME_LIB}" ]]; then
  make -s onnxruntime
  export SYMPHONY_ONNXRUNTIME_LIB=$PWD/.cache/onnxruntime-1.24.1/libonnxruntime.so.1
fi
make -s models
# The machine's state, beside the figures it produced.
python3 - "$out/machine.json" "$cores" "$gpus" "$pin" "${TAIL_QUANTILE:-default}" <<'EOF'
import json, os, platform, sys, time
json.dump({"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": platform.node(), "cpus": int(sys.argv[2]),
           "backend_gpus": int(sys.argv[3]), "executor_cpus_pinned": sys.argv[4] == "1", "tail_quantile": sys.argv[5],
           "loadavg_at_start": os.getloadavg(), "kernel": platform.release()},
          open(sys.argv[1], "w"), indent=2)
EOF

# The executor's CPUs (the last $gpus) and the others'.
others=() exec_cpus=() profile_pin=()
if [[ $pin == 1 ]]; then
  (( gpus < cores )) || { echo "PIN=1 needs a core beside the GPUs' $gpus: have $cores (give GPUS, or PIN=0)" >&2; exit 1; }
  exec_cpus=(--executor-cpus "$(seq -s, $((cores - gpus)) $((cores - 1)))")
  others=(taskset -c "$(seq -s, 0 $((cores - gpus - 1)))")
  profile_pin=(--executor-cpu $((cores - 1)))
fi

log "profile $model (one intra-op thread, $profile_runs runs per batch size${profile_pin[1]:+, on CPU ${profile_pin[1]}})"
"$bench" profile --model-repo "$repo" --model "$model" --intra-op-threads 1 --runs "$profile_runs" "${profile_pin[@]}" \
  --json --plot "$out" >"$out/profile.json" 2>"$out/profile.log"
"$bench" models workload --model-repo "$repo" --model "$model" --gpus "$gpus" --load "$load" \
  --duration "$duration" --warmup "$warmup" -o "$out/workload-70.yaml"

# A free port on loopback, so that runs beside other clusters do not clash.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
addr=127.0.0.1:$port
pids=()
cleanup() { [[ ${#pids[@]} -gt 0 ]] && kill -TERM "${pids[@]}" 2>/dev/null; wait 2>/dev/null || true; }
trap cleanup EXIT
log "scheduler on $addr, backend with $gpus GPU(s)"
"${others[@]}" "$bin" scheduler --model-repo "$repo" --addr "$addr" "${sched_flags[@]}" >"$out/scheduler.log" 2>&1 & pids+=($!)
for _ in $(seq 100); do grep -q "listening" "$out/scheduler.log" && break; sleep 0.1; done
grep -q "listening" "$out/scheduler.log" || { echo "the scheduler did not listen within 10s; see $out/scheduler.log" >&2; exit 1; }
"$bin" backend --executor onnx --model-repo "$repo" --intra-op-threads 1 --gpus "$gpus" "${exec_cpus[@]}" \
  --scheduler "$addr" --name onnx-backend >"$out/backend.log" 2>&1 & pids+=($!)
for _ in $(seq 300); do grep -q "registered" "$out/backend.log" && break; sleep 0.1; done
grep -q "registered" "$out/backend.log" || { echo "the backend did not register within 30s; see $out/backend.log" >&2; exit 1; }

run_bench() { # name workload
  log "symphony bench: $1"
  "${others[@]}" "$bin" bench -f "$2" --scheduler "$addr" --json --quiet --csv "$out/$1.csv" --plot "$out/$1" >"$out/$1.json"
}
run_bench live-70 "$out/workload-70.yaml"

log "symphony sim --find-goodput"
"$bin" sim -f "$out/workload-70.yaml" --find-goodput --json >"$out/sim-goodput.json"
mult=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["goodput_search"]["multiplier"])' "$out/sim-goodput.json")
goodput_load=$(python3 -c 'import sys; print(float(sys.argv[1]) * float(sys.argv[2]))' "$load" "$mult")
"$bench" models workload --model-repo "$repo" --model "$model" --gpus "$gpus" --load "$goodput_load" \
  --duration "$duration" --warmup "$warmup" -o "$out/workload-goodput.yaml"
run_bench live-goodput "$out/workload-goodput.yaml"

python3 - "$out" "$model" <<'EOF'
import csv, json, sys
out, model = sys.argv[1], sys.argv[2]
load = lambda name: json.load(open(f"{out}/{name}.json"))
live70, sim, liveg, machine = load("live-70"), load("sim-goodput"), load("live-goodput"), load("machine")
def m(r):
    return next(x for x in r["models"] if x["name"] == model)
sim_goodput = sim["goodput_search"]["goodput_rps"]
rows = []
for name, r in (("live at 70% of the profile", live70), ("live at the simulator's goodput", liveg)):
    x = m(r)
    rows.append({"run": name, "offered_rps": x["offered_rps"], "goodput_rps": x["goodput_rps"], "bad_rate": x["bad_rate"],
                 "latency_p99_ms": x["latency_p99"], "mean_batch": x["mean_batch_size"],
                 "profile_batches": x.get("profile_batches", 0), "profile_ratio_p50": x.get("profile_ratio_p50", 0),
                 "profile_ratio_p99": x.get("profile_ratio_p99", 0)})
# The search's last passing run, at the rate the live run offers: the
# simulator's own figures for the same arrivals.
s = m(sim)
rows.append({"run": "simulator at its goodput", "offered_rps": s["offered_rps"], "goodput_rps": s["goodput_rps"], "bad_rate": s["bad_rate"],
             "latency_p99_ms": s["latency_p99"], "mean_batch": s["mean_batch_size"], "profile_batches": None, "profile_ratio_p50": None, "profile_ratio_p99": None})
a, g = rows[0], rows[1]
targets = [
    ("real/ℓ(b) p50 within 10% of 1 (at 70%)", a["profile_batches"] > 0 and abs(a["profile_ratio_p50"] - 1) <= 0.10, f'{a["profile_ratio_p50"]:.3f}'),
    ("real/ℓ(b) p99 within 25% of 1 (at 70%)", a["profile_batches"] > 0 and abs(a["profile_ratio_p99"] - 1) <= 0.25, f'{a["profile_ratio_p99"]:.3f}'),
    ("bad rate <= 2% at the simulator's goodput", g["bad_rate"] <= 0.02, f'{100 * g["bad_rate"]:.2f}%'),
    ("live goodput >= 85% of the simulator's", sim_goodput > 0 and g["goodput_rps"] >= 0.85 * sim_goodput,
     f'{g["goodput_rps"]:.1f} / {sim_goodput:.1f} = {g["goodput_rps"] / sim_goodput if sim_goodput else 0:.3f}'),
]
fmt = lambda v, f: "-" if v is None else format(v, f)
print(f'ONNX acceptance: {model} on {machine["backend_gpus"]} backend GPU(s) '
      f'({"a core of their own each" if machine["executor_cpus_pinned"] else "cores not pinned"}; tail quantile {machine["tail_quantile"]}), {machine["cpus"]} cores, '
      f'load average {machine["loadavg_at_start"][0]:.2f} at the start ({machine["host"]}, {machine["time"]})')
print(f'{"run":34} {"offered rps":>11} {"goodput rps":>11} {"bad %":>6} {"p99 ms":>7} {"batch":>6} {"batches":>8} {"ℓ p50":>6} {"ℓ p99":>6}')
for r in rows:
    print(f'{r["run"]:34} {r["offered_rps"]:11.1f} {r["goodput_rps"]:11.1f} {fmt(None if r["bad_rate"] is None else 100 * r["bad_rate"], "6.2f"):>6} '
          f'{fmt(r["latency_p99_ms"], "7.2f"):>7} {fmt(r["mean_batch"], "6.2f"):>6} {fmt(r["profile_batches"], "8d"):>8} '
          f'{fmt(r["profile_ratio_p50"], "6.3f"):>6} {fmt(r["profile_ratio_p99"], "6.3f"):>6}')
print("(ℓ p50/p99: each batch's real run time over the profile's ℓ(b))")
for name, ok, value in targets:
    print(f'{"met   " if ok else "MISSED"} {name}: {value}')
json.dump({"machine": machine, "sim_goodput_rps": sim_goodput, "sim_multiplier": sim["goodput_search"]["multiplier"], "runs": rows,
           "targets": [{"target": n, "met": ok, "value": v} for n, ok, v in targets]},
          open(f"{out}/summary.json", "w"), indent=2)
with open(f"{out}/summary.csv", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
sys.exit(0 if all(ok for _, ok, _ in targets) else 3)
EOF

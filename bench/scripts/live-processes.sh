#!/usr/bin/env bash
# The live control plane on etcd as real processes on this machine, for two
# acceptance items of issue 18 (docs/operations.md, "The live control plane
# on etcd"):
#
#  scale     three parts, one scheduler each, a controller, BACKENDS
#            backends of one emulated GPU and one frontend gateway serve
#            WORKLOAD (symphony-bench bench --grpc, DURATION of load): the
#            offered load, goodput and bad rate per model and overall, and
#            `symphony cluster status --json` at the end (models and GPUs
#            per part).
#  failover  the same with a standby per part (six schedulers, registry TTL
#            1s), the load at LOAD (0.5) of the declared rates, which the
#            parts are sized for: after KILL_AFTER (20s) of load, SIGKILL
#            part 0's active scheduler and measure the takeover (kill ->
#            the standby's first planned batch, from its
#            symphony_scheduler_plans_total polled every 20 ms; kill -> the
#            standby active in its /readyz and in the routing table), part
#            0's bad rate against the other parts' (over the run, and in the
#            first seconds after the kill from the frontend's counters).
# Both check that every request ended exactly once: the bench's offered =
# good + late + dropped + failed, and the frontend's submitted = answered +
# dropped + failed with none left in flight.
#
# Everything runs on loopback from fixed ports BASE_PORT (27000) to
# BASE_PORT+399: etcd (symphony-bench etcd), the schedulers, backends and
# controller with their --metrics-addr, the frontend's gateway (HTTP,
# metrics and probes) and gRPC. Logs (JSON lines, one file per process)
# and every figure go to OUTDIR: summary.json, bench.json,
# status-start.json, status-end.json, takeover.json (failover), frontend
# counter samples, and logs/. Every process started is stopped on exit.
#
# Usage: bench/scripts/live-processes.sh scale|failover OUTDIR
# Environment: WORKLOAD (testdata/workloads/live-processes.yaml; its models
# written as `{name: M, ..., rate: R, ...}` lines, which this script reads
# for the controller's --rate), BACKENDS (6), DURATION (60s), WARMUP (5s),
# LOAD (scale 1, failover 0.5: the bench offers LOAD x each rate, the
# controller sizes for the rates themselves), KILL_AFTER (20: seconds of
# load before the kill), EPOCH (the controller's --epoch; scale 30s,
# failover 10m so that no re-partitioning overlaps the failover),
# SCHED_TTL (the schedulers' --registry-ttl; failover 1s, scale 10s),
# BASE_PORT (27000), SKIP_BUILD (1: use bin/ as is).
# Exit status: 0 when the run completed and every request ended once, 3
# when a count does not add up, else an error.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
(( $# == 2 )) || usage
mode=$1 out=$2
case $mode in scale | failover) ;; *) usage ;; esac

cd "$(dirname "$0")/../.."
wl=${WORKLOAD:-testdata/workloads/live-processes.yaml}
backends=${BACKENDS:-6}
duration=${DURATION:-60s}
warmup=${WARMUP:-5s}
base=${BASE_PORT:-27000}
kill_after=${KILL_AFTER:-20}
parts=3
if [[ $mode == failover ]]; then
  replicas=2 load=${LOAD:-0.5} epoch=${EPOCH:-10m} ttl=${SCHED_TTL:-1s}
else
  replicas=1 load=${LOAD:-1} epoch=${EPOCH:-30s} ttl=${SCHED_TTL:-10s}
fi
sym=bin/symphony
bench=bin/symphony-bench
etcd=127.0.0.1:$base
gw_http=127.0.0.1:$((base + 1))
gw_grpc=127.0.0.1:$((base + 2))
gw_data=127.0.0.1:$((base + 3))
ctl_metrics=127.0.0.1:$((base + 4))
sched_addr() { echo "127.0.0.1:$((base + 100 + $1 * 10 + $2))"; }    # part, replica
sched_metrics() { echo "127.0.0.1:$((base + 200 + $1 * 10 + $2))"; } # part, replica
backend_metrics() { echo "127.0.0.1:$((base + 300 + $1))"; }

log() { printf '== %s %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { printf 'live-processes: %s\n' "$*" >&2; exit 1; }
[[ -f $wl ]] || die "no workload file $wl"
(( backends >= parts && backends <= 99 )) || die "BACKENDS=$backends: want one per part ($parts) to 99"
command -v python3 >/dev/null || die "python3 is required"
command -v curl >/dev/null || die "curl is required"

mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -rf "$out/logs" && mkdir -p "$out/logs"
rm -f "$out"/*.json "$out"/*.tsv
tmp=$(mktemp -d "${TMPDIR:-/tmp}/live-processes.XXXXXX")
logs=$out/logs

# Every process started: pid, name, role; stopped on exit (SIGTERM, then
# SIGKILL after a bounded wait), etcd last.
declare -a pids=() names=()
etcd_pid=
stop_all() {
  local rc=$? pid i
  trap - EXIT INT TERM
  for pid in "${sampler_pid:-}" "${bench_pid:-}"; do [[ -n $pid ]] && kill -TERM "$pid" 2>/dev/null || true; done
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill -TERM "${pids[i]}" 2>/dev/null || true; done
  for _ in $(seq 50); do
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    (( alive )) || break
    sleep 0.2
  done
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  if [[ -n $etcd_pid ]]; then
    kill -TERM "$etcd_pid" 2>/dev/null || true
    for _ in $(seq 25); do kill -0 "$etcd_pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$etcd_pid" 2>/dev/null || true
  fi
  wait 2>/dev/null || true
  rm -rf "$tmp"
  exit "$rc"
}
trap stop_all EXIT
trap 'exit 130' INT TERM

# start NAME CMD...: runs CMD in the background, its output in logs/NAME.log.
start() {
  local name=$1; shift
  "$@" >"$logs/$name.log" 2>&1 &
  pids+=($!) names+=("$name")
  disown $! # no "Killed" job notice for the SIGKILLed scheduler; stop_all polls the pids
  printf '%s\t%s\n' "$!" "$name" >>"$out/processes.tsv"
}
pid_of() {
  local i
  for i in "${!names[@]}"; do [[ ${names[i]} == "$1" ]] && { echo "${pids[i]}"; return; }; done
  return 1
}
# check_alive: every process started is still running, else the error
# names it with its log's tail.
check_alive() {
  local i
  for i in "${!pids[@]}"; do
    kill -0 "${pids[i]}" 2>/dev/null && continue
    tail -n 5 "$logs/${names[i]}.log" >&2 || true
    die "${names[i]} (pid ${pids[i]}) exited; its log: $logs/${names[i]}.log"
  done
}
# wait_for WHAT SECONDS CMD...: polls CMD every 0.2s until it succeeds.
wait_for() {
  local what=$1 secs=$2; shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    check_alive
    (( SECONDS < deadline )) || die "timed out after ${secs}s waiting for $what"
    sleep 0.2
  done
}
# cpu_snapshot FILE: the machine's CPU jiffies and every process's, so that
# two snapshots tell how much CPU the run's processes took and how much
# others did (a busy machine makes the figures noisy; the summary says).
cpu_snapshot() {
  python3 - "$1" <<'EOF'
import json, os, sys, time
snap = {"t": time.time(), "hz": os.sysconf("SC_CLK_TCK"), "procs": {}}
v = list(map(int, open("/proc/stat").readline().split()[1:]))
snap["total"], snap["idle"] = sum(v[:8]), v[3] + v[4]
for d in os.listdir("/proc"):
    if not d.isdigit():
        continue
    try:
        st = open("/proc/%s/stat" % d).read()
        rest = st[st.rindex(")") + 2:].split()
        cmd = open("/proc/%s/cmdline" % d, "rb").read().replace(b"\0", b" ").decode(errors="replace").strip()
        snap["procs"][d] = [int(rest[11]) + int(rest[12]), cmd[:160] or st[st.index("(") + 1:st.rindex(")")]]
    except (OSError, ValueError, IndexError):
        pass
json.dump(snap, open(sys.argv[1], "w"))
EOF
}
port_free() { ! (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; }
status_json() { "$sym" cluster status --etcd "$etcd" --json --timeout 5s; }

# The models and their declared rates, from the workload's flow-mapping
# lines; the bench's copy of the workload has each rate times LOAD.
python3 - "$wl" "$load" "$tmp/rates.tsv" "$tmp/workload.yaml" <<'EOF'
import re, sys
src, load, rates_out, wl_out = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
rates, lines = [], []
for line in open(src):
    m = re.search(r'\bname:\s*([^,}\s]+)', line)
    r = re.search(r'\brate:\s*([0-9.]+)', line)
    if m and r and 'daily_rate' not in line and 'rate_schedule' not in line:
        rates.append((m.group(1), float(r.group(1))))
        line = line[:r.start(1)] + ('%g' % (float(r.group(1)) * load)) + line[r.end(1):]
    lines.append(line)
if not rates:
    sys.exit('live-processes: %s: no `{name: M, ..., rate: R}` model lines' % src)
open(rates_out, 'w').write(''.join('%s\t%g\n' % nr for nr in rates))
open(wl_out, 'w').write(''.join(lines))
EOF
rate_flags=()
while IFS=$'\t' read -r m r; do rate_flags+=(--rate "$m=$r"); done <"$tmp/rates.tsv"
log "$mode: $((${#rate_flags[@]} / 2)) models from $wl (${rate_flags[*]}), load x$load, $backends backends, $parts parts x $replicas schedulers"

if [[ ${SKIP_BUILD:-0} != 1 ]]; then
  log "build"
  make -s build
fi
ports=("$etcd" "$gw_http" "$gw_grpc" "$gw_data" "$ctl_metrics")
for ((p = 0; p < parts; p++)); do
  for ((r = 0; r < replicas; r++)); do ports+=("$(sched_addr "$p" "$r")" "$(sched_metrics "$p" "$r")"); done
done
for ((i = 0; i < backends; i++)); do ports+=("$(backend_metrics "$i")"); done
for a in "${ports[@]}"; do
  port_free "$a" || die "$a is in use: another run still going? (BASE_PORT moves every port)"
done

python3 - "$out/machine.json" "$mode" <<'EOF'
import json, os, platform, sys, time
json.dump({"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": platform.node(), "cpus": os.cpu_count(),
           "mode": sys.argv[2], "loadavg_at_start": os.getloadavg(), "kernel": platform.release()},
          open(sys.argv[1], "w"), indent=2)
EOF

read -r la _ </proc/loadavg
[[ ${la%.*} -lt $(nproc) ]] || log "WARNING: load average $la on $(nproc) CPUs before the start: the figures will be noisy (summary.json's cpu_during_load says how much CPU others took)"
log "etcd at $etcd"
"$bench" etcd --listen "$etcd" --data-dir "$tmp/etcd" >"$logs/etcd.log" 2>&1 &
etcd_pid=$!
printf '%s\t%s\n' "$etcd_pid" etcd >>"$out/processes.tsv"
wait_for "etcd at $etcd" 30 status_json

common=(--etcd "$etcd" --log-format json --insecure)
log "schedulers: $parts parts x $replicas (--registry-ttl $ttl)"
for ((r = 0; r < replicas; r++)); do
  for ((p = 0; p < parts; p++)); do
    n=s$p$([[ $r == 0 ]] && echo a || echo b) # s0a, s0b, s1a, ...
    start "$n" "$sym" scheduler "${common[@]}" -f "$wl" --part "$p" --name "$n" --registry-ttl "$ttl" \
      --addr "$(sched_addr "$p" "$r")" --metrics-addr "$(sched_metrics "$p" "$r")"
  done
  # The first replica of each part is elected before the next starts, so
  # that the active schedulers are the a's (the script finds them anyway).
  for ((p = 0; p < parts; p++)); do
    wait_for "scheduler of part $p replica $r ready" 30 curl -sf -m 1 "http://$(sched_metrics "$p" "$r")/readyz"
  done
done
log "$backends backends, frontend"
for ((i = 0; i < backends; i++)); do
  start "b$i" "$sym" backend "${common[@]}" --name "b$i" --gpus 1 --metrics-addr "$(backend_metrics "$i")"
done
start fe "$sym" frontend "${common[@]}" --name fe --http-addr "$gw_http" --grpc-addr "$gw_grpc" --data-addr "$gw_data"
for ((i = 0; i < backends; i++)); do
  wait_for "backend b$i ready" 30 curl -sf -m 1 "http://$(backend_metrics "$i")/readyz"
done
backends_registered() { [[ $(status_json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["backends"] or []))') == "$1" ]]; }
wait_for "$backends backends registered" 30 backends_registered "$backends"

log "controller (--parts $parts --epoch $epoch)"
start controller "$sym" controller --etcd "$etcd" --log-format json --parts "$parts" -f "$wl" "${rate_flags[@]}" \
  --epoch "$epoch" --metrics-addr "$ctl_metrics"
wait_for "the controller's first epoch" 60 curl -sf -m 1 "http://$ctl_metrics/readyz"
# Settled: every model routed to a part, every frontend on the latest
# routing table, the gateway ready.
settled() {
  status_json | python3 -c '
import json, sys
s = json.load(sys.stdin)
ok = s["routes"] and not s["moving"] and all(m["routed_part"] is not None for m in s["models"]) \
     and s["frontends"] and all(f["routes"] == s["routes"]["mod_revision"] for f in s["frontends"])
sys.exit(0 if ok else 1)'
}
wait_for "every model routed and the frontend on the latest routes" 60 settled
wait_for "the gateway ready" 30 curl -sf -m 1 "http://$gw_http/v2/health/ready"
status_json >"$out/status-start.json"

# The frontend's per-model counters every 0.5 s, for the bad requests per
# part around the kill.
python3 - "http://$gw_http/metrics" "$out/frontend-samples.json" <<'EOF' &
import json, re, signal, sys, time, urllib.request
url, path = sys.argv[1], sys.argv[2]
samples, stop = [], False
def end(*_):
    global stop
    stop = True
signal.signal(signal.SIGTERM, end)
pat = re.compile(r'^symphony_frontend_model_requests_total\{([^}]*)\}\s+(\S+)', re.M)
while not stop:
    t = time.time()
    try:
        text = urllib.request.urlopen(url, timeout=1).read().decode()
        counts = {}
        for labels, v in pat.findall(text):
            kv = dict(re.findall(r'(\w+)="([^"]*)"', labels))
            key = kv.get("model", "") + "|" + kv.get("outcome", "")
            counts[key] = counts.get(key, 0) + float(v)
        samples.append({"t": t, "counts": counts})
    except Exception as e:
        samples.append({"t": t, "error": str(e)})
    time.sleep(max(0, 0.5 - (time.time() - t)))
json.dump(samples, open(path, "w"))
EOF
sampler_pid=$!
printf '%s\t%s\n' "$sampler_pid" sampler >>"$out/processes.tsv"

log "load: $bench bench -f <$wl at x$load> --grpc $gw_grpc --duration $duration --warmup $warmup"
cpu_snapshot "$tmp/cpu-start.json"
load_start=$(date +%s.%N)
"$bench" bench -f "$tmp/workload.yaml" --grpc "$gw_grpc" --duration "$duration" --warmup "$warmup" --json --quiet \
  >"$out/bench.json" 2>"$logs/bench.log" &
bench_pid=$!
printf '%s\t%s\n' "$bench_pid" bench >>"$out/processes.tsv"

if [[ $mode == failover ]]; then
  sleep "$kill_after"
  check_alive
  kill -0 "$bench_pid" 2>/dev/null || die "the bench ended before the kill: $logs/bench.log"
  status_json >"$out/status-before-kill.json"
  read -r victim standby standby_addr < <(python3 - "$out/status-before-kill.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
p0 = next(p for p in s["parts"] if p["part"] == 0)
act = [x for x in p0["schedulers"] if x["role"] == "active"]
sb = [x for x in p0["schedulers"] if x["role"] != "active"]
if len(act) != 1 or not sb:
    sys.exit("live-processes: part 0 has %d active and %d standby schedulers" % (len(act), len(sb)))
print(act[0]["name"], sb[0]["name"], sb[0]["address"])
EOF
)
  victim_pid=$(pid_of "$victim") || die "part 0's active scheduler $victim is not a process this script started"
  case $standby in s0a) standby_metrics=$(sched_metrics 0 0) ;; s0b) standby_metrics=$(sched_metrics 0 1) ;; *) die "standby $standby: not s0a or s0b" ;; esac
  log "SIGKILL $victim (pid $victim_pid), part 0's active scheduler; standby $standby at $standby_addr"
  # The kill and the takeover's clock in one process: the standby's
  # /metrics and /readyz every 20 ms, cluster status as often as it runs.
  python3 - "$victim_pid" "http://$standby_metrics" "$standby" "$standby_addr" "$sym" "$etcd" "$out/takeover.json" <<'EOF'
import json, os, re, signal, subprocess, sys, threading, time, urllib.request
pid, murl, sname, saddr, sym, etcd, path = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7]
def plans():
    text = urllib.request.urlopen(murl + "/metrics", timeout=1).read().decode()
    m = re.search(r'^symphony_scheduler_plans_total\s+(\S+)', text, re.M)
    return float(m.group(1)) if m else 0.0
before = plans()
res = {"victim_pid": pid, "standby": sname, "standby_address": saddr, "standby_plans_before": before, "poll_ms": 20}
t0 = time.time()
os.kill(pid, signal.SIGKILL)
res["kill_unix"] = t0
found = {}
def status_loop():
    while "routed_s" not in found and time.time() - t0 < 30:
        try:
            s = json.loads(subprocess.run([sym, "cluster", "status", "--etcd", etcd, "--json", "--timeout", "2s"],
                                          capture_output=True, timeout=5).stdout)
        except Exception:
            continue
        t = time.time() - t0
        p0 = next(p for p in s["parts"] if p["part"] == 0)
        act = [x["name"] for x in p0["schedulers"] if x["role"] == "active"]
        if act == [sname] and "status_active_s" not in found:
            found["status_active_s"] = t
        if p0.get("route") == saddr:
            found["routed_s"] = t
            fe = s.get("frontends") or []
            found["frontends_on_route_at_switch"] = all(f["routes"] == s["routes"]["mod_revision"] for f in fe)
th = threading.Thread(target=status_loop, daemon=True)
th.start()
while time.time() - t0 < 30 and not ("first_batch_s" in found and "readyz_active_s" in found):
    t = time.time()
    try:
        if "first_batch_s" not in found and plans() > before:
            found["first_batch_s"] = time.time() - t0
        if "readyz_active_s" not in found:
            r = urllib.request.urlopen(murl + "/readyz", timeout=1).read().decode()
            if r.startswith("ok: active"):
                found["readyz_active_s"] = time.time() - t0
                found["readyz_line"] = r.strip()
    except Exception:
        pass
    time.sleep(max(0, 0.02 - (time.time() - t)))
th.join(timeout=max(0, 30 - (time.time() - t0)))
res.update(found)
json.dump(res, open(path, "w"), indent=2)
def f(k):
    return "%.3f s" % found[k] if k in found else "not within 30 s"
print("takeover: kill -> standby active (/readyz) %s, -> first standby batch %s, -> route switched (cluster status) %s"
      % (f("readyz_active_s"), f("first_batch_s"), f("routed_s")), file=sys.stderr)
EOF
fi

log "waiting for the load to end"
bench_rc=0
wait "$bench_pid" || bench_rc=$?
bench_pid=
cpu_snapshot "$tmp/cpu-end.json"
(( bench_rc == 0 )) || { tail -n 20 "$logs/bench.log" >&2; die "the bench exited $bench_rc: $logs/bench.log"; }
kill -TERM "$sampler_pid" 2>/dev/null || true
wait "$sampler_pid" 2>/dev/null || true
sampler_pid=
status_json >"$out/status-end.json"
for ((r = 0; r < replicas; r++)); do
  for ((p = 0; p < parts; p++)); do
    n=s$p$([[ $r == 0 ]] && echo a || echo b)
    curl -sf -m 2 "http://$(sched_metrics "$p" "$r")/metrics" >"$logs/$n.metrics" 2>/dev/null || true
  done
done
curl -sf -m 2 "http://$gw_http/metrics" >"$out/logs/fe.metrics" || true

python3 - "$out" "$mode" "$load_start" "$load" "$backends" "$duration" "$tmp" <<'EOF'
import json, os, sys
out, mode, load_start, load, nback, duration = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
rd = lambda n: json.load(open(os.path.join(out, n)))
bench, end, start = rd("bench.json"), rd("status-end.json"), rd("status-start.json")
machine = rd("machine.json")
# CPU over the load: the machine's, this run's processes' and the others'.
c0, c1 = (json.load(open(os.path.join(sys.argv[7], "cpu-%s.json" % w))) for w in ("start", "end"))
ours = {l.split("\t")[0] for l in open(os.path.join(out, "processes.tsv"))}
hz, wall = c1["hz"], c1["t"] - c0["t"]
busy = ((c1["total"] - c1["idle"]) - (c0["total"] - c0["idle"])) / hz
used = {p: (c1["procs"][p][0] - c0["procs"].get(p, [0])[0]) / hz for p in c1["procs"]}
ours_s = sum(v for p, v in used.items() if p in ours)
foreign = sorted(((v, c1["procs"][p][1]) for p, v in used.items() if p not in ours and v > 0.5), reverse=True)
cpu = {"wall_s": round(wall, 1), "cpus": os.cpu_count(), "machine_busy_cores": round(busy / wall, 2),
       "this_run_cores": round(ours_s / wall, 2), "others_cores": round(max(0, busy - ours_s) / wall, 2),
       "others_top": [{"cpu_s": round(v, 1), "cmd": c} for v, c in foreign[:5]]}

def parts_of(s):
    res = {}
    a = (s.get("assignment") or {}).get("backends") or {}
    for p in s["parts"]:
        act = [x["name"] for x in p["schedulers"] if x["role"] == "active"]
        res[p["part"]] = {"models": sorted(p["routed"] or p["assigned"] or []), "gpus": sum(1 for b, q in a.items() if q == p["part"]),
                          "active": act, "schedulers": [x["name"] for x in p["schedulers"]], "route": p.get("route")}
    return res

# The bench report's per-model rows, whatever its exact keys.
def rows(b):
    return b.get("models") or []
def n(r, *ks):
    for k in ks:
        if k in r and r[k] is not None:
            return r[k]
    return 0
pstart = parts_of(start)
model_part = {m: p for p, v in pstart.items() for m in v["models"]}
per_model, agg = {}, {}
for r in rows(bench):
    m = r["name"]
    c = {k: n(r, k) for k in ("offered", "good", "late", "dropped", "failed")}
    per_model[m] = dict(part=model_part.get(m), offered_rps=n(r, "offered_rps"), goodput_rps=n(r, "goodput_rps"),
                        bad_rate=n(r, "bad_rate"), **c)
    a = agg.setdefault(model_part.get(m), dict.fromkeys(c, 0))
    for k in c:
        a[k] += c[k]
per_part = {}
for p, a in sorted(agg.items(), key=lambda kv: (kv[0] is None, kv[0])):
    bad = a["offered"] - a["good"]
    per_part[str(p)] = dict(a, bad=bad, bad_rate=bad / a["offered"] if a["offered"] else 0, models=pstart.get(p, {}).get("models"))
tot = {k: n(bench, k) for k in ("offered", "good", "late", "dropped", "failed")}
ended = tot["offered"] == tot["good"] + tot["late"] + tot["dropped"] + tot["failed"]
# The frontend's own count, warmup included: each request submitted ends
# once, as an answer, a drop or a failure, and none is left in flight.
import re
fe = {}
try:
    for k, v in re.findall(r'^symphony_(frontend_\w+_requests_total|gateway_in_flight_requests) (\S+)$', open(os.path.join(out, "logs", "fe.metrics")).read(), re.M):
        fe[k] = float(v)
    fe["every_request_ended_once"] = fe["frontend_submitted_requests_total"] == sum(
        fe["frontend_%s_requests_total" % k] for k in ("answered", "dropped", "failed")) and fe["gateway_in_flight_requests"] == 0
    ended = ended and fe["every_request_ended_once"]
except (OSError, KeyError) as e:
    fe["error"] = "no frontend counters: %s" % e
summary = {"mode": mode, "machine": machine, "cpu_during_load": cpu, "load_multiplier": load, "backends": nback, "duration": duration,
           "overall": {"offered_rps": n(bench, "offered_rps"), "goodput_rps": n(bench, "goodput_rps"),
                       "bad_rate": n(bench, "bad_rate"), **tot, "every_request_ended_once": ended},
           "frontend_counters": fe, "drop_reasons": bench.get("drop_reasons"), "failure_reasons": bench.get("failure_reasons"),
           "per_model": per_model, "per_part": per_part,
           "parts_start": pstart, "parts_end": parts_of(end), "gpus_end": end.get("gpus"),
           "epoch_end": end.get("epoch"), "status_errors": end.get("errors")}
if mode == "failover":
    tk = rd("takeover.json")
    summary["takeover"] = tk
    # The frontend's non-success ends per part from the kill to 5 s after it.
    try:
        samples = [s for s in rd("frontend-samples.json") if "counts" in s]
        t0 = tk["kill_unix"]
        def at(t):
            best = None
            for s in samples:
                if s["t"] <= t:
                    best = s
            return best or samples[0]
        win = {}
        for w in (2, 5, 10):
            a, b = at(t0), at(t0 + w)
            d = {}
            for key, v in b["counts"].items():
                m, outcome = key.split("|")
                p = str(model_part.get(m))
                e = d.setdefault(p, {"success": 0, "drop": 0, "failure": 0})
                e[outcome] = e.get(outcome, 0) + v - a["counts"].get(key, 0)
            for e in d.values():
                tot_w = sum(e.values())
                e["bad_rate"] = (tot_w - e["success"]) / tot_w if tot_w else 0
            win["%ds_after_kill" % w] = {"from_sample_s": a["t"] - t0, "to_sample_s": b["t"] - t0, "per_part": d}
        summary["window_after_kill"] = win
        # The takeover in the processes' own logs (JSON lines, UTC times).
        import datetime
        def times(name, msg, **want):
            ts = []
            for line in open(os.path.join(out, "logs", name + ".log")):
                if not line.startswith("{"):
                    continue
                e = json.loads(line)
                if e.get("message") == msg and all(e.get(k) == v for k, v in want.items()):
                    t = datetime.datetime.strptime(e["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp()
                    if t >= t0:
                        ts.append(round(t - t0, 3))
            return ts
        sa = tk["standby_address"]
        p0_backends = [b for b, q in ((start.get("assignment") or {}).get("backends") or {}).items() if q == 0]
        summary["takeover_in_logs"] = {
            "standby_elected_s": (times(tk["standby"], "elected: the part's active scheduler") or [None])[0],
            "frontend_routes_applied_s": (times("fe", "routing table applied") or [None])[0],
            "backends_registered_s": {b: (times(b, "registered", scheduler=sa) or [None])[0] for b in p0_backends},
        }
    except Exception as e:
        summary["window_after_kill"] = {"error": str(e)}
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=2)

o = summary["overall"]
print("\n%s on %d CPUs, %s: %d backends, load x%g for %s" % (mode, machine["cpus"], machine["time"], nback, load, duration))
print("overall  offered %.1f req/s  goodput %.1f req/s  bad %.2f%%  (%d offered = %d good + %d late + %d dropped + %d failed: %s)"
      % (o["offered_rps"], o["goodput_rps"], 100 * o["bad_rate"], o["offered"], o["good"], o["late"], o["dropped"], o["failed"],
         "every request ended once" if ended else "MISMATCH"))
if "error" not in fe:
    print("frontend: %d submitted = %d answered + %d dropped + %d failed, %d in flight" % tuple(fe[k] for k in (
        "frontend_submitted_requests_total", "frontend_answered_requests_total", "frontend_dropped_requests_total",
        "frontend_failed_requests_total", "gateway_in_flight_requests")))
print("CPU during the load: machine %.2f of %d cores busy, this run's processes %.2f, others %.2f%s" % (
    cpu["machine_busy_cores"], cpu["cpus"], cpu["this_run_cores"], cpu["others_cores"],
    "  (NOISY: " + "; ".join("%.0f s %s" % (o["cpu_s"], o["cmd"][:60]) for o in cpu["others_top"][:3]) + ")" if cpu["others_cores"] > 0.2 else ""))
print("%-16s %4s %10s %10s %7s" % ("model", "part", "offered/s", "goodput/s", "bad %"))
for m, r in per_model.items():
    print("%-16s %4s %10.1f %10.1f %7.2f" % (m, r["part"], r["offered_rps"], r["goodput_rps"], 100 * r["bad_rate"]))
for p, a in per_part.items():
    print("part %s: models %s, GPUs %s at start, %s at end; bad %d of %d (%.2f%%)" % (
        p, ",".join(a["models"] or []), pstart.get(int(p), {}).get("gpus") if p != "None" else "-",
        summary["parts_end"].get(int(p), {}).get("gpus") if p != "None" else "-", a["bad"], a["offered"], 100 * a["bad_rate"]))
if mode == "failover":
    tk = summary["takeover"]
    f = lambda k: "%.3f s" % tk[k] if k in tk else "not seen"
    print("takeover of part 0 (%s -> %s): standby active %s, first standby batch %s, route switched %s"
          % (summary["parts_start"][0]["active"], tk["standby"], f("readyz_active_s"), f("first_batch_s"), f("routed_s")))
    print("  in the logs: %s" % json.dumps(summary.get("takeover_in_logs")))
    for w, v in summary.get("window_after_kill", {}).items():
        if isinstance(v, dict) and "per_part" in v:
            print("  ended in the %s: %s" % (w.replace("_", " "), ", ".join(
                "part %s %d bad of %d" % (p, e["drop"] + e["failure"], e["drop"] + e["failure"] + e["success"])
                for p, e in sorted(v["per_part"].items()))))
print("summary: %s/summary.json" % out)
sys.exit(0 if ended else 3)
EOF

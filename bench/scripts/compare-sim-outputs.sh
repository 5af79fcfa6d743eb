#!/usr/bin/env bash
# Runs the same simulator commands through two symphony binaries and diffs
# their stdout byte for byte: the check that a refactoring of the measurement
# pipeline (bench/report, bench/sim, bench/loadgen, bench/lookahead) left the
# outputs alone. The simulator is deterministic for a seed, so any difference
# is a change in behaviour to explain. Stderr (progress, wall times) is not
# compared.
# Usage: bench/scripts/compare-sim-outputs.sh BEFORE_BIN AFTER_BIN [OUTDIR]
# Exit status: 0 when every output is identical, 1 otherwise.
set -uo pipefail
before=${1:?usage: $0 BEFORE_BIN AFTER_BIN [OUTDIR]}
after=${2:?usage: $0 BEFORE_BIN AFTER_BIN [OUTDIR]}
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${3:-$(mktemp -d)}
mkdir -p "$out/before" "$out/after"
wl=$root/testdata/workloads

cases=()
for x in table4-resnet50 mixed-1080ti flat-top; do
  cases+=("$x.json|sim -f $wl/$x.yaml --json --quiet")
  cases+=("$x.txt|sim -f $wl/$x.yaml --quiet")
  cases+=("$x.goodput.json|sim -f $wl/$x.yaml --find-goodput --json --quiet")
  cases+=("$x.goodput.txt|sim -f $wl/$x.yaml --find-goodput --quiet")
done
cases+=("flat-top.sweep.txt|sim --sweep 1,2 -f $wl/flat-top.yaml --quiet")
cases+=("flat-top.sweep.json|sim --sweep 1,2 -f $wl/flat-top.yaml --json --quiet")
cases+=("flat-top.goodput-sweep.json|sim --find-goodput --sweep 0.5,1.5 -f $wl/flat-top.yaml --json --quiet")
cases+=("demo.compare.txt|sim --compare -f $wl/demo.yaml --quiet")
cases+=("demo.compare.json|sim --compare -f $wl/demo.yaml --json --quiet")
# The report builder's other paths: a time series (autoscale_window), an
# epoch job, a trace, and every fault scenario.
cases+=("rate-schedule.json|sim -f $wl/rate-schedule.yaml --json --quiet")
cases+=("rate-schedule.txt|sim -f $wl/rate-schedule.yaml --quiet")
cases+=("large-cluster-daily.json|sim -f $wl/large-cluster-daily.yaml --json --quiet")
cases+=("trace.json|sim -f $wl/trace.yaml --json --quiet")
for f in "$root"/testdata/faults/*.yaml; do
  x=$(basename "$f" .yaml)
  cases+=("faults-$x.json|sim -f $f --json --quiet")
done
# sim lookahead replays one model, and on table4-resnet50 as it is takes
# minutes: its goodput search runs on a 2.5s cut of it instead.
la=$out/lookahead.yaml
sed -e 's/^duration: 30s/duration: 2s/' -e 's/^warmup: 5s/warmup: 500ms/' "$wl/table4-resnet50.yaml" >"$la"
cases+=("lookahead.txt|sim lookahead -f $la --horizon 50ms --quiet")
cases+=("lookahead.json|sim lookahead -f $la --horizon 50ms --json --quiet")

status=0
for c in "${cases[@]}"; do
  name=${c%%|*}
  args=${c#*|}
  for side in before after; do
    bin=$before
    [ "$side" = after ] && bin=$after
    # shellcheck disable=SC2086 # args is a word list on purpose
    if ! "$bin" $args >"$out/$side/$name" 2>"$out/$side/$name.stderr"; then
      echo "$side: symphony $args failed (see $out/$side/$name.stderr)"
      status=1
    fi
  done
  if cmp -s "$out/before/$name" "$out/after/$name"; then
    echo "same     $name  (symphony ${args//$root\//})"
  else
    echo "DIFFERS  $name  (symphony ${args//$root\//})"
    diff -u "$out/before/$name" "$out/after/$name" | head -40
    status=1
  fi
done
echo "outputs in $out"
exit $status

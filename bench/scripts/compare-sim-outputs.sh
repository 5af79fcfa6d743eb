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
cases+=("demo.compare.txt|sim --compare -f $wl/demo.yaml --quiet")
cases+=("demo.compare.json|sim --compare -f $wl/demo.yaml --json --quiet")
cases+=("demo.lookahead.txt|sim lookahead -f $wl/demo.yaml --quiet")
cases+=("demo.lookahead.json|sim lookahead -f $wl/demo.yaml --json --quiet")

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

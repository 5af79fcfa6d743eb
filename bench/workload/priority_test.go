package workload

import (
	"math"
	"strings"
	"testing"

	"github.com/symphony-serving/symphony/scheduler"
)

const priorityBase = "cluster: {gpus: 1}\nmodels:\n  - {name: m, profile: {alpha: 1ms, beta: 1ms}, slo: 50ms, rate: 10, priority_mix: %s}\n"

// A mix is read highest level first, and every mistake in it is refused
// naming the key.
func TestPriorityMix(t *testing.T) {
	w, err := Parse([]byte(strings.Replace(priorityBase, "%s", "[{level: 1, share: 0.2}, {level: 5, share: 0.1}]", 1)), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	mix := w.Models[0].PriorityMix
	if len(mix) != 2 || mix[0] != (PriorityShare{Level: 5, Share: 0.1}) || mix[1] != (PriorityShare{Level: 1, Share: 0.2}) {
		t.Fatalf("mix %+v, want level 5 then 1", mix)
	}
	for mixText, want := range map[string]string{
		"[{level: 0, share: 0.5}]":                         "priority_mix[0].level",
		"[{level: 256, share: 0.5}]":                       "priority_mix[0].level",
		"[{level: 1, share: 0}]":                           "a share of 0",
		"[{level: 1, share: 1.5}]":                         "priority_mix[0].share",
		"[{level: 1, share: 0.6}, {level: 2, share: 0.6}]": "add up to 1.2",
		"[{level: 1, share: 0.1}, {level: 1, share: 0.1}]": "level 1 given twice",
		"[{level: 1}]":                                     "share",
		"[{level: 1, share: 0.1, weight: 2}]":              "weight",
		"{level: 1}":                                       "a list of {level, share}",
	} {
		_, err := Parse([]byte(strings.Replace(priorityBase, "%s", mixText, 1)), "t.yaml")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming %q", mixText, err, want)
		}
	}
}

// PriorityOf gives each level its share of any long stretch of requests,
// and level 0 to all without a mix.
func TestPriorityOfShares(t *testing.T) {
	m := Model{PriorityMix: []PriorityShare{{Level: 3, Share: 0.1}, {Level: 1, Share: 0.25}}}
	for _, start := range []uint64{0, 12345} {
		counts := map[scheduler.Priority]int{}
		const n = 10000
		for k := start; k < start+n; k++ {
			counts[m.PriorityOf(k)]++
		}
		for level, share := range map[scheduler.Priority]float64{3: 0.1, 1: 0.25, 0: 0.65} {
			if got := float64(counts[level]) / n; math.Abs(got-share) > 0.002 {
				t.Errorf("from %d: level %d got %.4f of the requests, want %.2f", start, level, got, share)
			}
		}
	}
	if (&Model{}).PriorityOf(7) != 0 {
		t.Error("a model without a mix sent a request above level 0")
	}
}

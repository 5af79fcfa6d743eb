package cluster

import (
	"testing"

	"github.com/symphony-serving/symphony/bench/workload"
)

// Priority levels live: a workload's priority_mix reaches the live
// cluster through the load generator, which reports each level, and under
// an overload of three times the goodput the level-1 requests fare better
// than the level-0 ones, which absorb the drops. (How much better is the
// simulator's business, beside it in docs/benchmarks.md; a loaded CI
// machine only shows which way.)
func TestPriorityLevelsLive(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load in real time")
	}
	_, r, goodput := runFlood(t, floodWorkload(t, []workload.PriorityShare{{Level: 1, Share: 0.25}}))
	ps := r.Models[0].Priorities
	if len(ps) != 2 || ps[0].Level != 1 || ps[1].Level != 0 {
		t.Fatalf("levels %+v, want 1 and 0", ps)
	}
	if ps[0].Offered+ps[1].Offered != r.Models[0].Offered || ps[0].Good+ps[1].Good != r.Models[0].Good {
		t.Errorf("levels %+v do not add up to the model's %d offered, %d good", ps, r.Models[0].Offered, r.Models[0].Good)
	}
	t.Logf("offered %.0f req/s (3x the simulator's goodput %.0f): level 1 bad %.2f%%, level 0 bad %.2f%%",
		r.OfferedRPS, goodput, 100*ps[0].BadRate, 100*ps[1].BadRate)
	if ps[0].BadRate >= ps[1].BadRate {
		t.Errorf("level 1 %.2f%% bad, level 0 %.2f%%: the higher level fared no better", 100*ps[0].BadRate, 100*ps[1].BadRate)
	}
}

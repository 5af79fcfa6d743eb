package sim_test

import (
	"testing"
	"time"

	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/scheduler/serving"
)

// TestKeepUpPruningBreaksCascades runs the Table 4 InceptionResNetV2 row
// (8 GPUs, α 5.090ms, β 18.368ms, SLO 70ms, Poisson) at 1000 req/s, close
// to its goodput, twice: as the RankCore grants, and with the GPU count
// hidden from the ModelCore, which turns the window drop policy's keep-up
// rule off. Without it, a Poisson burst starts a cascade: heads wait,
// batches shrink below what keeps up with the load, the backlog grows, and
// it ends with a whole window pruned at once. With it, the heads that stand
// in the way of a keep-up batch go early and few at a time, and fewer
// requests are lost in all. It drives the cores with property_test.go's
// hand-driven harness, and lives beside it in bench/sim for the same
// reason: scheduler's tests may not import bench/workload.
func TestKeepUpPruningBreaksCascades(t *testing.T) {
	w := &workload.Workload{
		Source: "table4-inceptionresnetv2", Seed: 42, Duration: 10 * time.Second, Warmup: time.Second,
		Cluster:  workload.Cluster{GPUs: 8},
		Settings: serving.Settings{Network: scheduler.Delays{Ctrl: 100 * time.Microsecond, DataPerRequest: 20 * time.Microsecond, Result: 100 * time.Microsecond}},
		Models:   []workload.Model{{Model: serving.Model{Name: "InceptionResNetV2", Profile: profile.MustLinear(5090*time.Microsecond, 18368*time.Microsecond, 0), SLO: 70 * time.Millisecond}, Rates: []workload.RatePhase{{Rate: 1000}}, Arrival: workload.Arrival{Kind: workload.ArrivalPoisson}}},
	}
	run := func(hide bool) *harness {
		h := newHarness(t, w)
		h.hideGPUCount = hide
		if err := h.run(); err != nil {
			t.Fatalf("hide GPU count %v: %v", hide, err)
		}
		return h
	}
	on, off := run(false), run(true)
	t.Logf("keep-up on: %d of %d pruned, at most %d at once; off: %d pruned, at most %d at once",
		on.pruned, on.issued, on.maxPruned, off.pruned, off.maxPruned)
	if on.issued != off.issued {
		t.Fatalf("the two runs offered %d and %d requests", on.issued, off.issued)
	}
	if on.pruned == 0 || on.pruned >= off.pruned {
		t.Errorf("keep-up rule on: %d requests pruned, off: %d; want fewer, but some, with it on", on.pruned, off.pruned)
	}
	if on.maxPruned >= off.maxPruned {
		t.Errorf("keep-up rule on: up to %d requests pruned at once, off: %d; want smaller bursts with it on", on.maxPruned, off.maxPruned)
	}
}

package sim

import (
	"testing"

	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/scheduler"
)

// TestOneGPUTwoModels: two models sharing one GPU at 13% load lose no
// requests under symphony, which still holds their batches (a mean batch
// above 2; work-conserving runs them one at a time). Before the one-GPU
// collision rule, 177 of the 5975 requests were dropped (2.96%), where
// every other policy dropped none.
func TestOneGPUTwoModels(t *testing.T) {
	w, err := workload.ParseFile("../../testdata/workloads/one-gpu-two-models.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []scheduler.Policy{scheduler.PolicySymphony, scheduler.PolicyWorkConserving} {
		w.Policy = p
		rep, err := Run(w, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Offered < 5000 || rep.Good != rep.Offered {
			t.Errorf("%v: %d of %d requests good", p, rep.Good, rep.Offered)
		}
		if p == scheduler.PolicySymphony && rep.MeanBatchSize < 2 {
			t.Errorf("symphony: mean batch %.2f, want its held batches (above 2)", rep.MeanBatchSize)
		}
	}
}

// TestTwentyModelsEightGPUs: twenty models on eight GPUs at about 90% of
// Symphony's goodput lose at most 0.25% of their requests, with batches
// still held (a mean batch above 15). Before the collision rule on
// several GPUs they lost 0.40%, the held batches that came due together
// losing their heads.
func TestTwentyModelsEightGPUs(t *testing.T) {
	w, err := workload.ParseFile("../../testdata/workloads/twenty-models-eight-gpus.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Offered < 40000 || rep.BadRate > 0.0025 || rep.MeanBatchSize < 15 {
		t.Errorf("%d requests, bad %.2f%%, mean batch %.1f: want at most 0.25%% bad in batches above 15", rep.Offered, 100*rep.BadRate, rep.MeanBatchSize)
	}
}

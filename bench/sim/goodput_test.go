package sim

import (
	"testing"

	"github.com/symphony-serving/symphony/bench/workload"
)

// sparseBursty is a busy model beside a rare, bursty one under Nexus: the
// rare model gets a few requests in the window at any load, in a clump
// that its one GPU cannot all serve within 15ms, so one of them is bad
// however light the load (Figure 7's bursty Nexus cells in small). Seed
// 30 gives it 8 requests, 1 of them bad.
const sparseBursty = `
seed: 30
duration: 5s
warmup: 1s
cluster: {gpus: 4}
network: {ctrl_delay: 100us, data_delay_per_request: 20us, result_delay: 100us}
models:
  - {name: busy, profile: {alpha: 1.053ms, beta: 5.072ms}, slo: 25ms, rate: 1500}
  - {name: rare, profile: {alpha: 1.053ms, beta: 5.072ms}, slo: 15ms, rate: 1, arrival: "gamma:0.05"}
policy: nexus
`

// A model offered too few requests to measure the 1% target must not pull
// the goodput search down on its own: the goodput is where the busy model
// fails. Before the search judged such models together, one bad request
// in the rare model's eight failed the steps below the busy model's limit.
func TestFindGoodputSparseBurstyModel(t *testing.T) {
	w, err := workload.Parse([]byte(sparseBursty), "sparse-bursty")
	if err != nil {
		t.Fatal(err)
	}
	// The case holds what it says: at the file's load the rare model is
	// sparse and has a bad request.
	rep, err := Run(w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rare := rep.Models[1]; rare.Offered == 0 || rare.Offered >= 100 || rare.BadRate == 0 {
		t.Fatalf("rare model: %d offered, bad rate %.3f; want a few requests, some bad", rare.Offered, rare.BadRate)
	}
	rep, err = FindGoodput(w, GoodputOptions{Precision: 0.02})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.GoodputSearch
	if s.Multiplier < 0.8 {
		t.Errorf("goodput %.1f req/s at x%.4g, want the busy model's limit, above x0.8", s.GoodputRPS, s.Multiplier)
	}
	for _, st := range s.Steps {
		if !st.OK && st.WorstModel != "busy" {
			t.Errorf("step at x%.4g failed on %q (%.1f%% bad), want only the busy model to fail a step", st.Multiplier, st.WorstModel, 100*st.WorstBadRate)
		}
	}
}

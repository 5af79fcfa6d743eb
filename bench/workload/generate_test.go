package workload

import (
	"math"
	"testing"
	"time"
)

// TestBurstyArrivalsAreStationaryFromTheStart: a Γ(0.05) model at 1 req/s
// gets, on average over seeds, 10 arrivals in its first 10 s, as a process
// that has long been running would. Starting the run at an arrival gave
// about 19.5 (10 + (CV²−1)/2 with CV² = 20), so sparse bursty runs measured
// a burst the workload does not have.
func TestBurstyArrivalsAreStationaryFromTheStart(t *testing.T) {
	const seeds, window, rate = 4000, 10 * time.Second, 1.0
	for _, arr := range []Arrival{{Kind: ArrivalGamma, Shape: 0.05}, {Kind: ArrivalGamma, Shape: 0.3}, {Kind: ArrivalPoisson}} {
		var total float64
		for seed := range uint64(seeds) {
			w := &Workload{Seed: seed, Models: []Model{{Rates: []RatePhase{{Rate: rate}}, Arrival: arr}}}
			g := NewGenerator(w, window)
			for _, _, ok := g.Peek(); ok; _, _, ok = g.Peek() {
				total++
				g.Pop()
			}
		}
		mean, want := total/seeds, rate*window.Seconds()
		// The count's variance is about CV²·want (CV² = 1/shape), so the
		// mean over the seeds has a standard deviation of at most 0.23.
		if math.Abs(mean-want) > 1 {
			t.Errorf("%v: %.2f arrivals in the first %v on average over %d seeds, want %.0f", arr, mean, window, seeds, want)
		}
	}
}

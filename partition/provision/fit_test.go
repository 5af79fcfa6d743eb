package provision

import (
	"testing"
	"time"
)

// The exported linear profile never promises a batch sooner than measured:
// least squares alone runs below some points (here batch 8).
func TestFitLinearIsAnUpperBound(t *testing.T) {
	pts := []Point{{Batch: 2, Concurrency: 1, Latency: 100 * time.Millisecond}, {Batch: 8, Concurrency: 1, Latency: 250 * time.Millisecond},
		{Batch: 32, Concurrency: 1, Latency: 800 * time.Millisecond}, {Batch: 4, Concurrency: 1, Latency: 90 * time.Millisecond}}
	alpha, beta, maxBatch := fitLinear(pts)
	if maxBatch != 32 {
		t.Fatalf("max batch %d, want 32", maxBatch)
	}
	for _, p := range pts {
		if got := alpha*time.Duration(p.Batch) + beta; got < p.Latency {
			t.Errorf("batch %d: the profile says %v, below the measured %v", p.Batch, got, p.Latency)
		}
	}
}

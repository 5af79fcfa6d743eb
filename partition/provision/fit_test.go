package provision

import (
	"slices"
	"testing"
	"time"
)

// The exported table profile is exact at every measured batch and never
// below the truth between them; points out of order, a point slower than a
// larger batch's (here batch 4) and a repeated batch (the slower counts)
// are all taken in.
func TestStepProfile(t *testing.T) {
	ms := time.Millisecond
	pts := []Point{{Batch: 2, Latency: 100 * ms}, {Batch: 8, Latency: 250 * ms}, {Batch: 4, Latency: 90 * ms},
		{Batch: 32, Latency: 800 * ms}, {Batch: 8, Latency: 260 * ms}}
	got := stepProfile(pts, 10)
	want := []time.Duration{100 * ms, 100 * ms, 100 * ms, 100 * ms, 260 * ms, 260 * ms, 260 * ms, 260 * ms, 800 * ms, 800 * ms}
	if !slices.Equal(got, want) {
		t.Errorf("stepProfile = %v, want %v", got, want)
	}
	if got := stepProfile(pts[:1], 1); !slices.Equal(got, []time.Duration{100 * ms}) {
		t.Errorf("one point, batch 1: %v", got)
	}
}

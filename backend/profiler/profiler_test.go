package profiler

import (
	"context"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/backend"
	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/transport/wire"
)

// On the emulated executor, which sleeps ℓ(b), every batch size is
// measured in order, each median is at least ℓ(b) and each p99 at least
// its median; a max batch of 0 and an unknown model are refused.
func TestMeasureEmulated(t *testing.T) {
	prof := profile.MustLinear(2*time.Millisecond, 3*time.Millisecond, 4)
	lat := make([]time.Duration, 4)
	for b := range lat {
		lat[b] = prof.Latency(b + 1)
	}
	ex := backend.NewEmulated()
	if err := ex.Load([]wire.ModelSpec{{ID: 1, Name: "m", SLO: time.Second, Latency: lat}}); err != nil {
		t.Fatal(err)
	}
	var seen []int
	pts, err := Measure(context.Background(), ex, 1, Options{MaxBatch: 4, Warmup: 1, Runs: 5,
		Input: func(i int) []byte { return []byte{byte(i)} }, Progress: func(p Point) { seen = append(seen, p.Batch) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 4 || len(seen) != 4 {
		t.Fatalf("%d points, %d progress calls", len(pts), len(seen))
	}
	for i, p := range pts {
		// Sleeps never end early; a loaded machine may end them late.
		if p.Median < lat[i] || p.P99 < p.Median {
			t.Errorf("batch %d: median %v, p99 %v; ℓ = %v", p.Batch, p.Median, p.P99, lat[i])
		}
	}
	if _, err := Measure(context.Background(), ex, 1, Options{MaxBatch: 0, Runs: 1, Input: func(int) []byte { return nil }}); err == nil {
		t.Error("max batch 0 accepted")
	}
	if _, err := Measure(context.Background(), ex, 9, Options{MaxBatch: 1, Runs: 1, Input: func(int) []byte { return nil }}); err == nil {
		t.Error("an unknown model measured")
	}
}

package profiler

import (
	"context"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/backend"
	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/transport/wire"
)

// On the emulated executor, which sleeps ℓ(b), the measured medians are
// ℓ(b) plus a little, in batch order, and the fit of the medians recovers
// α and β; options that measure nothing are refused.
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
		if p.Batch != i+1 || seen[i] != i+1 {
			t.Errorf("point %d is batch %d, progress heard of batch %d; want %d, in order", i, p.Batch, seen[i], i+1)
		}
		// Sleeps never end early; a loaded machine may end them late, by
		// far less than a batch takes.
		if p.Median < lat[i] || p.P99 < p.Median || p.Median > lat[i]+lat[0] {
			t.Errorf("batch %d: median %v, p99 %v; ℓ = %v", p.Batch, p.Median, p.P99, lat[i])
		}
	}
	// The line through the medians is the profile's: the sleeps' lateness
	// is about the same at every batch size, so it moves β a little and α
	// hardly at all.
	fit, err := profile.FitLinear(Medians(pts))
	if err != nil {
		t.Fatal(err)
	}
	if d := fit.Alpha - 2*time.Millisecond; d < -time.Millisecond/2 || d > time.Millisecond/2 {
		t.Errorf("fitted α %v, want 2ms within 0.5ms", fit.Alpha)
	}
	if d := fit.Beta - 3*time.Millisecond; d < -time.Millisecond || d > 2*time.Millisecond {
		t.Errorf("fitted β %v, want 3ms, or a little more", fit.Beta)
	}
	for _, o := range []Options{
		{MaxBatch: 0, Runs: 1, Input: func(int) []byte { return nil }},
		{MaxBatch: 1, Runs: 0, Input: func(int) []byte { return nil }},
		{MaxBatch: 1, Runs: 1, Warmup: -1, Input: func(int) []byte { return nil }},
		{MaxBatch: 1, Runs: 1},
	} {
		if _, err := Measure(context.Background(), ex, 1, o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
	if _, err := Measure(context.Background(), ex, 9, Options{MaxBatch: 1, Runs: 1, Input: func(int) []byte { return nil }}); err == nil {
		t.Error("an unknown model measured")
	}
}

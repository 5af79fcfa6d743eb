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
	// Sleeps never end early; a loaded machine may end them late, by
	// milliseconds at times (other jobs took the CPUs), which moves a
	// median and so the line. The fit is judged on a clean measurement,
	// every median within 1ms of ℓ(b): tried up to 5 times.
	const slack = time.Millisecond
	clean := false
	for attempt := 1; attempt <= 5 && !clean; attempt++ {
		var seen []int
		pts, err := Measure(context.Background(), ex, 1, Options{MaxBatch: 4, Warmup: 1, Runs: 5,
			Input: func(i int) []byte { return []byte{byte(i)} }, Progress: func(p Point) { seen = append(seen, p.Batch) }})
		if err != nil {
			t.Fatal(err)
		}
		if len(pts) != 4 || len(seen) != 4 {
			t.Fatalf("%d points, %d progress calls", len(pts), len(seen))
		}
		clean = true
		for i, p := range pts {
			if p.Batch != i+1 || seen[i] != i+1 {
				t.Errorf("point %d is batch %d, progress heard of batch %d; want %d, in order", i, p.Batch, seen[i], i+1)
			}
			if p.Median < lat[i] || p.P99 < p.Median {
				t.Errorf("batch %d: median %v, p99 %v; ℓ = %v", p.Batch, p.Median, p.P99, lat[i])
			}
			clean = clean && p.Median <= lat[i]+slack
		}
		if !clean {
			t.Logf("attempt %d: a median more than %v late (%v); measuring again", attempt, slack, Medians(pts))
			continue
		}
		// The line through clean medians is the profile's: lateness of at
		// most 1ms moves α by at most 0.4ms and β by between −0.5ms and +1.5ms.
		fit, err := profile.FitLinear(Medians(pts))
		if err != nil {
			t.Fatal(err)
		}
		if d := fit.Alpha - 2*time.Millisecond; d < -time.Millisecond/2 || d > time.Millisecond/2 {
			t.Errorf("fitted α %v to medians %v, want 2ms within 0.5ms", fit.Alpha, Medians(pts))
		}
		if d := fit.Beta - 3*time.Millisecond; d < -time.Millisecond || d > 2*time.Millisecond {
			t.Errorf("fitted β %v to medians %v, want 3ms, or a little more", fit.Beta, Medians(pts))
		}
	}
	if !clean {
		t.Logf("no clean measurement in 5 (a loaded machine): the fit was not checked")
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

// A batch size slower than a larger one was disturbed; OutOfOrder names
// it (and only it) beyond the tolerance.
func TestOutOfOrder(t *testing.T) {
	ms := time.Millisecond
	pts := []Point{{Batch: 1, Median: 2 * ms}, {Batch: 2, Median: 44 * ms}, {Batch: 3, Median: 4 * ms}, {Batch: 4, Median: 5 * ms}, {Batch: 5, Median: 5 * ms}}
	if got := OutOfOrder(pts, 0.05); len(got) != 1 || got[0] != 2 {
		t.Errorf("OutOfOrder = %v, want [2]", got)
	}
	// Within the tolerance: 4.1ms before 4ms is noise, not a disturbance.
	pts[1].Median = 4100 * time.Microsecond
	if got := OutOfOrder(pts, 0.05); len(got) != 0 {
		t.Errorf("OutOfOrder within tolerance = %v, want none", got)
	}
}

// flakyExecutor takes extra on the first batch of size slowAt it runs after
// the warm-up: a disturbance that re-measuring gets past.
type flakyExecutor struct {
	backend.Executor
	slowAt, seen int
	extra        time.Duration
}

func (f *flakyExecutor) Execute(ctx context.Context, gpu int, model uint32, inputs [][]byte) ([][]byte, error) {
	if len(inputs) == f.slowAt {
		f.seen++
		if f.seen <= 3 { // the warm-up and two of the three timed runs of the first round
			time.Sleep(f.extra) // the disturbance itself, not a wait for an event
		}
	}
	return f.Executor.Execute(ctx, gpu, model, inputs)
}

// Measure measures a disturbed batch size again and keeps the lower median,
// so that the table passed to the profile is in order.
func TestMeasureRemeasuresDisturbed(t *testing.T) {
	prof := profile.MustLinear(time.Millisecond, time.Millisecond, 3)
	lat := []time.Duration{prof.Latency(1), prof.Latency(2), prof.Latency(3)}
	em := backend.NewEmulated()
	if err := em.Load([]wire.ModelSpec{{ID: 1, Name: "m", SLO: time.Second, Latency: lat}}); err != nil {
		t.Fatal(err)
	}
	ex := &flakyExecutor{Executor: em, slowAt: 2, extra: 20 * time.Millisecond}
	var again []Point
	pts, err := Measure(context.Background(), ex, 1, Options{MaxBatch: 3, Warmup: 1, Runs: 3, Retries: 2, Recheck: 0.05,
		Input: func(i int) []byte { return []byte{byte(i)} }, Remeasured: func(p Point) { again = append(again, p) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(again) == 0 || again[0].Batch != 2 {
		t.Fatalf("measured again %v, want batch 2", again)
	}
	if pts[1].Median >= 20*time.Millisecond {
		t.Errorf("batch 2 kept the disturbed median %v", pts[1].Median)
	}
	if _, err := Measure(context.Background(), ex, 1, Options{MaxBatch: 1, Runs: 1, Retries: -1, Input: func(int) []byte { return nil }}); err == nil {
		t.Error("negative retries accepted")
	}
}

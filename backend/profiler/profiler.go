// Package profiler measures a model's batch latency ℓ(b) on a backend's
// executor, offline, as Clockwork and Nexus profile before they serve: for
// each batch size, warm-up batches, then timed ones, with the median and
// the 99th percentile kept. The scheduler's plans stand on ℓ(b), so it is
// measured on the executor that will run the batches.
package profiler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/symphony-serving/symphony/backend"
)

// Options say what to measure.
type Options struct {
	// MaxBatch is the largest batch size measured (from 1).
	MaxBatch int
	// Warmup and Runs are the untimed and timed batches per size.
	Warmup, Runs int
	// Input returns request i's input (inputs vary so that no cache
	// flatters the runtime).
	Input func(i int) []byte
	// Progress, if set, hears of each batch size measured.
	Progress func(Point)
}

// Point is one batch size's measurement.
type Point struct {
	Batch       int
	Median, P99 time.Duration
}

// Measure runs model's batches on ex (GPU 0) and returns one Point per
// batch size, 1..MaxBatch.
func Measure(ctx context.Context, ex backend.Executor, model uint32, o Options) ([]Point, error) {
	switch {
	case o.MaxBatch < 1:
		return nil, errors.New("profiler: max batch must be at least 1")
	case o.Runs < 1 || o.Warmup < 0:
		return nil, errors.New("profiler: need at least one timed run per batch size, and no negative warm-up")
	case o.Input == nil:
		return nil, errors.New("profiler: no input")
	}
	points := make([]Point, 0, o.MaxBatch)
	times := make([]time.Duration, o.Runs)
	next := 0
	for b := 1; b <= o.MaxBatch; b++ {
		for r := 0; r < o.Warmup+o.Runs; r++ {
			if err := ctx.Err(); err != nil {
				return points, err
			}
			inputs := make([][]byte, b)
			for i := range inputs {
				inputs[i] = o.Input(next)
				next++
			}
			start := time.Now()
			outs, err := ex.Execute(ctx, 0, model, inputs)
			took := time.Since(start)
			if err != nil {
				return points, fmt.Errorf("profiler: batch of %d: %w", b, err)
			}
			if len(outs) != b {
				return points, fmt.Errorf("profiler: batch of %d gave %d outputs", b, len(outs))
			}
			if r >= o.Warmup {
				times[r-o.Warmup] = took
			}
		}
		slices.Sort(times)
		p := Point{Batch: b, Median: times[len(times)/2], P99: times[min(len(times)-1, len(times)*99/100)]}
		points = append(points, p)
		if o.Progress != nil {
			o.Progress(p)
		}
	}
	return points, nil
}

// Medians are the points' medians, the latencies a profile is fitted to.
func Medians(points []Point) []time.Duration {
	m := make([]time.Duration, len(points))
	for i, p := range points {
		m[i] = p.Median
	}
	return m
}

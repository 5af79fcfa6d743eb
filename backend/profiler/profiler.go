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
	"math"
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
	// Retries is how many times batch sizes out of order by more than
	// Recheck (a fraction) are measured again (see Measure); 0: never.
	Retries int
	Recheck float64
	// Remeasured, if set, hears of each point measured again, as kept.
	Remeasured func(Point)
}

// Point is one batch size's measurement.
type Point struct {
	Batch       int
	Median, P99 time.Duration
}

// Measure runs model's batches on ex (GPU 0) and returns one Point per
// batch size, 1..MaxBatch.
//
// A disturbance (another process taking the CPU, a page fault) only ever
// adds time, so a batch size whose median exceeds a larger batch's by more
// than Recheck was disturbed: with Retries, Measure measures such sizes
// again, up to Retries times, and keeps the lowest median. Without it one
// disturbed size would pass its latency to every larger batch through the
// profile's non-decreasing table.
func Measure(ctx context.Context, ex backend.Executor, model uint32, o Options) ([]Point, error) {
	switch {
	case o.MaxBatch < 1:
		return nil, errors.New("profiler: max batch must be at least 1")
	case o.Runs < 1 || o.Warmup < 0:
		return nil, errors.New("profiler: need at least one timed run per batch size, and no negative warm-up")
	case o.Input == nil:
		return nil, errors.New("profiler: no input")
	case o.Retries < 0 || o.Recheck < 0:
		return nil, errors.New("profiler: negative retries or recheck tolerance")
	}
	m := measurer{ctx: ctx, ex: ex, model: model, o: o, times: make([]time.Duration, o.Runs)}
	points := make([]Point, 0, o.MaxBatch)
	for b := 1; b <= o.MaxBatch; b++ {
		p, err := m.point(b)
		if err != nil {
			return points, err
		}
		points = append(points, p)
		if o.Progress != nil {
			o.Progress(p)
		}
	}
	for range o.Retries {
		again := OutOfOrder(points, o.Recheck)
		if len(again) == 0 {
			break
		}
		for _, b := range again {
			p, err := m.point(b)
			if err != nil {
				return points, err
			}
			if p.Median < points[b-1].Median {
				points[b-1] = p
			}
			if o.Remeasured != nil {
				o.Remeasured(points[b-1])
			}
		}
	}
	return points, nil
}

// OutOfOrder lists the batch sizes whose median exceeds that of some larger
// batch size by more than the fraction tolerance: measurements a
// disturbance inflated.
func OutOfOrder(points []Point, tolerance float64) []int {
	var out []int
	least := time.Duration(math.MaxInt64) // the least median of the larger sizes
	for i := len(points) - 1; i >= 0; i-- {
		if float64(points[i].Median) > float64(least)*(1+tolerance) {
			out = append(out, points[i].Batch)
		}
		least = min(least, points[i].Median)
	}
	slices.Reverse(out)
	return out
}

// measurer runs one batch size's warm-up and timed batches.
type measurer struct {
	ctx   context.Context
	ex    backend.Executor
	model uint32
	o     Options
	times []time.Duration
	next  int // the next input's index
}

func (m *measurer) point(b int) (Point, error) {
	o := m.o
	for r := 0; r < o.Warmup+o.Runs; r++ {
		if err := m.ctx.Err(); err != nil {
			return Point{}, err
		}
		inputs := make([][]byte, b)
		for i := range inputs {
			inputs[i] = o.Input(m.next)
			m.next++
		}
		start := time.Now()
		outs, err := m.ex.Execute(m.ctx, 0, m.model, inputs)
		took := time.Since(start)
		if err != nil {
			return Point{}, fmt.Errorf("profiler: batch of %d: %w", b, err)
		}
		if len(outs) != b {
			return Point{}, fmt.Errorf("profiler: batch of %d gave %d outputs", b, len(outs))
		}
		if r >= o.Warmup {
			m.times[r-o.Warmup] = took
		}
	}
	slices.Sort(m.times)
	t := m.times
	return Point{Batch: b, Median: t[len(t)/2], P99: t[min(len(t)-1, len(t)*99/100)]}, nil
}

// Medians are the points' medians, the latencies a profile is fitted to.
func Medians(points []Point) []time.Duration {
	m := make([]time.Duration, len(points))
	for i, p := range points {
		m[i] = p.Median
	}
	return m
}

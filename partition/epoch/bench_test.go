package epoch

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/scheduler/serving"
)

// The bases of docs/scale.md's estimate of how far one controller goes:
// one Controller.Decide with the heuristic engine on inputs of the size of
// testdata/workloads/scale-20parts.yaml (20 parts, 2,000 GPUs, 200 models)
// and larger, both the first epoch (partitioning from nothing on the
// declared rates) and a later one whose rates drifted, so that the
// heuristic re-partitions within the disruption budget.

// benchModels returns n models with A100-like linear profiles (α 0.1-1 ms,
// β 2-10 ms, SLO 50-80 ms: loose enough that Eqs. 2-3 size the least
// popular model at half its declared rate), 200 MiB of static memory each,
// and declared rates summing to total, skewed like zipf(0.5).
func benchModels(n int, total float64) []Model {
	var sum float64
	w := make([]float64, n)
	for i := range w {
		w[i] = 1 / math.Sqrt(float64(i+1))
		sum += w[i]
	}
	out := make([]Model, n)
	for i := range out {
		alpha := time.Duration(100+i%10*100) * time.Microsecond
		beta := time.Duration(2+i%9) * time.Millisecond
		m := serving.Model{
			Name:         fmt.Sprintf("m%04d", i),
			Profile:      profile.MustLinear(alpha, beta, 512),
			SLO:          time.Duration(50+i%4*10) * time.Millisecond,
			StaticMemory: 200 << 20,
		}
		out[i] = Model{Model: m, DeclaredRate: total * w[i] / sum, Assigned: Unassigned, Serving: Unassigned}
	}
	return out
}

func benchConfig(parts int) Config {
	return Config{
		Parts: parts, Headroom: 0.25, MaxDisruption: 4 << 30, RebalanceAbove: 0.2, Engine: "heuristic", Seed: 1,
		ModelLoadTime: 50 * time.Millisecond, Autoscale: DefaultAutoscale(0.25),
	}
}

// benchInputs returns the first epoch's input and a later one: the cluster
// as the first decision left it, with the rates of the models of the first
// half of the parts doubled and the others halved over the window, the parts busy 75% of the time.
func benchInputs(b *testing.B, c *Controller, models, gpuCount int, total float64) (first, later *Input) {
	b.Helper()
	first = &Input{Models: benchModels(models, total), GPUs: make([]GPU, gpuCount)}
	for g := range first.GPUs {
		first.GPUs[g].Part = -1
	}
	d, err := c.Decide(context.Background(), first)
	if err != nil {
		b.Fatal(err)
	}
	later = &Input{Now: 0, Window: 5 * time.Second, Models: make([]Model, models), Parts: make([]Part, c.cfg.Parts), GPUs: make([]GPU, gpuCount)}
	half := later.Window.Seconds() / 2
	for m := range later.Models {
		md := first.Models[m]
		rate := md.DeclaredRate
		if d.Assignment[m] < c.cfg.Parts/2 {
			rate *= 2
		} else {
			rate /= 2
		}
		n := uint64(rate * half)
		md.Arrivals = [2]uint64{n, n}
		md.Good = 2 * n
		md.Assigned, md.Serving = d.Assignment[m], d.Serving[m]
		later.Models[m] = md
	}
	g := 0
	for p, n := range d.PartGPUs {
		online := time.Duration(n) * later.Window
		later.Parts[p] = Part{Busy: online * 3 / 4, Online: online}
		for range n {
			if g < gpuCount {
				later.GPUs[g].Part = p
				g++
			}
		}
	}
	for ; g < gpuCount; g++ {
		later.GPUs[g].Part = -1
	}
	return first, later
}

func benchDecide(b *testing.B, parts, models, gpuCount int, total float64) {
	c, err := New(benchConfig(parts))
	if err != nil {
		b.Fatal(err)
	}
	first, later := benchInputs(b, c, models, gpuCount, total)
	for _, bc := range []struct {
		name string
		in   *Input
	}{{"first", first}, {"later", later}} {
		b.Run(bc.name, func(b *testing.B) {
			var moves, gpusInUse int
			b.ReportAllocs()
			for b.Loop() {
				d, err := c.Decide(context.Background(), bc.in)
				if err != nil {
					b.Fatal(err)
				}
				moves, gpusInUse = len(d.Moves), d.Record.GPUs
			}
			b.ReportMetric(float64(moves), "moves")
			b.ReportMetric(float64(gpusInUse), "gpus")
		})
	}
}

// BenchmarkDecide20Parts2000GPUs is the size of the scale record: 200
// models over 20 parts on 2,000 GPUs, about 580,000 req/s declared.
func BenchmarkDecide20Parts2000GPUs(b *testing.B) {
	benchDecide(b, 20, 200, 2000, 580_000)
}

// BenchmarkDecideGrowth shows how Decide grows with the models, the parts
// and the GPUs, the rate per GPU held (290 req/s, as in the record).
func BenchmarkDecideGrowth(b *testing.B) {
	for _, s := range []struct{ parts, models, gpus int }{
		{20, 800, 2000},
		{20, 2000, 2000},
		{100, 2000, 10000},
	} {
		b.Run(fmt.Sprintf("parts=%d/models=%d/gpus=%d", s.parts, s.models, s.gpus), func(b *testing.B) {
			benchDecide(b, s.parts, s.models, s.gpus, 290*float64(s.gpus))
		})
	}
}

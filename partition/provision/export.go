package provision

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/symphony-serving/symphony/partition/strictyaml"
)

// maxWorkloadGPUs is the workload file's limit on the machines of its
// cluster, all GPU types together (bench/workload's maxGPUs).
const maxWorkloadGPUs = 1 << 20

// WriteWorkload writes p as a Symphony workload file
// (docs/workload-format.md, "Workload file") that serves app's GPU modules
// as models: each model's SLO is its module's budget, its rate the
// module's real request rate, its profile a linear fit (least squares, α and
// β clamped at 0) to the module's points at concurrency 1 on the hardware
// of its first configuration, and the cluster lists, per hardware kind, the
// machines the provision uses (rounded up), with price and memory. CPU modules
// are left out: Symphony's scheduler batches GPU models. It is how a cost
// provision becomes per-model SLOs for the scheduler to run (symphony sim -f).
func WriteWorkload(w io.Writer, app *App, p *Provision) error {
	if err := Verify(app, p); err != nil {
		return fmt.Errorf("provision: not exporting an invalid provision: %w", err)
	}
	hwIndex := map[string]int{}
	for i, h := range app.Hardware {
		hwIndex[h.Name] = i
	}
	count := make([]float64, len(app.Hardware))
	type model struct {
		name        string
		alpha, beta time.Duration
		maxBatch    int
		hw          string
		slo         time.Duration
		rate        float64
	}
	var models []model
	var cpu []string
	for i, mp := range p.Modules {
		mod := app.Modules[i]
		if mod.Kind == CPU {
			cpu = append(cpu, mod.Name)
			continue
		}
		for _, c := range mp.Configs {
			count[hwIndex[c.Hardware]] += c.Machines
		}
		hw := mp.Configs[0].Hardware
		var pts []Point
		for _, pr := range mod.Profiles {
			if pr.Hardware == hw {
				for _, pt := range pr.Points {
					if pt.Concurrency == 1 {
						pts = append(pts, pt)
					}
				}
			}
		}
		if len(pts) == 0 {
			// Only concurrent points: one batch's latency is still a
			// batch's latency.
			for _, pr := range mod.Profiles {
				if pr.Hardware == hw {
					pts = pr.Points
				}
			}
		}
		alpha, beta, maxBatch := fitLinear(pts)
		models = append(models, model{name: mod.Name, alpha: alpha, beta: beta, maxBatch: maxBatch, hw: hw, slo: mp.Budget, rate: mp.Rate})
	}
	if len(models) == 0 {
		return errors.New("provision: the application has no GPU module to serve as a Symphony model")
	}
	machines := 0.0
	for _, c := range count {
		if c > 0 {
			machines += math.Max(1, math.Ceil(c-1e-9))
		}
	}
	if machines > maxWorkloadGPUs {
		return fmt.Errorf("provision: the provision uses %.0f GPU machines, more than the %d a workload file's cluster may have", machines, maxWorkloadGPUs)
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# Symphony workload exported by `symphony provision` (planner %s): each model's\n", p.Planner)
	fmt.Fprintf(bw, "# SLO is its module's latency budget within the end-to-end SLO of %v;\n", p.SLO)
	fmt.Fprintf(bw, "# profiles are linear upper bounds of the module's points on its first configuration's hardware.\n")
	if len(cpu) > 0 {
		fmt.Fprintf(bw, "# CPU modules left out: %v\n", cpu)
	}
	fmt.Fprintf(bw, "# The provision costs %s per hour.\n", strconv.FormatFloat(p.CostPerHour, 'f', 4, 64))
	bw.WriteString("seed: 1\nduration: 30s\nwarmup: 5s\ncluster:\n  gpu_types:\n")
	for i, h := range app.Hardware {
		if count[i] <= 0 {
			continue
		}
		n := int(math.Ceil(count[i] - 1e-9))
		fmt.Fprintf(bw, "    - {name: %s, count: %d, price_per_hour: %s", h.Name, max(1, n), strconv.FormatFloat(h.PricePerHour, 'g', -1, 64))
		if h.Memory > 0 {
			fmt.Fprintf(bw, ", memory: %s", strictyaml.FormatSize(h.Memory))
		}
		bw.WriteString("}\n")
	}
	bw.WriteString("models:\n")
	for _, m := range models {
		fmt.Fprintf(bw, "  - name: %s\n", m.name)
		fmt.Fprintf(bw, "    profile: {alpha: %v, beta: %v, max_batch: %d}   # on %s\n", m.alpha, m.beta, m.maxBatch, m.hw)
		fmt.Fprintf(bw, "    slo: %v\n", m.slo)
		fmt.Fprintf(bw, "    rate: %s\n", strconv.FormatFloat(m.rate, 'g', -1, 64))
		bw.WriteString("    arrival: poisson\n")
	}
	bw.WriteString("policy: symphony\n")
	return bw.Flush()
}

// fitLinear fits latency = α·batch + β to points by least squares, with α
// and β at least 0 (and not both 0), then raises β until the line is at or
// above every point, and returns the largest batch. The exported profile
// is thus an upper bound: a Symphony scheduler planning with it never
// expects a batch to finish sooner than the module's measurements say.
func fitLinear(pts []Point) (alpha, beta time.Duration, maxBatch int) {
	var n, sx, sy, sxx, sxy float64
	for _, p := range pts {
		x, y := float64(p.Batch), float64(p.Latency)
		n++
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
		maxBatch = max(maxBatch, p.Batch)
	}
	a, b := 0.0, sy/n
	if den := n*sxx - sx*sx; n > 1 && den > 0 {
		a = (n*sxy - sx*sy) / den
		b = (sy - a*sx) / n
	}
	switch {
	case a < 0: // latency falling with the batch: a constant
		a, b = 0, sy/n
	case b < 0: // through the origin
		a, b = sxy/sxx, 0
	}
	for _, p := range pts {
		if short := float64(p.Latency) - (a*float64(p.Batch) + b); short > 0 {
			b += short
		}
	}
	alpha, beta = time.Duration(math.Ceil(a)), time.Duration(math.Ceil(b))
	if alpha == 0 && beta == 0 {
		beta = time.Nanosecond
	}
	return alpha, beta, max(1, maxBatch)
}

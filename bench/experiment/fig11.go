package experiment

import (
	"fmt"
	"math"
	"time"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/scheduler"
)

func fig11Experiment() *Experiment {
	return &Experiment{
		Name:  "fig11",
		Title: "goodput against the number of GPUs: 20 ResNet50-like models, 100 ms SLO",
		Paper: "Symphony paper, Figure 11 right (§5.4): Symphony's goodput grows linearly with the GPUs. (The left panel, the " +
			"real-time scheduler's throughput by thread count, is `symphony bench scheduler --threads N` and depends on the machine.)",
		Deterministic: true,
		run:           runFig11,
	}
}

func runFig11(r *Run) error {
	gpus := []int{8, 16, 32, 64, 128}
	if r.Quick {
		gpus = []int{8, 16, 32}
	}
	systems := []scheduler.Policy{scheduler.PolicySymphony, scheduler.PolicyClockwork, scheduler.PolicyNexus}
	ms, err := zooSpec("table4", "ResNet50")
	if err != nil {
		return err
	}
	seeds := r.seeds()
	var cells []cell
	for _, p := range systems {
		for _, g := range gpus {
			for _, seed := range seeds {
				c, err := searchCell(fmt.Sprintf("%s on %d GPUs, seed %d", p, g, seed),
					r.gridSpec(seed, g, p, zooLoad("table4", []string{"ResNet50"}, 20, 100*time.Millisecond, math.Round(staggeredRate(ms, 100*time.Millisecond, g)), "even", "poisson")))
				if err != nil {
					return err
				}
				cells = append(cells, c)
			}
		}
	}
	outs, err := r.simulate(cells)
	if err != nil {
		return err
	}
	r.columns(col("system"), num("gpus", "%.0f"), num("seeds", "%.0f"), num("goodput_rps", "%.1f"), num("min_rps", "%.1f"), num("max_rps", "%.1f"),
		num("per_gpu_rps", "%.1f"), col("note"))
	var series []report.Series
	for j, p := range systems {
		s := report.Series{Label: p.String(), Color: j}
		lo, hi := math.Inf(1), math.Inf(-1)
		for i, g := range gpus {
			agg := aggregate(outs[(j*len(gpus)+i)*len(seeds) : (j*len(gpus)+i+1)*len(seeds)])
			per := agg.mean / float64(g)
			r.row(p.String(), float64(g), float64(len(seeds)), agg.mean, agg.min, agg.max, per, agg.note)
			s.Points = append(s.Points, [2]float64{float64(g), agg.mean})
			lo, hi = math.Min(lo, per), math.Max(hi, per)
		}
		series = append(series, s)
		if p == scheduler.PolicySymphony {
			r.claim("Symphony's goodput grows linearly with the GPUs: goodput per GPU within 10% across the counts", lo >= 0.9*hi,
				"%.0f-%.0f req/s per GPU", lo, hi)
		}
	}
	r.note("The simulator has no locks: Clockwork's loss of scale in the paper came from its controller's locks, which a simulation cannot show.")
	if r.OutDir == "" {
		return nil
	}
	return r.plotted(report.WriteLinePlot(r.OutDir, "fig11", "Figure 11 (right): goodput against GPUs", "GPUs", "goodput (requests/s)", series))
}

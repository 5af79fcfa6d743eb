package experiment

import (
	"fmt"
	"math"
	"time"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/scheduler"
)

func fig13Experiment() *Experiment {
	return &Experiment{
		Name:  "fig13",
		Title: "goodput against network latency: 20 ResNet50-like models on 32 GPUs at four SLOs",
		Paper: "Symphony paper, Figure 13 (§5.5): latency in the RDMA range costs little goodput; latency in the TCP tail's range " +
			"costs much, the more the tighter the SLO.",
		Deterministic: true,
		run:           runFig13,
	}
}

// fig13Delays are one-way network latencies: the RDMA range (the paper's
// incast p99.99 is within 33us) and the TCP tail's range (12x a median of
// a few hundred microseconds).
var fig13Delays = map[string][]time.Duration{
	"rdma": {0, 5 * time.Microsecond, 10 * time.Microsecond, 20 * time.Microsecond, 35 * time.Microsecond, 50 * time.Microsecond},
	"tcp":  {50 * time.Microsecond, 100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond},
}

// latencyNetwork is the network mapping for one-way latency d: a grant
// (scheduler to backend) and the pull's request to the frontend cost d
// each before the inputs flow, the result d; each input's transfer is
// 20us (150 KB at 56 Gb/s, the paper's incast object).
func latencyNetwork(d time.Duration) string {
	return fmt.Sprintf("{ctrl_delay: %s, data_delay_per_request: 20us, result_delay: %s}", 2*d, d)
}

func runFig13(r *Run) error {
	slos := []time.Duration{20 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond}
	ranges := []string{"rdma", "tcp"}
	delays := fig13Delays
	if r.Quick {
		slos = []time.Duration{20 * time.Millisecond, 100 * time.Millisecond}
		delays = map[string][]time.Duration{"rdma": {0, 50 * time.Microsecond}, "tcp": {2 * time.Millisecond}}
	}
	ms, err := zooSpec("table4", "ResNet50")
	if err != nil {
		return err
	}
	type point struct {
		rng string
		slo time.Duration
		d   time.Duration
	}
	seeds := r.seeds()
	var points []point
	var cells []cell
	for _, rng := range ranges {
		for _, slo := range slos {
			for _, d := range delays[rng] {
				points = append(points, point{rng, slo, d})
				for _, seed := range seeds {
					s := r.gridSpec(seed, 32, scheduler.PolicySymphony, zooLoad("table4", []string{"ResNet50"}, 20, slo, math.Round(staggeredRate(ms, slo, 32)), "even", "poisson"))
					s.network = latencyNetwork(d)
					c, err := searchCell(fmt.Sprintf("%s %s latency %s seed %d", rng, slo, d, seed), s)
					if err != nil {
						return err
					}
					cells = append(cells, c)
				}
			}
		}
	}
	outs, err := r.simulate(cells)
	if err != nil {
		return err
	}
	r.columns(col("range"), num("slo_ms", "%.0f"), num("latency_us", "%.0f"), num("seeds", "%.0f"), num("goodput_rps", "%.1f"),
		num("min_rps", "%.1f"), num("max_rps", "%.1f"), num("vs_least_latency", "%.3f"), col("note"))
	first := map[time.Duration]float64{}
	loss := map[string]map[time.Duration]float64{"rdma": {}, "tcp": {}}
	series := map[string][]report.Series{}
	for i, pt := range points {
		agg := aggregate(outs[i*len(seeds) : (i+1)*len(seeds)])
		if _, ok := first[pt.slo]; !ok {
			first[pt.slo] = agg.mean // the RDMA range's first latency
		}
		k := ratio(agg.mean, first[pt.slo])
		r.row(pt.rng, float64(pt.slo.Milliseconds()), float64(pt.d.Microseconds()), float64(len(seeds)), agg.mean, agg.min, agg.max, k, agg.note)
		loss[pt.rng][pt.slo] = 1 - k // the last latency of the range wins
		ss := series[pt.rng]
		si := -1
		for j := range ss {
			if ss[j].Label == pt.slo.String() {
				si = j
			}
		}
		if si < 0 {
			ss = append(ss, report.Series{Label: pt.slo.String(), Color: len(ss)})
			si = len(ss) - 1
		}
		ss[si].Points = append(ss[si].Points, [2]float64{float64(pt.d.Microseconds()), agg.mean})
		series[pt.rng] = ss
	}
	worstRDMA := 0.0
	for _, l := range loss["rdma"] {
		worstRDMA = math.Max(worstRDMA, l)
	}
	r.claim("latency in the RDMA range costs little: <= 5% of goodput at every SLO", worstRDMA <= 0.05, "at most %.1f%%", 100*worstRDMA)
	tight, loose := slos[0], slos[len(slos)-1]
	r.claim("latency in the TCP range costs more the tighter the SLO", loss["tcp"][tight] > loss["tcp"][loose],
		"%.1f%% at %s, %.1f%% at %s", 100*loss["tcp"][tight], tight, 100*loss["tcp"][loose], loose)
	r.note("One-way latency d costs the grant and the pull's request d each (ctrl_delay 2d) and the result d; each input's transfer is 20us.")
	if r.OutDir == "" {
		return nil
	}
	for _, rng := range ranges {
		if err := r.plotted(report.WriteLinePlot(r.OutDir, "fig13-"+rng, fmt.Sprintf("Figure 13: goodput against one-way latency, %s range", rng),
			"one-way latency (us)", "goodput (requests/s)", series[rng])); err != nil {
			return err
		}
	}
	return nil
}

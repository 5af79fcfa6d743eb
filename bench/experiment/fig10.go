package experiment

import (
	"fmt"
	"math"
	"time"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/scheduler"
)

var curvePolicies = []scheduler.Policy{scheduler.PolicySymphony, scheduler.PolicyWorkConserving, scheduler.PolicyClockwork, scheduler.PolicyNexus}

// flatTopSpec is testdata/workloads/flat-top.yaml: ten 1080Ti ResNet50s
// with a 100 ms SLO on 24 GPUs, Poisson, evenly popular (§5.3).
func flatTopSpec(quick bool, p scheduler.Policy) spec {
	s := spec{seed: 42, duration: 20 * time.Second, warmup: 3 * time.Second, gpus: 24, policy: p,
		load: zooLoad("1080ti", []string{"ResNet50"}, 10, 100*time.Millisecond, 10000, "even", "poisson")}
	if quick {
		s.duration, s.warmup = 5*time.Second, time.Second
	}
	return s
}

func fig10Experiment() *Experiment {
	return &Experiment{
		Name:  "fig10",
		Title: "stability and GPU utilization under rising load: 10 ResNet50s, 100 ms SLO, 24 GPUs",
		Paper: "Symphony paper, Figure 10 (§5.3): Symphony and Nexus keep a flat top past capacity, Clockwork's goodput falls; " +
			"Symphony's GPU utilization rises gradually and reaches full near peak goodput, the baselines' reach full before their peak.",
		Deterministic: true,
		run:           runFig10,
	}
}

func runFig10(r *Run) error {
	mults := []float64{0.25, 0.5, 0.75, 1, 1.25, 1.5, 2}
	if r.Quick {
		mults = []float64{0.5, 1, 1.5, 2}
	}
	// The x axis is one load for every system: multiples of Symphony's
	// goodput on the file.
	w, err := flatTopSpec(r.Quick, scheduler.PolicySymphony).workload("flat-top symphony")
	if err != nil {
		return err
	}
	base, err := r.simulate([]cell{{name: "flat-top symphony goodput", w: w, search: true}})
	if err != nil {
		return err
	}
	if base[0].rep == nil {
		return fmt.Errorf("symphony's goodput search: %w", base[0].err)
	}
	k := base[0].rep.GoodputSearch.Multiplier
	peak := base[0].goodput()
	var cells []cell
	for _, p := range curvePolicies {
		w, err := flatTopSpec(r.Quick, p).workload("flat-top " + p.String())
		if err != nil {
			return err
		}
		for _, m := range mults {
			cells = append(cells, cell{name: fmt.Sprintf("%s at %gx", p, m), w: w, multiplier: k * m})
		}
	}
	outs, err := r.simulate(cells)
	if err != nil {
		return err
	}
	r.columns(col("system"), num("load_x_symphony_goodput", "%.2f"), num("offered_rps", "%.1f"), num("goodput_rps", "%.1f"),
		num("bad_rate", "%.4f"), num("gpu_busy", "%.4f"), col("note"))
	var goodSeries, busySeries []report.Series
	maxGood := map[scheduler.Policy]float64{}
	at := map[scheduler.Policy]map[float64]outcome{}
	for j, p := range curvePolicies {
		gs := report.Series{Label: p.String(), Color: j}
		bs := report.Series{Label: p.String(), Color: j}
		at[p] = map[float64]outcome{}
		for i, m := range mults {
			o := outs[j*len(mults)+i]
			at[p][m] = o
			if o.rep == nil {
				r.row(p.String(), m, nan, nan, nan, nan, shortErr(o.err))
				continue
			}
			r.row(p.String(), m, o.rep.OfferedRPS, o.rep.GoodputRPS, o.rep.BadRate, o.rep.GPUBusyFraction, "")
			gs.Points = append(gs.Points, [2]float64{o.rep.OfferedRPS, o.rep.GoodputRPS})
			bs.Points = append(bs.Points, [2]float64{o.rep.OfferedRPS, o.rep.GPUBusyFraction})
			maxGood[p] = math.Max(maxGood[p], o.rep.GoodputRPS)
		}
		goodSeries, busySeries = append(goodSeries, gs), append(busySeries, bs)
	}
	top := mults[len(mults)-1]
	good := func(p scheduler.Policy, m float64) float64 {
		if o := at[p][m]; o.rep != nil {
			return o.rep.GoodputRPS
		}
		return 0
	}
	busy := func(p scheduler.Policy, m float64) float64 {
		if o := at[p][m]; o.rep != nil {
			return o.rep.GPUBusyFraction
		}
		return nan
	}
	for _, p := range []scheduler.Policy{scheduler.PolicySymphony, scheduler.PolicyNexus} {
		r.claim(fmt.Sprintf("%s keeps a flat top: goodput at %gx the load is >= 0.9 of its best", p, top), good(p, top) >= 0.9*maxGood[p],
			"%.0f of %.0f (%.2f)", good(p, top), maxGood[p], good(p, top)/maxGood[p])
	}
	cw := scheduler.PolicyClockwork
	r.claim(fmt.Sprintf("clockwork's goodput falls past capacity: at %gx below 0.9 of its best", top), good(cw, top) < 0.9*maxGood[cw],
		"%.0f of %.0f (%.2f)", good(cw, top), maxGood[cw], good(cw, top)/maxGood[cw])
	r.claim("Symphony's GPU utilization rises gradually: below 0.8 at half its goodput, above 0.9 at its goodput",
		busy(scheduler.PolicySymphony, 0.5) < 0.8 && busy(scheduler.PolicySymphony, 1) > 0.9,
		"%.2f at 0.5x, %.2f at 1x", busy(scheduler.PolicySymphony, 0.5), busy(scheduler.PolicySymphony, 1))
	r.note("Symphony's goodput on the file is %.1f req/s (x%.4g of its rates); every system runs at the same multiples of it.", peak, k)
	if r.OutDir == "" {
		return nil
	}
	if err := r.plotted(report.WriteLinePlot(r.OutDir, "fig10-stability", "Figure 10 (left): goodput against offered load",
		"offered (requests/s)", "goodput (requests/s)", goodSeries)); err != nil {
		return err
	}
	return r.plotted(report.WriteLinePlot(r.OutDir, "fig10-utilization", "Figure 10 (right): GPU utilization against offered load",
		"offered (requests/s)", "GPU busy fraction", busySeries))
}

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

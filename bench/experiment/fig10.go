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

package experiment

import (
	"fmt"
	"math"
	"time"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/scheduler"
)

var fig7Systems = []scheduler.Policy{scheduler.PolicySymphony, scheduler.PolicyClockwork, scheduler.PolicyNexus}

// fig7Setup is one panel of Figure 7: a popularity law and an arrival
// process.
type fig7Setup struct{ popularity, arrival string }

var fig7Setups = []fig7Setup{{"even", "poisson"}, {"zipf:0.9", "poisson"}, {"even", "gamma:0.05"}, {"zipf:0.9", "gamma:0.05"}}

func fig7Experiment() *Experiment {
	return &Experiment{
		Name:  "fig7",
		Title: "goodput by SLO of 20 ResNet50-like models on 32 GPUs: even or Zipf(0.9) popularity, Poisson or Gamma(0.05) arrivals",
		Paper: "Symphony paper, Figure 7 (§5.2.1): Symphony leads at tight SLOs in all four setups; Nexus falls behind under bursty " +
			"arrivals (static partitioning); at loose SLOs Symphony and Clockwork are close.",
		Deterministic: true,
		run:           runFig7,
	}
}

// lowBaselineNote explains a goodput far below Symphony's from its search:
// the worst model of the first failing step above the found load (or of
// the lowest step when none passed), with its bad rate and the requests
// the run offered it.
func lowBaselineNote(o outcome) string {
	if o.rep == nil || o.rep.GoodputSearch == nil {
		if o.err != nil {
			return shortErr(o.err)
		}
		return ""
	}
	s := o.rep.GoodputSearch
	var fail *report.SearchStep
	for i := range s.Steps {
		st := &s.Steps[i]
		if !st.OK && st.Multiplier > s.Multiplier && (fail == nil || st.Multiplier < fail.Multiplier) {
			fail = st
		}
	}
	if fail == nil {
		return ""
	}
	if fail.WorstModel == "" && fail.Sparse != nil {
		return fmt.Sprintf("fails from x%.4g: %d sparse models %d bad of %d at %.0f req/s offered",
			fail.Multiplier, fail.Sparse.Models, fail.Sparse.Bad, fail.Sparse.Offered, fail.OfferedRPS)
	}
	return fmt.Sprintf("fails from x%.4g: %s %.1f%% bad at %.0f req/s offered", fail.Multiplier, fail.WorstModel, 100*fail.WorstBadRate, fail.OfferedRPS)
}

func runFig7(r *Run) error {
	slos := []time.Duration{15, 20, 25, 30, 40, 50, 100}
	if r.Quick {
		slos = []time.Duration{25, 100}
	}
	ms, err := zooSpec("table4", "ResNet50")
	if err != nil {
		return err
	}
	type point struct {
		setup fig7Setup
		slo   time.Duration
	}
	var points []point
	var cells []cell
	for _, su := range fig7Setups {
		for _, slo := range slos {
			slo *= time.Millisecond
			points = append(points, point{su, slo})
			for _, p := range fig7Systems {
				c, err := searchCell(fmt.Sprintf("%s %s %s %s", su.popularity, su.arrival, slo, p),
					r.gridSpec(42, 32, p, zooLoad("table4", []string{"ResNet50"}, 20, slo, math.Round(staggeredRate(ms, slo, 32)), su.popularity, su.arrival)))
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
	r.columns(col("popularity"), col("arrival"), num("slo_ms", "%.0f"), col("system"), num("goodput_rps", "%.1f"),
		num("vs_symphony", "%.3f"), col("note"))
	n := len(fig7Systems)
	tightLead, tightCells := 0, 0
	var burstyNexus, poissonNexus []float64
	var looseGap float64
	low := 0
	series := map[fig7Setup][]report.Series{}
	for j, p := range fig7Systems {
		for _, su := range fig7Setups {
			series[su] = append(series[su], report.Series{Label: p.String(), Color: j})
		}
	}
	for i, pt := range points {
		row := outs[i*n : (i+1)*n]
		sym := row[0].goodput()
		lead := true
		for j, p := range fig7Systems {
			g := row[j].goodput()
			k := ratio(g, sym)
			note := ""
			if j > 0 && !(k >= 0.1) {
				low++
				note = lowBaselineNote(row[j])
			} else if row[j].err != nil {
				note = shortErr(row[j].err)
			}
			r.row(pt.setup.popularity, pt.setup.arrival, float64(pt.slo.Milliseconds()), p.String(), g, k, note)
			ss := series[pt.setup]
			ss[j].Points = append(ss[j].Points, [2]float64{float64(pt.slo.Milliseconds()), g})
			if j > 0 && g > sym {
				lead = false
			}
			if p == scheduler.PolicyNexus && !math.IsNaN(k) {
				if pt.setup.arrival == "poisson" {
					poissonNexus = append(poissonNexus, k)
				} else {
					burstyNexus = append(burstyNexus, k)
				}
			}
			if p == scheduler.PolicyClockwork && pt.slo == 100*time.Millisecond {
				looseGap = math.Max(looseGap, math.Abs(1-k))
			}
		}
		if pt.slo <= 25*time.Millisecond {
			tightCells++
			if lead {
				tightLead++
			}
		}
	}
	r.claim("Symphony has the highest goodput at tight SLOs (<= 25 ms) in all four setups", tightLead == tightCells,
		"%d of %d tight cells", tightLead, tightCells)
	r.claim("Nexus falls further behind Symphony under bursty arrivals than under Poisson", mean(burstyNexus) < mean(poissonNexus),
		"nexus/symphony %.2f under Gamma(0.05), %.2f under Poisson (means over cells)", mean(burstyNexus), mean(poissonNexus))
	r.claim("At a loose SLO (100 ms) Symphony and Clockwork are close (within 10%)", looseGap <= 0.1, "largest gap %.1f%%", 100*looseGap)
	r.claim("no system is below 10% of Symphony's goodput on any cell (issue 19; where one is, its note says which model failed at what load)", low == 0,
		"%d cells below", low)
	if r.OutDir == "" {
		return nil
	}
	for _, su := range fig7Setups {
		name := fmt.Sprintf("fig7-%s-%s", su.popularity, su.arrival)
		if err := r.plotted(report.WriteLinePlot(r.OutDir, plotName(name), fmt.Sprintf("Figure 7: %s popularity, %s arrivals (20 models, 32 GPUs)", su.popularity, su.arrival),
			"SLO (ms)", "goodput (requests/s)", series[su])); err != nil {
			return err
		}
	}
	return nil
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return nan
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// plotName makes a chart's file name from a label: letters, digits, '-'
// and '.' kept, anything else '_'.
func plotName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			b[i] = '_'
		}
	}
	return string(b)
}

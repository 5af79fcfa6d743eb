package experiment

import (
	"fmt"
	"math"
	"time"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/profile"
)

// fig6System is one bar of Figure 6: a policy, and for Nexus how many
// frontends route on their own.
type fig6System struct {
	label     string
	policy    scheduler.Policy
	frontends int
}

var fig6Systems = []fig6System{
	{"symphony", scheduler.PolicySymphony, 1},
	{"clockwork", scheduler.PolicyClockwork, 1},
	{"nexus-1fe", scheduler.PolicyNexus, 1},
	{"nexus-8fe", scheduler.PolicyNexus, 8},
}

// fig6Paper is what §5.1 says of Symphony against the baselines, per zoo
// and subset: the range of Symphony's goodput over a baseline's.
var fig6Paper = map[string][2]float64{
	"1080ti/all": {2, 2.4}, "a100/all": {2, 2.4},
	"1080ti/gt2": {3.5, 3.5}, "a100/gt2": {5.7, 5.7},
	"1080ti/lt2": {1.23, 1.23}, "a100/lt2": {1.10, 1.10},
}

// fig6Subset is the zoo's models of a subset: all of them, those whose β/α
// is above 2 (strong batching) or below 2.
func fig6Subset(zoo, subset string) ([]string, error) {
	specs, err := profile.Zoo(zoo)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range specs {
		k := s.Beta.Seconds() / s.Alpha.Seconds()
		if subset == "all" || (subset == "gt2" && k > 2) || (subset == "lt2" && k < 2) {
			out = append(out, s.Name)
		}
	}
	return out, nil
}

func fig6Experiment() *Experiment {
	return &Experiment{
		Name:  "fig6",
		Title: "goodput by system on the mixed zoos (64 GPUs): all models, beta/alpha > 2 and < 2",
		Paper: "Symphony paper, Figure 6 (§5.1): Symphony 2-2.4x the baselines on all models, 3.5x (1080Ti) and 5.7x (A100) on gt2, " +
			"1.23x and 1.10x on lt2; Nexus with 8 frontends loses 11-45% against one.",
		Deterministic: true,
		run:           runFig6,
	}
}

func runFig6(r *Run) error {
	zoos, subsets := []string{"1080ti", "a100"}, []string{"all", "gt2", "lt2"}
	if r.Quick {
		subsets = []string{"all"}
	}
	type setting struct{ zoo, subset string }
	var settings []setting
	var cells []cell
	for _, z := range zoos {
		for _, sub := range subsets {
			names, err := fig6Subset(z, sub)
			if err != nil {
				return err
			}
			settings = append(settings, setting{z, sub})
			for _, sys := range fig6Systems {
				s := spec{seed: 42, duration: 20 * time.Second, warmup: 3 * time.Second, gpus: 64, policy: sys.policy, nexusFrontends: sys.frontends,
					load: zooLoad(z, names, 0, 0, math.Round(10000*float64(len(names))/35), "even", "poisson")}
				if r.Quick {
					s.duration, s.warmup = 4*time.Second, time.Second
				}
				c, err := searchCell(fmt.Sprintf("%s/%s %s", z, sub, sys.label), s)
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
	r.columns(col("zoo"), col("subset"), col("system"), num("models", "%.0f"), num("goodput_rps", "%.1f"),
		num("symphony_over_this", "%.3f"), col("paper_symphony_over_baselines"), col("note"))
	groups := make([]string, len(settings))
	bars := make([]report.BarSeries, len(fig6Systems))
	for j, sys := range fig6Systems {
		bars[j] = report.BarSeries{Label: sys.label, Values: make([]float64, len(settings)), Color: j}
	}
	for i, st := range settings {
		names, _ := fig6Subset(st.zoo, st.subset)
		row := outs[i*len(fig6Systems) : (i+1)*len(fig6Systems)]
		sym := row[0].goodput()
		key := st.zoo + "/" + st.subset
		paper := fig6Paper[key]
		paperText := fmt.Sprintf("%g-%g", paper[0], paper[1])
		if paper[0] == paper[1] {
			paperText = fmt.Sprintf("%g", paper[0])
		}
		lo, hi := math.Inf(1), math.Inf(-1)
		for j, sys := range fig6Systems {
			o := row[j]
			note, pt := "", ""
			if o.err != nil {
				note = shortErr(o.err)
			}
			k := ratio(sym, o.goodput())
			if j > 0 {
				pt = paperText
				if !math.IsNaN(k) {
					lo, hi = math.Min(lo, k), math.Max(hi, k)
				}
			}
			r.row(st.zoo, st.subset, sys.label, float64(len(names)), o.goodput(), k, pt, note)
			bars[j].Values[i] = o.goodput()
		}
		groups[i] = key
		r.claim(fmt.Sprintf("%s: Symphony %sx the baselines (within 10%%)", key, paperText), inRange(lo, hi, paper[0], paper[1], 0.1),
			"%.2f-%.2fx", lo, hi)
		one, eight := row[2].goodput(), row[3].goodput()
		r.claim(fmt.Sprintf("%s: Nexus with 8 frontends loses 11-45%% against one", key), one > 0 && 1-eight/one >= 0.11*0.9 && 1-eight/one <= 0.45*1.1,
			"%.0f%% (%.0f against %.0f)", 100*(1-eight/one), eight, one)
	}
	r.note("The simulator runs the paper's scheduler-only setting (s); end-to-end runs (e) are `symphony demo` and `symphony bench`.")
	if r.OutDir == "" {
		return nil
	}
	return r.plotted(report.WriteBarPlot(r.OutDir, "fig6", "Figure 6: goodput by system, mixed zoos on 64 GPUs", "goodput (requests/s)", groups, bars))
}

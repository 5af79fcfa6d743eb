package loadgen

import (
	"context"
	"fmt"
	"math"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/workload"
)

const (
	// targetBadRate is the goodput criterion: every model's bad rate at or
	// below 1% (docs/workload-format.md).
	targetBadRate = 0.01
	// searchPrecision is the relative width of the bracket at which the
	// search stops.
	searchPrecision = 0.02
)

// FindGoodput searches for the largest multiplier of every model's rate at
// which every model's bad rate stays at or below 1%, running w.Scaled(k) in
// real time for each step, and returns the report of the best passing run
// with the search recorded in it.
//
// Like the simulator's search, it brackets the answer by doubling or halving
// from 1 and then bisects, but each step costs warmup+duration of wall time,
// so it stops at 2% precision or after Options.SearchSteps runs (default 8),
// whichever comes first. It prints one line per step to Options.Progress.
func FindGoodput(ctx context.Context, t Target, w *workload.Workload, o Options) (*report.Report, error) {
	return findGoodput(w, o, func(w *workload.Workload) (*report.Report, error) {
		return Run(ctx, t, w, o)
	})
}

func findGoodput(w *workload.Workload, o Options, run func(*workload.Workload) (*report.Report, error)) (*report.Report, error) {
	steps := o.withDefaults(w).SearchSteps
	search := &report.GoodputSearch{TargetBadRate: targetBadRate}
	var best *report.Report
	try := func(k float64) (bool, error) {
		rep, err := run(w.Scaled(k))
		if err != nil {
			return false, fmt.Errorf("goodput search at %.4gx: %w", k, err)
		}
		st := report.SearchStep{Multiplier: k, OfferedRPS: rep.OfferedRPS, GoodputRPS: rep.GoodputRPS, WorstBadRate: -1}
		for _, m := range rep.Models {
			if m.BadRate > st.WorstBadRate {
				st.WorstBadRate, st.WorstModel = m.BadRate, m.Name
			}
		}
		st.OK = st.WorstBadRate <= targetBadRate
		search.Steps = append(search.Steps, st)
		if st.OK && (best == nil || k > search.Multiplier) {
			best, search.Multiplier = rep, k
		}
		if o.Progress != nil {
			verdict := "ok"
			if !st.OK {
				verdict = "too many bad"
			}
			fmt.Fprintf(o.Progress, "goodput step %d/%d: %.4gx  offered %.1f req/s  goodput %.1f req/s  worst bad rate %.2f%% (%s)  %s\n",
				len(search.Steps), steps, k, st.OfferedRPS, st.GoodputRPS, 100*st.WorstBadRate, st.WorstModel, verdict)
		}
		return st.OK, nil
	}
	lo, hi, k := 0.0, math.Inf(1), 1.0
bisect:
	for len(search.Steps) < steps {
		ok, err := try(k)
		if err != nil {
			if best == nil {
				return nil, err
			}
			// Stopped (a signal, say): the best step so far, with the
			// steps done, is still worth reporting.
			search.GoodputRPS = best.GoodputRPS
			best.GoodputSearch = search
			return best, fmt.Errorf("%w; the report is the best of the %d steps done (a lower bound)", err, len(search.Steps))
		}
		if ok {
			lo = k
		} else {
			hi = k
		}
		switch {
		case math.IsInf(hi, 1):
			k = 2 * lo
		case lo == 0:
			k = hi / 2
		case hi-lo <= searchPrecision*lo:
			break bisect
		default:
			k = (lo + hi) / 2
		}
	}
	if best == nil {
		return nil, fmt.Errorf("goodput search: a model's bad rate is above %.0f%% even at %.3gx the offered load", 100*targetBadRate, hi)
	}
	search.GoodputRPS = best.GoodputRPS
	best.GoodputSearch = search
	if o.Progress != nil {
		bound := "upper bound not found"
		if !math.IsInf(hi, 1) {
			bound = fmt.Sprintf("fails at %.4gx", hi)
		}
		fmt.Fprintf(o.Progress, "goodput %.1f req/s at %.4gx (%s)\n", search.GoodputRPS, search.Multiplier, bound)
	}
	return best, nil
}

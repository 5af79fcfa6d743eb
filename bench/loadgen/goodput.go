package loadgen

import (
	"context"
	"fmt"
	"math"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/workload"
)

// searchPrecision is the relative width of the bracket at which a live
// search stops: coarser than the simulator's, since each step costs
// warmup+duration of wall time.
const searchPrecision = 0.02

// FindGoodput searches for the largest multiplier of every model's rate at
// which every model's bad rate stays at or below 1%, running w.Scaled(k) in
// real time for each step, and returns the report of the best passing run
// with the search recorded in it.
//
// It is report.FindGoodput, the simulator's search, but each step costs
// warmup+duration of wall time, so it stops at 2% precision or after
// Options.SearchSteps runs (default 8), whichever comes first. It prints one
// line per step to Options.Progress.
func FindGoodput(ctx context.Context, t Target, w *workload.Workload, o Options) (*report.Report, error) {
	return findGoodput(w, o, func(w *workload.Workload) (*report.Report, error) {
		return Run(ctx, t, w, o)
	})
}

func findGoodput(w *workload.Workload, o Options, run func(*workload.Workload) (*report.Report, error)) (*report.Report, error) {
	steps := o.withDefaults(w).SearchSteps
	so := report.SearchOptions{Precision: searchPrecision, MaxSteps: steps}
	done := 0
	if o.Progress != nil {
		so.Step = func(st report.SearchStep) {
			done++
			verdict := "ok"
			if !st.OK {
				verdict = "too many bad"
			}
			worst := ""
			if st.WorstModel != "" {
				worst = " (" + st.WorstModel + ")"
			}
			fmt.Fprintf(o.Progress, "goodput step %d/%d: %.4gx  offered %.1f req/s  goodput %.1f req/s  worst bad rate %.2f%%%s  %s\n",
				done, steps, st.Multiplier, st.OfferedRPS, st.GoodputRPS, 100*st.WorstBadRate, worst, verdict)
		}
	}
	best, b, err := report.FindGoodput(func(k float64) (*report.Report, error) { return run(w.Scaled(k)) }, so)
	switch {
	case err != nil && best != nil:
		// Stopped (a signal, say): the best step so far, with the
		// steps done, is still worth reporting.
		return best, fmt.Errorf("%w; the report is the best of the %d steps done (a lower bound)", err, b.Steps)
	case err != nil:
		return nil, err
	}
	if o.Progress != nil {
		bound := "upper bound not found"
		if !math.IsInf(b.Hi, 1) {
			bound = fmt.Sprintf("fails at %.4gx", b.Hi)
		}
		fmt.Fprintf(o.Progress, "goodput %.1f req/s at %.4gx (%s)\n", best.GoodputSearch.GoodputRPS, best.GoodputSearch.Multiplier, bound)
	}
	return best, nil
}

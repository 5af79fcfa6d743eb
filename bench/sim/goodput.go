package sim

import (
	"fmt"
	"math"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/workload"
)

// GoodputOptions tune a goodput search.
type GoodputOptions struct {
	Options
	// TargetBadRate is the largest bad rate any model may have; 0 means 1%,
	// the paper's p99-within-SLO goodput.
	TargetBadRate float64
	// Precision is the relative width at which the search stops; 0 means 0.5%.
	Precision float64
	// Step, when set, is called after each run of the search.
	Step func(report.SearchStep)
}

// FindGoodput searches for the largest multiplier of every model's rate at
// which every model's bad rate stays within the target, and returns the
// report of the run at that multiplier with the search recorded in it.
//
// It brackets the answer by doubling or halving from 1, then bisects. Each
// step is a full, seeded simulation, so the search is deterministic.
func FindGoodput(w *workload.Workload, opts GoodputOptions) (*report.Report, error) {
	target := opts.TargetBadRate
	if target <= 0 {
		target = 0.01
	}
	prec := opts.Precision
	if prec <= 0 {
		prec = 0.005
	}
	search := &report.GoodputSearch{TargetBadRate: target}
	var best *report.Report
	run := func(k float64) (bool, error) {
		rep, err := Run(w.Scaled(k), opts.Options)
		if err != nil {
			return false, fmt.Errorf("goodput search at %.4gx: %w", k, err)
		}
		step := report.SearchStep{Multiplier: k, OfferedRPS: rep.OfferedRPS, GoodputRPS: rep.GoodputRPS}
		for _, m := range rep.Models {
			if m.BadRate >= step.WorstBadRate {
				step.WorstBadRate, step.WorstModel = m.BadRate, m.Name
			}
		}
		step.OK = step.WorstBadRate <= target
		search.Steps = append(search.Steps, step)
		if opts.Step != nil {
			opts.Step(step)
		}
		if step.OK && (best == nil || k > search.Multiplier) {
			best, search.Multiplier = rep, k
		}
		return step.OK, nil
	}
	found, err := SearchMultiplier(run, prec)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("goodput search: bad rate above %.2f%% even at a millionth of the offered load", 100*target)
	}
	search.GoodputRPS = best.GoodputRPS
	best.GoodputSearch = search
	return best, nil
}

// SearchMultiplier finds the largest load multiplier k for which ok(k)
// holds, to a relative precision prec, given that ok turns false as k grows.
// It brackets the answer by doubling or halving from 1, then bisects; ok
// sees every multiplier tried and keeps what it needs of each run. found is
// false if ok fails even at a millionth of the load; an error from ok ends
// the search, and so does ok holding at every load tried (2^39 times).
func SearchMultiplier(ok func(k float64) (bool, error), prec float64) (found bool, err error) {
	lo, hi := 0.0, math.Inf(1)
	k := 1.0
	for i := 0; i < 40 && (lo == 0 || math.IsInf(hi, 1)); i++ {
		good, err := ok(k)
		if err != nil {
			return false, err
		}
		if good {
			lo = k
			k *= 2
		} else {
			hi = k
			k /= 2
		}
		if k < 1e-6 {
			return false, nil
		}
	}
	if math.IsInf(hi, 1) {
		return false, fmt.Errorf("goodput search: the target still holds at %.3gx the offered load; is any load offered?", lo)
	}
	for hi-lo > prec*lo {
		mid := (lo + hi) / 2
		good, err := ok(mid)
		if err != nil {
			return false, err
		}
		if good {
			lo = mid
		} else {
			hi = mid
		}
	}
	return true, nil
}

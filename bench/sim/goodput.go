package sim

import (
	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/workload"
)

// GoodputOptions tune a goodput search.
type GoodputOptions struct {
	Options
	// TargetBadRate is the largest bad rate any model may have; 0 means 1%,
	// the paper's p99-within-SLO goodput. Models offered too few requests
	// to measure it are judged together (report.SearchOptions.Judge).
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
// It is report.FindGoodput, the search the live load generator runs too,
// with each step a full, seeded simulation, so the search is deterministic
// and needs no step cap.
func FindGoodput(w *workload.Workload, opts GoodputOptions) (*report.Report, error) {
	rep, _, err := report.FindGoodput(func(k float64) (*report.Report, error) {
		return Run(w.Scaled(k), opts.Options)
	}, report.SearchOptions{TargetBadRate: opts.TargetBadRate, Precision: opts.Precision, Step: opts.Step})
	if err != nil {
		return nil, err
	}
	return rep, nil
}

package provision

import (
	"context"
	"errors"
	"time"

	"github.com/symphony-serving/symphony/partition/lpsolve"
)

// Comparison is one planner's result on an application beside ours
// (`symphony provision --compare`): how much more it costs, or why it has no
// provision. CostPerHour and ExtraOverOurs are nil, and Error says why, for a
// planner that failed or produced a provision Verify rejects.
type Comparison struct {
	Planner     string   `json:"planner"`
	CostPerHour *float64 `json:"cost_per_hour"`
	// ExtraOverOurs is cost/ours − 1.
	ExtraOverOurs *float64 `json:"extra_over_ours"`
	PlanSeconds   float64  `json:"plan_seconds"`
	Error         string   `json:"error,omitempty"`
}

// Compare runs every other planner on app and compares each with ours, the
// provision of app being compared against: the baselines (Baselines), the brute
// force over ours' options when the instance is small enough, and Scrooge's
// MILP when a solver is installed (solver names it as SolveMILP takes it;
// milpLimit bounds the solve, and ctx stops it early). Every provision is
// checked with Verify, so that a cheaper but invalid provision cannot pass for
// a better one. The answer is in that order, one entry per planner; a
// missing solver is an entry with its error, not a failure.
func Compare(ctx context.Context, app *App, ours *Provision, solver string, milpLimit time.Duration) []Comparison {
	var out []Comparison
	add := func(name string, p *Provision, took time.Duration, err error) {
		c := Comparison{Planner: name, PlanSeconds: took.Seconds()}
		if err == nil {
			err = Verify(app, p)
		}
		if err != nil {
			c.Error = err.Error()
		} else {
			cost, extra := p.CostPerHour, p.CostPerHour/ours.CostPerHour-1
			c.CostPerHour, c.ExtraOverOurs = &cost, &extra
		}
		out = append(out, c)
	}
	for _, b := range Baselines() {
		p, took, err := timed(func() (*Provision, error) { return SolveBaseline(app, b) })
		add(b.String(), p, took, err)
	}
	p, took, err := timed(func() (*Provision, error) { return BruteForce(app, ours.Options, 0) })
	add(SystemBrute, p, took, err)
	mctx, cancel := context.WithTimeout(ctx, milpLimit)
	defer cancel()
	p, took, err = timed(func() (*Provision, error) {
		q, _, err := SolveMILP(mctx, app, solver)
		return q, err
	})
	if errors.Is(err, lpsolve.ErrNoSolver) {
		out = append(out, Comparison{Planner: SystemMILP, Error: err.Error()})
	} else {
		add(SystemMILP, p, took, err)
	}
	return out
}

// timed runs a planner and measures it.
func timed(f func() (*Provision, error)) (*Provision, time.Duration, error) {
	start := time.Now()
	p, err := f()
	return p, time.Since(start), err
}

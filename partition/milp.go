package partition

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"time"

	"github.com/symphony-serving/symphony/partition/lpsolve"
)

// MILP is the exact engine: it writes Appendix A.1's model (Eqs. 4-11) in
// CPLEX LP format (see lpformat.go for the variables and rows), hands it to
// an installed open-source solver as a subprocess, and reads the solution
// back. It exists because the heuristic gives no guarantee: on small
// problems the solver proves the optimum, and on large ones (the paper's 800
// models × 20 parts) it improves on the heuristic's answer within the time
// limit, or says it could not.
//
// The solver runs under ctx's deadline, which is also passed as its own time
// limit so that it stops by itself with its best solution. When a Fallback
// engine is set, it is solved first with a small share of the time; its
// answer warm-starts cbc, is returned when the solver finds nothing (or
// nothing better) in time, and stands in when no solver is installed.
type MILP struct {
	// Solver is "cbc", "glpsol", an absolute path to one of them, or ""
	// for the first of cbc and glpsol found on PATH. cbc is preferred: it
	// takes a warm start and stops with its best solution at its time limit.
	Solver string
	// Fallback, when not nil, is solved first: its result warm-starts the
	// solver and is returned (with a Note) when no solver is installed, or
	// when the solver finds no better feasible assignment in time.
	Fallback Engine
	// TempDir is where the per-solve working directory (model, solution,
	// log) is made and removed afterwards; "" means os.TempDir().
	TempDir string
	// TimeLimit bounds a solve whose ctx has no deadline; 0 means
	// DefaultMILPTimeLimit. Without it a solver could run for hours.
	TimeLimit time.Duration
}

// DefaultMILPTimeLimit is the time limit of a solve whose ctx has no
// deadline: the paper's 10 seconds, enough for its 400-model problems.
const DefaultMILPTimeLimit = 10 * time.Second

// Name returns "milp", the name Results carry when the solver's assignment
// is the one returned.
func (e *MILP) Name() string { return "milp" }

// lookup resolves Solver to an installed solver; an error wraps
// lpsolve.ErrNoSolver when it is not installed, so that Solve can tell a
// missing solver (fall back) from other failures.
func (e *MILP) lookup() (lpsolve.Solver, error) {
	s, err := lpsolve.Find(e.Solver)
	if err != nil && !errors.Is(err, lpsolve.ErrNoSolver) {
		return s, fmt.Errorf("partition: milp: %w", err)
	}
	return s, err
}

// Solve partitions p with the solver, under ctx's deadline (TimeLimit when
// ctx has none). Optimal is set only when the solver proved optimality;
// otherwise Notes say where it stopped. It returns the Fallback's result,
// with Engine set to the fallback's name and a Note saying why, when no
// solver is installed or the solver's best is missing, unusable or worse. An
// error wraps ErrInfeasible when the solver proved there is no feasible
// assignment, or found none in time and there is no fallback answer.
func (e *MILP) Solve(ctx context.Context, p *Problem) (*Result, error) {
	start := time.Now()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		limit := e.TimeLimit
		if limit <= 0 {
			limit = DefaultMILPTimeLimit
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	if p.Parts == 1 {
		res, err := p.NewResult(e.Name(), make([]int, len(p.Models)), time.Since(start))
		if err != nil {
			return nil, err
		}
		res.Optimal = true
		return res, nil
	}
	solver, err := e.lookup()
	kind := solver.Kind
	if err != nil {
		if !errors.Is(err, lpsolve.ErrNoSolver) {
			return nil, err
		}
		if e.Fallback == nil {
			return nil, fmt.Errorf("partition: milp: %v, and no fallback engine is set", err)
		}
		res, ferr := e.Fallback.Solve(ctx, p)
		if ferr != nil {
			return nil, fmt.Errorf("partition: milp: %v; fallback %s failed: %w", err, e.Fallback.Name(), ferr)
		}
		res.Notes = append(res.Notes, fmt.Sprintf("%v: used %s", err, e.Fallback.Name()))
		res.SolveTime = time.Since(start)
		return res, nil
	}

	// The fallback gets a small share of the time: min(1 s, 10%).
	var fb *Result
	var notes []string
	if e.Fallback != nil {
		deadline, _ := ctx.Deadline()
		share := min(time.Second, time.Until(deadline)/10)
		fctx, cancel := context.WithTimeout(ctx, share)
		r, ferr := e.Fallback.Solve(fctx, p)
		cancel()
		switch {
		case ferr != nil:
			notes = append(notes, fmt.Sprintf("fallback %s found nothing in %v: %v", e.Fallback.Name(), share.Round(time.Millisecond), ferr))
		default:
			if _, err := p.NewResult(r.Engine, r.Assignment, 0); err != nil {
				notes = append(notes, fmt.Sprintf("fallback %s's answer ignored: %v", e.Fallback.Name(), err))
			} else {
				fb = r
			}
		}
		if fb != nil && fb.Objective == 0 {
			// Nothing can beat 0: no need to run the solver.
			fb.Optimal = true
			fb.Notes = append(fb.Notes, fmt.Sprintf("%s's assignment has objective 0, a proven optimum: %s not run", e.Fallback.Name(), kind))
			fb.SolveTime = time.Since(start)
			return fb, nil
		}
	}
	useFallback := func(why string) (*Result, error) {
		fb.Notes = append(append(fb.Notes, notes...), fmt.Sprintf("%s: used %s's assignment", why, fb.Engine))
		fb.Optimal = false
		fb.SolveTime = time.Since(start)
		return fb, nil
	}

	run, err := e.runSolver(ctx, p, solver, fb)
	notes = append(notes, run.notes...)
	if err != nil {
		if fb != nil {
			return useFallback(err.Error())
		}
		return nil, fmt.Errorf("partition: milp: %w", err)
	}
	sol := run.sol
	switch sol.Status {
	case lpsolve.Infeasible:
		if fb != nil {
			// Cannot be, unless the solver's tolerances disagree with ours.
			return useFallback(fmt.Sprintf("%s reported the problem infeasible (%q) though %s found a feasible assignment", kind, sol.Summary, fb.Engine))
		}
		return nil, fmt.Errorf("%w: %s proved it (%s)", ErrInfeasible, kind, sol.Summary)
	case lpsolve.NoSolution:
		why := fmt.Sprintf("%s found no feasible assignment within its %v time limit (%s)", kind, run.limit, sol.Summary)
		if fb != nil {
			return useFallback(why)
		}
		return nil, fmt.Errorf("%w: %s", ErrInfeasible, why)
	}
	a, err := assignment(sol, len(p.Models), p.Parts)
	if err == nil {
		a = relabel(p, a)
	}
	var res *Result
	if err == nil {
		res, err = p.NewResult(e.Name(), a, 0)
	}
	if err != nil {
		err = fmt.Errorf("%s's solution (%s) is unusable: %w", kind, sol.Summary, err)
		if fb != nil {
			return useFallback(err.Error())
		}
		return nil, fmt.Errorf("partition: milp: %w", err)
	}
	res.Optimal = sol.Status == lpsolve.Optimal
	if !res.Optimal {
		notes = append(notes, run.stopNote)
	}
	if fb != nil {
		// The solver's objective is within its tolerances; compare the
		// true ones.
		if fb.Objective < res.Objective-1e-9*math.Max(1, math.Abs(res.Objective)) {
			return useFallback(fmt.Sprintf("%s's best assignment (objective %.6g) is worse than %s's (%.6g)", kind, res.Objective, fb.Engine, fb.Objective))
		}
		verb := "improved on"
		if fb.Objective <= res.Objective {
			verb = "did not improve on"
		}
		notes = append(notes, fmt.Sprintf("%s %s %s's objective %.6g", kind, verb, fb.Engine, fb.Objective))
	}
	res.Notes = append(res.Notes, notes...)
	res.SolveTime = time.Since(start)
	return res, nil
}

// solverRun is what one solver subprocess produced.
type solverRun struct {
	sol *lpsolve.Solution
	// limit is the time limit the solver was given.
	limit time.Duration
	// stopNote explains a non-optimal stop, for Result.Notes.
	stopNote string
	// notes are remarks on the run (a warm start rejected, ...).
	notes []string
}

// runSolver writes the model, runs the solver and parses its solution.
func (e *MILP) runSolver(ctx context.Context, p *Problem, solver lpsolve.Solver, fb *Result) (solverRun, error) {
	var run solverRun
	o := lpOptions{symmetric: !disruptionRow(p)}
	opts := lpsolve.Options{TempDir: e.TempDir}
	if fb != nil && solver.Kind == lpsolve.CBC {
		opts.WarmStart = mipStart(p, o, fb.Assignment)
	}
	res, err := solver.Solve(ctx, func(w io.Writer) error { return writeLP(w, p, o) }, opts)
	run.limit = res.Limit
	if err != nil {
		return run, err
	}
	run.sol = res.Solution
	run.stopNote = res.StopNote()
	if fb != nil {
		switch solver.Kind {
		case lpsolve.CBC:
			if !res.WarmStartTaken {
				run.notes = append(run.notes, "cbc did not take "+fb.Engine+"'s assignment as a warm start")
			}
		case lpsolve.GLPK:
			run.notes = append(run.notes, "glpsol takes no warm start: "+fb.Engine+"'s assignment was only compared with its answer")
		}
	}
	return run, nil
}

// mipStart writes assignment in cbc's solution-file format, which its
// mipstart command reads: only the binaries, which cbc fixes before solving
// an LP for the continuous variables. Under symmetry breaking the parts are
// first renumbered in order of their lowest-indexed model, as the model
// requires.
func mipStart(p *Problem, o lpOptions, assignment []int) []byte {
	a := assignment
	if o.symmetric {
		a = canonical(assignment, p.Parts)
	}
	var b bytes.Buffer
	b.WriteString("Feasible - objective value 0\n")
	n := 0
	for i, part := range a {
		for j := 0; j < p.Parts; j++ {
			if !o.hasX(i, j) {
				continue
			}
			v := 0
			if j == part {
				v = 1
			}
			fmt.Fprintf(&b, "%d %s %d 0\n", n, xName(i, j), v)
			n++
		}
	}
	return b.Bytes()
}

// canonical renumbers parts in order of first appearance, so that model i
// is on a part ≤ i.
func canonical(assignment []int, parts int) []int {
	label := make([]int, parts)
	for j := range label {
		label[j] = -1
	}
	next := 0
	out := make([]int, len(assignment))
	for i, j := range assignment {
		if label[j] < 0 {
			label[j] = next
			next++
		}
		out[i] = label[j]
	}
	return out
}

// relabel renumbers the parts of a solution found under symmetry breaking
// with a Current assignment but no disruption limit, so that as much static
// memory as possible stays where it is: the objective cannot tell labels
// apart, the serving system can. It pairs solution parts with current parts
// greedily by the memory they share and keeps the pairing only if it lowers
// the disruption.
func relabel(p *Problem, a []int) []int {
	if p.Current == nil || disruptionRow(p) {
		return a
	}
	l := p.Parts
	type pair struct {
		from, to int
		kept     int64
	}
	shared := make([]int64, l*l)
	for i, j := range a {
		if k := p.Current[i]; k != Unassigned {
			shared[j*l+k] += MoveCost(p.Models[i])
		}
	}
	pairs := make([]pair, 0, l*l)
	for j := 0; j < l; j++ {
		for k := 0; k < l; k++ {
			pairs = append(pairs, pair{j, k, shared[j*l+k]})
		}
	}
	sort.SliceStable(pairs, func(x, y int) bool { return pairs[x].kept > pairs[y].kept })
	to := make([]int, l)
	for j := range to {
		to[j] = -1
	}
	used := make([]bool, l)
	for _, pr := range pairs {
		if to[pr.from] < 0 && !used[pr.to] {
			to[pr.from] = pr.to
			used[pr.to] = true
		}
	}
	out := make([]int, len(a))
	for i, j := range a {
		out[i] = to[j]
	}
	before, err1 := p.Evaluate(a)
	after, err2 := p.Evaluate(out)
	if err1 != nil || err2 != nil || after.Disruption >= before.Disruption {
		return a
	}
	return out
}

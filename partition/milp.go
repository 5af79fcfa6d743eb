package partition

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
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

// solver kinds.
const (
	kindCBC  = "cbc"
	kindGLPK = "glpsol"
)

// errNoSolver is wrapped by lookup's errors, so that Solve can tell a
// missing solver (fall back) from other failures.
var errNoSolver = errors.New("no MILP solver")

// lookup resolves Solver to an executable and its kind.
func (e *MILP) lookup() (path, kind string, err error) {
	if e.Solver == "" {
		for _, k := range []string{kindCBC, kindGLPK} {
			if p, err := exec.LookPath(k); err == nil {
				return p, k, nil
			}
		}
		return "", "", fmt.Errorf("%w installed (looked for cbc, glpsol; apt-get install coinor-cbc)", errNoSolver)
	}
	base := filepath.Base(e.Solver)
	switch {
	case strings.HasPrefix(base, kindCBC):
		kind = kindCBC
	case strings.HasPrefix(base, kindGLPK):
		kind = kindGLPK
	default:
		return "", "", fmt.Errorf("partition: milp: unknown solver %q (want cbc or glpsol)", e.Solver)
	}
	if e.Solver != base && !filepath.IsAbs(e.Solver) {
		return "", "", fmt.Errorf("partition: milp: solver path %q must be absolute", e.Solver)
	}
	p, err := exec.LookPath(e.Solver)
	if err != nil {
		return "", "", fmt.Errorf("%w: %s not found (apt-get install coinor-cbc glpk-utils)", errNoSolver, e.Solver)
	}
	return p, kind, nil
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
	path, kind, err := e.lookup()
	if err != nil {
		if !errors.Is(err, errNoSolver) {
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

	run, err := e.runSolver(ctx, p, path, kind, fb)
	notes = append(notes, run.notes...)
	if err != nil {
		if fb != nil {
			return useFallback(err.Error())
		}
		return nil, fmt.Errorf("partition: milp: %w", err)
	}
	sol := run.sol
	switch sol.status {
	case statusInfeasible:
		if fb != nil {
			// Cannot be, unless the solver's tolerances disagree with ours.
			return useFallback(fmt.Sprintf("%s reported the problem infeasible (%q) though %s found a feasible assignment", kind, sol.summary, fb.Engine))
		}
		return nil, fmt.Errorf("%w: %s proved it (%s)", ErrInfeasible, kind, sol.summary)
	case statusNoSolution:
		why := fmt.Sprintf("%s found no feasible assignment within its %v time limit (%s)", kind, run.limit, sol.summary)
		if fb != nil {
			return useFallback(why)
		}
		return nil, fmt.Errorf("%w: %s", ErrInfeasible, why)
	}
	assignment, err := sol.assignment(len(p.Models), p.Parts)
	if err == nil {
		assignment = relabel(p, assignment)
	}
	var res *Result
	if err == nil {
		res, err = p.NewResult(e.Name(), assignment, 0)
	}
	if err != nil {
		err = fmt.Errorf("%s's solution (%s) is unusable: %w", kind, sol.summary, err)
		if fb != nil {
			return useFallback(err.Error())
		}
		return nil, fmt.Errorf("partition: milp: %w", err)
	}
	res.Optimal = sol.status == statusOptimal
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
	sol *solverSolution
	// limit is the time limit the solver was given.
	limit time.Duration
	// stopNote explains a non-optimal stop, for Result.Notes.
	stopNote string
	// notes are remarks on the run (a warm start rejected, ...).
	notes []string
}

// reserve is the time kept back from the solver's own limit for writing
// the model, the solver's start-up and shut-down, and reading its answer,
// so that it stops by itself, with its best solution, before ctx's deadline
// kills it. cbc on 800 models × 20 parts needed up to 0.6 s beyond its
// limit on a busy machine; killed, it leaves no solution at all.
func reserve(remaining time.Duration) time.Duration {
	return 200*time.Millisecond + remaining/12
}

// runSolver writes the model, runs the solver and parses its solution.
func (e *MILP) runSolver(ctx context.Context, p *Problem, path, kind string, fb *Result) (solverRun, error) {
	var run solverRun
	dir, err := os.MkdirTemp(e.TempDir, "symphony-milp-")
	if err != nil {
		return run, fmt.Errorf("temporary directory: %w", err)
	}
	defer os.RemoveAll(dir)
	o := lpOptions{symmetric: !disruptionRow(p)}
	lpPath := filepath.Join(dir, "model.lp")
	f, err := os.Create(lpPath)
	if err != nil {
		return run, err
	}
	err = writeLP(f, p, o)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return run, fmt.Errorf("writing the model: %w", err)
	}

	deadline, _ := ctx.Deadline()
	remaining := time.Until(deadline)
	run.limit = remaining - reserve(remaining)
	if run.limit < 50*time.Millisecond {
		return run, fmt.Errorf("no time left to run %s", kind)
	}
	solPath := filepath.Join(dir, "solution.txt")
	var args []string
	switch kind {
	case kindCBC:
		args = []string{lpPath}
		if fb != nil {
			startPath := filepath.Join(dir, "start.txt")
			if err := os.WriteFile(startPath, mipStart(p, o, fb.Assignment), 0o600); err != nil {
				return run, err
			}
			args = append(args, "mipstart", startPath)
		}
		// Wall-clock, not CPU, time: the machine may be busy.
		secs := strconv.FormatFloat(run.limit.Seconds(), 'f', 2, 64)
		args = append(args, "timeMode", "elapsed", "seconds", secs, "printingOptions", "normal", "solve", "solution", solPath)
	case kindGLPK:
		// glpsol's limit is whole seconds and leaves out its start (the LP
		// relaxation), which overran it by a second on 800 models × 20
		// parts: give it a second less, rounded down, at least 1.
		secs := max(1, int((run.limit-time.Second)/time.Second))
		run.limit = time.Duration(secs) * time.Second
		args = []string{"--lp", lpPath, "--tmlim", strconv.Itoa(secs), "--wglp", filepath.Join(dir, "model.glp"), "-w", solPath}
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.WaitDelay = 100 * time.Millisecond
	runErr := cmd.Run()
	log := out.String()
	if ctx.Err() != nil {
		return run, fmt.Errorf("%s was stopped before it finished (its own time limit was %v): %w", kind, run.limit.Round(time.Millisecond), ctx.Err())
	}
	data, readErr := os.ReadFile(solPath)
	if runErr != nil || readErr != nil {
		err := runErr
		if err == nil {
			err = readErr
		}
		return run, fmt.Errorf("%s failed: %v; its output ends: %s", kind, err, logTail(log))
	}
	switch kind {
	case kindCBC:
		run.sol, err = parseCBCSolution(data)
		if fb != nil && !strings.Contains(log, "MIPStart provided solution") {
			run.notes = append(run.notes, "cbc did not take "+fb.Engine+"'s assignment as a warm start")
		}
		if err == nil {
			run.stopNote = fmt.Sprintf("cbc stopped at its %v time limit (%s); %s", run.limit.Round(10*time.Millisecond), run.sol.summary, cbcGap(log))
		}
	case kindGLPK:
		var model []byte
		model, err = os.ReadFile(filepath.Join(dir, "model.glp"))
		if err == nil {
			run.sol, err = parseGLPKSolution(data, model)
		}
		if fb != nil {
			run.notes = append(run.notes, "glpsol takes no warm start: "+fb.Engine+"'s assignment was only compared with its answer")
		}
		run.stopNote = fmt.Sprintf("glpsol stopped at its %v time limit; %s", run.limit, glpkGap(log))
	}
	if err != nil {
		return run, fmt.Errorf("%s's solution file: %w", kind, err)
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

// cbcGap reads the optimality gap from cbc's log ("Objective value:" and
// "Lower bound:" lines of its result summary), for a Note.
func cbcGap(log string) string {
	obj, ok1 := logNumber(log, "Objective value:")
	lb, ok2 := logNumber(log, "Lower bound:")
	if !ok1 || !ok2 {
		return "best solution's gap unknown"
	}
	return fmt.Sprintf("best objective %.6g, lower bound %.6g", obj, lb)
}

// glpkGap returns glpsol's last branch-and-bound progress line ("+ ITER:
// mip = BEST >= BOUND GAP% (ACTIVE; DONE)"), which holds the gap, for a
// Note.
func glpkGap(log string) string {
	lines := strings.Split(log, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); strings.HasPrefix(l, "+") && strings.Contains(l, "mip =") {
			return "its last progress line: " + strings.Join(strings.Fields(l), " ")
		}
	}
	return "best solution's gap unknown"
}

// logNumber returns the number after the last occurrence of key in log.
func logNumber(log, key string) (float64, bool) {
	k := strings.LastIndex(log, key)
	if k < 0 {
		return 0, false
	}
	f := strings.Fields(log[k+len(key):])
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return v, err == nil
}

// logTail is the end of a solver's output, for error messages.
func logTail(log string) string {
	log = strings.TrimSpace(log)
	if len(log) > 400 {
		log = "..." + log[len(log)-400:]
	}
	if log == "" {
		return "(nothing)"
	}
	return log
}

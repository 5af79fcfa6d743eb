// Package lpsolve is the open-source MILP path shared by Symphony's exact
// engines (the partitioner's Appendix A.1 model and the cost planner's
// Scrooge model): write a model in CPLEX LP format (Writer), run an
// installed cbc or glpsol on it as a subprocess under a time limit (Solver),
// and read back the status, objective and variable values (Solution).
//
// It knows nothing about any particular problem: callers name their
// variables, write their rows, and check the values they read back.
package lpsolve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Kind is the solver program a Solver runs; each has its own command line
// and solution file format.
type Kind string

// The solvers this package drives.
const (
	// CBC is COIN-OR cbc: it takes a warm start and stops at its time limit
	// with its best solution, so it is preferred.
	CBC Kind = "cbc"
	// GLPK is GLPK's glpsol.
	GLPK Kind = "glpsol"
)

// ErrNoSolver is wrapped by Find's errors when the solver asked for (or,
// with no name, every known solver) is not installed, so that callers can
// fall back to a heuristic or skip instead of failing.
var ErrNoSolver = errors.New("no MILP solver")

// Solver is an installed solver executable.
type Solver struct {
	// Path is the executable's absolute path.
	Path string
	Kind Kind
}

// Find resolves name to an installed solver: "cbc", "glpsol", an absolute
// path to one of them, or "" for the first of cbc and glpsol on PATH. An
// error wraps ErrNoSolver when the solver is not installed.
func Find(name string) (Solver, error) {
	if name == "" {
		for _, k := range []Kind{CBC, GLPK} {
			if p, err := exec.LookPath(string(k)); err == nil {
				return Solver{Path: p, Kind: k}, nil
			}
		}
		return Solver{}, fmt.Errorf("%w installed (looked for cbc, glpsol; apt-get install coinor-cbc)", ErrNoSolver)
	}
	base := filepath.Base(name)
	var kind Kind
	switch {
	case strings.HasPrefix(base, string(CBC)):
		kind = CBC
	case strings.HasPrefix(base, string(GLPK)):
		kind = GLPK
	default:
		return Solver{}, fmt.Errorf("unknown solver %q (want cbc or glpsol)", name)
	}
	if name != base && !filepath.IsAbs(name) {
		return Solver{}, fmt.Errorf("solver path %q must be absolute", name)
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return Solver{}, fmt.Errorf("%w: %s not found (apt-get install coinor-cbc glpk-utils)", ErrNoSolver, name)
	}
	return Solver{Path: p, Kind: kind}, nil
}

// DefaultTimeLimit bounds a solve whose context has no deadline. Without
// one a solver could run for hours.
const DefaultTimeLimit = 10 * time.Second

// Options are the choices of one solve beyond the model.
type Options struct {
	// TempDir is where the per-solve working directory (model, solution,
	// warm start) is made and removed afterwards; "" means os.TempDir().
	TempDir string
	// WarmStart, when not nil, is a known solution in cbc's solution-file
	// format ("Feasible - objective value 0" then "index name value 0"
	// lines), passed with cbc's mipstart command. glpsol takes none.
	WarmStart []byte
}

// Result is what one solver run produced.
type Result struct {
	Solver   Solver
	Solution *Solution
	// Limit is the time limit the solver itself was given: the context's
	// remaining time less what start-up and shut-down need (see reserve).
	Limit time.Duration
	// Log is the solver's standard output and error.
	Log string
	// WarmStartTaken reports that cbc said it used Options.WarmStart.
	WarmStartTaken bool
}

// reserve is the time kept back from the solver's own limit for writing
// the model, the solver's start-up and shut-down, and reading its answer,
// so that it stops by itself, with its best solution, before the context's
// deadline kills it. cbc on the partitioner's 800 models × 20 parts needed
// up to 0.6 s beyond its limit on a busy machine; killed, it leaves no
// solution at all.
func reserve(remaining time.Duration) time.Duration {
	return 200*time.Millisecond + remaining/12
}

// Solve writes the model with write (CPLEX LP format, see Writer), runs the
// solver on it under ctx's deadline (DefaultTimeLimit when ctx has none),
// which is also passed as the solver's own time limit, and parses its
// solution. An error means no solution file could be read: the solver is
// missing time, failed, was stopped by ctx, or wrote something unreadable.
// A proven infeasibility or a stop without a solution is not an error but
// a Solution status.
func (s Solver) Solve(ctx context.Context, write func(io.Writer) error, o Options) (*Result, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeLimit)
		defer cancel()
	}
	res := &Result{Solver: s}
	kind := s.Kind
	dir, err := os.MkdirTemp(o.TempDir, "symphony-milp-")
	if err != nil {
		return res, fmt.Errorf("temporary directory: %w", err)
	}
	defer os.RemoveAll(dir)
	lpPath := filepath.Join(dir, "model.lp")
	f, err := os.Create(lpPath)
	if err != nil {
		return res, err
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return res, fmt.Errorf("writing the model: %w", err)
	}

	deadline, _ := ctx.Deadline()
	remaining := time.Until(deadline)
	res.Limit = remaining - reserve(remaining)
	if res.Limit < 50*time.Millisecond {
		return res, fmt.Errorf("no time left to run %s", kind)
	}
	solPath := filepath.Join(dir, "solution.txt")
	var args []string
	switch kind {
	case CBC:
		args = []string{lpPath}
		if o.WarmStart != nil {
			startPath := filepath.Join(dir, "start.txt")
			if err := os.WriteFile(startPath, o.WarmStart, 0o600); err != nil {
				return res, err
			}
			args = append(args, "mipstart", startPath)
		}
		// Wall-clock, not CPU, time: the machine may be busy.
		secs := strconv.FormatFloat(res.Limit.Seconds(), 'f', 2, 64)
		args = append(args, "timeMode", "elapsed", "seconds", secs, "printingOptions", "normal", "solve", "solution", solPath)
	case GLPK:
		// glpsol's limit is whole seconds and leaves out its start (the LP
		// relaxation), which overran it by a second on 800 models × 20
		// parts: give it a second less, rounded down, at least 1.
		secs := max(1, int((res.Limit-time.Second)/time.Second))
		res.Limit = time.Duration(secs) * time.Second
		args = []string{"--lp", lpPath, "--tmlim", strconv.Itoa(secs), "--wglp", filepath.Join(dir, "model.glp"), "-w", solPath}
	default:
		return res, fmt.Errorf("unknown solver kind %q", kind)
	}
	cmd := exec.CommandContext(ctx, s.Path, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.WaitDelay = 100 * time.Millisecond
	runErr := cmd.Run()
	res.Log = out.String()
	if ctx.Err() != nil {
		return res, fmt.Errorf("%s was stopped before it finished (its own time limit was %v): %w", kind, res.Limit.Round(time.Millisecond), ctx.Err())
	}
	data, readErr := os.ReadFile(solPath)
	if runErr != nil || readErr != nil {
		err := runErr
		if err == nil {
			err = readErr
		}
		return res, fmt.Errorf("%s failed: %v; its output ends: %s", kind, err, LogTail(res.Log))
	}
	switch kind {
	case CBC:
		res.Solution, err = ParseCBC(data)
		res.WarmStartTaken = o.WarmStart != nil && strings.Contains(res.Log, "MIPStart provided solution")
	case GLPK:
		var model []byte
		model, err = os.ReadFile(filepath.Join(dir, "model.glp"))
		if err == nil {
			res.Solution, err = ParseGLPK(data, model)
		}
	}
	if err != nil {
		return res, fmt.Errorf("%s's solution file: %w", kind, err)
	}
	return res, nil
}

// StopNote explains a stop without a proof of optimality, for reports: the
// time limit and the gap the solver's log shows.
func (r *Result) StopNote() string {
	switch r.Solver.Kind {
	case CBC:
		summary := ""
		if r.Solution != nil {
			summary = r.Solution.Summary
		}
		return fmt.Sprintf("cbc stopped at its %v time limit (%s); %s", r.Limit.Round(10*time.Millisecond), summary, cbcGap(r.Log))
	case GLPK:
		return fmt.Sprintf("glpsol stopped at its %v time limit; %s", r.Limit, glpkGap(r.Log))
	}
	return fmt.Sprintf("%s stopped at its %v time limit", r.Solver.Kind, r.Limit)
}

// cbcGap reads the optimality gap from cbc's log ("Objective value:" and
// "Lower bound:" lines of its result summary).
func cbcGap(log string) string {
	obj, ok1 := logNumber(log, "Objective value:")
	lb, ok2 := logNumber(log, "Lower bound:")
	if !ok1 || !ok2 {
		return "best solution's gap unknown"
	}
	return fmt.Sprintf("best objective %.6g, lower bound %.6g", obj, lb)
}

// glpkGap returns glpsol's last branch-and-bound progress line ("+ ITER:
// mip = BEST >= BOUND GAP% (ACTIVE; DONE)"), which holds the gap.
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

// LogTail is the end of a solver's output, for error messages.
func LogTail(log string) string {
	log = strings.TrimSpace(log)
	if len(log) > 400 {
		log = "..." + log[len(log)-400:]
	}
	if log == "" {
		return "(nothing)"
	}
	return log
}

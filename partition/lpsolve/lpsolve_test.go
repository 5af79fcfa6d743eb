package lpsolve

import (
	"context"
	"errors"
	"io"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// needSolver returns the named solver, skipping the test when it is not
// installed, unless the environment requires solvers (CI does: .ci/run
// installs them and sets SYMPHONY_REQUIRE_SOLVER).
func needSolver(t *testing.T, name string) Solver {
	t.Helper()
	s, err := Find(name)
	if err != nil {
		if os.Getenv("SYMPHONY_REQUIRE_SOLVER") != "" || os.Getenv("CI") != "" {
			t.Fatalf("%s is required here but not installed: %v", name, err)
		}
		t.Skipf("%s not installed", name)
	}
	return s
}

// knapsack writes: maximise 5a + 4b + 3c (as minimise its negation)
// subject to 2a + 3b + c <= 5, 4a + b + 2c <= 11, 3a + 4b + 2c <= 8, a, b,
// c binary, plus an empty row. The optimum is a = b = 1, c = 0: -9 (all
// three break the first row; a and c give only 8).
func knapsack(w io.Writer) error {
	lp := NewWriter(w)
	lp.ZeroVar = "a"
	lp.Text("\\ a small knapsack\nMinimize\n")
	lp.Row("obj")
	lp.Term(-5, "a")
	lp.Term(-4, "b")
	lp.Term(-3, "c")
	lp.EndObjective()
	lp.Text("Subject To\n")
	for i, row := range [][4]float64{{2, 3, 1, 5}, {4, 1, 2, 11}, {3, 4, 2, 8}} {
		lp.Row("cap" + string(rune('0'+i)))
		lp.Term(row[0], "a")
		lp.Term(row[1], "b")
		lp.Term(row[2], "c")
		lp.End("<=", row[3])
	}
	lp.Row("empty")
	lp.End(">=", 0)
	lp.Text("Binaries\n")
	for _, v := range []string{"a", "b", "c"} {
		lp.Name(v)
	}
	lp.EndNames()
	lp.Text("End\n")
	return lp.Flush()
}

func TestWriter(t *testing.T) {
	var b strings.Builder
	if err := knapsack(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		" obj: - 5 a - 4 b - 3 c\n",
		" cap0: + 2 a + 3 b + c <= 5\n",
		" empty: 0 a >= 0\n",
		"Binaries\n a b c\nEnd\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("model lacks %q:\n%s", want, b.String())
		}
	}
	// Long rows and name lists break every eight entries.
	b.Reset()
	w := NewWriter(&b)
	w.Row("long")
	for i := 0; i < 9; i++ {
		w.Term(0.5, "v")
	}
	w.End("=", 1e-7)
	for i := 0; i < 9; i++ {
		w.Name("n")
	}
	w.EndNames()
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := " long: + 0.5 v + 0.5 v + 0.5 v + 0.5 v + 0.5 v + 0.5 v + 0.5 v + 0.5 v\n    + 0.5 v = 1e-07\n n n n n n n n n\n n\n"
	if got := b.String(); got != want {
		t.Errorf("got %q", got)
	}
}

func TestSolve(t *testing.T) {
	for _, name := range []string{"cbc", "glpsol"} {
		t.Run(name, func(t *testing.T) {
			s := needSolver(t, name)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			opts := Options{TempDir: t.TempDir()}
			if s.Kind == CBC {
				opts.WarmStart = []byte("Feasible - objective value 0\n0 a 1 0\n1 b 0 0\n2 c 1 0\n")
			}
			res, err := s.Solve(ctx, knapsack, opts)
			if err != nil {
				t.Fatal(err)
			}
			sol := res.Solution
			if sol.Status != Optimal || math.Abs(sol.Objective+9) > 1e-6 {
				t.Fatalf("status %v objective %v (%s)", sol.Status, sol.Objective, sol.Summary)
			}
			if sol.Value("a") != 1 || sol.Value("b") != 1 || sol.Value("c") != 0 {
				t.Fatalf("values %v", sol.Values)
			}
			if s.Kind == CBC && !res.WarmStartTaken {
				t.Errorf("cbc did not take the warm start: %s", LogTail(res.Log))
			}
			if res.Limit <= 0 || !strings.Contains(res.StopNote(), "time limit") {
				t.Errorf("limit %v, stop note %q", res.Limit, res.StopNote())
			}
			entries, _ := os.ReadDir(opts.TempDir)
			if len(entries) != 0 {
				t.Errorf("working directory left behind: %v", entries)
			}
		})
	}
}

func TestSolveInfeasible(t *testing.T) {
	s := needSolver(t, "cbc")
	res, err := s.Solve(context.Background(), func(w io.Writer) error {
		_, err := io.WriteString(w, "Minimize\n obj: x\nSubject To\n c1: x >= 2\n c2: x <= 1\nBinaries\n x\nEnd\n")
		return err
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Solution.Status != Infeasible {
		t.Fatalf("status %v (%s)", res.Solution.Status, res.Solution.Summary)
	}
}

func TestSolveErrors(t *testing.T) {
	s := needSolver(t, "cbc")
	// No time left: the solver is not even started.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := s.Solve(ctx, knapsack, Options{}); err == nil || !strings.Contains(err.Error(), "no time left") {
		t.Fatalf("got %v, want no time left", err)
	}
	// A model the solver cannot read.
	_, err := s.Solve(context.Background(), func(w io.Writer) error {
		_, err := io.WriteString(w, "this is not an LP file\n")
		return err
	}, Options{})
	if err == nil {
		t.Fatal("garbage model accepted")
	}
	// The model writer's error is returned as it is.
	boom := errors.New("boom")
	if _, err := s.Solve(context.Background(), func(io.Writer) error { return boom }, Options{}); !errors.Is(err, boom) {
		t.Fatalf("got %v, want the writer's error", err)
	}
}

func TestFind(t *testing.T) {
	if _, err := Find("gurobi"); err == nil || errors.Is(err, ErrNoSolver) {
		t.Fatalf("unknown solver: %v", err)
	}
	if _, err := Find("bin/cbc"); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Fatalf("relative path: %v", err)
	}
	if _, err := Find("/nonexistent/cbc"); !errors.Is(err, ErrNoSolver) || !strings.Contains(err.Error(), "/nonexistent/cbc not found") {
		t.Fatalf("missing solver: %v", err)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := Find(""); !errors.Is(err, ErrNoSolver) || !strings.Contains(err.Error(), "looked for cbc, glpsol") {
		t.Fatalf("no solver on PATH: %v", err)
	}
	if _, err := exec.LookPath("cbc"); err == nil {
		t.Fatal("PATH not replaced")
	}
}

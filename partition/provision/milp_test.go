package provision

import (
	"context"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/partition/lpsolve"
)

// needSolver returns the named solver's name, skipping the test when it is
// not installed, unless the environment requires solvers (CI sets
// SYMPHONY_REQUIRE_SOLVER).
func needSolver(t *testing.T, name string) string {
	t.Helper()
	if _, err := lpsolve.Find(name); err != nil {
		if os.Getenv("SYMPHONY_REQUIRE_SOLVER") != "" || os.Getenv("CI") != "" {
			t.Fatalf("%s is required here but not installed: %v", name, err)
		}
		t.Skipf("%s not installed", name)
	}
	return name
}

// TestScroogeExample: Scrooge §3.3's allocation example (our
// testdata/apps/detect-classify.yaml): A (Table 3) feeds B (Table 4) four
// inputs per frame at 80 frames/s within 300 ms, on X ($2/h) and Y ($3/h).
// Scrooge's optimum is "$7.55 an hour": A on one full X <4,2> and a partial
// Y <2,1> for the residual 20 fps, B on Y <4,2>, one full and one partial.
// Its MILP, the planner and the brute force all find that allocation (at
// b·e/d throughputs: 2 + 3·19.85/80 + 3·320/200 = 7.544).
func TestScroogeExample(t *testing.T) {
	af, err := ParseAppFile("../../testdata/apps/detect-classify.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const want = 2 + 3*(80-4*2/0.133)/80 + 3*320.0/200
	check := func(p *Provision) {
		t.Helper()
		checkProperties(t, af.App, p)
		if math.Abs(p.CostPerHour-want) > 1e-9 || math.Abs(p.CostPerHour-7.55) > 0.01 {
			t.Errorf("%s: $%.4f/h, want %.4f (Scrooge: $7.55)", p.Planner, p.CostPerHour, want)
		}
		det, cls := p.Modules[0].Configs, p.Modules[1].Configs
		if len(det) != 2 || det[0].Hardware != "X" || det[0].Batch != 4 || det[0].Machines != 1 || det[1].Hardware != "Y" || det[1].Batch != 2 ||
			len(cls) != 1 || cls[0].Hardware != "Y" || cls[0].Batch != 4 || cls[0].Machines != 1.6 {
			t.Errorf("%s: detect %+v classify %+v", p.Planner, det, cls)
		}
	}
	p, err := Solve(af.App, af.Options)
	if err != nil {
		t.Fatal(err)
	}
	check(p)
	b, err := BruteForce(af.App, af.Options, 0)
	if err != nil {
		t.Fatal(err)
	}
	check(b)
	needSolver(t, "cbc")
	for _, solver := range []string{"cbc", "glpsol"} {
		needSolver(t, solver)
		m, res, err := SolveMILP(context.Background(), af.App, solver)
		if err != nil {
			t.Fatal(err)
		}
		if res.Solver != solver || !res.Optimal || res.Objective > m.CostPerHour+1e-6 {
			t.Errorf("%s: %+v", solver, res)
		}
		check(m)
	}
}

// TestMILPRandom: on random instances the refined MILP provision is valid, its
// objective is at most its refined cost, and it is never below the brute
// force's optimum (its provisions lie in the brute force's space).
func TestMILPRandom(t *testing.T) {
	needSolver(t, "cbc")
	rc := DefaultRandom()
	n := 30
	if testing.Short() {
		n = 8
	}
	for i := 0; i < n; i++ {
		app := rc.Random(5, i)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		p, res, err := SolveMILP(ctx, app, "cbc")
		cancel()
		if err != nil {
			t.Fatalf("instance %d: %v (%+v)", i, err, res)
		}
		checkProperties(t, app, p)
		if res.Objective > p.CostPerHour+1e-6*math.Max(1, p.CostPerHour) {
			t.Errorf("instance %d: MILP objective %v above its refined provision's %v", i, res.Objective, p.CostPerHour)
		}
		b, err := BruteForce(app, Default(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if p.CostPerHour < b.CostPerHour*(1-1e-9) {
			t.Errorf("instance %d: MILP provision %v below the optimum %v", i, p.CostPerHour, b.CostPerHour)
		}
	}
}

func TestMILPMissingSolver(t *testing.T) {
	app := DefaultRandom().Random(1, 1)
	if _, _, err := SolveMILP(context.Background(), app, "/nonexistent/cbc"); !errors.Is(err, lpsolve.ErrNoSolver) {
		t.Fatalf("got %v, want ErrNoSolver", err)
	}
	t.Setenv("PATH", t.TempDir())
	_, _, err := SolveMILP(context.Background(), app, "")
	if !errors.Is(err, lpsolve.ErrNoSolver) || !strings.Contains(err.Error(), "looked for cbc, glpsol") {
		t.Fatalf("got %v, want a clear missing-solver error", err)
	}
}

func TestWriteScroogeLP(t *testing.T) {
	af, err := ParseAppFile("../../testdata/apps/detect-classify.yaml")
	if err != nil {
		t.Fatal(err)
	}
	in, err := compile(af.App)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := writeScroogeLP(&b, in); err != nil {
		t.Fatal(err)
	}
	lp := b.String()
	for _, want := range []string{
		"rate_0: + f_0_0 + f_0_1 + f_0_2 + f_0_3 = 80\n",
		"rate_1: + f_1_0 + f_1_1 + f_1_2 + f_1_3 = 320\n",
		"link_0_0: + f_0_0 - 80 x_0_0 <= 0\n",
		"path_0_1_0: + s_1 - s_0 - ",
		"sink_1_0: + lmax - s_1 - ",
		" 0 <= lmax <= 0.3\n",
		"Binaries\n x_0_0 x_0_1 x_0_2 x_0_3 x_1_0 x_1_1 x_1_2 x_1_3\n",
	} {
		if !strings.Contains(lp, want) {
			t.Errorf("LP lacks %q:\n%s", want, lp)
		}
	}
}

package provision

import (
	"math"
	"testing"
	"time"
)

// checkProperties asserts the properties every provision must have, computed
// here from the provision and the application (and by Verify, independently of
// the planner's own arithmetic):
//
//   - every configuration meets its module's budget;
//   - every path meets the SLO (its budgets, and so its worst cases);
//   - a module's assigned rates sum to its rate plus its dummies;
//   - at most the last configuration of each module is fractional.
func checkProperties(t *testing.T, app *App, p *Provision) {
	t.Helper()
	if err := Verify(app, p); err != nil {
		t.Fatalf("%s: %v", p.Planner, err)
	}
	byName := map[string]ModuleProvision{}
	for _, m := range p.Modules {
		byName[m.Name] = m
		sum := 0.0
		for i, c := range m.Configs {
			if c.WorstCase > m.Budget {
				t.Fatalf("%s: module %s configuration %d: worst case %v over the budget %v", p.Planner, m.Name, i, c.WorstCase, m.Budget)
			}
			if i < len(m.Configs)-1 && c.Machines != math.Round(c.Machines) {
				t.Fatalf("%s: module %s configuration %d of %d has %v machines", p.Planner, m.Name, i, len(m.Configs), c.Machines)
			}
			sum += c.Rate
		}
		if math.Abs(sum-(m.Rate+m.DummyRate)) > 1e-6*math.Max(1, m.Rate) {
			t.Fatalf("%s: module %s: configurations take %v, rate %v + dummies %v", p.Planner, m.Name, sum, m.Rate, m.DummyRate)
		}
	}
	paths, _, err := app.Paths(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range paths {
		var budget, worst time.Duration
		for _, name := range path {
			budget += byName[name].Budget
			worst += byName[name].WorstCase
		}
		slack := time.Duration(len(path)) // a nanosecond of rounding per module
		if budget > app.SLO+slack || worst > app.SLO+slack {
			t.Fatalf("%s: path %v: budgets %v, worst cases %v, SLO %v", p.Planner, path, budget, worst, app.SLO)
		}
	}
}

// TestEveryPlanIsValid is the property test over random instances: the
// planner, its heuristics alone, every baseline and the brute force.
func TestEveryPlanIsValid(t *testing.T) {
	rc := DefaultRandom()
	n := 200
	if testing.Short() {
		n = 40
	}
	for i := 0; i < n; i++ {
		app := rc.Random(11, i)
		p, err := Solve(app, Default())
		if err != nil {
			t.Fatalf("instance %d: %v", i, err)
		}
		checkProperties(t, app, p)
		if q, err := Solve(app, HeuristicsOnly()); err == nil {
			checkProperties(t, app, q)
		}
		for _, b := range Baselines() {
			if q, err := SolveBaseline(app, b); err == nil {
				checkProperties(t, app, q)
			}
		}
		q, err := BruteForce(app, Default(), 0)
		if err != nil {
			t.Fatalf("instance %d: brute force: %v", i, err)
		}
		checkProperties(t, app, q)
	}
}

// TestRandomOptimality is the acceptance comparison of Harpagon §IV-B on
// 500 random instances: the planner's cost equals the brute-force optimum
// on at least 97% of them, and it is never above any baseline's. The
// planning-time target is BenchmarkSolveRandom's.
func TestRandomOptimality(t *testing.T) {
	rc := DefaultRandom()
	n := 500
	if testing.Short() {
		n = 100
	}
	optimal := 0
	worst := 0.0
	for i := 0; i < n; i++ {
		app := rc.Random(1, i)
		p, err := Solve(app, Default())
		if err != nil {
			t.Fatalf("instance %d: %v", i, err)
		}
		b, err := BruteForce(app, Default(), 0)
		if err != nil {
			t.Fatalf("instance %d: brute force: %v", i, err)
		}
		switch r := p.CostPerHour / b.CostPerHour; {
		case r < 1-1e-9:
			t.Fatalf("instance %d: planner %v below the optimum %v", i, p.CostPerHour, b.CostPerHour)
		case r <= 1+1e-9:
			optimal++
		default:
			worst = math.Max(worst, r-1)
		}
		for _, bl := range Baselines() {
			q, err := SolveBaseline(app, bl)
			if err != nil {
				continue // the baseline has no provision here
			}
			if q.CostPerHour < p.CostPerHour*(1-1e-9) {
				t.Errorf("instance %d: %v costs %v, below ours %v", i, bl, q.CostPerHour, p.CostPerHour)
			}
		}
	}
	share := float64(optimal) / float64(n)
	t.Logf("optimal on %d of %d instances (%.1f%%); worst extra cost %.2f%%", optimal, n, 100*share, 100*worst)
	if share < 0.97 {
		t.Errorf("optimal on %.1f%% of instances, want at least 97%%", 100*share)
	}
}

// BenchmarkSolveRandom measures the planning time on the experiment's
// random instances, cycling through 500 of them; it reports the median
// and 99th percentile per instance besides the mean (ns/op). The target
// is a median of at most 5 ms (Harpagon §IV-B: 5 ms).
func BenchmarkSolveRandom(b *testing.B) {
	rc := DefaultRandom()
	apps := make([]*App, 500)
	for i := range apps {
		apps[i] = rc.Random(1, i)
	}
	times := make([]float64, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := Solve(apps[i%len(apps)], Default()); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(start).Seconds())
	}
	b.StopTimer()
	b.ReportMetric(quantile(times, 0.5)*1e3, "median-ms")
	b.ReportMetric(quantile(times, 0.99)*1e3, "p99-ms")
}

// BenchmarkBruteForceRandom is the brute force on the same instances.
func BenchmarkBruteForceRandom(b *testing.B) {
	rc := DefaultRandom()
	apps := make([]*App, 500)
	for i := range apps {
		apps[i] = rc.Random(1, i)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := BruteForce(apps[i%len(apps)], Default(), 0); err != nil {
			b.Fatal(err)
		}
	}
}

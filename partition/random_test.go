package partition

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestRandomSearchFeasible(t *testing.T) {
	p := RandomInstance(3, 60, 4, 100)
	p.GPUMemory = 12 << 30
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	r, err := RandomSearch{Seed: 1}.Solve(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	checkFeasible(t, p, r)
	if r.Engine != "random" || len(r.Notes) == 0 || !strings.Contains(r.Notes[len(r.Notes)-1], "draws") {
		t.Fatalf("engine %q notes %q", r.Engine, r.Notes)
	}
	// The heuristic, on the same problem, must beat chance by far.
	h := solveOK(t, Heuristic{}, p)
	if h.Objective >= r.Objective {
		t.Fatalf("heuristic objective %.1f, random %.1f", h.Objective, r.Objective)
	}
}

func TestRandomSearchRespectsBudget(t *testing.T) {
	p := RandomInstance(5, 40, 4, 100)
	first := solveOK(t, Heuristic{}, p)
	q := ShiftRates(p, first.Assignment, 5, 0.3)
	q.Current[0], q.Current[1] = Unassigned, Unassigned
	fixed := q.Models[0].StaticMemory + q.Models[1].StaticMemory
	for _, budget := range []int64{fixed, fixed + 600<<20} {
		q.MaxDisruption = budget
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		r, err := RandomSearch{Seed: 2}.Solve(ctx, q)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		checkFeasible(t, q, r)
		if r.Disruption > budget || r.Disruption < fixed {
			t.Fatalf("budget %d: disruption %d", budget, r.Disruption)
		}
	}
	q.MaxDisruption = fixed - 1
	if _, err := (RandomSearch{}).Solve(context.Background(), q); !errors.Is(err, ErrInfeasible) || !strings.Contains(err.Error(), "needed to load the new models") {
		t.Fatalf("budget below the new models' load: %v", err)
	}
}

func TestRandomSearchInfeasible(t *testing.T) {
	p := &Problem{
		Models: []Model{
			{Name: "a", Rate: 60, StaticMemory: 10},
			{Name: "b", Rate: 60, StaticMemory: 10},
			{Name: "c", Rate: 60, StaticMemory: 10},
		},
		Parts: 2, MaxRatePerPart: 100, MaxDisruption: -1,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err := RandomSearch{}.Solve(ctx, p)
	if !errors.Is(err, ErrInfeasible) || !strings.Contains(err.Error(), "exceeds max_rate_per_part") {
		t.Fatalf("got %v, want ErrInfeasible naming the rate limit", err)
	}
	// A cancelled context without a deadline gets the default limit, but
	// is already done, so no draw is made.
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	if _, err := (RandomSearch{}).Solve(cctx, p); !errors.Is(err, ErrInfeasible) || !strings.Contains(err.Error(), "no draw") {
		t.Fatalf("cancelled: %v", err)
	}
}

// BenchmarkRandomSearch800x20 measures the paper's baseline on Appendix
// A.2's configuration at the paper's 10 s limit, for seeds 1..3 (so one op
// takes 30 s; run it with -benchtime 1x). It reports the worst imbalances,
// to compare with BenchmarkHeuristic800x20's.
func BenchmarkRandomSearch800x20(b *testing.B) {
	var rate, mem float64
	for range b.N {
		for seed := uint64(1); seed <= 3; seed++ {
			p := RandomInstance(seed, 800, 20, 100)
			ctx, cancel := context.WithTimeout(context.Background(), DefaultRandomTime)
			r, err := RandomSearch{Seed: seed}.Solve(ctx, p)
			cancel()
			if err != nil {
				b.Fatal(err)
			}
			rate, mem = max(rate, r.Imbalance.Rate), max(mem, r.Imbalance.Memory)
			b.Logf("seed %d: rate imbalance %.4f, memory imbalance %.4f, %s", seed, r.Imbalance.Rate, r.Imbalance.Memory, r.Notes[len(r.Notes)-1])
		}
	}
	b.ReportMetric(rate, "max-rate-imb")
	b.ReportMetric(mem, "max-mem-imb")
}

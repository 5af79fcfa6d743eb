package provision

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// naiveCheapest enumerates, without any pruning, every provision of the provision
// space of a small module (full machines 0..cap per configuration, then a
// partial machine at any configuration, or, with dummies, machines that
// exceed the rate by less than the throughput of one configuration they
// use) and returns the least cost within lam, or +Inf. It shares only evalTiers with the planner, to check exact()'s
// search and bounds.
func naiveCheapest(cs []cand, disp Dispatch, T, lam float64, dummy bool, maxConfigs int) float64 {
	K := len(cs)
	caps := make([]int, K)
	for j := range cs {
		caps[j] = int(math.Ceil(T/cs[j].tput)) + 1
	}
	best := math.Inf(1)
	n := make([]int, K)
	try := func(ts []tier) {
		ts = normalize(ts)
		if len(ts) == 0 || maxConfigs > 0 && distinct(ts) > maxConfigs {
			return
		}
		lat, cost, _ := evalTiers(cs, disp, ts)
		if lat <= lam+eps && cost < best {
			best = cost
		}
	}
	for {
		var ts []tier
		sum, biggest := 0.0, 0.0
		for j, k := range n {
			if k > 0 {
				ts = append(ts, tier{c: j, full: k})
				sum += float64(k) * cs[j].tput
				biggest = math.Max(biggest, cs[j].tput)
			}
		}
		switch r := T - sum; {
		case math.Abs(r) <= 1e-9:
			try(ts)
		case r > 0:
			for P := range cs {
				if cs[P].tput > r+1e-9 {
					try(append(append([]tier(nil), ts...), tier{c: P, part: r}))
				}
			}
		case dummy && -r < biggest-1e-9:
			try(ts)
		}
		j := 0
		for j < K {
			n[j]++
			if n[j] <= caps[j] {
				break
			}
			n[j] = 0
			j++
		}
		if j == K {
			return best
		}
	}
}

// randomSmallModule is 2-4 configurations on 1-2 hardware kinds, its rate
// within four machines.
func randomSmallModule(rng *rand.Rand) ([]cand, float64) {
	var cs []cand
	k := 2 + rng.IntN(3)
	for i := 0; i < k; i++ {
		b := []int{1, 2, 4, 8, 16}[rng.IntN(5)]
		e := 1 + rng.IntN(2)
		d := (0.02 + 0.02*float64(b)) * (0.5 + rng.Float64())
		c := cand{hw: rng.IntN(2), batch: b, conc: e, d: d, b: float64(b), e: float64(e), price: 1 + rng.Float64()*2}
		c.latency = seconds(d)
		c.tput = c.b * c.e / c.d
		c.costRate, c.ratio = c.price/c.tput, c.tput/c.price
		cs = append(cs, c)
	}
	sortCands(cs)
	minT := math.Inf(1)
	for _, c := range cs {
		minT = math.Min(minT, c.tput)
	}
	return cs, minT * (0.3 + 3.7*rng.Float64())
}

func sortCands(cs []cand) {
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && candLess(&cs[j], &cs[j-1]); j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}

// TestExactMatchesNaive: the branch-and-bound that refines module provisions
// and builds the brute force's frontiers finds the naive enumeration's
// optimum, under every dispatch model, with and without dummies and
// configuration limits.
func TestExactMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	checked := 0
	for i := 0; i < 3000; i++ {
		cs, T := randomSmallModule(rng)
		disp := []Dispatch{BatchAware, MachineThroughput, RoundRobin}[rng.IntN(3)]
		dummy := rng.IntN(2) == 0
		maxConfigs := rng.IntN(3)
		lam := 0.05 + rng.Float64()*1.5
		want := naiveCheapest(cs, disp, T, lam, dummy, maxConfigs)
		s := &modSched{cs: cs, disp: disp, maxConfigs: maxConfigs, dummy: dummy, search: 64}
		visited := 0
		got, done := s.exact(T, lam, s.heuristic(T, lam), 1e8, &visited)
		if !done {
			t.Fatalf("case %d: search did not finish", i)
		}
		switch {
		case math.IsInf(want, 1) && got.ok():
			t.Fatalf("case %d (%v, dummy %v, max %d, T %.3f, λ %.3f): exact found %v, naive nothing", i, disp, dummy, maxConfigs, T, lam, got.tiers)
		case !math.IsInf(want, 1) && (!got.ok() || math.Abs(got.cost-want) > 1e-9*math.Max(1, want)):
			t.Fatalf("case %d (%v, dummy %v, max %d, T %.3f, λ %.3f): exact %+v, naive cost %v", i, disp, dummy, maxConfigs, T, lam, got, want)
		}
		if got.ok() {
			checked++
			if got.lat > lam+eps {
				t.Fatalf("case %d: exact's provision takes %v > λ %v", i, got.lat, lam)
			}
			// The heuristic never beats the exact search.
			if h := s.heuristic(T, lam); h.ok() && h.cost < got.cost-1e-9 {
				t.Fatalf("case %d: heuristic %v below exact %v", i, h.cost, got.cost)
			}
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d feasible cases of 3000", checked)
	}
}

// TestFrontier: a module's frontier is Pareto (latency up, cost down), and
// its every point is the exact optimum at its latency.
func TestFrontier(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 300; i++ {
		cs, T := randomSmallModule(rng)
		s := &modSched{cs: cs, disp: BatchAware, dummy: true, search: 64}
		f, err := s.frontier(T, 2, 1e8)
		if err != nil {
			t.Fatal(err)
		}
		for k, p := range f {
			if k > 0 && (p.lat <= f[k-1].lat || p.cost >= f[k-1].cost) {
				t.Fatalf("case %d: frontier not Pareto at %d: %+v after %+v", i, k, p, f[k-1])
			}
			if want := naiveCheapest(cs, BatchAware, T, p.lat, true, 0); math.Abs(want-p.cost) > 1e-9*math.Max(1, want) {
				t.Fatalf("case %d: frontier point %+v, naive optimum at its latency %v", i, p, want)
			}
		}
	}
}

func TestBruteForceTooLarge(t *testing.T) {
	app := DefaultRandom().Random(1, 0)
	if _, err := BruteForce(app, Default(), 3); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("3 nodes: got %v, want ErrTooLarge", err)
	}
	// An SLO below every module's fastest execution has no provision.
	app.SLO = time.Millisecond
	if _, err := BruteForce(app, Default(), 0); !errors.Is(err, ErrInfeasible) {
		t.Fatalf("1 ms SLO: got %v, want ErrInfeasible", err)
	}
}

// TestBruteForceCombineTooLarge: the combination of the modules' frontiers
// is exponential in the modules and used to have no node budget, so that
// the brute force (and `symphony provision --compare`) ran without end on a
// 24-module application.
func TestBruteForceCombineTooLarge(t *testing.T) {
	rc := DefaultRandom()
	rc.MinModules, rc.MaxModules = 24, 24
	app := rc.Random(3, 1)
	_, err := BruteForce(app, Default(), 100_000)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "combining") {
		t.Fatalf("got %v, want ErrTooLarge from combining the frontiers", err)
	}
}

package provision

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// dagApp is an application with the given modules (one trivial profile
// each) and edges, for tests that drive the splitter with synthetic
// latencies and costs.
func dagApp(slo time.Duration, names []string, edges [][2]string) *App {
	app := &App{SLO: slo, Hardware: []Hardware{{Name: "g", PricePerHour: 1}}}
	isChild := map[string]bool{}
	for _, e := range edges {
		app.Edges = append(app.Edges, Edge{From: e[0], To: e[1], Scale: 1})
		isChild[e[1]] = true
	}
	for _, n := range names {
		m := Module{Name: n, Profiles: []Profile{{Hardware: "g", Points: []Point{{Batch: 1, Concurrency: 1, Latency: time.Millisecond}}}}}
		if !isChild[n] {
			m.Ingress = 1
		}
		app.Modules = append(app.Modules, m)
	}
	return app
}

// front builds a frontier from (latency, cost) pairs, fastest first.
func front(pts ...[2]float64) frontier {
	var f frontier
	for _, p := range pts {
		f = append(f, frontPoint{lat: p[0], cost: p[1]})
	}
	return f
}

func stateCost(sp *splitter, st []int) float64 {
	c := 0.0
	for m, i := range st {
		c += sp.cost[m][i]
	}
	return c
}

// TestNodeMerging: Harpagon §III-D's example. M_x feeds M_y and M_z; the
// budget suffices for one update; LC is 20 for M_x, 10 for M_y and 15 for
// M_z. Algorithm 2 alone updates M_x (saving 4); with node merging M_y and
// M_z move together (LC 25 > 20, saving 5).
func TestNodeMerging(t *testing.T) {
	in, err := compile(dagApp(450*time.Millisecond, []string{"x", "y", "z"}, [][2]string{{"x", "y"}, {"x", "z"}}))
	if err != nil {
		t.Fatal(err)
	}
	fronts := []frontier{
		front([2]float64{0.1, 10}, [2]float64{0.3, 6}), // x: saves 4 over 0.2 s, LC 20
		front([2]float64{0.1, 10}, [2]float64{0.3, 8}), // y: LC 10
		front([2]float64{0.1, 10}, [2]float64{0.3, 7}), // z: LC 15
	}
	if us := units(in, true); len(us) != 2 || len(us[1]) != 2 {
		t.Fatalf("units %v: y and z share parent and children", us)
	}
	plain := pointSplitter(in, fronts, false)
	st, _ := plain.latencyCost()
	if st[0] != 1 || st[1] != 0 || st[2] != 0 || stateCost(plain, st) != 26 {
		t.Errorf("without merging: state %v cost %v, want x updated (26)", st, stateCost(plain, st))
	}
	merged := pointSplitter(in, fronts, true)
	st, _ = merged.latencyCost()
	if st[0] != 0 || st[1] != 1 || st[2] != 1 || stateCost(merged, st) != 25 {
		t.Errorf("with merging: state %v cost %v, want y and z updated (25)", st, stateCost(merged, st))
	}
}

// TestCostDirect: Harpagon §III-D's example. M_x → M_y; the last budget
// suffices for one update: M_x's spends 0.01 s at LC 20 (saves 0.2), M_y's
// 0.1 s at LC 10 (saves 1). Algorithm 2 takes M_x's; cost-direct over its
// last move takes M_y's.
func TestCostDirect(t *testing.T) {
	in, err := compile(dagApp(300*time.Millisecond, []string{"x", "y"}, [][2]string{{"x", "y"}}))
	if err != nil {
		t.Fatal(err)
	}
	sp := pointSplitter(in, []frontier{
		front([2]float64{0.1, 10}, [2]float64{0.11, 9.8}),
		front([2]float64{0.1, 10}, [2]float64{0.2, 9}),
	}, false)
	st, moves := sp.latencyCost()
	if st[0] != 1 || st[1] != 0 || len(moves) != 1 {
		t.Fatalf("Algorithm 2: state %v after %d moves, want M_x updated", st, len(moves))
	}
	cd := sp.costDirect(moves, 1)
	if cd[0] != 0 || cd[1] != 1 || math.Abs(stateCost(sp, cd)-19) > 1e-12 {
		t.Errorf("cost-direct: state %v cost %v, want M_y updated (19)", cd, stateCost(sp, cd))
	}
	// The exchange search finds the same trade from Algorithm 2's state.
	if ex := sp.exchange(st); ex[0] != 0 || ex[1] != 1 {
		t.Errorf("exchange: state %v, want M_y updated", ex)
	}
}

// TestSplitterFixes pins the deliberate fixes to the printed Algorithm 2.
func TestSplitterFixes(t *testing.T) {
	// Zero denominator: two hardware kinds with the same profile, the
	// faster-or-equal one cheaper. The fastest state ties on latency and
	// takes the dearer kind; switching is a free saving (ΔL = 0), which
	// must be taken, not divided by zero.
	app := &App{SLO: time.Second, Hardware: []Hardware{{Name: "dear", PricePerHour: 2}, {Name: "cheap", PricePerHour: 1}},
		Modules: []Module{{Name: "m", Ingress: 100, Profiles: []Profile{
			{Hardware: "dear", Points: []Point{{Batch: 4, Concurrency: 1, Latency: 100 * time.Millisecond}}},
			{Hardware: "cheap", Points: []Point{{Batch: 4, Concurrency: 1, Latency: 100 * time.Millisecond}}},
		}}}}
	in, err := compile(app)
	if err != nil {
		t.Fatal(err)
	}
	sp := configSplitter(in, in.cands, BatchAware, false)
	start := sp.fastest()
	if in.hw[in.cands[0][start[0]].hw].Name != "dear" {
		t.Fatalf("fastest state on %s, want the dearer kind on a latency tie", in.hw[in.cands[0][start[0]].hw].Name)
	}
	st, moves := sp.latencyCost()
	if len(moves) != 1 || in.hw[in.cands[0][st[0]].hw].Name != "cheap" {
		t.Errorf("state %v after %d moves, want the free switch to the cheap kind", st, len(moves))
	}

	// Sign and the candidate check (line 13), over random instances:
	// every move Algorithm 2 makes saves cost, and every state it passes
	// through fits the SLO.
	rc := DefaultRandom()
	for i := 0; i < 200; i++ {
		in, err := compile(rc.Random(21, i))
		if err != nil {
			t.Fatal(err)
		}
		for _, merge := range []bool{false, true} {
			sp := configSplitter(in, in.cands, BatchAware, merge)
			st, moves := sp.latencyCost()
			if st == nil {
				continue
			}
			replay := sp.fastest()
			prev := stateCost(sp, replay)
			for k, mv := range moves {
				sp.apply(replay, mv)
				c := stateCost(sp, replay)
				if c >= prev {
					t.Fatalf("instance %d: move %d raises the cost %v -> %v", i, k, prev, c)
				}
				if e := sp.e2e(replay); e > in.slo+eps {
					t.Fatalf("instance %d: move %d makes a path take %v > SLO %v", i, k, e, in.slo)
				}
				prev = c
			}
			for r := 1; r <= 3 && r <= len(moves); r++ {
				if cd := sp.costDirect(moves, r); sp.e2e(cd) > in.slo+eps {
					t.Fatalf("instance %d: cost-direct R=%d breaks the SLO", i, r)
				}
			}
		}
	}
}

func TestEvenAndQuantizedSplits(t *testing.T) {
	// a → b → c and a → d: a, b and c lie on a 3-module path and get a
	// third of the SLO each; d lies only on a → d and gets half.
	in, err := compile(dagApp(600*time.Millisecond, []string{"a", "b", "c", "d"}, [][2]string{{"a", "b"}, {"b", "c"}, {"a", "d"}}))
	if err != nil {
		t.Fatal(err)
	}
	b := evenBudgets(in)
	if math.Abs(b[0]-0.2) > 1e-12 || math.Abs(b[1]-0.2) > 1e-12 || math.Abs(b[2]-0.2) > 1e-12 || math.Abs(b[3]-0.3) > 1e-12 {
		t.Errorf("even budgets %v", b)
	}
	// Quantized: costs that fall with the budget; the cheapest
	// combination within the SLO at 0.1 s steps.
	cost := func(m int, L float64) (float64, bool) { return 1 / L, true }
	q, cut := quantized(in, 0.1, cost)
	if cut || q == nil {
		t.Fatalf("quantized: %v, cut %v", q, cut)
	}
	through := longestThrough(in, func(m int) float64 { return q[m] })
	for m, l := range through {
		if l > in.slo+1e-9 {
			t.Errorf("quantized budgets %v: path through %d takes %v", q, m, l)
		}
	}
	if q[3] < 0.3 { // d shares only a's path: it gets what a leaves
		t.Errorf("quantized budgets %v: d could have more", q)
	}
	for _, s := range []string{"latency-cost", "even", "throughput", "quantized", "quantized:10ms"} {
		sp, err := ParseSplit(s)
		if err != nil || sp.String() != s {
			t.Errorf("ParseSplit(%q) = %v, %v", s, sp, err)
		}
	}
	for _, s := range []string{"", "quantized:", "quantized:-1s", "fast"} {
		if _, err := ParseSplit(s); err == nil {
			t.Errorf("ParseSplit(%q) accepted", s)
		}
	}
}

// TestExchangeBounded: a 2-move pass weighs n²·K² moves at O(n) each; at
// 256 modules it ran for hours (Solve on a 256-module application never
// returned). The search stops at maxExchangeWork with the state it has.
func TestExchangeBounded(t *testing.T) {
	const n, k = 256, 16
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("m%d", i)
	}
	in, err := compile(dagApp(time.Second, names, nil))
	if err != nil {
		t.Fatal(err)
	}
	// Every module at its middle option, the SLO exactly its latency:
	// no move fits, and the search weighs every pair before it knows.
	fronts := make([]frontier, n)
	for m := range fronts {
		for i := 0; i < k; i++ {
			fronts[m] = append(fronts[m], frontPoint{lat: 1 + float64(i-k/2)*0.01, cost: float64(k - i)})
		}
	}
	sp := pointSplitter(in, fronts, false)
	st := make([]int, n)
	for m := range st {
		st[m] = k / 2
	}
	start := time.Now()
	got := sp.exchange(st)
	if !sp.exchangeCut {
		t.Error("the search did not stop at its work limit")
	}
	for m := range got {
		if got[m] != st[m] {
			t.Fatalf("module %d moved to %d: no move fits", m, got[m])
		}
	}
	t.Logf("exchange over %d modules: %v", n, time.Since(start))
}

package partition

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/partition/lpsolve"
)

const milpGiB = 1 << 30

// needSolver returns the path of an installed solver, skipping the test
// when it is missing, unless the environment requires solvers (CI does:
// .ci/run installs them and sets SYMPHONY_REQUIRE_SOLVER).
func needSolver(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("SYMPHONY_REQUIRE_SOLVER") != "" || os.Getenv("CI") != "" {
			t.Fatalf("%s is required here but not installed: %v", name, err)
		}
		t.Skipf("%s not installed", name)
	}
	return path
}

// milpTestGreedy is a stand-in fallback engine for these tests: rate-LPT,
// blind to every constraint (NewResult rejects what breaks one).
type milpTestGreedy struct{ calls int }

func (g *milpTestGreedy) Name() string { return "greedy" }

func (g *milpTestGreedy) Solve(ctx context.Context, p *Problem) (*Result, error) {
	g.calls++
	order := make([]int, len(p.Models))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return p.Models[order[a]].Rate > p.Models[order[b]].Rate })
	load := make([]float64, p.Parts)
	a := make([]int, len(p.Models))
	for _, i := range order {
		best := 0
		for j := range load {
			if load[j] < load[best] {
				best = j
			}
		}
		a[i] = best
		load[best] += p.Models[i].Rate
	}
	return p.NewResult(g.Name(), a, 0)
}

// milpTestFailing is a fallback that never finds anything.
type milpTestFailing struct{}

func (milpTestFailing) Name() string { return "failing" }
func (milpTestFailing) Solve(context.Context, *Problem) (*Result, error) {
	return nil, fmt.Errorf("%w: failing engine", ErrInfeasible)
}

// bruteForce returns the best feasible objective over all l^m assignments,
// or ok=false when none is feasible.
func bruteForce(t *testing.T, p *Problem) (best float64, ok bool) {
	t.Helper()
	a := make([]int, len(p.Models))
	best = math.Inf(1)
	for {
		e, err := p.Evaluate(a)
		if err != nil {
			t.Fatal(err)
		}
		if e.Feasible() && e.Objective < best {
			best, ok = e.Objective, true
		}
		k := 0
		for k < len(a) {
			a[k]++
			if a[k] < p.Parts {
				break
			}
			a[k] = 0
			k++
		}
		if k == len(a) {
			return best, ok
		}
	}
}

func milpModels(rates []float64, static, dynamic []int64) []Model {
	ms := make([]Model, len(rates))
	for i := range rates {
		ms[i] = Model{Name: fmt.Sprintf("m%d", i), Rate: rates[i], StaticMemory: static[i]}
		if dynamic != nil {
			ms[i].DynamicMemory = dynamic[i]
		}
	}
	return ms
}

func solveWithin(t *testing.T, e Engine, p *Problem, limit time.Duration) (*Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	return e.Solve(ctx, p)
}

// checkResult checks what every returned result must satisfy.
func checkResult(t *testing.T, p *Problem, r *Result) {
	t.Helper()
	e, err := p.Evaluate(r.Assignment)
	if err != nil {
		t.Fatal(err)
	}
	if !e.Feasible() {
		t.Fatalf("infeasible result: %v", e.Violations)
	}
	if math.Abs(e.Objective-r.Objective) > 1e-9*math.Max(1, e.Objective) || e.Disruption != r.Disruption {
		t.Fatalf("result measures %v/%d differ from Evaluate's %v/%d", r.Objective, r.Disruption, e.Objective, e.Disruption)
	}
}

func TestMILPKnownOptimum(t *testing.T) {
	for _, solver := range []string{"cbc", "glpsol"} {
		t.Run(solver, func(t *testing.T) {
			needSolver(t, solver)
			// {5} and {3,2,1}: rates 5 and 6 around 5.5, memory 1 and 3 GiB
			// around 2 GiB; with w = 1 per GiB the objective is 0.5 + 1.
			// {5,1},{3,2} balances the rate better (6, 5: also 0.5) and the
			// memory exactly: objective 0.5, the optimum.
			p := &Problem{
				Models:        milpModels([]float64{5, 3, 2, 1}, []int64{milpGiB, milpGiB, milpGiB, milpGiB}, nil),
				Parts:         2,
				MaxDisruption: -1,
				MemoryWeight:  1.0 / milpGiB,
			}
			r, err := solveWithin(t, &MILP{Solver: solver}, p, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			checkResult(t, p, r)
			if !r.Optimal || r.Engine != "milp" || math.Abs(r.Objective-0.5) > 1e-9 {
				t.Fatalf("got objective %v optimal %v engine %s, want the proven optimum 0.5 from milp; notes %q", r.Objective, r.Optimal, r.Engine, r.Notes)
			}
			if r.Assignment[0] != r.Assignment[3] || r.Assignment[1] != r.Assignment[2] || r.Assignment[0] == r.Assignment[1] {
				t.Fatalf("assignment %v, want {0,3} {1,2}", r.Assignment)
			}
		})
	}
}

// randomTiny is a small instance with every constraint kind switched on at
// random, small enough to check by brute force.
func randomTiny(rng *rand.Rand, i int) *Problem {
	m, l := 4+rng.IntN(3), 2+rng.IntN(2)
	p := &Problem{Parts: l, MaxDisruption: -1}
	var totalRate, totalStatic float64
	var maxDyn int64
	for k := 0; k < m; k++ {
		md := Model{
			Name:          fmt.Sprintf("m%d", k),
			Rate:          math.Round(rng.ExpFloat64()*1000) / 100,
			StaticMemory:  int64(1+rng.IntN(8)) * milpGiB / 2,
			DynamicMemory: int64(rng.IntN(3)) * milpGiB / 4,
		}
		totalRate += md.Rate
		totalStatic += float64(md.StaticMemory)
		maxDyn = max(maxDyn, md.DynamicMemory)
		p.Models = append(p.Models, md)
	}
	if i%2 == 1 {
		p.MaxRatePerPart = math.Round(totalRate/float64(l)*(1.1+rng.Float64()*0.4)*100) / 100
	}
	if i%3 != 0 {
		p.GPUMemory = int64(totalStatic/float64(l)*(1.2+rng.Float64()*0.6)) + maxDyn
	}
	if i%4 >= 2 {
		p.Current = make([]int, m)
		for k := range p.Current {
			p.Current[k] = rng.IntN(l+1) - 1 // some new models
		}
		if i%8 < 6 {
			p.MaxDisruption = int64(rng.IntN(12)) * milpGiB / 2
		}
	}
	if i%5 == 0 {
		p.MemoryWeight = rng.Float64() / milpGiB
	}
	return p
}

// TestMILPMatchesBruteForce checks that both solvers prove the brute-force
// optimum, or infeasibility, under R_max, S_max (with the dynamic-memory
// max term), C_max against a current assignment with new models, and
// without any of them.
func TestMILPMatchesBruteForce(t *testing.T) {
	for _, solver := range []string{"cbc", "glpsol"} {
		t.Run(solver, func(t *testing.T) {
			needSolver(t, solver)
			rng := rand.New(rand.NewPCG(7, 11))
			infeasible := 0
			for i := 0; i < 24; i++ {
				p := randomTiny(rng, i)
				want, ok := bruteForce(t, p)
				r, err := solveWithin(t, &MILP{Solver: solver}, p, 10*time.Second)
				if !ok {
					infeasible++
					if !errors.Is(err, ErrInfeasible) {
						t.Fatalf("instance %d: brute force finds no feasible assignment, milp says %v, %v", i, r, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("instance %d: %v", i, err)
				}
				checkResult(t, p, r)
				if !r.Optimal || math.Abs(r.Objective-want) > 1e-6*math.Max(1, want) {
					t.Fatalf("instance %d: objective %v (optimal %v), brute force %v; notes %q", i, r.Objective, r.Optimal, want, r.Notes)
				}
			}
			t.Logf("%d of 24 instances infeasible", infeasible)
			if infeasible == 0 || infeasible > 12 {
				t.Fatalf("%d of 24 instances infeasible: the mix should have a few", infeasible)
			}
		})
	}
}

func TestMILPDynamicMemory(t *testing.T) {
	needSolver(t, "cbc")
	// Four equal models, two parts. Balance wants two per part, but model 0
	// needs 2 GiB of dynamic memory on top of its part's static memory and
	// S_max is 3 GiB: its part can hold nothing else (1 + 1 + 2 > 3), so
	// the only feasible split is {0} {1,2,3}, which holds 3 GiB static.
	p := &Problem{
		Models:        milpModels([]float64{1, 1, 1, 1}, []int64{milpGiB, milpGiB, milpGiB, milpGiB}, []int64{2 * milpGiB, 0, 0, 0}),
		Parts:         2,
		GPUMemory:     3 * milpGiB,
		MaxDisruption: -1,
	}
	r, err := solveWithin(t, &MILP{Solver: "cbc"}, p, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, p, r)
	for i := 1; i < 4; i++ {
		if r.Assignment[i] == r.Assignment[0] {
			t.Fatalf("assignment %v shares model 0's part", r.Assignment)
		}
	}
	// One byte less and nothing fits: model 0 alone needs 3 GiB.
	p.GPUMemory--
	if _, err := solveWithin(t, &MILP{Solver: "cbc"}, p, 10*time.Second); !errors.Is(err, ErrInfeasible) {
		t.Fatalf("S_max below one model's need: got %v, want ErrInfeasible", err)
	}
}

func TestMILPMaxRate(t *testing.T) {
	needSolver(t, "cbc")
	// Static memory 3+1 = 2+2 GiB: with memory weighing most, the optimum
	// puts the two 10 req/s models together. R_max = 11 forbids that.
	p := &Problem{
		Models:        milpModels([]float64{10, 10, 1, 1}, []int64{3 * milpGiB, milpGiB, 2 * milpGiB, 2 * milpGiB}, nil),
		Parts:         2,
		MaxDisruption: -1,
		MemoryWeight:  100.0 / milpGiB,
	}
	r, err := solveWithin(t, &MILP{Solver: "cbc"}, p, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.Assignment[0] != r.Assignment[1] {
		t.Fatalf("without R_max: assignment %v, want the 10 req/s models together", r.Assignment)
	}
	p.MaxRatePerPart = 11
	r, err = solveWithin(t, &MILP{Solver: "cbc"}, p, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, p, r)
	if r.Assignment[0] == r.Assignment[1] || !r.Optimal {
		t.Fatalf("assignment %v (optimal %v) puts both 10 req/s models together above R_max", r.Assignment, r.Optimal)
	}
	p.MaxRatePerPart = 10.5 // total 22 over two parts of at most 10.5
	if _, err := solveWithin(t, &MILP{Solver: "cbc"}, p, 10*time.Second); !errors.Is(err, ErrInfeasible) {
		t.Fatalf("R_max below the average: got %v, want ErrInfeasible", err)
	}
}

func TestMILPDisruptionBudget(t *testing.T) {
	needSolver(t, "cbc")
	// Everything sits on part 0 and a new model arrives. The new model costs
	// its load (1 GiB) wherever it goes; each move costs 2×1 GiB. A budget
	// of 3 GiB allows the new model plus exactly one move.
	p := &Problem{
		Models:        milpModels([]float64{4, 3, 2, 1, 5}, []int64{milpGiB, milpGiB, milpGiB, milpGiB, milpGiB}, nil),
		Parts:         2,
		Current:       []int{0, 0, 0, 0, Unassigned},
		MaxDisruption: 3 * milpGiB,
	}
	r, err := solveWithin(t, &MILP{Solver: "cbc"}, p, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, p, r)
	want, _ := bruteForce(t, p)
	if r.Disruption > p.MaxDisruption || !r.Optimal || math.Abs(r.Objective-want) > 1e-9 {
		t.Fatalf("disruption %d (budget %d), objective %v optimal %v, want %v", r.Disruption, p.MaxDisruption, r.Objective, r.Optimal, want)
	}
	moved := 0
	for i, c := range p.Current[:4] {
		if r.Assignment[i] != c {
			moved++
		}
	}
	if moved != 1 {
		t.Fatalf("assignment %v moves %d current models, want 1 (the budget's)", r.Assignment, moved)
	}
	// Less than the new model's load: nothing is feasible.
	p.MaxDisruption = milpGiB - 1
	if _, err := solveWithin(t, &MILP{Solver: "cbc"}, p, 10*time.Second); !errors.Is(err, ErrInfeasible) {
		t.Fatalf("budget below the new model's load: got %v, want ErrInfeasible", err)
	}
}

// TestMILPKeepsLabels checks that without a disruption limit the solver's
// symmetry breaking does not renumber the parts of an assignment already in
// force: the optimum is the current partition, so nothing should move.
func TestMILPKeepsLabels(t *testing.T) {
	needSolver(t, "cbc")
	p := &Problem{
		Models:        milpModels([]float64{0, 0, 0, 0, 0, 0}, []int64{milpGiB, milpGiB, milpGiB, milpGiB, milpGiB, milpGiB}, nil),
		Parts:         3,
		Current:       []int{2, 1, 1, 0, 0, 2},
		MaxDisruption: -1,
	}
	// Rates that balance exactly along Current's parts (7 req/s and two
	// models each), with labels that symmetry breaking would renumber
	// (model 0 is on part 2).
	p.Models[0].Rate, p.Models[5].Rate = 5, 2
	p.Models[1].Rate, p.Models[2].Rate = 3, 4
	p.Models[3].Rate, p.Models[4].Rate = 1, 6
	r, err := solveWithin(t, &MILP{Solver: "cbc"}, p, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, p, r)
	if r.Objective != 0 || r.Disruption != 0 {
		t.Fatalf("assignment %v (objective %v) moves %d B from the optimal current one %v", r.Assignment, r.Objective, r.Disruption, p.Current)
	}
}

func TestMILPInfeasible(t *testing.T) {
	for _, solver := range []string{"cbc", "glpsol"} {
		t.Run(solver, func(t *testing.T) {
			needSolver(t, solver)
			p := &Problem{
				Models:        milpModels([]float64{1, 1, 1}, []int64{2 * milpGiB, 2 * milpGiB, 2 * milpGiB}, nil),
				Parts:         2,
				GPUMemory:     3 * milpGiB, // one model per part, three models
				MaxDisruption: -1,
			}
			_, err := solveWithin(t, &MILP{Solver: solver}, p, 10*time.Second)
			if !errors.Is(err, ErrInfeasible) {
				t.Fatalf("got %v, want ErrInfeasible", err)
			}
			// A fallback that finds nothing changes nothing.
			_, err = solveWithin(t, &MILP{Solver: solver, Fallback: milpTestFailing{}}, p, 10*time.Second)
			if !errors.Is(err, ErrInfeasible) {
				t.Fatalf("with a failing fallback: got %v, want ErrInfeasible", err)
			}
		})
	}
}

func TestMILPMissingSolver(t *testing.T) {
	p := &Problem{
		Models:        milpModels([]float64{5, 3, 2, 1}, []int64{milpGiB, milpGiB, milpGiB, milpGiB}, nil),
		Parts:         2,
		MaxDisruption: -1,
	}
	g := &milpTestGreedy{}
	r, err := solveWithin(t, &MILP{Solver: "/nonexistent/cbc", Fallback: g}, p, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, p, r)
	if r.Engine != "greedy" || r.Optimal || len(r.Notes) == 0 || !strings.Contains(r.Notes[len(r.Notes)-1], "/nonexistent/cbc not found") || !strings.Contains(r.Notes[len(r.Notes)-1], "used greedy") {
		t.Fatalf("engine %q optimal %v notes %q: want greedy's result with a note on the missing solver", r.Engine, r.Optimal, r.Notes)
	}
	_, err = solveWithin(t, &MILP{Solver: "/nonexistent/cbc"}, p, 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "no fallback") || !strings.Contains(err.Error(), "/nonexistent/cbc") {
		t.Fatalf("no solver, no fallback: got %v, want an error naming the solver and the missing fallback", err)
	}
	if _, err := solveWithin(t, &MILP{Solver: "gurobi"}, p, 5*time.Second); err == nil {
		t.Fatal("unknown solver name accepted")
	}

	t.Setenv("PATH", t.TempDir()) // neither cbc nor glpsol
	r, err = solveWithin(t, &MILP{Fallback: g}, p, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.Engine != "greedy" || !strings.Contains(strings.Join(r.Notes, "\n"), "no MILP solver installed (looked for cbc, glpsol; apt-get install coinor-cbc): used greedy") {
		t.Fatalf("engine %q notes %q", r.Engine, r.Notes)
	}
}

// milpTestInstance is an Appendix A.2 style instance: exponential rates,
// memory from a few model sizes.
func milpTestInstance(seed uint64, m, l int) *Problem {
	rng := rand.New(rand.NewPCG(seed, 3))
	sizes := []int64{100 << 20, 250 << 20, 500 << 20, milpGiB, 3 * milpGiB / 2}
	p := &Problem{Parts: l, MaxDisruption: -1}
	for i := 0; i < m; i++ {
		s := sizes[rng.IntN(len(sizes))]
		p.Models = append(p.Models, Model{Name: fmt.Sprintf("m%d", i), Rate: rng.ExpFloat64() * 100, StaticMemory: s, DynamicMemory: s / 4})
	}
	return p
}

func TestMILPTimeLimit(t *testing.T) {
	needSolver(t, "cbc")
	p := milpTestInstance(1, 200, 10)
	g := &milpTestGreedy{}
	start := time.Now()
	r, err := solveWithin(t, &MILP{Solver: "cbc", Fallback: g}, p, time.Second)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, p, r)
	if took > 2*time.Second {
		t.Fatalf("took %v under a 1 s deadline", took)
	}
	if r.Optimal || g.calls != 1 {
		t.Fatalf("optimal %v after %d fallback calls: a 200×10 balance cannot be proven in a second", r.Optimal, g.calls)
	}
	fb, _ := g.Solve(context.Background(), p)
	if r.Objective > fb.Objective {
		t.Fatalf("objective %v worse than the fallback's %v", r.Objective, fb.Objective)
	}
	notes := strings.Join(r.Notes, "\n")
	if r.Engine == "milp" && !strings.Contains(notes, "time limit") {
		t.Fatalf("notes %q do not mention the time limit", r.Notes)
	}
	t.Logf("%v: engine %s objective %v (greedy %v) notes %q", took, r.Engine, r.Objective, fb.Objective, r.Notes)

	// Without a fallback it must still return by the deadline: with
	// cbc's best solution, or an error saying it found none.
	start = time.Now()
	r, err = solveWithin(t, &MILP{Solver: "cbc"}, p, time.Second)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("no fallback: took %v under a 1 s deadline", took)
	}
	if err != nil && !errors.Is(err, ErrInfeasible) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("no fallback: %v", err)
	}
	if err == nil {
		checkResult(t, p, r)
	}
}

// TestMILPGLPKTimeLimit: glpsol takes no warm start and rarely finds an
// assignment of a 200×10 balance in a second, so the fallback's comes back.
func TestMILPGLPKTimeLimit(t *testing.T) {
	needSolver(t, "glpsol")
	p := milpTestInstance(2, 200, 10)
	start := time.Now()
	r, err := solveWithin(t, &MILP{Solver: "glpsol", Fallback: &milpTestGreedy{}}, p, 2*time.Second)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, p, r)
	if took > 3*time.Second || r.Optimal || len(r.Notes) == 0 {
		t.Fatalf("took %v, optimal %v, notes %q", took, r.Optimal, r.Notes)
	}
	t.Logf("%v: engine %s notes %q", took, r.Engine, r.Notes)
}

func TestMILPFallbackZeroIsOptimal(t *testing.T) {
	needSolver(t, "cbc")
	p := &Problem{
		Models:        milpModels([]float64{2, 2}, []int64{milpGiB, milpGiB}, nil),
		Parts:         2,
		MaxDisruption: -1,
	}
	r, err := solveWithin(t, &MILP{Fallback: &milpTestGreedy{}}, p, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.Objective != 0 || !r.Optimal || r.Engine != "greedy" {
		t.Fatalf("got %+v", r)
	}
}

func TestMILPOnePartAndInvalid(t *testing.T) {
	p := &Problem{Models: milpModels([]float64{1, 2}, []int64{milpGiB, milpGiB}, nil), Parts: 1, MaxDisruption: -1}
	r, err := solveWithin(t, &MILP{Solver: "/nonexistent/cbc"}, p, time.Second)
	if err != nil || !r.Optimal || r.Assignment[0] != 0 || r.Assignment[1] != 0 {
		t.Fatalf("one part: %+v, %v", r, err)
	}
	p.Parts = 0
	if _, err := solveWithin(t, &MILP{}, p, time.Second); err == nil || errors.Is(err, ErrInfeasible) {
		t.Fatalf("invalid problem: got %v, want Validate's error", err)
	}
}

func TestWriteLP(t *testing.T) {
	p := &Problem{
		Models:         milpModels([]float64{1.5, 2.5}, []int64{milpGiB, 512 << 20}, []int64{0, 256 << 20}),
		Parts:          2,
		MaxRatePerPart: 3,
		GPUMemory:      2 * milpGiB,
		Current:        []int{1, Unassigned},
		MaxDisruption:  milpGiB,
		MemoryWeight:   2.0 / mib,
	}
	var b strings.Builder
	if err := writeLP(&b, p, lpOptions{symmetric: !disruptionRow(p)}); err != nil {
		t.Fatal(err)
	}
	lp := b.String()
	for _, want := range []string{
		"obj: dR + 2 dS\n",
		"assign_0: + x_0_0 + x_0_1 = 1\n",
		"rmax_1: + 1.5 x_0_1 + 2.5 x_1_1 <= 3\n",
		"smax_0: + 1024 x_0_0 + 512 x_1_0 + D_0 <= 2048\n",
		"dyn_1_0: + 256 x_1_0 - D_0 <= 0\n",
		"rhi_0: + 1.5 x_0_0 + 2.5 x_1_0 - dR <= 2\n",
		"rlo_0: + 1.5 x_0_0 + 2.5 x_1_0 + dR >= 2\n",
		"shi_1: + 1024 x_0_1 + 512 x_1_1 - dS <= 768\n",
		// model 0 stays on part 1 (2·1024 MiB kept) out of 2·1024 + 512
		// needed, with a 1024 MiB budget.
		"disrupt: + 2048 x_0_1 >= 1536\n",
		"Binaries\n x_0_0 x_0_1 x_1_0 x_1_1\n",
	} {
		if !strings.Contains(lp, want) {
			t.Errorf("LP lacks %q:\n%s", want, lp)
		}
	}
	if strings.Contains(lp, "dyn_0_") {
		t.Error("row for a model without dynamic memory")
	}
	b.Reset()
	p.Current, p.MaxDisruption = nil, -1
	if err := writeLP(&b, p, lpOptions{symmetric: true}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "x_0_1") || strings.Contains(b.String(), "disrupt") {
		t.Errorf("symmetric LP has x_0_1 or a disruption row:\n%s", b.String())
	}
}

func TestCanonical(t *testing.T) {
	got := canonical([]int{2, 2, 0, 1, 0}, 3)
	want := []int{0, 0, 1, 2, 1}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("canonical = %v, want %v", got, want)
		}
	}
}

const cbcSample = `Stopped on time - objective value 1.15476063
      0 dR              0.11830203                       0
      1 dS                 2.71                 0.38387356
**    2 x_0_0                    1                       0
      5 x_1_1                    1                       0
      9 x_2_0          0.999999999                       0
`

// TestSolutionAssignment: the solution parsers are lpsolve's (and tested
// there); turning x_ij values into an assignment, and refusing values that
// make none, is this package's.
func TestSolutionAssignment(t *testing.T) {
	s, err := lpsolve.ParseCBC([]byte(cbcSample))
	if err != nil {
		t.Fatal(err)
	}
	a, err := assignment(s, 3, 2)
	if err != nil || a[0] != 0 || a[1] != 1 || a[2] != 0 {
		t.Fatalf("assignment %v, %v", a, err)
	}
	for _, bad := range []string{
		"Optimal - objective value 1\n 0 x_0_0 0.5 0\n 1 x_1_0 1 0\n",   // fractional
		"Optimal - objective value 1\n 0 x_0_0 1 0\n 1 x_0_1 1 0\n",     // two parts
		"Optimal - objective value 1\n 0 x_0_0 1 0\n",                   // model 1 nowhere
		"Optimal - objective value 1\n 0 x_0_0 1 0\n 1 x_1_7 1 0\n",     // part out of range
		"Optimal - objective value 1\n 0 x_0_0 1 0\n 1 x_1_-1 1 0\n",    // negative
		"Optimal - objective value 1\n 0 x_0_0 1 0\n 1 x_1 1 0\n",       // malformed
		"Optimal - objective value 1\n 0 x_0_0 1 0\n 1 x_9999_0 1 0\n",  // model out of range
		"Optimal - objective value 1\n 0 x_0_0 1 0\n 1 x_1_1 1e300 0\n", // not binary
	} {
		s, err := lpsolve.ParseCBC([]byte(bad))
		if err != nil {
			t.Fatalf("%q: %v", bad, err)
		}
		if a, err := assignment(s, 2, 2); err == nil {
			t.Errorf("assignment of %q accepted: %v", bad, a)
		}
	}
}

func FuzzSolutionAssignment(f *testing.F) {
	f.Add([]byte(cbcSample))
	f.Add([]byte("Optimal - objective value 0\n 0 x_0_0 1 0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := lpsolve.ParseCBC(data)
		if err != nil {
			return
		}
		if a, err := assignment(s, 3, 2); err == nil {
			if len(a) != 3 {
				t.Fatalf("assignment %v", a)
			}
			for _, j := range a {
				if j < 0 || j >= 2 {
					t.Fatalf("assignment %v out of range", a)
				}
			}
		}
	})
}

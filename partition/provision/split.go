package provision

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// SplitKind is how the end-to-end SLO is split into per-module budgets.
type SplitKind int

const (
	// LatencyCost is Harpagon's Algorithm 2: starting from every module at
	// its fastest configuration, repeatedly make the configuration change
	// that saves the most cost per unit of latency it spends, while every
	// path stays within the SLO.
	LatencyCost SplitKind = iota
	// Even gives every module SLO/n, n being the modules on the longest
	// path through it (Clipper, as the papers run it).
	Even
	// Throughput is the throughput-based split of Scrooge and InferLine:
	// the same loop as LatencyCost, but each step jumps to the change with
	// the largest gain in throughput per price, whatever latency it spends.
	Throughput
	// Quantized is Nexus's: budgets are multiples of a step, and every
	// combination within the SLO is searched.
	Quantized
)

// Split is a splitting method, with the step of Quantized (0 means a tenth
// of the SLO).
type Split struct {
	Kind SplitKind
	Step time.Duration
}

// String returns the application file's spelling ("quantized:100ms").
func (s Split) String() string {
	switch s.Kind {
	case LatencyCost:
		return "latency-cost"
	case Even:
		return "even"
	case Throughput:
		return "throughput"
	case Quantized:
		if s.Step > 0 {
			return "quantized:" + s.Step.String()
		}
		return "quantized"
	}
	return fmt.Sprintf("Split(%d)", int(s.Kind))
}

// ParseSplit reads "latency-cost", "even", "throughput", "quantized" (a
// tenth of the SLO) or "quantized:<step>" with a Go duration.
func ParseSplit(s string) (Split, error) {
	switch s {
	case "latency-cost":
		return Split{Kind: LatencyCost}, nil
	case "even":
		return Split{Kind: Even}, nil
	case "throughput":
		return Split{Kind: Throughput}, nil
	case "quantized":
		return Split{Kind: Quantized}, nil
	}
	if rest, ok := strings.CutPrefix(s, "quantized:"); ok {
		d, err := time.ParseDuration(rest)
		if err != nil || d <= 0 {
			return Split{}, fmt.Errorf("quantized step %q is not a positive duration such as 10ms", rest)
		}
		return Split{Kind: Quantized, Step: d}, nil
	}
	return Split{}, fmt.Errorf("unknown split %q (want latency-cost, even, throughput or quantized:<step>)", s)
}

// splitter holds what the splitting methods need: for every module a list
// of options, each with a latency (GetWCL) and a cost. The papers' options
// are the module's configurations, each serving the whole rate alone
// (configSplitter); this package also splits over the module scheduler's
// own provisions (pointSplitter), whose latencies and costs are the real ones.
type splitter struct {
	in   *instance
	cs   [][]cand // configSplitter only: the options' configurations
	lat  [][]float64
	cost [][]float64
	// tie breaks latency ties in fastest(): the higher wins.
	tie [][]float64
	// byLat[m] lists m's options by latency ascending; cheapest[m][i] is
	// the cheapest among byLat[m][:i+1].
	byLat    [][]int
	cheapest [][]int
	units    [][]int // modules split together: singletons, or merged siblings
	fwd      []float64
	// exchangeCut records that an exchange search stopped at
	// maxExchangeWork.
	exchangeCut bool
}

// maxExchangeWork bounds the work of one exchange search, counted in
// modules visited by path evaluations (n per evaluation): a 2-move pass
// weighs every pair of modules and options, n²·K² evaluations of O(n)
// each, which at the module limit would run for hours. Small applications
// never reach it.
const maxExchangeWork = 1 << 24

// configSplitter is the papers' splitter: a module's options are its
// configurations, latency disp.single (d + b/T for batch-aware dispatch),
// cost p·T/t (fractional machines, Harpagon §III-D).
func configSplitter(in *instance, cs [][]cand, disp Dispatch, merge bool) *splitter {
	n := len(in.names)
	lat, cost, tie := make([][]float64, n), make([][]float64, n), make([][]float64, n)
	for m := 0; m < n; m++ {
		T := in.rate[m]
		for i := range cs[m] {
			c := &cs[m][i]
			lat[m] = append(lat[m], disp.single(c, T))
			cost[m] = append(cost[m], c.price*T/c.tput)
			tie[m] = append(tie[m], c.price)
		}
	}
	sp := newSplitter(in, lat, cost, tie, merge)
	sp.cs = cs
	return sp
}

// pointSplitter splits over the module scheduler's provisions: fronts[m] is the
// Pareto frontier of m's provisions (latency, cost), so that the latency-cost
// efficiency of a move is what the move really saves and spends, partial
// machines, dummies and all.
func pointSplitter(in *instance, fronts []frontier, merge bool) *splitter {
	n := len(in.names)
	lat, cost, tie := make([][]float64, n), make([][]float64, n), make([][]float64, n)
	for m, f := range fronts {
		for _, p := range f {
			lat[m] = append(lat[m], p.lat)
			cost[m] = append(cost[m], p.cost)
			tie[m] = append(tie[m], p.cost)
		}
	}
	return newSplitter(in, lat, cost, tie, merge)
}

func newSplitter(in *instance, lat, cost, tie [][]float64, merge bool) *splitter {
	n := len(in.names)
	sp := &splitter{in: in, lat: lat, cost: cost, tie: tie,
		byLat: make([][]int, n), cheapest: make([][]int, n), fwd: make([]float64, n)}
	for m := 0; m < n; m++ {
		order := make([]int, len(lat[m]))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return lat[m][order[a]] < lat[m][order[b]] })
		sp.byLat[m] = order
		ch := make([]int, len(order))
		for i, c := range order {
			ch[i] = c
			if i > 0 && cost[m][ch[i-1]] <= cost[m][c] {
				ch[i] = ch[i-1]
			}
		}
		sp.cheapest[m] = ch
	}
	sp.units = units(in, merge)
	return sp
}

// units groups modules for the splitter: with merge, modules that share the
// same parents and the same children (siblings in parallel) form one unit,
// Harpagon's node merger; otherwise every module is its own unit.
func units(in *instance, merge bool) [][]int {
	n := len(in.names)
	if !merge {
		us := make([][]int, n)
		for m := range us {
			us[m] = []int{m}
		}
		return us
	}
	key := func(m int) string {
		p := append([]int(nil), in.parents[m]...)
		c := append([]int(nil), in.children[m]...)
		sort.Ints(p)
		sort.Ints(c)
		return fmt.Sprint(p, c)
	}
	byKey := map[string]int{}
	var us [][]int
	for _, m := range in.topo {
		k := key(m)
		if i, ok := byKey[k]; ok {
			us[i] = append(us[i], m)
			continue
		}
		byKey[k] = len(us)
		us = append(us, []int{m})
	}
	return us
}

// fastest is the default state of Algorithm 2 (GetDefaultDAG): every module
// at its lowest-latency configuration, ties going to the higher price (the
// papers' "batch size 1 on the most expensive hardware, the least
// cost-efficient configuration").
func (sp *splitter) fastest() []int {
	st := make([]int, len(sp.lat))
	for m := range st {
		best := 0
		for i := range sp.lat[m] {
			li, lb := sp.lat[m][i], sp.lat[m][best]
			if li < lb || li == lb && sp.tie[m][i] > sp.tie[m][best] {
				best = i
			}
		}
		st[m] = best
	}
	return st
}

// e2e is the worst path latency (GetLat) of state st.
func (sp *splitter) e2e(st []int) float64 {
	worst := 0.0
	for _, m := range sp.in.topo {
		start := 0.0
		for _, p := range sp.in.parents[m] {
			start = math.Max(start, sp.fwd[p])
		}
		sp.fwd[m] = start + sp.lat[m][st[m]]
		worst = math.Max(worst, sp.fwd[m])
	}
	return worst
}

// move is one step of a splitting method: new configurations for the
// modules of a unit.
type move struct {
	unit int
	cfg  []int
}

func (sp *splitter) apply(st []int, mv move) {
	for i, m := range sp.units[mv.unit] {
		st[m] = mv.cfg[i]
	}
}

// fits reports whether st with mv applied keeps every path within the SLO;
// st is left as it was.
func (sp *splitter) fits(st []int, mv move) bool {
	us := sp.units[mv.unit]
	old := make([]int, len(us))
	for i, m := range us {
		old[i] = st[m]
		st[m] = mv.cfg[i]
	}
	ok := sp.e2e(st) <= sp.in.slo+eps
	for i, m := range us {
		st[m] = old[i]
	}
	return ok
}

// candidateMoves calls f with every move of unit u from st that saves cost:
// its saving ΔC > 0 and the latency it spends ΔL (the unit's latency, the
// largest of its modules', after minus before). A single module may switch
// to any cheaper configuration. A merged unit moves to a latency level λ:
// each member takes its cheapest configuration within λ, so that siblings
// that must wait for each other anyway spend the same budget.
func (sp *splitter) candidateMoves(st []int, u int, f func(mv move, dC, dL float64)) {
	us := sp.units[u]
	if len(us) == 1 {
		m := us[0]
		cur := st[m]
		for c := range sp.lat[m] {
			dC := sp.cost[m][cur] - sp.cost[m][c]
			if c == cur || dC <= 1e-12*math.Max(1, sp.cost[m][cur]) {
				continue
			}
			f(move{unit: u, cfg: []int{c}}, dC, sp.lat[m][c]-sp.lat[m][cur])
		}
		return
	}
	curLat, curCost := 0.0, 0.0
	for _, m := range us {
		curLat = math.Max(curLat, sp.lat[m][st[m]])
		curCost += sp.cost[m][st[m]]
	}
	var levels []float64
	for _, m := range us {
		for _, c := range sp.byLat[m] {
			if l := sp.lat[m][c]; l >= curLat-eps {
				levels = append(levels, l)
			}
		}
	}
	sort.Float64s(levels)
	prev := math.Inf(-1)
	for _, lvl := range levels {
		if lvl <= prev+eps {
			continue
		}
		prev = lvl
		cfg := make([]int, len(us))
		newLat, newCost := 0.0, 0.0
		for i, m := range us {
			k := sort.Search(len(sp.byLat[m]), func(j int) bool { return sp.lat[m][sp.byLat[m][j]] > lvl+eps })
			if k == 0 {
				cfg = nil
				break
			}
			c := sp.cheapest[m][k-1]
			if sp.cost[m][c] > sp.cost[m][st[m]] {
				c = st[m] // never dearer than now
			}
			cfg[i] = c
			newLat = math.Max(newLat, sp.lat[m][c])
			newCost += sp.cost[m][c]
		}
		if cfg == nil {
			continue
		}
		dC := curCost - newCost
		if dC <= 1e-12*math.Max(1, curCost) {
			continue
		}
		f(move{unit: u, cfg: cfg}, dC, newLat-curLat)
	}
}

// latencyCost is Algorithm 2 (Harpagon §III-D; Piccolo §III-C), from the
// fastest state. It returns the final state and the moves made, in order,
// for cost-direct. The printed pseudo-code has slips, fixed here on
// purpose:
//
//   - Sign. Harpagon writes LC = (C_prev − C_new)/(L_new − L_prev) and
//     Piccolo (C_new − C_prev)/(L_prev − L_new): the same number, which is
//     also positive for a move that costs more to save latency (both
//     differences negative). Only moves that save cost (ΔC > 0) are
//     candidates; LC ranks them.
//   - Zero denominator. A cheaper configuration that is no slower (ΔL ≤ 0,
//     say a faster hardware kind that is also cheaper per request) divides
//     by zero or flips the sign. It is a free saving: LC = +∞, and among
//     free savings the largest ΔC goes first.
//   - Wrong variable on line 13. Piccolo checks GetLat(DAG, M_max, c_max),
//     the best move so far, instead of the candidate (M, c_new), and line
//     15 records c instead of c_new; Harpagon's line 13 has the candidate.
//     The candidate is what must fit.
//   - Line 16-17 sit inside the module loop in Piccolo's print, which would
//     update the DAG before the other modules are compared; the update
//     happens once per iteration, after all modules.
//
// Piccolo's line 19 (budgets resized in proportion to latency) is
// budgets().
func (sp *splitter) latencyCost() ([]int, []move) {
	st := sp.fastest()
	if sp.e2e(st) > sp.in.slo+eps {
		return nil, nil
	}
	var moves []move
	for iter := 0; iter < 64*len(st)+1024; iter++ {
		var best move
		bestLC, bestDC := math.Inf(-1), 0.0
		found := false
		for u := range sp.units {
			sp.candidateMoves(st, u, func(mv move, dC, dL float64) {
				lc := efficiency(dC, dL)
				if lc < bestLC || lc == bestLC && dC <= bestDC {
					return
				}
				if !sp.fits(st, mv) {
					return
				}
				best, bestLC, bestDC, found = mv, lc, dC, true
			})
		}
		if !found {
			break
		}
		sp.apply(st, best)
		moves = append(moves, best)
	}
	return st, moves
}

// efficiency is the latency-cost efficiency LC of a move that saves dC
// (> 0) and spends dL: dC/dL, or +∞ when it spends no latency (the zero
// denominator of the printed Algorithm 2).
func efficiency(dC, dL float64) float64 {
	if dL <= eps {
		return math.Inf(1)
	}
	return dC / dL
}

// costDirect replays all but the last r moves of Algorithm 2, then makes
// the move that saves the most cost, again and again, while paths fit:
// Harpagon's cost-direct, for when the latency left is too little for LC
// to rank well (a move of LC 10 that spends 0.1 s saves more than one of
// LC 20 that spends 0.01 s).
func (sp *splitter) costDirect(moves []move, r int) []int {
	st := sp.fastest()
	for _, mv := range moves[:len(moves)-r] {
		sp.apply(st, mv)
	}
	for iter := 0; iter < 64*len(st)+1024; iter++ {
		var best move
		bestDC := 0.0
		found := false
		for u := range sp.units {
			sp.candidateMoves(st, u, func(mv move, dC, dL float64) {
				if dC <= bestDC || !sp.fits(st, mv) {
					return
				}
				best, bestDC, found = mv, dC, true
			})
		}
		if !found {
			break
		}
		sp.apply(st, best)
	}
	return st
}

// exchange improves a state by local search, the splitting optimizer this
// package adds to Harpagon's two: a 1-move switches one module to any
// option that saves cost and fits; a 2-move switches two modules at once,
// one to a cheaper (slower) option and the other to any option, when
// together they save cost and fit. This finds the trades Algorithm 2's
// one-module-at-a-time steps cannot: giving latency from one module to
// another that uses it better. It stops at a local optimum, after 64·n
// improvements, or after maxExchangeWork path evaluations (keeping the
// improvements made, each of which fits).
func (sp *splitter) exchange(st []int) []int {
	st = append([]int(nil), st...)
	n := len(st)
	work := 0
	fits := func() bool {
		work += n
		return sp.e2e(st) <= sp.in.slo+eps
	}
	total := func() float64 {
		c := 0.0
		for m, i := range st {
			c += sp.cost[m][i]
		}
		return c
	}
	for iter := 0; iter < 64*n && work <= maxExchangeWork; iter++ {
		base := total()
		bestSave, bestA, bestPA, bestB, bestPB := 1e-9*math.Max(1, base), -1, 0, -1, 0
		for a := 0; a < n && work <= maxExchangeWork; a++ {
			curA := st[a]
			for pa := range sp.lat[a] {
				if sp.cost[a][pa] >= sp.cost[a][curA] {
					continue
				}
				st[a] = pa
				saveA := sp.cost[a][curA] - sp.cost[a][pa]
				if saveA > bestSave && fits() {
					bestSave, bestA, bestPA, bestB = saveA, a, pa, -1
				}
				for b := 0; b < n; b++ {
					if b == a {
						continue
					}
					curB := st[b]
					for pb := range sp.lat[b] {
						save := saveA + sp.cost[b][curB] - sp.cost[b][pb]
						if pb == curB || save <= bestSave || sp.lat[b][pb] >= sp.lat[b][curB] {
							continue // only a faster b can make room for a
						}
						st[b] = pb
						if fits() {
							bestSave, bestA, bestPA, bestB, bestPB = save, a, pa, b, pb
						}
						st[b] = curB
					}
				}
				st[a] = curA
			}
		}
		if bestA < 0 {
			break
		}
		st[bestA] = bestPA
		if bestB >= 0 {
			st[bestB] = bestPB
		}
	}
	if work > maxExchangeWork {
		sp.exchangeCut = true
	}
	return st
}

// throughput is the throughput-based split of Scrooge and InferLine
// (Harpagon's Harp-tb): from the fastest state, each step makes the move
// whose new configuration has the largest throughput per price relative to
// the module's current one, as long as paths fit. It allocates latency in
// few, large steps, which is why it falls into local optima.
func (sp *splitter) throughput() []int {
	st := sp.fastest()
	if sp.e2e(st) > sp.in.slo+eps {
		return nil
	}
	for iter := 0; iter < 64*len(st)+1024; iter++ {
		var best move
		bestGain := 1.0
		found := false
		for u := range sp.units {
			m := sp.units[u][0]
			cur := &sp.cs[m][st[m]]
			for c := range sp.cs[m] {
				g := sp.cs[m][c].ratio / cur.ratio
				if g <= bestGain*(1+1e-12) {
					continue
				}
				mv := move{unit: u, cfg: []int{c}}
				if !sp.fits(st, mv) {
					continue
				}
				best, bestGain, found = mv, g, true
			}
		}
		if !found {
			break
		}
		sp.apply(st, best)
	}
	return st
}

// budgets turns a state into per-module budgets (seconds). Unscaled, a
// module's budget is its configuration's latency; scaled (Piccolo line 19),
// every module's latency is stretched by SLO over the longest path through
// it, so that the slack of every path is shared in proportion and no path
// exceeds the SLO.
func (sp *splitter) budgets(st []int, scaled bool) []float64 {
	n := len(st)
	out := make([]float64, n)
	for m := range out {
		out[m] = sp.lat[m][st[m]]
	}
	if !scaled {
		return out
	}
	through := longestThrough(sp.in, func(m int) float64 { return sp.lat[m][st[m]] })
	for m := range out {
		if through[m] > 0 {
			out[m] *= sp.in.slo / through[m]
		}
	}
	return out
}

// evenBudgets is the even split: SLO over the modules of the longest path
// through each module.
func evenBudgets(in *instance) []float64 {
	out := make([]float64, len(in.names))
	for m := range out {
		out[m] = in.slo / float64(in.pathLen[m])
	}
	return out
}

// maxQuantizedLevels bounds the budget levels of the quantized split (the
// SLO over the step), which size its cost table.
const maxQuantizedLevels = 1000

// maxQuantizedWork bounds the budget combinations the quantized split
// visits; past it, it keeps the best found and says so.
const maxQuantizedWork = 2_000_000

// quantized is Nexus's split: every module's budget is a multiple of step
// (seconds), and the combination of least total cost whose paths fit the
// SLO wins, found by depth-first search in topological order with
// branch-and-bound. cost(m, L) is the module's cost at budget L (ok false
// when it has no provision). It returns nil when no combination fits, and
// whether the search stopped at maxQuantizedWork.
func quantized(in *instance, step float64, cost func(m int, L float64) (float64, bool)) ([]float64, bool) {
	n := len(in.names)
	levels := int(math.Floor(in.slo/step + eps))
	if levels < 1 {
		return nil, false
	}
	// table[m][k] is m's cost at budget (k+1)·step; +Inf when infeasible.
	table := make([][]float64, n)
	minCost := make([]float64, n)
	for m := range table {
		table[m] = make([]float64, levels)
		minCost[m] = math.Inf(1)
		for k := range table[m] {
			c, ok := cost(m, float64(k+1)*step)
			if !ok {
				c = math.Inf(1)
			}
			table[m][k] = c
			minCost[m] = math.Min(minCost[m], c)
		}
	}
	// rest[i] is the least cost of the modules from topo position i on.
	rest := make([]float64, n+1)
	for i := n - 1; i >= 0; i-- {
		rest[i] = rest[i+1] + minCost[in.topo[i]]
	}
	// tail[m]: the fewest levels the modules after m need on any path.
	minLevel := make([]int, n)
	for m := range minLevel {
		minLevel[m] = levels + 1
		for k := range table[m] {
			if !math.IsInf(table[m][k], 1) {
				minLevel[m] = k + 1
				break
			}
		}
	}
	tail := make([]int, n)
	for i := n - 1; i >= 0; i-- {
		m := in.topo[i]
		for _, c := range in.children[m] {
			tail[m] = max(tail[m], tail[c]+minLevel[c])
		}
	}
	finish := make([]int, n) // levels used up to and including m
	choice := make([]int, n)
	best := math.Inf(1)
	var bestChoice []int
	work := 0
	var dfs func(i int, acc float64)
	dfs = func(i int, acc float64) {
		if i == n {
			if acc < best {
				best = acc
				bestChoice = append(bestChoice[:0], choice...)
			}
			return
		}
		m := in.topo[i]
		start := 0
		for _, p := range in.parents[m] {
			start = max(start, finish[p])
		}
		for k := 1; start+k+tail[m] <= levels; k++ {
			if work++; work > maxQuantizedWork {
				return
			}
			c := table[m][k-1]
			if math.IsInf(c, 1) || acc+c+rest[i+1] >= best {
				continue
			}
			finish[m] = start + k
			choice[m] = k
			dfs(i+1, acc+c)
		}
	}
	dfs(0, 0)
	if bestChoice == nil {
		return nil, work > maxQuantizedWork
	}
	out := make([]float64, n)
	for m, k := range bestChoice {
		out[m] = float64(k) * step
	}
	return out, work > maxQuantizedWork
}

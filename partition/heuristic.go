package partition

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// heuristicStream is the second PCG word of the heuristic's generator.
const heuristicStream = 0x6865757269737469 // "heuristi"

// heurEps is the tolerance, on the normalised scale where a deviation of 1
// is the average part load, below which a change is not an improvement: it
// keeps rounding noise from making the search cycle.
const heurEps = 1e-12

// Heuristic is the default engine: a greedy start followed by local search
// (single moves and pairwise swaps), restarted a few times from shuffled
// greedy starts when the models are few, where local optima are poorer. It
// partitions the paper's 800 models into 20 parts well within the 1 s and
// 0.02 imbalance targets that BenchmarkHeuristic800x20 asserts (its
// figures: docs/benchmarks.md, "Partitioning: Appendix A.2"), where the
// paper's MILP needs a solver and a 10 s limit, which is why it is the
// default for the epoch job.
//
// It honours every constraint exactly: R_max, S_max (a part's static memory
// plus its largest dynamic memory) and the disruption budget C_max against
// Problem.Current. With a current assignment it starts from it (placing new
// models greedily), so a tight budget still has an answer, and spends the
// budget on the moves and swaps that improve the balance most per byte
// moved. It is deterministic for a given Seed and problem; the seed only
// orders the search, so different seeds give different local optima of
// similar quality. It stops at a local optimum or at ctx's deadline and
// returns the best feasible assignment seen.
type Heuristic struct {
	Seed uint64
}

// Name reports "heuristic", the engine's name in results and flags.
func (Heuristic) Name() string { return "heuristic" }

// Solve partitions p. An error wraps ErrInfeasible, saying which constraint
// failed, when no feasible assignment was found; a malformed problem gives
// Validate's error.
func (h Heuristic) Solve(ctx context.Context, p *Problem) (*Result, error) {
	start := time.Now()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := precheckFeasible(p); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(h.Seed, heuristicStream))
	first := newLocalSearch(p, rng, false)
	if first.budget >= 0 && first.disr > first.budget {
		return nil, fmt.Errorf("%w: heuristic: max_disruption %d B is below the %d B needed to load the new models", ErrInfeasible, first.budget, first.disr)
	}
	// With few models, moves and swaps are too coarse to fine tune and get
	// trapped in poor local optima, more so where R_max or S_max bind, so a
	// few more starts from greedy placements in random orders are tried;
	// with many, the first start is as good and restarts only cost time.
	// With a current assignment the start is fixed.
	starts := 1
	if p.Current == nil && len(p.Models) <= heuristicSmall {
		starts += heuristicRestarts
	}
	best := &bestSnapshot{}
	stopped := first.run(ctx, best)
	for r := 1; r < starts && !stopped; r++ {
		stopped = newLocalSearch(p, rng, true).run(ctx, best)
	}
	if best.assign == nil {
		// The message names what the first start could not repair.
		s := first
		e, err := p.Evaluate(s.assign)
		if err != nil {
			return nil, err
		}
		msg := "no assignment meets the constraints"
		if len(e.Violations) > 0 {
			msg = e.Violations[0]
			if n := len(e.Violations); n > 1 {
				msg += fmt.Sprintf(" (and %d more violations)", n-1)
			}
		}
		if s.budget >= 0 {
			msg += fmt.Sprintf(" (within max_disruption %d B)", s.budget)
		}
		if stopped {
			msg += "; stopped at the time limit"
		}
		return nil, fmt.Errorf("%w: heuristic: %s", ErrInfeasible, msg)
	}
	res, err := p.NewResult(h.Name(), best.assign, time.Since(start))
	if err != nil {
		return nil, err
	}
	if stopped {
		res.Notes = append(res.Notes, "heuristic: time limit reached before the search finished; returning the best assignment found")
	}
	return res, nil
}

// heuristicRestarts is how many extra greedy starts a problem with at most
// heuristicSmall models gets: enough to escape most of the traps on small
// problems, few enough to stay fast at heuristicSmall models
// (docs/benchmarks.md, "Partitioning: Appendix A.2").
const (
	heuristicRestarts = 7
	heuristicSmall    = 200
)

// run takes the search from its start through the phases to a local
// optimum, offering each phase's result to best. It reports whether it
// stopped at ctx's deadline.
func (s *localSearch) run(ctx context.Context, best *bestSnapshot) bool {
	// Part sums are resynced before every offer, so that they are summed
	// as Evaluate sums them and the snapshot's feasibility is NewResult's.
	s.resync()
	best.offer(s)
	phases := []searchMode{modeSmooth, modeMinimax}
	if s.violation() > 0 {
		phases = append([]searchMode{modeRepair}, phases...)
	}
	for _, m := range phases {
		stopped := s.improve(ctx, m)
		s.resync()
		if m == modeRepair && s.violation() > 0 {
			return stopped
		}
		best.offer(s)
		if stopped {
			return true
		}
	}
	return false
}

// precheckFeasible rejects problems that no assignment can satisfy for a reason
// visible from single models or totals, with a message naming the model or
// the constraint, which is more use to an operator than a failed search.
func precheckFeasible(p *Problem) error {
	var total float64
	var static int64
	for _, m := range p.Models {
		if p.MaxRatePerPart > 0 && m.Rate > p.MaxRatePerPart {
			return fmt.Errorf("%w: model %q: rate %.1f alone exceeds max_rate_per_part %.1f", ErrInfeasible, m.Name, m.Rate, p.MaxRatePerPart)
		}
		if p.GPUMemory > 0 && m.StaticMemory+m.DynamicMemory > p.GPUMemory {
			return fmt.Errorf("%w: model %q: memory %d B (static %d + dynamic %d) alone exceeds gpu_memory %d B", ErrInfeasible, m.Name, m.StaticMemory+m.DynamicMemory, m.StaticMemory, m.DynamicMemory, p.GPUMemory)
		}
		total += m.Rate
		static += m.StaticMemory
	}
	if p.MaxRatePerPart > 0 && total > p.MaxRatePerPart*float64(p.Parts) {
		return fmt.Errorf("%w: total rate %.1f exceeds %d parts × max_rate_per_part %.1f", ErrInfeasible, total, p.Parts, p.MaxRatePerPart)
	}
	if p.GPUMemory > 0 && static > p.GPUMemory*int64(p.Parts) {
		return fmt.Errorf("%w: total static memory %d B exceeds %d parts × gpu_memory %d B", ErrInfeasible, static, p.Parts, p.GPUMemory)
	}
	return nil
}

// searchMode selects what a local-search phase minimises.
type searchMode int

const (
	// modeRepair minimises the constraint violation V, then the surrogate.
	modeRepair searchMode = iota
	// modeSmooth minimises the surrogate f = Σ_j a_j² + b_j², the sum of
	// squared normalised deviations of rate and memory: smooth, so every
	// part's imbalance pulls, and cheap to update.
	modeSmooth
	// modeMinimax minimises the paper's objective O = max|a| + max|b|, then
	// the surrogate, so plateaus of O are crossed by smoothing the rest.
	modeMinimax
)

// localSearch is the local-search state. Rates and memory are normalised by the
// unit u (R̄, or w·S̄ when there is no rate), memory also weighted by w, so
// that the objective is u·(max_j|a_j| + max_j|b_j|) with a_j and b_j the
// parts' normalised deviations from the averages.
type localSearch struct {
	p    *Problem
	n, l int
	rng  *rand.Rand

	ra, sb    []float64 // per model: rate/u and w·static/u
	rate      []float64 // per model: raw rate
	stat, dyn []int64

	cur    []int // Problem.Current, or nil
	budget int64 // C_max, or −1 when none applies
	disr   int64 // disruption of assign against cur

	assign  []int
	members [][]int
	pos     []int // pos[i] is i's index in members[assign[i]]

	prate []float64 // per part
	pstat []int64
	max1  []int64 // largest dynamic memory in the part
	cnt1  []int   // how many models have it
	max2  []int64 // largest dynamic memory below max1 (0 if none)
	a, b  []float64
	meanA float64 // R̄/u
	meanB float64 // w·S̄/u

	rmax float64
	smax int64
}

func newLocalSearch(p *Problem, rng *rand.Rand, shuffle bool) *localSearch {
	n, l := len(p.Models), p.Parts
	s := &localSearch{
		p: p, n: n, l: l,
		rng:  rng,
		ra:   make([]float64, n),
		sb:   make([]float64, n),
		rate: make([]float64, n),
		stat: make([]int64, n), dyn: make([]int64, n),
		cur: p.Current, budget: -1,
		assign:  make([]int, n),
		members: make([][]int, l),
		pos:     make([]int, n),
		prate:   make([]float64, l), pstat: make([]int64, l),
		max1: make([]int64, l), cnt1: make([]int, l), max2: make([]int64, l),
		a: make([]float64, l), b: make([]float64, l),
		rmax: p.MaxRatePerPart, smax: p.GPUMemory,
	}
	if p.Current != nil && p.MaxDisruption >= 0 {
		s.budget = p.MaxDisruption
	}
	w := p.Weight()
	var totalRate, totalStatic float64
	for i, m := range p.Models {
		s.rate[i], s.stat[i], s.dyn[i] = m.Rate, m.StaticMemory, m.DynamicMemory
		totalRate += m.Rate
		totalStatic += float64(m.StaticMemory)
	}
	u := totalRate / float64(l)
	if u == 0 {
		u = w * totalStatic / float64(l)
	}
	if u == 0 {
		u = 1
	}
	for i := range p.Models {
		s.ra[i] = s.rate[i] / u
		s.sb[i] = w * float64(s.stat[i]) / u
	}
	s.meanA = totalRate / float64(l) / u
	s.meanB = w * totalStatic / float64(l) / u
	for j := range s.a {
		s.a[j], s.b[j] = -s.meanA, -s.meanB
	}

	// Models with a current part stay there; the rest are placed greedily,
	// largest first by normalised combined size (in a random order when
	// shuffle asks for another start), each where it raises the surrogate
	// least among the parts it fits.
	var todo []int
	for i := range p.Models {
		if s.cur != nil && s.cur[i] != Unassigned {
			s.add(i, s.cur[i])
		} else {
			todo = append(todo, i)
		}
	}
	if shuffle {
		rng.Shuffle(len(todo), func(x, y int) { todo[x], todo[y] = todo[y], todo[x] })
	} else {
		slices.SortStableFunc(todo, func(x, y int) int {
			return cmp.Compare(s.ra[y]+s.sb[y], s.ra[x]+s.sb[x])
		})
	}
	for _, i := range todo {
		s.add(i, s.place(i))
		if s.cur != nil {
			s.disr += s.cost(i, s.assign[i])
		}
	}
	return s
}

// place picks the part for a new model: among the parts it fits, the one
// where it raises the surrogate least; if it fits none, the one where it
// adds the least violation, for the repair phase to fix.
func (s *localSearch) place(i int) int {
	best, bestF := -1, math.Inf(1)
	bestV, bestVF := -1, math.Inf(1)
	bestDV := math.Inf(1)
	for q := 0; q < s.l; q++ {
		df := s.ra[i]*(2*s.a[q]+s.ra[i]) + s.sb[i]*(2*s.b[q]+s.sb[i])
		r, st, d := s.prate[q]+s.rate[i], s.pstat[q]+s.stat[i], max(s.max1[q], s.dyn[i])
		if s.fits(r, st, d) {
			if df < bestF {
				best, bestF = q, df
			}
			continue
		}
		dv := s.partViolation(r, st+d) - s.partViolation(s.prate[q], s.pstat[q]+s.max1[q])
		if dv < bestDV || (dv == bestDV && df < bestVF) {
			bestV, bestDV, bestVF = q, dv, df
		}
	}
	if best >= 0 {
		return best
	}
	return bestV
}

// cost is model i's share of the disruption (Eq. 11) when in part j: 0 in
// its current part, its load cost when new, unload plus load when moved.
func (s *localSearch) cost(i, j int) int64 {
	switch {
	case s.cur == nil || s.cur[i] == j:
		return 0
	case s.cur[i] == Unassigned:
		return MoveCost(s.p.Models[i])
	default:
		return 2 * MoveCost(s.p.Models[i])
	}
}

func (s *localSearch) fits(rate float64, static, dyn int64) bool {
	return (s.rmax <= 0 || rate <= s.rmax) && (s.smax <= 0 || static+dyn <= s.smax)
}

// partViolation is how far a part's rate and memory exceed R_max and S_max,
// relative to the limits.
func (s *localSearch) partViolation(rate float64, mem int64) float64 {
	var v float64
	if s.rmax > 0 && rate > s.rmax {
		v += (rate - s.rmax) / s.rmax
	}
	if s.smax > 0 && mem > s.smax {
		v += float64(mem-s.smax) / float64(s.smax)
	}
	return v
}

func (s *localSearch) violation() float64 {
	var v float64
	for j := 0; j < s.l; j++ {
		v += s.partViolation(s.prate[j], s.pstat[j]+s.max1[j])
	}
	return v
}

// add puts model i in part j, updating the part's sums.
func (s *localSearch) add(i, j int) {
	s.assign[i] = j
	s.pos[i] = len(s.members[j])
	s.members[j] = append(s.members[j], i)
	s.prate[j] += s.rate[i]
	s.pstat[j] += s.stat[i]
	s.a[j] += s.ra[i]
	s.b[j] += s.sb[i]
	switch d := s.dyn[i]; {
	case d > s.max1[j]:
		s.max2[j], s.max1[j], s.cnt1[j] = s.max1[j], d, 1
	case d == s.max1[j]:
		s.cnt1[j]++
	case d > s.max2[j]:
		s.max2[j] = d
	}
}

// remove takes model i out of its part.
func (s *localSearch) remove(i int) {
	j := s.assign[i]
	m := s.members[j]
	last := m[len(m)-1]
	m[s.pos[i]] = last
	s.pos[last] = s.pos[i]
	s.members[j] = m[:len(m)-1]
	s.prate[j] -= s.rate[i]
	s.pstat[j] -= s.stat[i]
	s.a[j] -= s.ra[i]
	s.b[j] -= s.sb[i]
	s.refreshDyn(j)
}

func (s *localSearch) refreshDyn(j int) {
	var m1, m2 int64
	c := 0
	for _, k := range s.members[j] {
		switch d := s.dyn[k]; {
		case d > m1:
			m2, m1, c = m1, d, 1
		case d == m1:
			c++
		case d > m2:
			m2 = d
		}
	}
	s.max1[j], s.cnt1[j], s.max2[j] = m1, c, m2
}

// dynAfter is part j's largest dynamic memory after model out (or −1)
// leaves and model in (or −1) joins.
func (s *localSearch) dynAfter(j, out, in int) int64 {
	m := s.max1[j]
	if out >= 0 && s.dyn[out] == m && s.cnt1[j] == 1 {
		m = s.max2[j]
	}
	if in >= 0 && s.dyn[in] > m {
		m = s.dyn[in]
	}
	return m
}

// resync recomputes the parts' sums from scratch, dropping the rounding
// drift of incremental updates, and the disruption.
func (s *localSearch) resync() {
	for j := 0; j < s.l; j++ {
		s.prate[j], s.pstat[j] = 0, 0
		s.a[j], s.b[j] = -s.meanA, -s.meanB
	}
	s.disr = 0
	for i := 0; i < s.n; i++ {
		j := s.assign[i]
		s.prate[j] += s.rate[i]
		s.pstat[j] += s.stat[i]
		s.a[j] += s.ra[i]
		s.b[j] += s.sb[i]
		s.disr += s.cost(i, j)
	}
}

// objective is the normalised paper objective max|a| + max|b|.
func (s *localSearch) objective() float64 {
	var ma, mb float64
	for j := 0; j < s.l; j++ {
		ma = max(ma, math.Abs(s.a[j]))
		mb = max(mb, math.Abs(s.b[j]))
	}
	return ma + mb
}

// top3 holds the three largest |x_j| and their parts, so that the maximum
// over the parts other than two changed ones is found in O(1).
type top3 struct {
	v [3]float64
	j [3]int
}

func makeTop3(x []float64) top3 {
	t := top3{j: [3]int{-1, -1, -1}}
	for j, v := range x {
		v = math.Abs(v)
		switch {
		case v > t.v[0]:
			t.v[2], t.j[2] = t.v[1], t.j[1]
			t.v[1], t.j[1] = t.v[0], t.j[0]
			t.v[0], t.j[0] = v, j
		case v > t.v[1]:
			t.v[2], t.j[2] = t.v[1], t.j[1]
			t.v[1], t.j[1] = v, j
		case v > t.v[2]:
			t.v[2], t.j[2] = v, j
		}
	}
	return t
}

// without is the largest |x_j| over the parts other than p and q.
func (t *top3) without(p, q int) float64 {
	for k := 0; k < 3; k++ {
		if t.j[k] != p && t.j[k] != q {
			return t.v[k]
		}
	}
	return 0
}

// heurCand is a move (k < 0: model i to part q) or a swap (models i and k),
// with its change in the primary measure (violation or objective), in the
// surrogate, and in disruption.
type heurCand struct {
	i, k, q int
	dp, df  float64
	dc      int64
}

// better reports whether c should be preferred to d, both improving. With
// perByte, improvements are weighed per byte of disruption, and free ones
// (which move models back home or only reshuffle new models) come first.
func (c *heurCand) better(d *heurCand, perByte bool) bool {
	if d.i < 0 {
		return true
	}
	cp, cf, dp, df := c.dp, c.df, d.dp, d.df
	if perByte {
		cFree, dFree := c.dc <= 0, d.dc <= 0
		if cFree != dFree {
			return cFree
		}
		if !cFree {
			cp, cf = cp/float64(c.dc), cf/float64(c.dc)
			dp, df = dp/float64(d.dc), df/float64(d.dc)
		}
	}
	if cp < dp-heurEps*math.Abs(dp) {
		return true
	}
	if cp > dp+heurEps*math.Abs(dp) {
		return false
	}
	return cf < df
}

// improve runs one local-search phase to a local optimum of m. Without a
// disruption budget each model in turn (in a seeded random order) takes its
// best move or swap, pass after pass. With a budget, the repair and smooth
// phases take the globally best improvement per byte each step instead, so
// that a small budget buys the most. It reports whether it stopped
// at ctx's deadline rather than a local optimum.
func (s *localSearch) improve(ctx context.Context, m searchMode) bool {
	perByte := m != modeMinimax && s.budget >= 0
	order := s.rng.Perm(s.n)
	for {
		improved := false
		if perByte {
			best := heurCand{i: -1}
			for _, i := range order {
				s.scan(i, m, true, &best)
			}
			if ctx.Err() != nil {
				return true
			}
			if best.i >= 0 {
				s.apply(&best)
				improved = true
				if m == modeRepair && s.violation() == 0 {
					return false
				}
			}
		} else {
			for _, i := range order {
				if ctx.Err() != nil {
					return true
				}
				best := heurCand{i: -1}
				s.scan(i, m, false, &best)
				if best.i >= 0 {
					s.apply(&best)
					improved = true
					if m == modeRepair && s.violation() == 0 {
						return false // feasible: the next phases balance
					}
				}
			}
		}
		if !improved {
			return false
		}
	}
}

// afterSwap returns parts p's and q's rates and static memory after model
// i moves from p to q and, if k ≥ 0, model k from q to p.
func (s *localSearch) afterSwap(i, k, p, q int) (rp, rq float64, sp, sq int64) {
	rp, rq = s.prate[p]-s.rate[i], s.prate[q]+s.rate[i]
	sp, sq = s.pstat[p]-s.stat[i], s.pstat[q]+s.stat[i]
	if k >= 0 {
		rp += s.rate[k]
		rq -= s.rate[k]
		sp += s.stat[k]
		sq -= s.stat[k]
	}
	return rp, rq, sp, sq
}

// scan offers every move and swap of model i, updating best with the
// improving, feasible, affordable ones. With global set, swaps are only
// taken with later models in index order, each pair being scanned once.
func (s *localSearch) scan(i int, m searchMode, global bool, best *heurCand) {
	p := s.assign[i]
	var ta, tb top3
	var obj, vp float64
	switch m {
	case modeMinimax:
		ta, tb = makeTop3(s.a), makeTop3(s.b)
		obj = ta.v[0] + tb.v[0]
	case modeRepair:
		vp = s.partViolation(s.prate[p], s.pstat[p]+s.max1[p])
	}
	ap, bp := s.a[p], s.b[p]
	ci := s.cost(i, p)
	try := func(k, q int) {
		dr, ds := s.ra[i], s.sb[i]
		if k >= 0 {
			dr -= s.ra[k]
			ds -= s.sb[k]
		}
		aq, bq := s.a[q], s.b[q]
		df := 2*dr*(dr+aq-ap) + 2*ds*(ds+bq-bp)
		var dp float64
		switch m {
		case modeSmooth:
			if df >= -heurEps {
				return
			}
		case modeMinimax:
			na := max(ta.without(p, q), math.Abs(ap-dr), math.Abs(aq+dr))
			nb := max(tb.without(p, q), math.Abs(bp-ds), math.Abs(bq+ds))
			dp = na + nb - obj
			if dp > heurEps || (dp >= -heurEps && df >= -heurEps) {
				return
			}
		case modeRepair:
			rp, rq, sp, sq := s.afterSwap(i, k, p, q)
			vq := s.partViolation(s.prate[q], s.pstat[q]+s.max1[q])
			dp = s.partViolation(rp, sp+s.dynAfter(p, i, k)) + s.partViolation(rq, sq+s.dynAfter(q, k, i)) - vp - vq
			if dp > heurEps || (dp >= -heurEps && (df >= -heurEps || s.budget >= 0)) {
				// Under a budget, repair spends bytes only on
				// reducing the violation.
				return
			}
		}
		var dc int64
		if s.cur != nil {
			dc = s.cost(i, q) - ci
			if k >= 0 {
				dc += s.cost(k, p) - s.cost(k, q)
			}
			if s.budget >= 0 && s.disr+dc > s.budget {
				return
			}
		}
		c := heurCand{i: i, k: k, q: q, dp: dp, df: df, dc: dc}
		if !c.better(best, global && s.budget >= 0) {
			return
		}
		if m != modeRepair {
			rp, rq, sp, sq := s.afterSwap(i, k, p, q)
			if !s.fits(rp, sp, s.dynAfter(p, i, k)) || !s.fits(rq, sq, s.dynAfter(q, k, i)) {
				return
			}
		}
		*best = c
	}
	for q := 0; q < s.l; q++ {
		if q != p {
			try(-1, q)
		}
	}
	from := 0
	if global {
		from = i + 1
	}
	for k := from; k < s.n; k++ {
		if q := s.assign[k]; q != p && (s.ra[k] != s.ra[i] || s.sb[k] != s.sb[i] || s.dyn[k] != s.dyn[i]) {
			try(k, q)
		}
	}
}

func (s *localSearch) apply(c *heurCand) {
	p := s.assign[c.i]
	s.remove(c.i)
	if c.k >= 0 {
		s.remove(c.k)
		s.add(c.k, p)
	}
	s.add(c.i, c.q)
	s.disr += c.dc
}

// bestSnapshot keeps the best feasible assignment seen, by the paper's
// objective, since a phase that smooths the surrogate can worsen it.
type bestSnapshot struct {
	assign []int
	obj    float64
}

func (b *bestSnapshot) offer(s *localSearch) {
	if s.violation() > 0 || (s.budget >= 0 && s.disr > s.budget) {
		return
	}
	if o := s.objective(); b.assign == nil || o < b.obj-heurEps {
		b.assign, b.obj = append(b.assign[:0], s.assign...), o
	}
}

package provision

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// The brute force is the exact reference the planner is measured against
// (Harpagon §IV-B, Piccolo §IV-B): the cheapest provision in the planner's own
// provision space, found by exhaustive search. The space is:
//
//   - per module, any multiset of full machines over its configurations,
//     dispatched in ratio order, plus at most one partial machine, served
//     last, at any configuration; with dummies on, the machines may instead
//     exceed the rate by less than one machine's throughput of a
//     configuration they use, the excess being dummies (the form of
//     Theorem 2: one machine of c_i filled with t_i − u_i);
//   - per application, any combination of module provisions whose worst cases
//     sum to at most the SLO on every path.
//
// A module's provisions are reduced to their Pareto frontier of (worst-case
// latency, cost), found by depth-first search with branch-and-bound
// (a frontier point dominating a branch's lower bounds prunes it), and the
// frontiers are combined by a second branch-and-bound over the DAG. Both
// are exact; their cost grows with the machines per module, which is why
// it is a reference for small instances only.

// ErrTooLarge is returned when the brute force would exceed its node
// budget.
var ErrTooLarge = errors.New("provision: instance too large for the brute force")

// BruteForceNodes is the default node budget of BruteForce per module.
const BruteForceNodes = 20_000_000

// frontPoint is one Pareto-optimal module provision.
type frontPoint struct {
	lat, cost float64
	tiers     []tier
}

// frontier is a Pareto set: sorted by latency ascending, cost strictly
// descending.
type frontier []frontPoint

// dominated reports whether some point has latency ≤ lat and cost ≤ cost.
func (f frontier) dominated(lat, cost float64) bool {
	// the last point with p.lat <= lat has the least cost among those
	i := sort.Search(len(f), func(i int) bool { return f[i].lat > lat+eps })
	return i > 0 && f[i-1].cost <= cost+1e-9*math.Max(1, cost)
}

// add inserts a point unless it is dominated, removing what it dominates.
func (f frontier) add(p frontPoint) frontier {
	if f.dominated(p.lat, p.cost) {
		return f
	}
	out := make(frontier, 0, len(f)+1)
	inserted := false
	for _, q := range f {
		if q.lat >= p.lat-eps && q.cost >= p.cost-1e-9*math.Max(1, p.cost) {
			continue // dominated by p
		}
		if !inserted && q.lat > p.lat {
			out = append(out, p)
			inserted = true
		}
		out = append(out, q)
	}
	if !inserted {
		out = append(out, p)
	}
	return out
}

// exact returns the cheapest provision for rate T whose worst case is at most
// lam (seconds), ties going to the lower latency, or nil when there is
// none: a depth-first branch-and-bound over the provision space, seeded with
// seed (the heuristic's provision; nil for none) as the incumbent. Full tiers are tried in
// ratio order, the most machines first; a tier is only pushed if it can
// still meet lam (its w can only grow by the dummies of the last tier), and
// a branch is cut when its cost so far plus a lower bound on serving the
// rest reaches the incumbent's. Every node may end with the rest of the
// rate on one machine of any configuration: a partial machine, or (with
// dummies) a full one topped up. visited counts search nodes across calls;
// when it passes nodes, exact stops and reports false, with the best provision
// found so far.
func (s *modSched) exact(T, lam float64, seed *modProv, nodes int, visited *int) (*modProv, bool) {
	cs := s.cs
	K := len(cs)
	minCostRate, maxTput := math.Inf(1), 0.0
	for i := range cs {
		minCostRate = math.Min(minCostRate, cs[i].costRate)
		maxTput = math.Max(maxTput, cs[i].tput)
	}
	// Candidates are sorted by ratio, so costRate[k] is the least cost per
	// req/s of the full tiers from k on; the partial machine (less than one
	// machine's throughput) may be at any configuration.
	costLB := func(k int, rw float64) float64 {
		part := math.Min(rw, maxTput)
		if k >= K {
			return part * minCostRate
		}
		return (rw-part)*cs[k].costRate + part*minCostRate
	}
	best := seed
	tol := func() float64 {
		if !best.ok() {
			return 0
		}
		return 1e-9 * math.Max(1, best.cost)
	}
	// The stack holds full tiers in candidate order, one per candidate, so
	// it is canonical and its length is its number of configurations.
	var stack []tier
	// consider evaluates the stack plus one machine at P (a partial one at
	// rate r, or a full one when full is set; P < 0 for none) without
	// building the provision, and keeps it if it is the best so far.
	consider := func(P int, r float64, full bool) {
		if P >= 0 && s.maxConfigs > 0 && len(stack) >= s.maxConfigs {
			in := false
			for _, t := range stack {
				in = in || t.c == P
			}
			if !in {
				return
			}
		}
		total, cost := 0.0, 0.0
		for _, t := range stack {
			total += float64(t.full) * cs[t.c].tput
			cost += float64(t.full) * cs[t.c].price
		}
		extra := 0.0
		if P >= 0 {
			if full {
				extra, cost = cs[P].tput, cost+cs[P].price
			} else {
				extra, cost = r, cost+cs[P].price*r/cs[P].tput
			}
		}
		if best.ok() && cost > best.cost+tol() {
			return
		}
		w := total + extra
		lat := 0.0
		placed := P < 0 || !full
		for _, t := range stack {
			n := t.full
			if !placed && P < t.c {
				lat = math.Max(lat, s.disp.full(&cs[P], w))
				w -= extra
				placed = true
			} else if !placed && P == t.c {
				n++
				placed = true
			}
			lat = math.Max(lat, s.disp.full(&cs[t.c], w))
			w -= float64(n) * cs[t.c].tput
			if lat > lam+eps {
				return
			}
		}
		if !placed {
			lat = math.Max(lat, s.disp.full(&cs[P], w))
		}
		if P >= 0 && !full {
			lat = math.Max(lat, s.disp.partial(&cs[P], r))
		}
		if lat > lam+eps {
			return
		}
		q := &modProv{tiers: []tier{}, lat: lat, cost: cost, total: total + extra}
		if !better(q, best) {
			return
		}
		ts := append([]tier(nil), stack...)
		if P >= 0 {
			if full {
				ts = append(ts, tier{c: P, full: 1})
			} else {
				ts = append(ts, tier{c: P, part: r})
			}
		}
		q.tiers = normalize(ts)
		best = q
	}
	// cut reports whether a branch whose cost is at least lb can be
	// dropped.
	cut := func(lb float64) bool { return best.ok() && lb > best.cost+tol() }
	var dfs func(k int, rw, cost float64) bool
	dfs = func(k int, rw, cost float64) bool {
		if *visited++; *visited > nodes {
			return false
		}
		if cut(cost + costLB(k, rw)) {
			return true
		}
		if rw <= eps {
			if len(stack) > 0 {
				consider(-1, 0, false)
			}
			return true
		}
		// The rest on one machine at P: a partial machine, or a full one
		// topped up with dummies.
		for P := range cs {
			c := &cs[P]
			if c.tput <= rw+eps {
				continue
			}
			if s.disp.partial(c, rw) <= lam+eps && !cut(cost+c.price*rw/c.tput) {
				consider(P, rw, false)
			}
			if s.dummy && !cut(cost+c.price) {
				consider(P, 0, true)
			}
		}
		if s.maxConfigs > 0 && len(stack) >= s.maxConfigs {
			return true
		}
		for j := k; j < K; j++ {
			c := &cs[j]
			w := rw
			if s.dummy {
				w += maxTput
			}
			if s.disp.full(c, w) > lam+eps {
				continue
			}
			nmax := int(math.Floor(rw/c.tput + eps))
			for n := nmax; n >= 1; n-- {
				stack = append(stack, tier{c: j, full: n})
				r := rw - float64(n)*c.tput
				if r < eps {
					r = 0
				}
				ok := dfs(j+1, r, cost+float64(n)*c.price)
				stack = stack[:len(stack)-1]
				if !ok {
					return false
				}
			}
		}
		return true
	}
	done := dfs(0, T, 0)
	if !best.ok() {
		return nil, done
	}
	return best, done
}

// frontier returns the Pareto frontier of (worst-case latency, cost) of
// the module's provisions for rate T with worst case at most maxLat: the
// cheapest provision within maxLat, then the cheapest strictly faster than it,
// and so on until none is left. nodes bounds the search nodes in all.
func (s *modSched) frontier(T, maxLat float64, nodes int) (frontier, error) {
	var f frontier
	visited := 0
	lam := maxLat
	for len(f) < 100_000 {
		p, ok := s.exact(T, lam, s.heuristic(T, lam), nodes, &visited)
		if !ok {
			return nil, fmt.Errorf("%w: more than %d search nodes for one module", ErrTooLarge, nodes)
		}
		if p == nil {
			break
		}
		f = f.add(frontPoint{lat: p.lat, cost: p.cost, tiers: p.tiers})
		lam = p.lat - 2*eps
	}
	return f, nil
}

// BruteForce returns the cheapest provision of app in the planner's provision space
// under o's dispatch model, configuration limit and dummy setting (the
// split options do not apply: every split is tried). It returns an error
// wrapping ErrTooLarge when a module, or the combination of the modules'
// frontiers, needs more than nodes search nodes (0 means
// BruteForceNodes), and one wrapping ErrInfeasible when no provision fits.
func BruteForce(app *App, o Options, nodes int) (*Provision, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	in, err := compile(app)
	if err != nil {
		return nil, err
	}
	if nodes <= 0 {
		nodes = BruteForceNodes
	}
	if !o.SingleHardware {
		return bruteForce(in, in.cands, o, nodes)
	}
	var best *Provision
	for h := range in.hw {
		cs := restrict(in, h)
		if cs == nil {
			continue
		}
		p, err := bruteForce(in, cs, o, nodes)
		if errors.Is(err, ErrInfeasible) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if best == nil || p.CostPerHour < best.CostPerHour {
			best = p
		}
	}
	if best == nil {
		return nil, fmt.Errorf("%w (brute force on a single hardware kind)", ErrInfeasible)
	}
	return best, nil
}

func bruteForce(in *instance, cs [][]cand, o Options, nodes int) (*Provision, error) {
	n := len(in.names)
	// The least latency any provision of m can have is its fastest execution;
	// a module's worst case can use at most the SLO less the others' least
	// on the longest path through it.
	maxLat := maxLatencies(in, cs)
	fronts := make([]frontier, n)
	for m := 0; m < n; m++ {
		s := &modSched{cs: cs[m], disp: o.Dispatch, maxConfigs: o.MaxConfigs, dummy: o.Dummy, search: 64}
		f, err := s.frontier(in.rate[m], maxLat[m], nodes)
		if err != nil {
			return nil, fmt.Errorf("module %s: %w", in.names[m], err)
		}
		if len(f) == 0 {
			return nil, fmt.Errorf("%w (brute force: module %s has no provision within %v)", ErrInfeasible, in.names[m], seconds(maxLat[m]))
		}
		fronts[m] = f
	}
	choice, _, ok, done := combine(in, fronts, nodes)
	if !done {
		return nil, fmt.Errorf("%w: more than %d search nodes combining the modules' provisions", ErrTooLarge, nodes)
	}
	if !ok {
		return nil, fmt.Errorf("%w (brute force: no combination of module provisions fits)", ErrInfeasible)
	}
	s := &solution{cs: cs, disp: o.Dispatch, mods: make([]*modProv, n)}
	for m, i := range choice {
		fp := fronts[m][i]
		s.mods[m] = &modProv{tiers: fp.tiers, lat: fp.lat, cost: fp.cost}
		_, _, s.mods[m].total = evalTiers(cs[m], o.Dispatch, fp.tiers)
		s.cost += fp.cost
	}
	return s.provision(in, o, "brute-force"), nil
}

// combine picks one frontier point per module, minimising the total cost
// with every path's latencies within the SLO: depth-first in topological
// order over each frontier from cheapest (slowest) to dearest, pruned by
// the least cost of the modules left and the least latency the paths still
// need. It visits at most nodes choices; done is false when it stopped
// there (the search is exponential in the modules).
func combine(in *instance, fronts []frontier, nodes int) (choice []int, cost float64, ok, done bool) {
	n := len(in.names)
	minLat := make([]float64, n)
	minCost := make([]float64, n)
	for m, f := range fronts {
		minLat[m] = f[0].lat
		minCost[m] = f[len(f)-1].cost
	}
	tail := make([]float64, n) // least latency needed after m on any path
	for i := n - 1; i >= 0; i-- {
		m := in.topo[i]
		for _, c := range in.children[m] {
			tail[m] = math.Max(tail[m], tail[c]+minLat[c])
		}
	}
	rest := make([]float64, n+1)
	for i := n - 1; i >= 0; i-- {
		rest[i] = rest[i+1] + minCost[in.topo[i]]
	}
	finish := make([]float64, n)
	choice = make([]int, n)
	best := math.Inf(1)
	var bestChoice []int
	below := func(x float64) bool { return math.IsInf(best, 1) || x < best-1e-12*math.Max(1, best) }
	visited := 0
	var dfs func(i int, acc float64)
	dfs = func(i int, acc float64) {
		if visited++; visited > nodes {
			return
		}
		if i == n {
			if below(acc) {
				best = acc
				bestChoice = append(bestChoice[:0], choice...)
			}
			return
		}
		m := in.topo[i]
		start := 0.0
		for _, p := range in.parents[m] {
			start = math.Max(start, finish[p])
		}
		f := fronts[m]
		for k := len(f) - 1; k >= 0; k-- { // cheapest first
			if !below(acc + f[k].cost + rest[i+1]) {
				break // costs only grow from here
			}
			if start+f[k].lat+tail[m] > in.slo+eps {
				continue
			}
			finish[m] = start + f[k].lat
			choice[m] = k
			dfs(i+1, acc+f[k].cost)
		}
	}
	dfs(0, 0)
	return bestChoice, best, bestChoice != nil, visited <= nodes
}

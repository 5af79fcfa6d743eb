package provision

import (
	"math"
)

// modSched is the module scheduler (Harpagon §III-C) for one module: given
// the module's rate and a latency budget it returns the cheapest list of
// configurations it finds whose every machine meets the budget under the
// dispatch model.
type modSched struct {
	cs   []cand
	disp Dispatch
	// maxConfigs bounds the distinct configurations (0: any number):
	// Nexus and Scrooge use two, InferLine and Clipper one.
	maxConfigs int
	// dummy enables the dummy generator.
	dummy bool
	// search is the number of greedy leaves Algorithm 1's backtracking may
	// visit when its first pass fails; 1 is the paper's algorithm alone.
	search int
	// nodes is the node budget of the branch-and-bound that improves on
	// the heuristic's provision; 0 disables it.
	nodes int

	buf []tier
}

// modProv is a module provision: canonical tiers and their measures.
type modProv struct {
	tiers []tier
	lat   float64 // worst case, seconds
	cost  float64 // per hour
	total float64 // assigned rate, the module's rate plus dummies
}

func (p *modProv) ok() bool { return p != nil && p.tiers != nil }

// better reports whether q is a feasible provision cheaper than p (or p has
// none). Costs within a relative 1e-9 are equal, and then the lower latency
// wins, so that exact ties do not flip on rounding.
func better(q, p *modProv) bool {
	if !q.ok() {
		return false
	}
	if !p.ok() {
		return true
	}
	tol := 1e-9 * math.Max(1, p.cost)
	if q.cost < p.cost-tol {
		return true
	}
	return q.cost <= p.cost+tol && q.lat < p.lat-eps
}

// measure builds an modProv from canonical tiers (copied).
func (s *modSched) measure(ts []tier) *modProv {
	p := &modProv{tiers: append([]tier(nil), ts...)}
	p.lat, p.cost, p.total = evalTiers(s.cs, s.disp, p.tiers)
	return p
}

// schedule returns the cheapest provision it finds for rate T within budget L
// (seconds), or nil when it finds none: the heuristic's provision, improved by a
// branch-and-bound of at most s.nodes nodes when s.nodes > 0.
func (s *modSched) schedule(T, L float64) *modProv {
	best := s.heuristic(T, L)
	if s.nodes > 0 {
		visited := 0
		if q, _ := s.exact(T, L, best, s.nodes, &visited); better(q, best) {
			best = q
		}
	}
	return best
}

// heuristic is the papers' module scheduler: Algorithm 1 (with
// backtracking when the greedy pass leaves a remainder no configuration can
// serve), then the dummy generator on its result.
func (s *modSched) heuristic(T, L float64) *modProv {
	var best *modProv
	if ts := s.greedy(T, L); ts != nil {
		best = s.measure(ts)
	}
	if s.dummy {
		if q := s.dummies(T, L, best); better(q, best) {
			best = q
		}
	}
	return best
}

// greedy is Harpagon's Algorithm 1 (Piccolo's is the same), with the slips
// of the printed pseudo-code fixed:
//
//   - line 18 ("return True, configs") is printed inside the else branch,
//     which would return after the first infeasible configuration; it
//     belongs after the while loop.
//   - line 15 (c ← P_M[++k]) reads one past the end before line 16 checks
//     k; the check comes first here.
//   - rw ≠ 0 (line 4) on floating point never ends when floor(n)·t leaves
//     1e-14; a remainder below eps counts as zero.
//
// Configurations are tried in ratio order. While the remaining workload rw
// is at least one machine's throughput, the configuration takes floor(rw/t)
// full machines if its full-machine latency at w = rw meets L; the
// remainder then goes to one partial machine of the same configuration if
// d + b/rw meets L, else to the next configuration. With maxConfigs set,
// the last allowed configuration must take all that is left (the classic
// two-tuple ⟨c_opt, c_res⟩ when it is 2).
//
// When the greedy pass fails (a small remainder that no configuration
// collects in time, say), the search continues depth-first with fewer full
// machines at the last configurations, up to s.search leaves, and returns
// the first feasible provision; nil when there is none.
func (s *modSched) greedy(T, L float64) []tier {
	s.buf = s.buf[:0]
	leaves := 0
	limit := max(1, s.search)
	var dfs func(k int, rw float64) bool
	// atPartial continues at candidate k after its full machines: the
	// remainder rw goes to a partial machine at k if it can, else on.
	atPartial := func(k int, rw float64) bool {
		if rw <= eps {
			leaves++
			return true
		}
		c := &s.cs[k]
		if rw < c.tput && s.disp.partial(c, rw) <= L+eps {
			n := len(s.buf)
			s.buf[n-1].part = rw
			leaves++
			return true
		}
		return dfs(k+1, rw)
	}
	dfs = func(k int, rw float64) bool {
		if rw <= eps {
			leaves++
			return true
		}
		if k >= len(s.cs) || leaves >= limit {
			leaves++
			return false
		}
		c := &s.cs[k]
		used := distinct(s.buf)
		if s.maxConfigs > 0 && used >= s.maxConfigs {
			leaves++
			return false
		}
		if s.maxConfigs > 0 && used == s.maxConfigs-1 {
			// The last allowed configuration takes everything.
			n := int(math.Floor(rw/c.tput + eps))
			r := rw - float64(n)*c.tput
			if r < eps {
				r = 0
			}
			if (n == 0 || s.disp.full(c, rw) <= L+eps) && (r == 0 || s.disp.partial(c, r) <= L+eps) {
				s.buf = append(s.buf, tier{c: k, full: n, part: r})
				leaves++
				return true
			}
			return dfs(k+1, rw)
		}
		if rw >= c.tput-eps {
			if s.disp.full(c, rw) <= L+eps {
				nmax := int(math.Floor(rw/c.tput + eps))
				for n := nmax; n >= 1; n-- {
					s.buf = append(s.buf, tier{c: k, full: n})
					r := rw - float64(n)*c.tput
					if r < eps {
						r = 0
					}
					if atPartial(k, r) {
						return true
					}
					s.buf = s.buf[:len(s.buf)-1]
					if leaves >= limit {
						return false
					}
				}
			}
		} else if s.disp.partial(c, rw) <= L+eps {
			s.buf = append(s.buf, tier{c: k, part: rw})
			leaves++
			return true
		}
		return dfs(k+1, rw)
	}
	if !dfs(0, T) {
		return nil
	}
	return normalize(append([]tier(nil), s.buf...))
}

// dummies is the dummy generator (Harpagon §III-C, Theorem 2). In a
// cost-minimum provision the leftover workload u_i after configuration c_i (the
// rate of every tier dispatched after it) is below c_i's throughput t_i, so
// it fits on one more machine at c_i, filled with dum_i = t_i − u_i dummy
// requests; that machine runs at c_i's better ratio, and often the module
// costs less though it serves more. For the prefix before each tier of the
// base provision (and the empty prefix, so that a module the greedy pass cannot
// serve at all may still be served), it tries giving all the remaining
// workload to full machines of each configuration, the last one filled with
// dummies: dum_i = t_i − u_i for the tier's own configuration, the same
// rule for the others. The cheapest feasible provision wins.
//
// Piccolo §III-D writes dum_i = b_i/(L_M − d_i) − u_i, the smallest rate at
// which a partial machine at c_i meets the budget. In its M1 example the
// two agree (100/(2.0 − 1.0) − 85 = 15 = 100 − 85); in general the Piccolo
// form would leave a partial machine whose padding, and so the cost, varies
// continuously with the budget. Provisions here keep to the discrete form:
// dummies only ever fill the last machine of one configuration, so a
// module's dummy rate is below that configuration's throughput. That
// configuration need not be dispatched last (normalize puts it in ratio
// order); the provision books the dummies on the last configurations.
func (s *modSched) dummies(T, L float64, base *modProv) *modProv {
	var best *modProv
	// The prefixes: every whole-tier prefix of the base provision, and the
	// base provision without its partial machine.
	prefixes := [][]tier{nil}
	if base.ok() {
		for i := 1; i < len(base.tiers); i++ {
			prefixes = append(prefixes, base.tiers[:i])
		}
		if last := base.tiers[len(base.tiers)-1]; last.part > 0 && last.full > 0 {
			p := append([]tier(nil), base.tiers[:len(base.tiers)-1]...)
			prefixes = append(prefixes, append(p, tier{c: last.c, full: last.full}))
		}
	}
	for _, pre := range prefixes {
		rw := T
		for _, t := range pre {
			rw -= t.rate(s.cs)
		}
		if rw <= eps {
			continue
		}
		for j := range s.cs {
			c := &s.cs[j]
			n := int(math.Ceil(rw/c.tput - eps))
			ts := append(append(s.buf[:0], pre...), tier{c: j, full: n})
			ts = normalize(ts)
			if s.maxConfigs > 0 && distinct(ts) > s.maxConfigs {
				continue
			}
			lat, cost, total := evalTiers(s.cs, s.disp, ts)
			if lat > L+eps {
				continue
			}
			q := &modProv{tiers: ts, lat: lat, cost: cost, total: total}
			if better(q, best) {
				q.tiers = append([]tier(nil), ts...)
				best = q
			}
		}
	}
	return best
}

// residual re-provisions what a provision's first tier leaves, within budget L: the
// latency reassigner's move (Harpagon §III-C), which gives a module's slack
// to its residual workload, where the majority's configuration would not
// change. It returns nil when the re-provision is not feasible.
func (s *modSched) residual(p *modProv, T, L float64) *modProv {
	if !p.ok() || len(p.tiers) < 2 || p.tiers[0].full == 0 {
		return nil
	}
	head := tier{c: p.tiers[0].c, full: p.tiers[0].full}
	rw := T - head.rate(s.cs)
	if rw <= eps {
		return nil
	}
	sub := *s
	sub.buf = nil
	if s.maxConfigs > 0 {
		sub.maxConfigs = s.maxConfigs - 1
		if sub.maxConfigs == 0 {
			return nil
		}
	}
	r := sub.schedule(rw, L)
	if !r.ok() {
		return nil
	}
	ts := normalize(append([]tier{head}, r.tiers...))
	if s.maxConfigs > 0 && distinct(ts) > s.maxConfigs {
		return nil
	}
	q := s.measure(ts)
	if q.lat > L+eps {
		return nil
	}
	return q
}

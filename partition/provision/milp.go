package provision

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/symphony-serving/symphony/partition/lpsolve"
)

// This file is Scrooge's allocation MILP (§3.3, Eqs. 1-3), solved through
// the same open-source solver path as the partitioner (package lpsolve:
// cbc or glpsol). Variables, for module i and candidate configuration k:
//
//	x_i_k  binary: i uses k
//	f_i_k  ≥ 0: the rate i assigns to k (Scrooge's t_ij^k)
//	u_i_k  ≥ 0: machines of k for i, f_i_k / θ_k (Eq. 1), θ_k = b·e/d
//	s_i    ≥ 0: when i may start on its longest path (Scrooge's l_i)
//	lmax   the critical latency of the DAG (Eq. 2d)
//
// and the rows:
//
//	min Σ price_k u_i_k                                        (2a)
//	Σ_k f_i_k = r_i                                            (2b)
//	f_i_k ≤ r_i x_i_k  (x·t = t linearised)                    (2b)
//	u_i_k − f_i_k/θ_k = 0                                      (1)
//	s_n − s_m − W_m_k x_m_k ≥ 0 for every edge m→n, every k    (2c)
//	lmax − s_m − W_m_k x_m_k ≥ 0 for every sink m, every k     (2d)
//	lmax ≤ SLO                                                 (2d)
//
// with W = d + b/θ, the worst case of a full machine collecting at its own
// throughput. Latencies are continuous seconds rather than Scrooge's
// integer milliseconds. Machines are continuous: the MILP charges partial
// allocations by occupancy but prices their latency as if they were full,
// so its optimum is a bound, and its allocation is refined afterwards
// (Eq. 3): every configuration keeps its whole machines, and the fractions
// left over are pooled on the one configuration that serves them cheapest
// within the module's latency allowance (module by module in topological
// order: what the refined predecessors leave of the SLO before the MILP
// latencies of the successors), as a partial machine collecting at its own
// rate (W* = d + b/t_assigned) or as full machines filled with dummies. Scrooge re-runs the MILP per partial worker with the non-convex
// Eq. 3 and falls back to a greedy search when Gurobi does not converge;
// the greedy refinement is what runs here.

// MILPResult describes one Scrooge MILP solve.
type MILPResult struct {
	// Solver is the program that ran (cbc or glpsol); Status its verdict.
	Solver string
	Status string
	// Optimal reports a proven optimum of the MILP (not of the refined
	// provision).
	Optimal bool
	// Objective is the MILP's cost per hour, a bound on provisions whose
	// partial machines would collect at full speed.
	Objective float64
	// SolveTime is the whole solve, writing the model included.
	SolveTime time.Duration
	// Notes explain a stop before optimality, or a refinement that failed.
	Notes []string
}

// SolveMILP provisions app with Scrooge's MILP, through solver ("cbc",
// "glpsol", an absolute path to one, or "" for the first installed), under
// ctx's deadline (lpsolve.DefaultTimeLimit without one). The provision uses the
// machine-throughput latency model and is named "scrooge-milp". An error
// wraps lpsolve.ErrNoSolver when no solver is installed, and ErrInfeasible
// when the solver proves there is no allocation or the refinement finds no
// provision.
func SolveMILP(ctx context.Context, app *App, solver string) (*Provision, *MILPResult, error) {
	start := time.Now()
	in, err := compile(app)
	if err != nil {
		return nil, nil, err
	}
	s, err := lpsolve.Find(solver)
	if err != nil {
		return nil, nil, fmt.Errorf("provision: scrooge milp: %w", err)
	}
	res := &MILPResult{Solver: string(s.Kind)}
	run, err := s.Solve(ctx, func(w io.Writer) error { return writeScroogeLP(w, in) }, lpsolve.Options{})
	if err != nil {
		return nil, res, fmt.Errorf("provision: scrooge milp: %w", err)
	}
	sol := run.Solution
	res.Status, res.Objective = sol.Status.String(), sol.Objective
	res.Optimal = sol.Status == lpsolve.Optimal
	switch sol.Status {
	case lpsolve.Infeasible:
		return nil, res, fmt.Errorf("%w: %s proved Scrooge's MILP infeasible (%s)", ErrInfeasible, s.Kind, sol.Summary)
	case lpsolve.NoSolution:
		return nil, res, fmt.Errorf("%w: %s found no allocation within its %v time limit", ErrInfeasible, s.Kind, run.Limit)
	case lpsolve.Feasible:
		res.Notes = append(res.Notes, run.StopNote())
	}
	p, err := refineMILP(in, sol)
	res.SolveTime = time.Since(start)
	if err != nil {
		res.Notes = append(res.Notes, err.Error())
		return nil, res, err
	}
	return p, res, nil
}

func milpVar(kind string, i, k int) string {
	return kind + "_" + strconv.Itoa(i) + "_" + strconv.Itoa(k)
}

// milpW is Scrooge's worst case of a full machine at c (Eq. 2c's W).
func milpW(c *cand) float64 { return MachineThroughput.full(c, 0) }

// writeScroogeLP writes the MILP above in CPLEX LP format.
func writeScroogeLP(out io.Writer, in *instance) error {
	w := lpsolve.NewWriter(out)
	w.ZeroVar = "lmax"
	w.Text(fmt.Sprintf("\\ Scrooge allocation MILP (Scrooge §3.3, Eqs. 1-2): %d modules; latencies in seconds\n", len(in.names)))
	w.Text("Minimize\n")
	w.Row("cost")
	for i, cs := range in.cands {
		for k := range cs {
			w.Term(cs[k].price, milpVar("u", i, k))
		}
	}
	w.EndObjective()
	w.Text("Subject To\n")
	for i, cs := range in.cands {
		is := strconv.Itoa(i)
		w.Row("rate_" + is)
		for k := range cs {
			w.Term(1, milpVar("f", i, k))
		}
		w.End("=", in.rate[i])
		for k := range cs {
			w.Row(milpVar("link", i, k))
			w.Term(1, milpVar("f", i, k))
			w.Term(-in.rate[i], milpVar("x", i, k))
			w.End("<=", 0)
			w.Row(milpVar("machines", i, k))
			w.Term(1, milpVar("u", i, k))
			w.Term(-1/cs[k].tput, milpVar("f", i, k))
			w.End("=", 0)
		}
	}
	for _, m := range in.topo {
		ms := strconv.Itoa(m)
		targets := in.children[m]
		for k := range in.cands[m] {
			W := milpW(&in.cands[m][k])
			for _, n := range targets {
				w.Row("path_" + ms + "_" + strconv.Itoa(n) + "_" + strconv.Itoa(k))
				w.Term(1, "s_"+strconv.Itoa(n))
				w.Term(-1, "s_"+ms)
				w.Term(-W, milpVar("x", m, k))
				w.End(">=", 0)
			}
			if len(targets) == 0 {
				w.Row("sink_" + ms + "_" + strconv.Itoa(k))
				w.Term(1, "lmax")
				w.Term(-1, "s_"+ms)
				w.Term(-W, milpVar("x", m, k))
				w.End(">=", 0)
			}
		}
	}
	w.Text("Bounds\n")
	w.Text(" 0 <= lmax <= " + lpsolve.Num(in.slo) + "\n")
	for i := range in.cands {
		w.Text(" s_" + strconv.Itoa(i) + " >= 0\n")
	}
	w.Text("Binaries\n")
	for i, cs := range in.cands {
		for k := range cs {
			w.Name(milpVar("x", i, k))
		}
	}
	w.EndNames()
	w.Text("End\n")
	return w.Flush()
}

// milpTol is how far from 0 a solver's value must be to count.
const milpTol = 1e-6

// refineMILP turns a solution into a provision (Eq. 3's refinement, see the
// file comment), checking what it reads: rates must add up, latencies must
// fit.
func refineMILP(in *instance, sol *lpsolve.Solution) (*Provision, error) {
	n := len(in.names)
	// The modules' MILP latencies: the largest W of the configurations
	// each uses. Modules are refined in topological order, each within
	// what its predecessors' refined provisions leave of the SLO before the
	// MILP latencies of the modules after it (tail); its full machines
	// take W, which always fits, and its pooled fractions the cheapest
	// option that fits, leaving the rest of the slack to later modules.
	W := make([]float64, n)
	for i, cs := range in.cands {
		for k := range cs {
			if sol.Value(milpVar("f", i, k)) > milpTol {
				W[i] = math.Max(W[i], milpW(&cs[k]))
			}
		}
	}
	tail := make([]float64, n)
	for j := n - 1; j >= 0; j-- {
		m := in.topo[j]
		for _, c := range in.children[m] {
			tail[m] = math.Max(tail[m], W[c]+tail[c])
		}
	}
	finish := make([]float64, n)
	s := &solution{cs: in.cands, disp: MachineThroughput, mods: make([]*modProv, n)}
	for _, i := range in.topo {
		cs := in.cands[i]
		start := 0.0
		for _, p := range in.parents[i] {
			start = math.Max(start, finish[p])
		}
		allow := in.slo - start - tail[i]
		var ts []tier
		sum, residual := 0.0, 0.0
		for k := range cs {
			f := sol.Value(milpVar("f", i, k))
			if f < -milpTol || math.IsNaN(f) {
				return nil, fmt.Errorf("provision: scrooge milp: module %s gets %g req/s on configuration %d", in.names[i], f, k)
			}
			if f <= milpTol {
				continue
			}
			if x := sol.Value(milpVar("x", i, k)); x < 0.5 {
				return nil, fmt.Errorf("provision: scrooge milp: module %s assigns %g req/s to configuration %d it does not use", in.names[i], f, k)
			}
			sum += f
			u := f / cs[k].tput
			full := math.Floor(u + 1e-9)
			if full > 0 {
				ts = append(ts, tier{c: k, full: int(full)})
			}
			if frac := f - full*cs[k].tput; frac > milpTol {
				residual += frac
			}
		}
		if math.Abs(sum-in.rate[i]) > 1e-6*math.Max(1, in.rate[i]) {
			return nil, fmt.Errorf("provision: scrooge milp: module %s is assigned %g req/s of %g", in.names[i], sum, in.rate[i])
		}
		mp := refineResidual(cs, ts, residual, allow+eps)
		if mp == nil {
			return nil, fmt.Errorf("%w: scrooge milp: module %s's %g req/s of partial allocations fit no configuration within %v", ErrInfeasible, in.names[i], residual, seconds(allow))
		}
		s.mods[i] = mp
		s.cost += mp.cost
		finish[i] = start + mp.lat
	}
	// The refined worst cases fit each module's allowance, and the
	// allowances fit the SLO; check the whole anyway.
	through := longestThrough(in, func(m int) float64 { return s.mods[m].lat })
	for m, l := range through {
		if l > in.slo+eps*float64(in.pathLen[m]) {
			return nil, fmt.Errorf("provision: scrooge milp: the refined provision's path through %s takes %v, over the SLO", in.names[m], seconds(l))
		}
	}
	p := s.provision(in, Options{Dispatch: MachineThroughput, Dummy: true}, "scrooge-milp")
	p.Notes = append(p.Notes, "Scrooge's MILP (Eqs. 1-2) with the Eq. 3 refinement of partial allocations")
	return p, nil
}

// refineResidual adds the pooled partial allocations (residual req/s) to
// the whole machines ts: on the configuration that serves them cheapest
// within allow, either as full machines and one partial machine, or as
// full machines topped up with dummies. It returns nil when nothing fits.
func refineResidual(cs []cand, ts []tier, residual, allow float64) *modProv {
	s := &modSched{cs: cs, disp: MachineThroughput}
	if residual <= milpTol {
		if len(ts) == 0 {
			return nil
		}
		p := s.measure(normalize(append([]tier(nil), ts...)))
		if p.lat > allow {
			return nil
		}
		return p
	}
	var best *modProv
	for k := range cs {
		c := &cs[k]
		n := int(math.Floor(residual/c.tput + eps))
		r := residual - float64(n)*c.tput
		for _, extra := range []tier{{c: k, full: n, part: r}, {c: k, full: n + 1}} {
			if extra.part <= milpTol {
				extra.part = 0
			}
			if extra.full == 0 && extra.part == 0 {
				continue
			}
			q := s.measure(normalize(append(append([]tier(nil), ts...), extra)))
			if q.lat <= allow && better(q, best) {
				best = q
			}
		}
	}
	return best
}

package partition

// This file writes Appendix A.1's MILP in CPLEX LP format (through
// lpsolve.Writer) and turns a solver's solution back into an assignment;
// running the solvers and reading their files is package lpsolve's.
//
// Variables:
//
//	x_i_j  binary, model i (its index in Problem.Models) placed on part j
//	dR     continuous ≥ 0, ΔR of Eq. 7, requests per second
//	dS     continuous ≥ 0, ΔS of Eq. 8, in MiB
//	D_j    continuous ≥ 0, part j's largest dynamic memory (Eq. 6), in MiB
//
// Memory is written in MiB (bytes/2^20, exact in binary floating point) so
// that no coefficient is near 1e10; the objective's w is scaled to match, so
// the solver's objective value is the true ΔR + w·ΔS.

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/symphony-serving/symphony/partition/lpsolve"
)

// mib is the memory unit of the LP model.
const mib = 1 << 20

// lpOptions are the choices writeLP makes beyond the problem itself.
type lpOptions struct {
	// symmetric drops x_i_j for j > i: when no constraint tells parts apart
	// (no disruption row), every partition can be relabelled so that parts
	// are numbered in order of their lowest-indexed model, and then model i
	// is on a part ≤ i. This removes the l! equivalent labellings that
	// otherwise make branch-and-bound revisit the same partition.
	symmetric bool
}

// xName is the LP name of x_ij.
func xName(i, j int) string { return "x_" + strconv.Itoa(i) + "_" + strconv.Itoa(j) }

// hasX reports whether writeLP declares x_ij under o.
func (o lpOptions) hasX(i, j int) bool { return !o.symmetric || j <= i }

// disruptionRow reports whether the problem has Eq. 11.
func disruptionRow(p *Problem) bool { return p.Current != nil && p.MaxDisruption >= 0 }

// writeLP writes p as the MILP of Appendix A.1 (Eqs. 4-11) in CPLEX LP
// format. p must be valid.
func writeLP(out io.Writer, p *Problem, o lpOptions) error {
	w := lpsolve.NewWriter(out)
	w.ZeroVar = "dR"
	m, l := len(p.Models), p.Parts
	var totalRate, totalStatic float64
	for _, md := range p.Models {
		totalRate += md.Rate
		totalStatic += float64(md.StaticMemory) / mib
	}
	avgRate, avgStatic := totalRate/float64(l), totalStatic/float64(l)
	memory := p.GPUMemory > 0

	w.Text(fmt.Sprintf("\\ Symphony partitioning MILP (paper Appendix A.1): %d models, %d parts; memory in MiB\n", m, l))
	w.Text("Minimize\n obj: dR + " + lpsolve.Num(p.Weight()*mib) + " dS\n")
	w.Text("Subject To\n")
	// Eq. 9: every model on exactly one part.
	for i := 0; i < m; i++ {
		w.Row("assign_" + strconv.Itoa(i))
		for j := 0; j < l; j++ {
			if o.hasX(i, j) {
				w.Term(1, xName(i, j))
			}
		}
		w.End("=", 1)
	}
	for j := 0; j < l; j++ {
		js := strconv.Itoa(j)
		rate := func() {
			for i, md := range p.Models {
				if o.hasX(i, j) {
					w.Term(md.Rate, xName(i, j))
				}
			}
		}
		static := func() {
			for i, md := range p.Models {
				if o.hasX(i, j) {
					w.Term(float64(md.StaticMemory)/mib, xName(i, j))
				}
			}
		}
		// Eq. 5.
		if p.MaxRatePerPart > 0 {
			w.Row("rmax_" + js)
			rate()
			w.End("<=", p.MaxRatePerPart)
		}
		// Eq. 6, linearized: D_j ≥ d_i·x_ij and Σ s_i x_ij + D_j ≤ S_max.
		if memory {
			w.Row("smax_" + js)
			static()
			w.Term(1, "D_"+js)
			w.End("<=", float64(p.GPUMemory)/mib)
			for i, md := range p.Models {
				if md.DynamicMemory > 0 && o.hasX(i, j) {
					w.Row("dyn_" + strconv.Itoa(i) + "_" + js)
					w.Term(float64(md.DynamicMemory)/mib, xName(i, j))
					w.Term(-1, "D_"+js)
					w.End("<=", 0)
				}
			}
		}
		// Eq. 7: |Σ r_i x_ij − R̄| ≤ ΔR as two inequalities.
		w.Row("rhi_" + js)
		rate()
		w.Term(-1, "dR")
		w.End("<=", avgRate)
		w.Row("rlo_" + js)
		rate()
		w.Term(1, "dR")
		w.End(">=", avgRate)
		// Eq. 8, the same for static memory.
		w.Row("shi_" + js)
		static()
		w.Term(-1, "dS")
		w.End("<=", avgStatic)
		w.Row("slo_" + js)
		static()
		w.Term(1, "dS")
		w.End(">=", avgStatic)
	}
	// Eq. 11. x'_ij is a constant, so y_ij = |x_ij − x'_ij| is x_ij where
	// x'_ij = 0 and 1 − x_ij where x'_ij = 1. A model on part k pays
	// c_i·Σ_{j≠k} x_ij + c_i·(1 − x_ik) = 2c_i(1 − x_ik) by Eq. 9; a new
	// model pays its load cost c_i wherever it goes. So Eq. 11 is
	//   Σ_{i current} 2c_i x_ik ≥ Σ_{i current} 2c_i + Σ_{i new} c_i − C_max,
	// the same constraint on Eq. 9's solutions as the paper's double sum,
	// with one term per model instead of l.
	if disruptionRow(p) {
		var need float64
		w.Row("disrupt")
		for i, md := range p.Models {
			c := float64(MoveCost(md)) / mib
			if k := p.Current[i]; k != Unassigned {
				need += 2 * c
				if o.hasX(i, k) {
					w.Term(2*c, xName(i, k))
				}
			} else {
				need += c
			}
		}
		w.End(">=", need-float64(p.MaxDisruption)/mib)
	}
	w.Text("Bounds\n dR >= 0\n dS >= 0\n")
	if memory {
		for j := 0; j < l; j++ {
			w.Text(" D_" + strconv.Itoa(j) + " >= 0\n")
		}
	}
	w.Text("Binaries\n")
	for i := 0; i < m; i++ {
		for j := 0; j < l; j++ {
			if o.hasX(i, j) {
				w.Name(xName(i, j))
			}
		}
	}
	w.EndNames()
	w.Text("End\n")
	return w.Flush()
}

// integralTol is how far from 0 or 1 a binary's value may be: solvers
// accept integers within about 1e-6 and print rounded decimals.
const integralTol = 1e-4

// assignment turns a solution's x_ij values into one part per model. It
// checks what it reads: every x_ij named must be in range and near 0 or 1,
// and every model must have exactly one x_ij at 1. Other variables (dR, dS,
// D_j) are ignored.
func assignment(s *lpsolve.Solution, models, parts int) ([]int, error) {
	a := make([]int, models)
	for i := range a {
		a[i] = Unassigned
	}
	for name, v := range s.Values {
		rest, ok := strings.CutPrefix(name, "x_")
		if !ok {
			continue
		}
		is, js, ok := strings.Cut(rest, "_")
		i, err1 := strconv.Atoi(is)
		j, err2 := strconv.Atoi(js)
		if !ok || err1 != nil || err2 != nil || i < 0 || i >= models || j < 0 || j >= parts {
			return nil, fmt.Errorf("solution names unknown variable %q", clip(name))
		}
		switch {
		case math.Abs(v) <= integralTol:
		case math.Abs(v-1) <= integralTol:
			if a[i] != Unassigned {
				return nil, fmt.Errorf("solution puts model %d on parts %d and %d", i, a[i], j)
			}
			a[i] = j
		default:
			return nil, fmt.Errorf("solution gives binary %s the value %v", name, v)
		}
	}
	for i, j := range a {
		if j == Unassigned {
			return nil, fmt.Errorf("solution puts model %d on no part", i)
		}
	}
	return a, nil
}

// clip shortens text quoted in an error message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

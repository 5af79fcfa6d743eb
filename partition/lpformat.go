package partition

// This file writes Appendix A.1's MILP in CPLEX LP format and reads the
// solution files of the two open-source solvers the MILP engine drives (cbc
// and glpsol). LP format was chosen over MPS because a human can read it: a
// dumped model file shows the paper's equations row by row.
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
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
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

// lpNum formats a coefficient exactly (shortest round-trip form), which both
// solvers' LP readers accept, exponents included.
func lpNum(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// lpRow accumulates one constraint's terms, breaking long lines (some LP
// readers limit line length).
type lpRow struct {
	w     *bufio.Writer
	terms int
}

func (r *lpRow) start(name string) {
	r.w.WriteString(" " + name + ":")
	r.terms = 0
}

func (r *lpRow) term(coef float64, v string) {
	if coef == 0 {
		return
	}
	if r.terms > 0 && r.terms%8 == 0 {
		r.w.WriteString("\n   ")
	}
	r.terms++
	switch {
	case coef == 1:
		r.w.WriteString(" + " + v)
	case coef == -1:
		r.w.WriteString(" - " + v)
	case coef < 0:
		r.w.WriteString(" - " + lpNum(-coef) + " " + v)
	default:
		r.w.WriteString(" + " + lpNum(coef) + " " + v)
	}
}

// end closes the row with a sense ("<=", ">=", "=") and right-hand side. A
// row with no terms gets a 0 coefficient so that it stays well-formed.
func (r *lpRow) end(sense string, rhs float64) {
	if r.terms == 0 {
		r.w.WriteString(" 0 dR")
	}
	r.w.WriteString(" " + sense + " " + lpNum(rhs) + "\n")
}

// writeLP writes p as the MILP of Appendix A.1 (Eqs. 4-11) in CPLEX LP
// format. p must be valid.
func writeLP(out io.Writer, p *Problem, o lpOptions) error {
	w := bufio.NewWriter(out)
	m, l := len(p.Models), p.Parts
	var totalRate, totalStatic float64
	for _, md := range p.Models {
		totalRate += md.Rate
		totalStatic += float64(md.StaticMemory) / mib
	}
	avgRate, avgStatic := totalRate/float64(l), totalStatic/float64(l)
	memory := p.GPUMemory > 0

	fmt.Fprintf(w, "\\ Symphony partitioning MILP (paper Appendix A.1): %d models, %d parts; memory in MiB\n", m, l)
	w.WriteString("Minimize\n obj: dR + " + lpNum(p.Weight()*mib) + " dS\n")
	w.WriteString("Subject To\n")
	r := &lpRow{w: w}
	// Eq. 9: every model on exactly one part.
	for i := 0; i < m; i++ {
		r.start("assign_" + strconv.Itoa(i))
		for j := 0; j < l; j++ {
			if o.hasX(i, j) {
				r.term(1, xName(i, j))
			}
		}
		r.end("=", 1)
	}
	for j := 0; j < l; j++ {
		js := strconv.Itoa(j)
		rate := func() {
			for i, md := range p.Models {
				if o.hasX(i, j) {
					r.term(md.Rate, xName(i, j))
				}
			}
		}
		static := func() {
			for i, md := range p.Models {
				if o.hasX(i, j) {
					r.term(float64(md.StaticMemory)/mib, xName(i, j))
				}
			}
		}
		// Eq. 5.
		if p.MaxRatePerPart > 0 {
			r.start("rmax_" + js)
			rate()
			r.end("<=", p.MaxRatePerPart)
		}
		// Eq. 6, linearized: D_j ≥ d_i·x_ij and Σ s_i x_ij + D_j ≤ S_max.
		if memory {
			r.start("smax_" + js)
			static()
			r.term(1, "D_"+js)
			r.end("<=", float64(p.GPUMemory)/mib)
			for i, md := range p.Models {
				if md.DynamicMemory > 0 && o.hasX(i, j) {
					r.start("dyn_" + strconv.Itoa(i) + "_" + js)
					r.term(float64(md.DynamicMemory)/mib, xName(i, j))
					r.term(-1, "D_"+js)
					r.end("<=", 0)
				}
			}
		}
		// Eq. 7: |Σ r_i x_ij − R̄| ≤ ΔR as two inequalities.
		r.start("rhi_" + js)
		rate()
		r.term(-1, "dR")
		r.end("<=", avgRate)
		r.start("rlo_" + js)
		rate()
		r.term(1, "dR")
		r.end(">=", avgRate)
		// Eq. 8, the same for static memory.
		r.start("shi_" + js)
		static()
		r.term(-1, "dS")
		r.end("<=", avgStatic)
		r.start("slo_" + js)
		static()
		r.term(1, "dS")
		r.end(">=", avgStatic)
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
		r.start("disrupt")
		for i, md := range p.Models {
			c := float64(MoveCost(md)) / mib
			if k := p.Current[i]; k != Unassigned {
				need += 2 * c
				if o.hasX(i, k) {
					r.term(2*c, xName(i, k))
				}
			} else {
				need += c
			}
		}
		r.end(">=", need-float64(p.MaxDisruption)/mib)
	}
	w.WriteString("Bounds\n dR >= 0\n dS >= 0\n")
	if memory {
		for j := 0; j < l; j++ {
			w.WriteString(" D_" + strconv.Itoa(j) + " >= 0\n")
		}
	}
	w.WriteString("Binaries\n")
	n := 0
	for i := 0; i < m; i++ {
		for j := 0; j < l; j++ {
			if o.hasX(i, j) {
				if n > 0 && n%8 == 0 {
					w.WriteString("\n")
				}
				w.WriteString(" " + xName(i, j))
				n++
			}
		}
	}
	w.WriteString("\nEnd\n")
	return w.Flush()
}

// solveStatus is what a solver's solution file says about the search.
type solveStatus int

const (
	// statusOptimal: the solver proved the solution optimal.
	statusOptimal solveStatus = iota
	// statusFeasible: the solver stopped (time limit, say) with a solution
	// whose optimality it did not prove.
	statusFeasible
	// statusNoSolution: the solver stopped without any integer solution.
	statusNoSolution
	// statusInfeasible: the solver proved there is no integer solution.
	statusInfeasible
)

// solverSolution is a parsed solution file.
type solverSolution struct {
	status solveStatus
	// summary is the solver's own status line.
	summary   string
	objective float64
	// values holds the variables the file lists; the solvers omit some
	// zeros, so a missing variable is 0.
	values map[string]float64
}

// maxSolutionLine bounds one line of a solution file; real ones are short.
const maxSolutionLine = 1 << 16

// parseCBCSolution reads cbc's `solu` file: a status line such as
// "Optimal - objective value 12.5" or "Stopped on time - objective value
// 12.5", then one line per (nonzero) variable, "index name value
// reduced-cost", prefixed with "**" when the value breaks a bound.
func parseCBCSolution(data []byte) (*solverSolution, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxSolutionLine)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("cbc solution: %w", err)
		}
		return nil, errors.New("cbc solution: empty file")
	}
	head := strings.TrimSpace(sc.Text())
	s := &solverSolution{summary: head, values: make(map[string]float64)}
	status, obj, ok := strings.Cut(head, " - objective value ")
	if !ok {
		return nil, fmt.Errorf("cbc solution: unrecognised status line %q", clip(head))
	}
	switch {
	case status == "Optimal":
		s.status = statusOptimal
	case status == "Infeasible" || status == "Integer infeasible":
		s.status = statusInfeasible
	case strings.Contains(status, "no integer solution"):
		s.status = statusNoSolution
	case strings.HasPrefix(status, "Stopped on"):
		s.status = statusFeasible
	default:
		return nil, fmt.Errorf("cbc solution: unrecognised status %q", clip(status))
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(obj), 64)
	if err != nil || math.IsNaN(v) {
		return nil, fmt.Errorf("cbc solution: bad objective value in %q", clip(head))
	}
	s.objective = v
	for line := 2; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		text = strings.TrimSpace(strings.TrimPrefix(text, "**"))
		if text == "" {
			continue
		}
		f := strings.Fields(text)
		if len(f) != 3 && len(f) != 4 {
			return nil, fmt.Errorf("cbc solution line %d: want index, name, value, reduced cost, have %q", line, clip(text))
		}
		if _, err := strconv.Atoi(f[0]); err != nil {
			return nil, fmt.Errorf("cbc solution line %d: bad index in %q", line, clip(text))
		}
		if err := s.set(f[1], f[2]); err != nil {
			return nil, fmt.Errorf("cbc solution line %d: %w", line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cbc solution: %w", err)
	}
	return s, nil
}

// set records one variable's value, rejecting duplicates and non-numbers.
func (s *solverSolution) set(name, value string) error {
	v, err := strconv.ParseFloat(value, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("bad value %q for %q", clip(value), clip(name))
	}
	if _, dup := s.values[name]; dup {
		return fmt.Errorf("variable %q listed twice", clip(name))
	}
	s.values[name] = v
	return nil
}

// parseGLPKSolution reads glpsol's `-w` file of a MIP ("s mip ROWS COLS
// STATUS OBJ", then "i ROW VALUE" and "j COL VALUE" lines, "c" comments, "e
// o f") together with the `--wglp` copy of the model, whose "n j COL NAME"
// lines name the columns the solution file only numbers.
func parseGLPKSolution(sol, model []byte) (*solverSolution, error) {
	names, err := parseGLPKNames(model)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(sol))
	sc.Buffer(make([]byte, 0, 4096), maxSolutionLine)
	var s *solverSolution
	cols := -1
	done := false
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] == "c" {
			continue
		}
		if done {
			return nil, fmt.Errorf("glpsol solution line %d: text after end of file marker", line)
		}
		switch f[0] {
		case "s":
			if s != nil || len(f) != 6 || f[1] != "mip" {
				return nil, fmt.Errorf("glpsol solution line %d: want one \"s mip ROWS COLS STATUS OBJ\", have %q", line, clip(sc.Text()))
			}
			c, err := strconv.Atoi(f[3])
			if err != nil || c != len(names) {
				return nil, fmt.Errorf("glpsol solution line %d: %q columns, model has %d", line, clip(f[3]), len(names))
			}
			cols = c
			s = &solverSolution{summary: strings.Join(f, " "), values: make(map[string]float64, c)}
			switch f[4] {
			case "o":
				s.status = statusOptimal
			case "f":
				s.status = statusFeasible
			case "n":
				s.status = statusInfeasible
			case "u":
				s.status = statusNoSolution
			default:
				return nil, fmt.Errorf("glpsol solution line %d: unknown status %q", line, clip(f[4]))
			}
			v, err := strconv.ParseFloat(f[5], 64)
			if err != nil || math.IsNaN(v) {
				return nil, fmt.Errorf("glpsol solution line %d: bad objective %q", line, clip(f[5]))
			}
			s.objective = v
		case "i":
			if s == nil || len(f) != 3 {
				return nil, fmt.Errorf("glpsol solution line %d: unexpected %q", line, clip(sc.Text()))
			}
		case "j":
			if s == nil || len(f) != 3 {
				return nil, fmt.Errorf("glpsol solution line %d: unexpected %q", line, clip(sc.Text()))
			}
			k, err := strconv.Atoi(f[1])
			if err != nil || k < 1 || k > cols {
				return nil, fmt.Errorf("glpsol solution line %d: column %q out of range", line, clip(f[1]))
			}
			if err := s.set(names[k-1], f[2]); err != nil {
				return nil, fmt.Errorf("glpsol solution line %d: %w", line, err)
			}
		case "e":
			if s == nil || len(f) != 3 || f[1] != "o" || f[2] != "f" {
				return nil, fmt.Errorf("glpsol solution line %d: bad end marker", line)
			}
			done = true
		default:
			return nil, fmt.Errorf("glpsol solution line %d: unknown line %q", line, clip(sc.Text()))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("glpsol solution: %w", err)
	}
	if s == nil {
		return nil, errors.New("glpsol solution: no \"s mip\" line")
	}
	if !done {
		return nil, errors.New("glpsol solution: truncated (no end marker)")
	}
	if (s.status == statusOptimal || s.status == statusFeasible) && len(s.values) != cols {
		return nil, fmt.Errorf("glpsol solution: %d of %d column values", len(s.values), cols)
	}
	return s, nil
}

// parseGLPKNames returns the column names of a GLPK-format model file
// (glpsol --wglp), in column order.
func parseGLPKNames(model []byte) ([]string, error) {
	sc := bufio.NewScanner(bytes.NewReader(model))
	sc.Buffer(make([]byte, 0, 4096), maxSolutionLine)
	// A map, not a slice sized by the problem line, so that a corrupt
	// count cannot make us allocate gigabytes.
	byIndex := make(map[int]string)
	cols := -1
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch {
		case f[0] == "p":
			if cols >= 0 || len(f) < 6 {
				return nil, fmt.Errorf("glpsol model line %d: bad problem line", line)
			}
			c, err := strconv.Atoi(f[4])
			if err != nil || c < 0 {
				return nil, fmt.Errorf("glpsol model line %d: bad column count %q", line, clip(f[4]))
			}
			cols = c
		case f[0] == "n" && len(f) >= 2 && f[1] == "j":
			if cols < 0 || len(f) != 4 {
				return nil, fmt.Errorf("glpsol model line %d: bad column name line", line)
			}
			k, err := strconv.Atoi(f[2])
			if _, dup := byIndex[k]; err != nil || k < 1 || k > cols || dup {
				return nil, fmt.Errorf("glpsol model line %d: bad or repeated column %q", line, clip(f[2]))
			}
			byIndex[k] = f[3]
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("glpsol model: %w", err)
	}
	if cols < 0 {
		return nil, errors.New("glpsol model: no problem line")
	}
	if len(byIndex) != cols {
		return nil, fmt.Errorf("glpsol model: %d of %d columns named", len(byIndex), cols)
	}
	names := make([]string, cols)
	for k, n := range byIndex {
		names[k-1] = n
	}
	return names, nil
}

// integralTol is how far from 0 or 1 a binary's value may be: solvers
// accept integers within about 1e-6 and print rounded decimals.
const integralTol = 1e-4

// assignment turns a solution's x_ij values into one part per model. It
// checks what it reads: every x_ij named must be in range and near 0 or 1,
// and every model must have exactly one x_ij at 1. Other variables (dR, dS,
// D_j) are ignored.
func (s *solverSolution) assignment(models, parts int) ([]int, error) {
	a := make([]int, models)
	for i := range a {
		a[i] = Unassigned
	}
	for name, v := range s.values {
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

package lpsolve

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Status is what a solver's solution file says about the search.
type Status int

// String names the status the way reports print it.
func (s Status) String() string {
	switch s {
	case Optimal:
		return "optimal"
	case Feasible:
		return "feasible"
	case NoSolution:
		return "no solution"
	case Infeasible:
		return "infeasible"
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// HasValues reports whether a solution of this status carries a solution:
// its variables' values and a finite objective.
func (s Status) HasValues() bool { return s == Optimal || s == Feasible }

const (
	// Optimal: the solver proved the solution optimal.
	Optimal Status = iota
	// Feasible: the solver stopped (time limit, say) with a solution
	// whose optimality it did not prove.
	Feasible
	// NoSolution: the solver stopped without any integer solution.
	NoSolution
	// Infeasible: the solver proved there is no integer solution.
	Infeasible
)

// Solution is a parsed solution file. Its values are what the solver
// printed: callers check them (range, integrality) before trusting them.
type Solution struct {
	Status Status
	// Summary is the solver's own status line.
	Summary   string
	Objective float64
	// Values holds the variables the file lists; the solvers omit some
	// zeros, so a missing variable is 0 (see Value).
	Values map[string]float64
}

// Value returns variable name's value, 0 when the file omits it.
func (s *Solution) Value(name string) float64 { return s.Values[name] }

// maxSolutionLine bounds one line of a solution file; real ones are short.
const maxSolutionLine = 1 << 16

// ParseCBC reads cbc's `solu` file: a status line such as
// "Optimal - objective value 12.5" or "Stopped on time - objective value
// 12.5", then one line per (nonzero) variable, "index name value
// reduced-cost", prefixed with "**" when the value breaks a bound.
func ParseCBC(data []byte) (*Solution, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxSolutionLine)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("cbc solution: %w", err)
		}
		return nil, errors.New("cbc solution: empty file")
	}
	head := strings.TrimSpace(sc.Text())
	s := &Solution{Summary: head, Values: make(map[string]float64)}
	status, obj, ok := strings.Cut(head, " - objective value ")
	if !ok {
		return nil, fmt.Errorf("cbc solution: unrecognised status line %q", clip(head))
	}
	switch {
	case status == "Optimal":
		s.Status = Optimal
	case status == "Infeasible" || status == "Integer infeasible":
		s.Status = Infeasible
	case strings.Contains(status, "no integer solution"):
		s.Status = NoSolution
	case strings.HasPrefix(status, "Stopped on"):
		s.Status = Feasible
	default:
		return nil, fmt.Errorf("cbc solution: unrecognised status %q", clip(status))
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(obj), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) && s.Status.HasValues() {
		return nil, fmt.Errorf("cbc solution: bad objective value in %q", clip(head))
	}
	s.Objective = v
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
func (s *Solution) set(name, value string) error {
	v, err := strconv.ParseFloat(value, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("bad value %q for %q", clip(value), clip(name))
	}
	if _, dup := s.Values[name]; dup {
		return fmt.Errorf("variable %q listed twice", clip(name))
	}
	s.Values[name] = v
	return nil
}

// ParseGLPK reads glpsol's `-w` file of a MIP ("s mip ROWS COLS
// STATUS OBJ", then "i ROW VALUE" and "j COL VALUE" lines, "c" comments, "e
// o f") together with the `--wglp` copy of the model, whose "n j COL NAME"
// lines name the columns the solution file only numbers.
func ParseGLPK(sol, model []byte) (*Solution, error) {
	names, err := parseGLPKNames(model)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(sol))
	sc.Buffer(make([]byte, 0, 4096), maxSolutionLine)
	var s *Solution
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
			s = &Solution{Summary: strings.Join(f, " "), Values: make(map[string]float64, c)}
			switch f[4] {
			case "o":
				s.Status = Optimal
			case "f":
				s.Status = Feasible
			case "n":
				s.Status = Infeasible
			case "u":
				s.Status = NoSolution
			default:
				return nil, fmt.Errorf("glpsol solution line %d: unknown status %q", line, clip(f[4]))
			}
			v, err := strconv.ParseFloat(f[5], 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) && s.Status.HasValues() {
				return nil, fmt.Errorf("glpsol solution line %d: bad objective %q", line, clip(f[5]))
			}
			s.Objective = v
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
	if (s.Status == Optimal || s.Status == Feasible) && len(s.Values) != cols {
		return nil, fmt.Errorf("glpsol solution: %d of %d column values", len(s.Values), cols)
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

// clip shortens text quoted in an error message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

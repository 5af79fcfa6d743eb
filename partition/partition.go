// Package partition is Symphony's epoch job (paper §4.7 and Appendix A): it
// splits the served models into parts (sub-clusters of one scheduler, or, one
// level up, scheduler instances) so that every part's combined request rate
// and static memory are close to the average, within the rank loop's rate
// limit R_max, the GPU memory limit S_max and a disruption budget C_max
// against the current assignment. It also sizes parts and clusters (Eqs. 2-3)
// and turns the scheduler's epoch signals into autoscaling advice.
//
// Engines sit behind one interface: a fast heuristic (the default), an exact
// MILP written in a standard format and handed to an installed open-source
// solver, and the paper's random-search baseline.
package partition

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Model is one model to place: its offered request rate and its GPU memory.
type Model struct {
	Name string
	// Rate is requests per second, r_i.
	Rate float64
	// StaticMemory s_i is the bytes the loaded model occupies on every GPU of
	// its part; DynamicMemory d_i is the extra bytes a running batch needs.
	StaticMemory  int64
	DynamicMemory int64
}

// Unassigned marks a model with no current part (a new model) in
// Problem.Current.
const Unassigned = -1

// Problem is one partitioning instance, the MILP of Appendix A.1.
type Problem struct {
	Models []Model
	// Parts is l, the number of parts.
	Parts int
	// MaxRatePerPart is R_max (Eq. 5); 0 means no limit.
	MaxRatePerPart float64
	// GPUMemory is S_max (Eq. 6): a part's static memory plus its largest
	// dynamic memory must fit; 0 means no limit.
	GPUMemory int64
	// Current is the assignment in force, Current[i] being model i's part
	// or Unassigned; nil means there is none (the first epoch), and then
	// every assignment has disruption 0.
	Current []int
	// MaxDisruption is C_max (Eq. 11) in bytes: the load and unload cost of
	// moving from Current; negative means no limit. The zero value allows no
	// change at all, so problems built in code should set it on purpose.
	MaxDisruption int64
	// MemoryWeight is w in the objective ΔR + w·ΔS (Eq. 4); 0 means R̄/S̄,
	// which weighs a relative rate deviation and a relative memory deviation
	// equally.
	MemoryWeight float64
}

// Imbalance is the paper's quality measure of a partition: (max−min)/avg over
// the parts, of the rate and of the static memory.
type Imbalance struct {
	Rate   float64 `json:"rate"`
	Memory float64 `json:"memory"`
}

// Result is an engine's answer.
type Result struct {
	// Assignment[i] is model i's part, in 0..Parts-1.
	Assignment []int
	Imbalance  Imbalance
	// Objective is ΔR + w·ΔS (Eq. 4) of Assignment.
	Objective float64
	// Disruption is Σ c_ij·y_ij (Eq. 11) against Problem.Current, in bytes.
	Disruption int64
	// Engine names the engine that produced Assignment: when the requested
	// one could not run, the fallback's name, with the reason in Notes.
	Engine    string
	SolveTime time.Duration
	// Optimal is true when the engine proved the assignment optimal.
	Optimal bool
	// Notes say what the user should know: a missing solver, a time limit
	// reached, a fallback taken.
	Notes []string
}

// Engine finds an assignment for a problem. Engines honour ctx's deadline as
// their time limit and return the best feasible assignment found by then.
type Engine interface {
	Name() string
	Solve(ctx context.Context, p *Problem) (*Result, error)
}

// ErrInfeasible is wrapped by errors of problems with no assignment that
// meets every constraint (or none the engine could find).
var ErrInfeasible = errors.New("partition: no feasible assignment")

// Validate checks the problem's own consistency, not its feasibility.
func (p *Problem) Validate() error {
	switch {
	case p.Parts < 1:
		return fmt.Errorf("partition: parts must be at least 1, have %d", p.Parts)
	case len(p.Models) == 0:
		return errors.New("partition: no models")
	case p.MaxRatePerPart < 0 || math.IsNaN(p.MaxRatePerPart) || math.IsInf(p.MaxRatePerPart, 0):
		return fmt.Errorf("partition: max_rate_per_part must be a non-negative number, have %v", p.MaxRatePerPart)
	case p.GPUMemory < 0:
		return fmt.Errorf("partition: gpu_memory must not be negative, have %d", p.GPUMemory)
	case p.MemoryWeight < 0 || math.IsNaN(p.MemoryWeight) || math.IsInf(p.MemoryWeight, 0):
		return fmt.Errorf("partition: memory weight must be a non-negative number, have %v", p.MemoryWeight)
	case p.Current != nil && len(p.Current) != len(p.Models):
		return fmt.Errorf("partition: current assignment has %d entries for %d models", len(p.Current), len(p.Models))
	}
	seen := make(map[string]bool, len(p.Models))
	for i, m := range p.Models {
		switch {
		case m.Name == "":
			return fmt.Errorf("partition: model %d has no name", i)
		case seen[m.Name]:
			return fmt.Errorf("partition: model %q appears twice", m.Name)
		case m.Rate < 0 || math.IsNaN(m.Rate) || math.IsInf(m.Rate, 0):
			return fmt.Errorf("partition: model %q: rate must be a non-negative number, have %v", m.Name, m.Rate)
		case m.StaticMemory < 0 || m.DynamicMemory < 0:
			return fmt.Errorf("partition: model %q: memory must not be negative", m.Name)
		}
		seen[m.Name] = true
		if p.Current != nil {
			if c := p.Current[i]; c != Unassigned && (c < 0 || c >= p.Parts) {
				return fmt.Errorf("partition: model %q: current part %d is not in 0..%d", m.Name, c, p.Parts-1)
			}
		}
	}
	return nil
}

// Weight returns w of the objective: MemoryWeight, or R̄/S̄ when it is 0 (1
// when there is no memory to weigh).
func (p *Problem) Weight() float64 {
	if p.MemoryWeight > 0 {
		return p.MemoryWeight
	}
	var r, s float64
	for _, m := range p.Models {
		r += m.Rate
		s += float64(m.StaticMemory)
	}
	if s == 0 || r == 0 {
		return 1
	}
	return r / s
}

// MoveCost is c_ij of Eq. 11: loading or unloading model m on a part costs
// its static memory in bytes (the paper takes the cost as symmetric), so
// moving a model between parts costs twice that.
func MoveCost(m Model) int64 { return m.StaticMemory }

// Evaluation is everything measurable about one assignment.
type Evaluation struct {
	// PartRate and PartStatic are each part's rate and static memory;
	// PartMemory adds the part's largest dynamic memory (Eq. 6's left side).
	PartRate   []float64
	PartStatic []int64
	PartMemory []int64
	Imbalance  Imbalance
	// DeltaR and DeltaS are the largest deviations from the averages (Eqs.
	// 7-8); Objective is DeltaR + w·DeltaS.
	DeltaR, DeltaS float64
	Objective      float64
	Disruption     int64
	// Violations names every constraint the assignment breaks; empty when it
	// is feasible.
	Violations []string
}

// Feasible reports whether the assignment met every constraint.
func (e *Evaluation) Feasible() bool { return len(e.Violations) == 0 }

// Evaluate measures an assignment against the problem. It does not fail on a
// broken constraint; it lists it in Violations. It fails only on an
// assignment of the wrong length or with a part out of range.
func (p *Problem) Evaluate(assignment []int) (*Evaluation, error) {
	if len(assignment) != len(p.Models) {
		return nil, fmt.Errorf("partition: assignment has %d entries for %d models", len(assignment), len(p.Models))
	}
	e := &Evaluation{
		PartRate:   make([]float64, p.Parts),
		PartStatic: make([]int64, p.Parts),
		PartMemory: make([]int64, p.Parts),
	}
	maxDyn := make([]int64, p.Parts)
	var totalRate, totalStatic float64
	for i, m := range p.Models {
		j := assignment[i]
		if j < 0 || j >= p.Parts {
			return nil, fmt.Errorf("partition: model %q assigned to part %d, not in 0..%d", m.Name, j, p.Parts-1)
		}
		e.PartRate[j] += m.Rate
		e.PartStatic[j] += m.StaticMemory
		maxDyn[j] = max(maxDyn[j], m.DynamicMemory)
		totalRate += m.Rate
		totalStatic += float64(m.StaticMemory)
		if p.Current != nil && p.Current[i] != j {
			if p.Current[i] != Unassigned {
				e.Disruption += MoveCost(m) // unload from the old part
			}
			e.Disruption += MoveCost(m) // load on the new part
		}
	}
	avgRate, avgStatic := totalRate/float64(p.Parts), totalStatic/float64(p.Parts)
	minR, maxR := math.Inf(1), math.Inf(-1)
	minS, maxS := math.Inf(1), math.Inf(-1)
	for j := 0; j < p.Parts; j++ {
		r, s := e.PartRate[j], float64(e.PartStatic[j])
		minR, maxR = math.Min(minR, r), math.Max(maxR, r)
		minS, maxS = math.Min(minS, s), math.Max(maxS, s)
		e.DeltaR = math.Max(e.DeltaR, math.Abs(r-avgRate))
		e.DeltaS = math.Max(e.DeltaS, math.Abs(s-avgStatic))
		e.PartMemory[j] = e.PartStatic[j] + maxDyn[j]
		if p.MaxRatePerPart > 0 && r > p.MaxRatePerPart {
			e.Violations = append(e.Violations, fmt.Sprintf("part %d: rate %.1f exceeds max_rate_per_part %.1f", j, r, p.MaxRatePerPart))
		}
		if p.GPUMemory > 0 && e.PartMemory[j] > p.GPUMemory {
			e.Violations = append(e.Violations, fmt.Sprintf("part %d: memory %d B (static %d + dynamic %d) exceeds gpu_memory %d B", j, e.PartMemory[j], e.PartStatic[j], maxDyn[j], p.GPUMemory))
		}
	}
	if avgRate > 0 {
		e.Imbalance.Rate = (maxR - minR) / avgRate
	}
	if avgStatic > 0 {
		e.Imbalance.Memory = (maxS - minS) / avgStatic
	}
	e.Objective = e.DeltaR + p.Weight()*e.DeltaS
	if p.Current != nil && p.MaxDisruption >= 0 && e.Disruption > p.MaxDisruption {
		e.Violations = append(e.Violations, fmt.Sprintf("disruption %d B exceeds max_disruption %d B", e.Disruption, p.MaxDisruption))
	}
	return e, nil
}

// NewResult builds a Result for an assignment an engine found, filling the
// measures from Evaluate. It fails if the assignment is out of range or
// breaks a constraint, so no engine can return an infeasible answer.
func (p *Problem) NewResult(engine string, assignment []int, took time.Duration) (*Result, error) {
	e, err := p.Evaluate(assignment)
	if err != nil {
		return nil, err
	}
	if !e.Feasible() {
		return nil, fmt.Errorf("%w: engine %s: %s", ErrInfeasible, engine, e.Violations[0])
	}
	return &Result{
		Assignment: assignment, Imbalance: e.Imbalance, Objective: e.Objective,
		Disruption: e.Disruption, Engine: engine, SolveTime: took,
	}, nil
}

package partition

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/symphony-serving/symphony/partition/internal/textout"
)

// Summary is the report of one partitioning of a model file: the output of
// `symphony partition`, whose --json is this struct's JSON, and what a
// program that runs the epoch job can store or print the same way. Unlike a
// Result it names models rather than indexing them, lists each part's
// models, load and memory, and the moves from the current assignment, so
// that it reads on its own. Rates are requests per second, memory bytes.
type Summary struct {
	Source string `json:"source"`
	// Engine produced the assignment; RequestedEngine is the one asked for
	// (they differ when the MILP fell back to the heuristic).
	Engine          string `json:"engine"`
	RequestedEngine string `json:"requested_engine"`
	// Assignment maps model name to part.
	Assignment map[string]int `json:"assignment"`
	Parts      []SummaryPart  `json:"parts"`
	Imbalance  Imbalance      `json:"imbalance"`
	Objective  float64        `json:"objective"`
	// Disruption is the bytes loaded plus unloaded against the current
	// assignment; MaxDisruption is C_max, null when unbounded or when there
	// is no current assignment to bound.
	Disruption    int64    `json:"disruption"`
	MaxDisruption *int64   `json:"max_disruption"`
	Moves         []Move   `json:"moves"`
	Optimal       bool     `json:"optimal"`
	SolveSeconds  float64  `json:"solve_seconds"`
	Notes         []string `json:"notes"`

	models     []string // in file order, for the text listing
	assign     []int
	hasCurrent bool
}

// SummaryPart is one part of a Summary.
type SummaryPart struct {
	Part   int      `json:"part"`
	Models []string `json:"models"`
	Rate   float64  `json:"rate"`
	// StaticMemory is Σ s_i; Memory adds the largest dynamic memory, the
	// left side of Eq. 6, in bytes.
	StaticMemory int64 `json:"static_memory"`
	Memory       int64 `json:"memory"`
}

// Move is a model whose part changes from the current assignment: what
// applying the answer loads and unloads. From is Unassigned for a new
// model.
type Move struct {
	Model string `json:"model"`
	From  int    `json:"from"`
	To    int    `json:"to"`
}

// NewSummary reports res, the answer of the engine named requested to
// mf's problem. It checks the answer against the problem itself
// (Problem.Evaluate) and refuses an infeasible one rather than report it
// as if it were fine.
func NewSummary(mf *ModelFile, requested string, res *Result) (*Summary, error) {
	p := mf.Problem
	ev, err := p.Evaluate(res.Assignment)
	if err != nil {
		return nil, err
	}
	if len(ev.Violations) > 0 {
		// NewResult makes this impossible for the package's engines.
		return nil, fmt.Errorf("engine %s returned an infeasible assignment: %s", res.Engine, ev.Violations[0])
	}
	s := &Summary{
		Source: mf.Source, Engine: res.Engine, RequestedEngine: requested,
		Assignment: make(map[string]int, len(p.Models)),
		Imbalance:  res.Imbalance, Objective: res.Objective, Disruption: res.Disruption,
		Moves: []Move{}, Optimal: res.Optimal, SolveSeconds: res.SolveTime.Seconds(),
		Notes:  append(append([]string{}, mf.Warnings...), res.Notes...),
		assign: res.Assignment, hasCurrent: p.Current != nil,
	}
	if p.Current != nil && p.MaxDisruption >= 0 {
		c := p.MaxDisruption
		s.MaxDisruption = &c
	}
	s.Parts = make([]SummaryPart, p.Parts)
	for j := range s.Parts {
		s.Parts[j] = SummaryPart{Part: j, Models: []string{}, Rate: ev.PartRate[j], StaticMemory: ev.PartStatic[j], Memory: ev.PartMemory[j]}
	}
	for i, m := range p.Models {
		j := res.Assignment[i]
		s.Assignment[m.Name] = j
		s.models = append(s.models, m.Name)
		s.Parts[j].Models = append(s.Parts[j].Models, m.Name)
		if p.Current != nil && p.Current[i] != j {
			s.Moves = append(s.Moves, Move{Model: m.Name, From: p.Current[i], To: j})
		}
	}
	return s, nil
}

// WriteText writes the summary as `symphony partition` prints it: a
// header, the parts' table, every model's part in file order with its
// move, and the notes.
func (s *Summary) WriteText(out io.Writer) error {
	return textout.WriteTrimmed(out, s.writeTables)
}

func (s *Summary) writeTables(w io.Writer) error {
	engine := s.Engine
	if s.Engine != s.RequestedEngine {
		engine += fmt.Sprintf(" (requested %s)", s.RequestedEngine)
	}
	if s.Optimal {
		engine += ", proven optimal"
	}
	fmt.Fprintf(w, "%s: %d models into %d parts\n", filepath.Base(s.Source), len(s.models), len(s.Parts))
	fmt.Fprintf(w, "engine:      %s, solved in %s\n", engine, time.Duration(s.SolveSeconds*float64(time.Second)).Round(time.Microsecond))
	fmt.Fprintf(w, "imbalance:   rate %.4f, memory %.4f ((max-min)/avg over parts); objective %.6g\n", s.Imbalance.Rate, s.Imbalance.Memory, s.Objective)
	if s.hasCurrent {
		limit := "unbounded"
		if s.MaxDisruption != nil {
			limit = FormatSize(*s.MaxDisruption)
		}
		fmt.Fprintf(w, "disruption:  %s loaded+unloaded (max_disruption %s), %d models placed or moved\n", FormatSize(s.Disruption), limit, len(s.Moves))
	} else {
		fmt.Fprintln(w, "disruption:  none (no current assignment: the first epoch)")
	}
	fmt.Fprintln(w)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "part\tmodels\trate (req/s)\tstatic memory\tmemory incl. dynamic\tmodel names")
	for _, p := range s.Parts {
		fmt.Fprintf(tw, "%d\t%d\t%.1f\t%s\t%s\t%s\n", p.Part, len(p.Models), p.Rate, FormatSize(p.StaticMemory), FormatSize(p.Memory), strings.Join(p.Models, " "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	moved := make(map[string]Move, len(s.Moves))
	for _, m := range s.Moves {
		moved[m.Model] = m
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "model\tpart\t")
	for i, name := range s.models {
		change := ""
		if m, ok := moved[name]; ok {
			if m.From == Unassigned {
				change = "(new)"
			} else {
				change = fmt.Sprintf("(moved from %d)", m.From)
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", name, s.assign[i], change)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	textout.WriteNotes(w, s.Notes)
	return nil
}

// Package experiment reruns the Symphony paper's evaluations (§5, Figures
// 4-15 and Table 4) as one command each: `symphony experiment NAME`. An
// experiment builds its workloads in code on the paper's axes (models, SLOs,
// burstiness, popularity, GPU counts, network delays), runs them in the
// simulator (bench/sim) or the partitioning study (bench/partexp), and
// writes its table as CSV and JSON, the paper's figure drawn from our run
// as SVG and PNG, and a text table with the paper's numbers beside ours.
//
// The simulator is seeded, so a deterministic experiment's CSV is the same
// bytes on every machine: `make check-experiments` reruns them in their
// quick form and compares each CSV with the one recorded under
// testdata/experiments, which is how the figures in docs/benchmarks.md are
// kept honest (Check).
package experiment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Experiment is one of the paper's evaluations.
type Experiment struct {
	// Name is the command's argument: table4, fig4, ….
	Name string
	// Title says what the paper's figure shows.
	Title string
	// Paper cites where in the paper the figure is, and what the paper
	// reports in words where it prints no numbers.
	Paper string
	// Deterministic experiments run only the seeded simulator or
	// deterministic planners: their CSV is the same bytes on any machine,
	// so Check can compare it with a recorded copy.
	Deterministic bool
	run           func(*Run) error
}

// Options control one run of an experiment.
type Options struct {
	// Quick runs the reduced version (fewer cells, shorter simulated
	// windows, a coarser goodput search) that finishes in seconds, for CI.
	Quick bool
	// OutDir receives NAME.csv, NAME.json and the charts; empty writes
	// no files (the table still reaches the caller).
	OutDir string
	// Workers is how many simulations run at once (0: one per CPU). The
	// results do not depend on it: every cell is seeded on its own.
	Workers int
	// DataDir is where bundled files (testdata/...) are read from; empty
	// is the working directory, the repository's root.
	DataDir string
	// Progress, when set, receives a line per finished cell.
	Progress func(done, total int, cell string)
}

// Run is one experiment's run in progress: the options, the table it fills
// and the checks against the paper it states.
type Run struct {
	Options
	ctx   context.Context
	exp   *Experiment
	table Table
	files []string
}

// Result is what an experiment produced, as its JSON file holds it.
type Result struct {
	Experiment string   `json:"experiment"`
	Title      string   `json:"title"`
	Paper      string   `json:"paper"`
	Quick      bool     `json:"quick"`
	Table      Table    `json:"table"`
	Files      []string `json:"files,omitempty"`
}

// Table is an experiment's figures: one row per cell of its grid, with the
// paper's number beside ours where the paper prints one, and the claims the
// paper makes in words, each checked against our run.
type Table struct {
	Columns []Column `json:"columns"`
	Rows    [][]any  `json:"rows"`
	Claims  []Claim  `json:"claims,omitempty"`
	Notes   []string `json:"notes,omitempty"`
}

// Column is one column of a Table: its name in the CSV header and how its
// numbers are printed (a fmt verb such as "%.1f"; "" for strings), so that
// the CSV is exactly reproducible and rounding noise below the printed
// digits cannot fail a check.
type Column struct {
	Name   string `json:"name"`
	Format string `json:"format,omitempty"`
}

// Claim is a statement of the paper, or an acceptance target, checked
// against our run: what it says, what we measured, and whether it holds.
type Claim struct {
	Claim string `json:"claim"`
	Ours  string `json:"ours"`
	Holds bool   `json:"holds"`
}

// All returns every experiment, in the paper's order.
func All() []*Experiment {
	return []*Experiment{
		table4Experiment(), fig4Experiment(), fig6Experiment(), fig7Experiment(),
		fig8Experiment(), fig9Experiment(), fig10Experiment(), fig11Experiment(),
		fig13Experiment(), fig14Experiment(), fig15Experiment(), cloudExperiment(), replanExperiment(),
		replanPipelineExperiment(),
	}
}

// Lookup returns the experiment called name, or an error listing the names.
func Lookup(name string) (*Experiment, error) {
	var names []string
	for _, e := range All() {
		if e.Name == name {
			return e, nil
		}
		names = append(names, e.Name)
	}
	return nil, fmt.Errorf("unknown experiment %q (have %s)", name, strings.Join(names, ", "))
}

// Run runs e with o and writes its files into o.OutDir (when set). The
// context stops it between cells.
func (e *Experiment) Run(ctx context.Context, o Options) (*Result, error) {
	r := &Run{Options: o, ctx: ctx, exp: e}
	if err := e.run(r); err != nil {
		return nil, fmt.Errorf("experiment %s: %w", e.Name, err)
	}
	res := &Result{Experiment: e.Name, Title: e.Title, Paper: e.Paper, Quick: o.Quick, Table: r.table}
	if o.OutDir != "" {
		files, err := writeResult(o.OutDir, res)
		r.files = append(files, r.files...)
		if err != nil {
			return nil, fmt.Errorf("experiment %s: %w", e.Name, err)
		}
		res.Files = r.files
	}
	return res, nil
}

// columns sets the table's columns; rows added later must match them.
func (r *Run) columns(cols ...Column) { r.table.Columns = cols }

// row appends one row; its values are numbers or strings, one per column.
func (r *Run) row(values ...any) {
	if len(values) != len(r.table.Columns) {
		panic(fmt.Sprintf("experiment %s: a row of %d values for %d columns", r.exp.Name, len(values), len(r.table.Columns)))
	}
	r.table.Rows = append(r.table.Rows, values)
}

// claim records a claim of the paper (or a target) and whether our run
// holds it.
func (r *Run) claim(claim string, holds bool, ours string, args ...any) {
	r.table.Claims = append(r.table.Claims, Claim{Claim: claim, Ours: fmt.Sprintf(ours, args...), Holds: holds})
}

// note records something a reader needs to read the table.
func (r *Run) note(format string, args ...any) {
	r.table.Notes = append(r.table.Notes, fmt.Sprintf(format, args...))
}

// plotted records chart files the experiment wrote.
func (r *Run) plotted(paths []string, err error) error {
	r.files = append(r.files, paths...)
	return err
}

// col is a Column; num is a numeric one printed with format.
func col(name string) Column         { return Column{Name: name} }
func num(name, format string) Column { return Column{Name: name, Format: format} }
func sortedKeys[K int | string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// cellText prints one value of column c.
func cellText(c Column, v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		if x != x { // NaN: not measured, or not given by the paper
			return ""
		}
		if c.Format != "" {
			return fmt.Sprintf(c.Format, x)
		}
		return fmt.Sprintf("%g", x)
	case int:
		return fmt.Sprintf("%d", x)
	case bool:
		return fmt.Sprintf("%t", x)
	}
	return fmt.Sprint(v)
}

// WriteText prints res as a human table: the rows, then the paper's claims
// with whether each holds, then the notes.
func WriteText(w io.Writer, res *Result) error {
	ew := &errWriter{w: w}
	mode := ""
	if res.Quick {
		mode = " (quick)"
	}
	ew.printf("%s: %s%s\n%s\n\n", res.Experiment, res.Title, mode, res.Paper)
	t := res.Table
	width := make([]int, len(t.Columns))
	cells := make([][]string, len(t.Rows))
	for i, c := range t.Columns {
		width[i] = len(c.Name)
	}
	for r, row := range t.Rows {
		cells[r] = make([]string, len(row))
		for i, v := range row {
			cells[r][i] = cellText(t.Columns[i], v)
			width[i] = max(width[i], len(cells[r][i]))
		}
	}
	line := func(vals []string) {
		for i, v := range vals {
			if i > 0 {
				ew.printf("  ")
			}
			ew.printf("%-*s", width[i], v)
		}
		ew.printf("\n")
	}
	names := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		names[i] = c.Name
	}
	line(names)
	for _, row := range cells {
		line(row)
	}
	if len(t.Claims) > 0 {
		ew.printf("\nagainst the paper:\n")
		for _, c := range t.Claims {
			mark := "holds"
			if !c.Holds {
				mark = "DOES NOT HOLD"
			}
			ew.printf("  [%s] %s: %s\n", mark, c.Claim, c.Ours)
		}
	}
	for _, n := range t.Notes {
		ew.printf("note: %s\n", n)
	}
	for _, f := range res.Files {
		ew.printf("wrote %s\n", f)
	}
	return ew.err
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

// errStopped is returned when the context ended the run between cells.
var errStopped = errors.New("stopped")

// Names lists the experiments' names in the paper's order, for usage text.
func Names() []string {
	var out []string
	for _, e := range All() {
		out = append(out, e.Name)
	}
	return out
}

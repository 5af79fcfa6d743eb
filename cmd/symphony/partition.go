package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/symphony-serving/symphony/bench/partexp"
	"github.com/symphony-serving/symphony/partition"
)

// runPartition is `symphony partition -f M`: the epoch partitioner on a
// model file (docs/workload-format.md, "Partition model file"), or, as
// `symphony partition experiment`, the paper's Appendix A.2 comparison of
// the engines.
func runPartition(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "experiment" {
		return runPartitionExperiment(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("partition", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("f", "", "model file (required)")
	asJSON := fs.Bool("json", false, "print the result as JSON on stdout")
	engine := fs.String("engine", partition.DefaultEngine, "engine: "+strings.Join(partition.EngineNames(), ", "))
	timeLimit := fs.Duration("time-limit", partition.DefaultMILPTimeLimit, "stop the engine after this long with its best assignment")
	solver := fs.String("solver", "", "MILP solver for --engine milp: cbc, glpsol or a path to one (default: the first installed)")
	seed := fs.Uint64("seed", 1, "seed of the heuristic's search order and the random search's draws")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *file == "" {
		return usageErr("-f MODELFILE is required")
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments %q", fs.Args())
	}
	if *timeLimit <= 0 {
		return usageErr("--time-limit must be positive, have %v", *timeLimit)
	}
	eng, err := partition.NewEngine(*engine, *seed, *solver)
	if err != nil {
		return usageErr("--engine: %v", err)
	}
	mf, err := partition.ParseModelFile(*file)
	if err != nil {
		return err
	}
	// Ctrl-C stops the engine (and kills a solver subprocess) instead of
	// leaving it running; the engine then returns its best assignment.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeLimit)
	defer cancel()
	res, err := eng.Solve(ctx, mf.Problem)
	if err != nil {
		return fmt.Errorf("%s: %w", *file, err)
	}
	out, err := newPartitionOutput(mf, eng.Name(), res)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false) // reasons such as "idle > 10%" stay readable
		return enc.Encode(out)
	}
	return out.writeText(stdout)
}

// partitionOutput is the `symphony partition` report; its JSON is the
// command's --json output.
type partitionOutput struct {
	Source string `json:"source"`
	// Engine produced the assignment; RequestedEngine is the one asked for
	// (they differ when the MILP fell back to the heuristic).
	Engine          string `json:"engine"`
	RequestedEngine string `json:"requested_engine"`
	// Assignment maps model name to part.
	Assignment map[string]int      `json:"assignment"`
	Parts      []partitionPart     `json:"parts"`
	Imbalance  partition.Imbalance `json:"imbalance"`
	Objective  float64             `json:"objective"`
	// Disruption is the bytes loaded plus unloaded against the current
	// assignment; MaxDisruption is C_max, null when unbounded.
	Disruption    int64           `json:"disruption"`
	MaxDisruption *int64          `json:"max_disruption"`
	Moves         []partitionMove `json:"moves"`
	Optimal       bool            `json:"optimal"`
	SolveSeconds  float64         `json:"solve_seconds"`
	Notes         []string        `json:"notes"`

	models     []string // in file order, for the text listing
	assign     []int
	hasCurrent bool
}

// partitionPart is one part of the answer.
type partitionPart struct {
	Part   int      `json:"part"`
	Models []string `json:"models"`
	Rate   float64  `json:"rate"`
	// StaticMemory is Σ s_i; Memory adds the largest dynamic memory, the
	// left side of Eq. 6, in bytes.
	StaticMemory int64 `json:"static_memory"`
	Memory       int64 `json:"memory"`
}

// partitionMove is a model whose part changes; From is -1 for a new model.
type partitionMove struct {
	Model string `json:"model"`
	From  int    `json:"from"`
	To    int    `json:"to"`
}

func newPartitionOutput(mf *partition.ModelFile, requested string, res *partition.Result) (*partitionOutput, error) {
	p := mf.Problem
	ev, err := p.Evaluate(res.Assignment)
	if err != nil {
		return nil, err
	}
	out := &partitionOutput{
		Source: mf.Source, Engine: res.Engine, RequestedEngine: requested,
		Assignment: make(map[string]int, len(p.Models)),
		Imbalance:  res.Imbalance, Objective: res.Objective, Disruption: res.Disruption,
		Moves: []partitionMove{}, Optimal: res.Optimal, SolveSeconds: res.SolveTime.Seconds(),
		Notes:  append(append([]string{}, mf.Warnings...), res.Notes...),
		assign: res.Assignment, hasCurrent: p.Current != nil,
	}
	if p.Current != nil && p.MaxDisruption >= 0 {
		c := p.MaxDisruption
		out.MaxDisruption = &c
	}
	out.Parts = make([]partitionPart, p.Parts)
	for j := range out.Parts {
		out.Parts[j] = partitionPart{Part: j, Models: []string{}, Rate: ev.PartRate[j], StaticMemory: ev.PartStatic[j], Memory: ev.PartMemory[j]}
	}
	for i, m := range p.Models {
		j := res.Assignment[i]
		out.Assignment[m.Name] = j
		out.models = append(out.models, m.Name)
		out.Parts[j].Models = append(out.Parts[j].Models, m.Name)
		if p.Current != nil && p.Current[i] != j {
			out.Moves = append(out.Moves, partitionMove{Model: m.Name, From: p.Current[i], To: j})
		}
	}
	if len(ev.Violations) > 0 {
		// NewResult makes this impossible; say so rather than print an
		// infeasible answer as if it were fine.
		return nil, fmt.Errorf("engine %s returned an infeasible assignment: %s", res.Engine, ev.Violations[0])
	}
	return out, nil
}

func (o *partitionOutput) writeText(out io.Writer) error {
	// Tables are aligned in a buffer, then written without the padding
	// tabwriter leaves at line ends.
	var buf bytes.Buffer
	if err := o.writeTables(&buf); err != nil {
		return err
	}
	var trimmed strings.Builder
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		trimmed.WriteString(strings.TrimRight(line, " \n"))
		if strings.HasSuffix(line, "\n") {
			trimmed.WriteByte('\n')
		}
	}
	_, err := io.WriteString(out, trimmed.String())
	return err
}

func (o *partitionOutput) writeTables(w io.Writer) error {
	engine := o.Engine
	if o.Engine != o.RequestedEngine {
		engine += fmt.Sprintf(" (requested %s)", o.RequestedEngine)
	}
	if o.Optimal {
		engine += ", proven optimal"
	}
	fmt.Fprintf(w, "%s: %d models into %d parts\n", filepath.Base(o.Source), len(o.models), len(o.Parts))
	fmt.Fprintf(w, "engine:      %s, solved in %s\n", engine, time.Duration(o.SolveSeconds*float64(time.Second)).Round(time.Microsecond))
	fmt.Fprintf(w, "imbalance:   rate %.4f, memory %.4f ((max-min)/avg over parts); objective %.6g\n", o.Imbalance.Rate, o.Imbalance.Memory, o.Objective)
	if o.hasCurrent {
		limit := "unbounded"
		if o.MaxDisruption != nil {
			limit = partition.FormatSize(*o.MaxDisruption)
		}
		fmt.Fprintf(w, "disruption:  %s loaded+unloaded (max_disruption %s), %d models placed or moved\n", partition.FormatSize(o.Disruption), limit, len(o.Moves))
	} else {
		fmt.Fprintln(w, "disruption:  none (no current assignment: the first epoch)")
	}
	fmt.Fprintln(w)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "part\tmodels\trate (req/s)\tstatic memory\tmemory incl. dynamic\tmodel names")
	for _, p := range o.Parts {
		fmt.Fprintf(tw, "%d\t%d\t%.1f\t%s\t%s\t%s\n", p.Part, len(p.Models), p.Rate, partition.FormatSize(p.StaticMemory), partition.FormatSize(p.Memory), strings.Join(p.Models, " "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	moved := make(map[string]partitionMove, len(o.Moves))
	for _, m := range o.Moves {
		moved[m.Model] = m
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "model\tpart\t")
	for i, name := range o.models {
		change := ""
		if m, ok := moved[name]; ok {
			if m.From == partition.Unassigned {
				change = "(new)"
			} else {
				change = fmt.Sprintf("(moved from %d)", m.From)
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", name, o.assign[i], change)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeNotes(w, o.Notes)
	return nil
}

// runPartitionExperiment is `symphony partition experiment`: the paper's
// Appendix A.2 (Figure 15) on random instances.
func runPartitionExperiment(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("partition experiment", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := partexp.DefaultConfig()
	models := fs.Int("models", def.Models, "models per instance")
	parts := fs.Int("parts", def.Parts, "parts per instance")
	instances := fs.Int("instances", def.Instances, "random instances, seeds 1..N")
	meanRate := fs.Float64("mean-rate", def.MeanRate, "mean of the exponential per-model request rate (req/s)")
	timeLimit := fs.Duration("time-limit", def.TimeLimit, "time limit of each engine on each instance (the heuristic stops earlier at its local optimum)")
	engines := fs.String("engines", strings.Join(def.Engines, ","), "comma-separated engines to compare: "+strings.Join(partition.EngineNames(), ", "))
	solver := fs.String("solver", "", "MILP solver: cbc, glpsol or a path to one (default: the first installed)")
	asJSON := fs.Bool("json", false, "print the report as JSON on stdout")
	csvPath := fs.String("csv", "", "write one row per (instance, engine) as CSV to `FILE`")
	plotDir := fs.String("plot", "", "write the CDF of the imbalance factors (Figure 15) as SVG and PNG into `DIR`")
	quiet := fs.Bool("quiet", false, "print no progress on stderr")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments %q", fs.Args())
	}
	cfg := partexp.Config{
		Models: *models, Parts: *parts, Instances: *instances, MeanRate: *meanRate,
		TimeLimit: *timeLimit, Solver: *solver,
	}
	for _, e := range strings.Split(*engines, ",") {
		if e = strings.TrimSpace(e); e != "" {
			cfg.Engines = append(cfg.Engines, e)
		}
	}
	if err := cfg.Validate(); err != nil {
		return usageErr("%v", err)
	}
	log := newLogger(stderr, *quiet)
	total := cfg.Instances * len(cfg.Engines)
	log.Info().Int("runs", total).Str("at_most", (time.Duration(total)*cfg.TimeLimit).String()).
		Msgf("partitioning %d instances of %d models into %d parts", cfg.Instances, cfg.Models, cfg.Parts)
	cfg.Progress = func(r partexp.Trial, done, total int) {
		ev := log.Info().Int("instance", r.Instance).Str("engine", r.Requested)
		if r.Engine != r.Requested && r.Engine != "" {
			ev = ev.Str("used", r.Engine)
		}
		if r.Feasible {
			ev = ev.Float64("rate_imbalance", round(r.RateImbalance, 4)).Float64("memory_imbalance", round(r.MemoryImbalance, 4))
		} else {
			ev = ev.Str("error", r.Error)
		}
		ev.Float64("seconds", round(r.SolveSeconds, 3)).Msgf("%d/%d", done, total)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := partexp.Run(ctx, cfg)
	if err != nil {
		return err
	}
	return writeExperiment(stdout, rep, *asJSON, *csvPath, *plotDir,
		func(dir string) ([]string, error) { return partexp.WritePlot(dir, rep) }, log)
}

// writeNotes prints a command's notes (what it did not do, or did instead)
// after its tables, one bullet each.
func writeNotes(w io.Writer, notes []string) {
	if len(notes) == 0 {
		return
	}
	fmt.Fprintln(w, "\nnotes:")
	for _, n := range notes {
		fmt.Fprintf(w, "  - %s\n", n)
	}
}

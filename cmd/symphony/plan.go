package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/symphony-serving/symphony/partition/lpsolve"
	"github.com/symphony-serving/symphony/partition/plan"
)

// runPlan is `symphony plan -f APP`: the cost planner on an application
// file (docs/workload-format.md, "Application file"), or, as `symphony
// plan experiment`, the comparison of Harpagon §IV-B on random instances.
func runPlan(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "experiment" {
		return runPlanExperiment(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("f", "", "application file (required)")
	asJSON := fs.Bool("json", false, "print the plan as JSON on stdout")
	dispatch := fs.String("dispatch", "", "worst-case latency model: batch-aware, machine-throughput or round-robin (default: the file's, else batch-aware)")
	maxConfigs := fs.Int("max-configs", 0, "configurations per module, 0 for any number (default: the file's)")
	dummy := fs.Bool("dummy", true, "add dummy requests where they lower the cost (default: the file's, else true)")
	split := fs.String("split", "", "latency split: latency-cost, even, throughput or quantized:<step> (default: the file's, else latency-cost)")
	heuristicsOnly := fs.Bool("heuristics-only", false, "plan with the papers' heuristics alone (Algorithm 1, dummies, Algorithm 2), without this planner's exact refinements; reproduces the papers' tables")
	baseline := fs.String("baseline", "", "plan as a baseline would: nexus, scrooge, inferline or clipper")
	workloadOut := fs.String("workload-out", "", "write a Symphony workload file whose per-model SLOs are the module budgets to `FILE`")
	compare := fs.Bool("compare", false, "also run every baseline, the brute force and (with a solver) Scrooge's MILP, and print their costs")
	solver := fs.String("solver", "", "MILP solver for --compare: cbc, glpsol or a path to one (default: the first installed)")
	timeLimit := fs.Duration("time-limit", lpsolve.DefaultTimeLimit, "time limit of the MILP for --compare")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *file == "" {
		return usageErr("-f APPFILE is required")
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments %q", fs.Args())
	}
	if *timeLimit <= 0 {
		return usageErr("--time-limit must be positive, have %v", *timeLimit)
	}
	af, err := plan.ParseAppFile(*file)
	if err != nil {
		return err
	}
	o := af.Options
	var bl plan.Baseline
	if *baseline != "" {
		if bl, err = plan.ParseBaseline(*baseline); err != nil {
			return usageErr("--baseline: %v", err)
		}
		for _, name := range []string{"dispatch", "max-configs", "dummy", "split", "heuristics-only"} {
			if flagSet(fs, name) {
				return usageErr("--%s and --baseline both set the planner; give one", name)
			}
		}
		o = bl.Options()
	}
	if flagSet(fs, "dispatch") {
		if o.Dispatch, err = plan.ParseDispatch(*dispatch); err != nil {
			return usageErr("--dispatch: %v", err)
		}
	}
	if flagSet(fs, "max-configs") {
		if *maxConfigs < 0 || *maxConfigs > plan.MaxConfigsPerModule {
			return usageErr("--max-configs %d is outside 0..%d", *maxConfigs, plan.MaxConfigsPerModule)
		}
		o.MaxConfigs = *maxConfigs
	}
	if flagSet(fs, "dummy") {
		o.Dummy = *dummy
	}
	if flagSet(fs, "split") {
		if o.Split, err = plan.ParseSplit(*split); err != nil {
			return usageErr("--split: %v", err)
		}
	}
	if *heuristicsOnly {
		h := plan.HeuristicsOnly()
		o.ModuleNodes, o.PlanSplit = h.ModuleNodes, h.PlanSplit
	}
	start := time.Now()
	var p *plan.Plan
	if *baseline != "" {
		p, err = plan.SolveBaseline(af.App, bl)
	} else {
		p, err = plan.Solve(af.App, o)
		if err == nil && *heuristicsOnly {
			p.Planner = plan.SystemHarpagon
		}
	}
	took := time.Since(start)
	if err != nil {
		return fmt.Errorf("%s: %w", *file, err)
	}
	// The planner's own check, independent of how the plan was made.
	if err := plan.Verify(af.App, p); err != nil {
		return fmt.Errorf("%s: the planner produced an invalid plan: %w", *file, err)
	}
	out := newPlanOutput(af.Source, p, took)
	if *compare {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		out.Compare = comparePlanners(ctx, af.App, p, *solver, *timeLimit)
	}
	if *workloadOut != "" {
		if err := writeFile(*workloadOut, func(w io.Writer) error { return plan.WriteWorkload(w, af.App, p) }); err != nil {
			return fmt.Errorf("--workload-out: %w", err)
		}
		out.WorkloadOut = *workloadOut
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false) // reasons such as "idle > 10%" stay readable
		return enc.Encode(out)
	}
	return out.writeText(stdout)
}

// planOutput is the `symphony plan` report; its JSON is the command's
// --json output. Latencies are in seconds, rates in requests per second,
// costs per hour.
type planOutput struct {
	Source      string            `json:"source"`
	Planner     string            `json:"planner"`
	Options     planOptionsOutput `json:"options"`
	SLO         float64           `json:"slo"`
	CostPerHour float64           `json:"cost_per_hour"`
	Modules     []planModule      `json:"modules"`
	Paths       []planPath        `json:"paths"`
	// PathsOmitted reports that the DAG has more paths than listed.
	PathsOmitted bool     `json:"paths_omitted"`
	PlanSeconds  float64  `json:"plan_seconds"`
	Notes        []string `json:"notes"`
	// Compare holds, with --compare, every planner's cost on the file.
	Compare     []planCompare `json:"compare,omitempty"`
	WorkloadOut string        `json:"workload_out,omitempty"`
}

type planOptionsOutput struct {
	Dispatch   string `json:"dispatch"`
	MaxConfigs int    `json:"max_configs"`
	Dummy      bool   `json:"dummy"`
	Split      string `json:"split"`
}

type planModule struct {
	Name        string       `json:"name"`
	Kind        string       `json:"kind"`
	Rate        float64      `json:"rate"`
	DummyRate   float64      `json:"dummy_rate"`
	Budget      float64      `json:"budget"`
	WorstCase   float64      `json:"worst_case"`
	CostPerHour float64      `json:"cost_per_hour"`
	Configs     []planConfig `json:"configs"`
}

type planConfig struct {
	Hardware    string  `json:"hardware"`
	Batch       int     `json:"batch"`
	Concurrency int     `json:"concurrency"`
	Latency     float64 `json:"latency"`
	Throughput  float64 `json:"throughput"`
	Machines    float64 `json:"machines"`
	Rate        float64 `json:"rate"`
	DummyRate   float64 `json:"dummy_rate"`
	Remaining   float64 `json:"remaining"`
	WorstCase   float64 `json:"worst_case"`
	CostPerHour float64 `json:"cost_per_hour"`
}

type planPath struct {
	Modules   []string `json:"modules"`
	WorstCase float64  `json:"worst_case"`
	Budget    float64  `json:"budget"`
}

// planCompare is one planner's result on the file, for --compare.
type planCompare struct {
	Planner     string   `json:"planner"`
	CostPerHour *float64 `json:"cost_per_hour"`
	// ExtraOverOurs is cost/ours − 1.
	ExtraOverOurs *float64 `json:"extra_over_ours"`
	PlanSeconds   float64  `json:"plan_seconds"`
	Error         string   `json:"error,omitempty"`
}

func newPlanOutput(source string, p *plan.Plan, took time.Duration) *planOutput {
	o := &planOutput{
		Source: source, Planner: p.Planner, SLO: p.SLO.Seconds(), CostPerHour: p.CostPerHour,
		Options: planOptionsOutput{
			Dispatch: p.Options.Dispatch.String(), MaxConfigs: p.Options.MaxConfigs,
			Dummy: p.Options.Dummy, Split: p.Options.Split.String(),
		},
		Modules: []planModule{}, Paths: []planPath{}, PathsOmitted: p.PathsOmitted,
		PlanSeconds: took.Seconds(), Notes: append([]string{}, p.Notes...),
	}
	for _, m := range p.Modules {
		pm := planModule{Name: m.Name, Kind: m.Kind.String(), Rate: m.Rate, DummyRate: m.DummyRate,
			Budget: m.Budget.Seconds(), WorstCase: m.WorstCase.Seconds(), CostPerHour: m.CostPerHour, Configs: []planConfig{}}
		for _, c := range m.Configs {
			pm.Configs = append(pm.Configs, planConfig{
				Hardware: c.Hardware, Batch: c.Batch, Concurrency: c.Concurrency, Latency: c.Latency.Seconds(),
				Throughput: c.Throughput, Machines: c.Machines, Rate: c.Rate, DummyRate: c.DummyRate,
				Remaining: c.Remaining, WorstCase: c.WorstCase.Seconds(), CostPerHour: c.CostPerHour,
			})
		}
		o.Modules = append(o.Modules, pm)
	}
	for _, path := range p.Paths {
		o.Paths = append(o.Paths, planPath{Modules: path.Modules, WorstCase: path.WorstCase.Seconds(), Budget: path.Budget.Seconds()})
	}
	return o
}

// comparePlanners runs every planner on app: the baselines, the brute force
// (when the instance is small enough) and Scrooge's MILP (when a solver is
// installed), with their costs relative to ours.
func comparePlanners(ctx context.Context, app *plan.App, ours *plan.Plan, solver string, limit time.Duration) []planCompare {
	var out []planCompare
	add := func(name string, p *plan.Plan, took time.Duration, err error) {
		pc := planCompare{Planner: name, PlanSeconds: took.Seconds()}
		if err == nil {
			err = plan.Verify(app, p)
		}
		if err != nil {
			pc.Error = err.Error()
		} else {
			c, x := p.CostPerHour, p.CostPerHour/ours.CostPerHour-1
			pc.CostPerHour, pc.ExtraOverOurs = &c, &x
		}
		out = append(out, pc)
	}
	timed := func(f func() (*plan.Plan, error)) (*plan.Plan, time.Duration, error) {
		start := time.Now()
		p, err := f()
		return p, time.Since(start), err
	}
	for _, b := range plan.Baselines() {
		p, took, err := timed(func() (*plan.Plan, error) { return plan.SolveBaseline(app, b) })
		add(b.String(), p, took, err)
	}
	p, took, err := timed(func() (*plan.Plan, error) { return plan.BruteForce(app, ours.Options, 0) })
	add("brute-force", p, took, err)
	mctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	p, took, err = timed(func() (*plan.Plan, error) {
		q, _, err := plan.SolveMILP(mctx, app, solver)
		return q, err
	})
	if errors.Is(err, lpsolve.ErrNoSolver) {
		out = append(out, planCompare{Planner: "scrooge-milp", Error: err.Error()})
	} else {
		add("scrooge-milp", p, took, err)
	}
	return out
}

func (o *planOutput) writeText(out io.Writer) error {
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

func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func (o *planOutput) writeTables(w io.Writer) error {
	fmt.Fprintf(w, "%s: %d modules, SLO %s\n", filepath.Base(o.Source), len(o.Modules), plan.FormatSeconds(o.SLO))
	fmt.Fprintf(w, "planner:  %s (dispatch %s, max configs %s, dummy %v, split %s), planned in %s\n",
		o.Planner, o.Options.Dispatch, maxConfigsText(o.Options.MaxConfigs), o.Options.Dummy, o.Options.Split, plan.FormatSeconds(o.PlanSeconds))
	fmt.Fprintf(w, "cost:     %.4f per hour\n\n", o.CostPerHour)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "module\trate\tbudget\tworst case\tcost/h\thardware\tbatch\tconc\tmachines\tassigned\tdummy\tw\tworst case\t")
	for _, m := range o.Modules {
		for i, c := range m.Configs {
			head := "\t\t\t\t\t"
			if i == 0 {
				head = fmt.Sprintf("%s\t%.4g\t%s\t%s\t%.4f\t", m.Name, m.Rate, plan.FormatSeconds(m.Budget), plan.FormatSeconds(m.WorstCase), m.CostPerHour)
			}
			fmt.Fprintf(tw, "%s%s\t%d\t%d\t%.4g\t%.4g\t%.4g\t%.4g\t%s\t\n", head, c.Hardware, c.Batch, c.Concurrency,
				c.Machines, c.Rate, c.DummyRate, c.Remaining, plan.FormatSeconds(c.WorstCase))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "path\tworst case\tbudgets\t")
	for _, p := range o.Paths {
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", strings.Join(p.Modules, " -> "), plan.FormatSeconds(p.WorstCase), plan.FormatSeconds(p.Budget))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if o.PathsOmitted {
		fmt.Fprintf(w, "(more paths omitted; the first %d are listed)\n", len(o.Paths))
	}
	if len(o.Compare) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "planner\tcost/h\tover ours\ttime\t")
		fmt.Fprintf(tw, "%s\t%.4f\t\t%s\t\n", o.Planner, o.CostPerHour, plan.FormatSeconds(o.PlanSeconds))
		for _, c := range o.Compare {
			if c.CostPerHour == nil {
				fmt.Fprintf(tw, "%s\t-\t\t\t%s\n", c.Planner, c.Error)
				continue
			}
			fmt.Fprintf(tw, "%s\t%.4f\t%+.1f%%\t%s\t\n", c.Planner, *c.CostPerHour, 100**c.ExtraOverOurs, plan.FormatSeconds(c.PlanSeconds))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if o.WorkloadOut != "" {
		fmt.Fprintf(w, "\nworkload written to %s\n", o.WorkloadOut)
	}
	writeNotes(w, o.Notes)
	return nil
}

func maxConfigsText(n int) string {
	if n == 0 {
		return "any"
	}
	return num(float64(n))
}

// runPlanExperiment is `symphony plan experiment`: ours, the papers'
// heuristics alone, every baseline, the brute force and (with a solver)
// Scrooge's MILP on random instances, and the comparison table.
func runPlanExperiment(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("plan experiment", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := plan.DefaultExperiment()
	instances := fs.Int("instances", def.Instances, "random instances")
	seed := fs.Uint64("seed", def.Seed, "seed of the instance series")
	milp := fs.Bool("milp", def.MILP, "also run Scrooge's MILP (default: when a solver is installed)")
	solver := fs.String("solver", "", "MILP solver: cbc, glpsol or a path to one (default: the first installed)")
	timeLimit := fs.Duration("time-limit", def.MILPTimeLimit, "time limit of each MILP solve")
	asJSON := fs.Bool("json", false, "print the report as JSON on stdout")
	csvPath := fs.String("csv", "", "write one row per (instance, planner) as CSV to `FILE`")
	quiet := fs.Bool("quiet", false, "print no progress on stderr")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments %q", fs.Args())
	}
	cfg := def
	cfg.Instances, cfg.Seed, cfg.MILP, cfg.Solver, cfg.MILPTimeLimit = *instances, *seed, *milp, *solver, *timeLimit
	if err := cfg.Validate(); err != nil {
		return usageErr("%v", err)
	}
	log := newLogger(stderr, *quiet)
	log.Info().Int("instances", cfg.Instances).Uint64("seed", cfg.Seed).Bool("milp", cfg.MILP).Msg("planning random applications")
	every := max(1, cfg.Instances/10)
	cfg.Progress = func(t plan.Trial, done, total int) {
		if done%every == 0 || done == total {
			ev := log.Info()
			if c, ok := t.Cost[plan.SystemOurs]; ok {
				ev = ev.Float64("ours", round(c, 4))
			}
			if c, ok := t.Cost[plan.SystemBrute]; ok {
				ev = ev.Float64("brute_force", round(c, 4))
			}
			ev.Msgf("%d/%d", done, total)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := plan.RunExperiment(ctx, cfg)
	if err != nil {
		return err
	}
	return writeExperiment(stdout, rep, *asJSON, *csvPath, "", nil, log)
}

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/symphony-serving/symphony/cmd/internal/cli"
	"github.com/symphony-serving/symphony/partition/lpsolve"
	"github.com/symphony-serving/symphony/partition/provision"
)

// runProvision is `symphony provision -f APP`: the cost planner on an application
// file (docs/workload-format.md, "Application file"), or, as `symphony
// provision experiment`, the comparison of Harpagon §IV-B on random instances.
func runProvision(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "experiment" {
		return runProvisionExperiment(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("provision", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("f", "", "application file (required)")
	asJSON := fs.Bool("json", false, "print the provision as JSON on stdout")
	dispatch := fs.String("dispatch", "", "worst-case latency model: batch-aware, machine-throughput or round-robin (default: the file's, else batch-aware)")
	maxConfigs := fs.Int("max-configs", 0, "configurations per module, 0 for any number (default: the file's)")
	dummy := fs.Bool("dummy", true, "add dummy requests where they lower the cost (default: the file's, else true)")
	split := fs.String("split", "", "latency split: latency-cost, even, throughput or quantized:<step> (default: the file's, else latency-cost)")
	heuristicsOnly := fs.Bool("heuristics-only", false, "provision with the papers' heuristics alone (Algorithm 1, dummies, Algorithm 2), without this planner's exact refinements; reproduces the papers' tables")
	baseline := fs.String("baseline", "", "provision as a baseline would: nexus, scrooge, inferline or clipper")
	workloadOut := fs.String("workload-out", "", "write a Symphony workload file whose per-model SLOs are the module budgets to `FILE`")
	arrival := fs.String("arrival", "const", "the --workload-out models' arrival process: const (the steady rate the planners plan for) or poisson")
	compare := fs.Bool("compare", false, "also run every baseline, the brute force and (with a solver) Scrooge's MILP, and print their costs")
	solver := fs.String("solver", "", "MILP solver for --compare: cbc, glpsol or a path to one (default: the first installed)")
	timeLimit := fs.Duration("time-limit", lpsolve.DefaultTimeLimit, "time limit of the MILP for --compare")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *file == "" {
		return cli.UsageErr("-f APPFILE is required")
	}
	if fs.NArg() > 0 {
		return cli.UsageErr("unexpected arguments %q", fs.Args())
	}
	if *timeLimit <= 0 {
		return cli.UsageErr("--time-limit must be positive, have %v", *timeLimit)
	}
	af, err := provision.ParseAppFile(*file)
	if err != nil {
		return err
	}
	o := af.Options
	var bl provision.Baseline
	if *baseline != "" {
		if bl, err = provision.ParseBaseline(*baseline); err != nil {
			return cli.UsageErr("--baseline: %v", err)
		}
		for _, name := range []string{"dispatch", "max-configs", "dummy", "split", "heuristics-only"} {
			if cli.FlagSet(fs, name) {
				return cli.UsageErr("--%s and --baseline both set the planner; give one", name)
			}
		}
		o = bl.Options()
	}
	if cli.FlagSet(fs, "dispatch") {
		if o.Dispatch, err = provision.ParseDispatch(*dispatch); err != nil {
			return cli.UsageErr("--dispatch: %v", err)
		}
	}
	if cli.FlagSet(fs, "max-configs") {
		if *maxConfigs < 0 || *maxConfigs > provision.MaxConfigsPerModule {
			return cli.UsageErr("--max-configs %d is outside 0..%d", *maxConfigs, provision.MaxConfigsPerModule)
		}
		o.MaxConfigs = *maxConfigs
	}
	if cli.FlagSet(fs, "dummy") {
		o.Dummy = *dummy
	}
	if cli.FlagSet(fs, "split") {
		if o.Split, err = provision.ParseSplit(*split); err != nil {
			return cli.UsageErr("--split: %v", err)
		}
	}
	if *heuristicsOnly {
		h := provision.HeuristicsOnly()
		o.ModuleNodes, o.SplitOverModules = h.ModuleNodes, h.SplitOverModules
	}
	start := time.Now()
	var p *provision.Provision
	if *baseline != "" {
		p, err = provision.SolveBaseline(af.App, bl)
	} else {
		p, err = provision.Solve(af.App, o)
		if err == nil && *heuristicsOnly {
			p.Planner = provision.SystemHarpagon
		}
	}
	took := time.Since(start)
	if err != nil {
		return fmt.Errorf("%s: %w", *file, err)
	}
	// The planner's own check, independent of how the provision was made.
	if err := provision.Verify(af.App, p); err != nil {
		return fmt.Errorf("%s: the planner produced an invalid provision: %w", *file, err)
	}
	out := provision.NewSummary(af.Source, p, took)
	out.SetPacking(provision.Pack(af.App, p))
	if *compare {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		out.Compare = provision.Compare(ctx, af.App, p, *solver, *timeLimit)
	}
	if *workloadOut != "" {
		if err := cli.WriteFile(*workloadOut, func(w io.Writer) error {
			return provision.WriteWorkload(w, af.App, p, provision.ExportOptions{Arrival: *arrival})
		}); err != nil {
			return fmt.Errorf("--workload-out: %w", err)
		}
		out.WorkloadOut = *workloadOut
	}
	if *asJSON {
		return cli.WriteJSON(stdout, out)
	}
	return out.WriteText(stdout)
}

// runProvisionExperiment is `symphony provision experiment`: ours, the papers'
// heuristics alone, every baseline, the brute force and (with a solver)
// Scrooge's MILP on random instances, and the comparison table.
func runProvisionExperiment(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("provision experiment", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := provision.DefaultExperiment()
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
		return cli.UsageErr("unexpected arguments %q", fs.Args())
	}
	cfg := def
	cfg.Instances, cfg.Seed, cfg.MILP, cfg.Solver, cfg.MILPTimeLimit = *instances, *seed, *milp, *solver, *timeLimit
	if err := cfg.Validate(); err != nil {
		return cli.UsageErr("%v", err)
	}
	log := cli.NewLogger(stderr, *quiet)
	log.Info().Int("instances", cfg.Instances).Uint64("seed", cfg.Seed).Bool("milp", cfg.MILP).Msg("planning random applications")
	every := max(1, cfg.Instances/10)
	cfg.Progress = func(t provision.Trial, done, total int) {
		if done%every == 0 || done == total {
			ev := log.Info()
			if c, ok := t.Cost[provision.SystemOurs]; ok {
				ev = ev.Float64("ours", cli.Round(c, 4))
			}
			if c, ok := t.Cost[provision.SystemBrute]; ok {
				ev = ev.Float64("brute_force", cli.Round(c, 4))
			}
			ev.Msgf("%d/%d", done, total)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := provision.RunExperiment(ctx, cfg)
	if err != nil {
		return err
	}
	return cli.WriteExperiment(stdout, rep, *asJSON, *csvPath, "", nil, log)
}

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
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
	out, err := partition.NewSummary(mf, eng.Name(), res)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false) // reasons such as "idle > 10%" stay readable
		return enc.Encode(out)
	}
	return out.WriteText(stdout)
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

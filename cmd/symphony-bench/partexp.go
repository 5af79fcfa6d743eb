package main

import (
	"context"
	"flag"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/symphony-serving/symphony/bench/partexp"
	"github.com/symphony-serving/symphony/cmd/internal/cli"
	"github.com/symphony-serving/symphony/partition"
)

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
		return cli.UsageErr("unexpected arguments %q", fs.Args())
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
		return cli.UsageErr("%v", err)
	}
	log := cli.NewLogger(stderr, *quiet)
	total := cfg.Instances * len(cfg.Engines)
	log.Info().Int("runs", total).Str("at_most", (time.Duration(total)*cfg.TimeLimit).String()).
		Msgf("partitioning %d instances of %d models into %d parts", cfg.Instances, cfg.Models, cfg.Parts)
	cfg.Progress = func(r partexp.Trial, done, total int) {
		ev := log.Info().Int("instance", r.Instance).Str("engine", r.Requested)
		if r.Engine != r.Requested && r.Engine != "" {
			ev = ev.Str("used", r.Engine)
		}
		if r.Feasible {
			ev = ev.Float64("rate_imbalance", cli.Round(r.RateImbalance, 4)).Float64("memory_imbalance", cli.Round(r.MemoryImbalance, 4))
		} else {
			ev = ev.Str("error", r.Error)
		}
		ev.Float64("seconds", cli.Round(r.SolveSeconds, 3)).Msgf("%d/%d", done, total)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := partexp.Run(ctx, cfg)
	if err != nil {
		return err
	}
	return cli.WriteExperiment(stdout, rep, *asJSON, *csvPath, *plotDir,
		func(dir string) ([]string, error) { return partexp.WritePlot(dir, rep) }, log)
}

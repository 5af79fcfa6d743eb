package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/symphony-serving/symphony/cmd/internal/cli"
	"github.com/symphony-serving/symphony/partition"
)

// runPartition is `symphony partition -f M`: the epoch partitioner on a
// model file (docs/workload-format.md, "Partition model file"), or, as
// `symphony partition experiment`, the paper's Appendix A.2 comparison of
// the engines.
func runPartition(args []string, stdout, stderr io.Writer) error {
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
		return cli.UsageErr("-f MODELFILE is required")
	}
	if fs.NArg() > 0 {
		return cli.UsageErr("unexpected arguments %q", fs.Args())
	}
	if *timeLimit <= 0 {
		return cli.UsageErr("--time-limit must be positive, have %v", *timeLimit)
	}
	eng, err := partition.NewEngine(*engine, *seed, *solver)
	if err != nil {
		return cli.UsageErr("--engine: %v", err)
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
		return cli.WriteJSON(stdout, out)
	}
	return out.WriteText(stdout)
}

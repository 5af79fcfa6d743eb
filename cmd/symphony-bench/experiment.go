package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/symphony-serving/symphony/bench/experiment"
	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/cmd/internal/cli"
)

// runExperiment is `symphony-bench experiment NAME|all|list`: one of the
// paper's evaluations, its files, and its figures checked against the
// recorded ones (make check-experiments).
func runExperiment(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("experiment", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "run the reduced version (fewer cells, shorter runs) that finishes in seconds")
	outDir := fs.String("out", "out/experiments", "write NAME.csv, NAME.json and the charts (SVG, PNG) into `DIR`/NAME")
	asJSON := fs.Bool("json", false, "print the result as JSON on stdout instead of a table")
	workers := fs.Int("workers", 0, "simulations at once (0: one per CPU); the figures do not depend on it")
	check := fs.String("check", "", "compare each deterministic experiment's CSV with the one recorded under `DIR`/quick or DIR/full, and fail on any difference")
	record := fs.String("record", "", "write each deterministic experiment's CSV under `DIR`/quick or DIR/full, as the figures --check compares with")
	quiet := fs.Bool("quiet", false, "print no progress on stderr")
	// The experiment's name comes first; flags may follow it.
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if name == "" && fs.NArg() > 0 {
		name = fs.Arg(0)
	} else if fs.NArg() > 0 {
		return cli.UsageErr("unexpected arguments %q", fs.Args())
	}
	switch {
	case name == "":
		return cli.UsageErr("name an experiment (%s), all, or list", strings.Join(experiment.Names(), ", "))
	case *check != "" && *record != "":
		return cli.UsageErr("--check and --record exclude each other")
	case name == "list":
		for _, e := range experiment.All() {
			kind := "simulator, deterministic"
			if !e.Deterministic {
				kind = "measured"
			}
			fmt.Fprintf(stdout, "%-7s %s (%s)\n        %s\n", e.Name, e.Title, kind, e.Paper)
		}
		return nil
	}
	var exps []*experiment.Experiment
	if name == "all" {
		exps = experiment.All()
	} else {
		e, err := experiment.Lookup(name)
		if err != nil {
			return cli.UsageErr("%v", err)
		}
		exps = []*experiment.Experiment{e}
	}
	log := cli.NewLogger(stderr, *quiet)
	ctx, stop := cli.SignalContext()
	defer stop()
	var failed []string
	for _, e := range exps {
		if (*check != "" || *record != "") && !e.Deterministic {
			log.Info().Str("experiment", e.Name).Msg("not deterministic: nothing to check or record")
			continue
		}
		o := experiment.Options{Quick: *quick, Workers: *workers, Progress: func(done, total int, cell string) {
			log.Info().Str("experiment", e.Name).Msgf("%d/%d %s", done, total, cell)
		}}
		if *outDir != "" {
			o.OutDir = filepath.Join(*outDir, e.Name)
		}
		res, err := e.Run(ctx, o)
		if err != nil {
			return err
		}
		if *asJSON {
			if err := report.EncodeJSON(stdout, res); err != nil {
				return err
			}
		} else {
			if err := experiment.WriteText(stdout, res); err != nil {
				return err
			}
			fmt.Fprintln(stdout)
		}
		switch {
		case *record != "":
			path := experiment.RecordedPath(*record, e.Name, *quick)
			if err := cli.WriteFile(path, func(w io.Writer) error { _, err := w.Write(res.Table.CSV()); return err }); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "recorded %s\n", path)
		case *check != "":
			if err := experiment.Check(res, experiment.RecordedPath(*check, e.Name, *quick)); err != nil {
				fmt.Fprintf(stderr, "CHECK FAILED: %v\n", err)
				failed = append(failed, e.Name)
			} else {
				fmt.Fprintf(stderr, "check: %s matches %s\n", e.Name, experiment.RecordedPath(*check, e.Name, *quick))
			}
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("the figures of %s differ from the recorded ones (rerun with --record %s to accept them, and update docs/benchmarks.md)", strings.Join(failed, ", "), *check)
	}
	return nil
}

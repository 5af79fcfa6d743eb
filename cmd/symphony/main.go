// Command symphony is Symphony's command-line entry point: the simulator, the
// benchmarks and, as they land, the processes of a real deployment.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/rs/zerolog"
)

const usage = `symphony: a centralized, low-latency batch scheduler for DNN inference on GPU clusters.

Usage:
  symphony sim -f WORKLOAD [--json] [--csv FILE] [--find-goodput] [--plot DIR]
               [--policy P | --compare] [--sweep LIST] [--seed N]
               [--schedulable sched-at|beta-lambda] [--drop timeout|window]
      Run the scheduler in the discrete-event simulator on a workload file.
  symphony sim lookahead -f WORKLOAD [--multipliers LIST] [--horizon D] [--json]
               [--csv FILE] [--plot DIR] [--max-prune N] [--max-shrink N] [--seed N]
      Replay one model's arrivals under the scheduler's rules and under a
      clairvoyant scheduler that knows every future arrival: how much of the
      bad rate a better rule could remove.
  symphony bench scheduler [--models N] [--gpus N] [--threads N] [--rate R] [--json]
      Measure the real-time scheduler alone, in-process (paper Figure 11, left).
  symphony demo [-f WORKLOAD] [--duration D] [--http-addr ADDR] [--json] [--find-goodput]
               [--policy P] [--sweep LIST] [--csv FILE] [--plot DIR]
      A whole cluster in one process on loopback TCP (scheduler, backends with
      emulated GPUs, a frontend), driven by the load generator. --sweep runs
      the load at each multiplier, a fresh cluster per point, beside the
      simulator's curve for the same file.
  symphony bench -f WORKLOAD (--scheduler ADDR | --gateway URL) [--json] [--find-goodput]
               [--sweep LIST] [--csv FILE] [--plot DIR]
      The same load and report against a running cluster.
  symphony bench slowclients --gateway URL [--pid PID] [--conns N] [--modes LIST] [--json]
      Open many slow connections to a running KServe gateway (bodies announced
      and never sent, slowloris headers, idle keep-alives): how soon it closes
      them, and its RSS meanwhile.
  symphony scheduler [-f WORKLOAD] [--addr ADDR] [--drain D] [--metrics-addr ADDR]
  symphony backend --scheduler ADDR [--gpus N] [--metrics-addr ADDR]
  symphony frontend --scheduler ADDR [--http-addr ADDR]
      The separate processes of a deployment (see README).
  symphony partition -f MODELFILE [--json] [--engine heuristic|milp|random]
               [--time-limit D] [--solver cbc|glpsol|PATH] [--seed N]
      Split models into parts with balanced rate and memory (paper Appendix A).
  symphony partition experiment [--models N] [--parts N] [--instances N]
               [--time-limit D] [--engines LIST] [--json] [--csv F] [--plot DIR]
      Compare the partitioning engines on random instances (Appendix A.2).
  symphony plan -f APPFILE [--json] [--dispatch D] [--max-configs N] [--dummy]
               [--split S] [--baseline nexus|scrooge|inferline|clipper]
               [--heuristics-only] [--workload-out FILE] [--compare]
      Plan the cheapest configurations and latency budgets of a multi-model
      application (Harpagon, Piccolo, Scrooge).
  symphony plan experiment [--instances N] [--seed N] [--json] [--csv F]
      Compare the planner, its baselines, the brute force and Scrooge's MILP
      on random applications (Harpagon §IV-B).

Run 'symphony COMMAND -h' for a command's flags. Workload files are described
in docs/workload-format.md; examples live in testdata/workloads/ (model
files in testdata/partition/, application files in testdata/apps/).
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// errUsage marks errors that are the caller's: exit status 2.
var errUsage = errors.New("usage")

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	var err error
	switch args[0] {
	case "sim":
		err = runSim(args[1:], stdout, stderr)
	case "bench":
		err = runBench(args[1:], stdout, stderr)
	case "demo":
		err = runDemo(args[1:], stdout, stderr)
	case "scheduler":
		err = runScheduler(args[1:], stdout, stderr)
	case "backend":
		err = runBackend(args[1:], stdout, stderr)
	case "frontend":
		err = runFrontend(args[1:], stdout, stderr)
	case "partition":
		err = runPartition(args[1:], stdout, stderr)
	case "plan":
		err = runPlan(args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "symphony: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errReported):
		return 2
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "symphony %s: %v\n", args[0], strings.TrimPrefix(err.Error(), "usage: "))
		return 2
	case errors.Is(err, context.Canceled):
		// Stopped by SIGINT or SIGTERM: the shell's 128 + SIGINT.
		fmt.Fprintf(stderr, "symphony %s: %v\n", args[0], err)
		return 130
	default:
		fmt.Fprintf(stderr, "symphony %s: %v\n", args[0], err)
		return 1
	}
}

// newLogger returns the command's logger: human-readable lines on stderr,
// progress at info level, silent with quiet.
func newLogger(stderr io.Writer, quiet bool) zerolog.Logger {
	level := zerolog.InfoLevel
	if quiet {
		level = zerolog.WarnLevel
	}
	return zerolog.New(zerolog.ConsoleWriter{Out: stderr, NoColor: true, PartsExclude: []string{zerolog.TimestampFieldName}}).Level(level)
}

func usageErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errUsage}, args...)...)
}

// parseFlags parses a subcommand's flags; a bad flag is a usage error (exit
// 2), and the flag package has already printed it with the flag list.
func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.Usage = func() {
		out := fs.Output()
		if syn := synopsis(fs.Name()); syn != "" {
			fmt.Fprintf(out, "Usage:\n%s\nFlags:\n", syn)
		} else {
			fmt.Fprintf(out, "Usage of symphony %s:\n", fs.Name())
		}
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %w", errUsage, errReported)
	}
	return nil
}

// synopsis is the part of the top-level usage about command name ("sim",
// "bench scheduler", ...): its usage lines and the description under them.
func synopsis(name string) string {
	prefix := "  symphony " + name
	var b strings.Builder
	in := false
	for _, line := range strings.Split(usage, "\n") {
		switch {
		case strings.HasPrefix(line, "  symphony "):
			rest, ok := strings.CutPrefix(line, prefix)
			// "sim" must not take "sim lookahead": what follows the name is
			// a flag or an argument, not another word.
			in = ok && (rest == "" || strings.IndexAny(rest[:min(2, len(rest))], "-[(") == 1)
		case !strings.HasPrefix(line, "   "):
			in = false
		}
		if in {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// errReported marks an error already shown to the user.
var errReported = errors.New("see above")

// flagSet reports whether the named flag was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

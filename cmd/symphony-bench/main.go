// Command symphony-bench is Symphony's bench harness: the discrete-event
// simulator (sim), a whole cluster in one process under the load
// generator (demo), the load generator against a running cluster (bench)
// and the experiments. It drives the production packages; the production
// binary, symphony, links none of this and runs these commands through
// this binary.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/symphony-serving/symphony/cmd/internal/cli"
)

const usage = `symphony-bench: Symphony's bench harness: the simulator, the load generator and
the experiments, driving the production code (symphony runs these commands
through this binary too, so 'symphony sim' is 'symphony-bench sim').

Usage:
  symphony-bench sim -f WORKLOAD [--json] [--csv FILE] [--find-goodput] [--plot DIR]
               [--policy P | --compare] [--sweep LIST] [--seed N]
               [--schedulable sched-at|beta-lambda] [--drop timeout|window]
               [--cloud static|reactive[:T]|mark|mark-nospill|mark-spot [--forecast F] [--no-burst] [--sizer measured|eqs]]
      Run the scheduler in the discrete-event simulator on a workload file;
      with --cloud, on a simulated cloud whose fleet the policy decides,
      with its cost over time.
  symphony-bench sim lookahead -f WORKLOAD [--multipliers LIST] [--horizon D] [--json]
               [--csv FILE] [--plot DIR] [--max-prune N] [--max-shrink N] [--seed N]
      Replay one model's arrivals under the scheduler's rules and under a
      clairvoyant scheduler that knows every future arrival: how much of the
      bad rate a better rule could remove.
  symphony-bench bench scheduler [--models N] [--gpus N] [--threads N] [--rate R] [--json]
      Measure the real-time scheduler alone, in-process (paper Figure 11, left).
  symphony-bench demo [-f WORKLOAD] [--duration D] [--http-addr ADDR] [--grpc-addr ADDR] [--json]
               [--find-goodput] [--policy P] [--sweep LIST] [--csv FILE] [--plot DIR]
      A whole cluster in one process on loopback TCP (scheduler, backends with
      emulated GPUs, a frontend), driven by the load generator. --sweep runs
      the load at each multiplier, a fresh cluster per point, beside the
      simulator's curve for the same file.
  symphony-bench bench -f WORKLOAD (--scheduler ADDR | --gateway URL | --grpc ADDR) [--json]
               [--find-goodput] [--sweep LIST] [--csv FILE] [--plot DIR]
      The same load and report against a running cluster.
  symphony-bench bench slowclients --gateway URL [--pid PID] [--conns N] [--modes LIST] [--json]
      Open many slow connections to a running KServe gateway (bodies announced
      and never sent, slowloris headers, idle keep-alives): how soon it closes
      them, and its RSS meanwhile.
  symphony-bench profile --model-repo REPO --model NAME [--max-batch N] [--runs N]
               [--warmup N] [--tolerance F] [--intra-op-threads N] [--dry-run] [--json] [--plot DIR]
      Measure a repository model's batch latency ℓ(b) on the ONNX executor (median
      and p99 per batch size), fit α·b+β (or keep the table where the line is
      off by more than the tolerance), and write the profile into its config.yaml.
  symphony-bench models [--out DIR]
      Write the benchmark models (bench/modelgen: a ResNet-style CNN) into a model
      repository (default .cache/models), each with a config.yaml and no profile;
      models already there and unchanged are left alone, profile included.
  symphony-bench models workload [--model-repo DIR] [--model NAME] [--gpus N]
               [--load F] [--duration D] [--warmup D] [--seed N] [-o FILE]
      Write a workload file offering a profiled repository model F (default 0.7)
      of the rate N GPUs sustain by its profile (Eqs. 2-3), for bench and sim.
  symphony-bench partition experiment [--models N] [--parts N] [--instances N]
               [--time-limit D] [--engines LIST] [--json] [--csv F] [--plot DIR]
      Compare the partitioning engines on random instances (Appendix A.2).

  symphony-bench experiment NAME|all|list [--quick] [--out DIR] [--json]
               [--workers N] [--check DIR | --record DIR]
      Rerun one of the paper's evaluations (table4, fig4, fig6, fig7, fig8, fig9,
      fig10, fig11, fig13, fig14, fig15): its CSV, JSON and the figure drawn from
      our run (SVG, PNG) in DIR/NAME, and a table with the paper's numbers beside
      ours. --check compares the figures with the recorded ones
      (testdata/experiments; make check-experiments).

  symphony-bench etcd [--listen ADDR] [--data-dir DIR]
      A single-member etcd in this process, for trying the live control plane's
      processes (symphony scheduler|backend|frontend|controller --etcd) on one
      machine where no etcd is installed; not for production.

Run 'symphony-bench COMMAND -h' for a command's flags. Workload files are
described in docs/workload-format.md; examples live in testdata/workloads/
and testdata/faults/.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	var err error
	switch {
	case args[0] == "sim":
		err = runSim(args[1:], stdout, stderr)
	case args[0] == "bench":
		err = runBench(args[1:], stdout, stderr)
	case args[0] == "demo":
		err = runDemo(args[1:], stdout, stderr)
	case args[0] == "profile":
		err = runProfile(args[1:], stdout, stderr)
	case args[0] == "models":
		err = runModels(args[1:], stdout, stderr)
	case args[0] == "experiment":
		err = runExperiment(args[1:], stdout, stderr)
	case args[0] == "etcd":
		err = runEtcd(args[1:], stdout, stderr)
	case args[0] == "partition" && len(args) > 1 && args[1] == "experiment":
		return cli.ExitStatus("symphony-bench", "partition experiment", runPartitionExperiment(args[2:], stdout, stderr), stderr)
	default:
		fmt.Fprintf(stderr, "symphony-bench: unknown command %q (the processes and planners are symphony's)\n\n%s", args[0], usage)
		return 2
	}
	return cli.ExitStatus("symphony-bench", args[0], err, stderr)
}

// parseFlags parses a command's flags (cli.ParseFlags) with this
// program's usage text.
func parseFlags(fs *flag.FlagSet, args []string) error {
	return cli.ParseFlags(fs, args, "symphony-bench", usage)
}

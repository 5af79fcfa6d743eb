// Command symphony is Symphony's production binary: the processes of a
// deployment (scheduler, backend, frontend, and the live control plane's
// controller) and the planning tools (partition, provision). It links no package of the bench harness; the
// harness's commands (sim, demo, bench, partition experiment) are in
// symphony-bench, which this binary runs for them, as git runs git-foo.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/symphony-serving/symphony/cmd/internal/cli"
	"github.com/symphony-serving/symphony/cmd/internal/daemon"
)

const usage = `symphony: a centralized, low-latency batch scheduler for DNN inference on GPU clusters.

Usage:
  symphony scheduler [-f CONFIG] [--addr ADDR] [--drain D] [--metrics-addr ADDR]
            [--etcd ENDPOINTS --part N [--name NAME] [--advertise-addr HOST:PORT]]
  symphony backend (--scheduler ADDR | --etcd ENDPOINTS [--name NAME]) [--gpus N] [--metrics-addr ADDR]
  symphony frontend (--scheduler ADDR | --etcd ENDPOINTS [--name NAME]) [--http-addr ADDR] [--grpc-addr ADDR]
      The separate processes of a deployment (see README). Each also takes
      --config FILE, SYMPHONY_<FLAG> environment variables (precedence: flag >
      environment > file), --print-config, --version, --log-format console|json
      and --pprof-addr, and answers /livez and /readyz beside /metrics
      (docs/operations.md). --tls-ca/--tls-cert/--tls-key make every
      connection mutual TLS; without them, plaintext with a warning
      (--insecure: without the warning). With --etcd (and --registry-prefix,
      --registry-ttl) they join the live control plane: schedulers stand for
      their part's election, backends start parked, frontends follow the
      routing table, and the controller decides.
  symphony controller --etcd ENDPOINTS --parts N (-f SERVING | --model-repo DIR)
            [--rate MODEL=REQ/S ...] [--default-rate R] [--epoch D] [--headroom H]
            [--engine heuristic|milp|random] [--max-disruption BYTES] [--switch-timeout D]
      The live control plane's epoch controller: every epoch it measures the
      parts through their schedulers' reports, re-partitions the models and
      sizes the parts, and carries the decision out through etcd, make
      before break. Each model needs a declared rate for the first epoch.
      One per cluster (docs/operations.md, "The live control plane on etcd").
  symphony certs --out DIR [--hosts H1,H2] [--days N]
      Make a development CA, and a certificate and key it signed for each of
      the scheduler, backends and frontends, for --tls-ca/--tls-cert/--tls-key.
  symphony cluster status --etcd ENDPOINTS [--prefix P] [--json] [--timeout D]
      The live cluster's state from the registry in etcd, at one revision:
      parts with their models and schedulers (active/standby, term),
      backends, frontends, models, the assignment's and routes' epochs with
      any move under way, the parts' reports and the controller's last epoch.
  symphony version
      Print the version, commit and Go version of this binary.
  symphony partition -f MODELFILE [--json] [--engine heuristic|milp|random]
               [--time-limit D] [--solver cbc|glpsol|PATH] [--seed N]
      Split models into parts with balanced rate and memory (paper Appendix A).
  symphony provision -f APPFILE [--json] [--dispatch D] [--max-configs N] [--dummy]
               [--split S] [--baseline nexus|scrooge|inferline|clipper]
               [--heuristics-only] [--workload-out FILE] [--compare]
      Provision a multi-model application at the least cost: the configurations,
      machines and latency budget of each module (Harpagon, Piccolo, Scrooge).
  symphony provision experiment [--instances N] [--seed N] [--json] [--csv F]
      Compare the planner, its baselines, the brute force and Scrooge's MILP
      on random applications (Harpagon §IV-B).

The bench harness's commands (sim, demo, bench, profile, experiment, partition experiment) live in
the symphony-bench binary, which 'symphony COMMAND' runs from beside this one
or from PATH: see 'symphony-bench -h'.

Run 'symphony COMMAND -h' for a command's flags. The serving configuration is
described in docs/serving-config.md (model files in testdata/partition/,
application files in testdata/apps/).
`

func main() {
	if benchCommand(os.Args[1:]) {
		os.Exit(execBench(os.Args[1:], os.Stderr))
	}
	if err := daemon.RouteLibraryLog(); err != nil {
		fmt.Fprintf(os.Stderr, "symphony: the TCP library's log lines stay plain text: %v\n", err)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the command args, stopping a long-running one on the
// program's signals, and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return runWith(args, stdout, stderr, processSignals)
}

// runWith is run with the stop signals of the long-running commands from
// notify, so that a test can run several of them in its own process and
// stop each by itself.
func runWith(args []string, stdout, stderr io.Writer, notify stopSignals) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if benchCommand(args) {
		fmt.Fprintf(stderr, "symphony %s: a bench harness command: run it as symphony-bench %s\n", args[0], strings.Join(args, " "))
		return 2
	}
	var err error
	switch args[0] {
	case "--version", "-version", "version":
		fmt.Fprintln(stdout, daemon.ReadBuild())
		return 0
	case "scheduler":
		err = runScheduler(args[1:], stdout, stderr, notify)
	case "backend":
		err = runBackend(args[1:], stdout, stderr, notify)
	case "frontend":
		err = runFrontend(args[1:], stdout, stderr, notify)
	case "controller":
		err = runController(args[1:], stdout, stderr, notify)
	case "certs":
		err = runCerts(args[1:], stdout, stderr)
	case "cluster":
		err = runCluster(args[1:], stdout, stderr)
	case "partition":
		err = runPartition(args[1:], stdout, stderr)
	case "provision":
		err = runProvision(args[1:], stdout, stderr)
	case "plan":
		// The command's name before "plan" came to mean only a batch on a
		// GPU; kept so that scripts keep working.
		fmt.Fprintln(stderr, "symphony plan is now symphony provision; running that")
		err = runProvision(args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "symphony: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	return cli.ExitStatus("symphony", args[0], err, stderr)
}

// benchCommand reports whether args name a command of the bench harness.
func benchCommand(args []string) bool {
	if len(args) == 0 {
		return false
	}
	switch args[0] {
	case "sim", "demo", "bench", "profile", "experiment":
		return true
	case "partition":
		return len(args) > 1 && args[1] == "experiment"
	}
	return false
}

// benchBinary is the name of the harness's binary.
const benchBinary = "symphony-bench"

// findBench finds symphony-bench beside this executable (as make build
// leaves them in bin/), else on PATH.
func findBench() (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), benchBinary)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return exec.LookPath(benchBinary)
}

// execBench replaces this process with symphony-bench running args, so
// that signals, exit status and output are the harness's own. It returns
// only when it cannot.
func execBench(args []string, stderr io.Writer) int {
	bin, err := findBench()
	if err != nil {
		fmt.Fprintf(stderr, "symphony %s: %s is a bench harness command, in the %s binary, which is neither beside symphony nor on PATH; build it with make build (or go build -o bin/%s ./cmd/%s)\n",
			args[0], args[0], benchBinary, benchBinary, benchBinary)
		return 2
	}
	err = syscall.Exec(bin, append([]string{bin}, args...), os.Environ())
	fmt.Fprintf(stderr, "symphony %s: running %s: %v\n", args[0], bin, err)
	if errors.Is(err, syscall.ENOENT) {
		return 2
	}
	return 1
}

// parseFlags parses a command's flags (cli.ParseFlags) with this
// program's usage text.
func parseFlags(fs *flag.FlagSet, args []string) error {
	return cli.ParseFlags(fs, args, "symphony", usage)
}

package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/schedbench"
	"github.com/symphony-serving/symphony/cmd/internal/cli"
	"github.com/symphony-serving/symphony/scheduler"
)

func runBench(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprint(stdout, "(symphony bench scheduler -h describes the scheduler-alone benchmark, symphony bench slowclients -h the gateway's slow-client test.)\n")
		return runBenchLoad([]string{"-h"}, stdout, stdout)
	}
	if len(args) > 0 && args[0] == "slowclients" {
		return runBenchSlowClients(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] != "scheduler" && !strings.HasPrefix(args[0], "-") {
		return cli.UsageErr("unknown bench subcommand %q: want \"symphony bench scheduler\", \"symphony bench slowclients\" or \"symphony bench -f WORKLOAD --scheduler ADDR\"", args[0])
	}
	if len(args) == 0 || args[0] != "scheduler" {
		return runBenchLoad(args, stdout, stderr)
	}
	def := schedbench.DefaultOptions()
	fs := flag.NewFlagSet("bench scheduler", flag.ContinueOnError)
	fs.SetOutput(stderr)
	models := fs.Int("models", def.Models, "number of models")
	gpus := fs.Int("gpus", def.GPUs, "number of emulated GPUs")
	threads := fs.Int("threads", 0, "worker threads (GOMAXPROCS); 0 runs 1 and 2")
	rate := fs.Float64("rate", def.Rate, "offered requests per second, over all models")
	duration := fs.Duration("duration", def.Duration, "measured window")
	warmup := fs.Duration("warmup", def.Warmup, "load before the window")
	alpha := fs.Duration("alpha", def.Alpha, "per-request batch cost α of every model")
	beta := fs.Duration("beta", def.Beta, "fixed batch cost β of every model")
	slo := fs.Duration("slo", def.SLO, "latency SLO of every model")
	policy := fs.String("policy", "symphony", "scheduling policy")
	asJSON := fs.Bool("json", false, "print JSON on stdout")
	quiet := fs.Bool("quiet", false, "print no progress on stderr")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	p, err := scheduler.ParsePolicy(*policy)
	if err != nil || p == scheduler.PolicyNexus {
		return cli.UsageErr("--policy: %q is not a policy of the centralized scheduler", *policy)
	}
	if *threads < 0 {
		return cli.UsageErr("--threads must be 0 (run 1 and 2) or positive")
	}
	log := cli.NewLogger(stderr, *quiet)
	threadList := []int{*threads}
	if *threads == 0 {
		threadList = []int{1, 2}
	}
	var results []schedbench.Result
	for _, t := range threadList {
		o := schedbench.Options{Models: *models, GPUs: *gpus, Threads: t, Rate: *rate, Warmup: *warmup,
			Duration: *duration, Alpha: *alpha, Beta: *beta, SLO: *slo, Policy: p}
		if err := o.Validate(); err != nil {
			return cli.UsageErr("%v", err)
		}
		log.Info().Int("threads", t).Float64("rate", *rate).Str("duration", duration.String()).Msg("running")
		r, err := schedbench.Run(o)
		if err != nil {
			return err
		}
		log.Info().Int("threads", t).Float64("requests_per_second", cli.Round(r.RequestsPerSecond, 0)).
			Float64("bad_rate", cli.Round(r.BadRate, 5)).Float64("rank_utilization", cli.Round(r.RankUtilization, 3)).Msg("done")
		results = append(results, r)
	}
	best := results[0]
	for _, r := range results {
		if r.Sustained && (!best.Sustained || r.RequestsPerSecond > best.RequestsPerSecond) {
			best = r
		}
	}
	if *asJSON {
		return report.EncodeJSON(stdout, struct {
			// RequestsPerSecond is the best sustained throughput of the runs.
			RequestsPerSecond float64             `json:"requests_per_second"`
			Sustained         bool                `json:"sustained"`
			Runs              []schedbench.Result `json:"runs"`
		}{best.RequestsPerSecond, best.Sustained, results})
	}
	fmt.Fprintf(stdout, "scheduler alone: %d models, %d GPUs, offered %.0f req/s, %v window\n", *models, *gpus, *rate, duration.Round(time.Millisecond))
	fmt.Fprintf(stdout, "%8s %14s %14s %9s %10s %11s %9s\n", "threads", "offered/s", "scheduled/s", "bad", "mean bs", "rank busy", "sustained")
	for _, r := range results {
		fmt.Fprintf(stdout, "%8d %14.0f %14.0f %8.3f%% %10.1f %10.1f%% %9v\n", r.Threads, r.OfferedRPS, r.RequestsPerSecond,
			100*r.BadRate, r.MeanBatchSize, 100*r.RankUtilization, r.Sustained)
	}
	return nil
}

package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/sim"
	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/cmd/internal/cli"
	"github.com/symphony-serving/symphony/partition/forecast"
	"github.com/symphony-serving/symphony/scheduler"
)

func runSim(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "lookahead" {
		return runSimLookahead(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("f", "", "workload file (required)")
	asJSON := fs.Bool("json", false, "print the report as JSON on stdout")
	csvPath := fs.String("csv", "", "write the per-model report as CSV to `FILE`")
	findGoodput := fs.Bool("find-goodput", false, "search for the largest load multiplier at which every model's bad rate is at most 1%")
	plotDir := fs.String("plot", "", "write SVG and PNG charts into `DIR`")
	policy := fs.String("policy", "", "override the workload's policy: symphony, work-conserving, clockwork or nexus")
	compare := fs.Bool("compare", false, "run every policy on the workload and report them side by side")
	sweep := fs.String("sweep", "", "comma-separated load multipliers to run (relative to the found goodput with --find-goodput), for throughput curves")
	seed := fs.Uint64("seed", 0, "override the workload's seed")
	drop := fs.String("drop", "", "override the drop policy: timeout or window")
	schedulable := fs.String("schedulable", "", "override the symphony policy's schedulable condition: beta-lambda or sched-at")
	quiet := fs.Bool("quiet", false, "print no progress on stderr")
	cloud := fs.String("cloud", "", "run on a simulated cloud whose fleet `POLICY` decides: "+strings.Join(sim.CloudPolicies, ", ")+" (docs/workload-format.md, \"A simulated cloud\")")
	forecastSpec := fs.String("forecast", "", "with --cloud mark*: the load forecaster, last, seasonal-naive:PERIOD or holt-winters:PERIOD[:A:B:G], in steps of a minute (default holt-winters:1440)")
	noBurst := fs.Bool("no-burst", false, "with --cloud: no serverless burst pool to spill to")
	sizerName := fs.String("sizer", "", "with --cloud: how the policy sizes the fleet, measured (the default: what each GPU count serves, measured first by goodput searches, as MArk profiles its instances) or eqs (the epoch job's Eqs. 2-3, which promise more than a few GPUs shared by several models serve)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *file == "" {
		return cli.UsageErr("-f WORKLOAD is required")
	}
	if *cloud == "" && (*forecastSpec != "" || *noBurst || *sizerName != "") {
		return cli.UsageErr("--forecast, --no-burst and --sizer go with --cloud")
	}
	if *sizerName != "" && *sizerName != "measured" && *sizerName != "eqs" {
		return cli.UsageErr("--sizer %q: give measured or eqs", *sizerName)
	}
	if fs.NArg() > 0 {
		return cli.UsageErr("unexpected arguments %q", fs.Args())
	}
	log := cli.NewLogger(stderr, *quiet)
	w, err := workload.ParseFile(*file)
	if err != nil {
		return err
	}
	if cli.FlagSet(fs, "seed") {
		w.Seed = *seed
	}
	if *drop != "" {
		d, err := scheduler.ParseDropPolicy(*drop)
		if err != nil {
			return cli.UsageErr("%v", err)
		}
		w.Drop = d
	}
	if *schedulable != "" {
		c, err := scheduler.ParseSchedulable(*schedulable)
		if err != nil {
			return cli.UsageErr("%v", err)
		}
		w.Schedulable = c
	}
	if *cloud != "" {
		if *compare || *findGoodput || *sweep != "" || *csvPath != "" {
			return cli.UsageErr("--cloud runs the workload once on the simulated cloud: drop --compare, --find-goodput, --sweep and --csv")
		}
		if *policy != "" {
			p, err := parsePolicyFlag(*policy, false)
			if err != nil {
				return err
			}
			w.Policy = p
		}
		return runSimCloud(w, *cloud, *forecastSpec, *sizerName != "eqs", !*noBurst, *asJSON, *plotDir, log, stdout)
	}
	policies := []scheduler.Policy{w.Policy}
	switch {
	case *compare && *policy != "":
		return cli.UsageErr("--compare and --policy exclude each other")
	case *compare && len(w.Faults) > 0:
		// The nexus baseline has no live cluster whose processes a
		// fault could hit.
		policies = slices.DeleteFunc(scheduler.Policies(), func(p scheduler.Policy) bool { return p == scheduler.PolicyNexus })
		log.Info().Msg("--compare with a fault scenario leaves out the nexus policy, which has no live cluster to hit")
	case *compare:
		policies = scheduler.Policies()
	case *policy != "":
		p, err := parsePolicyFlag(*policy, false)
		if err != nil {
			return err
		}
		policies = []scheduler.Policy{p}
	}
	multipliers, err := parseMultipliers("--sweep", *sweep)
	if err != nil {
		return err
	}

	began := time.Now()
	var reports []report.Report
	var curves []report.Curve
	for _, p := range policies {
		wp := *w
		wp.Policy = p
		rep, err := simulate(&wp, *findGoodput, log)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		reports = append(reports, *rep)
		if len(multipliers) > 0 {
			scale, peak := report.SweepBase(rep)
			c, err := simSweep(&wp, scale, peak, multipliers, false, log)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			curves = append(curves, c)
		}
	}
	log.Info().Str("wall", time.Since(began).Round(time.Millisecond).String()).Msg("simulation done")

	if err := writeSimOutputs(stdout, reports, curves, *asJSON, *csvPath, *plotDir); err != nil {
		return err
	}
	return nil
}

// runSimCloud is `sim --cloud POLICY`: the workload on a simulated cloud
// (sim.RunCloud) whose fleet the policy decides, the report and the cloud's
// cost, and with --plot the fleet, cost and SLO over time.
func runSimCloud(w *workload.Workload, name, forecastSpec string, measure, burst, asJSON bool, plotDir string, log zerolog.Logger, stdout io.Writer) error {
	o := sim.CloudPolicyOptions{}
	if forecastSpec != "" {
		var err error
		if o.Forecaster, err = forecast.Parse(forecastSpec); err != nil {
			return cli.UsageErr("--forecast: %v", err)
		}
	}
	// The policy is made once before measuring, so that a wrong name or
	// argument costs no measurement.
	p, types, err := sim.NewCloudPolicy(name, w, o)
	if err != nil {
		return cli.UsageErr("--cloud: %v", err)
	}
	if measure {
		m, err := sim.MeasurementFor(w)
		if err != nil {
			return err
		}
		began := time.Now()
		log.Info().Int("max_gpus", m.MaxGPUs).Msg("measuring what each GPU count serves of the mix (--sizer eqs skips this)")
		m.Progress = func(gpus int, capacity float64) {
			log.Debug().Int("gpus", gpus).Float64("capacity_rps", capacity).Msg("measured")
		}
		s, err := sim.MeasureSizer(w, m)
		if err != nil {
			return err
		}
		caps := s.Capacities()
		log.Info().Str("wall", time.Since(began).Round(time.Millisecond).String()).Int("counts", len(caps)).
			Float64("one_gpu_rps", caps[0].Rate).Float64("max_gpus_rps", caps[len(caps)-1].Rate).Msg("capacity measured")
		o.Sizer = s
		if p, types, err = sim.NewCloudPolicy(name, w, o); err != nil {
			return err
		}
	}
	c := sim.Cloud{Types: types, Policy: p, SpillDepth: 100 * time.Millisecond}
	if burst {
		c.Burst = sim.DefaultBurstPool()
	}
	began := time.Now()
	rep, res, err := sim.RunCloud(w, c, sim.Options{})
	if err != nil {
		return err
	}
	log.Info().Str("wall", time.Since(began).Round(time.Millisecond).String()).Msg("simulation done")
	if plotDir != "" {
		if _, err := sim.WriteCloudPlots(plotDir, "cloud", 0, []*sim.CloudResult{res}); err != nil {
			return err
		}
	}
	if asJSON {
		var b strings.Builder
		if err := report.WriteJSON(&b, rep); err != nil {
			return err
		}
		return report.EncodeJSON(stdout, struct {
			Report json.RawMessage  `json:"report"`
			Cloud  *sim.CloudResult `json:"cloud"`
		}{json.RawMessage(b.String()), res})
	}
	if err := report.WriteTable(stdout, rep); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "\ncloud    %s: cost %.2f (instances %.2f, burst pool %.2f), %.3f%% of requests within SLO\n"+
		"         %.1f GPU-hours, %d GPUs at most, %d launches, %d releases, %d spot interruptions, %.3f%% spilled (%d of them within SLO, %d found the pool full)\n",
		res.Policy, res.Cost, res.InstanceCost, res.BurstCost, 100*res.Attainment, res.GPUHours, res.PeakGPUs,
		res.Launches, res.Releases, res.Interruptions, 100*float64(res.Spilled)/math.Max(1, float64(res.Offered)), res.BurstGood, res.BurstFull)
	if err == nil && res.Refused > 0 {
		_, err = fmt.Fprintf(stdout, "         %d launches refused: the workload's cluster of %d GPU slots was full (give it more GPUs)\n", res.Refused, w.Cluster.GPUs)
	}
	return err
}

// parsePolicyFlag parses a --policy flag; live refuses the nexus policy,
// which exists only in the simulator. Either mistake is a usage error.
func parsePolicyFlag(s string, live bool) (scheduler.Policy, error) {
	p, err := scheduler.ParsePolicy(s)
	switch {
	case err != nil:
		return p, cli.UsageErr("%v", err)
	case live && p == scheduler.PolicyNexus:
		return p, cli.UsageErr("--policy %s: the nexus policy exists only in the simulator (symphony sim)", s)
	}
	return p, nil
}

// parseMultipliers parses the value of flag (--sweep, --multipliers) with
// report.ParseMultipliers; a bad list is a usage error.
func parseMultipliers(flag, list string) ([]float64, error) {
	m, err := report.ParseMultipliers(list)
	if err != nil {
		return nil, cli.UsageErr("%s: %v", flag, err)
	}
	return m, nil
}

// simulate runs one workload, or searches its goodput.
func simulate(w *workload.Workload, findGoodput bool, log zerolog.Logger) (*report.Report, error) {
	var next float64 // the next tenth of the run to log
	opts := sim.Options{Progress: func(done float64) {
		if done < next {
			return
		}
		next = math.Floor(done*10)/10 + 0.1
		log.Info().Str("policy", w.Policy.String()).Msgf("simulated %.0f%%", 100*done)
	}}
	if !findGoodput {
		return sim.Run(w, opts)
	}
	return sim.FindGoodput(w, sim.GoodputOptions{Options: opts, Step: func(s report.SearchStep) {
		log.Info().Str("policy", w.Policy.String()).Float64("multiplier", cli.Round(s.Multiplier, 4)).
			Float64("offered_rps", cli.Round(s.OfferedRPS, 0)).Float64("goodput_rps", cli.Round(s.GoodputRPS, 0)).
			Float64("worst_bad_rate", cli.Round(s.WorstBadRate, 4)).Bool("ok", s.OK).Msg("goodput search")
	}})
}

// simSweep is sim.Sweep with a log line per point: the sweep of `sim
// --sweep`, and the simulator's curve beside the live one of `demo --sweep`
// and `bench --sweep`, which ask for the outcome counts too.
func simSweep(w *workload.Workload, scale, peak float64, multipliers []float64, outcomes bool, log zerolog.Logger) (report.Curve, error) {
	return sim.Sweep(w, scale, peak, multipliers, report.SweepOptions{Outcomes: outcomes, Point: func(pt report.CurvePoint) {
		log.Info().Str("policy", w.Policy.String()).Float64("multiplier", pt.Multiplier).Float64("offered_rps", cli.Round(pt.OfferedRPS, 0)).
			Float64("goodput_rps", cli.Round(pt.GoodputRPS, 0)).Float64("bad_rate", cli.Round(pt.BadRate, 4)).
			Float64("gpu_idle", cli.Round(pt.GPUIdleFraction, 4)).Msg("sweep")
	}})
}

func writeSimOutputs(stdout io.Writer, reports []report.Report, curves []report.Curve, asJSON bool, csvPath, plotDir string) error {
	single := len(reports) == 1
	switch {
	case asJSON && single && len(curves) == 0:
		if err := report.WriteJSON(stdout, &reports[0]); err != nil {
			return err
		}
	case asJSON:
		// Several runs: one object holding each report (as WriteJSON
		// sanitizes it) and the curves.
		var runs []json.RawMessage
		for i := range reports {
			var b strings.Builder
			if err := report.WriteJSON(&b, &reports[i]); err != nil {
				return err
			}
			runs = append(runs, json.RawMessage(b.String()))
		}
		if err := report.EncodeJSON(stdout, struct {
			Runs   []json.RawMessage `json:"runs"`
			Curves []report.Curve    `json:"curves,omitempty"`
		}{runs, curves}); err != nil {
			return err
		}
	default:
		for i := range reports {
			if err := report.WriteTable(stdout, &reports[i]); err != nil {
				return err
			}
			fmt.Fprintln(stdout)
		}
		if !single {
			if err := report.WriteComparison(stdout, reports); err != nil {
				return err
			}
		}
		for _, c := range curves {
			if err := report.WriteCurveTable(stdout, c); err != nil {
				return err
			}
		}
	}
	if csvPath != "" {
		if err := cli.WriteFile(csvPath, func(f io.Writer) error {
			if single {
				return report.WriteCSV(f, &reports[0])
			}
			return report.WriteComparisonCSV(f, reports)
		}); err != nil {
			return err
		}
	}
	if plotDir != "" {
		for i := range reports {
			dir := plotDir
			if !single {
				dir = filepath.Join(plotDir, reports[i].Policy)
			}
			if _, err := report.WritePlots(dir, &reports[i]); err != nil {
				return err
			}
		}
		if !single {
			if _, err := report.WriteComparisonPlot(plotDir, "goodput_by_policy", reports); err != nil {
				return err
			}
		}
		if _, err := report.WriteCurvePlots(plotDir, curves); err != nil {
			return err
		}
	}
	return nil
}

package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/sim"
	"github.com/symphony-serving/symphony/bench/workload"
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
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *file == "" {
		return usageErr("-f WORKLOAD is required")
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments %q", fs.Args())
	}
	log := newLogger(stderr, *quiet)
	w, err := workload.ParseFile(*file)
	if err != nil {
		return err
	}
	if flagSet(fs, "seed") {
		w.Seed = *seed
	}
	if *drop != "" {
		d, err := scheduler.ParseDropPolicy(*drop)
		if err != nil {
			return usageErr("%v", err)
		}
		w.Drop = d
	}
	if *schedulable != "" {
		c, err := scheduler.ParseSchedulable(*schedulable)
		if err != nil {
			return usageErr("%v", err)
		}
		w.Schedulable = c
	}
	policies := []scheduler.Policy{w.Policy}
	switch {
	case *compare && *policy != "":
		return usageErr("--compare and --policy exclude each other")
	case *compare:
		policies = scheduler.Policies()
	case *policy != "":
		p, err := scheduler.ParsePolicy(*policy)
		if err != nil {
			return usageErr("%v", err)
		}
		policies = []scheduler.Policy{p}
	}
	var multipliers []float64
	if *sweep != "" {
		for _, f := range strings.Split(*sweep, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || !(v > 0) || math.IsInf(v, 1) {
				return usageErr("--sweep: %q is not a positive finite number", f)
			}
			multipliers = append(multipliers, v)
		}
	}

	began := time.Now()
	var reports []report.Report
	var curves []curve
	for _, p := range policies {
		wp := *w
		wp.Policy = p
		rep, err := simulate(&wp, *findGoodput, log)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		reports = append(reports, *rep)
		if len(multipliers) > 0 {
			c, err := runSweep(&wp, rep, multipliers, log)
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
		log.Info().Str("policy", w.Policy.String()).Float64("multiplier", round(s.Multiplier, 4)).
			Float64("offered_rps", round(s.OfferedRPS, 0)).Float64("goodput_rps", round(s.GoodputRPS, 0)).
			Float64("worst_bad_rate", round(s.WorstBadRate, 4)).Bool("ok", s.OK).Msg("goodput search")
	}})
}

func round(v float64, digits int) float64 {
	p := 1.0
	for i := 0; i < digits; i++ {
		p *= 10
	}
	return float64(int64(v*p+0.5)) / p
}

// curve is a throughput curve: one policy's runs at several loads.
type curve struct {
	Policy string `json:"policy"`
	// PeakGoodputRPS is the goodput the multipliers are relative to, when
	// the run searched for it; 0 otherwise.
	PeakGoodputRPS float64      `json:"peak_goodput_rps,omitempty"`
	Points         []curvePoint `json:"points"`
}

type curvePoint struct {
	Multiplier      float64 `json:"multiplier"`
	OfferedRPS      float64 `json:"offered_rps"`
	GoodputRPS      float64 `json:"goodput_rps"`
	BadRate         float64 `json:"bad_rate"`
	GPUIdleFraction float64 `json:"gpu_idle_fraction"`
	MeanBatchSize   float64 `json:"mean_batch_size"`
	// IdealBadRate is (o−p)/o above the peak p, and IdealIdleFraction
	// (p−o)/p below it: the flat-top targets of §4.4.
	IdealBadRate      float64 `json:"ideal_bad_rate"`
	IdealIdleFraction float64 `json:"ideal_idle_fraction"`
}

// runSweep runs the workload at each multiplier: of the found goodput's
// multiplier when base holds a goodput search, else of the file's rates.
func runSweep(w *workload.Workload, base *report.Report, multipliers []float64, log zerolog.Logger) (curve, error) {
	c := curve{Policy: w.Policy.String()}
	scale := 1.0
	if gs := base.GoodputSearch; gs != nil {
		scale = gs.Multiplier
		c.PeakGoodputRPS = gs.GoodputRPS
	}
	for _, m := range multipliers {
		rep, err := sim.Run(w.Scaled(scale*m), sim.Options{})
		if err != nil {
			return c, fmt.Errorf("sweep at %g: %w", m, err)
		}
		pt := curvePoint{Multiplier: m, OfferedRPS: rep.OfferedRPS, GoodputRPS: rep.GoodputRPS, BadRate: rep.BadRate,
			GPUIdleFraction: rep.GPUIdleFraction, MeanBatchSize: rep.MeanBatchSize}
		if p, o := c.PeakGoodputRPS, rep.OfferedRPS; p > 0 && o > 0 {
			if o > p {
				pt.IdealBadRate = (o - p) / o
			} else {
				pt.IdealIdleFraction = (p - o) / p
			}
		}
		log.Info().Str("policy", c.Policy).Float64("multiplier", m).Float64("offered_rps", round(pt.OfferedRPS, 0)).
			Float64("goodput_rps", round(pt.GoodputRPS, 0)).Float64("bad_rate", round(pt.BadRate, 4)).
			Float64("gpu_idle", round(pt.GPUIdleFraction, 4)).Msg("sweep")
		c.Points = append(c.Points, pt)
	}
	return c, nil
}

func writeSimOutputs(stdout io.Writer, reports []report.Report, curves []curve, asJSON bool, csvPath, plotDir string) error {
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
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false) // reasons such as "idle > 10%" stay readable
		if err := enc.Encode(struct {
			Runs   []json.RawMessage `json:"runs"`
			Curves []curve           `json:"curves,omitempty"`
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
			writeCurveTable(stdout, c)
		}
	}
	if csvPath != "" {
		if err := writeFile(csvPath, func(f io.Writer) error {
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
		if len(curves) > 0 {
			goodput := map[string][][2]float64{}
			bad := map[string][][2]float64{}
			for _, c := range curves {
				for _, p := range c.Points {
					goodput[c.Policy] = append(goodput[c.Policy], [2]float64{p.OfferedRPS, p.GoodputRPS})
					bad[c.Policy+" bad rate"] = append(bad[c.Policy+" bad rate"], [2]float64{p.OfferedRPS, p.BadRate})
					bad[c.Policy+" GPU idle"] = append(bad[c.Policy+" GPU idle"], [2]float64{p.OfferedRPS, p.GPUIdleFraction})
				}
			}
			if _, err := report.WriteCurvePlot(plotDir, "throughput_curve", "offered (req/s)", "goodput (req/s)", goodput); err != nil {
				return err
			}
			if _, err := report.WriteCurvePlot(plotDir, "signals_curve", "offered (req/s)", "fraction", bad); err != nil {
				return err
			}
		}
	}
	return nil
}

func writeCurveTable(w io.Writer, c curve) {
	fmt.Fprintf(w, "\nthroughput curve, %s", c.Policy)
	if c.PeakGoodputRPS > 0 {
		fmt.Fprintf(w, " (peak goodput p = %.0f req/s)", c.PeakGoodputRPS)
	}
	fmt.Fprintf(w, "\n%10s %12s %12s %9s %13s %9s %9s %10s\n", "x", "offered", "goodput", "bad", "ideal bad", "idle", "ideal idle", "mean bs")
	for _, p := range c.Points {
		fmt.Fprintf(w, "%10.2f %12.0f %12.0f %8.2f%% %12.2f%% %8.2f%% %9.2f%% %10.1f\n", p.Multiplier, p.OfferedRPS, p.GoodputRPS,
			100*p.BadRate, 100*p.IdealBadRate, 100*p.GPUIdleFraction, 100*p.IdealIdleFraction, p.MeanBatchSize)
	}
}

// writeFile writes an output file (--csv and the like) through write,
// creating its folder first, so that a long run never ends in "no such file
// or directory" after the work is done.
// experimentReport is what the experiment commands (partition experiment,
// plan experiment, sim lookahead) print and save.
type experimentReport interface {
	WriteText(io.Writer) error
	WriteJSON(io.Writer) error
	WriteCSV(io.Writer) error
}

// writeExperiment saves rep as CSV at csvPath and its charts into plotDir
// (each if asked; plot nil: the report has none), then prints it on stdout
// as JSON or text.
func writeExperiment(stdout io.Writer, rep experimentReport, asJSON bool, csvPath, plotDir string,
	plot func(dir string) ([]string, error), log zerolog.Logger) error {
	if csvPath != "" {
		if err := writeFile(csvPath, rep.WriteCSV); err != nil {
			return err
		}
	}
	if plotDir != "" && plot != nil {
		paths, err := plot(plotDir)
		if err != nil {
			return err
		}
		log.Info().Strs("files", paths).Msg("charts written")
	}
	if asJSON {
		return rep.WriteJSON(stdout)
	}
	return rep.WriteText(stdout)
}

func writeFile(path string, write func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

package main

import (
	"flag"
	"io"
	"math"
	"time"

	"github.com/symphony-serving/symphony/bench/lookahead"
	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/cmd/internal/cli"
)

// runSimLookahead is `symphony sim lookahead`: the rules against a
// clairvoyant scheduler on one model's arrivals (bench/lookahead).
func runSimLookahead(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sim lookahead", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("f", "", "single-model workload file (required)")
	asJSON := fs.Bool("json", false, "print the report as JSON on stdout")
	csvPath := fs.String("csv", "", "write one row per replay as CSV to `FILE`")
	plotDir := fs.String("plot", "", "write the bad rate against offered load of both schedulers as SVG and PNG into `DIR`")
	mults := fs.String("multipliers", "", "comma-separated load multipliers to replay (default: search each scheduler's goodput)")
	horizon := fs.Duration("horizon", 300*time.Millisecond, "how far each clairvoyant trial plays ahead")
	maxPrune := fs.Int("max-prune", 6, "most head requests a clairvoyant trial may drop")
	maxShrink := fs.Int("max-shrink", 4, "how far below the largest batch a clairvoyant trial may go")
	seed := fs.Uint64("seed", 0, "override the workload's seed")
	quiet := fs.Bool("quiet", false, "log only warnings on stderr (by default each replay's progress and end)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *file == "":
		return cli.UsageErr("-f WORKLOAD is required")
	case fs.NArg() > 0:
		return cli.UsageErr("unexpected arguments %q", fs.Args())
	case *horizon <= 0 || *maxPrune < 1 || *maxShrink < 1:
		return cli.UsageErr("--horizon, --max-prune and --max-shrink must be positive")
	}
	cfg := lookahead.StudyConfig{Options: lookahead.Options{Horizon: *horizon, MaxPrune: *maxPrune, MaxShrink: *maxShrink}}
	var err error
	if cfg.Multipliers, err = parseMultipliers("--multipliers", *mults); err != nil {
		return err
	}
	w, err := workload.ParseFile(*file)
	if err != nil {
		return err
	}
	if cli.FlagSet(fs, "seed") {
		w.Seed = *seed
	}
	log := cli.NewLogger(stderr, *quiet)
	if w.Models[0].SLO > *horizon {
		log.Warn().Str("slo", w.Models[0].SLO.String()).Str("horizon", horizon.String()).Msg("the horizon is shorter than the SLO: most trials will tie and the clairvoyant scheduler fall back on the rules; raise --horizon")
	}
	// A clairvoyant replay takes seconds to minutes: log each tenth of it.
	var next float64
	cfg.Options.Progress = func(done float64) {
		if done < next-0.1 { // a new replay began
			next = 0
		}
		if done < next {
			return
		}
		next = math.Floor(done*10)/10 + 0.1
		log.Info().Msgf("clairvoyant replay %.0f%%", 100*done)
	}
	cfg.Step = func(s lookahead.Step) {
		log.Info().Str("scheduler", string(s.Scheduler)).Float64("multiplier", cli.Round(s.Multiplier, 4)).
			Float64("offered_rps", cli.Round(s.OfferedRPS, 1)).Float64("bad_rate", cli.Round(s.BadRate, 4)).
			Int("overrides", s.Overrides.Total()).Bool("ok", s.OK).Msg("replayed")
	}
	rep, err := lookahead.Study(w, cfg)
	if err != nil {
		return err
	}
	return cli.WriteExperiment(stdout, rep, *asJSON, *csvPath, *plotDir, func(dir string) ([]string, error) {
		return report.WriteCurvePlot(dir, "lookahead-bad-rate", "offered load (req/s)", "bad rate (%)", rep.BadRateCurves())
	}, log)
}

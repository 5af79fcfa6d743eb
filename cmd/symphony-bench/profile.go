package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math"
	"runtime"
	"text/tabwriter"
	"time"

	"github.com/symphony-serving/symphony/backend/cpupin"
	"github.com/symphony-serving/symphony/backend/onnx"
	"github.com/symphony-serving/symphony/backend/profiler"
	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/cmd/internal/cli"
	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/scheduler/serving"
	"github.com/symphony-serving/symphony/transport/wire"
)

// profileReport is what `symphony profile --json` prints.
type profileReport struct {
	Model     string         `json:"model"`
	Config    string         `json:"config"`
	Points    []profilePoint `json:"points"`
	AlphaMs   float64        `json:"fit_alpha_ms"`
	BetaMs    float64        `json:"fit_beta_ms"`
	MaxRelErr float64        `json:"fit_max_rel_err"`
	Kept      string         `json:"kept"` // "linear" or "table"
	Written   bool           `json:"written"`
	Threads   int            `json:"intra_op_threads"`
	CPU       int            `json:"executor_cpu"` // -1: not pinned
}

type profilePoint struct {
	Batch    int     `json:"batch"`
	MedianMs float64 `json:"median_ms"`
	P99Ms    float64 `json:"p99_ms"`
	FitMs    float64 `json:"fit_ms"`
}

// outOfOrderTolerance is how much slower than a larger batch a batch size
// may measure before it is measured again (profiler.Options.Recheck).
const outOfOrderTolerance = 0.05

// runProfile is `symphony profile`: ℓ(b) of a repository model measured
// on the ONNX executor, fitted, and written into the model's config.yaml.
func runProfile(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("profile", flag.ContinueOnError)
	fs.SetOutput(stderr)
	repo := fs.String("model-repo", "", "the model repository (required)")
	name := fs.String("model", "", "the model to profile (required)")
	maxBatch := fs.Int("max-batch", 0, "largest batch to measure (default: the config's max_batch)")
	warmup := fs.Int("warmup", 5, "untimed batches per size")
	runs := fs.Int("runs", 30, "timed batches per size")
	retries := fs.Int("retries", 3, fmt.Sprintf("measure again, up to this many times, each batch size whose median exceeds a larger batch's by more than %g%% (a disturbance: only the lowest median is kept)", 100*outOfOrderTolerance))
	tolerance := fs.Float64("tolerance", 0.1, "keep the linear fit α·b+β where it is within this fraction of every median, else the measured table")
	threads := fs.Int("intra-op-threads", 1, "ONNX Runtime threads per batch, as the backend will run it")
	cpu := fs.Int("executor-cpu", -1, "measure on this CPU alone, as symphony backend --executor-cpus runs batches (Linux; with --intra-op-threads 1); -1: wherever the kernel runs it")
	lib := fs.String("onnxruntime-lib", "", "ONNX Runtime's library (default: $"+onnx.LibraryEnv+", else "+onnx.FetchedLibrary+")")
	dryRun := fs.Bool("dry-run", false, "measure and print, but leave config.yaml alone")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	plotDir := fs.String("plot", "", "write the measured and fitted ℓ(b) as SVG and PNG into `DIR`")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *repo == "" || *name == "" {
		return cli.UsageErr("--model-repo and --model are required")
	}
	if *runs < 1 || *warmup < 0 || *tolerance < 0 || *retries < 0 {
		return cli.UsageErr("--runs must be at least 1, --warmup, --retries and --tolerance not negative")
	}
	if *cpu >= 0 && *threads != 1 {
		return cli.UsageErr("--executor-cpu pins the thread that calls ONNX Runtime: give --intra-op-threads 1")
	}
	rm, err := serving.ReadRepoModel(*repo, *name)
	if err != nil {
		return err
	}
	if *maxBatch == 0 {
		*maxBatch = rm.MaxBatch
	}
	ex, err := onnx.New(onnx.Config{Library: *lib, Repository: *repo, IntraOpThreads: *threads})
	if err != nil {
		return err
	}
	defer ex.Close()
	if err := ex.Load([]wire.ModelSpec{{ID: 0, Name: *name}}); err != nil {
		return err
	}
	inBytes, _, _ := ex.SampleBytes(0)
	inputs := make([][]byte, 64) // a few distinct inputs, reused
	for i := range inputs {
		inputs[i] = make([]byte, inBytes)
		for j := 0; j+4 <= inBytes; j += 4 {
			binary.LittleEndian.PutUint32(inputs[i][j:], math.Float32bits(float32(math.Sin(float64(i*inBytes+j)))))
		}
	}
	if *cpu >= 0 {
		// The measuring goroutine's thread on the CPU, everything else off
		// it: as the backend runs a GPU's batches.
		if err := cpupin.Reserve([]int{*cpu}); err != nil {
			return err
		}
		if err := cpupin.Pin(*cpu); err != nil {
			return err
		}
		defer runtime.UnlockOSThread()
	}
	ctx, stop := cli.SignalContext()
	defer stop()
	log := cli.NewLogger(stderr, *asJSON)
	points, err := profiler.Measure(ctx, ex, 0, profiler.Options{MaxBatch: *maxBatch, Warmup: *warmup, Runs: *runs,
		Input: func(i int) []byte { return inputs[i%len(inputs)] },
		Progress: func(p profiler.Point) {
			log.Info().Int("batch", p.Batch).Str("median", p.Median.String()).Str("p99", p.P99.String()).Msgf("%d/%d", p.Batch, *maxBatch)
		},
		Retries: *retries, Recheck: outOfOrderTolerance,
		Remeasured: func(p profiler.Point) {
			log.Info().Int("batch", p.Batch).Str("median", p.Median.String()).Str("p99", p.P99.String()).Msg("measured again (out of order)")
		}})
	if err != nil {
		return err
	}
	prof, fit, err := profile.FromMeasured(profiler.Medians(points), *tolerance)
	if err != nil {
		return err
	}
	rep := profileReport{Model: *name, Config: rm.Config, AlphaMs: report.Ms(fit.Alpha), BetaMs: report.Ms(fit.Beta), MaxRelErr: fit.MaxRelErr, Threads: *threads, CPU: *cpu, Kept: "table"}
	var linear *profile.Fit
	if fit.Kept {
		rep.Kept, linear = "linear", &fit
	}
	for _, p := range points {
		rep.Points = append(rep.Points, profilePoint{Batch: p.Batch, MedianMs: report.Ms(p.Median), P99Ms: report.Ms(p.P99),
			FitMs: report.Ms(fit.Alpha*time.Duration(p.Batch) + fit.Beta)})
	}
	if !*dryRun {
		if err := serving.WriteProfile(rm.Config, prof, linear); err != nil {
			return err
		}
		rep.Written = true
	}
	if *plotDir != "" {
		var med, p99, fitted [][2]float64
		for _, p := range rep.Points {
			med = append(med, [2]float64{float64(p.Batch), p.MedianMs})
			p99 = append(p99, [2]float64{float64(p.Batch), p.P99Ms})
			fitted = append(fitted, [2]float64{float64(p.Batch), p.FitMs})
		}
		paths, err := report.WriteLinePlot(*plotDir, "profile-"+*name, "ℓ(b) of "+*name+" (ONNX Runtime, CPU)", "batch size", "latency (ms)",
			[]report.Series{{Label: "median", Points: med, Color: 0}, {Label: "p99", Points: p99, Color: 1}, {Label: "fit α·b+β", Points: fitted, Color: 2, Dashed: true}})
		if err != nil {
			return err
		}
		log.Info().Strs("files", paths).Msg("charts written")
	}
	if *asJSON {
		return report.EncodeJSON(stdout, rep)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "batch\tmedian ms\tp99 ms\tfit ms\t")
	for _, p := range rep.Points {
		fmt.Fprintf(tw, "%d\t%.3f\t%.3f\t%.3f\t\n", p.Batch, p.MedianMs, p.P99Ms, p.FitMs)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "fit: α = %.4f ms, β = %.4f ms, worst error %.1f%%; kept the %s profile", rep.AlphaMs, rep.BetaMs, 100*fit.MaxRelErr, rep.Kept)
	if rep.Written {
		fmt.Fprintf(stdout, ", written to %s\n", rm.Config)
	} else {
		fmt.Fprintln(stdout, " (--dry-run: not written)")
	}
	return nil
}

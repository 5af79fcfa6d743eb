package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/symphony-serving/symphony/bench/loadgen"
	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/cmd/internal/cli"
)

// runSweep is `--sweep` of `symphony demo` and `symphony bench`: the live load
// at each multiplier (of the live goodput's, after a search, with
// --find-goodput), beside the simulator's sweep of the same workload, scale
// and multipliers, written as one comparison (report.SweepComparison).
//
// The simulator runs w's policy: the one the demo's cluster runs, or for a
// running cluster the file's, which notes should say. A sweep stopped by a
// signal, or by a point that could not start, still writes what it
// measured, then returns the error.
func (lf *loadFlags) runSweep(ctx context.Context, target loadgen.PointTarget, w *workload.Workload, label string, notes []string, stdout, stderr io.Writer) error {
	log := cli.NewLogger(stderr, *lf.quiet)
	simLog := log.With().Str("run", "simulator").Logger()
	o := lf.options(w, label, stderr)
	cmp := &report.SweepComparison{
		Workload: w.Source, Seed: w.Seed, GPUs: w.Cluster.GPUs,
		WarmupSeconds: w.Warmup.Seconds(), DurationSeconds: w.Duration.Seconds(),
		Scale: 1, Notes: notes,
	}
	var simPeak float64
	if *lf.findGoodput {
		t, release, err := target(ctx)
		if err != nil {
			return err
		}
		rep, err := loadgen.FindGoodput(ctx, t, w, o)
		release()
		if err != nil {
			// Stopped in the search: its best step so far is what
			// was measured.
			return lf.writeRun(rep, err, stdout)
		}
		cmp.Scale, cmp.Live.PeakGoodputRPS = report.SweepBase(rep)
		simRep, err := simulate(w, true, simLog)
		if err != nil {
			return fmt.Errorf("simulator: %w", err)
		}
		_, simPeak = report.SweepBase(simRep)
	}
	var err error
	if cmp.Sim, err = simSweep(w, cmp.Scale, simPeak, lf.multipliers, true, simLog); err != nil {
		return fmt.Errorf("simulator: %w", err)
	}

	so := loadgen.SweepOptions{Options: o, Scale: cmp.Scale, PeakGoodputRPS: cmp.Live.PeakGoodputRPS}
	if !*lf.quiet {
		n := len(lf.multipliers)
		done := 0
		so.Started = func(i int, m float64, ws *workload.Workload) {
			fmt.Fprintf(stderr, "sweep %d/%d: %gx, %.1f req/s offered\n", i+1, n, m, ws.TotalRate())
		}
		so.Point = func(p report.CurvePoint) {
			fmt.Fprintf(stderr, "sweep %d/%d: %gx  %s\n", done+1, n, p.Multiplier, report.PointSummary(p, cmp.Sim.Points[done]))
			done++
		}
	}
	cmp.Live, err = loadgen.Sweep(ctx, target, w, lf.multipliers, so)
	if err != nil {
		cmp.Stopped = err.Error()
	}
	if werr := cli.WriteExperiment(stdout, cmp, *lf.asJSON, *lf.csvPath, *lf.plotDir, cmp.WritePlots, log); werr != nil {
		return errors.Join(err, werr)
	}
	return err
}

package loadgen

import (
	"context"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/workload"
)

// PointTarget gives the target for one point of a sweep and a function that
// releases it once the point has run. `symphony demo` starts a fresh
// cluster for each point, so that one point's backlog cannot leak into the
// next; `symphony bench` gives the same running cluster every time.
type PointTarget func(ctx context.Context) (t Target, release func(), err error)

// SweepOptions tune Sweep.
type SweepOptions struct {
	// Options are every point's run's; Label names the curve.
	Options
	// Scale is what the multipliers multiply: the file's rates times
	// Scale (a found goodput's multiplier; 0 means 1).
	Scale float64
	// PeakGoodputRPS, when known, gives the points their flat-top
	// targets (report.IdealBadRate, report.IdealIdleFraction).
	PeakGoodputRPS float64
	// Started, if set, is told of each point before it runs: its index,
	// its multiplier and the scaled workload.
	Started func(i int, multiplier float64, w *workload.Workload)
	// Point, if set, is told of each point once it has run.
	Point func(report.CurvePoint)
}

// Sweep offers w's load at each multiplier of Scale × the file's rates in
// turn, in real time, and returns the live throughput curve, each point
// with its outcome counts. Every point runs on a target from target,
// released before the next point starts; Run returns only once every
// request it issued has ended, so no request of one point is still in the
// cluster when the next point begins.
//
// Canceling ctx stops the sweep: a point stopped in its window is kept as a
// Partial point, and Sweep returns the curve measured so far with an error
// wrapping ctx's. A target that fails to start ends the sweep the same way.
func Sweep(ctx context.Context, target PointTarget, w *workload.Workload, multipliers []float64, o SweepOptions) (report.Curve, error) {
	return sweep(ctx, w, multipliers, o, func(w *workload.Workload) (*report.Report, error) {
		t, release, err := target(ctx)
		if err != nil {
			return nil, err
		}
		defer release()
		return Run(ctx, t, w, o.Options)
	})
}

// sweep is Sweep with the point's run given, so that tests can use a fake
// target.
func sweep(ctx context.Context, w *workload.Workload, multipliers []float64, o SweepOptions,
	run func(*workload.Workload) (*report.Report, error)) (report.Curve, error) {
	label := o.withDefaults(w).Label
	scale := o.Scale
	if scale == 0 {
		scale = 1
	}
	c := report.Curve{Policy: label, PeakGoodputRPS: o.PeakGoodputRPS}
	i := 0
	err := c.Sweep(multipliers, report.SweepOptions{Outcomes: true, Point: o.Point}, func(m float64) (*report.Report, error) {
		if err := ctx.Err(); err != nil {
			return nil, err // stopped between points: start no more
		}
		ws := w.Scaled(scale * m)
		if o.Started != nil {
			o.Started(i, m, ws)
		}
		i++
		return run(ws)
	})
	return c, err
}

package sim

import (
	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/workload"
)

// Sweep runs w in the simulator at each multiplier of scale × the file's
// rates (scale: a found goodput's multiplier, or 1) and returns the
// throughput curve, with flat-top targets for peak goodput peak (none when
// 0): the simulator's side of report.Curve.Sweep, as loadgen.Sweep is the
// live cluster's, so that `sim --sweep` and the live sweeps' simulator
// curve are built alike.
func Sweep(w *workload.Workload, scale, peak float64, multipliers []float64, o report.SweepOptions) (report.Curve, error) {
	c := report.Curve{Policy: w.Policy.String(), PeakGoodputRPS: peak}
	err := c.Sweep(multipliers, o, func(m float64) (*report.Report, error) {
		return Run(w.Scaled(scale*m), Options{})
	})
	return c, err
}

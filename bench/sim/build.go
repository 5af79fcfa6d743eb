package sim

import (
	"github.com/symphony-serving/symphony/bench/report"
)

// build turns the accounting into a report, through the report builder the
// live load generator uses too.
func (a *accounting) build() *report.Report {
	w := a.w
	m := &report.Measurement{
		Workload: w.Source, Policy: w.Policy.String(), Seed: w.Seed, GPUs: w.Cluster.GPUs, CostPerHour: w.Cluster.CostPerHour(),
		Seconds: w.Duration.Seconds(), Models: a.models, GPUBusy: a.gpuBusy,
		Epochs: a.epochs, InUse: a.inUseInWindow,
	}
	if w.AutoscaleWindow > 0 {
		m.Series, m.Interval, m.End = a.series, a.interval, w.Warmup+w.Duration
	}
	if a.tally != nil {
		m.Faults = a.tally.Report()
	}
	return report.Build(m)
}

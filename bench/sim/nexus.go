package sim

import (
	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/nexus"
	"github.com/symphony-serving/symphony/scheduler/serving"
)

// nexusEngine runs the Nexus baseline, planned on the workload's mean rates
// over the measured window (the load the previous epoch would have seen).
type nexusEngine struct {
	acct *accounting
	c    *nexus.Cluster
}

func newNexusEngine(w *workload.Workload, acct *accounting) (engine, error) {
	cfg := nexus.Config{GPUs: w.Cluster.GPUs, Delays: w.Network, Frontends: w.NexusFrontends, Seed: w.Seed}
	for i := range w.Models {
		m := &w.Models[i]
		cfg.Models = append(cfg.Models, serving.Demand{Model: m.Serving(), Rate: m.MeanRate(w.Warmup, w.Warmup+w.Duration)})
	}
	c, err := nexus.New(cfg)
	if err != nil {
		return nil, err
	}
	return &nexusEngine{acct: acct, c: c}, nil
}

func (e *nexusEngine) arrive(now scheduler.Time, model int, req scheduler.Request) {
	e.handle(now, e.c.Arrive(now, model, req))
}

func (e *nexusEngine) wakeAt() scheduler.Time { return e.c.WakeAt() }

func (e *nexusEngine) wake(now scheduler.Time) { e.handle(now, e.c.Tick(now)) }

func (e *nexusEngine) handle(now scheduler.Time, out *nexus.Output) {
	for i := range out.Drops {
		e.acct.drop(out.Drops[i].Model, &out.Drops[i].Drop)
	}
	for i := range out.Plans {
		// Inputs travelled with the requests; the batch may start at once.
		e.acct.plan(now, out.Plans[i].Model, &out.Plans[i].BatchPlan, 0)
	}
}

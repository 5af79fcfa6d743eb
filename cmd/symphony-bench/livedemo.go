package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/bench/cluster"
	"github.com/symphony-serving/symphony/bench/loadgen"
	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/cmd/internal/cli"
	"github.com/symphony-serving/symphony/partition/live"
)

// runLiveDemo is `symphony demo --controller`: the workload on the live
// control plane (bench/cluster.StartLive): a scheduler per part of its
// epoch section, cluster.gpus one-GPU backends that start parked, one
// frontend following the routing table, and the epoch controller every
// epoch.interval, over an embedded etcd. The report carries the epochs as
// the simulator's does, and the GPUs in use over time.
func runLiveDemo(ctx context.Context, w *workload.Workload, lf *loadFlags, lv *liveFlags, dp *cli.DataPathFlags, tf *cli.TLSFlags, log zerolog.Logger, stdout, stderr io.Writer) error {
	network, err := tf.Network(log)
	if err != nil {
		return err
	}
	defer network.Close()
	cc, err := cluster.FromWorkload(w, network, "127.0.0.1:0")
	if err != nil {
		return err
	}
	cc.Log, cc.DataPath, cc.RDMADevice = log, dp.Mode(), dp.Device()
	cc.Backends = w.Cluster.GPUs
	lc := cluster.LiveConfig{Config: cc, Epoch: w.EpochConfig(), Period: w.Epoch.Interval, TTL: *lv.ttl}
	// Parts are sized for the delays the live schedulers budget for (the
	// workload's, raised to the live floor), as `symphony controller`
	// sizes them, not for the simulator's network.
	lc.Epoch.Network = cc.Delays
	if *lv.autoscale {
		lc.Actuate = &cluster.ActuateConfig{Boot: *lv.boot, WarmPool: *lv.warmPool, ScaleInDelay: *lv.scaleInDelay, Max: w.Cluster.GPUs}
		// The first epoch places the models on what is up; the next
		// one grows the pool to what the parts want.
		cc.Backends = min(w.Cluster.GPUs, w.Epoch.Parts+*lv.warmPool)
		lc.Config = cc
	}
	for i := range w.Models {
		lc.Rates = append(lc.Rates, w.Models[i].RateAt(0))
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	l, err := cluster.StartLive(sctx, lc)
	cancel()
	if err != nil {
		return fmt.Errorf("demo: live cluster: %w", err)
	}
	defer l.Close()
	if !*lf.quiet {
		pool := fmt.Sprintf("%d one-GPU backends in the pool", cc.Backends)
		if lc.Actuate != nil {
			pool = fmt.Sprintf("an elastic pool of one-GPU backends, %d up to %d (%v to boot, %d warm, scale-in after %v)",
				cc.Backends, lc.Actuate.Max, lc.Actuate.Boot, lc.Actuate.WarmPool, lc.Actuate.ScaleInDelay)
		}
		fmt.Fprintf(stderr, "demo: live control plane on embedded etcd %s: %d parts, each with its scheduler; %s; epochs every %v\n",
			l.Etcd.Endpoint, lc.Epoch.Parts, pool, lc.Period)
	}
	lf.profile = func(model string) []time.Duration { return frontendProfile(l.Frontend, model) }
	start := time.Now()
	lf.annotate = func(r *report.Report) {
		annotateLive(r, l.Epochs(), start)
	}
	err = lf.drive(ctx, loadgen.Client(l.Frontend), w, w.Policy.String()+" (live, controller)", stdout, stderr)
	if !*lf.quiet {
		summarizeLive(stderr, l.Epochs())
		if n := l.Restarts(); n > 0 {
			fmt.Fprintf(stderr, "demo: %d schedulers lost their part's leadership (etcd unheard for a lease's TTL) and were restarted\n", n)
		}
		for p, svc := range l.Schedulers() {
			st := svc.Snapshot()
			drops := map[string]uint64{}
			var failed, late uint64
			for _, m := range st.Models {
				for why, n := range m.Dropped {
					drops[why] += n
				}
				failed += m.Failed
				late += m.DroppedLate
			}
			fmt.Fprintf(stderr, "demo: part %d's scheduler: %d tasks, %d plans, dropped %v, %d dropped late by backends, %d failed, %d resubmitted, %d stalls, wakeup lead %v\n",
				p, st.Tasks, st.Plans, drops, late, failed, st.Resubmitted, st.Stalls, st.WakeupLead)
		}
	}
	if cerr := l.Err(); cerr != nil {
		fmt.Fprintf(stderr, "demo: the control plane reported: %v\n", cerr)
	}
	return err
}

// liveFlags are the flags of `symphony demo --controller`.
type liveFlags struct {
	ttl, boot, scaleInDelay *time.Duration
	autoscale               *bool
	warmPool                *int
}

// annotateLive adds the live epochs to a run's report as the simulator's
// (report.EpochRecord, Start from the run's start), and sets each
// interval's GPUs in use from the decisions in force over it.
func annotateLive(r *report.Report, epochs []live.EpochResult, start time.Time) {
	for _, e := range epochs {
		r.Epochs = append(r.Epochs, report.EpochRecordOf(&e.Decision.Record, e.At.Sub(start).Seconds()))
	}
	for i := range r.TimeSeries {
		p := &r.TimeSeries[i]
		in := 0
		for _, e := range r.Epochs {
			if e.Start <= p.Start {
				in = e.GPUs
			}
		}
		p.GPUs, p.GPUsInUse = in, float64(in)
	}
}

// summarizeLive tells how the epochs went: the moves switched and given
// up, and the range of GPUs in use.
func summarizeLive(w io.Writer, epochs []live.EpochResult) {
	switched, failed, lo, hi := 0, 0, math.MaxInt, 0
	for _, e := range epochs {
		for _, m := range e.Moves {
			if m.Switched {
				switched++
			} else {
				failed++
			}
		}
		lo, hi = min(lo, e.Decision.Record.GPUs), max(hi, e.Decision.Record.GPUs)
	}
	if len(epochs) == 0 {
		lo = 0
	}
	fmt.Fprintf(w, "demo: %d epochs; %d model moves switched, %d given up; GPUs in use %d..%d\n", len(epochs), switched, failed, lo, hi)
}

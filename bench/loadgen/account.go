package loadgen

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/frontend/gateway"
)

// batchKey identifies a batch from what its requests carry. Batches are
// counted once by their distinct (model, start, finish, size): exact even
// when other frontends' requests share the batch, which dividing request
// counts by the batch size would miss.
type batchKey struct {
	started, finished int64
	size, model       int32
}

// batchSet remembers recent batches in two generations, so that it stays
// small over long runs; the requests of one batch end together, far closer
// in time than a generation of 64Ki batches.
type batchSet struct{ cur, old map[batchKey]struct{} }

func (s *batchSet) add(k batchKey) bool {
	if _, ok := s.cur[k]; ok {
		return false
	}
	if _, ok := s.old[k]; ok {
		return false
	}
	if len(s.cur) >= 1<<16 {
		s.old, s.cur = s.cur, s.old
		clear(s.cur)
	}
	s.cur[k] = struct{}{}
	return true
}

// collector waits for its requests in issue order and accounts for each.
// Waiting in order delays the accounting of a request that ends early behind
// one that ends late, but never the requests themselves.
type collector struct {
	r      *runner
	q      queue
	series []report.Interval
	seen   batchSet
	// faults tallies requests against the fault scenario; nil without one.
	faults *report.FaultTally
}

func (c *collector) loop() {
	var spare []entry
	for {
		items, ok := c.q.take(spare)
		if !ok {
			return
		}
		for i := range items {
			<-items[i].p.Done()
			c.account(&items[i])
		}
		clear(items)
		spare = items
	}
}

func (c *collector) bucket(t time.Duration) *report.Interval {
	if t < 0 {
		return nil
	}
	if i := int(t / c.r.o.Interval); i < len(c.series) {
		return &c.series[i]
	}
	return nil
}

func (c *collector) account(e *entry) {
	r := c.r
	t, err := e.p.Result()
	m := &r.models[e.model]
	lat := t.Ended.Sub(t.Submitted)
	good := err == nil && lat <= r.w.Models[e.model].SLO
	if good {
		r.good.Add(1)
	}
	r.ended.Add(1)
	ran := t.BatchSize > 0 && !t.Started.IsZero()
	if ran {
		c.batch(e.model, m, &t)
	}
	if b := c.bucket(e.at); b != nil {
		b.Offered++
		if good {
			b.Good++
		} else {
			b.Bad++
		}
	}
	o, why := outcomeOf(err, good)
	if c.faults != nil {
		c.faults.Add(e.at, o, why)
	}
	if !r.inWindow(e.at) {
		return
	}
	if len(r.w.Models[e.model].PriorityMix) > 0 {
		good := uint64(0)
		if o == report.OutcomeGood {
			good = 1
		}
		m.AddLevel(e.level, 1, good)
	}
	if ran {
		m.Queueing.Record(t.Started.Sub(t.Submitted))
	}
	switch o {
	case report.OutcomeGood, report.OutcomeLate:
		if o == report.OutcomeGood {
			m.Good++
		} else {
			m.Late++
		}
		m.Latency.Record(lat)
		m.BatchWeighted += uint64(t.BatchSize)
		return
	case report.OutcomeDropped:
		m.Dropped++
	case report.OutcomeFailed:
		m.Failed++
	}
	m.AddReason(why, 1)
}

// outcomeOf classifies an ended request, with the reason the report's
// DropReasons gives a dropped or failed one: once per request, for both
// the window's counts and the fault tally.
func outcomeOf(err error, good bool) (report.Outcome, string) {
	switch {
	case good:
		return report.OutcomeGood, ""
	case err == nil:
		return report.OutcomeLate, ""
	}
	if reason, ok := frontend.IsDrop(err); ok {
		return report.OutcomeDropped, string(reason)
	}
	return report.OutcomeFailed, "failed: " + failKind(err)
}

// failKind names a failure that is not a drop, for DropReasons.
func failKind(err error) string {
	var be *frontend.BackendError
	switch {
	case errors.As(err, &be):
		// The cause's first clause is its kind ("input unavailable",
		// "executor failed", "backend lost", ...); the rest is detail.
		kind, _, _ := strings.Cut(be.Cause, ":")
		if kind == "" {
			return "backend"
		}
		return "backend: " + kind
	case errors.Is(err, frontend.ErrNotConnected):
		return "not connected"
	case errors.Is(err, frontend.ErrSchedulerLost):
		return "scheduler lost"
	case errors.Is(err, frontend.ErrRefused):
		return "refused"
	case errors.Is(err, frontend.ErrUnknownModel):
		return "unknown model"
	case errors.Is(err, frontend.ErrClosed):
		return "closed"
	case errors.Is(err, frontend.ErrBadInput):
		return "bad input"
	case errors.Is(err, frontend.ErrBadDeadline):
		return "bad deadline"
	case errors.Is(err, gateway.ErrUnauthenticated):
		return "unauthenticated"
	}
	return "other"
}

// batch counts a request's batch if it is the first of the batch seen.
func (c *collector) batch(model int32, m *report.ModelCounts, t *frontend.Timing) {
	k := batchKey{t.Started.UnixNano(), t.Finished.UnixNano(), int32(t.BatchSize), model}
	if !c.seen.add(k) {
		return
	}
	r := c.r
	from, to := t.Started.Sub(r.start), t.Finished.Sub(r.start)
	if r.inWindow(from) {
		m.AddBatch(t.BatchSize, 1)
		m.Profile.Add(t.BatchSize, t.Finished.Sub(t.Started), r.profiles[model])
	}
	if lo, hi := max(from, r.winStart), min(to, r.winEnd); hi > lo {
		m.Busy += hi - lo
	}
	iv := r.o.Interval
	for s := max(from, 0); s < to; {
		b := c.bucket(s)
		if b == nil {
			break
		}
		end := min(to, (s/iv+1)*iv)
		b.Busy += end - s
		s = end
	}
}

// build checks that every request in the window was accounted for and turns
// the accounting into a report, through the report builder the simulator
// uses too.
func (r *runner) build() (*report.Report, error) {
	w := r.w
	for i := range r.models {
		m := &r.models[i]
		m.Offered = r.offered[i]
		if got := m.Good + m.Late + m.Dropped + m.Failed; got != m.Offered {
			return nil, fmt.Errorf("loadgen: model %q: %d requests offered in the window but %d accounted for (good %d, late %d, dropped %d, failed %d)",
				m.Name, m.Offered, got, m.Good, m.Late, m.Dropped, m.Failed)
		}
	}
	var faults *report.FaultReport
	if tally := r.collectors[0].faults; tally != nil {
		for i := 1; i < len(r.collectors); i++ {
			tally.Merge(r.collectors[i].faults)
		}
		faults = tally.Report()
	}
	series := make([]report.Interval, len(r.collectors[0].series))
	for i := range series {
		for j := range r.collectors {
			series[i].Add(&r.collectors[j].series[i])
		}
	}
	// Timings carry no GPU ID, so only the cluster-wide busy fraction is
	// known: GPUBusy (per GPU) stays empty. The cost is the workload's
	// cluster's, as the simulator reports it, when the measured cluster is
	// that one: a cluster of another size has prices the file does not
	// give.
	cost := 0.0
	if r.o.GPUs == w.Cluster.GPUs {
		cost = w.Cluster.CostPerHour()
	}
	return report.Build(&report.Measurement{
		Workload: w.Source, Policy: r.o.Label, Seed: w.Seed, GPUs: r.o.GPUs, CostPerHour: cost,
		Seconds: (r.winEnd - r.winStart).Seconds(), // the window, or the part of it that ran
		Models:  r.models, Faults: faults,
		Series: series, Interval: r.o.Interval, End: r.winEnd, // after a stop, the series ends early
	}), nil
}

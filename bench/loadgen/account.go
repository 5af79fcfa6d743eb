package loadgen

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/scheduler"
)

// modelAcct is one model's counts over the measured window.
type modelAcct struct {
	good, late, dropped, failed uint64
	latency, queueing           report.Histogram
	batches                     map[int]uint64 // batch size -> batches
	batchWeighted               uint64         // Σ over answered requests of their batch size
	reasons                     map[string]uint64
	busy                        time.Duration // GPU time of the model's batches in the window
}

func newModelAcct() *modelAcct {
	return &modelAcct{batches: map[int]uint64{}, reasons: map[string]uint64{}}
}

func (m *modelAcct) merge(o *modelAcct) {
	m.good += o.good
	m.late += o.late
	m.dropped += o.dropped
	m.failed += o.failed
	m.batchWeighted += o.batchWeighted
	m.busy += o.busy
	m.latency.Merge(&o.latency)
	m.queueing.Merge(&o.queueing)
	for bs, n := range o.batches {
		m.batches[bs] += n
	}
	for k, n := range o.reasons {
		m.reasons[k] += n
	}
}

// bucket is one time-series interval, by arrival time (busy by batch time).
type bucket struct {
	offered, good, bad uint64
	busy               time.Duration
}

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
	series []bucket
	seen   batchSet
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

func (c *collector) bucket(t time.Duration) *bucket {
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
	err, t := e.p.outcome()
	m := r.models[e.model]
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
		b.offered++
		if good {
			b.good++
		} else {
			b.bad++
		}
	}
	o, why := outcomeOf(err, good)
	c.faults.Add(e.at, o, why)
	if !r.inWindow(e.at) {
		return
	}
	if ran {
		m.queueing.Record(t.Started.Sub(t.Submitted))
	}
	if err == nil {
		if good {
			m.good++
		} else {
			m.late++
		}
		m.latency.Record(lat)
		m.batchWeighted += uint64(t.BatchSize)
		return
	}
	if reason, ok := frontend.IsDrop(err); ok {
		m.dropped++
		m.reasons[string(reason)]++
		return
	}
	m.failed++
	m.reasons["failed: "+failKind(err)]++
}

// outcomeOf classifies an ended request for the fault tally, with the
// reason the report's DropReasons gives it.
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
	}
	return "other"
}

// batch counts a request's batch if it is the first of the batch seen.
func (c *collector) batch(model int32, m *modelAcct, t *frontend.Timing) {
	k := batchKey{t.Started.UnixNano(), t.Finished.UnixNano(), int32(t.BatchSize), model}
	if !c.seen.add(k) {
		return
	}
	r := c.r
	from, to := t.Started.Sub(r.start), t.Finished.Sub(r.start)
	if r.inWindow(from) {
		m.batches[t.BatchSize]++
	}
	if lo, hi := max(from, r.winStart), min(to, r.winEnd); hi > lo {
		m.busy += hi - lo
	}
	iv := r.o.Interval
	for s := max(from, 0); s < to; {
		b := c.bucket(s)
		if b == nil {
			break
		}
		end := min(to, (s/iv+1)*iv)
		b.busy += end - s
		s = end
	}
}

func ms(d time.Duration) float64 { return d.Seconds() * 1e3 }

func fillStats(s *report.Stats, m *modelAcct, offered uint64, seconds float64) {
	s.Offered, s.Good, s.Late, s.Dropped, s.Failed = offered, m.good, m.late, m.dropped, m.failed
	s.OfferedRPS = float64(offered) / seconds
	s.GoodputRPS = float64(m.good) / seconds
	if offered > 0 {
		s.BadRate = float64(m.late+m.dropped+m.failed) / float64(offered)
	}
	s.LatencyP50 = ms(m.latency.Quantile(0.50))
	s.LatencyP99 = ms(m.latency.Quantile(0.99))
	s.LatencyP999 = ms(m.latency.Quantile(0.999))
	s.QueueingP50 = ms(m.queueing.Quantile(0.50))
	s.QueueingP99 = ms(m.queueing.Quantile(0.99))
	s.BatchSizeHist = maps.Clone(m.batches)
	if answered := m.good + m.late; answered > 0 {
		s.MeanBatchSize = float64(m.batchWeighted) / float64(answered)
	}
	if len(m.reasons) > 0 {
		s.DropReasons = maps.Clone(m.reasons)
	}
}

func fraction(f float64) float64 { return min(max(f, 0), 1) }

// build checks that every request in the window was accounted for and turns
// the accounting into a report.
func (r *runner) build() (*report.Report, error) {
	w, gpus := r.w, r.o.GPUs
	seconds := (r.winEnd - r.winStart).Seconds() // the window, or the part of it that ran
	rep := &report.Report{
		Workload: w.Source, Policy: r.o.Label, Seed: w.Seed, GPUs: gpus, DurationSeconds: seconds,
	}
	total := newModelAcct()
	var offered uint64
	for i := range r.models {
		m := r.models[i]
		if got := m.good + m.late + m.dropped + m.failed; got != r.offered[i] {
			return nil, fmt.Errorf("loadgen: model %q: %d requests offered in the window but %d accounted for (good %d, late %d, dropped %d, failed %d)",
				w.Models[i].Name, r.offered[i], got, m.good, m.late, m.dropped, m.failed)
		}
		mr := report.ModelReport{Name: w.Models[i].Name, SLOms: ms(w.Models[i].SLO), Latency: &m.latency}
		fillStats(&mr.Stats, m, r.offered[i], seconds)
		mr.GPUBusyFraction = fraction(m.busy.Seconds() / seconds / float64(gpus))
		rep.Models = append(rep.Models, mr)

		offered += r.offered[i]
		total.merge(m)
	}
	fillStats(&rep.Stats, total, offered, seconds)
	rep.Latency = &total.latency
	faults := r.collectors[0].faults
	for i := 1; i < len(r.collectors); i++ {
		faults.Merge(r.collectors[i].faults)
	}
	rep.Faults = faults.Report()
	// Timings carry no GPU ID, so only the cluster-wide busy fraction is
	// known: GPUBusy (per GPU) stays empty.
	rep.GPUBusyFraction = fraction(total.busy.Seconds() / seconds / float64(gpus))
	rep.GPUIdleFraction = 1 - rep.GPUBusyFraction
	cfg := scheduler.DefaultAutoscaleConfig()
	rep.Autoscale = toAdvice(cfg.Advise(scheduler.Signals{
		GPUs: gpus, Requests: offered, BadRate: rep.BadRate, IdleFraction: rep.GPUIdleFraction,
	}))

	iv := r.o.Interval.Seconds()
	for i := range r.collectors[0].series {
		if time.Duration(i)*r.o.Interval >= r.winEnd {
			break // after a stop
		}
		var b bucket
		for j := range r.collectors {
			s := &r.collectors[j].series[i]
			b.offered += s.offered
			b.good += s.good
			b.bad += s.bad
			b.busy += s.busy
		}
		tp := report.TimePoint{
			Start: float64(i) * iv, OfferedRPS: float64(b.offered) / iv, GoodputRPS: float64(b.good) / iv,
			BusyGPUs: b.busy.Seconds() / iv, GPUs: gpus,
		}
		if b.offered > 0 {
			tp.BadRate = float64(b.bad) / float64(b.offered)
		}
		tp.Advice = toAdvice(cfg.Advise(scheduler.Signals{
			GPUs: gpus, Requests: b.offered, BadRate: tp.BadRate,
			IdleFraction: fraction(1 - tp.BusyGPUs/float64(gpus)),
		}))
		rep.TimeSeries = append(rep.TimeSeries, tp)
	}
	return rep, nil
}

func toAdvice(a scheduler.AutoscaleAdvice) report.Advice {
	return report.Advice{Action: string(a.Action), GPUs: a.GPUs, Reason: a.Reason}
}

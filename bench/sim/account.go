package sim

import (
	"fmt"
	"time"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/scheduler"
)

// accounting is the simulator's emulated GPUs and frontends: it receives
// every batch plan and drop, checks each against the oracle rules, and
// keeps the statistics of the measured window.
//
// Oracle rules, each a run-failing error:
//   - no two batches overlap on one GPU;
//   - a batch starts no earlier than its inputs can arrive;
//   - a batch finishes in time for every request in it to meet its deadline;
//   - every request ends exactly once.
//
// Under a fault scenario the GPUs are the cluster model's (cluster.go),
// which adds its own rules, and a request's outcome is recorded when its
// frontend ends it (outcome), not when it is planned.
type accounting struct {
	w                *workload.Workload
	winStart, winEnd scheduler.Time
	interval         time.Duration
	models           []report.ModelCounts
	gpuLastFinish    []scheduler.Time
	gpuBusy          []time.Duration
	ended            []uint64 // bitset by RequestID
	issued           uint64
	endedCount       uint64
	// arrivals counts each model's requests, for their priority levels
	// (workload.Model.PriorityOf).
	arrivals []uint64
	series   []report.Interval
	err      error
	// With an epoch job: GPU time in use (assigned to a part) in the
	// window, and per-model outcomes in each series bucket.
	epochs        bool
	inUseInWindow time.Duration
	// tally counts requests against the fault scenario; nil without one.
	tally *report.FaultTally
}

func newAccounting(w *workload.Workload, interval time.Duration) *accounting {
	a := &accounting{
		w:             w,
		winStart:      scheduler.Time(w.Warmup),
		winEnd:        scheduler.Time(w.Warmup + w.Duration),
		interval:      interval,
		models:        make([]report.ModelCounts, len(w.Models)),
		arrivals:      make([]uint64, len(w.Models)),
		gpuLastFinish: make([]scheduler.Time, w.Cluster.GPUs),
		gpuBusy:       make([]time.Duration, w.Cluster.GPUs),
	}
	for i, m := range w.Models {
		a.models[i].Name, a.models[i].SLO = m.Name, m.SLO
	}
	for i := range a.gpuLastFinish {
		a.gpuLastFinish[i] = scheduler.Past
	}
	n := int((w.Warmup+w.Duration+interval-1)/interval) + 1
	a.series = make([]report.Interval, n)
	if w.Epoch != nil {
		a.epochs = true
		for i := range a.series {
			a.series[i].ModelGood = make([]uint64, len(w.Models))
			a.series[i].ModelBad = make([]uint64, len(w.Models))
		}
	}
	return a
}

// addInUse records n GPUs in use over [from, to), for the epoch job's
// GPUs-in-use series and the window's idle fraction.
func (a *accounting) addInUse(from, to scheduler.Time, n int) {
	if n == 0 || to <= from {
		return
	}
	lo, hi := scheduler.MaxTime(from, a.winStart), scheduler.MinTime(to, a.winEnd)
	if hi > lo {
		a.inUseInWindow += time.Duration(n) * hi.Sub(lo)
	}
	for t := from; t < to; {
		i := int(time.Duration(t) / a.interval)
		if i >= len(a.series) {
			break
		}
		end := scheduler.MinTime(to, scheduler.Time(time.Duration(i+1)*a.interval))
		a.series[i].InUse += time.Duration(n) * end.Sub(t)
		t = end
	}
}

func (a *accounting) fail(format string, args ...any) {
	if a.err == nil {
		a.err = fmt.Errorf("sim: oracle: "+format, args...)
	}
}

func (a *accounting) inWindow(t scheduler.Time) bool { return t >= a.winStart && t < a.winEnd }

func (a *accounting) bucket(t scheduler.Time) *report.Interval {
	i := int(time.Duration(t) / a.interval)
	if i < 0 || i >= len(a.series) {
		return nil
	}
	return &a.series[i]
}

// newRequest issues the next request ID and counts the arrival.
func (a *accounting) newRequest(model int, now scheduler.Time) scheduler.Request {
	id := a.issued
	a.issued++
	if id/64 >= uint64(len(a.ended)) {
		a.ended = append(a.ended, 0)
	}
	wm := &a.w.Models[model]
	prio := wm.PriorityOf(a.arrivals[model])
	a.arrivals[model]++
	if a.inWindow(now) {
		a.models[model].Offered++
		if len(wm.PriorityMix) > 0 {
			a.models[model].AddLevel(prio, 1, 0)
		}
	}
	if b := a.bucket(now); b != nil {
		b.Offered++
	}
	return scheduler.Request{
		ID:       scheduler.RequestID(id),
		Arrival:  now,
		Deadline: now.Add(wm.SLO),
		Priority: prio,
	}
}

func (a *accounting) end(r *scheduler.Request) { a.endID(r.ID) }

func (a *accounting) endID(rid scheduler.RequestID) {
	id := uint64(rid)
	if id >= a.issued {
		a.fail("request %d ended but was never issued", id)
		return
	}
	word, bit := id/64, uint64(1)<<(id%64)
	if a.ended[word]&bit != 0 {
		a.fail("request %d ended twice", id)
		return
	}
	a.ended[word] |= bit
	a.endedCount++
}

// drop records a request that ended without a result.
func (a *accounting) drop(model int, d *scheduler.Drop) {
	a.end(&d.Request)
	if a.inWindow(d.Request.Arrival) {
		ma := &a.models[model]
		ma.Dropped++
		ma.AddReason(d.Reason.String(), 1)
	}
	if b := a.bucket(d.Request.Arrival); b != nil {
		b.Bad++
		if a.epochs {
			b.ModelBad[model]++
		}
	}
}

// planned and dropped make the accounting the cores' sink in a fault-free
// run: a GPU runs each plan exactly as planned.
func (a *accounting) planned(now scheduler.Time, model int, p *scheduler.BatchPlan, minLead time.Duration) scheduler.Time {
	a.plan(now, model, p, minLead)
	return p.FinishAt
}

func (a *accounting) dropped(_ scheduler.Time, model int, d *scheduler.Drop) { a.drop(model, d) }

// plan records a batch run on an emulated GPU. minLead is the least time the
// batch's inputs need to reach the GPU after the plan is made.
func (a *accounting) plan(now scheduler.Time, model int, p *scheduler.BatchPlan, minLead time.Duration) {
	if !a.checkPlan(now, model, p, minLead) {
		return
	}
	bs := len(p.Requests)
	if last := a.gpuLastFinish[p.GPU]; p.ExecAt < last {
		a.fail("GPU %d: batch starting at %v overlaps the previous batch, which ends at %v", p.GPU, p.ExecAt, last)
	}
	a.gpuLastFinish[p.GPU] = p.FinishAt
	ma := &a.models[model]
	ma.Busy += a.addBusy(p.GPU, p.ExecAt, p.FinishAt)
	a.ran(model, bs, p.ExecAt)
	respond := a.answered(model, p)
	for i := range p.Requests {
		r := &p.Requests[i]
		a.end(r)
		if respond > r.Deadline {
			a.fail("GPU %d: request %d answered at %v after its deadline %v", p.GPU, r.ID, respond, r.Deadline)
		}
		good := respond <= r.Deadline
		if b := a.bucket(r.Arrival); b != nil {
			if good {
				b.Good++
			} else {
				b.Bad++
			}
			if a.epochs {
				if good {
					b.ModelGood[model]++
				} else {
					b.ModelBad[model]++
				}
			}
		}
		if !a.inWindow(r.Arrival) {
			continue
		}
		if good {
			ma.Good++
			if len(a.w.Models[model].PriorityMix) > 0 {
				ma.AddLevel(r.Priority, 0, 1)
			}
		} else {
			ma.Late++
		}
		ma.Latency.Record(respond.Sub(r.Arrival))
		ma.Queueing.Record(p.ExecAt.Sub(r.Arrival))
		ma.BatchWeighted += uint64(bs)
	}
}

// answered is when a plan's requests are answered: the batch's end plus the
// result's trip. A model running several batches at once holds its GPU for
// a share of the batch's run (FinishAt) but answers only when the batch is
// done, the concurrency times later, as its core planned the deadlines.
func (a *accounting) answered(model int, p *scheduler.BatchPlan) scheduler.Time {
	end := p.FinishAt
	if e := a.w.Models[model].Concurrency; e > 1 {
		end = p.ExecAt.Add(time.Duration(float64(p.FinishAt.Sub(p.ExecAt)) * float64(e)))
	}
	return end.Add(a.w.Network.Result)
}

// checkPlan checks a plan as the cores made it: a batch of at least one
// request, on a GPU that exists, that runs as long as its profile says and
// starts no earlier than its inputs can arrive. It reports whether the
// plan can be accounted at all.
func (a *accounting) checkPlan(now scheduler.Time, model int, p *scheduler.BatchPlan, minLead time.Duration) bool {
	bs := len(p.Requests)
	m := &a.w.Models[model]
	if bs == 0 {
		a.fail("empty batch planned on GPU %d", p.GPU)
		return false
	}
	if int(p.GPU) >= len(a.gpuLastFinish) {
		a.fail("batch planned on unknown GPU %d", p.GPU)
		return false
	}
	if want := p.ExecAt.Add(m.Occupancy(bs)); p.FinishAt != want {
		a.fail("GPU %d: batch of %d finishes at %v, its profile says %v", p.GPU, bs, p.FinishAt, want)
	}
	if p.ExecAt < now.Add(minLead) {
		a.fail("GPU %d: batch of %d planned at %v starts at %v, before its inputs can arrive (%v)", p.GPU, bs, now, p.ExecAt, now.Add(minLead))
	}
	return true
}

// outcome records how a request of a fault run ended at its frontend, with
// the live load generator's name for the reason of a bad one. A good one
// was answered at respond by a batch of bs that started at started.
func (a *accounting) outcome(id scheduler.RequestID, model int, prio scheduler.Priority, arrival, respond, started scheduler.Time, bs int, o report.Outcome, reason string) {
	a.endID(id)
	if a.tally != nil {
		a.tally.Add(time.Duration(arrival), o, reason)
	}
	good := o == report.OutcomeGood
	if b := a.bucket(arrival); b != nil {
		if good {
			b.Good++
		} else {
			b.Bad++
		}
	}
	if !a.inWindow(arrival) {
		return
	}
	ma := &a.models[model]
	switch o {
	case report.OutcomeGood:
		ma.Good++
		if len(a.w.Models[model].PriorityMix) > 0 {
			ma.AddLevel(prio, 0, 1)
		}
		ma.Latency.Record(respond.Sub(arrival))
		ma.Queueing.Record(started.Sub(arrival))
		ma.BatchWeighted += uint64(bs)
		return
	case report.OutcomeLate:
		ma.Late++
	case report.OutcomeDropped:
		ma.Dropped++
	case report.OutcomeFailed:
		ma.Failed++
	}
	ma.AddReason(reason, 1)
}

// ran records a batch of bs requests of model that started at started.
func (a *accounting) ran(model int, bs int, started scheduler.Time) {
	if !a.inWindow(started) {
		return
	}
	a.models[model].AddBatch(bs, 1)
}

// busy records GPU g working for model over [from, to), in a fault run.
func (a *accounting) busy(model int, g scheduler.GPUID, from, to scheduler.Time) {
	if to > from {
		a.models[model].Busy += a.addBusy(g, from, to)
	}
}

// addBusy adds a GPU's busy interval to the window and the time series, and
// returns the part of it inside the window.
func (a *accounting) addBusy(g scheduler.GPUID, from, to scheduler.Time) (inWindow time.Duration) {
	lo, hi := scheduler.MaxTime(from, a.winStart), scheduler.MinTime(to, a.winEnd)
	if hi > lo {
		inWindow = hi.Sub(lo)
		a.gpuBusy[g] += inWindow
	}
	for t := from; t < to; {
		i := int(time.Duration(t) / a.interval)
		if i >= len(a.series) {
			break
		}
		end := scheduler.MinTime(to, scheduler.Time(time.Duration(i+1)*a.interval))
		a.series[i].Busy += end.Sub(t)
		t = end
	}
	return inWindow
}

// check verifies that every issued request ended.
func (a *accounting) check() error {
	if a.err != nil {
		return a.err
	}
	if a.endedCount != a.issued {
		return fmt.Errorf("sim: oracle: %d requests issued but %d ended", a.issued, a.endedCount)
	}
	return nil
}

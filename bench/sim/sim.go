// Package sim is Symphony's discrete-event simulator: the scheduler's own
// ModelCore and RankCore code, driven by virtual time, with emulated GPUs
// that take exactly ℓ(b) per batch and an oracle that fails the run on any
// impossible schedule. A run is a pure function of the workload: the same
// file and seed give the same report, byte for byte.
package sim

import (
	"fmt"
	"time"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/idheap"
)

// engine is a scheduler under simulation. The simulator calls arrive for
// each request and wake whenever the virtual clock reaches wakeAt; the
// engine reports plans and drops to the accounting.
type engine interface {
	arrive(now scheduler.Time, model int, req scheduler.Request)
	wakeAt() scheduler.Time
	wake(now scheduler.Time)
}

// Options tune a run without changing its result.
type Options struct {
	// Progress, when set, is called now and then with the fraction of the
	// run done, for long runs on a terminal.
	Progress func(done float64)
}

// Run simulates the workload and returns its report, or an error if the
// workload is invalid or the scheduler broke an oracle rule.
func Run(w *workload.Workload, opts Options) (*report.Report, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	interval := w.AutoscaleWindow
	if interval <= 0 {
		interval = time.Second
	}
	acct := newAccounting(w, interval)
	var eng engine
	var err error
	switch w.Policy {
	case scheduler.PolicyNexus:
		eng, err = newNexusEngine(w, acct)
	default:
		eng, err = newSymphonyEngine(w, acct)
	}
	if err != nil {
		return nil, err
	}
	end := w.Warmup + w.Duration
	gen := workload.NewGenerator(w, end)
	var events uint64
	for {
		m, ta, ok := gen.Peek()
		te := eng.wakeAt()
		if !ok && te == scheduler.Never {
			break
		}
		if ok && ta <= te {
			gen.Pop()
			eng.arrive(ta, m, acct.newRequest(m, ta))
		} else {
			eng.wake(te)
		}
		if acct.err != nil {
			return nil, acct.err
		}
		events++
		if opts.Progress != nil && events%(1<<20) == 0 && ok {
			opts.Progress(float64(ta) / float64(end))
		}
	}
	if err := acct.check(); err != nil {
		return nil, err
	}
	return acct.build(), nil
}

// symphonyEngine runs the real ModelCores and RankCore. Messages between
// them are delivered at once, in a fixed order, at the current virtual time.
type symphonyEngine struct {
	acct   *accounting
	models []*scheduler.ModelCore
	rank   *scheduler.RankCore
	wakes  *idheap.Heap[int] // models with a wake-up, by WakeAt
	delays scheduler.Delays
	one    [1]scheduler.Request
}

func newSymphonyEngine(w *workload.Workload, acct *accounting) (*symphonyEngine, error) {
	e := &symphonyEngine{acct: acct, delays: w.Network}
	for i := range w.Models {
		mc, err := scheduler.NewModelCore(scheduler.ModelConfig{
			ID: scheduler.ModelID(i), Name: w.Models[i].Name, Profile: w.Models[i].Profile,
			Policy: w.Policy, Schedulable: w.Schedulable, Drop: w.Drop, Delays: w.Network,
		})
		if err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		e.models = append(e.models, mc)
	}
	rank, err := scheduler.NewRankCore(scheduler.RankConfig{
		Models: len(w.Models), GPUs: w.Cluster.GPUs, Policy: w.Policy, Delays: w.Network,
		ScheduleAhead: w.ScheduleAhead,
	})
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	e.rank = rank
	e.wakes = idheap.New(len(e.models), func(a, b int) bool {
		ta, tb := e.models[a].WakeAt(), e.models[b].WakeAt()
		return ta < tb || ta == tb && a < b
	})
	return e, nil
}

func (e *symphonyEngine) arrive(now scheduler.Time, model int, req scheduler.Request) {
	e.one[0] = req
	e.handle(now, model, e.models[model].Enqueue(now, e.one[:]))
	e.wake(now)
}

func (e *symphonyEngine) wakeAt() scheduler.Time {
	t := e.rank.WakeAt()
	if e.wakes.Len() > 0 {
		t = scheduler.MinTime(t, e.models[e.wakes.Top()].WakeAt())
	}
	return t
}

func (e *symphonyEngine) wake(now scheduler.Time) {
	for {
		progressed := false
		for e.wakes.Len() > 0 {
			m := e.wakes.Top()
			if e.models[m].WakeAt() > now {
				break
			}
			e.handle(now, m, e.models[m].Tick(now))
			progressed = true
		}
		if e.rank.WakeAt() <= now {
			for _, g := range e.rank.Tick(now) {
				e.handle(now, int(g.Model), e.models[g.Model].Grant(now, g.GPU, g.FreeAt))
			}
			progressed = true
		}
		if !progressed {
			return
		}
	}
}

// handle carries out one ModelCore output.
func (e *symphonyEngine) handle(now scheduler.Time, model int, out *scheduler.ModelOutput) {
	for i := range out.Drops {
		e.acct.drop(model, &out.Drops[i])
	}
	for i := range out.Plans {
		e.acct.plan(now, model, &out.Plans[i], e.delays.Dispatch(len(out.Plans[i].Requests)))
	}
	if len(out.Returns) > 0 {
		for _, r := range out.Returns {
			e.rank.Return(r)
		}
	} else if out.CandidateChanged {
		e.rank.Update(scheduler.ModelID(model), out.Candidate)
	}
	if e.models[model].WakeAt() == scheduler.Never {
		e.wakes.Remove(model)
	} else {
		e.wakes.Fix(model)
	}
}

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
	wakes  modelWakeHeap
	delays scheduler.Delays
	one    [1]scheduler.Request
}

func newSymphonyEngine(w *workload.Workload, acct *accounting) (*symphonyEngine, error) {
	e := &symphonyEngine{acct: acct, delays: w.Network}
	for i := range w.Models {
		mc, err := scheduler.NewModelCore(scheduler.ModelConfig{
			ID: scheduler.ModelID(i), Name: w.Models[i].Name, Profile: w.Models[i].Profile,
			Policy: w.Policy, Schedulable: w.Schedulable, Delays: w.Network,
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
	e.wakes.init(e.models)
	return e, nil
}

func (e *symphonyEngine) arrive(now scheduler.Time, model int, req scheduler.Request) {
	e.one[0] = req
	e.handle(now, model, e.models[model].Enqueue(now, e.one[:]))
	e.wake(now)
}

func (e *symphonyEngine) wakeAt() scheduler.Time {
	t := e.rank.WakeAt()
	if e.wakes.len() > 0 {
		t = scheduler.MinTime(t, e.models[e.wakes.top()].WakeAt())
	}
	return t
}

func (e *symphonyEngine) wake(now scheduler.Time) {
	for {
		progressed := false
		for e.wakes.len() > 0 {
			m := e.wakes.top()
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
	e.wakes.fix(model)
}

// modelWakeHeap orders models by WakeAt.
type modelWakeHeap struct {
	models []*scheduler.ModelCore
	ids    []int
	pos    []int
}

func (h *modelWakeHeap) init(models []*scheduler.ModelCore) {
	h.models = models
	h.pos = make([]int, len(models))
	for i := range models {
		h.pos[i] = -1
	}
}

func (h *modelWakeHeap) len() int { return len(h.ids) }
func (h *modelWakeHeap) top() int { return h.ids[0] }
func (h *modelWakeHeap) less(i, j int) bool {
	a, b := h.models[h.ids[i]].WakeAt(), h.models[h.ids[j]].WakeAt()
	if a != b {
		return a < b
	}
	return h.ids[i] < h.ids[j]
}
func (h *modelWakeHeap) swap(i, j int) {
	h.ids[i], h.ids[j] = h.ids[j], h.ids[i]
	h.pos[h.ids[i]], h.pos[h.ids[j]] = i, j
}

// fix puts model m where its WakeAt belongs, or out of the heap if Never.
func (h *modelWakeHeap) fix(m int) {
	i := h.pos[m]
	never := h.models[m].WakeAt() == scheduler.Never
	switch {
	case i < 0 && never:
		return
	case i < 0:
		h.ids = append(h.ids, m)
		i = len(h.ids) - 1
		h.pos[m] = i
	case never:
		last := len(h.ids) - 1
		h.swap(i, last)
		h.ids = h.ids[:last]
		h.pos[m] = -1
		if i == last {
			return
		}
	}
	h.up(i)
	h.down(i)
}

func (h *modelWakeHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *modelWakeHeap) down(i int) {
	n := len(h.ids)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && h.less(r, l) {
			c = r
		}
		if !h.less(c, i) {
			return
		}
		h.swap(i, c)
		i = c
	}
}

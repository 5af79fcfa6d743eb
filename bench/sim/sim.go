// Package sim is Symphony's discrete-event simulator: the scheduler's own
// ModelCore and RankCore code, driven by virtual time, with emulated GPUs
// that take exactly ℓ(b) per batch and an oracle that fails the run on any
// impossible schedule. A run is a pure function of the workload: the same
// file and seed give the same report, byte for byte.
//
// A workload with a fault scenario runs on a model of the live cluster's
// processes instead (cluster.go): the same cores, plus the scheduler's
// gpuwatch.Watcher, backends whose GPUs follow their real timelines, and
// the load's frontend, each of which the faults can kill, stall, drain,
// restart or cut off.
package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/idheap"
	"github.com/symphony-serving/symphony/scheduler/profile"
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
	if len(w.Faults) > 0 {
		return runCluster(w, opts)
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
		eng, err = newSymphonyEngine(w, acct, acct, false)
	}
	if err != nil {
		return nil, err
	}
	if err := drive(w, eng, acct, opts); err != nil {
		return nil, err
	}
	se, _ := eng.(*symphonyEngine)
	if se != nil && se.epoch != nil {
		se.epoch.advance(scheduler.Time(w.Warmup + w.Duration)) // GPUs in use to the end
	}
	rep := acct.build()
	if se != nil && se.epoch != nil {
		rep.Epochs = se.epoch.records
	}
	return rep, nil
}

// occupancyProfile is the profile a model's core plans with: its own, or,
// for a model that runs several batches at once, how long a batch holds
// its GPU (workload.Model.Occupancy).
func occupancyProfile(m *workload.Model) (profile.Profile, error) {
	if m.Concurrency <= 1 {
		return m.Profile, nil
	}
	lat := make([]time.Duration, m.Profile.MaxBatch())
	for b := range lat {
		lat[b] = m.Occupancy(b + 1)
	}
	return profile.Table(lat)
}

// drive runs the workload's arrivals through eng until both are done, and
// checks that every request ended.
func drive(w *workload.Workload, eng engine, acct *accounting, opts Options) error {
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
			return acct.err
		}
		events++
		if opts.Progress != nil && events%(1<<20) == 0 && ok {
			opts.Progress(float64(ta) / float64(end))
		}
	}
	return acct.check()
}

// sink receives the cores' decisions, as rt.Sink does in the live
// scheduler: the accounting's instant GPUs in a fault-free run, the model
// of the cluster's processes under a fault scenario (cluster.go).
type sink interface {
	// planned sends a plan to its GPU and returns when the GPU is expected
	// to be free after it (rt.Sink.Planned). minLead is the least time the
	// batch's inputs need to reach the GPU after the plan is made.
	planned(now scheduler.Time, model int, p *scheduler.BatchPlan, minLead time.Duration) scheduler.Time
	dropped(now scheduler.Time, model int, d *scheduler.Drop)
}

// symphonyEngine runs the real ModelCores and RankCores: one rank loop, or,
// with an epoch job, one per part (sub-cluster). Messages between them are
// delivered at once, in a fixed order, at the current virtual time.
type symphonyEngine struct {
	acct   *accounting
	sink   sink
	models []*scheduler.ModelCore
	ranks  []*scheduler.RankCore
	partOf []int              // the rank that serves each model
	wakes  *idheap.Heap[int]  // models with a wake-up, by WakeAt
	delays []scheduler.Delays // per model: the network's, with its input size
	epoch  *epochJob          // nil without epochs
	cloud  *cloudJob          // nil outside a cloud run (RunCloud)
	one    [1]scheduler.Request
}

// newSymphonyEngine builds the cores for w. Their decisions go to out; with
// offline set, every GPU starts offline, to be brought in with EnableGPU as
// its backend registers.
func newSymphonyEngine(w *workload.Workload, acct *accounting, out sink, offline bool) (*symphonyEngine, error) {
	e := &symphonyEngine{acct: acct, sink: out, partOf: make([]int, len(w.Models))}
	for i := range w.Models {
		wm := &w.Models[i]
		d := w.Network.ForInput(wm.InputBytes)
		e.delays = append(e.delays, d)
		prof, err := occupancyProfile(wm)
		if err != nil {
			return nil, fmt.Errorf("sim: model %q: %w", wm.Name, err)
		}
		mc, err := scheduler.NewModelCore(scheduler.ModelConfig{
			ID: scheduler.ModelID(i), Name: wm.Name, Profile: prof,
			Policy: w.Policy, Schedulable: w.Schedulable, Drop: w.Drop, Delays: d,
		})
		if err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		if wm.Concurrency > 1 {
			// The core holds the GPU for ℓ(b)/e and plans each deadline
			// with e times that: the batch's own run.
			mc.SetTailFactor(0, float64(wm.Concurrency))
		}
		e.models = append(e.models, mc)
	}
	parts := 1
	switch {
	case w.Epoch != nil:
		parts = w.Epoch.Parts
	case w.Pinned():
		// A rank loop per GPU type, each with its type's GPUs.
		parts = len(w.Cluster.GPUTypes)
		for i := range w.Models {
			e.partOf[i] = slices.IndexFunc(w.Cluster.GPUTypes, func(g workload.GPUType) bool { return g.Name == w.Models[i].GPUType })
		}
	}
	for part := range parts {
		rank, err := scheduler.NewRankCore(scheduler.RankConfig{
			Models: len(w.Models), GPUs: w.Cluster.GPUs, Policy: w.Policy, Delays: w.Network, ModelDelays: e.delays,
			ScheduleAhead: w.ScheduleAhead, StartOffline: w.Epoch != nil || offline || w.Pinned(),
		})
		if err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		if w.Pinned() && !offline {
			first, n := w.Cluster.GPUsOfType(w.Cluster.GPUTypes[part].Name)
			for g := first; g < first+n; g++ {
				rank.EnableGPU(scheduler.GPUID(g), scheduler.Past)
			}
		}
		e.ranks = append(e.ranks, rank)
	}
	e.wakes = idheap.New(len(e.models), func(a, b int) bool {
		ta, tb := e.models[a].WakeAt(), e.models[b].WakeAt()
		return ta < tb || ta == tb && a < b
	})
	if w.Epoch != nil {
		job, err := newEpochJob(w, e)
		if err != nil {
			return nil, err
		}
		e.epoch = job
		// The first epoch, before any arrival, places the models and sizes
		// the parts on the declared rates.
		if err := job.run(0); err != nil {
			return nil, fmt.Errorf("sim: epoch job: %w", err)
		}
	}
	return e, nil
}

func (e *symphonyEngine) arrive(now scheduler.Time, model int, req scheduler.Request) {
	if e.epoch != nil {
		e.epoch.arrived(now, model)
	}
	if e.cloud != nil && !e.cloud.arrive(now, model, &req) {
		e.wake(now)
		return
	}
	e.one[0] = req
	e.handle(now, model, e.models[model].Enqueue(now, e.one[:]))
	e.wake(now)
}

func (e *symphonyEngine) wakeAt() scheduler.Time {
	t := scheduler.Never
	for _, r := range e.ranks {
		t = scheduler.MinTime(t, r.WakeAt())
	}
	if e.wakes.Len() > 0 {
		t = scheduler.MinTime(t, e.models[e.wakes.Top()].WakeAt())
	}
	if e.epoch != nil {
		t = scheduler.MinTime(t, e.epoch.wakeAt())
	}
	if e.cloud != nil {
		t = scheduler.MinTime(t, e.cloud.wakeAt())
	}
	return t
}

func (e *symphonyEngine) wake(now scheduler.Time) {
	if e.epoch != nil && e.epoch.wakeAt() <= now {
		// Between events no grant is outstanding, so the job may move
		// models and GPUs between ranks.
		if err := e.epoch.run(now); err != nil {
			e.acct.fail("epoch job: %v", err)
			return
		}
	}
	if e.cloud != nil && e.cloud.wakeAt() <= now {
		if err := e.cloud.run(now); err != nil {
			e.acct.fail("cloud: %v", err)
			return
		}
	}
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
		for _, r := range e.ranks {
			if r.WakeAt() > now {
				continue
			}
			for _, g := range r.Tick(now) {
				e.handle(now, int(g.Model), e.models[g.Model].Grant(now, g))
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
		e.sink.dropped(now, model, &out.Drops[i])
	}
	for i := range out.Plans {
		p := &out.Plans[i]
		freeAt := e.sink.planned(now, model, p, e.delays[model].Dispatch(len(p.Requests)))
		// As the live shell does (scheduler/rt): the rank gets the GPU
		// back from when the sink expects it to be really free.
		for j := range out.Returns {
			if r := &out.Returns[j]; r.Used && r.GPU == p.GPU {
				r.FreeAt = scheduler.MaxTime(r.FreeAt, freeAt)
			}
		}
	}
	if e.epoch != nil {
		e.epoch.observe(model, out)
	}
	if e.cloud != nil {
		e.cloud.observe(model, out)
	}
	rank := e.ranks[e.partOf[model]]
	if len(out.Returns) > 0 {
		for _, r := range out.Returns {
			rank.Return(r)
		}
	} else if out.CandidateChanged {
		rank.Update(scheduler.ModelID(model), out.Candidate)
	}
	if e.models[model].WakeAt() == scheduler.Never {
		e.wakes.Remove(model)
	} else {
		e.wakes.Fix(model)
	}
}

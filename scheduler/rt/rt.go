// Package rt runs the scheduler cores in real time: one goroutine per
// ModelCore (the paper's ModelThread), one for the RankCore (RankThread),
// Go timers for their wake-ups, and the monotonic clock for time. It holds
// no scheduling logic of its own; the discrete-event simulator drives the
// very same cores with virtual time.
//
// Messages between the goroutines follow the nexuslb design: requests and
// grants are must-deliver (a mutex-guarded batch that the receiver swaps out
// whole, plus a one-slot notify channel), candidates are latest-value (a
// newer candidate overwrites an unread older one).
package rt

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/symphony-serving/symphony/scheduler"
)

// ErrStopped is returned by Submit after Stop.
var ErrStopped = errors.New("rt: scheduler stopped")

// Sink receives the scheduler's decisions. Planned and Dropped are called
// from the goroutine of the model concerned: calls for one model never
// overlap, calls for different models may. The plan's Requests slice is only
// valid during the call. Implementations must not block for long: they run
// on the scheduling path.
type Sink interface {
	// Planned sends a plan to its GPU and returns when the GPU is expected
	// to be really free after it: p.FinishAt, or later where the sink
	// knows that the GPU runs behind its plans (scheduler/gpuwatch). The
	// rank loop gets the GPU back from then.
	Planned(p *scheduler.BatchPlan) scheduler.Time
	Dropped(model scheduler.ModelID, d *scheduler.Drop)
}

// Config configures a real-time scheduler.
type Config struct {
	// Models are the served models; Models[i].ID must be i.
	Models []scheduler.ModelConfig
	// Rank configures the rank loop; its Models must equal len(Models).
	Rank scheduler.RankConfig
	// WakeupSlack is how late a timer or a goroutine hand-off may run
	// here. The rank loop's timers fire that much early (RankConfig.Lead),
	// so that a batch held until sched_at, which leaves only α of slack,
	// is still granted in time. 0 measures it: the rank loop leads by the
	// median lateness of its own recent timers (see wakeupMeter); a
	// negative value means none.
	WakeupSlack time.Duration
}

// Scheduler is a running real-time scheduler.
type Scheduler struct {
	epoch  time.Time
	models []*modelThread
	rank   *rankThread
	sink   Sink
	wg     sync.WaitGroup
	stop   chan struct{}
	once   sync.Once
}

// Start builds the cores and starts their goroutines.
func Start(cfg Config, sink Sink) (*Scheduler, error) {
	if len(cfg.Models) != cfg.Rank.Models {
		return nil, fmt.Errorf("rt: %d model configs for a rank of %d models", len(cfg.Models), cfg.Rank.Models)
	}
	measured := cfg.WakeupSlack == 0
	if slack := cfg.WakeupSlack; slack > 0 {
		cfg.Rank.Lead += slack
	}
	s := &Scheduler{epoch: time.Now(), sink: sink, stop: make(chan struct{})}
	rc, err := scheduler.NewRankCore(cfg.Rank)
	if err != nil {
		return nil, err
	}
	s.rank = &rankThread{s: s, core: rc, notify: make(chan struct{}, 1), baseLead: cfg.Rank.Lead}
	if measured {
		s.rank.meter = &wakeupMeter{}
	}
	s.rank.mailbox.latest = make([]scheduler.Candidate, len(cfg.Models))
	s.rank.mailbox.dirty = make([]bool, len(cfg.Models))
	for i, mc := range cfg.Models {
		if int(mc.ID) != i {
			return nil, fmt.Errorf("rt: model %q has ID %d at index %d", mc.Name, mc.ID, i)
		}
		core, err := scheduler.NewModelCore(mc)
		if err != nil {
			return nil, err
		}
		s.models = append(s.models, &modelThread{s: s, id: mc.ID, core: core, notify: make(chan struct{}, 1)})
	}
	s.wg.Add(len(s.models) + 1)
	go s.rank.run()
	for _, m := range s.models {
		go m.run()
	}
	return s, nil
}

// Epoch is the wall-clock time of the scheduler's time 0.
func (s *Scheduler) Epoch() time.Time { return s.epoch }

// Now is the scheduler's current time, the clock every request's Arrival
// and Deadline must use.
func (s *Scheduler) Now() scheduler.Time { return scheduler.Time(time.Since(s.epoch)) }

// Time converts a wall-clock time to the scheduler's time.
func (s *Scheduler) Time(t time.Time) scheduler.Time { return scheduler.Time(t.Sub(s.epoch)) }

// Submit hands requests for one model to its ModelThread. It copies reqs,
// so the caller may reuse the slice. After Stop it returns ErrStopped and the
// requests are not the scheduler's: the caller must end them itself.
func (s *Scheduler) Submit(model scheduler.ModelID, reqs []scheduler.Request) error {
	if int(model) >= len(s.models) {
		return fmt.Errorf("rt: unknown model %d", model)
	}
	for i := range reqs {
		if d := reqs[i].Deadline; d == scheduler.Never || d == scheduler.Past {
			return fmt.Errorf("rt: request %d has no deadline", reqs[i].ID)
		}
	}
	m := s.models[model]
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrStopped
	}
	m.inbox = append(m.inbox, reqs...)
	m.mu.Unlock()
	notify(m.notify)
	return nil
}

// SetTailFactor hands a model's ModelThread the factor by which its batches
// overrun their profile at the tail (ModelCore.SetTailFactor). It is
// latest-value: a factor not yet taken is replaced by a newer one.
func (s *Scheduler) SetTailFactor(model scheduler.ModelID, f float64) error {
	if int(model) >= len(s.models) {
		return fmt.Errorf("rt: unknown model %d", model)
	}
	if !(f > 0) {
		return fmt.Errorf("rt: tail factor %v of model %d is not positive", f, model)
	}
	m := s.models[model]
	m.mu.Lock()
	m.tail = f
	m.mu.Unlock()
	notify(m.notify)
	return nil
}

// Stop stops every goroutine and ends every queued request with
// DropShutdown, so that no request is lost. It returns when all is done.
func (s *Scheduler) Stop() {
	s.once.Do(func() { close(s.stop) })
	s.wg.Wait()
}

// RankStats reports how busy the rank loop was: the time it spent working
// and the time since it started.
func (s *Scheduler) RankStats() (busy, wall time.Duration) {
	s.rank.statsMu.Lock()
	defer s.rank.statsMu.Unlock()
	return s.rank.busy, time.Since(s.epoch)
}

func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// resetTimer arms t for the scheduler time at, or stops it for Never.
func (s *Scheduler) resetTimer(t *time.Timer, at scheduler.Time) {
	if at == scheduler.Never {
		t.Stop()
		return
	}
	d := at.Sub(s.Now())
	if d < 0 {
		d = 0
	}
	t.Reset(d)
}

type modelThread struct {
	s      *Scheduler
	id     scheduler.ModelID
	core   *scheduler.ModelCore
	notify chan struct{}

	mu     sync.Mutex
	inbox  []scheduler.Request
	grants []scheduler.Grant
	closed bool
	// tail is a tail factor to hand the core (SetTailFactor), latest
	// value; 0 when none is waiting.
	tail float64
}

func (m *modelThread) run() {
	defer m.s.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var reqs []scheduler.Request
	var grants []scheduler.Grant
	for {
		stopping := false
		select {
		case <-m.notify:
		case <-timer.C:
		case <-m.s.stop:
			stopping = true
		}
		m.mu.Lock()
		reqs, m.inbox = m.inbox, reqs[:0]
		grants, m.grants = m.grants, grants[:0]
		tail := m.tail
		m.tail = 0
		m.closed = stopping
		m.mu.Unlock()
		if tail != 0 {
			m.handle(m.core.SetTailFactor(m.s.Now(), tail))
		}
		// Read the clock before each core call: the sink callbacks of the
		// previous one may have taken a while, and a grant planned with a
		// stale time could start before its inputs can arrive.
		if len(reqs) > 0 {
			m.handle(m.core.Enqueue(m.s.Now(), reqs))
		}
		for _, g := range grants {
			m.handle(m.core.Grant(m.s.Now(), g))
		}
		if stopping {
			m.handle(m.core.DropAll(m.s.Now(), scheduler.DropShutdown))
			timer.Stop()
			return
		}
		if now := m.s.Now(); m.core.WakeAt() <= now {
			m.handle(m.core.Tick(now))
		}
		m.s.resetTimer(timer, m.core.WakeAt())
	}
}

func (m *modelThread) handle(out *scheduler.ModelOutput) {
	for i := range out.Drops {
		m.s.sink.Dropped(m.id, &out.Drops[i])
	}
	for i := range out.Plans {
		p := &out.Plans[i]
		freeAt := m.s.sink.Planned(p)
		for j := range out.Returns {
			if r := &out.Returns[j]; r.Used && r.GPU == p.GPU {
				r.FreeAt = scheduler.MaxTime(r.FreeAt, freeAt)
			}
		}
	}
	if len(out.Returns) > 0 {
		m.s.rank.sendReturns(out.Returns)
	} else if out.CandidateChanged {
		m.s.rank.sendCandidate(m.id, out.Candidate)
	}
}

type rankThread struct {
	s      *Scheduler
	core   *scheduler.RankCore
	notify chan struct{}

	mailbox struct {
		sync.Mutex
		latest  []scheduler.Candidate // latest-value, by model
		dirty   []bool
		changed []scheduler.ModelID
		returns []scheduler.GPUReturn // must-deliver
		gpuOps  []gpuOp               // must-deliver
	}
	statsMu sync.Mutex
	busy    time.Duration
	// meter measures how late the loop's timer fires, to lead by it; nil
	// with a fixed WakeupSlack. baseLead is the configured lead.
	meter    *wakeupMeter
	baseLead time.Duration
	lead     atomic.Int64 // the lead in use, for Lead()
}

// wakeupMeter estimates how late the rank loop's timer fires: the median
// of its last wakeupSamples firings. Leading by it forms batches as late
// as the timers allow, so that a work-conserving batch is not formed a
// millisecond before its GPU frees and does not miss the requests that
// arrive in between; a timer that fires later than that costs little,
// since the ModelCore plans from the real time of the grant. The fixed 1ms
// lead it replaced, and what each lead cost, are in docs/benchmarks.md
// ("How the rank loop's wake-up lead was chosen", a dated log entry).
type wakeupMeter struct {
	samples [wakeupSamples]time.Duration
	n       int
	sorted  [wakeupSamples]time.Duration
}

// wakeupSamples is how many recent firings the median is taken over; the
// lead is recomputed every wakeupSamples/4 firings.
const wakeupSamples = 256

// initialLead is the measured lead's value until the first measurement
// (wakeupSamples/4 timer firings): about the p90 timer lateness of a loaded
// 2-core machine (docs/benchmarks.md, "How the rank loop's wake-up lead was
// chosen").
const initialLead = time.Millisecond

// maxMeasuredLead caps the measured lead: a machine whose timers are
// later than this is too loaded for any lead to help.
const maxMeasuredLead = 2 * time.Millisecond

// observe records one firing's lateness and returns the new median, and
// whether it was recomputed.
func (w *wakeupMeter) observe(late time.Duration) (time.Duration, bool) {
	w.samples[w.n%wakeupSamples] = max(late, 0)
	w.n++
	if w.n%(wakeupSamples/4) != 0 {
		return 0, false
	}
	k := min(w.n, wakeupSamples)
	copy(w.sorted[:k], w.samples[:k])
	slices.Sort(w.sorted[:k])
	return min(w.sorted[k/2], maxMeasuredLead), true
}

// setLead leads the rank loop's timers by the measured lead on top of the
// configured one, and publishes it for Lead.
func (r *rankThread) setLead(measured time.Duration) {
	r.core.SetLead(r.baseLead + measured)
	r.lead.Store(int64(r.baseLead + measured))
}

func (r *rankThread) sendCandidate(m scheduler.ModelID, c scheduler.Candidate) {
	mb := &r.mailbox
	mb.Lock()
	mb.latest[m] = c
	if !mb.dirty[m] {
		mb.dirty[m] = true
		mb.changed = append(mb.changed, m)
	}
	mb.Unlock()
	notify(r.notify)
}

func (r *rankThread) sendReturns(rets []scheduler.GPUReturn) {
	mb := &r.mailbox
	mb.Lock()
	mb.returns = append(mb.returns, rets...)
	mb.Unlock()
	notify(r.notify)
}

// gpuOp is a change to a GPU from outside the scheduler: a backend came or
// went, or reported when a batch really finished.
type gpuOp struct {
	gpu    scheduler.GPUID
	kind   gpuOpKind
	freeAt scheduler.Time
}

type gpuOpKind uint8

const (
	gpuEnable gpuOpKind = iota
	gpuDisable
	gpuCorrect
)

func (r *rankThread) sendGPUOp(op gpuOp) {
	mb := &r.mailbox
	mb.Lock()
	mb.gpuOps = append(mb.gpuOps, op)
	mb.Unlock()
	notify(r.notify)
}

// Lead is how early the rank loop's timers fire now: the configured
// WakeupSlack, or the measured lateness of its timers.
func (s *Scheduler) Lead() time.Duration { return time.Duration(s.rank.lead.Load()) }

// EnableGPU brings a GPU online (RankCore.EnableGPU), free from freeAt.
func (s *Scheduler) EnableGPU(g scheduler.GPUID, freeAt scheduler.Time) {
	s.rank.sendGPUOp(gpuOp{gpu: g, kind: gpuEnable, freeAt: freeAt})
}

// DisableGPU takes a GPU offline (RankCore.DisableGPU).
func (s *Scheduler) DisableGPU(g scheduler.GPUID) {
	s.rank.sendGPUOp(gpuOp{gpu: g, kind: gpuDisable})
}

// CorrectFreeAt reports when a GPU is now expected to be really free
// (RankCore.CorrectFreeAt).
func (s *Scheduler) CorrectFreeAt(g scheduler.GPUID, freeAt scheduler.Time) {
	s.rank.sendGPUOp(gpuOp{gpu: g, kind: gpuCorrect, freeAt: freeAt})
}

func (r *rankThread) run() {
	defer r.s.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var changed []scheduler.ModelID
	var cands []scheduler.Candidate
	var returns []scheduler.GPUReturn
	var ops []gpuOp
	armedFor := scheduler.Never // what the timer was last armed for
	r.lead.Store(int64(r.baseLead))
	if r.meter != nil {
		// Until the first measurement, lead by a guess that suits a
		// loaded machine.
		r.setLead(initialLead)
	}
	for {
		fired := false
		select {
		case <-r.notify:
		case <-timer.C:
			fired = true
		case <-r.s.stop:
			timer.Stop()
			return
		}
		began := time.Now()
		if fired && r.meter != nil {
			if lead, ok := r.meter.observe(r.s.Time(began).Sub(armedFor)); ok {
				r.setLead(lead)
			}
		}
		mb := &r.mailbox
		mb.Lock()
		changed, mb.changed = mb.changed, changed[:0]
		cands = cands[:0]
		for _, m := range changed {
			cands = append(cands, mb.latest[m])
			mb.dirty[m] = false
		}
		returns, mb.returns = mb.returns, returns[:0]
		ops, mb.gpuOps = mb.gpuOps, ops[:0]
		mb.Unlock()
		// GPU changes first: a correction sent before a later plan's
		// return must not override the free time that return brings.
		for _, op := range ops {
			switch op.kind {
			case gpuEnable:
				r.core.EnableGPU(op.gpu, op.freeAt)
			case gpuDisable:
				r.core.DisableGPU(op.gpu)
			case gpuCorrect:
				r.core.CorrectFreeAt(op.gpu, op.freeAt)
			}
		}
		for _, ret := range returns {
			r.core.Return(ret)
		}
		for i, m := range changed {
			r.core.Update(m, cands[i])
		}
		now := r.s.Now()
		if r.core.WakeAt() <= now {
			for _, g := range r.core.Tick(now) {
				mt := r.s.models[g.Model]
				mt.mu.Lock()
				mt.grants = append(mt.grants, g)
				mt.mu.Unlock()
				notify(mt.notify)
			}
		}
		armedFor = r.core.WakeAt()
		r.s.resetTimer(timer, armedFor)
		r.statsMu.Lock()
		r.busy += time.Since(began)
		r.statsMu.Unlock()
	}
}

// Package gpuwatch follows what each GPU really does, as opposed to what the
// scheduler planned: the plans sent to it and not yet reported, how late it
// runs, and whether its backend still answers.
//
// The RankCore plans every GPU as if batches started at their ExecAt and
// took exactly ℓ(b). A real GPU does not: its backend wakes up a little
// late, a batch overruns its profile, a batch waits for the one before it.
// Under load a GPU runs its plans back to back, so each batch inherits the
// lateness of the one before it, and a scheduler that corrects a GPU's free
// time only from its latest plan never corrects it at all (a newer plan is
// always out). Lateness then grows without bound, batches finish after
// their deadlines, and goodput collapses. The Watcher replays each GPU's
// outstanding plans from its last real finish and the GPU's measured
// slip, so that the scheduler grants every GPU from when it will really be
// free; a GPU that keeps running late is free later, and so gets fewer
// grants, in proportion to its slip.
//
// It also finds GPUs that stopped: a plan overdue by Config.StallAfter past
// its expected finish, or a backend silent for as long (backends send
// heartbeats), takes the GPUs out of rotation and retires their plans; a
// report from the GPU (or, for a silent backend, any message) brings them
// back.
//
// Like the scheduler cores, a Watcher is a deterministic state machine: it
// never reads a clock or starts a goroutine; time comes in as an argument
// and decisions come back as data. It is not safe for concurrent use.
package gpuwatch

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/idheap"
)

// BackendID names a backend within one Watcher. The caller assigns it and
// must not reuse one while the backend is attached.
type BackendID uint32

// Config configures a Watcher.
type Config struct {
	// GPUs is the number of GPU IDs (0..GPUs-1) the Watcher can follow.
	GPUs int
	// StallAfter is how long past its expected finish a plan may stay
	// unreported, and how long a backend may stay silent, before its
	// GPUs leave rotation. It must be longer than the backends'
	// heartbeat period, and long enough that a loaded machine's hiccups
	// do not count as stalls.
	StallAfter time.Duration
	// SlipWeight is the weight of each new measurement in a GPU's slip
	// (an exponentially weighted moving average): how late, per batch,
	// the GPU runs beyond what its plan allowed. 0 means DefaultSlipWeight.
	SlipWeight float64
}

// DefaultStallAfter is Config.StallAfter's default: the paper's models
// have SLOs of tens of milliseconds, so a GPU silent this long has lost
// every request it held, while a loaded machine's hiccups (a few
// milliseconds) stay far below it.
const DefaultStallAfter = 100 * time.Millisecond

// DefaultSlipWeight makes a GPU's slip follow roughly its last ten batches.
const DefaultSlipWeight = 0.1

// Default returns a configuration for gpus GPUs with the defaults.
func Default(gpus int) Config {
	return Config{GPUs: gpus, StallAfter: DefaultStallAfter, SlipWeight: DefaultSlipWeight}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.GPUs < 1:
		return fmt.Errorf("gpuwatch: need at least one GPU, have %d", c.GPUs)
	case c.StallAfter <= 0:
		return errors.New("gpuwatch: StallAfter must be positive")
	case c.SlipWeight < 0 || c.SlipWeight > 1:
		return fmt.Errorf("gpuwatch: SlipWeight %v not in [0, 1]", c.SlipWeight)
	}
	return nil
}

// Why says why a GPU left rotation.
type Why uint8

const (
	// WhyOverdue: a plan on the GPU is overdue by StallAfter.
	WhyOverdue Why = iota + 1
	// WhySilent: the GPU's backend sent nothing for StallAfter.
	WhySilent
)

// String names the cause, for logs and error details.
func (w Why) String() string {
	switch w {
	case WhyOverdue:
		return "plan overdue"
	case WhySilent:
		return "backend silent"
	}
	return fmt.Sprintf("Why(%d)", uint8(w))
}

// Stall is a GPU that left rotation. Retired are the plans it held, in the
// order they were sent: the Watcher has forgotten them, and the caller
// must end their requests (a report of one that comes later anyway is
// ignored, and brings the GPU back).
type Stall struct {
	GPU     scheduler.GPUID
	Backend BackendID
	Why     Why
	// Since is the moment the GPU was last known to make progress: the
	// overdue plan's expected finish, or the backend's last message.
	Since   scheduler.Time
	Retired []scheduler.PlanID
}

type plan struct {
	id     scheduler.PlanID
	execAt scheduler.Time
	dur    time.Duration
}

type gpuState struct {
	backend  BackendID
	attached bool
	stalled  bool
	stallWhy Why
	// plans were sent and not yet reported, in the order sent: the order
	// the backend runs them in.
	plans []plan
	// lastFinish is when the GPU last became free of a reported plan.
	lastFinish scheduler.Time
	// slip is how much longer than planned, per batch, the GPU runs.
	slip time.Duration
	// due is when the GPU stalls unless something is heard first: its
	// backend's silence limit or its first plan's overdue limit,
	// whichever comes first; Never when it is not watched.
	due scheduler.Time
}

type backendState struct {
	gpus      []scheduler.GPUID
	lastHeard scheduler.Time
	silent    bool
}

// Watcher follows every GPU's real timeline. See the package comment.
type Watcher struct {
	cfg Config
	// grace is when plans may fall overdue again after a Resume.
	grace    scheduler.Time
	gpus     []gpuState
	dues     *idheap.Heap[scheduler.GPUID] // watched GPUs by due
	backends map[BackendID]*backendState
	stalls   []Stall
}

// New returns a Watcher with no backend attached.
func New(cfg Config) (*Watcher, error) {
	if cfg.SlipWeight == 0 {
		cfg.SlipWeight = DefaultSlipWeight
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := &Watcher{cfg: cfg, gpus: make([]gpuState, cfg.GPUs), backends: map[BackendID]*backendState{}, grace: scheduler.Past}
	w.dues = idheap.New(cfg.GPUs, func(a, b scheduler.GPUID) bool {
		da, db := w.gpus[a].due, w.gpus[b].due
		return da < db || da == db && a < b
	})
	return w, nil
}

// Attach starts following backend b, which owns gpus, heard from at now.
// Its GPUs start free, with no slip.
func (w *Watcher) Attach(now scheduler.Time, b BackendID, gpus []scheduler.GPUID) {
	if _, ok := w.backends[b]; ok {
		panic(fmt.Sprintf("gpuwatch: backend %d attached twice", b))
	}
	w.backends[b] = &backendState{gpus: slices.Clone(gpus), lastHeard: now}
	for _, g := range gpus {
		w.gpus[g] = gpuState{backend: b, attached: true, lastFinish: scheduler.Past}
		w.refresh(g)
	}
}

// Detach stops following backend b (it left). Its plans are forgotten: the
// caller ends their requests.
func (w *Watcher) Detach(b BackendID) {
	st, ok := w.backends[b]
	if !ok {
		return
	}
	delete(w.backends, b)
	for _, g := range st.gpus {
		w.gpus[g] = gpuState{}
		w.refresh(g)
	}
}

// Sent records plan id, sent to GPU g to start at execAt and run for dur
// (ℓ of its batch). It returns when g is expected to be really free after
// it: the plan's own finish, or later where the GPU runs behind its plans.
func (w *Watcher) Sent(g scheduler.GPUID, id scheduler.PlanID, execAt scheduler.Time, dur time.Duration) scheduler.Time {
	st := &w.gpus[g]
	if !st.attached {
		return execAt.Add(dur)
	}
	st.plans = append(st.plans, plan{id: id, execAt: execAt, dur: dur})
	w.refresh(g)
	return w.freeAt(st)
}

// Report is a backend's account of one plan on one GPU.
type Report struct {
	GPU  scheduler.GPUID
	Plan scheduler.PlanID
	// Ran is how long the batch ran, as planned for the requests that
	// really ran (ℓ of their number); 0 if none did, because the GPU
	// skipped the plan or failed it before running.
	Ran time.Duration
	// Started and Finished are when the batch ran. For a plan that did
	// not run, Finished is when the GPU gave it up (it was free from
	// then), or Past if the plan never reached the GPU's queue.
	Started, Finished scheduler.Time
}

// Finished records a report. It returns when the GPU is now expected to be
// really free, whether that changed anything (ok is false for an unknown or
// detached GPU, or a report that says nothing new), and whether the report
// brought a stalled GPU back into rotation.
func (w *Watcher) Finished(now scheduler.Time, r Report) (freeAt scheduler.Time, ok, recovered bool) {
	if int(r.GPU) >= len(w.gpus) {
		return 0, false, false
	}
	st := &w.gpus[r.GPU]
	if !st.attached {
		return 0, false, false
	}
	w.heard(now, st.backend)
	recovered = w.recover(r.GPU)
	ok = recovered
	switch i := slices.IndexFunc(st.plans, func(p plan) bool { return p.id == r.Plan }); {
	case i < 0:
		// A plan retired at a stall, reported now that the GPU moves
		// again: only its finish says something.
	case r.Finished == scheduler.Past:
		// It never reached the GPU's queue (the backend refused it at
		// once): the plans around it are unaffected.
		st.plans = slices.Delete(st.plans, i, i+1)
		ok = true
	default:
		// Only this plan: an earlier one not yet reported (which a
		// backend that reports in order never leaves) stays, so that
		// it falls overdue and is retired rather than forgotten.
		st.plans = slices.Delete(st.plans, i, i+1)
		if r.Ran > 0 {
			// The GPU's own lateness: how much longer the batch ran
			// than planned. A late start is not counted: the GPU's
			// timeline already carries it (its real finish), and it
			// may be its inputs' fault, not the GPU's.
			late := max(r.Finished.Sub(r.Started)-r.Ran, 0)
			st.slip += time.Duration(w.cfg.SlipWeight * float64(late-st.slip))
		}
		ok = true
	}
	if r.Finished != scheduler.Past && r.Finished > st.lastFinish {
		st.lastFinish = r.Finished
		ok = true
	}
	w.refresh(r.GPU)
	return w.freeAt(st), ok, recovered
}

// freeAt replays the GPU's outstanding plans from its last real finish:
// each starts at its ExecAt or when the one before it really ends, and
// takes its planned time plus the GPU's slip.
func (w *Watcher) freeAt(st *gpuState) scheduler.Time {
	t := st.lastFinish
	for _, p := range st.plans {
		t = scheduler.MaxTime(p.execAt, t).Add(p.dur + st.slip)
	}
	return t
}

// FreeAt is when GPU g is expected to be really free, as Sent and
// Finished last returned it.
func (w *Watcher) FreeAt(g scheduler.GPUID) scheduler.Time { return w.freeAt(&w.gpus[g]) }

// Slip is how late GPU g runs per batch, beyond its plans.
func (w *Watcher) Slip(g scheduler.GPUID) time.Duration { return w.gpus[g].slip }

// Outstanding is the number of plans sent to GPU g and not yet reported.
func (w *Watcher) Outstanding(g scheduler.GPUID) int { return len(w.gpus[g].plans) }

// Stalled reports whether GPU g is out of rotation.
func (w *Watcher) Stalled(g scheduler.GPUID) bool { return w.gpus[g].stalled }

// Heard records a message from backend b (a heartbeat, say). It returns
// the GPUs that this brought back into rotation: those taken out because
// the backend was silent. A GPU taken out for an overdue plan comes back
// only with a report of its own (Finished): its backend answering says
// nothing of a GPU that hangs.
func (w *Watcher) Heard(now scheduler.Time, b BackendID) []scheduler.GPUID {
	bs := w.heard(now, b)
	if bs == nil || !bs.silent {
		return nil
	}
	bs.silent = false
	var back []scheduler.GPUID
	for _, g := range bs.gpus {
		if w.gpus[g].stallWhy == WhySilent && w.recover(g) {
			back = append(back, g)
		}
	}
	return back
}

func (w *Watcher) heard(now scheduler.Time, b BackendID) *backendState {
	bs, ok := w.backends[b]
	if !ok {
		return nil
	}
	if now > bs.lastHeard {
		bs.lastHeard = now
		for _, g := range bs.gpus {
			w.refresh(g)
		}
	}
	return bs
}

// recover brings GPU g back if it was stalled.
func (w *Watcher) recover(g scheduler.GPUID) bool {
	st := &w.gpus[g]
	if !st.stalled {
		return false
	}
	st.stalled, st.stallWhy = false, 0
	// Its old timeline means nothing now: free from now on, as far as the
	// Watcher knows (the next report corrects it).
	st.lastFinish = scheduler.Past
	w.refresh(g)
	return true
}

// refresh recomputes GPU g's due and its place in the heap.
func (w *Watcher) refresh(g scheduler.GPUID) {
	st := &w.gpus[g]
	st.due = scheduler.Never
	if st.attached && !st.stalled {
		if bs := w.backends[st.backend]; bs != nil && !bs.silent {
			st.due = bs.lastHeard.Add(w.cfg.StallAfter)
		}
		if len(st.plans) > 0 {
			st.due = scheduler.MinTime(st.due, scheduler.MaxTime(w.firstFinish(st).Add(w.cfg.StallAfter), w.grace))
		}
	}
	if st.due == scheduler.Never {
		w.dues.Remove(g)
	} else {
		w.dues.Fix(g)
	}
}

// Resume says that the Watcher's own process was paused until now (a long
// garbage collection, a VM pause, SIGSTOP): what it has not heard since
// may sit in its unread sockets. Every backend counts as heard now, and no
// plan falls overdue before StallAfter from now, so that the process's
// own pause is not taken for every backend's.
func (w *Watcher) Resume(now scheduler.Time) {
	w.grace = now.Add(w.cfg.StallAfter)
	for b := range w.backends {
		w.heard(now, b)
	}
	for g := range w.gpus {
		if w.gpus[g].attached {
			w.refresh(scheduler.GPUID(g))
		}
	}
}

// Tick takes out of rotation every GPU found stalled at now and returns
// them. The returned slice is owned by the Watcher and valid until its next
// call.
func (w *Watcher) Tick(now scheduler.Time) []Stall {
	w.stalls = w.stalls[:0]
	for w.dues.Len() > 0 {
		g := w.dues.Top()
		st := &w.gpus[g]
		if st.due > now {
			break
		}
		bs := w.backends[st.backend]
		if !bs.silent && now >= bs.lastHeard.Add(w.cfg.StallAfter) {
			// The whole backend is silent: every GPU of it goes.
			bs.silent = true
			for _, h := range bs.gpus {
				w.stall(h, st.backend, WhySilent, bs.lastHeard)
			}
			continue
		}
		w.stall(g, st.backend, WhyOverdue, w.firstFinish(st))
	}
	slices.SortFunc(w.stalls, func(a, b Stall) int { return int(a.GPU) - int(b.GPU) })
	return w.stalls
}

func (w *Watcher) stall(g scheduler.GPUID, b BackendID, why Why, since scheduler.Time) {
	st := &w.gpus[g]
	if st.stalled {
		return
	}
	st.stalled, st.stallWhy = true, why
	s := Stall{GPU: g, Backend: b, Why: why, Since: since}
	for _, p := range st.plans {
		s.Retired = append(s.Retired, p.id)
	}
	st.plans = st.plans[:0]
	w.refresh(g)
	w.stalls = append(w.stalls, s)
}

// firstFinish is when the GPU's first outstanding plan should have been
// reported.
func (w *Watcher) firstFinish(st *gpuState) scheduler.Time {
	p := st.plans[0]
	return scheduler.MaxTime(p.execAt, st.lastFinish).Add(p.dur + st.slip)
}

// WakeAt is when Tick must next be called: the earliest moment a backend
// falls silent or a plan falls overdue, if nothing is heard before.
func (w *Watcher) WakeAt() scheduler.Time {
	if w.dues.Len() == 0 {
		return scheduler.Never
	}
	return w.gpus[w.dues.Top()].due
}

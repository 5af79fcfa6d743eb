package scheduler

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/symphony-serving/symphony/scheduler/idheap"
)

// Grant gives a GPU to a model: the RankCore's only message to a ModelCore.
type Grant struct {
	Model ModelID
	GPU   GPUID
	// FreeAt is when the GPU finishes its previous batch.
	FreeAt Time
	// GPUs is the number of online GPUs of the rank loop that made the
	// grant: the most GPUs the model's batches can be spread over. The
	// window drop policy sizes its keep-up batch with it (see
	// DropWindow). 0, for a grant that no RankCore made, turns that rule
	// off.
	GPUs int
	// Backfill says the grant is of a GPU that would otherwise sit idle,
	// made before the candidate's ExecAt to a candidate that allows it
	// (Candidate.Backfill): the model starts its batch as soon as it can
	// rather than at ExecAt.
	Backfill bool
	// Early says the grant comes before the candidate's ExecAt because
	// another held batch could not start in time after it (the collision
	// rule, RankCore.collision): the model starts its batch as soon as it
	// can, whatever Candidate.Backfill says.
	Early bool
}

// RankConfig configures a RankCore.
type RankConfig struct {
	// Models is the number of models, with IDs 0..Models-1.
	Models int
	// GPUs is the number of GPUs, with IDs 0..GPUs-1; all start free.
	GPUs   int
	Policy Policy
	Delays Delays
	// ModelDelays, if set, are each model's own delays (ModelConfig.Delays),
	// whose data delay depends on the model's input size; it must then
	// have one entry per model. Nil means Delays for every model.
	ModelDelays []Delays
	// Lead makes every timer fire that much early: the time the caller's
	// own wake-ups and hand-offs may take. Plans still use the network
	// delays alone, so a grant that runs late by up to Lead starts on time.
	// The simulator uses 0; the real-time shell its measured slack.
	Lead time.Duration
	// ScheduleAhead is how early the clockwork policy commits a GPU's next
	// batch before the GPU frees; 0 means DefaultScheduleAhead. Other
	// policies ignore it.
	ScheduleAhead time.Duration
	// StartOffline makes every GPU start offline, to be brought in with
	// EnableGPU when a backend registers it. GPUs is then the capacity.
	// The simulator leaves it false: its GPUs all exist from the start.
	StartOffline bool
}

// Validate checks the configuration.
func (c RankConfig) Validate() error {
	switch {
	case c.Models < 1:
		return fmt.Errorf("scheduler: need at least one model, have %d", c.Models)
	case c.GPUs < 1:
		return fmt.Errorf("scheduler: need at least one GPU, have %d", c.GPUs)
	case c.Policy == PolicyNexus || c.Policy > PolicyNexus:
		return fmt.Errorf("scheduler: policy %v has no RankCore", c.Policy)
	case c.ScheduleAhead < 0:
		return fmt.Errorf("scheduler: negative schedule-ahead %v", c.ScheduleAhead)
	case c.Lead < 0:
		return fmt.Errorf("scheduler: negative lead %v", c.Lead)
	case c.ModelDelays != nil && len(c.ModelDelays) != c.Models:
		return fmt.Errorf("scheduler: %d model delays for %d models", len(c.ModelDelays), c.Models)
	}
	for _, d := range c.ModelDelays {
		if err := d.Validate(); err != nil {
			return err
		}
	}
	return c.Delays.Validate()
}

type rankModelState uint8

const (
	modelIdle    rankModelState = iota // no candidate, or one the GPUs cannot serve in time
	modelArmed                         // candidate waits for its timer
	modelReady                         // candidate is schedulable and waits for a GPU
	modelGranted                       // a grant is outstanding; waiting for the GPU's return
)

type rankModel struct {
	cand    Candidate
	state   rankModelState
	timerAt Time
	readyAt int // index in ready, -1 if absent
	// earlyAt is the backfill timer of a candidate that may backfill
	// (Candidate.Backfill): when it next tries to take an idle GPU (see
	// RankCore.backfill). The model is then in the early heap as well as
	// the timer heap.
	earlyAt Time
	// starved says the model is in RankCore.starved.
	starved bool
}

type rankGPU struct {
	freeAt  Time
	online  bool // may be granted; false once its backend is gone
	granted bool // a grant is outstanding: not in the free heap
	// corrected holds a CorrectFreeAt that came while a grant was
	// outstanding (Past if none): a grant that comes back unused frees
	// the GPU then, not when the grant thought it would free.
	corrected Time
}

// RankCore is the RankThread of Appendix C as a state machine: it owns every
// GPU's free_at time and every model's candidate timer, grants a GPU to a
// candidate that becomes schedulable, and when a GPU frees, grants it to the
// best schedulable candidate. It is not safe for concurrent use.
//
// The caller feeds it candidates (Update) and GPU returns (Return), then
// calls Tick(now) whenever now has reached WakeAt, and delivers each Grant
// to its model. A model has at most one grant outstanding: until its
// GPUReturn comes back, its other updates are recorded but not acted on.
type RankCore struct {
	cfg    RankConfig
	models []rankModel
	gpus   []rankGPU
	timers *idheap.Heap[ModelID] // armed models by timerAt
	early  *idheap.Heap[ModelID] // armed models that may backfill, by earlyAt
	free   *idheap.Heap[GPUID]   // ungranted GPUs by freeAt
	ready  []ModelID             // schedulable models waiting for a GPU
	// starved are models whose backfill found every GPU granted or a
	// candidate in the ready set; they try again once neither holds.
	starved []ModelID
	grants  []Grant
	ahead   time.Duration
	online  int // GPUs online
	// now is the latest time Tick was called with: no batch granted from
	// then on starts before it (collisionOnMany's early layout).
	now Time
	// cut is the bound that idleByCut and dueBeforeCut test against, set
	// just before a backfill collects GPUs and candidates with them
	// (method values made once, so that collecting never allocates).
	cut          Time
	idleByCut    func(GPUID) bool
	dueBeforeCut func(ModelID) bool
	// anyModel keeps every ID (collision collects all armed models), and
	// byDue is dueOrder (both made once, so that collision never
	// allocates).
	anyModel func(ModelID) bool
	byDue    func(a, b ModelID) int
	// Scratch for backfill and collision: the models and GPUs they weigh,
	// and their times.
	bfModels []ModelID
	bfGPUs   []GPUID
	bfNeed   []Time
	bfFree   []Time
	// layout is misses' working copy of the GPUs' sorted free times.
	layout []Time
}

// NewRankCore returns a RankCore with all GPUs free and no candidates.
func NewRankCore(cfg RankConfig) (*RankCore, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &RankCore{cfg: cfg, models: make([]rankModel, cfg.Models), gpus: make([]rankGPU, cfg.GPUs), now: Past}
	r.timers = idheap.New(cfg.Models, r.timerBefore)
	r.early = idheap.New(cfg.Models, r.earlyBefore)
	r.free = idheap.New(cfg.GPUs, r.freesBefore)
	r.idleByCut, r.dueBeforeCut, r.anyModel, r.byDue = r.idleBy, r.dueBefore, anyModel, r.dueOrder
	for i := range r.models {
		r.models[i].readyAt = -1
	}
	for i := range r.gpus {
		r.gpus[i] = rankGPU{freeAt: Past, online: !cfg.StartOffline, corrected: Past}
		if !cfg.StartOffline {
			r.free.Push(GPUID(i))
			r.online++
		}
	}
	if cfg.Policy == PolicyClockwork {
		r.ahead = cfg.ScheduleAhead
		if r.ahead == 0 {
			r.ahead = DefaultScheduleAhead
		}
	}
	return r, nil
}

// timerBefore orders the timer heap: the earlier timer first, ties by ID.
func (r *RankCore) timerBefore(a, b ModelID) bool {
	ta, tb := r.models[a].timerAt, r.models[b].timerAt
	return ta < tb || ta == tb && a < b
}

// earlyBefore orders the early heap: the earlier backfill timer first, then
// the earlier ExecAt, ties by ID.
func (r *RankCore) earlyBefore(a, b ModelID) bool {
	ma, mb := &r.models[a], &r.models[b]
	if ma.earlyAt != mb.earlyAt {
		return ma.earlyAt < mb.earlyAt
	}
	if ma.cand.ExecAt != mb.cand.ExecAt {
		return ma.cand.ExecAt < mb.cand.ExecAt
	}
	return a < b
}

// idleBy says GPU g is free by r.cut.
func (r *RankCore) idleBy(g GPUID) bool { return r.gpus[g].freeAt <= r.cut }

// dueBefore says model m's candidate timer fires before r.cut.
func (r *RankCore) dueBefore(m ModelID) bool { return r.models[m].timerAt < r.cut }

func anyModel(ModelID) bool { return true }

// dueOrder orders models by when their held batches are due to end if
// they start at their preferred starts (preferredStart plus the run),
// ties by ID: the order collision lays them out in.
func (r *RankCore) dueOrder(a, b ModelID) int {
	ca, cb := &r.models[a].cand, &r.models[b].cand
	da := preferredStart(ca).Add(ca.Deadline.Sub(ca.InvalidAfter))
	db := preferredStart(cb).Add(cb.Deadline.Sub(cb.InvalidAfter))
	return cmp.Or(cmp.Compare(da, db), cmp.Compare(a, b))
}

// freesBefore orders the free heap: the GPU that frees first, ties by ID.
func (r *RankCore) freesBefore(a, b GPUID) bool {
	fa, fb := r.gpus[a].freeAt, r.gpus[b].freeAt
	return fa < fb || fa == fb && a < b
}

// Clone returns a deep copy of the core: its models, GPUs, timers and
// ready list, sharing no mutable state with r, so that feeding the copy
// changes nothing in r and the reverse. It exists for what-if
// exploration: a caller that wants to know how the rank loop would go on
// under another choice (bench/lookahead's clairvoyant reference, which
// plays each alternative forward on copies of the real cores) clones the
// core at the decision and drives the copy; tests use it the same way.
// The grants of r's last Tick are not carried over: the clone's next call
// returns its own.
func (r *RankCore) Clone() *RankCore {
	c := &RankCore{
		cfg:    r.cfg,
		models: slices.Clone(r.models),
		gpus:   slices.Clone(r.gpus),
		ready:  slices.Clone(r.ready),
		ahead:  r.ahead,
		// The backfill scratch is rebuilt on use; starved is state.
		starved: slices.Clone(r.starved),
		online:  r.online,
		now:     r.now,
	}
	c.cfg.ModelDelays = slices.Clone(r.cfg.ModelDelays)
	c.timers = r.timers.Clone(c.timerBefore)
	c.early = r.early.Clone(c.earlyBefore)
	c.free = r.free.Clone(c.freesBefore)
	c.idleByCut, c.dueBeforeCut, c.anyModel, c.byDue = c.idleBy, c.dueBefore, anyModel, c.dueOrder
	return c
}

// Update records model m's latest candidate (inform_candidate). Updates
// older than one already seen are ignored.
func (r *RankCore) Update(m ModelID, c Candidate) {
	st := &r.models[m]
	if c.Version < st.cand.Version {
		return
	}
	st.cand = c
	if st.state == modelGranted {
		return
	}
	r.rearm(m)
}

// Return takes back a GPU granted to a model (inform_gpu) together with the
// model's candidate after the grant.
func (r *RankCore) Return(ret GPUReturn) {
	g := &r.gpus[ret.GPU]
	if !g.granted {
		panic(fmt.Sprintf("scheduler: GPU %d returned but was never granted", ret.GPU))
	}
	g.granted = false
	g.freeAt = ret.FreeAt
	switch {
	case g.corrected == Past:
	case !ret.Used:
		g.freeAt = g.corrected
	default:
		// Both estimates may count the new plan, made from whichever
		// report came first: the later is the safer.
		g.freeAt = MaxTime(ret.FreeAt, g.corrected)
	}
	g.corrected = Past
	if g.online {
		r.free.Push(ret.GPU)
	}
	st := &r.models[ret.Model]
	if ret.Candidate.Version >= st.cand.Version {
		st.cand = ret.Candidate
	}
	r.rearm(ret.Model)
}

// rearm takes model m out of the timer heaps and the ready list, then arms
// its timer for its current candidate, and, if the candidate may backfill,
// its backfill timer for the next Tick.
func (r *RankCore) rearm(m ModelID) {
	st := &r.models[m]
	r.timers.Remove(m)
	r.early.Remove(m)
	if st.readyAt >= 0 {
		r.removeReady(m)
	}
	st.state = modelIdle
	if !st.cand.Valid() {
		return
	}
	st.state = modelArmed
	st.timerAt = st.cand.ExecAt.Add(-r.dispatch(m, st.cand.BatchSize) - r.cfg.Lead)
	r.timers.Push(m)
	if st.cand.Backfill && r.ahead == 0 {
		st.earlyAt = Past
		r.early.Push(m)
	}
}

func (r *RankCore) removeReady(m ModelID) {
	i := r.models[m].readyAt
	last := r.ready[len(r.ready)-1]
	r.ready[i] = last
	r.models[last].readyAt = i
	r.ready = r.ready[:len(r.ready)-1]
	r.models[m].readyAt = -1
}

// dispatch is model m's delay(bs).
func (r *RankCore) dispatch(m ModelID, bs int) time.Duration {
	if r.cfg.ModelDelays != nil {
		return r.cfg.ModelDelays[m].Dispatch(bs)
	}
	return r.cfg.Delays.Dispatch(bs)
}

// lead is how long before a GPU frees the rank must act for the ready
// candidates: the largest dispatch delay among them (set_gpu_timer), or the
// schedule-ahead window under clockwork.
func (r *RankCore) lead() time.Duration {
	var d time.Duration
	for _, m := range r.ready {
		if x := r.dispatch(m, r.models[m].cand.BatchSize); x > d {
			d = x
		}
	}
	if r.ahead > d {
		d = r.ahead
	}
	return d + r.cfg.Lead
}

// WakeAt is when Tick must next be called: the earliest candidate timer, or
// the moment the earliest-free GPU must be handed to a ready candidate.
func (r *RankCore) WakeAt() Time {
	t := Never
	if r.timers.Len() > 0 {
		t = r.models[r.timers.Top()].timerAt
	}
	if r.early.Len() > 0 {
		t = MinTime(t, r.models[r.early.Top()].earlyAt)
	}
	if len(r.starved) > 0 && len(r.ready) == 0 && r.free.Len() > 0 {
		t = Past
	}
	if len(r.ready) > 0 && r.free.Len() > 0 {
		t = MinTime(t, r.gpus[r.free.Top()].freeAt.Add(-r.lead()))
	}
	if _, at := r.collision(); at < t {
		t = at
	}
	return t
}

// Tick fires every timer due at now and returns the grants decided. The
// returned slice is owned by the core and valid until its next call.
func (r *RankCore) Tick(now Time) []Grant {
	r.now = MaxTime(r.now, now)
	r.grants = r.grants[:0]
	// Model timers (on_model_timer): a candidate becomes schedulable.
	for r.timers.Len() > 0 {
		m := r.timers.Top()
		st := &r.models[m]
		if st.timerAt > now {
			break
		}
		r.timers.Pop()
		r.early.Remove(m)
		if r.free.Len() > 0 && r.gpus[r.free.Top()].freeAt <= st.cand.ExecAt && r.ahead == 0 {
			r.grant(m, r.free.Pop())
			continue
		}
		st.state = modelReady
		st.readyAt = len(r.ready)
		r.ready = append(r.ready, m)
	}
	// GPU timer (on_gpu_timer): the earliest-free GPU goes to the best ready
	// candidate that it can serve at its current size. If it can serve none
	// of them at their current sizes (they were built assuming a GPU right
	// away, and under overload none is), it still goes to the best of them:
	// the ModelCore re-forms the batch for the GPU's real free time,
	// shrinking it or dropping what cannot make it.
	for len(r.ready) > 0 && r.free.Len() > 0 {
		g := r.free.Top()
		freeAt := r.gpus[g].freeAt
		if freeAt.Add(-r.lead()) > now {
			break
		}
		best, bestValid := r.ready[0], false
		for _, m := range r.ready {
			valid := freeAt <= r.models[m].cand.InvalidAfter
			if (valid && !bestValid) || (valid == bestValid && r.better(m, best)) {
				best, bestValid = m, valid
			}
		}
		r.removeReady(best)
		r.grant(best, r.free.Pop())
	}
	// Backfill timers: a held candidate whose wait cannot pay takes a GPU
	// that no schedulable candidate needs.
	if len(r.ready) == 0 && r.free.Len() > 0 {
		for _, m := range r.starved {
			st := &r.models[m]
			st.starved = false
			if st.state == modelArmed && st.cand.Backfill && !r.early.Contains(m) {
				st.earlyAt = Past
				r.early.Push(m)
			}
		}
		r.starved = r.starved[:0]
	}
	for r.early.Len() > 0 {
		m := r.early.Top()
		if r.models[m].earlyAt > now {
			break
		}
		r.early.Pop()
		r.backfill(now, m)
	}
	if m, at := r.collision(); at <= now {
		r.timers.Remove(m)
		r.early.Remove(m)
		r.grant(m, r.free.Pop())
		r.grants[len(r.grants)-1].Early = true
	}
	return r.grants
}

// collision is the collision rule: on a rank loop of several GPUs,
// collisionOnMany's; on one GPU, the rule below (scheduler/README.md,
// "Collisions on one GPU"). Held batches wait for their own sched_at (ExecAt), which leaves
// each only α of slack; on a rank loop with one GPU online, two whose
// sched_ats fall within one batch's run cannot both start in time, and the
// second is dropped with the GPU idle before. So, with the GPU not
// granted, no candidate ready and several armed, all at one priority
// level, the held batches are laid out backwards: each starts at the
// earliest of its preferred start (its ExecAt, or its InvalidAfter if that
// is earlier) and the next one's start less its own run, in the order of
// their preferred starts plus runs (Jackson's earliest-due-date rule: if
// any order fits them, that one does).
//
// When the first must then start before its preferred start, collision
// returns it and when its grant must leave: its start, or when the GPU
// frees if that is later, less its dispatch delay and the lead. That time
// may have passed (a late arrival made the collision); the first then
// starts at once, which still leaves the later batches the most of their
// time. The grant is Early. Otherwise it returns Never: where the batches
// fit at their own preferred starts, the layout is those, and the rule
// moves nothing. A later batch keeps its ExecAt, and so its slack, rather
// than being laid out as late as its InvalidAfter: the first starts a
// little earlier instead. Mixed priority levels are left to better(),
// which serves the higher level first. The layout costs O(M log M) for M
// armed models; WakeAt and Tick both run it, and Tick acts whenever
// WakeAt's time has come, since both see one state.
func (r *RankCore) collision() (ModelID, Time) {
	if r.online > 1 {
		return r.collisionOnMany()
	}
	if !r.mayCollide() || r.online != 1 || r.free.Len() != 1 {
		return 0, Never
	}
	ms, ok := r.heldAtOneLevel()
	if !ok {
		return 0, Never
	}
	slices.SortFunc(ms, r.byDue)
	start := Never
	for i := len(ms) - 1; i >= 0; i-- {
		c := &r.models[ms[i]].cand
		start = MinTime(preferredStart(c), start.Add(-c.Deadline.Sub(c.InvalidAfter)))
	}
	first := ms[0]
	c := &r.models[first].cand
	// A GPU that frees after the start takes the first when it frees.
	start = MaxTime(start, r.gpus[r.free.Top()].freeAt)
	if start >= preferredStart(c) {
		return 0, Never
	}
	return first, start.Add(-r.dispatch(first, c.BatchSize) - r.cfg.Lead)
}

// collisionOnMany is the collision rule on a rank loop of several GPUs
// (scheduler/README.md, "Collisions on several GPUs"). With no candidate
// ready and several armed at one priority level, the held batches are
// laid out in the order of their preferred starts plus runs (dueOrder),
// each on the GPU that frees first, at its preferred start or when that
// GPU frees, whichever is later. A batch laid out after its InvalidAfter
// misses: it would shrink, or under DropWindow lose its head. When the
// first batch (the earliest due) starting on the GPU that frees first,
// as soon as it frees, leaves fewer batches missing than holding it, and
// that GPU would otherwise idle before the first batch's preferred
// start, the first starts then (an Early grant), if it is cheap to start
// (Candidate.EarlyCheap). collisionOnMany returns it and when its grant
// must leave; otherwise Never. Where at least as many GPUs are free by
// the earliest preferred start as there are held batches, each has a GPU
// of its own and nothing can miss: that is checked first, in
// O(batches) steps, so a loop of idle GPUs pays little. The layout costs
// O(M log M) for M armed models.
func (r *RankCore) collisionOnMany() (ModelID, Time) {
	if !r.mayCollide() || r.free.Len() == 0 {
		return 0, Never
	}
	// A GPU for each batch by the first timer: nothing can miss. The
	// first timer is before every ExecAt, and so before every preferred
	// start but that of a batch whose InvalidAfter passed before its
	// timer (a ModelCore makes one only when it cannot start in time at
	// all, and its timer is then due, so Tick fires it before this
	// runs). This O(batches) test spares a loop of idle GPUs the layout.
	r.cut = r.models[r.timers.Top()].timerAt
	if r.free.CountWhile(r.idleByCut, r.timers.Len()) >= r.timers.Len() {
		return 0, Never
	}
	ms, ok := r.heldAtOneLevel()
	if !ok {
		return 0, Never
	}
	first, earliest, latest := ms[0], Never, Past
	for _, m := range ms {
		c := &r.models[m].cand
		if r.byDue(m, first) < 0 {
			first = m
		}
		earliest, latest = MinTime(earliest, preferredStart(c)), MaxTime(latest, c.InvalidAfter)
	}
	c := &r.models[first].cand
	// Started early, the first batch starts when the GPU that frees first
	// frees, and not before its inputs can reach it from now (the last
	// Tick's time: a GPU idle since long ago lends no time before it).
	start := MaxTime(r.gpus[r.free.Top()].freeAt, r.now.Add(r.dispatch(first, c.BatchSize)))
	if !c.EarlyCheap || start >= preferredStart(c) {
		return 0, Never // no idle time to use, or too dear to use it
	}
	r.cut = earliest
	if r.free.CountWhile(r.idleByCut, len(ms)) >= len(ms) {
		return 0, Never // a GPU for each batch by the earliest preferred start
	}
	slices.SortFunc(ms, r.byDue)
	// Only GPUs free by the last InvalidAfter can start a batch in time.
	r.cut = latest
	r.bfGPUs = r.free.AppendWhile(r.bfGPUs[:0], r.idleByCut)
	r.bfFree = r.bfFree[:0]
	for _, g := range r.bfGPUs {
		r.bfFree = append(r.bfFree, r.gpus[g].freeAt)
	}
	slices.Sort(r.bfFree) // a sorted slice is a min-heap
	held := r.misses(ms, preferredStart(c))
	if held == 0 || r.misses(ms, start) >= held {
		return 0, Never
	}
	return first, start.Add(-r.dispatch(first, c.BatchSize) - r.cfg.Lead)
}

// misses lays the held batches ms out in order on the GPUs whose sorted
// free times are r.bfFree, the first starting at firstStart (or when its
// GPU frees), each later one at its preferred start (or when its GPU
// frees), and counts those laid out after their InvalidAfter. Each runs
// its planned run, Deadline − InvalidAfter. The free times are worked on
// as a min-heap in r.layout, a copy, so that one sort serves both layouts.
func (r *RankCore) misses(ms []ModelID, firstStart Time) int {
	frees := append(r.layout[:0], r.bfFree...)
	r.layout = frees
	n := 0
	for i, m := range ms {
		if len(frees) == 0 {
			return n + len(ms) - i // no GPU free in time for the rest
		}
		c := &r.models[m].cand
		start := preferredStart(c)
		if i == 0 {
			start = firstStart
		}
		start = MaxTime(start, frees[0])
		if start > c.InvalidAfter {
			n++
		}
		frees[0] = start.Add(c.Deadline.Sub(c.InvalidAfter))
		siftDownTimes(frees)
	}
	return n
}

// siftDownTimes restores a min-heap of times after its root grew.
func siftDownTimes(h []Time) {
	for i := 0; ; {
		l, least := 2*i+1, i
		if l < len(h) && h[l] < h[least] {
			least = l
		}
		if l+1 < len(h) && h[l+1] < h[least] {
			least = l + 1
		}
		if least == i {
			return
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
}

// mayCollide says the collision rule may act: under symphony (no other
// policy holds batches), with no schedule-ahead, no candidate ready (a
// ready one takes the next GPU anyway) and two or more armed.
func (r *RankCore) mayCollide() bool {
	return r.cfg.Policy == PolicySymphony && r.ahead == 0 && len(r.ready) == 0 && r.timers.Len() >= 2
}

// heldAtOneLevel collects the armed models into r.bfModels and reports
// whether their candidates are all at one priority level: mixed levels
// are left to better(), which serves the higher level first.
func (r *RankCore) heldAtOneLevel() ([]ModelID, bool) {
	ms := r.timers.AppendWhile(r.bfModels[:0], r.anyModel)
	r.bfModels = ms
	level := r.models[ms[0]].cand.Priority
	for _, m := range ms {
		if r.models[m].cand.Priority != level {
			return ms, false
		}
	}
	return ms, true
}

// preferredStart is when a held batch would start by itself: at its
// ExecAt, or at its InvalidAfter if that comes first.
func preferredStart(c *Candidate) Time { return MinTime(c.ExecAt, c.InvalidAfter) }

// backfill grants armed model m, whose candidate may backfill
// (Candidate.Backfill), the earliest-free GPU now, before the candidate's
// ExecAt, if the GPU would otherwise sit idle: no candidate waits in the
// ready set, and the other free GPUs still serve every candidate whose
// timer fires before m's batch would end, with one GPU to spare (spare).
// A backfill thus never takes a GPU from a candidate the rank knows of;
// it only uses time the policy would have left idle. Otherwise the
// backfill timer is re-armed for when that may change (the earliest GPU
// frees, another GPU frees or a candidate in the way is due), as long as
// that is before m's own timer; if every GPU is granted or a candidate is
// ready, m is starved until neither holds.
func (r *RankCore) backfill(now Time, m ModelID) {
	st := &r.models[m]
	if len(r.ready) > 0 || r.free.Len() == 0 {
		if !st.starved {
			st.starved = true
			r.starved = append(r.starved, m)
		}
		return
	}
	c := &st.cand
	g := r.free.Top()
	freeAt := r.gpus[g].freeAt
	d := r.dispatch(m, c.BatchSize)
	retry := freeAt.Add(-d - r.cfg.Lead)
	if retry <= now {
		start := MaxTime(now.Add(d), freeAt)
		// The batch's run as its ModelCore plans it against the deadline.
		end := start.Add(c.Deadline.Sub(c.InvalidAfter))
		ok, change := r.spare(m, g, start, end)
		if ok {
			r.timers.Remove(m)
			r.grant(m, r.free.Pop())
			r.grants[len(r.grants)-1].Backfill = true
			return
		}
		retry = change.Add(-d - r.cfg.Lead)
	}
	if retry > now && retry < st.timerAt {
		st.earlyAt = retry
		r.early.Push(m)
	}
}

// spare reports whether GPU g can be taken from start until end and still
// leave one free GPU more than the armed candidates whose timers fire
// before end need: whether the other GPUs free by end, less the earliest
// of them, can still be matched, one each, to those candidates, each GPU
// free by its candidate's ExecAt. The GPU left over is for requests not
// yet queued: a model whose queue is empty now may form a candidate that
// needs a GPU before end, and the backfill must not take it (without it,
// the strongly batching models of the mixed zoo lost goodput to the weak
// ones' backfills: scheduler/README.md, "Backfill"). If g cannot be
// spared, spare also returns, as a start time, when that may change: when
// the next of those GPUs frees after start or the next of those
// candidates is due, whichever is first (Never if neither).
func (r *RankCore) spare(m ModelID, g GPUID, start, end Time) (bool, Time) {
	r.cut = end
	r.bfModels = r.timers.AppendWhile(r.bfModels[:0], r.dueBeforeCut)
	r.bfGPUs = r.free.AppendWhile(r.bfGPUs[:0], r.idleByCut)
	r.bfNeed, r.bfFree = r.bfNeed[:0], r.bfFree[:0]
	for _, k := range r.bfModels {
		if k != m {
			r.bfNeed = append(r.bfNeed, r.models[k].cand.ExecAt)
		}
	}
	for _, h := range r.bfGPUs {
		if h != g {
			r.bfFree = append(r.bfFree, r.gpus[h].freeAt)
		}
	}
	if len(r.bfFree) == 0 {
		return false, Never // no GPU to leave over before end
	}
	slices.Sort(r.bfNeed)
	slices.Sort(r.bfFree)
	free := r.bfFree[1:] // the earliest is left over
	j := 0
	for i, t := range r.bfNeed {
		for j < len(free) && free[j] <= t {
			j++
		}
		if j <= i {
			// The (i+1)th candidate finds only i GPUs free by its ExecAt.
			change := r.bfNeed[0]
			if k, _ := slices.BinarySearch(r.bfFree, start+1); k < len(r.bfFree) {
				change = MinTime(change, r.bfFree[k])
			}
			return false, change
		}
	}
	return true, Never
}

// better reports whether model a's candidate outranks model b's: the
// higher priority level (Candidate.Priority), then the earliest ExecAt
// under symphony and work-conserving (Appendix C), the earliest deadline
// under clockwork. Ties go to the lower model ID so that runs are
// reproducible. Without priorities every candidate is at level 0, and the
// order is Appendix C's.
//
// Candidates above level 0 go by earliest deadline under every policy: a
// GPU that several models' prioritized requests wait for serves the one
// whose deadline is nearest, so that the level keeps its deadlines across
// models while the lower level fills what is left. (By ExecAt, a batch
// that a low-level request's near deadline pulls early took the GPU from
// another model's prioritized requests: docs/benchmarks.md, "Priority
// levels".)
func (r *RankCore) better(a, b ModelID) bool {
	ca, cb := &r.models[a].cand, &r.models[b].cand
	if ca.Priority != cb.Priority {
		return ca.Priority > cb.Priority
	}
	ka, kb := ca.ExecAt, cb.ExecAt
	if r.cfg.Policy == PolicyClockwork || ca.Priority > 0 {
		ka, kb = ca.Deadline, cb.Deadline
	}
	if ka != kb {
		return ka < kb
	}
	return a < b
}

// EnableGPU brings GPU g online, free from freeAt (Past if it is free
// now): a backend has registered it. Enabling an online GPU only corrects
// its free time, as CorrectFreeAt does.
func (r *RankCore) EnableGPU(g GPUID, freeAt Time) {
	st := &r.gpus[g]
	if st.online {
		r.CorrectFreeAt(g, freeAt)
		return
	}
	st.online = true
	r.online++
	if !st.granted {
		st.freeAt = freeAt
		r.free.Push(g)
	}
}

// DisableGPU takes GPU g offline: its backend is gone. A grant of it that
// is outstanding still comes back through Return, but the GPU is not
// granted again until EnableGPU.
func (r *RankCore) DisableGPU(g GPUID) {
	st := &r.gpus[g]
	if st.online {
		r.online--
	}
	st.online = false
	r.free.Remove(g)
}

// CorrectFreeAt sets when GPU g really frees, as its backend's reports
// show (scheduler/gpuwatch replays the GPU's outstanding plans from them):
// later than planned when the GPU runs late, earlier when it gave a plan
// up. While a grant of g is outstanding, the correction waits: if the
// grant comes back unused, the GPU frees at the corrected time; if it
// comes back used, at the later of the correction and the Return's free
// time (the caller corrects the Return itself, but a report may have come
// in between).
func (r *RankCore) CorrectFreeAt(g GPUID, freeAt Time) {
	st := &r.gpus[g]
	if st.granted {
		st.corrected = freeAt
		return
	}
	if !st.online || st.freeAt == freeAt {
		return
	}
	st.freeAt = freeAt
	r.free.Fix(g)
}

// DetachModel forgets model m's candidate, so the rank never grants it
// again until a newer Update: the epoch job has moved the model to another
// rank loop. A model whose grant is outstanding cannot move; the caller
// must wait for its Return, and DetachModel panics to say so.
func (r *RankCore) DetachModel(m ModelID) {
	st := &r.models[m]
	if st.state == modelGranted {
		panic(fmt.Sprintf("scheduler: model %d detached with a grant outstanding", m))
	}
	r.timers.Remove(m)
	r.early.Remove(m)
	if st.readyAt >= 0 {
		r.removeReady(m)
	}
	st.state = modelIdle
	st.cand = Candidate{Version: st.cand.Version}
}

// SetLead changes RankConfig.Lead: the real-time shell measures how late
// its timers fire and leads by that. It applies to the GPU hand-off at
// once and to model timers armed from now on.
func (r *RankCore) SetLead(d time.Duration) { r.cfg.Lead = max(d, 0) }

// OnlineGPUs is the number of GPUs that may be granted.
func (r *RankCore) OnlineGPUs() int { return r.online }

func (r *RankCore) grant(m ModelID, g GPUID) {
	r.gpus[g].granted = true
	r.models[m].state = modelGranted
	r.grants = append(r.grants, Grant{Model: m, GPU: g, FreeAt: r.gpus[g].freeAt, GPUs: r.online})
}

// NextGrant is the grant the rank would give model m next if m's
// candidate were schedulable now, and when: the earliest-free online GPU
// that is not granted, handed over once it is due to free within the
// candidate's dispatch delay (or the clockwork schedule-ahead, if longer)
// plus Lead, as the GPU hand-off in Tick does; at is at most that moment
// and may have passed. at is Never if m has no candidate, a grant
// outstanding, or no GPU is free. It changes nothing. It exists for
// callers that weigh overriding the candidate's hold: the earliest moment
// a batch could be granted is when an early start becomes possible at
// all (bench/lookahead's clairvoyant reference decides there), and the
// GPU's free time bounds the batches that could be planned on it
// (ModelCore.LargestBatch).
func (r *RankCore) NextGrant(m ModelID) (g Grant, at Time) {
	st := &r.models[m]
	if !st.cand.Valid() || st.state == modelGranted || r.free.Len() == 0 {
		return Grant{}, Never
	}
	gpu := r.free.Top()
	freeAt := r.gpus[gpu].freeAt
	lead := max(r.dispatch(m, st.cand.BatchSize), r.ahead) + r.cfg.Lead
	return Grant{Model: m, GPU: gpu, FreeAt: freeAt, GPUs: r.online}, freeAt.Add(-lead)
}

// GrantEarly grants model m the GPU NextGrant names now, without waiting
// for m's candidate timer: it overrides the policy's hold (the symphony
// policy's wait for sched_at) for one batch. The grant must be answered
// like any other, by ModelCore.Grant or ModelCore.GrantBatch, and its
// GPUReturn passed to Return. It returns false, changing nothing, if
// NextGrant's time is after now (no GPU could be handed over yet) or
// Never. Only what-if exploration uses it: bench/lookahead's clairvoyant
// reference tries starting a batch before the rules would, on a clone.
func (r *RankCore) GrantEarly(now Time, m ModelID) (Grant, bool) {
	if _, at := r.NextGrant(m); at == Never || at > now {
		return Grant{}, false
	}
	r.timers.Remove(m)
	r.early.Remove(m)
	if r.models[m].readyAt >= 0 {
		r.removeReady(m)
	}
	r.grants = r.grants[:0]
	r.grant(m, r.free.Pop())
	return r.grants[0], true
}

// FreeGPUs is the number of GPUs not currently granted.
func (r *RankCore) FreeGPUs() int { return r.free.Len() }

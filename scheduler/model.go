package scheduler

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/symphony-serving/symphony/scheduler/profile"
)

// Candidate is a model's proposal for its next batch: the paper's
// ExecutionCandidate. It is the whole message a ModelCore sends the RankCore
// about its queue.
type Candidate struct {
	// BatchSize is the number of requests the batch would hold; 0 means the
	// model has nothing to run.
	BatchSize int
	// ExecAt is when the batch wants to start on a GPU. Under the symphony
	// policy it is max(earliest start, sched_at), or, with
	// SchedulableBetaLambda, the earliest start once the batch holds βλ
	// requests; under the other policies it is the earliest start.
	ExecAt Time
	// Backfill says the batch, held until ExecAt, may instead start as
	// soon as it can on a GPU that would otherwise sit idle (a backfill
	// grant, Grant.Backfill): a held symphony batch whose wait cannot pay,
	// because the model batches weakly (β ≤ α) and the batch already
	// holds βλ requests (§4.3; see ModelCore.backfills).
	Backfill bool
	// InvalidAfter is the latest start that still meets Deadline:
	// Deadline − ℓ(BatchSize), stretched by the core's tail factor
	// (ModelCore.SetTailFactor).
	InvalidAfter Time
	// EarlyCheap says a held batch started now, at BatchSize, would cost
	// at most EarlyCostLimit times the GPU time per request of the batch
	// it is expected to hold at ExecAt (BatchSize plus the arrivals until
	// then at the model's rate). On a loop of several GPUs the rank loop
	// starts a held batch early only where that is so (the collision
	// rule): a
	// strong batcher on a linear profile gives up a little; a profile of
	// steps (a batch of 2 as slow as one of 4) would give up half its
	// GPU time and overload the GPUs the early start was to relieve. A
	// batch that is not held is cheap. It is refreshed whenever the
	// batch's size or times change, and does not by itself make a new
	// candidate, so the rank loop may see a value that is stale until
	// then; as ExecAt nears, the expected batch shrinks toward BatchSize,
	// so a stale value errs toward not cheap.
	EarlyCheap bool
	// Deadline is dl(reqs): when the earliest-deadline request's execution
	// must have finished (its deadline less the result delay).
	Deadline Time
	// Priority is the highest priority level among the batch's requests
	// (Request.Priority): the RankCore serves a higher one first when
	// candidates compete for a GPU.
	Priority Priority
	// Version increases with every candidate a ModelCore publishes, so the
	// RankCore can discard updates that a grant has overtaken.
	Version uint64
}

// Valid reports whether the candidate holds at least one request.
func (c Candidate) Valid() bool { return c.BatchSize > 0 }

// BatchPlan is a batch committed to a GPU: the message a backend receives.
type BatchPlan struct {
	ID    PlanID
	Model ModelID
	GPU   GPUID
	// GrantedAt is when the scheduler decided the plan; the backend pulls
	// inputs from then on.
	GrantedAt Time
	// ExecAt is when the batch starts on the GPU, FinishAt when it ends.
	ExecAt   Time
	FinishAt Time
	// Requests are the batch's requests in deadline order. The slice is
	// owned by the ModelCore and valid only until its next call.
	Requests []Request
}

// GPUReturn hands a granted GPU back to the RankCore with the time it will
// be free again, and carries the model's candidate after the grant.
type GPUReturn struct {
	Model  ModelID
	GPU    GPUID
	FreeAt Time
	// Used says whether a batch was planned on the GPU.
	Used      bool
	Candidate Candidate
}

// ModelOutput is what one ModelCore call decided. It is owned by the core
// and overwritten by its next call, so the caller must act on it (or copy
// it) first.
type ModelOutput struct {
	// Candidate is the model's current candidate after the call.
	Candidate Candidate
	// CandidateChanged says whether the call published Candidate under a new
	// version: when it differs from the last one published, and always
	// after a Grant. Only then must the RankCore hear of it.
	CandidateChanged bool
	// Plans are batches committed to GPUs (at most one per call).
	Plans []BatchPlan
	// Returns holds the answer to a Grant: at most one per call.
	Returns []GPUReturn
	// Drops are requests that can no longer meet their deadline.
	Drops []Drop

	requestBuf []Request
}

func (o *ModelOutput) reset() {
	o.CandidateChanged = false
	o.Plans = o.Plans[:0]
	o.Returns = o.Returns[:0]
	o.Drops = o.Drops[:0]
	o.requestBuf = o.requestBuf[:0]
}

// ModelConfig configures one ModelCore.
type ModelConfig struct {
	ID   ModelID
	Name string
	// Profile is the model's batch latency ℓ(b) on the sub-cluster's GPUs.
	Profile profile.Profile
	Policy  Policy
	// Drop decides which requests a candidate gives up on; DropDefault
	// takes the policy's own.
	Drop DropPolicy
	// Schedulable decides when a symphony candidate stops waiting for
	// more requests; other policies ignore it.
	Schedulable Schedulable
	Delays      Delays
	// RateWindow is the window over which λ is estimated for the βλ rule
	// and the window drop policy's keep-up batch; 0 means
	// DefaultRateWindow.
	RateWindow time.Duration
}

// Validate checks the configuration.
func (c ModelConfig) Validate() error {
	if !c.Profile.Valid() {
		return fmt.Errorf("scheduler: model %q has no profile", c.Name)
	}
	if c.Policy == PolicyNexus {
		return errors.New("scheduler: the nexus policy runs in scheduler/nexus, not in a ModelCore")
	}
	if c.Policy > PolicyNexus {
		return fmt.Errorf("scheduler: unknown policy %d", c.Policy)
	}
	if c.Drop > DropWindow {
		return fmt.Errorf("scheduler: model %q has unknown drop policy %d", c.Name, c.Drop)
	}
	if c.Schedulable > SchedulableSchedAt {
		return fmt.Errorf("scheduler: model %q has unknown schedulable condition %d", c.Name, c.Schedulable)
	}
	if c.RateWindow < 0 {
		return fmt.Errorf("scheduler: model %q has a negative rate window", c.Name)
	}
	return c.Delays.Validate()
}

// ModelCore is the ModelThread of Appendix C as a state machine: it owns one
// model's queue and candidate. It is not safe for concurrent use; the
// real-time shell gives each ModelCore its own goroutine.
//
// Every method takes the current time and returns a *ModelOutput describing
// what to do: tell the RankCore about a new candidate, send plans to GPUs,
// hand GPUs back, tell frontends about drops. After each call the caller
// must re-arm its timer for WakeAt.
type ModelCore struct {
	cfg       ModelConfig
	drop      DropPolicy
	queue     priorityQueue
	rate      rateEstimator
	cand      Candidate
	published Candidate
	wakeAt    Time
	lastNow   Time
	nextPlan  uint64
	out       ModelOutput
	// dispatch1 and beta cache delays and the profile for the hot path.
	dispatch1 time.Duration
	beta      float64 // β in seconds
	// weak says the model batches weakly, β ≤ α: one more request adds
	// at least as much to a batch's run as the whole fixed cost that
	// batching saves. Only such a model's held batches backfill idle GPUs
	// (Candidate.Backfill).
	weak bool
	// tail is the factor (at least 1) by which the model's batches may
	// overrun ℓ(b): deadlines are planned with tail·ℓ(b) (see
	// SetTailFactor); tailEll1 caches tail·ℓ(1).
	tail     float64
	tailEll1 time.Duration
}

// NewModelCore returns an empty ModelCore.
func NewModelCore(cfg ModelConfig) (*ModelCore, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &ModelCore{
		cfg:       cfg,
		drop:      cfg.Drop.resolve(cfg.Policy),
		rate:      newRateEstimator(cfg.RateWindow),
		queue:     priorityQueue{rateWindow: cfg.RateWindow},
		wakeAt:    Never,
		lastNow:   Past,
		dispatch1: cfg.Delays.Dispatch(1),
		beta:      cfg.Profile.Beta().Seconds(),
		weak:      cfg.Profile.Beta() <= cfg.Profile.Alpha(),
		tail:      1,
		tailEll1:  cfg.Profile.Latency(1),
	}, nil
}

// SetTailFactor sets the factor f by which the model's batches are known to
// overrun their profile at the tail (a high quantile of real run time over
// ℓ(b)), and re-forms the candidate under it. From then on the core plans
// every deadline with f·ℓ(b): a batch is formed only if it finishes by its
// deadline even when it runs f times its profile, and a symphony batch is
// held only until f·ℓ(b+1) before its deadline. A GPU's occupancy stays
// ℓ(b) (BatchPlan.FinishAt): what a batch takes on average is the GPU
// watcher's business (scheduler/gpuwatch), what it may take at worst is
// the deadline's.
//
// It exists because a live GPU's batches spread around ℓ(b) (a CPU
// executor sharing its machine, a throttled GPU, a profile measured on a
// quiet machine), while the symphony policy holds every batch until it
// could take no more request: with only ℓ(b+1) − ℓ(b) of slack, a batch
// that runs a few percent over its profile finishes after its deadline.
// f below 1 counts as 1: the profile stays the least a batch is planned
// for. The simulator's GPUs run exactly ℓ(b) and never call it.
func (m *ModelCore) SetTailFactor(now Time, f float64) *ModelOutput {
	now = m.clamp(now)
	m.out.reset()
	m.tail = max(f, 1)
	m.tailEll1 = m.tailLatency(1)
	m.update(now, Past)
	m.publish()
	return &m.out
}

// TailFactor is the factor deadlines are planned with (SetTailFactor).
func (m *ModelCore) TailFactor() float64 { return m.tail }

// tailLatency is the run time a batch of b is planned for against its
// deadline: ℓ(b), stretched by the tail factor.
func (m *ModelCore) tailLatency(b int) time.Duration {
	l := m.cfg.Profile.Latency(b)
	if m.tail == 1 {
		return l
	}
	return time.Duration(float64(l) * m.tail)
}

// Config returns the configuration the core was built with.
func (m *ModelCore) Config() ModelConfig { return m.cfg }

// Queued is the number of requests waiting for a batch.
func (m *ModelCore) Queued() int { return m.queue.len() }

// WakeAt is when the core must be ticked if nothing else happens first: the
// moment its candidate can no longer be granted at its current size, after
// which it must shrink or drop requests. Never if the queue is empty.
func (m *ModelCore) WakeAt() Time { return m.wakeAt }

// Candidate is the current candidate.
func (m *ModelCore) Candidate() Candidate { return m.cand }

// clamp keeps time from going backwards: a caller that reads its clock
// before another caller's later reading is treated as calling at that later
// time.
func (m *ModelCore) clamp(now Time) Time {
	if now < m.lastNow {
		return m.lastNow
	}
	m.lastNow = now
	return now
}

// Enqueue adds requests (the paper's schedule(req)) and updates the
// candidate. Requests must belong to this model. It does not allocate once
// the queue has grown to its working size.
func (m *ModelCore) Enqueue(now Time, reqs []Request) *ModelOutput {
	now = m.clamp(now)
	m.out.reset()
	for i := range reqs {
		m.queue.insert(now, reqs[i])
	}
	m.rate.observe(now, len(reqs))
	m.update(now, Past)
	m.publish()
	return &m.out
}

// Tick re-evaluates the candidate; call it at WakeAt (calling it earlier is
// harmless).
func (m *ModelCore) Tick(now Time) *ModelOutput {
	now = m.clamp(now)
	m.out.reset()
	m.update(now, Past)
	m.publish()
	return &m.out
}

// Grant answers the RankCore's grant g of a GPU, which is free from
// g.FreeAt (the paper's granted_gpu). It plans the best batch that fits on
// that GPU, or hands the GPU back unused if nothing fits. The output holds
// exactly one GPUReturn, which the caller must pass to RankCore.Return.
func (m *ModelCore) Grant(now Time, g Grant) *ModelOutput {
	now = m.clamp(now)
	m.out.reset()
	m.updateFor(now, g.FreeAt, g.GPUs)
	ret := GPUReturn{Model: m.cfg.ID, GPU: g.GPU, FreeAt: MaxTime(now, g.FreeAt)}
	if c := m.cand; c.Valid() {
		at := c.ExecAt
		if g.Backfill && c.Backfill || g.Early {
			at = MaxTime(now.Add(m.cfg.Delays.Dispatch(c.BatchSize)), g.FreeAt)
		}
		ret.FreeAt, ret.Used = m.plan(now, g.GPU, c.BatchSize, at), true
	}
	return m.answer(ret)
}

// GrantBatch answers grant g as Grant does, but with a batch the caller
// chose instead of the one the core's rules would form: it drops the skip
// earliest-deadline requests (DropPruned) and plans the next size requests
// on g's GPU, to start as soon as the GPU is free and their inputs can
// arrive, without the symphony policy's hold for sched_at. The core keeps
// its own bookkeeping (plan IDs, candidate versions, the GPUReturn) as for
// any grant, so the caller goes on driving it as usual.
//
// It exists for what-if exploration: bench/lookahead's clairvoyant
// reference tries, on clones of the core, the batches the rules did not
// choose (other heads dropped, a smaller batch, an earlier start) and plays
// each forward, which needs the real core to carry out a choice rather than
// a copy of its rules. LargestBatch gives the sizes it accepts.
//
// It returns an error, and changes nothing, if skip and size do not name
// queued requests, size exceeds the profile's largest batch, or the batch
// would finish after its first request's deadline less the result delay;
// the grant is then still to be answered.
func (m *ModelCore) GrantBatch(now Time, g Grant, skip, size int) (*ModelOutput, error) {
	now = MaxTime(now, m.lastNow)
	if largest := m.LargestBatch(now, g.FreeAt, skip); size < 1 || size > largest {
		return nil, fmt.Errorf("scheduler: model %q: no batch of %d behind %d dropped requests of %d fits on GPU %d (free at %v) at %v; at most %d",
			m.cfg.Name, size, skip, m.queue.len(), g.GPU, g.FreeAt, now, largest)
	}
	now = m.clamp(now)
	m.out.reset()
	m.dropHeads(skip)
	execAt := MaxTime(now.Add(m.cfg.Delays.Dispatch(size)), g.FreeAt)
	freeAt := m.plan(now, g.GPU, size, execAt)
	return m.answer(GPUReturn{Model: m.cfg.ID, GPU: g.GPU, FreeAt: freeAt, Used: true}), nil
}

// LargestBatch is the most requests behind the skip earliest-deadline ones
// that, dispatched now to a GPU free at gpuFreeAt, finish by the first of
// them's deadline less the result delay (at most the profile's largest
// batch): GrantBatch accepts sizes 1 to this for that skip. It is 0 if
// skip does not name a queued request or not even that request fits
// alone. It changes nothing. It exists so that a caller exploring
// alternatives to the rules' batch (bench/lookahead's clairvoyant
// reference) asks the core what fits rather than re-deriving it.
func (m *ModelCore) LargestBatch(now, gpuFreeAt Time, skip int) int {
	n := m.queue.len()
	if skip < 0 || skip >= n {
		return 0
	}
	now = MaxTime(now, m.lastNow)
	hi := min(n-skip, m.cfg.Profile.MaxBatch())
	if !m.queue.multiLevel() {
		return m.largestFitIn(now, gpuFreeAt, m.execDeadline(m.queue.at(skip)), 0, hi)
	}
	// Across levels the window is not in deadline order: each size is
	// held to its own earliest deadline (which only falls as it grows).
	k, dl := 0, Never
	for k < hi {
		dl = MinTime(dl, m.queue.at(skip+k).Deadline)
		if !m.fits(now, gpuFreeAt, dl.Add(-m.cfg.Delays.Result), k+1) {
			break
		}
		k++
	}
	return k
}

// plan moves the bs earliest-deadline requests into a batch on gpu that
// starts at execAt, re-forms the candidate from what is left, and returns
// when the batch finishes.
func (m *ModelCore) plan(now Time, gpu GPUID, bs int, execAt Time) Time {
	start := len(m.out.requestBuf)
	multi := m.queue.multiLevel()
	m.out.requestBuf = m.queue.popInto(m.out.requestBuf, bs)
	if multi {
		// Taken level by level; the plan lists them in deadline order.
		slices.SortStableFunc(m.out.requestBuf[start:], func(a, b Request) int { return cmp.Compare(a.Deadline, b.Deadline) })
	}
	m.nextPlan++
	finish := execAt.Add(m.cfg.Profile.Latency(bs))
	m.out.Plans = append(m.out.Plans, BatchPlan{
		ID:        PlanID(uint64(m.cfg.ID)<<40 | m.nextPlan),
		Model:     m.cfg.ID,
		GPU:       gpu,
		GrantedAt: now,
		ExecAt:    execAt,
		FinishAt:  finish,
		Requests:  m.out.requestBuf[start:],
	})
	m.update(now, Past)
	return finish
}

// answer completes a grant's output: the candidate after the grant under a
// new version, and ret, which hands the GPU back to the RankCore.
func (m *ModelCore) answer(ret GPUReturn) *ModelOutput {
	m.publishVersion()
	ret.Candidate = m.cand
	m.out.Returns = append(m.out.Returns, ret)
	return &m.out
}

// Clone returns a deep copy of the core: its queue, candidate, rate
// estimate and plan numbering, sharing no mutable state with m, so that
// feeding the copy changes nothing in m and the reverse (the profile, which
// no core ever changes, is shared). It exists for what-if exploration:
// bench/lookahead's clairvoyant reference clones the real cores at each
// decision and plays every alternative forward on its own copy; tests use
// it the same way. The clone starts with an empty output of its own: m's
// last output stays m's.
func (m *ModelCore) Clone() *ModelCore {
	c := *m
	c.queue = m.queue.clone()
	c.out = ModelOutput{}
	return &c
}

// DropAll ends every queued request with reason, for shutdown.
func (m *ModelCore) DropAll(now Time, reason DropReason) *ModelOutput {
	now = m.clamp(now)
	m.out.reset()
	for m.queue.len() > 0 {
		m.out.Drops = append(m.out.Drops, Drop{Request: m.queue.popFront(), Reason: reason})
	}
	m.update(now, Past)
	m.publish()
	return &m.out
}

// publish bumps the candidate's version if it changed since last published.
func (m *ModelCore) publish() {
	c := m.cand
	p := m.published
	if c.BatchSize == p.BatchSize && c.ExecAt == p.ExecAt && c.Backfill == p.Backfill && c.InvalidAfter == p.InvalidAfter && c.Deadline == p.Deadline && c.Priority == p.Priority {
		m.cand.Version = p.Version
		m.out.Candidate = m.cand
		return
	}
	m.publishVersion()
}

// publishVersion always publishes the candidate under a new version; a
// grant's answer needs one so that the RankCore can order it after every
// update sent before it.
func (m *ModelCore) publishVersion() {
	m.cand.Version = m.published.Version + 1
	m.published = m.cand
	m.out.Candidate = m.cand
	m.out.CandidateChanged = true
}

// EarlyCostLimit bounds what a held batch started early may cost in GPU
// time per request, over what it would at its ExecAt (Candidate.EarlyCheap).
const EarlyCostLimit = 1.1

// earlyCheap is Candidate.EarlyCheap for a batch of bs held until execAt
// that could start at earliest: ℓ(bs)/bs ≤ EarlyCostLimit·ℓ(e)/e, e the
// batch expected at execAt, bs plus the arrivals at the model's rate until
// then, at most the profile's largest batch.
func (m *ModelCore) earlyCheap(now Time, bs int, execAt, earliest Time) bool {
	if execAt <= earliest {
		return true
	}
	p := m.cfg.Profile
	e := bs + int(m.rate.perSecond(now)*execAt.Sub(now).Seconds())
	e = max(min(e, p.MaxBatch()), bs)
	return float64(p.Latency(bs))*float64(e) <= EarlyCostLimit*float64(p.Latency(e))*float64(bs)
}

// execDeadline is when a request's batch must finish executing.
func (m *ModelCore) execDeadline(r *Request) Time { return r.Deadline.Add(-m.cfg.Delays.Result) }

// update is update_candidate of Appendix C for "any GPU, now": see updateFor.
func (m *ModelCore) update(now Time, gpuFreeAt Time) { m.updateFor(now, gpuFreeAt, notGranted) }

// notGranted is updateFor's gpus argument when no GPU is in hand.
const notGranted = -1

// updateFor is update_candidate of Appendix C: it drops requests that cannot
// make their deadline even alone, then builds the largest earliest-deadline
// prefix that can still finish in time on a GPU free at gpuFreeAt (Past for
// "any GPU, now"), and decides when it wants to run. A gpus of 0 or more
// means a GPU is in hand, granted by a rank loop with that many GPUs
// online, and under DropWindow the head may be pruned for a bigger batch;
// without one (notGranted), nothing is pruned, since the GPU that finally
// comes may still serve the head.
func (m *ModelCore) updateFor(now Time, gpuFreeAt Time, gpus int) {
	soonestEnd := MaxTime(now.Add(m.dispatch1), gpuFreeAt).Add(m.tailEll1)
	for l := range m.queue.levels {
		q := &m.queue.levels[l].q
		for q.len() > 0 {
			if soonestEnd <= m.execDeadline(q.front()) {
				break
			}
			m.out.Drops = append(m.out.Drops, Drop{Request: q.popFront(), Reason: DropDeadline})
		}
	}
	if m.queue.len() == 0 {
		m.cand = Candidate{Version: m.cand.Version}
		m.wakeAt = Never
		return
	}
	var bs int
	var dl Time
	if !m.queue.multiLevel() {
		dl = m.execDeadline(m.queue.front())
		bs = m.largestFit(now, gpuFreeAt, dl)
		if gpus != notGranted && m.drop == DropWindow && bs < m.queue.len() && bs < m.cfg.Profile.MaxBatch() {
			bs = m.pruneToKeepUp(now, gpuFreeAt, bs, gpus, m.rate.perSecond(now))
			bs = m.pruneWindow(now, gpuFreeAt, bs)
			dl = m.execDeadline(m.queue.front())
		}
	} else {
		bs, dl = m.updateLevels(now, gpuFreeAt, gpus)
	}
	delays := m.cfg.Delays
	earliest := MaxTime(now.Add(delays.Dispatch(bs)), gpuFreeAt)
	invalidAfter := dl.Add(-m.tailLatency(bs))
	execAt, backfill := earliest, false
	if m.cfg.Policy == PolicySymphony && (m.cfg.Schedulable != SchedulableBetaLambda || float64(bs) < m.beta*m.rate.perSecond(now)) {
		// Fewer than βλ requests (or βλ disabled): waiting for one more
		// saves more than the idle time costs (§4.3), so hold the batch
		// until sched_at, the last moment it could still take one more.
		schedAt := dl.Add(-m.tailLatency(bs + 1))
		execAt = MaxTime(earliest, schedAt)
		backfill = execAt > earliest && m.backfills(now, bs)
	}
	m.cand = Candidate{BatchSize: bs, ExecAt: execAt, Backfill: backfill, InvalidAfter: invalidAfter, EarlyCheap: m.earlyCheap(now, bs, execAt, earliest), Deadline: dl, Priority: m.queue.front().Priority, Version: m.cand.Version}
	// Past this instant a grant can no longer start bs requests in time.
	m.wakeAt = invalidAfter.Add(-delays.Dispatch(bs) + 1)
}

// backfills reports whether a held batch of bs requests may start at once
// on a GPU that would otherwise idle (Candidate.Backfill): whether holding
// it cannot pay. §4.3's test is that waiting for one more request pays
// only while b < βλ: the wait, 1/λ, is shorter than the fixed cost per
// request it saves, β/b. Under the sched-at default that test alone is
// not enough: λ is a one-second mean, and within a burst requests come
// much faster, so a strongly batching model would start small batches
// just before the burst filled them (every such batch runs β for a
// handful of requests, and the GPUs it holds are missing when the burst
// lands). So only a weakly batching model backfills (β ≤ α, cached in
// m.weak): for it, a request added to a later batch still costs that
// batch α ≥ β, so the most a batch run early can waste, β, never exceeds
// what it saves the later batch. For it, holding a batch that cannot grow
// in time is only idle GPU time taken from the requests to come, which
// work-conserving scheduling would have used.
func (m *ModelCore) backfills(now Time, bs int) bool {
	return m.weak && float64(bs) >= m.beta*m.rate.perSecond(now)
}

// updateLevels forms the batch when requests of several priority levels are
// queued: the highest level's requests first, in deadline order, then the
// next level's, as many as still let the whole batch meet its earliest
// deadline. A lower level absorbs an overload before any request of a
// higher one is pruned: it gets the GPU time the higher levels leave, and
// its requests end by their deadlines when they leave none. The highest
// level is pruned under DropWindow only when it cannot keep up on its own:
// when the batch its head allows, run back to back on the rank loop's gpus,
// serves less than the level's own arrival rate (pruneToKeepUp's test), or
// holds under levelPruneFraction of the batch a request arriving now could
// join (its head has waited so long that its batches shrink: the start of
// the cascade the pruning rules stop). It is then the overloaded queue the
// pruning rules are for, and they see it alone. It returns the batch size
// and the batch's execution deadline.
func (m *ModelCore) updateLevels(now, gpuFreeAt Time, gpus int) (int, Time) {
	if gpus > 0 && m.drop == DropWindow {
		m.queue.topOnly = true
		k0 := m.largestFit(now, gpuFreeAt, m.execDeadline(m.queue.front()))
		lambda := m.queue.topRate(now)
		if k0 < m.queue.len() && k0 < m.cfg.Profile.MaxBatch() && (float64(gpus)*m.cfg.Profile.Throughput(k0) < lambda ||
			float64(k0) < levelPruneFraction*float64(m.freshBatch(now, gpuFreeAt, m.queue.at(m.queue.len()-1)))) {
			k0 = m.pruneToKeepUp(now, gpuFreeAt, k0, gpus, lambda)
			m.pruneWindow(now, gpuFreeAt, k0)
		}
		m.queue.topOnly = false
	}
	bs := m.largestPrefixFit(now, gpuFreeAt)
	return bs, m.queue.prefixDeadline(bs).Add(-m.cfg.Delays.Result)
}

// levelPruneFraction: with several priority levels queued, the highest
// level is pruned once its head's batch is under this fraction of a fresh
// request's (updateLevels). Higher prunes prioritized requests under
// moderate overload; lower lets the level cascade into small batches when
// its own load nears the GPUs' capacity. The value was chosen in the
// simulator on testdata/workloads/priority.yaml at 1.7 to 5 times its
// capacity, trying 0.1 to 0.3 (docs/benchmarks.md, "Priority levels").
const levelPruneFraction = 0.2

// largestPrefixFit is the largest k (at least 1) such that the k requests
// at the front of the queue, dispatched now to a GPU free at gpuFreeAt,
// finish by the earliest of their deadlines. That deadline only falls and
// the run time only grows as k grows, so a binary search works.
func (m *ModelCore) largestPrefixFit(now, gpuFreeAt Time) int {
	lo, hi := 1, min(m.queue.len(), m.cfg.Profile.MaxBatch()) // 1 fits: the front survived the drop loop
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if m.fits(now, gpuFreeAt, m.queue.prefixDeadline(mid).Add(-m.cfg.Delays.Result), mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// pruneWindow looks for a later window start that gives a bigger batch than
// the k0 requests that fit behind the current head, and drops the requests
// before the best one. It returns the new batch size.
//
// It is called with a GPU in hand whose free time limits the head: the GPU
// came too late for it. Serving the head anyway would run a small,
// inefficient batch and make every request behind it later still, which is
// how work-conserving schedulers collapse under overload. A window that is
// limited by the queue's length rather than its head's deadline could still
// grow, so taking it would only trade the head for a wait: then the head is
// kept.
func (m *ModelCore) pruneWindow(now, gpuFreeAt Time, k0 int) int {
	bestI, bestK, shortOfRequests := m.largestWindow(now, gpuFreeAt, k0)
	if shortOfRequests {
		return k0
	}
	if bestK-k0 <= bestI && float64(k0) >= pruneKeepFraction*float64(bestK) {
		// The head's batch is nearly as big as the best, and dropping
		// would lose at least as many requests as the batch gains: keep it.
		return k0
	}
	m.dropHeads(bestI)
	return bestK
}

// largestWindow finds the window start i ≥ 1 behind which the biggest batch
// fits on a GPU free at gpuFreeAt, if it is bigger than k0, the batch behind
// the head: the fewest heads to drop for the biggest batch. It returns
// (0, k0) if no window is bigger. shortOfRequests says that the best
// window is limited by the queue's length, not by its head's deadline: it
// could still grow, so taking it would only trade the head for a wait.
// Deadlines grow along the queue, so the batch that fits behind position i
// only grows with i, and one pass with a growing k finds every window's
// size.
func (m *ModelCore) largestWindow(now, gpuFreeAt Time, k0 int) (bestI, bestK int, shortOfRequests bool) {
	n := m.queue.len()
	maxB := m.cfg.Profile.MaxBatch()
	bestI, bestK = 0, k0
	k := k0
	for i := 1; i < n && n-i > bestK; i++ {
		dl := m.execDeadline(m.queue.at(i))
		limit := min(n-i, maxB)
		for k < limit && m.fits(now, gpuFreeAt, dl, k+1) {
			k++
		}
		if kk := min(k, limit); kk > bestK {
			bestI, bestK = i, kk
		}
		if k >= maxB {
			break
		}
	}
	shortOfRequests = bestI > 0 && bestK < maxB && m.fits(now, gpuFreeAt, m.execDeadline(m.queue.at(bestI)), bestK+1)
	return bestI, bestK, shortOfRequests
}

// dropHeads prunes the i earliest-deadline requests.
func (m *ModelCore) dropHeads(i int) {
	for ; i > 0; i-- {
		m.out.Drops = append(m.out.Drops, Drop{Request: m.queue.popFront(), Reason: DropPruned})
	}
}

// pruneToKeepUp drops head requests when the batch that includes them, k0,
// is smaller than the keep-up batch: the smallest batch size at which the
// rank loop's gpus GPUs, running this model's batches back to back, serve
// its arrival rate λ (N·b/ℓ(b) ≥ λ, the throughput condition of §4.2 Eq. 3;
// for ℓ(b) = αb + β, b ≥ βλ/(N − αλ)). It drops the fewest heads that
// leave a window of at least that many requests which can still run in
// time on the GPU in hand, and returns the new batch size (k0 if it drops
// nothing).
//
// It is called with a GPU in hand and a backlog: the queue holds more than
// the head's batch, because the head has waited so long that only a small
// batch still meets its deadline. A batch below the keep-up size serves
// fewer requests per GPU-second than arrive, so the backlog grows, the
// next head has waited longer still and its batch is smaller again: the
// cascade that ends in dropping a whole window of requests at once.
// Dropping the head or two that stand in the way keeps batches at a size
// the GPUs can sustain, and the backlog drains.
//
// When not even the largest batch that a request arriving now could join
// keeps up, the load is beyond what the GPUs can serve and requests will be
// lost whatever the schedule: then every GPU-second should serve as many
// requests as it can, and the heads go for the largest window that its
// deadline limits (the flat top of §4.4).
//
// The keep-up size is a lower bound where other models share the GPUs
// (they get some of the gpus), so the rule then prunes less than a full
// accounting would. If no window of the keep-up size fits, it prunes
// nothing and pruneWindow decides alone.
func (m *ModelCore) pruneToKeepUp(now, gpuFreeAt Time, k0, gpus int, lambda float64) int {
	if gpus <= 0 {
		return k0
	}
	prof := m.cfg.Profile
	keepsUp := func(b int) bool { return float64(gpus)*prof.Throughput(b) >= lambda }
	if keepsUp(k0) {
		return k0
	}
	n := m.queue.len()
	fresh := m.freshBatch(now, gpuFreeAt, m.queue.at(n-1))
	if fresh == 0 || !keepsUp(fresh) {
		bestI, bestK, shortOfRequests := m.largestWindow(now, gpuFreeAt, k0)
		if shortOfRequests {
			return k0
		}
		m.dropHeads(bestI)
		return bestK
	}
	keep := k0 + 1
	for keep < fresh && !keepsUp(keep) {
		keep++
	}
	// Whether a window of keep fits behind position i only turns from
	// false to true as i grows: find the first i where it does.
	lo, hi := 1, n-keep+1 // hi: no window of keep requests left
	for lo < hi {
		mid := (lo + hi) / 2
		if m.fits(now, gpuFreeAt, m.execDeadline(m.queue.at(mid)), keep) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if lo > n-keep {
		return k0
	}
	m.dropHeads(lo)
	return m.largestFit(now, gpuFreeAt, m.execDeadline(m.queue.front()))
}

// freshBatch is the largest batch that a request arriving now, with the
// same time to its deadline as r had on arrival (its SLO), could join on a
// GPU free at gpuFreeAt: the most any batch of this model can hold from
// now on.
func (m *ModelCore) freshBatch(now, gpuFreeAt Time, r *Request) int {
	dl := now.Add(r.Deadline.Sub(r.Arrival) - m.cfg.Delays.Result)
	return m.largestFitIn(now, gpuFreeAt, dl, 0, m.cfg.Profile.MaxBatch())
}

// pruneKeepFraction: when a GPU is granted, DropWindow keeps the head if its
// batch is at least this fraction of the best window's and dropping would
// lose at least as many requests as the batch gains. A higher fraction
// prunes more heads for a bigger batch near peak load, a lower one keeps
// small batches; the value was chosen in the simulator on the Table 4
// ResNet50 goodput and the flat top's bad rate (docs/benchmarks.md,
// "Table 4" and "Flat top", with the commands and what 0.7 and 0.8 gave).
const pruneKeepFraction = 0.6

// fits reports whether a batch of k requests dispatched now to a GPU free at
// gpuFreeAt finishes by dl.
func (m *ModelCore) fits(now, gpuFreeAt, dl Time, k int) bool {
	start := MaxTime(now.Add(m.cfg.Delays.Dispatch(k)), gpuFreeAt)
	return start.Add(m.tailLatency(k)) <= dl
}

// largestFit returns the largest k (at least 1) such that a batch of the k
// earliest-deadline requests, dispatched now to a GPU free at gpuFreeAt,
// finishes by dl. The finish time grows with k, so a binary search works.
func (m *ModelCore) largestFit(now, gpuFreeAt, dl Time) int {
	n := m.queue.len()
	if mb := m.cfg.Profile.MaxBatch(); n > mb {
		n = mb
	}
	return m.largestFitIn(now, gpuFreeAt, dl, 1, n) // fits(1) holds: the head survived the drop loop
}

// largestFitIn returns the largest k in [lo, hi] for which fits holds,
// given that it holds for lo (lo = 0 stands for "none"). The finish time
// grows with k, so a binary search works.
func (m *ModelCore) largestFitIn(now, gpuFreeAt, dl Time, lo, hi int) int {
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if m.fits(now, gpuFreeAt, dl, mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

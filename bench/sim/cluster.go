package sim

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/symphony-serving/symphony/backend"
	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/gpuwatch"
	"github.com/symphony-serving/symphony/scheduler/service"
	"github.com/symphony-serving/symphony/transport"
)

// A fault scenario needs more than instant GPUs: a fault hits a process,
// and what follows depends on what each process holds at that moment. So a
// run with faults models the processes of the live cluster that `symphony
// demo` starts (bench/cluster): one scheduler, the backends of
// Cluster.Backends, and the load's one frontend, each with the state the
// live one keeps and the messages between them. The scheduler is the real
// cores (symphonyEngine) and a real gpuwatch.Watcher in virtual time; the
// backends, the frontend and the scheduler service's glue around the cores
// are modelled after backend/agent.go, frontend/client.go and
// scheduler/service/service.go. Each GPU follows its real timeline: a plan
// starts at its ExecAt or when the GPU frees, whichever is later, never
// during its backend's stall, and a request ends when its frontend hears
// of it (or at its deadline), not when it is planned. docs/workload-format.md
// ("Faults") says what each fault does.
//
// Messages travel at once, as in the fault-free simulator, except results
// and a backend's drop notices, which take the network's result delay; a
// stalled process receives what is sent to it when its stall ends.

// Constants of the live processes the model follows.
var (
	// redial paces the backends' and the frontend's reconnections to the
	// scheduler; the simulator draws no jitter.
	redial = transport.DefaultBackoff()
)

const (
	// heartbeat is how often a backend tells the scheduler it is alive.
	heartbeat = backend.DefaultHeartbeat
	// watchPeriod is how often the scheduler ticks its gpuwatch.Watcher.
	watchPeriod = service.WatchPeriod
	// dialTimeout is how long a backend or frontend waits for the
	// scheduler's Welcome (backend.dialScheduler, frontend.dialScheduler).
	dialTimeout = 5 * time.Second
)

// The live load generator's names for how a request went wrong
// (bench/loadgen failKind, frontend.DropReason), so that a simulated fault
// report compares with a live one.
const (
	reasonExpired        = string(frontend.DropExpired)
	reasonDeadline       = string(frontend.DropDeadline)
	reasonBackendLost    = "failed: backend: backend lost"
	reasonBackendStalled = "failed: backend: backend stalled"
	reasonSchedulerLost  = "failed: scheduler lost"
	reasonNotConnected   = "failed: not connected"
	reasonClosed         = "failed: closed"
)

// liveDropName is the live name of a scheduler drop reason: the frontend
// calls the window policy's pruning "overload".
func liveDropName(r scheduler.DropReason) string {
	switch r {
	case scheduler.DropPruned:
		return string(frontend.DropOverload)
	case scheduler.DropShutdown:
		return string(frontend.DropShutdown)
	}
	return reasonDeadline
}

// event is something a process does at a moment of virtual time. Events at
// one moment run in the order they were scheduled, the frontend's deadline
// timers (late) after everything else.
type event struct {
	at   scheduler.Time
	late bool
	seq  uint64
	fn   func()
}

func (a *event) before(b *event) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	if a.late != b.late {
		return !a.late
	}
	return a.seq < b.seq
}

// eventQueue is a binary min-heap of events.
type eventQueue []event

func (q *eventQueue) push(e event) {
	*q = append(*q, e)
	h := *q
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h[i].before(&h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *eventQueue) pop() event {
	h := *q
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h[n] = event{}
	h = h[:n]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && h[l].before(&h[m]) {
			m = l
		}
		if r < n && h[r].before(&h[m]) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
	return top
}

// What can happen at one moment, in the order it runs: process events
// (faults, GPUs, messages), arrivals, the scheduler's cores, its gpuwatch
// tick, and last the frontend's deadline timers, so that an answer that
// comes exactly at its request's deadline is in time.
const (
	classEvent = iota
	classArrival
	classCores
	classWatch
	classDeadline
	classNone
)

// reqState is what the model keeps of one request.
type reqState struct {
	arrival, deadline scheduler.Time
	model             int32
	priority          scheduler.Priority
	// sess is the frontend's scheduler session the request was sent on;
	// 0 if it never was.
	sess uint32
	// ended: the frontend has ended it. lost: its session closed while
	// it waited, so it ends at its deadline as "scheduler lost" unless an
	// answer comes first.
	ended, lost bool
	// left: the scheduler has handed it on (planned or dropped it) or
	// lost it with its queues. ran: a GPU ran it.
	left, ran bool
}

// job is a plan on its way through a backend's GPU.
type job struct {
	plan  scheduler.PlanID
	model int
	// sess is the backend's scheduler session the plan came on: a plan of
	// a session that has ended is skipped (backend runJob).
	sess   uint32
	execAt scheduler.Time
	reqs   []scheduler.RequestID // the plan's tasks, by deadline
	// inputsAt is when the inputs can be in: at once, or when the
	// frontend's stall ends.
	inputsAt scheduler.Time
	noInputs bool // they came too late for every task

	running         bool
	dead            bool // its backend was killed
	started, finish scheduler.Time
	run             []scheduler.RequestID
	// from is when the batch's current stretch of progress began (its
	// start, or its backend's resumption), for the GPU's busy time.
	from scheduler.Time
	gen  uint64 // bumped when finish moves, so that a stale finish is ignored
}

// gpuSim is one GPU's real timeline: the plans its backend holds, in the
// order received, and the one waiting to start or running.
type gpuSim struct {
	queue      []*job
	cur        *job
	lastFinish scheduler.Time
}

// redialer is transport.KeepDialing's pacing: after a session ends, wait
// the next backoff step (from the first again after a session that lasted
// longer than the backoff's maximum).
type redialer struct {
	attempt int
	began   scheduler.Time
	// waiting is the stalled scheduler a dial waits on for its Welcome.
	waiting *schedProc
}

func (r *redialer) next(now scheduler.Time) scheduler.Time {
	if now.Sub(r.began) > redial.Max {
		r.attempt = 0
	}
	wait := redial.Delay(r.attempt, nil)
	r.attempt++
	return now.Add(wait)
}

// backendProc is one backend process (backend.Agent).
type backendProc struct {
	gen        int // bumped at each start, so that an old process's retries do nothing
	idx        int
	first      scheduler.GPUID
	n          int
	alive      bool
	sess       uint32     // its scheduler session; 0 while not connected
	sched      *schedProc // the scheduler of sess
	stallUntil scheduler.Time
	hbMissed   bool // a heartbeat fell in its stall: it goes out on resumption
	draining   bool
	leaveOK    bool
	// after a drain: whether a new backend starts, and how long after.
	restarts     bool
	restartAfter time.Duration
	rd           redialer
}

func (b *backendProc) stalled(now scheduler.Time) bool { return now < b.stallUntil }

// schedBackend is what the scheduler knows of one backend.
type schedBackend struct {
	sess             uint32 // 0: not connected
	id               gpuwatch.BackendID
	leaving, leaveOK bool
}

// sentPlan is a plan sent to a backend and not yet reported.
type sentPlan struct {
	id    scheduler.PlanID
	model int
	reqs  []scheduler.RequestID
}

type schedState uint8

const (
	schedUp schedState = iota
	schedDraining
	schedDown
)

// schedProc is one scheduler process (scheduler/service): the cores, the
// Watcher, and what the service keeps of its connections and plans.
type schedProc struct {
	cl         *cluster
	state      schedState
	started    scheduler.Time // the origin of its Watcher's tick grid
	stallUntil scheduler.Time
	backlog    []func() // messages that came during a stall
	eng        *symphonyEngine
	watch      *gpuwatch.Watcher
	frontends  map[uint32]bool
	backs      []schedBackend
	out        [][]*sentPlan // per GPU: plans sent and not yet reported, in order
	inFlight   int
	nextID     gpuwatch.BackendID
	// after a drain: whether a new scheduler starts, and how long after.
	restarts     bool
	restartAfter time.Duration
}

func (s *schedProc) stalled(now scheduler.Time) bool { return now < s.stallUntil }

func (s *schedProc) rank() *scheduler.RankCore { return s.eng.ranks[0] }

// frontendProc is the load's frontend (frontend.Client).
type frontendProc struct {
	gen      int // bumped at each start, as backendProc.gen
	alive    bool
	draining bool
	// sess is its scheduler session; 0 while not connected. closing: its
	// scheduler is draining and takes no new tasks.
	sess         uint32
	closing      bool
	stallUntil   scheduler.Time
	inbox        []func()              // what came during a stall
	outbox       []scheduler.RequestID // tasks made during a stall
	restarts     bool
	restartAfter time.Duration
	rd           redialer
}

func (f *frontendProc) stalled(now scheduler.Time) bool { return now < f.stallUntil }

// cluster is the model of a live cluster's processes under a fault
// scenario. See the comment at the top of the file.
type cluster struct {
	w      *workload.Workload
	acct   *accounting
	now    scheduler.Time
	events eventQueue
	seq    uint64

	each         int // GPUs per backend
	maxSLO       time.Duration
	stallAfter   time.Duration
	drainTimeout time.Duration
	result       time.Duration

	sched    *schedProc
	backends []*backendProc
	gpus     []gpuSim
	fe       *frontendProc
	reqs     []reqState
	pending  int
	nextSess uint32
	// rotation records each GPU leaving or joining the rank's rotation,
	// for tests; online is each GPU's state now.
	rotation []rotationChange
	online   []bool
}

// rotationChange is a GPU leaving rotation (Online false) or joining it.
type rotationChange struct {
	At     scheduler.Time
	GPU    scheduler.GPUID
	Online bool
	Why    string
}

func (cl *cluster) rotate(g scheduler.GPUID, online bool, why string) {
	if cl.online[g] == online {
		return
	}
	cl.online[g] = online
	cl.rotation = append(cl.rotation, rotationChange{At: cl.now, GPU: g, Online: online, Why: why})
}

// runCluster simulates a workload with a fault scenario.
func runCluster(w *workload.Workload, opts Options) (*report.Report, error) {
	cl, err := newCluster(w)
	if err != nil {
		return nil, err
	}
	if err := cl.run(opts); err != nil {
		return nil, err
	}
	if err := cl.acct.check(); err != nil {
		return nil, err
	}
	return cl.acct.build(), nil
}

// newCluster starts the processes of the cluster for w, and schedules its
// faults.
func newCluster(w *workload.Workload) (*cluster, error) {
	switch {
	case w.Policy == scheduler.PolicyNexus:
		return nil, errors.New("sim: faults: the nexus policy has no live cluster to model; use symphony, work-conserving or clockwork")
	case w.Epoch != nil:
		return nil, errors.New("sim: faults: the live cluster runs no epoch job; a workload with faults cannot have one")
	}
	interval := w.AutoscaleWindow
	if interval <= 0 {
		interval = time.Second
	}
	acct := newAccounting(w, interval)
	acct.tally = report.NewFaultTally(w, w.Warmup, w.Warmup+w.Duration, w.Warmup+w.Duration)
	nb, each := w.Cluster.Backends()
	cl := &cluster{w: w, acct: acct, each: each, result: w.Network.Result,
		gpus: make([]gpuSim, w.Cluster.GPUs), online: make([]bool, w.Cluster.GPUs)}
	for i := range w.Models {
		cl.maxSLO = max(cl.maxSLO, w.Models[i].SLO)
	}
	// The scheduler service's defaults (service.Start).
	cl.stallAfter = max(cl.maxSLO, gpuwatch.DefaultStallAfter)
	cl.drainTimeout = cl.maxSLO + service.DrainMargin
	for i := range cl.gpus {
		cl.gpus[i].lastFinish = scheduler.Past
	}
	if err := cl.startScheduler(); err != nil {
		return nil, err
	}
	for i := range nb {
		b := &backendProc{idx: i, first: scheduler.GPUID(i * each), n: each}
		cl.backends = append(cl.backends, b)
		cl.startBackend(b)
	}
	cl.fe = &frontendProc{}
	cl.startFrontend()
	for _, f := range w.Faults {
		cl.at(scheduler.Time(f.At), func() { cl.fault(f) })
	}
	return cl, nil
}

// run plays the load and the events to the end: until every request has
// ended and the measured window is over.
func (cl *cluster) run(opts Options) error {
	end := scheduler.Time(cl.w.Warmup + cl.w.Duration)
	gen := workload.NewGenerator(cl.w, time.Duration(end))
	// Every request ends by its deadline: one still pending well after the
	// last deadline is a fault of the model.
	limit := end.Add(cl.maxSLO + time.Second)
	var steps uint64
	for {
		m, ta, more := gen.Peek()
		t, class := scheduler.Never, classNone
		consider := func(at scheduler.Time, c int) {
			at = scheduler.MaxTime(at, cl.now)
			if at < t || at == t && c < class {
				t, class = at, c
			}
		}
		if len(cl.events) > 0 {
			e := &cl.events[0]
			c := classEvent
			if e.late {
				c = classDeadline
			}
			consider(e.at, c)
		}
		if more {
			consider(ta, classArrival)
		}
		if s := cl.sched; s.state != schedDown && !s.stalled(cl.now) {
			if s.state == schedUp {
				if at := s.eng.wakeAt(); at != scheduler.Never {
					consider(at, classCores)
				}
			}
			if at := s.tickAt(cl.now); at != scheduler.Never {
				consider(at, classWatch)
			}
		}
		if class == classNone || !more && cl.pending == 0 && t >= end {
			break
		}
		if t > limit {
			return fmt.Errorf("sim: oracle: %d requests still pending at %v, after every deadline", cl.pending, t)
		}
		cl.now = t
		switch class {
		case classEvent, classDeadline:
			cl.events.pop().fn()
		case classArrival:
			gen.Pop()
			cl.arrive(m)
		case classCores:
			cl.sched.eng.wake(t)
		case classWatch:
			cl.sched.tick()
		}
		if cl.acct.err != nil {
			return cl.acct.err
		}
		steps++
		if opts.Progress != nil && steps%(1<<20) == 0 && more {
			opts.Progress(float64(ta) / float64(end))
		}
	}
	// The batches still running count as busy to their ends.
	for g := range cl.gpus {
		if j := cl.gpus[g].cur; j != nil && j.running {
			cl.acct.busy(j.model, scheduler.GPUID(g), j.from, j.finish)
		}
	}
	return nil
}

// at schedules fn at t (at once if t is past).
func (cl *cluster) at(t scheduler.Time, fn func()) {
	cl.seq++
	cl.events.push(event{at: scheduler.MaxTime(t, cl.now), seq: cl.seq, fn: fn})
}

func (cl *cluster) newSession() uint32 {
	cl.nextSess++
	return cl.nextSess
}

func (cl *cluster) latency(model, bs int) time.Duration {
	return cl.w.Models[model].Profile.Latency(bs)
}

func (cl *cluster) backendOf(g scheduler.GPUID) *backendProc { return cl.backends[int(g)/cl.each] }

// ---- requests and the frontend ----

// arrive is the load's next request, for model m: the frontend takes it
// (frontend.Client.Go) or fails it at once.
func (cl *cluster) arrive(m int) {
	now := cl.now
	r := cl.acct.newRequest(m, now)
	cl.reqs = append(cl.reqs, reqState{arrival: now, deadline: r.Deadline, model: int32(m), priority: r.Priority})
	id := r.ID
	fe := cl.fe
	switch {
	case !fe.alive || fe.draining:
		cl.endAt(id, report.OutcomeFailed, reasonClosed)
		return
	case fe.sess == 0 || fe.closing:
		cl.endAt(id, report.OutcomeFailed, reasonNotConnected)
		return
	}
	rs := &cl.reqs[id]
	rs.sess = fe.sess
	cl.pending++
	// Whatever happens elsewhere, the request ends by its deadline.
	cl.seq++
	cl.events.push(event{at: rs.deadline, late: true, seq: cl.seq, fn: func() { cl.expire(id) }})
	if fe.stalled(now) {
		fe.outbox = append(fe.outbox, id)
		return
	}
	cl.submit(id)
}

// submit sends a request's task to the scheduler of its session.
func (cl *cluster) submit(id scheduler.RequestID) {
	s := cl.sched
	cl.toSched(s, func() { s.task(id) })
}

// expire is a request's deadline timer.
func (cl *cluster) expire(id scheduler.RequestID) {
	rs := &cl.reqs[id]
	switch {
	case rs.ended:
	case rs.lost:
		cl.endAt(id, report.OutcomeFailed, reasonSchedulerLost)
	default:
		cl.endAt(id, report.OutcomeDropped, reasonExpired)
	}
}

// endAt ends a request at the frontend now, bad for reason; a request
// already ended is left as it is (frontend.Client.finish counts such late
// outcomes as duplicates).
func (cl *cluster) endAt(id scheduler.RequestID, o report.Outcome, reason string) {
	cl.end(id, o, reason, 0, 0)
}

func (cl *cluster) end(id scheduler.RequestID, o report.Outcome, reason string, started scheduler.Time, bs int) {
	rs := &cl.reqs[id]
	if rs.ended {
		return
	}
	rs.ended = true
	if rs.sess != 0 {
		cl.pending--
	}
	if cl.now > rs.deadline {
		cl.acct.fail("request %d ended at %v, after its deadline %v", id, cl.now, rs.deadline)
	}
	cl.acct.outcome(id, int(rs.model), rs.priority, rs.arrival, cl.now, started, bs, o, reason)
	if fe := cl.fe; fe.draining && fe.alive && cl.pending == 0 {
		cl.at(cl.now, cl.frontendClose)
	}
}

// toFrontend delivers a message to the frontend: now, or when its stall
// ends; never if it has stopped.
func (cl *cluster) toFrontend(fn func()) {
	fe := cl.fe
	switch {
	case !fe.alive:
	case fe.stalled(cl.now):
		fe.inbox = append(fe.inbox, fn)
	default:
		fn()
	}
}

// answer delivers a batch's results to the frontend, a result delay after
// the batch finished.
func (cl *cluster) answer(run []scheduler.RequestID, started scheduler.Time) {
	cl.at(cl.now.Add(cl.result), func() {
		cl.toFrontend(func() {
			for _, id := range run {
				cl.end(id, report.OutcomeGood, "", started, len(run))
			}
		})
	})
}

// backendDrops delivers a backend's deadline drops to the frontend, a
// result delay from now.
func (cl *cluster) backendDrops(ids []scheduler.RequestID) {
	if len(ids) == 0 {
		return
	}
	cl.at(cl.now.Add(cl.result), func() {
		cl.toFrontend(func() {
			for _, id := range ids {
				cl.endAt(id, report.OutcomeDropped, reasonDeadline)
			}
		})
	})
}

// startFrontend starts a new frontend process, unless one runs.
func (cl *cluster) startFrontend() {
	fe := cl.fe
	if fe.alive {
		return
	}
	*fe = frontendProc{gen: fe.gen + 1, alive: true, rd: redialer{began: cl.now}}
	cl.frontendDial()
}

// frontendRedial has the frontend dial again after its next backoff step.
func (cl *cluster) frontendRedial() {
	fe := cl.fe
	gen := fe.gen
	cl.at(fe.rd.next(cl.now), func() {
		if fe.gen == gen {
			cl.frontendDial()
		}
	})
}

// frontendDial is one connection attempt of the frontend.
func (cl *cluster) frontendDial() {
	fe := cl.fe
	if !fe.alive || fe.sess != 0 {
		return
	}
	gen := fe.gen
	cl.dial(&fe.rd, func() {
		if fe.gen == gen {
			cl.frontendDial()
		}
	}, func(s *schedProc) {
		if !fe.alive || fe.sess != 0 {
			return
		}
		fe.sess = cl.newSession()
		fe.closing = false
		s.frontends[fe.sess] = true
	})
}

// frontendLost is the frontend's side of its scheduler session closing
// (frontend.Client.endSession): the requests sent on it now end at their
// deadlines as "scheduler lost" unless a running batch answers first, and
// the frontend dials again.
func (cl *cluster) frontendLost() {
	fe := cl.fe
	if fe.sess == 0 {
		return
	}
	cl.endSession(fe.sess)
	fe.sess, fe.closing = 0, false
	if fe.alive && !fe.draining {
		cl.frontendRedial()
	}
}

func (cl *cluster) endSession(sess uint32) {
	for i := range cl.reqs {
		if rs := &cl.reqs[i]; rs.sess == sess && !rs.ended {
			rs.lost = true
		}
	}
}

// frontendClose closes a drained frontend once its last request ended.
func (cl *cluster) frontendClose() {
	fe := cl.fe
	if !fe.alive || !fe.draining || cl.pending > 0 {
		return
	}
	cl.frontendStop()
	if fe.restarts {
		cl.at(cl.now.Add(fe.restartAfter), cl.startFrontend)
	}
}

// frontendStop ends the frontend process: its connection closes.
func (cl *cluster) frontendStop() {
	fe := cl.fe
	fe.alive = false
	fe.inbox, fe.outbox = nil, nil
	if sess := fe.sess; sess != 0 {
		s := cl.sched
		cl.toSched(s, func() { delete(s.frontends, sess) })
		fe.sess = 0
	}
}

func (cl *cluster) frontendFault(f workload.Fault) {
	fe := cl.fe
	if !fe.alive {
		return
	}
	now := cl.now
	switch f.Action {
	case workload.FaultKill:
		// frontend.Client.Close: every pending request ends now.
		for i := range cl.reqs {
			if rs := &cl.reqs[i]; rs.sess != 0 && !rs.ended {
				cl.endAt(scheduler.RequestID(i), report.OutcomeFailed, reasonClosed)
			}
		}
		cl.frontendStop()
		if f.Restarts {
			cl.at(now.Add(f.For), cl.startFrontend)
		}
	case workload.FaultStall:
		fe.stallUntil = scheduler.MaxTime(fe.stallUntil, now.Add(f.For))
		cl.at(fe.stallUntil, cl.frontendResume)
	case workload.FaultDrain, workload.FaultRestart:
		fe.draining, fe.restarts, fe.restartAfter = true, f.Restarts, f.For
		cl.at(now, cl.frontendClose)
	case workload.FaultCut:
		if sess := fe.sess; sess != 0 {
			s := cl.sched
			cl.toSched(s, func() { delete(s.frontends, sess) })
			cl.frontendLost()
		}
	}
}

// frontendResume ends a frontend stall: what came during it is received,
// and the tasks made during it are sent.
func (cl *cluster) frontendResume() {
	fe := cl.fe
	if !fe.alive || fe.stalled(cl.now) {
		return
	}
	for len(fe.inbox) > 0 {
		fn := fe.inbox[0]
		fe.inbox = fe.inbox[1:]
		fn()
	}
	out := fe.outbox
	fe.outbox = nil
	for _, id := range out {
		if rs := &cl.reqs[id]; !rs.ended && rs.sess == fe.sess && !rs.lost {
			cl.submit(id)
		}
	}
}

// readable reports whether a backend can still read a request's input:
// its frontend is up and the scheduler has not told the backends that it
// left (backend pull.down).
func (cl *cluster) readable(id scheduler.RequestID) bool {
	return cl.fe.alive && cl.reqs[id].sess == cl.fe.sess
}

// dial is one connection attempt to the scheduler by a backend or the
// frontend (transport.KeepDialing): it succeeds at once if the scheduler
// takes connections, when its stall ends if it is stalled (up to the
// dial timeout), and otherwise retries after the next backoff step.
func (cl *cluster) dial(rd *redialer, again func(), connect func(*schedProc)) {
	now := cl.now
	rd.began = now
	s := cl.sched
	switch {
	case s.state != schedUp:
		cl.at(rd.next(now), again)
	case s.stalled(now) && s.stallUntil.Sub(now) >= dialTimeout:
		cl.at(now.Add(dialTimeout), func() { cl.at(rd.next(cl.now), again) })
	default:
		if s.stalled(now) {
			rd.waiting = s
		}
		cl.toSched(s, func() {
			rd.waiting = nil
			connect(s)
		})
	}
}

// ---- backends and their GPUs ----

// startBackend starts a new process for backend b, unless one runs.
func (cl *cluster) startBackend(b *backendProc) {
	if b.alive {
		return
	}
	*b = backendProc{gen: b.gen + 1, idx: b.idx, first: b.first, n: b.n, alive: true, stallUntil: scheduler.Past, rd: redialer{began: cl.now}}
	cl.backendDial(b)
}

// backendRedial has backend b dial again after its next backoff step.
func (cl *cluster) backendRedial(b *backendProc) {
	gen := b.gen
	cl.at(b.rd.next(cl.now), func() {
		if b.gen == gen {
			cl.backendDial(b)
		}
	})
}

// backendDial is one connection attempt of backend b.
func (cl *cluster) backendDial(b *backendProc) {
	if !b.alive || b.sess != 0 || b.draining {
		return
	}
	gen := b.gen
	cl.dial(&b.rd, func() {
		if b.gen == gen {
			cl.backendDial(b)
		}
	}, func(s *schedProc) {
		if !b.alive || b.sess != 0 || b.draining {
			return
		}
		b.sess, b.sched, b.hbMissed = cl.newSession(), s, false
		// Its GPUs are free once the batch each runs has ended.
		free := make([]scheduler.Time, b.n)
		for k := range free {
			free[k] = scheduler.Past
			if j := cl.gpus[int(b.first)+k].cur; j != nil {
				free[k] = j.finish
				if !j.running {
					free[k] = scheduler.MaxTime(j.execAt, cl.now).Add(cl.latency(j.model, len(j.reqs)))
				}
			}
		}
		s.attach(b, free)
		sess := b.sess
		cl.at(cl.now.Add(heartbeat), func() { cl.heartbeat(b, sess) })
	})
}

// heartbeat is backend b's heartbeat ticker on session sess.
func (cl *cluster) heartbeat(b *backendProc, sess uint32) {
	if !b.alive || b.sess != sess {
		return
	}
	if b.stalled(cl.now) {
		b.hbMissed = true // a stopped process's ticker keeps one tick
	} else {
		cl.sendHeartbeat(b)
	}
	cl.at(cl.now.Add(heartbeat), func() { cl.heartbeat(b, sess) })
}

func (cl *cluster) sendHeartbeat(b *backendProc) {
	s, sess := b.sched, b.sess
	cl.toSched(s, func() { s.heard(b.idx, sess) })
}

// backendLost is backend b's side of its scheduler session closing: the
// plans of that session that have not started will be skipped, and it
// dials again (unless it is draining: then it may leave).
func (cl *cluster) backendLost(b *backendProc) {
	if b.sess == 0 {
		return
	}
	b.sess, b.sched = 0, nil
	if b.draining {
		cl.at(cl.now, func() { cl.backendMaybeExit(b) })
		return
	}
	if b.alive {
		cl.backendRedial(b)
	}
}

// backendClose closes b's scheduler session from b's side: the scheduler
// sees the connection close.
func (cl *cluster) backendClose(b *backendProc) {
	if b.sess == 0 {
		return
	}
	s, sess := b.sched, b.sess
	cl.toSched(s, func() { s.backendGone(b.idx, sess) })
	b.sess, b.sched = 0, nil
}

func (cl *cluster) backendFault(b *backendProc, f workload.Fault) {
	if !b.alive {
		return
	}
	now := cl.now
	switch f.Action {
	case workload.FaultKill:
		cl.backendKill(b)
		if f.Restarts {
			cl.at(now.Add(f.For), func() { cl.startBackend(b) })
		}
	case workload.FaultStall:
		cl.backendStall(b, now.Add(f.For))
	case workload.FaultDrain, workload.FaultRestart:
		if b.draining {
			return
		}
		b.draining, b.restarts, b.restartAfter = true, f.Restarts, f.For
		if b.sess != 0 {
			s, sess := b.sched, b.sess
			cl.toSched(s, func() { s.leaving(b.idx, sess) })
		}
		cl.backendMaybeExit(b)
	case workload.FaultCut:
		if b.sess != 0 {
			cl.backendClose(b)
			cl.backendRedial(b)
		}
	}
}

// backendKill stops b at once, as a crash: the batches it runs are
// abandoned, and the scheduler sees its connection close.
func (cl *cluster) backendKill(b *backendProc) {
	b.alive = false
	for k := range b.n {
		g := b.first + scheduler.GPUID(k)
		gs := &cl.gpus[g]
		if j := gs.cur; j != nil {
			if j.running {
				cl.acct.busy(j.model, g, j.from, scheduler.MinTime(cl.now, j.finish))
			}
			j.dead = true
			gs.cur = nil
		}
		for _, j := range gs.queue {
			j.dead = true
		}
		gs.queue = nil
	}
	cl.backendClose(b)
}

// backendStall stops b until until: its GPUs make no progress, it neither
// reports nor sends heartbeats, and what is sent to it waits.
func (cl *cluster) backendStall(b *backendProc, until scheduler.Time) {
	now := cl.now
	if until <= b.stallUntil {
		return
	}
	for k := range b.n {
		g := b.first + scheduler.GPUID(k)
		j := cl.gpus[g].cur
		if j == nil || !j.running {
			continue // a start waiting for its time sees the stall then
		}
		// The work left is done after the stall.
		paused := scheduler.MaxTime(j.from, now)
		left := j.finish.Sub(paused)
		if j.from < now {
			cl.acct.busy(j.model, g, j.from, now)
		}
		j.from, j.finish = until, until.Add(left)
		j.gen++
		gen := j.gen
		cl.at(j.finish, func() { cl.gpuFinish(g, j, gen) })
	}
	b.stallUntil = until
	cl.at(until, func() { cl.backendResume(b) })
}

// backendResume ends b's stall: a heartbeat missed in it goes out at once,
// and its GPUs take up their queues.
func (cl *cluster) backendResume(b *backendProc) {
	if !b.alive || b.stalled(cl.now) {
		return
	}
	if b.hbMissed && b.sess != 0 {
		b.hbMissed = false
		cl.sendHeartbeat(b)
	}
	for k := range b.n {
		cl.gpuNext(b.first + scheduler.GPUID(k))
	}
	cl.backendMaybeExit(b)
}

// backendMaybeExit ends a draining backend once the scheduler has let it
// go (or is gone) and its GPUs hold no plan (backend.Agent.Drain).
func (cl *cluster) backendMaybeExit(b *backendProc) {
	if !b.alive || !b.draining || b.stalled(cl.now) || b.sess != 0 && !b.leaveOK {
		return
	}
	for k := range b.n {
		if gs := &cl.gpus[int(b.first)+k]; gs.cur != nil || len(gs.queue) > 0 {
			return
		}
	}
	b.alive = false
	cl.backendClose(b)
	if b.restarts {
		cl.at(cl.now.Add(b.restartAfter), func() { cl.startBackend(b) })
	}
}

// deliver hands a plan to its GPU's backend, on session sess.
func (cl *cluster) deliver(p *scheduler.BatchPlan, model int, sess uint32, tasks []scheduler.RequestID) {
	j := &job{plan: p.ID, model: model, sess: sess, execAt: p.ExecAt, reqs: tasks, inputsAt: cl.now}
	// A frontend in a stall serves the inputs' reads when it resumes.
	if fe := cl.fe; fe.stalled(cl.now) {
		d := cl.w.Network.ForInput(cl.w.Models[model].InputBytes)
		j.inputsAt = fe.stallUntil.Add(d.Dispatch(len(tasks)) - d.Ctrl)
	}
	cl.gpus[p.GPU].queue = append(cl.gpus[p.GPU].queue, j)
	cl.gpuNext(p.GPU)
}

// gpuNext takes up the next plan on GPU g if it is free (backend runJob):
// a plan of a session that has ended is skipped; the next waits for its
// ExecAt and its inputs, the latter no longer than some task of it can
// still finish in time.
func (cl *cluster) gpuNext(g scheduler.GPUID) {
	gs := &cl.gpus[g]
	b := cl.backendOf(g)
	for gs.cur == nil && len(gs.queue) > 0 && b.alive && !b.stalled(cl.now) {
		j := gs.queue[0]
		gs.queue = gs.queue[1:]
		if j.sess != b.sess {
			continue
		}
		gs.cur = j
		start := scheduler.MaxTime(cl.now, j.execAt)
		if j.inputsAt > start {
			last := cl.reqs[j.reqs[len(j.reqs)-1]].deadline
			latest := last.Add(-cl.result - cl.latency(j.model, 1))
			if j.inputsAt <= latest {
				start = j.inputsAt
			} else {
				start, j.noInputs = scheduler.MaxTime(start, latest), true
			}
		}
		cl.at(start, func() { cl.gpuStart(g, j) })
	}
	if gs.cur == nil && len(gs.queue) == 0 {
		cl.backendMaybeExit(b)
	}
}

// gpuStart starts job j on GPU g, by the backend's late-start rule: the
// tasks whose input cannot be read are left out, then the earliest-deadline
// tasks go (as deadline drops) until the rest can finish in time; a plan
// with nothing left is given up at once.
func (cl *cluster) gpuStart(g scheduler.GPUID, j *job) {
	if j.dead {
		return
	}
	now := cl.now
	b := cl.backendOf(g)
	if b.stalled(now) {
		cl.at(b.stallUntil, func() { cl.gpuStart(g, j) })
		return
	}
	live := make([]scheduler.RequestID, 0, len(j.reqs))
	for _, id := range j.reqs {
		if cl.readable(id) {
			live = append(live, id)
		}
	}
	h := len(live)
	if !j.noInputs {
		h = 0
		for h < len(live) && now.Add(cl.latency(j.model, len(live)-h)) > cl.reqs[live[h]].deadline.Add(-cl.result) {
			h++
		}
	}
	cl.backendDrops(live[:h])
	j.run = live[h:]
	j.started, j.finish, j.from = now, now, now
	gs := &cl.gpus[g]
	if len(j.run) == 0 {
		cl.gpuDone(g, j)
		return
	}
	if now < j.execAt || now < gs.lastFinish {
		cl.acct.fail("GPU %d: batch starts at %v, before its plan's ExecAt %v or the previous batch's end %v", g, now, j.execAt, gs.lastFinish)
	}
	for _, id := range j.run {
		rs := &cl.reqs[id]
		if rs.ran {
			cl.acct.fail("request %d ran twice", id)
		}
		rs.ran = true
	}
	j.running = true
	j.finish = now.Add(cl.latency(j.model, len(j.run)))
	cl.acct.ran(j.model, len(j.run), now)
	gen := j.gen
	cl.at(j.finish, func() { cl.gpuFinish(g, j, gen) })
}

// gpuFinish ends j's batch on GPU g: its results go to the frontend.
func (cl *cluster) gpuFinish(g scheduler.GPUID, j *job, gen uint64) {
	if j.dead || gen != j.gen {
		return
	}
	cl.acct.busy(j.model, g, j.from, cl.now)
	cl.answer(j.run, j.started)
	cl.gpuDone(g, j)
}

// gpuDone frees GPU g of j and reports the plan to the scheduler of its
// session, if that session lives.
func (cl *cluster) gpuDone(g scheduler.GPUID, j *job) {
	gs := &cl.gpus[g]
	gs.cur = nil
	gs.lastFinish = j.finish
	j.running = false
	if b := cl.backendOf(g); b.sess == j.sess {
		s, bi, sess := b.sched, b.idx, b.sess
		ran := len(j.run)
		started, finished := j.started, j.finish
		cl.toSched(s, func() { s.gpuFree(bi, sess, g, j.plan, ran, started, finished) })
	}
	cl.gpuNext(g)
}

// ---- the scheduler ----

func (cl *cluster) startScheduler() error {
	s := &schedProc{cl: cl, started: cl.now, stallUntil: scheduler.Past, frontends: map[uint32]bool{},
		backs: make([]schedBackend, len(cl.gpus)/cl.each), out: make([][]*sentPlan, len(cl.gpus))}
	eng, err := newSymphonyEngine(cl.w, cl.acct, s, true)
	if err != nil {
		return err
	}
	wc := gpuwatch.Default(len(cl.gpus))
	wc.StallAfter = cl.stallAfter
	if s.watch, err = gpuwatch.New(wc); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	s.eng = eng
	cl.sched = s
	return nil
}

// toSched delivers a message to scheduler s: now, or when its stall ends;
// never if it has stopped.
func (cl *cluster) toSched(s *schedProc, fn func()) {
	switch {
	case s == nil || s != cl.sched || s.state == schedDown:
	case s.stalled(cl.now):
		s.backlog = append(s.backlog, fn)
	default:
		fn()
	}
}

func (cl *cluster) schedFault(f workload.Fault) {
	s := cl.sched
	if s.state == schedDown {
		return
	}
	now := cl.now
	switch f.Action {
	case workload.FaultKill:
		// Its queues are lost with it; the frontend ends those requests
		// at their deadlines as "scheduler lost" (frontendLost).
		for _, mc := range s.eng.models {
			for _, d := range mc.DropAll(now, scheduler.DropShutdown).Drops {
				cl.leave(d.Request.ID)
			}
		}
		cl.schedStop(s, f.Restarts, f.For)
	case workload.FaultStall:
		s.stallUntil = scheduler.MaxTime(s.stallUntil, now.Add(f.For))
		cl.at(s.stallUntil, func() { cl.schedResume(s) })
	case workload.FaultDrain, workload.FaultRestart:
		if s.state == schedDraining {
			return
		}
		s.restarts, s.restartAfter = f.Restarts, f.For
		cl.toSched(s, func() { cl.schedDrain(s) })
	}
}

// schedDrain is service.Close: every queued request ends as a shutdown
// drop, and no task is taken any more; the plans in flight get until the
// drain timeout to finish, then the scheduler closes.
func (cl *cluster) schedDrain(s *schedProc) {
	if s.state != schedUp {
		return
	}
	now := cl.now
	s.state = schedDraining
	for m, mc := range s.eng.models {
		s.eng.handle(now, m, mc.DropAll(now, scheduler.DropShutdown))
	}
	if fe := cl.fe; s.frontends[fe.sess] {
		fe.closing = true
	}
	cl.at(now, func() { cl.schedMaybeClose(s) })
	cl.at(now.Add(cl.drainTimeout), func() {
		if s.state != schedDraining || s != cl.sched {
			return
		}
		// Plans still out end as shutdown drops.
		for g := range s.out {
			for _, sp := range s.out[g] {
				for _, id := range sp.reqs {
					s.tell(id, report.OutcomeDropped, "shutdown")
				}
			}
			s.out[g] = nil
		}
		s.inFlight = 0
		cl.schedMaybeClose(s)
	})
}

func (cl *cluster) schedMaybeClose(s *schedProc) {
	if s.state == schedDraining && s == cl.sched && s.inFlight == 0 && !s.stalled(cl.now) {
		cl.schedStop(s, s.restarts, s.restartAfter)
	}
}

// schedStop ends scheduler s: every connection closes, and with restarts a
// new scheduler starts after.
func (cl *cluster) schedStop(s *schedProc, restarts bool, after time.Duration) {
	s.state = schedDown
	s.backlog = nil
	for g := range cl.gpus {
		cl.rotate(scheduler.GPUID(g), false, "scheduler stopped")
	}
	for _, b := range cl.backends {
		if b.sched == s {
			cl.backendLost(b)
		}
		if b.rd.waiting == s { // its dial fails
			b.rd.waiting = nil
			cl.backendRedial(b)
		}
	}
	if s.frontends[cl.fe.sess] {
		cl.frontendLost()
	}
	if cl.fe.rd.waiting == s {
		cl.fe.rd.waiting = nil
		cl.frontendRedial()
	}
	if restarts {
		cl.at(cl.now.Add(after), func() {
			if cl.sched.state != schedDown {
				return // another restart came first
			}
			if err := cl.startScheduler(); err != nil {
				cl.acct.fail("restarting the scheduler: %v", err)
			}
		})
	}
}

// schedResume ends a scheduler stall: it reads what came meanwhile, and
// its cores and Watcher carry on from now.
func (cl *cluster) schedResume(s *schedProc) {
	if s != cl.sched || s.state == schedDown || s.stalled(cl.now) {
		return
	}
	for len(s.backlog) > 0 {
		fn := s.backlog[0]
		s.backlog = s.backlog[1:]
		fn()
	}
	cl.schedMaybeClose(s)
}

// leave records that the scheduler handed a request on or lost it: at most
// once.
func (cl *cluster) leave(id scheduler.RequestID) {
	rs := &cl.reqs[id]
	if rs.left {
		cl.acct.fail("request %d left the scheduler twice", id)
	}
	rs.left = true
}

// tickAt is when the scheduler's next Watcher tick does something: the
// first point of its 10ms grid at or after the Watcher's WakeAt (and not
// before now).
func (s *schedProc) tickAt(now scheduler.Time) scheduler.Time {
	w := s.watch.WakeAt()
	if w == scheduler.Never {
		return scheduler.Never
	}
	w = scheduler.MaxTime(w, now)
	k := (w.Sub(s.started) + watchPeriod - 1) / watchPeriod
	return s.started.Add(k * watchPeriod)
}

// tick is the service's watchLoop: GPUs found stalled leave rotation.
func (s *schedProc) tick() {
	now := s.cl.now
	for _, st := range s.watch.Tick(now) {
		s.stalledGPU(&st)
	}
}

// stalledGPU takes a stalled GPU out of rotation and fails the requests of
// the plans it held (service.stalled).
func (s *schedProc) stalledGPU(st *gpuwatch.Stall) {
	bi := int(st.GPU) / s.cl.each
	if s.backs[bi].sess == 0 {
		return
	}
	s.rank().DisableGPU(st.GPU)
	s.cl.rotate(st.GPU, false, st.Why.String())
	for _, id := range st.Retired {
		if sp := s.take(st.GPU, id); sp != nil {
			s.planEnded()
			for _, r := range sp.reqs {
				s.tell(r, report.OutcomeFailed, reasonBackendStalled)
			}
		}
	}
	s.maybeLeaveOK(bi)
}

// task is a task read from the frontend (service.onFrontendMessage).
func (s *schedProc) task(id scheduler.RequestID) {
	cl := s.cl
	rs := &cl.reqs[id]
	now := cl.now
	switch {
	case !s.frontends[rs.sess]:
		// Its connection closed before the task was read.
	case s.state != schedUp:
		cl.leave(id)
		s.tell(id, report.OutcomeDropped, "shutdown")
	case rs.deadline <= now:
		cl.leave(id)
		s.tell(id, report.OutcomeDropped, reasonDeadline)
	default:
		s.eng.arrive(now, int(rs.model), scheduler.Request{ID: id, Frontend: scheduler.FrontendID(rs.sess), Arrival: now, Deadline: rs.deadline, Priority: rs.priority})
	}
}

// tell sends the end of a request to its frontend, if it is still
// connected.
func (s *schedProc) tell(id scheduler.RequestID, o report.Outcome, reason string) {
	cl := s.cl
	if !s.frontends[cl.reqs[id].sess] {
		return
	}
	cl.toFrontend(func() { cl.endAt(id, o, reason) })
}

// planned implements sink: the service's Planned. Requests whose frontend
// has left are left out; the plan goes to its GPU's backend, and the
// Watcher says when the GPU will really be free after it.
func (s *schedProc) planned(now scheduler.Time, model int, p *scheduler.BatchPlan, minLead time.Duration) scheduler.Time {
	cl := s.cl
	if !cl.acct.checkPlan(now, model, p, minLead) {
		return p.FinishAt
	}
	respond := p.FinishAt.Add(cl.result)
	bi := int(p.GPU) / cl.each
	sb := &s.backs[bi]
	if sb.sess == 0 || sb.leaving {
		cl.acct.fail("GPU %d planned while its backend takes no plans", p.GPU)
	}
	tasks := make([]scheduler.RequestID, 0, len(p.Requests))
	for i := range p.Requests {
		r := &p.Requests[i]
		if respond > r.Deadline {
			cl.acct.fail("GPU %d: request %d planned to be answered at %v, after its deadline %v", p.GPU, r.ID, respond, r.Deadline)
		}
		cl.leave(r.ID)
		if s.frontends[cl.reqs[r.ID].sess] {
			tasks = append(tasks, r.ID)
		}
	}
	if len(tasks) == 0 {
		return p.FinishAt
	}
	s.out[p.GPU] = append(s.out[p.GPU], &sentPlan{id: p.ID, model: model, reqs: tasks})
	s.inFlight++
	freeAt := s.watch.Sent(p.GPU, p.ID, p.ExecAt, p.FinishAt.Sub(p.ExecAt))
	cl.deliver(p, model, sb.sess, tasks)
	return freeAt
}

// dropped implements sink: the frontend hears of the drop.
func (s *schedProc) dropped(_ scheduler.Time, _ int, d *scheduler.Drop) {
	s.cl.leave(d.Request.ID)
	s.tell(d.Request.ID, report.OutcomeDropped, liveDropName(d.Reason))
}

// take removes plan id from GPU g's plans in flight and returns it; nil if
// it is not there.
func (s *schedProc) take(g scheduler.GPUID, id scheduler.PlanID) *sentPlan {
	out := s.out[g]
	i := slices.IndexFunc(out, func(sp *sentPlan) bool { return sp.id == id })
	if i < 0 {
		return nil
	}
	sp := out[i]
	s.out[g] = slices.Delete(out, i, i+1)
	return sp
}

func (s *schedProc) planEnded() {
	s.inFlight--
	if s.state == schedDraining && s.inFlight == 0 {
		s.cl.at(s.cl.now, func() { s.cl.schedMaybeClose(s) })
	}
}

// attach registers backend b's GPUs (BackendReady): the Watcher follows
// them and the rank brings them online, each free from free[k].
func (s *schedProc) attach(b *backendProc, free []scheduler.Time) {
	s.nextID++
	s.backs[b.idx] = schedBackend{sess: b.sess, id: s.nextID}
	gpus := make([]scheduler.GPUID, b.n)
	for k := range gpus {
		gpus[k] = b.first + scheduler.GPUID(k)
	}
	s.watch.Attach(s.cl.now, s.nextID, gpus)
	for k, g := range gpus {
		s.rank().EnableGPU(g, free[k])
		s.cl.rotate(g, true, "backend registered")
	}
}

// heard is a heartbeat of backend bi on session sess.
func (s *schedProc) heard(bi int, sess uint32) {
	sb := &s.backs[bi]
	if sb.sess != sess {
		return
	}
	s.enable(bi, s.watch.Heard(s.cl.now, sb.id))
}

// enable brings stalled GPUs of backend bi back into rotation.
func (s *schedProc) enable(bi int, gpus []scheduler.GPUID) {
	if sb := &s.backs[bi]; sb.sess == 0 || sb.leaving {
		return
	}
	for _, g := range gpus {
		s.rank().EnableGPU(g, s.watch.FreeAt(g))
		s.cl.rotate(g, true, "answers again")
	}
}

// gpuFree is a backend's report of one plan (service.gpuFree).
func (s *schedProc) gpuFree(bi int, sess uint32, g scheduler.GPUID, plan scheduler.PlanID, ran int, started, finished scheduler.Time) {
	if s.backs[bi].sess != sess {
		return
	}
	r := gpuwatch.Report{GPU: g, Plan: plan, Started: started, Finished: finished}
	if sp := s.take(g, plan); sp != nil {
		s.planEnded()
		if ran > 0 {
			r.Ran = s.cl.latency(sp.model, ran)
		}
	}
	if freeAt, changed, recovered := s.watch.Finished(s.cl.now, r); recovered {
		s.enable(bi, []scheduler.GPUID{g})
	} else if changed {
		s.rank().CorrectFreeAt(g, freeAt)
	}
	s.maybeLeaveOK(bi)
}

// leaving starts backend bi's drain: its GPUs leave rotation.
func (s *schedProc) leaving(bi int, sess uint32) {
	sb := &s.backs[bi]
	if sb.sess != sess || sb.leaving {
		return
	}
	sb.leaving = true
	for k := range s.cl.each {
		g := scheduler.GPUID(bi*s.cl.each + k)
		s.rank().DisableGPU(g)
		s.cl.rotate(g, false, "backend leaving")
	}
	s.maybeLeaveOK(bi)
}

// maybeLeaveOK lets a draining backend go once it holds no plan.
func (s *schedProc) maybeLeaveOK(bi int) {
	sb := &s.backs[bi]
	if !sb.leaving || sb.leaveOK {
		return
	}
	for k := range s.cl.each {
		if len(s.out[bi*s.cl.each+k]) > 0 {
			return
		}
	}
	sb.leaveOK = true
	cl := s.cl
	b, sess := cl.backends[bi], sb.sess
	cl.at(cl.now, func() {
		if b.sess == sess {
			b.leaveOK = true
			cl.backendMaybeExit(b)
		}
	})
}

// backendGone is the backend's connection closing (service.backendGone):
// its GPUs go offline, and every request of the plans it had not reported
// fails as "backend lost".
func (s *schedProc) backendGone(bi int, sess uint32) {
	sb := &s.backs[bi]
	if sb.sess != sess {
		return
	}
	for k := range s.cl.each {
		g := scheduler.GPUID(bi*s.cl.each + k)
		out := s.out[g]
		s.out[g] = nil
		for _, sp := range out {
			s.planEnded()
			for _, r := range sp.reqs {
				s.tell(r, report.OutcomeFailed, reasonBackendLost)
			}
		}
		s.rank().DisableGPU(g)
		s.cl.rotate(g, false, "backend gone")
	}
	s.watch.Detach(sb.id)
	*sb = schedBackend{}
}

// fault plays one fault of the scenario.
func (cl *cluster) fault(f workload.Fault) {
	switch f.Target.Kind {
	case workload.TargetBackend:
		cl.backendFault(cl.backends[f.Target.Index], f)
	case workload.TargetScheduler:
		cl.schedFault(f)
	case workload.TargetFrontend:
		cl.frontendFault(f)
	}
}

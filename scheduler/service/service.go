// Package service is the scheduler as a network service (`symphony
// scheduler`): frontends and backends connect to it, frontends send task
// descriptors (never inputs), and it sends batch plans to backends and drop
// notices to frontends (Symphony paper §4.1, Figure 2). The scheduling
// itself is the real-time shell scheduler/rt around the same cores the
// simulator runs.
//
// GPUs come and go with their backends: a backend's GPUs are brought online
// when it says its models are loaded, and taken offline when its connection
// ends; every request of a plan it had not finished ends with a
// backend-lost error, so no request is lost. A backend that drains (it
// says Leaving) gets no new plans, finishes those it holds, and is told
// LeaveOK when it may go. Close drains the scheduler itself: queued
// requests end with a shutdown drop, plans already sent get time to
// finish.
//
// The service follows every GPU's real timeline with a gpuwatch.Watcher:
// each backend report corrects when its GPU will really be free (a GPU
// that runs late is granted later, and so less often), and a GPU whose
// plan is overdue, or whose backend has gone silent (backends send
// heartbeats), leaves rotation until it answers again; the requests it
// held end as "backend stalled" failures.
package service

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/gpuwatch"
	"github.com/symphony-serving/symphony/scheduler/overrun"
	"github.com/symphony-serving/symphony/scheduler/rt"
	"github.com/symphony-serving/symphony/scheduler/serving"
	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/ratelog"
	"github.com/symphony-serving/symphony/transport/wire"
)

// Model is one served model: the serving configuration's (its
// InputBytes budgets the time its inputs' pulls take,
// scheduler.Delays.ForInput).
type Model = serving.Model

// Config configures the scheduler service.
type Config struct {
	// Addr is the address to listen on.
	Addr    string
	Network transport.Network
	Models  []Model
	Policy  scheduler.Policy
	// Schedulable and Drop tune the symphony policy; zero values take the
	// defaults.
	Schedulable scheduler.Schedulable
	Drop        scheduler.DropPolicy
	// ScheduleAhead is the clockwork policy's commit window (0: its
	// default, scheduler.DefaultScheduleAhead).
	ScheduleAhead time.Duration
	// Delays are the network delays the scheduler budgets for.
	Delays scheduler.Delays
	// MaxGPUs is the most GPUs the cluster may have at once.
	MaxGPUs int
	// WakeupSlack is rt.Config.WakeupSlack.
	WakeupSlack time.Duration
	// DrainTimeout is how long Close waits for the plans already sent to
	// backends to finish; 0 means the longest model SLO plus DrainMargin,
	// by when every such plan has met or missed its deadline, and a
	// negative one not to wait at all.
	DrainTimeout time.Duration
	// ResultTrip is how long a result takes from its backend to its
	// frontend, without the planning margin Delays.Result adds: a backend
	// runs a request only if its batch can finish ResultTrip before the
	// request's deadline (wire.PlanTask.FinishBy), and drops it at once
	// otherwise. The margin in Delays.Result absorbs a GPU's small
	// lateness; a GPU later than that has its requests dropped rather
	// than answered late. 0 means DefaultResultTrip; it may not exceed
	// Delays.Result.
	ResultTrip time.Duration
	// Unloaded names the models that start UNAVAILABLE (model control,
	// repository.go): requests for them end as "not loaded" until a
	// frontend loads them. The others start READY.
	Unloaded []string
	// LoadTimeout bounds how long a load or unload waits for the
	// backends' answers; 0 means DefaultLoadTimeout.
	LoadTimeout time.Duration
	// StallAfter is how long past its expected finish a plan may stay
	// unreported, and how long a backend may stay silent, before its GPUs
	// leave rotation (gpuwatch.Config.StallAfter); 0 means the longest
	// model SLO or gpuwatch.DefaultStallAfter, whichever is longer. It
	// must be well above the backends' heartbeat period.
	StallAfter time.Duration
	// TailQuantile is the quantile of its batches' real run time over
	// ℓ(b) by which each model's deadlines are planned
	// (scheduler/overrun, ModelCore.SetTailFactor): 0 means
	// overrun.Default's, a negative one plans on ℓ(b) alone.
	TailQuantile float64
	// AdviceWindow is how far back the live autoscaling advice looks
	// (Stats.Advice, scheduler.SignalWindow); 0 means
	// DefaultAdviceWindow.
	AdviceWindow time.Duration
	Log          zerolog.Logger
}

// DefaultAdviceWindow is Config.AdviceWindow's default: long enough that
// a few hundred requests end in it at modest rates (the rule holds with
// fewer than scheduler.DefaultAutoscaleConfig().MinRequests), short
// enough to follow a load that changes by the minute.
const DefaultAdviceWindow = time.Minute

// adviceSamples is how many samples the advice's window holds: it is
// sampled every AdviceWindow/adviceSamples (but no more often than the
// watch loop ticks).
const adviceSamples = 60

// DefaultResultTrip is Config.ResultTrip's default: a result's trip on a
// datacenter network or loopback, with room for a scheduling hiccup.
const DefaultResultTrip = 250 * time.Microsecond

// WatchPeriod is how often the service checks for stalled GPUs: a stall is
// found within StallAfter plus this.
const WatchPeriod = 10 * time.Millisecond

// DrainMargin is what the default drain timeout adds to the longest SLO:
// by then every plan in flight has met or missed its deadline (and its
// frontend has ended its requests by their deadlines anyway).
const DrainMargin = 500 * time.Millisecond

// FromServing is the service configuration that serves c: its models,
// policy and limits, its network delays raised to its live floor
// (serving.Settings.LiveDelays), and the network's result delay as the
// result trip. Addr and Network remain to be set.
func FromServing(c *serving.Config) Config {
	sc := Default()
	sc.Models = c.Models
	sc.Policy, sc.Schedulable, sc.Drop, sc.ScheduleAhead = c.Policy, c.Schedulable, c.Drop, c.ScheduleAhead
	sc.Delays, sc.ResultTrip = c.LiveDelays(), c.Network.Result
	sc.MaxGPUs, sc.StallAfter, sc.DrainTimeout = c.Limits.MaxGPUs, c.Limits.StallAfter, c.Limits.DrainTimeout
	return sc
}

// Default returns a configuration with the defaults filled in; Addr,
// Network and Models remain to be set.
func Default() Config {
	return Config{
		Policy:  scheduler.PolicySymphony,
		Delays:  serving.DefaultLiveFloor(),
		MaxGPUs: serving.DefaultMaxGPUs,
		Log:     zerolog.Nop(),
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.Network == nil:
		return errors.New("service: no network")
	case len(c.Models) == 0:
		return errors.New("service: no models")
	case c.MaxGPUs < 1 || c.MaxGPUs > 1<<20:
		return fmt.Errorf("service: max GPUs %d out of range", c.MaxGPUs)
	case c.Policy == scheduler.PolicyNexus:
		return errors.New("service: the nexus policy exists only in the simulator")
	case c.StallAfter < 0:
		return fmt.Errorf("service: negative stall timeout %v", c.StallAfter)
	case c.ResultTrip < 0:
		return fmt.Errorf("service: negative result trip %v", c.ResultTrip)
	case c.LoadTimeout < 0:
		return fmt.Errorf("service: negative load timeout %v", c.LoadTimeout)
	case c.TailQuantile > 1:
		return fmt.Errorf("service: tail quantile %v above 1", c.TailQuantile)
	}
	seen := map[string]bool{}
	for i, m := range c.Models {
		switch {
		case m.Name == "" || len(m.Name) > wire.MaxName:
			return fmt.Errorf("service: models[%d]: bad name %q", i, m.Name)
		case seen[m.Name]:
			return fmt.Errorf("service: models[%d]: duplicate name %q", i, m.Name)
		case !m.Profile.Valid():
			return fmt.Errorf("service: model %q: no profile", m.Name)
		case m.SLO <= 0:
			return fmt.Errorf("service: model %q: SLO must be positive", m.Name)
		}
		// Peers refuse a Welcome whose tensors or memory sizes do not
		// validate.
		w := wire.Welcome{Models: []wire.ModelSpec{{SLO: m.SLO, Latency: []time.Duration{1}, Inputs: m.Inputs, Outputs: m.Outputs,
			StaticMemory: m.StaticMemory, DynamicMemory: m.DynamicMemory}}}
		if err := w.Validate(); err != nil {
			return fmt.Errorf("service: model %q: %w", m.Name, err)
		}
		seen[m.Name] = true
	}
	return c.Delays.Validate()
}

// Service is a running scheduler service.
type Service struct {
	cfg Config
	log zerolog.Logger
	// warn is log rate-limited, for lines that can repeat per request or
	// GPU; suppressed counts what it held back.
	warn       zerolog.Logger
	suppressed atomic.Uint64
	sched      *rt.Scheduler
	ln         transport.Listener
	epochUnix  int64
	specs      []wire.ModelSpec

	table slotTable

	mu           sync.Mutex
	nextFrontend uint32
	nextBackend  gpuwatch.BackendID
	frontends    map[scheduler.FrontendID]*frontendConn
	backends     map[*backendConn]struct{}
	gpus         []gpuState
	// watch follows the GPUs' real timelines (under mu).
	watch *gpuwatch.Watcher
	// overruns follow, per model, how far its batches run over ℓ(b), for
	// its tail factor; nil with Config.TailQuantile negative (under mu).
	overruns []*overrun.Tracker
	// ctl is each model's control state, nextCtl the last Seq of a
	// Control sent to backends (under mu; repository.go).
	ctl       []modelCtl
	nextCtl   uint64
	stopWatch chan struct{}
	watchDone chan struct{}
	closed    bool
	closeDone chan struct{} // closed when Close has finished
	// inFlight counts the plans sent to backends and not yet reported
	// free or failed; drained is signalled, while closing, when it may
	// have reached zero or the drain timed out (drainOver).
	inFlight  int
	drained   *sync.Cond
	drainOver bool

	// inputWarned says, per model, that a task's input was found too
	// large for the model's pull budget (warned once).
	inputWarned []atomic.Bool
	// tellDirect is set once Close is about to close the connections:
	// from then on ends go straight onto the connection, ahead of its
	// draining close, instead of through the notice queue.
	tellDirect atomic.Bool

	statsMu sync.Mutex
	stats   Stats
	// signals samples the counters for the autoscaling advice, and
	// advice is its latest (under s.mu, from watchLoop); busyTotal is
	// the GPU time every backend reported running batches.
	signals    *scheduler.SignalWindow
	nextSample scheduler.Time
	advice     Advice
	busyTotal  time.Duration
}

// Stats count what the service did, for tests and logs.
type Stats struct {
	Tasks, Planned, Dropped, Failed, Plans uint64
	// Orphaned counts requests whose frontend left while they were
	// queued: they are left out of their batch plans, since no one waits
	// for their results and their inputs left with the frontend.
	Orphaned uint64
	// Unsent counts the ends (drops and failures) the scheduler could not
	// tell a frontend because its connection had closed, as one does when
	// a task is read just as the connection goes: that frontend ends those
	// requests itself (frontend.ErrSchedulerLost).
	Unsent uint64
	// Stalls counts GPUs taken out of rotation because a plan was overdue
	// or their backend fell silent; StalledGPUs is how many are out now.
	Stalls uint64
	// Resubmitted counts requests whose plan could not go to its GPU's
	// backend (it had left, or was draining) and went back to their
	// model's queue instead.
	Resubmitted uint64
	// SuppressedLogs counts the warnings that can repeat per request or
	// GPU held back by the log's rate limit (transport/ratelog).
	SuppressedLogs uint64
	// DroppedLate counts planned requests that their backend dropped
	// before running them, because they could no longer finish in time;
	// they are among Planned, as are the Failed ones.
	DroppedLate                              uint64
	StalledGPUs                              int
	Frontends, Backends, OnlineGPUs, Rejects int
	// PlansInFlight is the number of plans sent to backends and not yet
	// reported finished.
	PlansInFlight int
	// RankBusy is how long the rank loop has spent working, and RankWall
	// how long it has run: their ratio is its utilization.
	RankBusy, RankWall time.Duration
	// WakeupLead is how early the rank loop's timers fire: the measured
	// lateness of its timers, or the configured slack.
	WakeupLead time.Duration
	// TailFactors are, by model name, the factors by which each model's
	// deadlines are planned beyond ℓ(b) (scheduler/overrun): 1 for a
	// model whose batches keep to their profile; nil with
	// Config.TailQuantile negative.
	TailFactors map[string]float64
	// Models are the per-model counters, in the configuration's order.
	Models []ModelStats
	// GPUs are the GPUs of the backends connected now, in GPU order.
	GPUs []GPUStats
	// Busy is the GPU time every backend ever connected reported running
	// batches: unlike GPUStats.Busy it survives backends leaving, so the
	// difference of two snapshots is the part's busy time between them
	// (the epoch controller's Part.Busy).
	Busy time.Duration
	// Advice is the §4.4 autoscaling rule applied to the last
	// Config.AdviceWindow.
	Advice Advice
}

// ModelStats count one model's requests as the scheduler saw them.
type ModelStats struct {
	Name string
	// Tasks are the task descriptors received for the model.
	Tasks uint64
	// Plans are the batches sent to backends (Triton's execution count),
	// and BatchSizes[b] how many of them held b requests (index 0 unused).
	Plans      uint64
	BatchSizes []uint64
	// Dropped counts the model's requests the scheduler ended without
	// running them, by reason: deadline, overload and shutdown (the rank's
	// drops), not_loaded and bad_request (refused on arrival).
	Dropped map[string]uint64
	// Failed counts its planned requests that failed (backend lost,
	// stalled, input unavailable, executor failure), and DroppedLate those
	// their backend dropped for running too late.
	Failed, DroppedLate uint64
}

// GPUStats is one GPU of a connected backend.
type GPUStats struct {
	ID      scheduler.GPUID
	Backend string
	// Online: its backend neither drains nor stalls.
	Online bool
	// Busy is the time it spent running batches, from its backend's
	// reports, since its backend connected.
	Busy time.Duration
}

// Advice is the live autoscaling advice: the signals of the last window
// and what the rule makes of them.
type Advice struct {
	Window  time.Duration
	Signals scheduler.Signals
	scheduler.AutoscaleAdvice
}

// Snapshot returns a copy of the counters.
func (s *Service) Snapshot() Stats {
	s.mu.Lock()
	inFlight := s.inFlight
	backends, online, stalled, gpus := s.cluster(true)
	var tails map[string]float64
	if s.overruns != nil {
		tails = make(map[string]float64, len(s.overruns))
		for i, t := range s.overruns {
			tails[s.cfg.Models[i].Name] = t.Factor()
		}
	}
	advice, busyTotal := s.advice, s.busyTotal
	s.mu.Unlock()
	busy, wall := s.sched.RankStats()
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	st := s.stats
	st.Models = make([]ModelStats, len(s.stats.Models))
	for i, m := range s.stats.Models {
		m.BatchSizes = slices.Clone(m.BatchSizes)
		m.Dropped = maps.Clone(m.Dropped)
		st.Models[i] = m
	}
	st.TailFactors, st.GPUs, st.Advice, st.Busy = tails, gpus, advice, busyTotal
	st.PlansInFlight, st.RankBusy, st.RankWall, st.WakeupLead = inFlight, busy, wall, s.sched.Lead()
	st.Backends, st.OnlineGPUs, st.StalledGPUs = backends, online, stalled
	st.SuppressedLogs = s.suppressed.Load()
	return st
}

// cluster counts the cluster from its state: a backend counts once its
// GPUs came online, a GPU is online while its backend neither drains nor
// stalls it. With list, it also lists those GPUs. Called with s.mu held.
func (s *Service) cluster(list bool) (backends, online, stalled int, gpus []GPUStats) {
	for b := range s.backends {
		if b.ready {
			backends++
		}
	}
	for g := range s.gpus {
		st := &s.gpus[g]
		b := st.owner
		if b == nil || !b.ready {
			continue
		}
		id := scheduler.GPUID(g)
		up := false
		switch {
		case s.watch.Stalled(id):
			stalled++
		case !b.leaving:
			online++
			up = true
		}
		if list {
			gpus = append(gpus, GPUStats{ID: id, Backend: b.name, Online: up, Busy: st.busy})
		}
	}
	return backends, online, stalled, gpus
}

// modelCount is a number of requests of one model, for per-model counts
// gathered under s.mu and added under statsMu.
type modelCount struct {
	model scheduler.ModelID
	n     int
}

// dropLabel is a rank drop's reason as ModelStats.Dropped names it: the
// word a frontend hears (overload for a pruned request).
func dropLabel(r scheduler.DropReason) string {
	switch r {
	case scheduler.DropPruned:
		return "overload"
	case scheduler.DropDeadline, scheduler.DropShutdown:
		return r.String()
	}
	return "other"
}

// endLabel is a refusal on arrival as ModelStats.Dropped names it.
func endLabel(c wire.EndCode) string {
	switch c {
	case wire.EndDropDeadline:
		return "deadline"
	case wire.EndModelNotLoaded:
		return "not_loaded"
	case wire.EndBadRequest:
		return "bad_request"
	}
	return "other"
}

// sampleSignals feeds the autoscaling advice's window at now, at most
// every AdviceWindow/adviceSamples, and renews the advice. Called with s.mu
// held.
func (s *Service) sampleSignals(now scheduler.Time) {
	if now < s.nextSample {
		return
	}
	s.nextSample = now.Add(max(s.cfg.AdviceWindow/adviceSamples, WatchPeriod))
	s.statsMu.Lock()
	ended := s.stats.Planned + s.stats.Dropped
	bad := s.stats.Dropped + s.stats.Failed + s.stats.DroppedLate
	s.statsMu.Unlock()
	_, online, _, _ := s.cluster(false)
	s.signals.Add(scheduler.SignalSample{At: now, Ended: ended, Bad: bad, GPUs: online, Busy: s.busyTotal})
	sig := s.signals.Signals()
	s.advice = Advice{Window: s.signals.Window(), Signals: sig, AutoscaleAdvice: scheduler.DefaultAutoscaleConfig().Advise(sig)}
}

func (s *Service) count(f func(*Stats)) {
	s.statsMu.Lock()
	f(&s.stats)
	s.statsMu.Unlock()
}

type frontendConn struct {
	id    scheduler.FrontendID
	name  string
	addr  string
	conn  transport.Conn
	ended *transport.Coalescer[wire.End]
}

type backendConn struct {
	id    gpuwatch.BackendID
	name  string
	conn  transport.Conn
	base  scheduler.GPUID
	n     int
	gone  bool
	ready bool // its GPUs were brought online
	// leaving: it is draining; its GPUs are offline. leaveOK: it has been
	// told it may go, so no plan may be sent to it any more.
	leaving, leaveOK bool
}

// gpuState is what the service knows of one GPU beyond the rank's free_at.
type gpuState struct {
	owner       *backendConn
	outstanding map[uint64]sentPlan // plans sent and not yet reported free
	busy        time.Duration       // time spent running batches, reported
}

// sentPlan is a plan sent to a backend and not yet reported.
type sentPlan struct {
	model scheduler.ModelID
	reqs  []planned
}

// planned is one request of a plan: the scheduler's request and its
// entry, to tell its frontend how it ended, or to put it back in its
// model's queue if the plan cannot be sent (requeue).
type planned struct {
	r scheduler.Request
	e entry
}

// Start listens on cfg.Addr and starts scheduling.
func Start(cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Service{
		cfg: cfg, log: cfg.Log.With().Str("component", "scheduler").Logger(),
		frontends: make(map[scheduler.FrontendID]*frontendConn),
		backends:  make(map[*backendConn]struct{}),
		gpus:      make([]gpuState, cfg.MaxGPUs),
		closeDone: make(chan struct{}),
	}
	s.drained = sync.NewCond(&s.mu)
	s.warn = ratelog.New(s.log, &s.suppressed)
	if s.cfg.AdviceWindow <= 0 {
		s.cfg.AdviceWindow = DefaultAdviceWindow
	}
	s.signals = scheduler.NewSignalWindow(s.cfg.AdviceWindow)
	s.stats.Models = make([]ModelStats, len(cfg.Models))
	for i, m := range cfg.Models {
		s.stats.Models[i] = ModelStats{Name: m.Name, Dropped: map[string]uint64{}}
	}
	var longest time.Duration
	for _, m := range cfg.Models {
		longest = max(longest, m.SLO)
	}
	if s.cfg.DrainTimeout == 0 {
		s.cfg.DrainTimeout = longest + DrainMargin
	}
	if s.cfg.StallAfter == 0 {
		s.cfg.StallAfter = max(longest, gpuwatch.DefaultStallAfter)
	} else if s.cfg.StallAfter < longest {
		s.log.Warn().Str("stall_after", s.cfg.StallAfter.String()).Str("longest_slo", longest.String()).
			Msg("stall timeout under the longest SLO: a batch that waits long for its inputs may be taken for a stalled GPU")
	}
	if s.cfg.ResultTrip == 0 {
		s.cfg.ResultTrip = DefaultResultTrip
	}
	if s.cfg.LoadTimeout == 0 {
		s.cfg.LoadTimeout = DefaultLoadTimeout
	}
	if err := s.initControl(); err != nil {
		return nil, err
	}
	s.cfg.ResultTrip = min(s.cfg.ResultTrip, s.cfg.Delays.Result)
	wc := gpuwatch.Default(cfg.MaxGPUs)
	wc.StallAfter = s.cfg.StallAfter
	watch, err := gpuwatch.New(wc)
	if err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	s.watch = watch
	if s.cfg.TailQuantile >= 0 {
		oc := overrun.Default()
		if s.cfg.TailQuantile > 0 {
			oc.Quantile = s.cfg.TailQuantile
		}
		for range cfg.Models {
			t, err := overrun.New(oc)
			if err != nil {
				return nil, fmt.Errorf("service: %w", err)
			}
			s.overruns = append(s.overruns, t)
		}
	}
	rc := rt.Config{
		Rank:        scheduler.RankConfig{Models: len(cfg.Models), GPUs: cfg.MaxGPUs, Policy: cfg.Policy, ScheduleAhead: cfg.ScheduleAhead, Delays: cfg.Delays, StartOffline: true},
		WakeupSlack: cfg.WakeupSlack,
	}
	s.inputWarned = make([]atomic.Bool, len(cfg.Models))
	for i, m := range cfg.Models {
		d := cfg.Delays.ForInput(m.InputBytes)
		rc.Rank.ModelDelays = append(rc.Rank.ModelDelays, d)
		rc.Models = append(rc.Models, scheduler.ModelConfig{
			ID: scheduler.ModelID(i), Name: m.Name, Profile: m.Profile, Policy: cfg.Policy,
			Drop: cfg.Drop, Schedulable: cfg.Schedulable, Delays: d,
		})
		// The declared memory (0: unknown), which an emulated backend
		// with a GPU memory capacity checks its loads against.
		spec := wire.ModelSpec{ID: uint32(i), Name: m.Name, SLO: m.SLO, Inputs: m.Inputs, Outputs: m.Outputs,
			StaticMemory: m.StaticMemory, DynamicMemory: m.DynamicMemory}
		for b := 1; b <= m.Profile.MaxBatch() && b <= wire.MaxBatch; b++ {
			spec.Latency = append(spec.Latency, m.Profile.Latency(b))
		}
		s.specs = append(s.specs, spec)
	}
	sched, err := rt.Start(rc, s)
	if err != nil {
		return nil, err
	}
	s.sched = sched
	s.epochUnix = sched.Epoch().UnixNano()
	ln, err := cfg.Network.Listen(cfg.Addr, s.accept)
	if err != nil {
		sched.Stop()
		return nil, fmt.Errorf("service: listen on %s: %w", cfg.Addr, err)
	}
	s.ln = ln
	s.stopWatch, s.watchDone = make(chan struct{}), make(chan struct{})
	go s.watchLoop()
	s.log.Info().Str("addr", ln.Addr()).Int("models", len(cfg.Models)).Stringer("policy", cfg.Policy).
		Str("stall_after", s.cfg.StallAfter.String()).Msg("scheduler listening")
	return s, nil
}

// Addr is the address frontends and backends dial.
func (s *Service) Addr() string { return s.ln.Addr() }

// Live reports whether the service still answers: it takes the lock that
// every connection's messages go through, so a service stuck holding it
// never returns (the caller bounds the wait). The scheduler's /livez.
func (s *Service) Live() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return nil
}

// Ready reports whether the service takes new frontends and backends: nil
// until Close begins, then why not. The scheduler's /readyz. It does not
// wait for backends: they find the scheduler through the address that
// readiness gates.
func (s *Service) Ready() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("stopping: draining the plans in flight")
	}
	return nil
}

// Close stops the service gracefully. It takes no new frontends or
// backends and ends every queued request with a shutdown drop; then it
// waits, up to Config.DrainTimeout, for the plans already sent to backends
// to finish (their results go straight to the frontends). A plan still out
// after that ends with a shutdown drop, so that its frontend hears now
// rather than by its safety timer. Then every connection closes. A Close
// while another is under way waits for it.
func (s *Service) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.closeDone
		return
	}
	s.closed = true
	s.mu.Unlock()
	defer close(s.closeDone)
	s.sched.Stop()
	s.drain()
	s.mu.Lock()
	fronts := make([]*frontendConn, 0, len(s.frontends))
	for _, f := range s.frontends {
		fronts = append(fronts, f)
	}
	s.mu.Unlock()
	// Hand the drop notices queued so far to the connections, which send
	// them before they close, and send later ones straight away: a Submit
	// read before its connection closes still gets its shutdown drops on
	// it. (Only one handled in the very instant of the close cannot.)
	s.tellDirect.Store(true)
	for _, f := range fronts {
		f.ended.Flush()
	}
	close(s.stopWatch)
	<-s.watchDone
	_ = s.ln.Close()
}

// EndDrain cuts Close's wait for the plans in flight short, now or when it
// comes: those still out end at once as shutdown drops, so that their
// frontends hear now. An operator's second SIGTERM calls it.
func (s *Service) EndDrain() {
	s.mu.Lock()
	s.drainOver = true
	s.drained.Broadcast()
	s.mu.Unlock()
}

// drain waits for the plans in flight to finish, up to the drain timeout,
// and ends the requests of those still out with a shutdown drop.
func (s *Service) drain() {
	timer := time.AfterFunc(max(s.cfg.DrainTimeout, 0), func() {
		s.mu.Lock()
		s.drainOver = true
		s.drained.Broadcast()
		s.mu.Unlock()
	})
	defer timer.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inFlight > 0 {
		s.log.Info().Int("plans", s.inFlight).Str("timeout", s.cfg.DrainTimeout.String()).Msg("draining plans in flight")
	}
	for s.inFlight > 0 && !s.drainOver {
		s.drained.Wait()
	}
	if s.inFlight == 0 {
		return
	}
	plans, n := s.inFlight, 0
	var byModel []modelCount
	for g := range s.gpus {
		st := &s.gpus[g]
		for id, sp := range st.outstanding {
			byModel = append(byModel, modelCount{sp.model, len(sp.reqs)})
			for _, r := range sp.reqs {
				if f := s.frontends[r.e.frontend]; f != nil {
					s.tell(f, wire.End{ID: r.e.id, Code: wire.EndDropShutdown, Detail: "plan unfinished when the scheduler stopped"})
				}
				n++
			}
			delete(st.outstanding, id)
			s.planEnded(sp)
		}
	}
	s.log.Warn().Int("plans", plans).Int("requests", n).Msg("plans still in flight at shutdown: their requests end as shutdown drops")
	s.inFlight = 0
	s.count(func(st *Stats) {
		st.Dropped += uint64(n)
		for _, m := range byModel {
			st.Models[m.model].Dropped["shutdown"] += uint64(m.n)
		}
	})
}

// planEnded books one plan out of flight, and its requests as ended for
// model control (settle). Called with s.mu held.
func (s *Service) planEnded(sp sentPlan) {
	s.inFlight--
	s.settle(sp.model, len(sp.reqs))
	if s.closed {
		s.drained.Broadcast()
	}
}

func (s *Service) toSched(unixNano int64) scheduler.Time {
	return scheduler.Time(unixNano - s.epochUnix)
}

func (s *Service) toUnix(t scheduler.Time) int64 { return int64(t) + s.epochUnix }

func (s *Service) accept(c transport.Conn, h *wire.Hello) (*wire.Welcome, transport.Handler, error) {
	switch h.Role {
	case wire.RoleFrontend:
		return s.acceptFrontend(c, h)
	case wire.RoleBackend:
		return s.acceptBackend(c, h)
	}
	s.count(func(st *Stats) { st.Rejects++ })
	err := fmt.Errorf("the scheduler takes frontends and backends, not %v", h.Role)
	s.warn.Warn().Str("name", h.Name).Err(err).Msg("dialer refused")
	return nil, nil, err
}

func (s *Service) acceptFrontend(c transport.Conn, h *wire.Hello) (*wire.Welcome, transport.Handler, error) {
	if h.DataAddr == "" {
		s.count(func(st *Stats) { st.Rejects++ })
		s.warn.Warn().Str("name", h.Name).Msg("frontend refused: it gave no data address")
		return nil, nil, errors.New("a frontend must give its data address")
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, nil, errors.New("scheduler shutting down")
	}
	s.nextFrontend++
	f := &frontendConn{id: scheduler.FrontendID(s.nextFrontend), name: h.Name, addr: h.DataAddr, conn: c}
	f.ended = transport.NewCoalescer(func(ends []wire.End) {
		if err := c.Send(&wire.Ended{Ends: ends}); err != nil {
			s.unsent(f, len(ends), err)
		}
	})
	s.frontends[f.id] = f
	up := &wire.FrontendUp{ID: uint32(f.id), DataAddr: f.addr}
	for b := range s.backends {
		_ = b.conn.Send(up)
	}
	states := s.notReady()
	s.mu.Unlock()
	s.count(func(st *Stats) { st.Frontends++ })
	s.log.Info().Str("name", h.Name).Uint32("id", uint32(f.id)).Str("data", h.DataAddr).Msg("frontend joined")
	handler := transport.HandlerFuncs{
		Message: func(_ transport.Conn, m wire.Message) { s.onFrontendMessage(f, m) },
		Closed:  func(_ transport.Conn, err error) { s.frontendGone(f, err) },
	}
	return &wire.Welcome{Version: wire.Version, ID: uint32(f.id), Models: s.specs, States: states}, handler, nil
}

// tell queues ends for frontend f, to go out in its next Ended; while
// Close closes the connections, it sends them at once, after whatever the
// queue still holds.
func (s *Service) tell(f *frontendConn, ends ...wire.End) {
	if s.tellDirect.Load() {
		f.ended.Flush()
		if err := f.conn.Send(&wire.Ended{Ends: ends}); err != nil {
			s.unsent(f, len(ends), err)
		}
		return
	}
	if !f.ended.Add(ends...) {
		s.unsent(f, len(ends), transport.ErrClosed)
	}
}

// unsent books n ends that could not be told to f.
func (s *Service) unsent(f *frontendConn, n int, err error) {
	s.count(func(st *Stats) { st.Unsent += uint64(n) })
	s.log.Debug().Err(err).Uint32("frontend", uint32(f.id)).Int("ends", n).Msg("ends not sent: the frontend's connection closed")
}

func (s *Service) frontendGone(f *frontendConn, err error) {
	s.mu.Lock()
	delete(s.frontends, f.id)
	down := &wire.FrontendDown{ID: uint32(f.id)}
	for b := range s.backends {
		_ = b.conn.Send(down)
	}
	s.mu.Unlock()
	f.ended.Close()
	s.count(func(st *Stats) { st.Frontends-- })
	s.log.Info().Str("name", f.name).Uint32("id", uint32(f.id)).AnErr("reason", err).Msg("frontend left")
}

func (s *Service) onFrontendMessage(f *frontendConn, m wire.Message) {
	if c, ok := m.(*wire.Control); ok {
		s.mu.Lock()
		s.control(f, c)
		s.mu.Unlock()
		return
	}
	sub, ok := m.(*wire.Submit)
	if !ok {
		f.conn.Close(fmt.Errorf("unexpected %v from a frontend", m.Kind()))
		return
	}
	now := s.sched.Now()
	var ends []wire.End
	// Tasks usually come in runs of one model; submit each run at once.
	var run []scheduler.Request
	runModel := -1
	flush := func() {
		if len(run) == 0 {
			return
		}
		if err := s.sched.Submit(scheduler.ModelID(runModel), run); err != nil {
			for _, r := range run {
				if e, ok := s.table.take(r.ID); ok {
					ends = append(ends, wire.End{ID: e.id, Code: wire.EndDropShutdown})
				}
			}
			s.mu.Lock()
			s.settle(scheduler.ModelID(runModel), len(run))
			s.mu.Unlock()
		}
		run = run[:0]
	}
	// Each task is judged first, in one hold of the lock for the whole
	// message: its model must take requests now, and its deadline must
	// do. Only the tasks that pass count as pending (until they end, so
	// that an unload waits for them), and only those go on to the table
	// and the rank below, outside the lock.
	var refused []wire.EndCode // refused[i] != 0: task i ended here, so, with its entry in ends
	refuse := func(i int, e wire.End) {
		if refused == nil {
			refused = make([]wire.EndCode, len(sub.Tasks))
		}
		refused[i] = e.Code
		ends = append(ends, e)
	}
	s.mu.Lock()
	for i := range sub.Tasks {
		t := &sub.Tasks[i]
		if int(t.Model) >= len(s.specs) {
			refuse(i, wire.End{ID: t.ID, Code: wire.EndUnknownModel})
			continue
		}
		c := &s.ctl[t.Model]
		if c.state != wire.ModelReady {
			refuse(i, wire.End{ID: t.ID, Code: wire.EndModelNotLoaded, Detail: s.notLoaded(int(t.Model), c.state)})
			continue
		}
		if slo := s.specs[t.Model].SLO; t.Deadline > s.toUnix(now.Add(slo+time.Second)) || t.Deadline < s.epochUnix {
			// A frontend may shorten a deadline, never lengthen it: a
			// far-off (or overflowing) one is a bad request, not a
			// request to keep queued forever. The frontend library never
			// sends one, so the likely cause is the clocks.
			detail := "deadline more than the model's SLO (+1s) ahead of the scheduler's clock: is the frontend's clock ahead?"
			if t.Deadline < s.epochUnix {
				detail = "deadline before the scheduler started: is the frontend's clock behind?"
			}
			refuse(i, wire.End{ID: t.ID, Code: wire.EndBadRequest, Detail: detail})
			continue
		}
		if s.toSched(t.Deadline) <= now {
			refuse(i, wire.End{ID: t.ID, Code: wire.EndDropDeadline, Detail: "deadline passed before the scheduler saw it"})
			continue
		}
		c.pending++
	}
	s.mu.Unlock()
	for i := range sub.Tasks {
		t := &sub.Tasks[i]
		if refused != nil && refused[i] != 0 {
			continue
		}
		s.checkInputSize(int(t.Model), t.Input.Length)
		if int(t.Model) != runModel {
			flush()
			runModel = int(t.Model)
		}
		key := s.table.put(entry{frontend: f.id, id: t.ID, input: t.Input})
		run = append(run, scheduler.Request{ID: key, Frontend: f.id, Arrival: now, Deadline: s.toSched(t.Deadline), Priority: scheduler.Priority(t.Priority)})
	}
	flush()
	s.count(func(st *Stats) {
		st.Tasks += uint64(len(sub.Tasks))
		for i := range sub.Tasks {
			t := &sub.Tasks[i]
			if int(t.Model) >= len(st.Models) {
				continue
			}
			m := &st.Models[t.Model]
			m.Tasks++
			if refused != nil && refused[i] != 0 {
				m.Dropped[endLabel(refused[i])]++
			}
		}
	})
	if len(ends) > 0 {
		s.count(func(st *Stats) { st.Dropped += uint64(len(ends)) })
		s.tell(f, ends...)
	}
}

// largeInput is the input size above which a model's pulls need a budget
// of their own: at the live floor's per-request delay (20µs) a pull of
// more than about this much would not finish in time on loopback TCP.
const largeInput = 32 << 10

// checkInputSize warns, once per model, when a task's input is much
// larger than the model's pull budget allows for: its batches would be
// granted too late for their pulls, and fail with "input arrived too
// late". The cure is the model's input size in the workload file.
func (s *Service) checkInputSize(model int, length uint32) {
	m := &s.cfg.Models[model]
	if int64(length) <= max(2*m.InputBytes, largeInput) || s.inputWarned[model].Swap(true) {
		return
	}
	s.log.Warn().Str("model", m.Name).Uint32("input_bytes", length).Int64("budgeted_bytes", m.InputBytes).
		Msgf("inputs of %s are larger than its pull budget: its batches may fail with \"input arrived too late\"; %s its input_size in the workload file", m.Name, map[bool]string{true: "raise", false: "give"}[m.InputBytes > 0])
}

func (s *Service) acceptBackend(c transport.Conn, h *wire.Hello) (*wire.Welcome, transport.Handler, error) {
	n := int(h.GPUs)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil, errors.New("scheduler shutting down")
	}
	base, ok := s.findGPURange(n)
	if !ok {
		s.count(func(st *Stats) { st.Rejects++ })
		err := fmt.Errorf("no room for %d more GPUs (max %d: raise the scheduler's --max-gpus)", n, s.cfg.MaxGPUs)
		s.warn.Warn().Str("name", h.Name).Int("gpus", n).Err(err).Msg("backend refused")
		return nil, nil, err
	}
	s.nextBackend++
	b := &backendConn{id: s.nextBackend, name: h.Name, conn: c, base: base, n: n}
	for g := base; g < base+scheduler.GPUID(n); g++ {
		s.gpus[g] = gpuState{owner: b, outstanding: make(map[uint64]sentPlan)}
	}
	s.backends[b] = struct{}{}
	w := &wire.Welcome{Version: wire.Version, ID: uint32(base), Models: s.specs, States: s.notReady()}
	for _, f := range s.frontends {
		w.Frontends = append(w.Frontends, wire.FrontendUp{ID: uint32(f.id), DataAddr: f.addr})
	}
	s.log.Info().Str("name", h.Name).Int("gpus", n).Uint32("first_gpu", uint32(base)).Msg("backend joined")
	handler := transport.HandlerFuncs{
		Message: func(_ transport.Conn, m wire.Message) { s.onBackendMessage(b, m) },
		Closed:  func(_ transport.Conn, err error) { s.backendGone(b, err) },
	}
	return w, handler, nil
}

// findGPURange finds n consecutive unowned GPU IDs. Called with s.mu held.
func (s *Service) findGPURange(n int) (scheduler.GPUID, bool) {
	run := 0
	for g := range s.gpus {
		if s.gpus[g].owner != nil {
			run = 0
			continue
		}
		run++
		if run == n {
			return scheduler.GPUID(g - n + 1), true
		}
	}
	return 0, false
}

func (s *Service) onBackendMessage(b *backendConn, m wire.Message) {
	switch m := m.(type) {
	case *wire.BackendReady:
		s.mu.Lock()
		defer s.mu.Unlock()
		if b.ready || b.gone {
			return
		}
		b.ready = true
		gpus := make([]scheduler.GPUID, b.n)
		for i := range gpus {
			gpus[i] = b.base + scheduler.GPUID(i)
		}
		s.watch.Attach(s.sched.Now(), b.id, gpus)
		if b.leaving {
			return // it said Leaving first: its GPUs never come online
		}
		for _, g := range gpus {
			s.sched.EnableGPU(g, scheduler.Past)
		}
		s.log.Info().Str("name", b.name).Int("gpus", b.n).Msg("backend ready")
	case *wire.GPUFree:
		s.gpuFree(b, m)
	case *wire.Heartbeat:
		s.mu.Lock()
		s.heard(s.sched.Now(), b)
		s.mu.Unlock()
	case *wire.Leaving:
		s.leaving(b)
	case *wire.ControlDone:
		s.backendControlDone(b, m)
	default:
		b.conn.Close(fmt.Errorf("unexpected %v from a backend", m.Kind()))
	}
}

// heard records a message from b at now: GPUs it had taken out of
// rotation for its silence come back. Called with s.mu held.
func (s *Service) heard(now scheduler.Time, b *backendConn) {
	s.enable(b, s.watch.Heard(now, b.id))
}

// gpuFree takes a backend's report of a plan: the backend is heard from,
// the plan is out of flight, and the GPU's expected free time is corrected
// from what really happened. Both happen under one hold of s.mu and at one
// reading of the clock: the report is one message, heard at one moment.
func (s *Service) gpuFree(b *backendConn, m *wire.GPUFree) {
	g := scheduler.GPUID(m.GPU)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.sched.Now()
	s.heard(now, b)
	if int(g) >= len(s.gpus) || s.gpus[g].owner != b {
		b.conn.Close(fmt.Errorf("GPU %d is not this backend's", m.GPU))
		return
	}
	st := &s.gpus[g]
	r := gpuwatch.Report{GPU: g, Plan: scheduler.PlanID(m.Plan), Started: scheduler.Past, Finished: scheduler.Past}
	sp, ok := st.outstanding[m.Plan]
	if ok {
		delete(st.outstanding, m.Plan)
		s.planEnded(sp)
		if m.Failed > 0 || m.Dropped > 0 {
			// A retired plan's requests were counted when it was.
			s.count(func(st *Stats) {
				st.Failed += uint64(m.Failed)
				st.DroppedLate += uint64(m.Dropped)
				st.Models[sp.model].Failed += uint64(m.Failed)
				st.Models[sp.model].DroppedLate += uint64(m.Dropped)
			})
		}
		if m.Ran > 0 {
			r.Ran = s.cfg.Models[sp.model].Profile.Latency(int(m.Ran))
		}
	}
	if m.FinishedAt != 0 {
		r.Started, r.Finished = s.toSched(m.StartedAt), s.toSched(m.FinishedAt)
		if ran := r.Finished.Sub(r.Started); ran > 0 && m.StartedAt != 0 {
			st.busy += ran
			s.busyTotal += ran
		}
		if r.Ran > 0 && s.overruns != nil {
			s.observeOverrun(sp.model, r.Finished.Sub(r.Started), r.Ran)
		}
	}
	// The correction goes out under the lock, so that it reaches the rank
	// before the return of any plan made after this report.
	if freeAt, changed, recovered := s.watch.Finished(now, r); recovered {
		s.enable(b, []scheduler.GPUID{g})
	} else if changed {
		s.sched.CorrectFreeAt(g, freeAt)
	}
	s.maybeLeaveOK(b)
}

// observeOverrun records that a batch of model ran for ran against its
// profile's planned, and hands the model's ModelThread its new tail factor
// when that changes. Called with s.mu held.
func (s *Service) observeOverrun(model scheduler.ModelID, ran, planned time.Duration) {
	f, changed := s.overruns[model].Observe(ran, planned)
	if !changed {
		return
	}
	if err := s.sched.SetTailFactor(model, f); err != nil {
		s.log.Error().Err(err).Msg("tail factor")
		return
	}
	s.log.Debug().Str("model", s.cfg.Models[model].Name).Float64("tail_factor", f).Msg("batches overrun their profile: deadlines planned with the tail factor")
}

// enable brings GPUs of b back into rotation after a stall. Called with
// s.mu held.
func (s *Service) enable(b *backendConn, gpus []scheduler.GPUID) {
	if len(gpus) == 0 || b.leaving || b.gone {
		return
	}
	for _, g := range gpus {
		s.sched.EnableGPU(g, s.watch.FreeAt(g))
	}
	s.warn.Info().Str("backend", b.name).Int("gpus", len(gpus)).Msg("stalled GPUs answer again: back in rotation")
}

// leaving starts a backend's drain: its GPUs leave rotation at once, and
// it is told LeaveOK once it has reported every plan it was sent.
func (s *Service) leaving(b *backendConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.leaving || b.gone {
		return
	}
	b.leaving = true
	for g := b.base; g < b.base+scheduler.GPUID(b.n); g++ {
		s.sched.DisableGPU(g)
	}
	s.log.Info().Str("name", b.name).Int("gpus", b.n).Int("plans_held", s.heldBy(b)).Msg("backend draining")
	s.maybeLeaveOK(b)
}

// heldBy is the number of plans b holds. Called with s.mu held.
func (s *Service) heldBy(b *backendConn) int {
	n := 0
	for g := b.base; g < b.base+scheduler.GPUID(b.n); g++ {
		n += len(s.gpus[g].outstanding)
	}
	return n
}

// maybeLeaveOK tells a draining backend that it may go, once it holds no
// plan. From then on no plan goes to it: Planned puts a plan that a grant
// already in flight makes for its GPUs back in its model's queue. Called
// with s.mu held, so that no plan is recorded for b in between.
func (s *Service) maybeLeaveOK(b *backendConn) {
	if !b.leaving || b.leaveOK || s.heldBy(b) > 0 {
		return
	}
	b.leaveOK = true
	if err := b.conn.Send(&wire.LeaveOK{}); err != nil {
		s.log.Debug().Err(err).Str("name", b.name).Msg("LeaveOK not sent: the backend's connection closed")
	}
}

// watchLoop ticks the watcher: GPUs found stalled leave rotation, and the
// requests of the plans they held end as "backend stalled" failures.
func (s *Service) watchLoop() {
	defer close(s.watchDone)
	t := time.NewTicker(WatchPeriod)
	defer t.Stop()
	last := s.sched.Now()
	for {
		select {
		case <-s.stopWatch:
			return
		case <-t.C:
		}
		s.mu.Lock()
		now := s.sched.Now()
		if now.Sub(last) > s.cfg.StallAfter/2 {
			// This process was paused: the backends' reports may be
			// in its sockets still. Judge no one before StallAfter.
			s.watch.Resume(now)
			s.warn.Warn().Str("paused", now.Sub(last).Round(time.Millisecond).String()).Msg("the scheduler itself was paused: no GPU is judged stalled before the stall timeout passes again")
		}
		last = now
		s.ctlTimeouts(now)
		s.sampleSignals(now)
		if s.watch.WakeAt() > now {
			s.mu.Unlock()
			continue
		}
		for _, st := range s.watch.Tick(now) {
			s.stalled(now, &st)
		}
		s.mu.Unlock()
	}
}

// stalled takes a stalled GPU out of rotation and ends the requests of the
// plans it held. Called with s.mu held.
func (s *Service) stalled(now scheduler.Time, st *gpuwatch.Stall) {
	gs := &s.gpus[st.GPU]
	b := gs.owner
	if b == nil {
		return
	}
	s.sched.DisableGPU(st.GPU)
	detail := fmt.Sprintf("%s: GPU %d %s for %v", b.name, st.GPU, st.Why, now.Sub(st.Since).Round(time.Millisecond))
	n := 0
	var byModel []modelCount
	retired := make([]uint64, 0, len(st.Retired))
	for _, id := range st.Retired {
		sp, ok := gs.outstanding[uint64(id)]
		if !ok {
			continue
		}
		retired = append(retired, uint64(id))
		delete(gs.outstanding, uint64(id))
		s.planEnded(sp)
		byModel = append(byModel, modelCount{sp.model, len(sp.reqs)})
		for _, r := range sp.reqs {
			if f := s.frontends[r.e.frontend]; f != nil {
				s.tell(f, wire.End{ID: r.e.id, Code: wire.EndBackendStalled, Detail: detail})
			}
			n++
		}
	}
	if len(retired) > 0 {
		// The backend is not to spend its GPU on them when it answers
		// again; the message follows the plans on the connection.
		_ = b.conn.Send(&wire.Retire{Plans: retired})
	}
	s.count(func(c *Stats) {
		c.Stalls++
		c.Failed += uint64(n)
		for _, m := range byModel {
			c.Models[m.model].Failed += uint64(m.n)
		}
	})
	s.warn.Warn().Str("backend", b.name).Uint32("gpu", uint32(st.GPU)).Stringer("why", st.Why).
		Str("since", now.Sub(st.Since).Round(time.Millisecond).String()).Int("requests_failed", n).
		Msg("GPU stalled: out of rotation until it answers")
	s.maybeLeaveOK(b)
}

// backendGone takes the backend's GPUs offline and fails every request of
// the plans it had not finished.
func (s *Service) backendGone(b *backendConn, err error) {
	lost := map[scheduler.FrontendID][]wire.End{}
	s.mu.Lock()
	b.gone = true
	delete(s.backends, b)
	nlost := 0
	var byModel []modelCount
	for g := b.base; g < b.base+scheduler.GPUID(b.n); g++ {
		for _, sp := range s.gpus[g].outstanding {
			for _, r := range sp.reqs {
				lost[r.e.frontend] = append(lost[r.e.frontend], wire.End{ID: r.e.id, Code: wire.EndBackendLost, Detail: b.name})
				nlost++
			}
			byModel = append(byModel, modelCount{sp.model, len(sp.reqs)})
			s.planEnded(sp)
		}
		s.gpus[g] = gpuState{}
		s.sched.DisableGPU(g)
	}
	s.watch.Detach(b.id)
	s.backendLeft(b)
	for fid, ends := range lost {
		if f := s.frontends[fid]; f != nil {
			s.tell(f, ends...)
		}
	}
	s.mu.Unlock()
	s.count(func(st *Stats) {
		st.Failed += uint64(nlost)
		for _, c := range byModel {
			st.Models[c.model].Failed += uint64(c.n)
		}
	})
	ev := s.log.Warn()
	if nlost == 0 && b.leaveOK {
		ev = s.log.Info() // a drained backend leaving, as it said it would
	}
	ev.Str("name", b.name).Int("gpus", b.n).Int("requests_failed", nlost).AnErr("reason", err).Msg("backend left")
}

// Planned implements rt.Sink: it sends the plan to the GPU's backend, and
// returns when the GPU is expected to be really free after it (see
// gpuwatch). Requests of frontends that have left are left out
// (Stats.Orphaned): the backend would only fail to pull their inputs, and
// no one would hear. A plan whose GPU cannot take it (its backend left or
// drains, or the GPU is stalled: a grant made just before) never reaches
// it: its requests go back to their model's queue, with their deadlines,
// instead of failing.
func (s *Service) Planned(p *scheduler.BatchPlan) scheduler.Time {
	plan := &wire.Plan{ID: uint64(p.ID), GPU: uint32(p.GPU), Model: uint32(p.Model), ExecAt: s.toUnix(p.ExecAt)}
	// reqs holds the plan's requests and entries: recorded with the plan
	// if it is sent, put back in the queue if it cannot be.
	reqs := make([]planned, 0, len(p.Requests))
	dl := scheduler.Never
	orphans := 0
	freeAt := p.FinishAt
	s.mu.Lock() // for s.frontends and the GPU; the table has its own lock, taken inside
	st := &s.gpus[p.GPU]
	b := st.owner
	takes := b != nil && !b.gone && !b.leaving && !s.watch.Stalled(p.GPU)
	if takes {
		plan.Tasks = make([]wire.PlanTask, 0, len(p.Requests))
	}
	for i := range p.Requests {
		r := &p.Requests[i]
		e, ok := s.table.take(r.ID)
		switch {
		case !ok:
			s.warn.Error().Uint64("key", uint64(r.ID)).Msg("planned request not in the table")
			continue
		case s.frontends[e.frontend] == nil:
			orphans++
			continue
		}
		reqs = append(reqs, planned{r: *r, e: e})
		if !takes {
			continue
		}
		dl = scheduler.MinTime(dl, r.Deadline)
		plan.Tasks = append(plan.Tasks, wire.PlanTask{ID: e.id, Frontend: uint32(e.frontend), Input: e.input,
			FinishBy: s.toUnix(r.Deadline.Add(-s.cfg.ResultTrip))})
	}
	if len(plan.Tasks) > 0 {
		plan.Deadline = s.toUnix(dl)
		// Sent under the lock, as it is recorded: no stall can retire
		// it, and no LeaveOK overtake it, before it is on its way.
		if err := b.conn.Send(plan); err != nil {
			// The connection is closing: the plan never reached the
			// backend; its requests go back to the queue.
			takes = false
		} else {
			st.outstanding[plan.ID] = sentPlan{model: p.Model, reqs: reqs}
			s.inFlight++
			freeAt = s.watch.Sent(p.GPU, p.ID, p.ExecAt, p.FinishAt.Sub(p.ExecAt))
			// Counted with the plan in flight, so that no Snapshot
			// (nor a report of the plan) sees one without the other.
			s.count(func(c *Stats) {
				c.Planned += uint64(len(reqs))
				c.Plans++
				m := &c.Models[p.Model]
				m.Plans++
				for len(m.BatchSizes) <= len(reqs) {
					m.BatchSizes = append(m.BatchSizes, 0)
				}
				m.BatchSizes[len(reqs)]++
			})
		}
	}
	// The orphans end here: no one waits for them.
	s.settle(p.Model, orphans)
	s.mu.Unlock()
	if orphans > 0 {
		s.count(func(st *Stats) { st.Orphaned += uint64(orphans) })
	}
	if !takes {
		s.requeue(p.Model, reqs)
	}
	return freeAt
}

// requeue puts requests whose plan could not be sent back in their
// model's queue, with their arrival and deadline: a GPU of another backend
// may still serve them in time. If the scheduler has stopped, they end as
// shutdown drops.
func (s *Service) requeue(model scheduler.ModelID, ks []planned) {
	if len(ks) == 0 {
		return
	}
	reqs := make([]scheduler.Request, len(ks))
	for i := range ks {
		reqs[i] = ks[i].r
		reqs[i].ID = s.table.put(ks[i].e)
	}
	if err := s.sched.Submit(model, reqs); err != nil {
		ends := map[scheduler.FrontendID][]wire.End{}
		for _, r := range reqs {
			if e, ok := s.table.take(r.ID); ok {
				ends[e.frontend] = append(ends[e.frontend], wire.End{ID: e.id, Code: wire.EndDropShutdown})
			}
		}
		s.count(func(st *Stats) {
			st.Dropped += uint64(len(reqs))
			st.Models[model].Dropped["shutdown"] += uint64(len(reqs))
		})
		s.mu.Lock()
		s.settle(model, len(reqs))
		for fid, es := range ends {
			if f := s.frontends[fid]; f != nil {
				s.tell(f, es...)
			}
		}
		s.mu.Unlock()
		return
	}
	s.count(func(st *Stats) { st.Resubmitted += uint64(len(reqs)) })
}

// Dropped implements rt.Sink: it tells the request's frontend.
func (s *Service) Dropped(model scheduler.ModelID, d *scheduler.Drop) {
	e, ok := s.table.take(d.Request.ID)
	if !ok {
		s.warn.Error().Uint64("key", uint64(d.Request.ID)).Msg("dropped request not in the table")
		return
	}
	code := wire.EndDropDeadline
	switch d.Reason {
	case scheduler.DropPruned:
		code = wire.EndDropOverload
	case scheduler.DropShutdown:
		code = wire.EndDropShutdown
	}
	s.count(func(st *Stats) {
		st.Dropped++
		if int(model) < len(st.Models) {
			st.Models[model].Dropped[dropLabel(d.Reason)]++
		}
	})
	s.mu.Lock()
	f := s.frontends[e.frontend]
	s.settle(model, 1)
	s.mu.Unlock()
	if f != nil {
		s.tell(f, wire.End{ID: e.id, Code: code})
	}
}

// entry is what the service keeps of a queued request: who owns it and
// where its input lives. The scheduler cores see only its key.
type entry struct {
	frontend scheduler.FrontendID
	id       uint64
	input    wire.InputRef
}

// slotTable maps the scheduler's request keys to entries. A key is a slot
// index and a generation, so a stale key never finds a reused slot; take
// removes, so a request is planned or dropped at most once.
type slotTable struct {
	mu    sync.Mutex
	slots []slot
	free  []uint32
}

type slot struct {
	e    entry
	gen  uint32
	used bool
}

func (t *slotTable) put(e entry) scheduler.RequestID {
	t.mu.Lock()
	defer t.mu.Unlock()
	var i uint32
	if k := len(t.free); k > 0 {
		i = t.free[k-1]
		t.free = t.free[:k-1]
	} else {
		i = uint32(len(t.slots))
		t.slots = append(t.slots, slot{})
	}
	sl := &t.slots[i]
	sl.gen++
	sl.e, sl.used = e, true
	return scheduler.RequestID(uint64(sl.gen)<<32 | uint64(i))
}

func (t *slotTable) take(key scheduler.RequestID) (entry, bool) {
	i, gen := uint32(key), uint32(key>>32)
	t.mu.Lock()
	defer t.mu.Unlock()
	if int(i) >= len(t.slots) {
		return entry{}, false
	}
	sl := &t.slots[i]
	if !sl.used || sl.gen != gen {
		return entry{}, false
	}
	sl.used = false
	t.free = append(t.free, i)
	return sl.e, true
}

// Package backend is the GPU agent (`symphony backend`): it owns GPUs,
// registers them with the scheduler, and for each batch plan pulls the
// inputs straight from the frontends that hold them, runs the batch no
// earlier than its exec_at, sends each result to its frontend and tells the
// scheduler when the GPU frees (Symphony paper §4.1).
//
// Failures end requests, never lose them: an input that cannot be pulled
// by the batch's latest start ends with an input-unavailable error and the
// batch runs without it; an executor failure ends the whole batch with an
// executor-failed error; either way the GPU is reported free.
//
// A batch never starts when it can no longer finish in time: a GPU that
// runs behind its plans drops, at once and as deadline drops, the
// requests whose results would come late, and runs the rest. The
// scheduler learns from every GPUFree how late the GPU runs and plans it
// later (scheduler/gpuwatch); heartbeats tell it the backend is alive.
// Drain leaves gracefully: no new plans, the plans held run to the end,
// their results are delivered, then the agent closes.
//
// The control plane moves GPUs between the parts of the model set, each
// served by a scheduler of its own, and a free pool: MoveTo leaves the
// current scheduler in the same graceful way and registers with another,
// and Park leaves it for no scheduler, with the agent still running. No
// request is lost or failed by a move: the new scheduler is dialed only
// once every plan of the old one has finished and its results are sent.
package backend

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/ants/v2"
	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/backend/cpupin"
	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/ratelog"
	"github.com/symphony-serving/symphony/transport/rdma"
	"github.com/symphony-serving/symphony/transport/wire"
)

// Config configures a backend agent.
type Config struct {
	// SchedulerAddr is the scheduler the agent registers its GPUs with
	// when it starts. It may be empty only with Parked.
	SchedulerAddr string
	// Parked starts the agent in the free pool: registered with no
	// scheduler, its GPUs idle, until MoveTo gives it one (the control
	// plane hands out pooled GPUs as parts need them). SchedulerAddr must
	// then be empty.
	Parked bool
	// Name identifies the backend in logs.
	Name    string
	GPUs    int
	Network transport.Network
	// Executor runs the batches; default an Emulated executor.
	Executor Executor
	// QueueDepth is how many plans may wait per GPU.
	QueueDepth int
	// Pullers bounds the concurrent input pulls (an ants pool).
	Pullers int
	// DataPath is how inputs are read (--data-path): RDMA READs of the
	// frontends' registered memory where both sides have it, TCP
	// otherwise and as the fallback.
	DataPath rdma.Config
	// ReceiveBytes sizes the registered buffers RDMA READs land in.
	ReceiveBytes int
	// Heartbeat is how often the agent tells the scheduler it is alive,
	// so that a stopped backend is told apart from an idle one. It must be
	// well under the scheduler's stall timeout (100ms or more).
	Heartbeat time.Duration
	// ExecutorCPUs, if set, gives each GPU's batches a CPU of their own:
	// GPU i's runner (the goroutine that calls the Executor) is pinned to
	// ExecutorCPUs[i], and every other thread of the process is kept off
	// those CPUs (backend/cpupin). It is for executors that run on the
	// CPU: a batch that shares its core with the backend's network
	// goroutines, or with other processes, runs far slower than its
	// profile at the tail. It needs Linux and one CPU per GPU, each one
	// the process may run on, with at least one left for the rest.
	ExecutorCPUs []int
	Backoff      transport.Backoff
	Log          zerolog.Logger
}

// DefaultHeartbeat is Config.Heartbeat's default: five beats in the
// scheduler's shortest default stall timeout.
const DefaultHeartbeat = 20 * time.Millisecond

// Default returns the defaults.
func Default() Config {
	return Config{Name: "backend", GPUs: 1, QueueDepth: 64, Pullers: 256, DataPath: rdma.DefaultConfig(),
		ReceiveBytes: 64 << 20, Heartbeat: DefaultHeartbeat, Backoff: transport.DefaultBackoff(), Log: zerolog.Nop()}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.SchedulerAddr == "" && !c.Parked:
		return errors.New("backend: no scheduler address")
	case c.SchedulerAddr != "" && c.Parked:
		return fmt.Errorf("backend: parked, yet given the scheduler address %q: a parked agent registers nowhere until MoveTo", c.SchedulerAddr)
	case c.Network == nil:
		return errors.New("backend: no network")
	case c.GPUs < 1 || c.GPUs > wire.MaxGPUs:
		return fmt.Errorf("backend: %d GPUs, want 1..%d", c.GPUs, wire.MaxGPUs)
	case c.QueueDepth < 1 || c.Pullers < 1:
		return errors.New("backend: queue depth and pullers must be positive")
	case c.DataPath.Mode != rdma.ModeTCP && c.ReceiveBytes < 1<<20:
		return fmt.Errorf("backend: %d bytes of RDMA receive buffers, want at least 1 MiB", c.ReceiveBytes)
	case c.Heartbeat <= 0:
		return fmt.Errorf("backend: heartbeat period %v must be positive", c.Heartbeat)
	case len(c.ExecutorCPUs) > 0 && len(c.ExecutorCPUs) != c.GPUs:
		return fmt.Errorf("backend: %d executor CPUs for %d GPUs: give one per GPU", len(c.ExecutorCPUs), c.GPUs)
	case len(c.ExecutorCPUs) > 0 && !cpupin.Supported:
		return errors.New("backend: executor CPUs need Linux")
	}
	return c.Backoff.Validate()
}

// Agent is a running backend.
type Agent struct {
	cfg Config
	log zerolog.Logger
	// warn is log rate-limited, for lines that can repeat per plan.
	warn zerolog.Logger
	exec Executor
	pull *tcpPuller // data connections: input reads and results
	// rdma READs inputs where frontends serve RDMA; nil on the TCP path.
	rdma *rdmaPuller
	// reads is how batches get their inputs: rdma if set, else pull.
	reads    Puller
	dataPath rdma.Choice
	pool     *ants.Pool
	gpus     []*gpuWorker
	// life ends when Close is called; every pull's context derives from
	// it, so that Close stops pulls instead of leaving them to run until
	// their plan's deadline.
	life  context.Context
	stop  context.CancelFunc
	done  chan struct{}
	ready chan struct{}
	once  sync.Once
	// closeOnce makes Close (which Drain ends with) safe to call again.
	closeOnce sync.Once

	// moves serializes MoveTo and Park (a semaphore of one): a move holds
	// it until it returns, or, if its caller gave up during the leave,
	// until it has switched the dial loop to the next address.
	moves chan struct{}

	mu      sync.Mutex
	session *schedSession
	// draining is set by Drain: the agent registers with no scheduler
	// any more.
	draining bool
	// reg is the registration the dial loop works on: the scheduler the
	// agent is registered or registering with; nil while parked. A move
	// replaces it, and a session registers only for the reg it was
	// dialed for, so that a dial under way for an address left behind
	// never brings GPUs online there.
	reg *registration
	// leaving is set while a move leaves its scheduler, before it
	// switches to next (the scheduler it goes to, "" to park): no session
	// registers meanwhile, not even one redialed to the scheduler being
	// left.
	leaving bool
	next    string
	// cancelDial ends the dial loop's work on reg, with the reason the
	// scheduler connection closes with; the loop sets it for each reg.
	cancelDial context.CancelCauseFunc
	// jobs counts the plans queued or running on the GPUs, so that Drain
	// can wait for them; idle gets a signal (capacity 1) each time it
	// falls to zero.
	jobs atomic.Int64
	idle chan struct{}

	stats Stats
}

// Stats count what the agent did.
type Stats struct {
	Plans, Requests, Failed atomic.Uint64
	// Dropped counts requests the agent dropped because its GPU ran too
	// late for them: their batch could no longer finish by their
	// deadline. Failed does not count them.
	Dropped atomic.Uint64
	// Undelivered counts results (outputs and failures) that could not be
	// sent because their frontend's data connection was down or the
	// scheduler had said the frontend left; that frontend ends those
	// requests itself.
	Undelivered atomic.Uint64
	// SuppressedLogs counts the warnings that can repeat per plan or
	// connection (executor failures, full GPU queues, undelivered
	// results) held back by the agent's rate limit (transport/ratelog).
	SuppressedLogs atomic.Uint64
	// StartLag counts how late each batch started against its plan's
	// ExecAt, plans given up included.
	StartLag LagHistogram

	// models holds the per-model counts (Models), by model name.
	modelsMu sync.Mutex
	models   map[string]*ModelCounts
}

// ModelCounts are one model's plans on a backend: those received, their
// requests, the requests failed and dropped (as Stats counts them all),
// and the time its batches ran on the GPUs.
type ModelCounts struct {
	Model                            string
	Plans, Requests, Failed, Dropped uint64
	Busy                             time.Duration
}

// model updates the counts of the model called name.
func (s *Stats) model(name string, f func(*ModelCounts)) {
	s.modelsMu.Lock()
	if s.models == nil {
		s.models = map[string]*ModelCounts{}
	}
	m := s.models[name]
	if m == nil {
		m = &ModelCounts{Model: name}
		s.models[name] = m
	}
	f(m)
	s.modelsMu.Unlock()
}

// Models returns a copy of the per-model counts, by model name, for
// metrics: every model this backend has received a plan of.
func (s *Stats) Models() []ModelCounts {
	s.modelsMu.Lock()
	defer s.modelsMu.Unlock()
	out := make([]ModelCounts, 0, len(s.models))
	for _, m := range s.models {
		out = append(out, *m)
	}
	slices.SortFunc(out, func(a, b ModelCounts) int { return strings.Compare(a.Model, b.Model) })
	return out
}

// schedSession is one connection to the scheduler. GPU IDs are only valid
// within it: after a reconnection the scheduler may number the GPUs anew.
type schedSession struct {
	conn   transport.Conn
	base   uint32
	models map[uint32]wire.ModelSpec
	dead   atomic.Bool
	// leaveOK is closed when the scheduler answers Leaving with LeaveOK,
	// closed when the connection has closed.
	leaveOK     chan struct{}
	leaveOKOnce sync.Once
	closed      <-chan struct{}
	// controls queues the scheduler's model loads and unloads for
	// runControls.
	controls chan *wire.Control
}

// registration is the agent's registration with the scheduler at addr:
// the one it starts with, or a move's.
type registration struct {
	addr string
	// done is closed once the agent has registered with addr (err nil), or
	// never will under this registration (err says why: a later move, a
	// drain).
	done chan struct{}
	err  error
	once sync.Once
}

func newRegistration(addr string) *registration {
	return &registration{addr: addr, done: make(chan struct{})}
}

// finish settles r, the first time only.
func (r *registration) finish(err error) {
	r.once.Do(func() {
		r.err = err
		close(r.done)
	})
}

// job is one plan on its way through a GPU worker.
type job struct {
	s      *schedSession
	plan   *wire.Plan
	model  wire.ModelSpec
	mu     sync.Mutex
	inputs [][]byte
	why    []string // why inputs[i] is missing
	closed bool     // the worker stopped waiting; late pulls are ignored
	// pulled closes when every frontend's read is done; progress gets a
	// signal (capacity 1) each time one is, and remaining counts those
	// still out (under mu).
	pulled    chan struct{}
	progress  chan struct{}
	remaining int
	// cancelPulls stops pulls the worker no longer waits for.
	cancelPulls context.CancelFunc
	// retired: the scheduler ended this plan's requests (wire.Retire);
	// the GPU skips it.
	retired atomic.Bool
}

type gpuWorker struct {
	index int
	depth int
	// queue holds the plans waiting for the GPU, in order (under mu);
	// ready gets a signal (capacity 1) when one is added.
	mu    sync.Mutex
	queue []*job
	ready chan struct{}
	// slowdown is how much longer than their profile this GPU's batches
	// take: an exponentially weighted mean of the ratio, touched only by
	// the worker. The late-start rule judges a batch by it, so that a GPU
	// slower than its profile (a throttled card, say) drops what it
	// cannot finish in time rather than answering late.
	slowdown float64
}

// slowdownWeight is the weight of each batch in a GPU's slowdown: it
// follows roughly the last ten batches.
const slowdownWeight = 0.1

// latency is how long a batch of k of model takes on this GPU: its
// profile, stretched by the GPU's measured slowdown if it runs slow.
func (w *gpuWorker) latency(model wire.ModelSpec, k int) time.Duration {
	return time.Duration(float64(model.Latency[k-1]) * max(w.slowdown, 1))
}

// measured records that a batch of k ran for took.
func (w *gpuWorker) measured(model wire.ModelSpec, k int, took time.Duration) {
	w.slowdown += slowdownWeight * (float64(took)/float64(model.Latency[k-1]) - w.slowdown)
}

// Start starts a backend: it connects to the scheduler (reconnecting with
// backoff) and serves plans until Close.
func Start(cfg Config) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Executor == nil {
		cfg.Executor = NewEmulated()
	}
	if len(cfg.ExecutorCPUs) > 0 {
		if err := cpupin.Reserve(cfg.ExecutorCPUs); err != nil {
			return nil, fmt.Errorf("backend: executor CPUs: %w", err)
		}
	}
	// Nonblocking: a full pool must not stall the scheduler connection's
	// handler; startPlan then pulls on a goroutine of its own.
	pool, err := ants.NewPool(cfg.Pullers, ants.WithNonblocking(true))
	if err != nil {
		return nil, fmt.Errorf("backend: pull pool: %w", err)
	}
	log := cfg.Log.With().Str("backend", cfg.Name).Logger()
	a := &Agent{
		cfg: cfg, log: log, exec: cfg.Executor, pool: pool,
		pull: newTCPPuller(cfg.Network, cfg.Name, cfg.Backoff, log),
		done: make(chan struct{}), ready: make(chan struct{}), idle: make(chan struct{}, 1),
		moves: make(chan struct{}, 1),
	}
	if !cfg.Parked {
		a.reg = newRegistration(cfg.SchedulerAddr)
	}
	a.reads = a.pull
	a.pull.undelivered = &a.stats.Undelivered
	a.warn = ratelog.New(log, &a.stats.SuppressedLogs)
	a.pull.warn = a.warn
	fab, choice, err := rdma.Select(cfg.DataPath)
	if err != nil {
		pool.Release()
		return nil, fmt.Errorf("backend: %w", err)
	}
	if fab != nil {
		rc := rdma.DefaultReaderConfig(fab)
		rc.ReceiveBytes, rc.Log = cfg.ReceiveBytes, log
		reader, err := rdma.NewReader(rc)
		if err != nil {
			_ = fab.Close()
			if cfg.DataPath.Mode == rdma.ModeRDMA {
				pool.Release()
				return nil, fmt.Errorf("backend: %w: %w", rdma.ErrRDMARequired, err)
			}
			choice = rdma.Choice{Why: "auto: " + err.Error()}
		} else {
			a.rdma = newRDMAPuller(a.pull, reader, cfg.Backoff, log)
			a.reads = a.rdma
		}
	}
	a.dataPath = choice
	log.Info().Stringer("data_path", choice).Msg("data path")
	ctx, cancel := context.WithCancel(context.Background())
	a.life, a.stop = ctx, cancel
	var wg sync.WaitGroup
	pinned := make(chan error, cfg.GPUs)
	for i := 0; i < cfg.GPUs; i++ {
		w := &gpuWorker{index: i, depth: cfg.QueueDepth, ready: make(chan struct{}, 1), slowdown: 1}
		a.gpus = append(a.gpus, w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if len(cfg.ExecutorCPUs) > 0 {
				err := cpupin.Pin(cfg.ExecutorCPUs[i])
				pinned <- err
				if err != nil {
					return
				}
			}
			a.runGPU(ctx, w)
		}()
	}
	if len(cfg.ExecutorCPUs) > 0 {
		for range cfg.GPUs {
			if err := <-pinned; err != nil {
				cancel()
				wg.Wait()
				pool.Release()
				return nil, fmt.Errorf("backend: %w", err)
			}
		}
		log.Info().Ints("executor_cpus", cfg.ExecutorCPUs).Msg("each GPU's batches run on a CPU of their own")
	}
	if cfg.Parked {
		log.Info().Msg("parked: registered with no scheduler until moved")
	}
	go func() {
		a.dialLoop(ctx)
		wg.Wait()
		close(a.done)
	}()
	return a, nil
}

// Stats returns the agent's counters.
func (a *Agent) Stats() *Stats { return &a.stats }

// DataPath says how the agent reads inputs, and why.
func (a *Agent) DataPath() rdma.Choice { return a.dataPath }

// RDMAStats counts the agent's RDMA reads and fallbacks; nil on the TCP
// data path.
func (a *Agent) RDMAStats() *rdma.ReaderStats {
	if a.rdma == nil {
		return nil
	}
	return a.rdma.reader.Stats()
}

// WaitReady waits until the agent has registered its GPUs once (with any
// scheduler: an agent started parked waits for its first MoveTo).
func (a *Agent) WaitReady(ctx context.Context) error {
	select {
	case <-a.ready:
		return nil
	case <-ctx.Done():
		if addr := a.SchedulerAddr(); addr != "" {
			return fmt.Errorf("backend: waiting for the scheduler at %s: %w", addr, ctx.Err())
		}
		return fmt.Errorf("backend: parked, waiting to be moved to a scheduler: %w", ctx.Err())
	}
}

// Ready reports whether the agent can take plans now: nil once its GPUs
// are registered with the scheduler over a live connection, else why not
// (not yet registered, the connection lost and being redialed, moving to
// another scheduler, parked, or draining). It is what the backend's
// /readyz answers: a parked agent is healthy but takes no plans.
func (a *Agent) Ready() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.draining:
		return errors.New("draining")
	case a.leaving && a.next == "":
		return fmt.Errorf("leaving the scheduler at %s to park", a.schedAddrLocked())
	case a.leaving:
		return fmt.Errorf("moving from the scheduler at %s to %s", a.schedAddrLocked(), a.next)
	case a.reg == nil:
		return errors.New("parked: registered with no scheduler")
	case a.session == nil:
		return fmt.Errorf("not registered with the scheduler at %s yet", a.reg.addr)
	case a.session.dead.Load():
		return fmt.Errorf("connection to the scheduler at %s lost: reconnecting", a.reg.addr)
	}
	return nil
}

// SchedulerAddr is the address of the scheduler the agent is registered
// or registering with now ("" while parked). During a move it is the
// scheduler being left until every plan of it has finished, then the new
// one.
func (a *Agent) SchedulerAddr() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.schedAddrLocked()
}

func (a *Agent) schedAddrLocked() string {
	if a.reg == nil {
		return ""
	}
	return a.reg.addr
}

// Close stops the agent at once, as a crash would: batches in flight are
// abandoned and the scheduler fails their requests. It returns when every
// goroutine has stopped: pulls in flight see their context end and return.
func (a *Agent) Close() {
	a.closeOnce.Do(func() {
		a.stop()
		<-a.done
		a.pull.closeAll()
		if a.rdma != nil {
			a.rdma.close()
		}
		if err := a.pool.ReleaseTimeout(closeWait); err != nil {
			a.log.Warn().Err(err).Str("waited", closeWait.String()).Msg("input pulls still running after close")
		}
	})
}

// closeWait bounds how long Close waits for pulls in flight, whose
// contexts it has ended; one that ignores its context should not hang the
// caller.
const closeWait = 5 * time.Second

// dialLoop keeps the agent registered with the scheduler of a.reg,
// redialing with backoff, until the agent closes. A move ends its work on
// one registration (cancelDial), which closes that scheduler's
// connection, and it goes on with the next; while parked it dials
// nothing.
func (a *Agent) dialLoop(life context.Context) {
	for life.Err() == nil {
		ctx, cancel := context.WithCancelCause(life)
		a.mu.Lock()
		reg := a.reg
		a.cancelDial = cancel
		a.mu.Unlock()
		if reg == nil {
			<-ctx.Done() // parked
		} else {
			log := a.log.With().Str("scheduler", reg.addr).Logger()
			transport.KeepDialing(ctx, a.cfg.Backoff, log, func(ctx context.Context) error {
				return a.dialScheduler(ctx, reg)
			})
		}
		cancel(nil)
	}
}

// mayRegisterLocked says why a session dialed for reg must not register
// ("" if it may): the agent drains, leaves its scheduler, or has moved on
// from reg. Called with a.mu held.
func (a *Agent) mayRegisterLocked(reg *registration) string {
	switch {
	case a.draining:
		return "backend draining"
	case a.leaving:
		return "backend leaving its scheduler"
	case a.reg != reg:
		return "backend moved to another scheduler"
	}
	return ""
}

// dialScheduler dials the scheduler of reg, registers the GPUs with it
// and serves the connection until it closes or ctx ends.
func (a *Agent) dialScheduler(ctx context.Context, reg *registration) error {
	a.mu.Lock()
	why := a.mayRegisterLocked(reg)
	a.mu.Unlock()
	if why != "" {
		// Leaving (draining, or moving away): register with no
		// scheduler again under reg.
		<-ctx.Done()
		return ctx.Err()
	}
	closed := make(chan struct{})
	var sess *schedSession
	var sessMu sync.Mutex // sess is set after Dial returns, before any plan arrives
	sessMu.Lock()
	h := transport.HandlerFuncs{
		Message: func(c transport.Conn, m wire.Message) {
			sessMu.Lock()
			s := sess
			sessMu.Unlock()
			a.onSchedulerMessage(s, m)
		},
		Closed: func(transport.Conn, error) {
			sessMu.Lock()
			if sess != nil {
				sess.dead.Store(true)
			}
			sessMu.Unlock()
			close(closed)
		},
	}
	hello := &wire.Hello{Version: wire.Version, Role: wire.RoleBackend, Name: a.cfg.Name, GPUs: uint32(a.cfg.GPUs)}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	conn, w, err := a.cfg.Network.Dial(dctx, reg.addr, hello, h)
	cancel()
	if err != nil {
		sessMu.Unlock()
		return err
	}
	sess = &schedSession{conn: conn, base: w.ID, models: map[uint32]wire.ModelSpec{}, leaveOK: make(chan struct{}), closed: closed,
		controls: make(chan *wire.Control, maxControls)}
	for _, m := range w.Models {
		sess.models[m.ID] = m
	}
	// Sessions only for the models that may get plans: those the
	// scheduler has not unloaded (model control). Later loads and
	// unloads come as Controls, run once this Load is done.
	unloaded := map[uint32]bool{}
	for _, st := range w.States {
		unloaded[st.Model] = !st.State.Loaded()
	}
	load := make([]wire.ModelSpec, 0, len(w.Models))
	for _, m := range w.Models {
		if !unloaded[m.ID] {
			load = append(load, m)
		}
	}
	// Before any FrontendUp or FrontendDown on this connection (their
	// handler waits for sessMu), so that none is undone.
	a.pull.sync(w.Frontends)
	sessMu.Unlock()
	if err := a.exec.Load(load); err != nil {
		conn.Close(fmt.Errorf("loading models: %w", err))
		<-closed
		return err
	}
	go a.runControls(sess)
	a.mu.Lock()
	if why := a.mayRegisterLocked(reg); why != "" {
		// Drain or a move began while the models loaded: bring no GPU
		// online.
		a.mu.Unlock()
		conn.Close(errors.New(why))
		<-closed
		<-ctx.Done()
		return ctx.Err()
	}
	a.session = sess
	// Sent under a.mu, so that a Drain or a move sees either no session
	// (and this one never reports ready) or one whose Leaving follows
	// BackendReady.
	err = conn.Send(&wire.BackendReady{GPUs: uint32(a.cfg.GPUs)})
	a.mu.Unlock()
	if err != nil {
		<-closed
		return err
	}
	reg.finish(nil)
	a.once.Do(func() { close(a.ready) })
	a.log.Info().Str("scheduler", reg.addr).Uint32("first_gpu", w.ID).Int("models", len(w.Models)).Msg("registered")
	beat := time.NewTicker(a.cfg.Heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-closed:
			return errors.New("scheduler connection closed")
		case <-ctx.Done():
			why := context.Cause(ctx) // a move says where it goes
			if errors.Is(why, context.Canceled) {
				why = errors.New("backend stopping")
			}
			conn.Close(why)
			<-closed
			return ctx.Err()
		case <-beat.C:
			_ = conn.Send(&wire.Heartbeat{}) // a closed connection shows on closed
		}
	}
}

func (a *Agent) onSchedulerMessage(s *schedSession, m wire.Message) {
	switch m := m.(type) {
	case *wire.Plan:
		a.startPlan(s, m)
	case *wire.LeaveOK:
		s.leaveOKOnce.Do(func() { close(s.leaveOK) })
	case *wire.Retire:
		a.retire(m.Plans)
	case *wire.FrontendUp:
		a.pull.up(m.ID, m.DataAddr)
	case *wire.FrontendDown:
		a.pull.down(m.ID)
	case *wire.Control:
		select {
		case s.controls <- m:
		default:
			s.conn.Close(fmt.Errorf("more than %d model loads and unloads queued", maxControls))
		}
	default:
		s.conn.Close(fmt.Errorf("unexpected %v from the scheduler", m.Kind()))
	}
}

// maxControls bounds the model loads and unloads a session queues: the
// scheduler has at most one under way per model, and one more to undo a
// failed load.
const maxControls = 2 * wire.MaxModels

// runControls loads and unloads models as the scheduler's Controls ask,
// one at a time and in order, until the session ends, and answers each.
// A load can take long (an ONNX session is built from its file), so it
// runs here rather than on the connection's reader, which keeps taking
// plans meanwhile.
func (a *Agent) runControls(s *schedSession) {
	for {
		var c *wire.Control
		select {
		case <-s.closed:
			return
		case c = <-s.controls:
		}
		done := &wire.ControlDone{Seq: c.Seq}
		spec, ok := s.models[c.Model]
		start := time.Now()
		var err error
		switch {
		case !ok:
			err = fmt.Errorf("no model %d in this session", c.Model)
		case c.Op == wire.OpLoad:
			var mem MemoryUsage
			mem, err = a.exec.LoadModel(spec)
			done.Memory = mem.Bytes
		default:
			err = a.exec.UnloadModel(c.Model)
		}
		if err != nil {
			done.Error = err.Error()
		}
		a.log.Info().Str("model", spec.Name).Stringer("op", c.Op).Uint64("memory_bytes", done.Memory).
			Dur("took", time.Since(start)).AnErr("error", err).Msg("model control")
		_ = s.conn.Send(done) // a closed connection shows on s.closed
	}
}

// startPlan checks a plan, starts pulling its inputs at once (while the GPU
// may still run the previous batch) and queues it on its GPU.
func (a *Agent) startPlan(s *schedSession, p *wire.Plan) {
	local := int(p.GPU) - int(s.base)
	model, ok := s.models[p.Model]
	switch {
	case local < 0 || local >= len(a.gpus):
		s.conn.Close(fmt.Errorf("plan %d for GPU %d, which is not ours", p.ID, p.GPU))
		return
	case !ok || len(p.Tasks) > len(model.Latency):
		s.conn.Close(fmt.Errorf("plan %d: model %d unknown or batch of %d too large", p.ID, p.Model, len(p.Tasks)))
		return
	}
	a.stats.Plans.Add(1)
	a.stats.Requests.Add(uint64(len(p.Tasks)))
	a.stats.model(model.Name, func(m *ModelCounts) { m.Plans++; m.Requests += uint64(len(p.Tasks)) })
	j := &job{s: s, plan: p, model: model, inputs: make([][]byte, len(p.Tasks)), why: make([]string, len(p.Tasks)),
		pulled: make(chan struct{}), progress: make(chan struct{}, 1)}
	if a.tooLate(p, model) {
		// Dead on arrival (a plan held up on its way, say behind a
		// stall): it ends now, without a pull and without taking a place
		// in the GPU's queue from the plans that can still run.
		a.stats.StartLag.Record(time.Since(time.Unix(0, p.ExecAt)))
		a.endPlan(j, wire.EndDropDeadline, "its plan reached the backend too late to run")
		return
	}
	// One Read per frontend, each on a pool task of its own, sent at
	// once: a frontend that answers late then holds up only its own
	// requests, and the worker can run the others.
	// The pulls last until the last request's finish-by: an input that
	// comes after the earliest deadline still serves the requests due
	// later (the GPU may reach the plan late, a frontend may answer
	// late), and lateHeads drops those that no input could save.
	byFrontend := map[uint32][]int{}
	lastFinishBy := p.Deadline
	for i := range p.Tasks {
		byFrontend[p.Tasks[i].Frontend] = append(byFrontend[p.Tasks[i].Frontend], i)
		lastFinishBy = max(lastFinishBy, p.Tasks[i].FinishBy)
	}
	ctx, cancel := context.WithDeadline(a.life, time.Unix(0, lastFinishBy))
	j.cancelPulls = cancel
	j.remaining = len(byFrontend)
	for fid, idx := range byFrontend {
		task := func() {
			r := PullRead{Frontend: fid, Ops: make([]wire.InputRef, len(idx)), Dst: make([][]byte, len(idx))}
			for k, i := range idx {
				r.Ops[k] = p.Tasks[i].Input
			}
			err := a.reads.ReadAll(ctx, []PullRead{r})[0]
			j.mu.Lock()
			if !j.closed {
				for k, i := range idx {
					switch {
					case err != nil:
						j.why[i] = err.Error()
					case r.Dst[k] == nil:
						j.why[i] = "input no longer held by its frontend"
					default:
						j.inputs[i] = r.Dst[k]
					}
				}
			}
			j.remaining--
			if j.remaining == 0 {
				close(j.pulled)
			}
			j.mu.Unlock()
			select {
			case j.progress <- struct{}{}:
			default:
			}
		}
		if err := a.pool.Submit(task); err != nil {
			go task() // pool closed or full: still pull
		}
	}
	a.jobAdded()
	if !a.push(a.gpus[local], j) {
		a.jobDone()
		a.warn.Error().Uint64("plan", p.ID).Int("gpu", local).Msg("GPU queue full; failing the plan")
		cancel()
		j.mu.Lock()
		j.closed = true
		j.mu.Unlock()
		a.endPlan(j, wire.EndExecutorFailed, "GPU queue full")
	}
}

// endPlan ends every request of j's plan with code and detail, and
// reports the plan as one that never reached its GPU.
func (a *Agent) endPlan(j *job, code wire.EndCode, detail string) {
	p := j.plan
	ends := make([]wire.Result, len(p.Tasks))
	for i := range p.Tasks {
		ends[i] = wire.Result{ID: p.Tasks[i].ID, Code: code, Detail: detail}
	}
	a.deliver(p, nil, ends)
	a.report(j, 0, time.Time{}, time.Time{}, ends)
}

// tooLate reports whether no request of p could finish in time even if it
// ran alone and at once.
func (a *Agent) tooLate(p *wire.Plan, model wire.ModelSpec) bool {
	soonest := time.Now().Add(model.Latency[0]).UnixNano()
	for i := range p.Tasks {
		if p.Tasks[i].FinishBy >= soonest {
			return false
		}
	}
	return true
}

// push queues j on w, making room by taking out retired plans if the
// queue is full; false if it is full of plans still to run.
func (a *Agent) push(w *gpuWorker, j *job) bool {
	w.mu.Lock()
	if len(w.queue) >= w.depth {
		kept := w.queue[:0]
		for _, q := range w.queue {
			if q.retired.Load() {
				q.cancelPulls()
				a.jobDone()
				continue
			}
			kept = append(kept, q)
		}
		clear(w.queue[len(kept):])
		w.queue = kept
	}
	ok := len(w.queue) < w.depth
	if ok {
		w.queue = append(w.queue, j)
	}
	w.mu.Unlock()
	if ok {
		select {
		case w.ready <- struct{}{}:
		default:
		}
	}
	return ok
}

// retire marks the plans ids retired, wherever they wait.
func (a *Agent) retire(ids []uint64) {
	set := make(map[uint64]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	for _, w := range a.gpus {
		w.mu.Lock()
		for _, q := range w.queue {
			if set[q.plan.ID] {
				q.retired.Store(true)
			}
		}
		w.mu.Unlock()
	}
}

// runGPU runs one GPU's plans in order.
func (a *Agent) runGPU(ctx context.Context, w *gpuWorker) {
	for {
		w.mu.Lock()
		var j *job
		if len(w.queue) > 0 {
			j = w.queue[0]
			w.queue[0] = nil
			w.queue = w.queue[1:]
		}
		w.mu.Unlock()
		if j == nil {
			select {
			case <-ctx.Done():
				return
			case <-w.ready:
			}
			continue
		}
		if j.retired.Load() {
			j.cancelPulls() // the scheduler ended its requests already
		} else {
			a.runJob(ctx, w, j)
		}
		a.jobDone()
		if ctx.Err() != nil {
			return
		}
	}
}

func (a *Agent) runJob(ctx context.Context, w *gpuWorker, j *job) {
	if j.s.dead.Load() {
		j.cancelPulls()
		return // the scheduler already failed this plan's requests
	}
	p := j.plan
	n := len(p.Tasks)
	// Tasks in the order of their finish-by times (the scheduler sends
	// them so; sorting costs nothing and relies on nothing).
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(x, y int) int { return cmp.Compare(p.Tasks[x].FinishBy, p.Tasks[y].FinishBy) })
	// Wait for the inputs while some of the batch can still finish in
	// time: first until the latest start of the whole plan (of fewer
	// requests if the plan reached this GPU late: a plan delayed on its
	// way, a GPU behind its plans), then, if the inputs are still out,
	// until the latest start without the earliest-deadline request, and
	// so on. A read that stalls for a few milliseconds then costs the
	// batch its most urgent requests, not all of it.
	if !a.waitInputs(ctx, w, j, order) {
		return
	}
	j.cancelPulls()
	j.mu.Lock()
	j.closed = true
	run := make([]int, 0, n) // the requests that have their input, by finish-by
	for _, i := range order {
		if j.inputs[i] != nil {
			run = append(run, i)
		} else if j.why[i] == "" {
			j.why[i] = "input arrived too late for the batch"
		}
	}
	j.mu.Unlock()
	if !waitUntil(ctx, time.Unix(0, p.ExecAt)) {
		return
	}
	started := time.Now()
	// Never start a batch that cannot finish in time: the requests with
	// the earliest finish-by go until the rest can (a smaller batch runs
	// shorter, and the requests left have later deadlines), so that a GPU
	// that runs late turns its lateness into drops now, not late answers
	// later. Those, and the requests whose inputs did not come, end now,
	// before the batch runs.
	drop := lateHeads(p, run, started, func(k int) time.Duration { return w.latency(j.model, k) })
	late := run[:drop]
	run = run[drop:]
	behind := started.Sub(time.Unix(0, p.ExecAt))
	a.stats.StartLag.Record(behind)
	ends := make([]wire.Result, 0, n-len(run))
	endTasks := make([]int, 0, n-len(run)) // ends[k] answers p.Tasks[endTasks[k]]
	// The details are the same for every request they end: formatted
	// once, and only if some request needs them.
	var lateDetail, behindDetail string
	if len(late) > 0 {
		lateDetail = fmt.Sprintf("the batch started %v after its plan's exec_at (its GPU or its inputs were late): it could no longer finish in time", behind.Round(time.Microsecond))
	}
	for _, i := range late {
		endTasks = append(endTasks, i)
		ends = append(ends, wire.Result{ID: p.Tasks[i].ID, Code: wire.EndDropDeadline, Detail: lateDetail})
	}
	aloneBy := started.Add(w.latency(j.model, 1)).UnixNano() // when a batch of one would finish
	for _, i := range order {
		if j.inputs[i] != nil {
			continue
		}
		endTasks = append(endTasks, i)
		if aloneBy > p.Tasks[i].FinishBy {
			// Too late even alone: its input would not have helped.
			if behindDetail == "" {
				behindDetail = fmt.Sprintf("its plan reached the GPU %v behind: too late to run", behind.Round(time.Microsecond))
			}
			ends = append(ends, wire.Result{ID: p.Tasks[i].ID, Code: wire.EndDropDeadline, Detail: behindDetail})
		} else {
			ends = append(ends, wire.Result{ID: p.Tasks[i].ID, Code: wire.EndInputUnavailable, Detail: j.why[i]})
		}
	}
	a.deliver(p, endTasks, ends)
	inputs := make([][]byte, len(run))
	for k, i := range run {
		inputs[k] = j.inputs[i]
	}
	var outs [][]byte
	var err error
	if len(inputs) > 0 {
		outs, err = a.exec.Execute(ctx, w.index, p.Model, inputs)
		if ctx.Err() != nil {
			return // stopping: abandoned, as in a crash
		}
		if err == nil && len(outs) != len(inputs) {
			err = fmt.Errorf("executor returned %d outputs for %d inputs", len(outs), len(inputs))
		}
	}
	finished := time.Now()
	if len(run) == 0 {
		finished = started // the GPU gave the plan up when it came to it
	} else if err == nil {
		w.measured(j.model, len(run), finished.Sub(started))
	}
	var cause string // the executor's error, the detail of every request it fails
	if err != nil {
		cause = err.Error()
		a.warn.Warn().Err(err).Uint64("plan", p.ID).Msg("executor failed")
	}
	results := make([]wire.Result, len(run))
	startedAt, finishedAt := started.UnixNano(), finished.UnixNano()
	for k, i := range run {
		r := wire.Result{ID: p.Tasks[i].ID, BatchSize: uint32(len(run)), StartedAt: startedAt, FinishedAt: finishedAt}
		if err != nil {
			r.Code, r.Detail = wire.EndExecutorFailed, cause
		} else {
			r.Output = outs[k]
		}
		results[k] = r
	}
	a.deliver(p, run, results)
	a.report(j, len(run), started, finished, ends, results)
}

// waitInputs waits for the plan's inputs (see runJob) until one of:
// every read has answered; every request that can still finish in time
// has its input; the latest
// start of the batch of those requests has passed and some inputs are in
// (the worker runs them, and the missing ones end as unavailable, so that
// one frontend slow to answer does not cost the others their requests);
// no request can finish in time any more. While no input at all is in (a
// stalled read of the plan's only frontend, say), it waits on as long as
// a smaller batch could still make its deadlines, giving up the earliest
// deadline at each step. It returns false if ctx ended.
func (a *Agent) waitInputs(ctx context.Context, w *gpuWorker, j *job, order []int) bool {
	p, n := j.plan, len(order)
	lat := func(k int) time.Duration { return w.latency(j.model, k) }
	wait := time.NewTimer(time.Hour)
	defer wait.Stop()
	for {
		select {
		case <-j.pulled:
			return true // every read has answered: nothing more will come
		default:
		}
		start := time.Now().Add(max(time.Until(time.Unix(0, p.ExecAt)), 0))
		h := lateHeads(p, order, start, lat)
		all, any := j.inputsIn(order[h:])
		if h == n || all {
			return true
		}
		latest := time.Unix(0, p.Tasks[order[h]].FinishBy).Add(-lat(n - h))
		wait.Reset(time.Until(latest))
		select {
		case <-j.progress:
		case <-wait.C:
			if any {
				return true
			}
		case <-ctx.Done():
			return false
		}
	}
}

// inputsIn reports whether every request of idx has its input, and
// whether any request of the plan has.
func (j *job) inputsIn(idx []int) (all, any bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	all = true
	for _, i := range idx {
		all = all && j.inputs[i] != nil
	}
	for _, in := range j.inputs {
		any = any || in != nil
	}
	return all, any
}

// lateHeads returns how many of the requests idx (indexes into p.Tasks,
// in finish-by order) a batch starting at start, and taking latency(k) for
// k requests, must leave out for the rest to finish in time: the fewest
// earliest-deadline ones. Leaving out
// the earliest deadlines is best: the best batch of any size k is the k
// latest deadlines, and if those k fit, so do the k-1 latest.
func lateHeads(p *wire.Plan, idx []int, start time.Time, latency func(k int) time.Duration) int {
	h := 0
	for h < len(idx) && start.Add(latency(len(idx)-h)).UnixNano() > p.Tasks[idx[h]].FinishBy {
		h++
	}
	return h
}

// deliver sends results to their frontends, one message per frontend:
// results[k] answers p.Tasks[tasks[k]], or p.Tasks[k] if tasks is nil.
// It goes by the task, not the result's ID: request IDs are unique per
// frontend only, so two frontends' requests in one plan may share one.
func (a *Agent) deliver(p *wire.Plan, tasks []int, results []wire.Result) {
	if len(results) == 0 {
		return
	}
	byFrontend := map[uint32][]wire.Result{}
	for k, r := range results {
		i := k
		if tasks != nil {
			i = tasks[k]
		}
		f := p.Tasks[i].Frontend
		byFrontend[f] = append(byFrontend[f], r)
	}
	for fid, rs := range byFrontend {
		a.pull.send(fid, rs)
	}
}

// report counts how the plan's requests ended (every result, in one
// slice or more) and tells the scheduler what the GPU did with the plan:
// it ran ran requests from started to finished, or, with ran 0, gave the
// plan up at finished (zero if the plan never reached the GPU).
func (a *Agent) report(j *job, ran int, started, finished time.Time, results ...[]wire.Result) {
	failed, dropped := 0, 0
	for _, rs := range results {
		for i := range rs {
			switch c := rs[i].Code; {
			case c == wire.EndDropDeadline:
				dropped++
			case c != 0:
				failed++
			}
		}
	}
	a.stats.Failed.Add(uint64(failed))
	a.stats.Dropped.Add(uint64(dropped))
	a.stats.model(j.model.Name, func(m *ModelCounts) {
		m.Failed += uint64(failed)
		m.Dropped += uint64(dropped)
		if ran > 0 && !started.IsZero() && finished.After(started) {
			m.Busy += finished.Sub(started)
		}
	})
	unix := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return t.UnixNano()
	}
	// After the session died this Send fails; the results still reach
	// their frontends (request IDs are unique per frontend, so a late
	// result can only end its own request, or be ignored).
	p := j.plan
	_ = j.s.conn.Send(&wire.GPUFree{GPU: p.GPU, Plan: p.ID, StartedAt: unix(started), FinishedAt: unix(finished),
		Failed: uint32(failed), Ran: uint32(ran), Dropped: uint32(dropped)})
}

// Drain leaves gracefully: it tells the scheduler that the agent is
// leaving, keeps running the plans it holds and those already on their
// way, and once the scheduler answers that it will send no more (or is
// gone) and every plan has finished and its results are sent, it closes
// the agent. If ctx ends first, it closes at once, as Close does, and
// returns ctx's error.
//
// Drain works at any point: while parked there is nothing to leave, and
// during a move it leaves whichever scheduler the agent is with, the move
// registering with none.
func (a *Agent) Drain(ctx context.Context) error {
	a.mu.Lock()
	a.draining = true
	sess := a.session
	if a.reg != nil {
		a.reg.finish(errDraining)
	}
	a.mu.Unlock()
	defer a.Close()
	if sess == nil || sess.dead.Load() {
		return a.waitJobs(ctx)
	}
	if err := sess.conn.Send(&wire.Leaving{}); err != nil {
		return a.waitJobs(ctx)
	}
	a.log.Info().Msg("draining: no new plans; finishing the plans held")
	select {
	case <-sess.leaveOK:
	case <-ctx.Done():
		return fmt.Errorf("backend: draining: %w", ctx.Err())
	case <-sess.closed:
		// The scheduler is gone: the plans held still run, and their
		// results still reach their frontends.
	}
	return a.waitJobs(ctx)
}

// jobAdded and jobDone count the plans queued or running on the GPUs.
func (a *Agent) jobAdded() { a.jobs.Add(1) }

func (a *Agent) jobDone() {
	if a.jobs.Add(-1) == 0 {
		select {
		case a.idle <- struct{}{}:
		default:
		}
	}
}

// waitJobs waits until no plan is queued or running, or ctx ends.
func (a *Agent) waitJobs(ctx context.Context) error {
	if err := a.awaitIdle(ctx); err != nil {
		return fmt.Errorf("backend: draining: %w", err)
	}
	a.log.Info().Msg("drained: every plan held has finished")
	return nil
}

// awaitIdle waits until no plan is queued or running, or ctx ends. A
// Drain and a move may wait at once: each passes the signal on.
func (a *Agent) awaitIdle(ctx context.Context) error {
	defer func() {
		select {
		case a.idle <- struct{}{}:
		default:
		}
	}()
	for a.jobs.Load() > 0 {
		select {
		case <-a.idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

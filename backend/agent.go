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
package backend

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/ants/v2"
	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/rdma"
	"github.com/symphony-serving/symphony/transport/wire"
)

// Config configures a backend agent.
type Config struct {
	SchedulerAddr string
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
	Backoff      transport.Backoff
	Log          zerolog.Logger
}

// Default returns the defaults.
func Default() Config {
	return Config{Name: "backend", GPUs: 1, QueueDepth: 64, Pullers: 256, DataPath: rdma.DefaultConfig(),
		ReceiveBytes: 64 << 20, Backoff: transport.DefaultBackoff(), Log: zerolog.Nop()}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.SchedulerAddr == "":
		return errors.New("backend: no scheduler address")
	case c.Network == nil:
		return errors.New("backend: no network")
	case c.GPUs < 1 || c.GPUs > wire.MaxGPUs:
		return fmt.Errorf("backend: %d GPUs, want 1..%d", c.GPUs, wire.MaxGPUs)
	case c.QueueDepth < 1 || c.Pullers < 1:
		return errors.New("backend: queue depth and pullers must be positive")
	case c.DataPath.Mode != rdma.ModeTCP && c.ReceiveBytes < 1<<20:
		return fmt.Errorf("backend: %d bytes of RDMA receive buffers, want at least 1 MiB", c.ReceiveBytes)
	}
	return c.Backoff.Validate()
}

// Agent is a running backend.
type Agent struct {
	cfg  Config
	log  zerolog.Logger
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

	mu      sync.Mutex
	session *schedSession

	stats Stats
}

// Stats count what the agent did.
type Stats struct {
	Plans, Requests, Failed atomic.Uint64
	// Undelivered counts results (outputs and failures) that could not be
	// sent because their frontend's data connection was down or the
	// scheduler had said the frontend left; that frontend ends those
	// requests itself.
	Undelivered atomic.Uint64
}

// schedSession is one connection to the scheduler. GPU IDs are only valid
// within it: after a reconnection the scheduler may number the GPUs anew.
type schedSession struct {
	conn   transport.Conn
	base   uint32
	models map[uint32]wire.ModelSpec
	dead   atomic.Bool
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
	pulled chan struct{}
	// cancelPulls stops pulls the worker no longer waits for.
	cancelPulls context.CancelFunc
}

type gpuWorker struct {
	index int
	jobs  chan *job
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
		done: make(chan struct{}), ready: make(chan struct{}),
	}
	a.reads = a.pull
	a.pull.undelivered = &a.stats.Undelivered
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
	for i := 0; i < cfg.GPUs; i++ {
		w := &gpuWorker{index: i, jobs: make(chan *job, cfg.QueueDepth)}
		a.gpus = append(a.gpus, w)
		wg.Add(1)
		go func() { defer wg.Done(); a.runGPU(ctx, w) }()
	}
	go func() {
		transport.KeepDialing(ctx, cfg.Backoff, log, a.dialScheduler)
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

// WaitReady waits until the agent has registered its GPUs once.
func (a *Agent) WaitReady(ctx context.Context) error {
	select {
	case <-a.ready:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("backend: waiting for the scheduler at %s: %w", a.cfg.SchedulerAddr, ctx.Err())
	}
}

// Close stops the agent at once, as a crash would: batches in flight are
// abandoned and the scheduler fails their requests. It returns when every
// goroutine has stopped: pulls in flight see their context end and return.
func (a *Agent) Close() {
	a.stop()
	<-a.done
	a.pull.closeAll()
	if a.rdma != nil {
		a.rdma.close()
	}
	if err := a.pool.ReleaseTimeout(closeWait); err != nil {
		a.log.Warn().Err(err).Str("waited", closeWait.String()).Msg("input pulls still running after close")
	}
}

// closeWait bounds how long Close waits for pulls in flight, whose
// contexts it has ended; one that ignores its context should not hang the
// caller.
const closeWait = 5 * time.Second

func (a *Agent) dialScheduler(ctx context.Context) error {
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
	conn, w, err := a.cfg.Network.Dial(dctx, a.cfg.SchedulerAddr, hello, h)
	cancel()
	if err != nil {
		sessMu.Unlock()
		return err
	}
	sess = &schedSession{conn: conn, base: w.ID, models: map[uint32]wire.ModelSpec{}}
	for _, m := range w.Models {
		sess.models[m.ID] = m
	}
	// Before any FrontendUp or FrontendDown on this connection (their
	// handler waits for sessMu), so that none is undone.
	a.pull.sync(w.Frontends)
	sessMu.Unlock()
	if err := a.exec.Load(w.Models); err != nil {
		conn.Close(fmt.Errorf("loading models: %w", err))
		<-closed
		return err
	}
	a.mu.Lock()
	a.session = sess
	a.mu.Unlock()
	if err := conn.Send(&wire.BackendReady{GPUs: uint32(a.cfg.GPUs)}); err != nil {
		<-closed
		return err
	}
	a.once.Do(func() { close(a.ready) })
	a.log.Info().Str("scheduler", a.cfg.SchedulerAddr).Uint32("first_gpu", w.ID).Int("models", len(w.Models)).Msg("registered")
	select {
	case <-closed:
		return errors.New("scheduler connection closed")
	case <-ctx.Done():
		conn.Close(errors.New("backend stopping"))
		<-closed
		return ctx.Err()
	}
}

func (a *Agent) onSchedulerMessage(s *schedSession, m wire.Message) {
	switch m := m.(type) {
	case *wire.Plan:
		a.startPlan(s, m)
	case *wire.FrontendUp:
		a.pull.up(m.ID, m.DataAddr)
	case *wire.FrontendDown:
		a.pull.down(m.ID)
	default:
		s.conn.Close(fmt.Errorf("unexpected %v from the scheduler", m.Kind()))
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
	j := &job{s: s, plan: p, model: model, inputs: make([][]byte, len(p.Tasks)), why: make([]string, len(p.Tasks)), pulled: make(chan struct{})}
	// Group the reads by frontend: one Read per frontend, all sent at
	// once by one pool task, which then collects the replies.
	byFrontend := map[uint32][]int{}
	for i := range p.Tasks {
		byFrontend[p.Tasks[i].Frontend] = append(byFrontend[p.Tasks[i].Frontend], i)
	}
	ctx, cancel := context.WithDeadline(a.life, time.Unix(0, p.Deadline))
	j.cancelPulls = cancel
	task := func() {
		reads := make([]PullRead, 0, len(byFrontend))
		idxs := make([][]int, 0, len(byFrontend))
		for fid, idx := range byFrontend {
			r := PullRead{Frontend: fid, Ops: make([]wire.InputRef, len(idx)), Dst: make([][]byte, len(idx))}
			for k, i := range idx {
				r.Ops[k] = p.Tasks[i].Input
			}
			reads = append(reads, r)
			idxs = append(idxs, idx)
		}
		errs := a.reads.ReadAll(ctx, reads)
		j.mu.Lock()
		if !j.closed {
			for n, r := range reads {
				for k, i := range idxs[n] {
					switch {
					case errs[n] != nil:
						j.why[i] = errs[n].Error()
					case r.Dst[k] == nil:
						j.why[i] = "input no longer held by its frontend"
					default:
						j.inputs[i] = r.Dst[k]
					}
				}
			}
		}
		close(j.pulled)
		j.mu.Unlock()
	}
	if err := a.pool.Submit(task); err != nil {
		go task() // pool closed or full: still pull
	}
	select {
	case a.gpus[local].jobs <- j:
	default:
		a.log.Error().Uint64("plan", p.ID).Int("gpu", local).Msg("GPU queue full; failing the plan")
		cancel()
		j.mu.Lock()
		j.closed = true
		j.mu.Unlock()
		a.finish(j, nil, "GPU queue full", time.Time{}, time.Time{})
	}
}

// runGPU runs one GPU's plans in order.
func (a *Agent) runGPU(ctx context.Context, w *gpuWorker) {
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-w.jobs:
			a.runJob(ctx, w, j)
		}
	}
}

func (a *Agent) runJob(ctx context.Context, w *gpuWorker, j *job) {
	if j.s.dead.Load() {
		j.cancelPulls()
		return // the scheduler already failed this plan's requests
	}
	p := j.plan
	b := len(p.Tasks)
	// The latest start that still meets the batch's earliest deadline.
	latest := time.Unix(0, p.Deadline).Add(-j.model.Latency[b-1])
	wait := time.NewTimer(time.Until(latest))
	select {
	case <-j.pulled:
	case <-wait.C:
	case <-ctx.Done():
		wait.Stop()
		return
	}
	wait.Stop()
	j.cancelPulls()
	j.mu.Lock()
	j.closed = true
	inputs := make([][]byte, 0, b)
	var ran []int
	for i := range p.Tasks {
		if j.inputs[i] != nil {
			inputs = append(inputs, j.inputs[i])
			ran = append(ran, i)
		} else if j.why[i] == "" {
			j.why[i] = "input arrived too late for the batch"
		}
	}
	j.mu.Unlock()
	if !waitUntil(ctx, time.Unix(0, p.ExecAt)) {
		return
	}
	started := time.Now()
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
	full := make([][]byte, b)
	if err == nil {
		for k, i := range ran {
			full[i] = outs[k]
		}
	}
	cause := ""
	if err != nil {
		cause = err.Error()
		a.log.Warn().Err(err).Uint64("plan", p.ID).Msg("executor failed")
	}
	a.finish(j, full, cause, started, finished)
}

// finish sends each request's result (or failure) to its frontend and
// reports the GPU free. outs[i] is nil for a request that did not run;
// execErr, if set, fails every request that had its input.
//
// A zero finished time means the GPU did not run the plan: the scheduler
// is not to correct the GPU's free time from it.
func (a *Agent) finish(j *job, outs [][]byte, execErr string, started, finished time.Time) {
	p := j.plan
	unix := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return t.UnixNano()
	}
	byFrontend := map[uint32][]wire.Result{}
	failed := 0
	for i := range p.Tasks {
		t := &p.Tasks[i]
		r := wire.Result{ID: t.ID, BatchSize: uint32(len(p.Tasks)), StartedAt: unix(started), FinishedAt: unix(finished)}
		switch {
		case outs != nil && outs[i] != nil:
			r.Output = outs[i]
		case j.why[i] != "":
			r.Code, r.Detail = wire.EndInputUnavailable, j.why[i]
		default:
			r.Code, r.Detail = wire.EndExecutorFailed, execErr
		}
		if r.Code != 0 {
			failed++
		}
		byFrontend[t.Frontend] = append(byFrontend[t.Frontend], r)
	}
	for fid, rs := range byFrontend {
		a.pull.send(fid, rs)
	}
	a.stats.Failed.Add(uint64(failed))
	// After the session died this Send fails; the results above still
	// reach their frontends (request IDs are unique per frontend, so a
	// late result can only end its own request, or be ignored).
	_ = j.s.conn.Send(&wire.GPUFree{GPU: p.GPU, Plan: p.ID, StartedAt: unix(started), FinishedAt: unix(finished), Failed: uint32(failed)})
}

package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/symphony-serving/symphony/backend"
	"github.com/symphony-serving/symphony/backend/backendagent"
	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/frontend/frontendagent"
	"github.com/symphony-serving/symphony/partition/actuate"
	"github.com/symphony-serving/symphony/partition/epoch"
	"github.com/symphony-serving/symphony/partition/live"
	"github.com/symphony-serving/symphony/partition/registry"
	"github.com/symphony-serving/symphony/partition/registry/etcdembed"
	"github.com/symphony-serving/symphony/scheduler/service"
	"github.com/symphony-serving/symphony/scheduler/service/schedagent"
)

// LiveConfig is an in-process cluster run by the live control plane
// (`symphony-bench demo --controller`): one scheduler per part, a pool of
// one-GPU backends that start parked, one frontend that follows the
// routing table, and the epoch controller, all meeting in an embedded etcd.
type LiveConfig struct {
	// Config holds the processes' settings; its Backends (one GPU each,
	// GPUsPerBackend is ignored) is the pool, its Frontends ignored (one),
	// its Addr the schedulers' listen address (port 0: each its own).
	Config
	// Epoch configures the controller core; Period is the epoch's length
	// and Rates the rates each model is declared at for the first epoch,
	// in Models' order.
	Epoch  epoch.Config
	Period time.Duration
	Rates  []float64
	// TTL is the registry's lease TTL: how long a dead scheduler's part
	// waits for its takeover, and how long etcd may go unheard before a
	// process loses its record (whole seconds; DefaultLiveTTL if 0).
	TTL time.Duration
	// Actuate, if set, makes the pool elastic: a process actuator
	// (partition/actuate) starts Backends backends, then the controller's
	// autoscaler starts and stops them as the parts want GPUs, each
	// taking Actuate.Boot to come up, as a VM or a pod would.
	Actuate *ActuateConfig
}

// ActuateConfig is the elastic pool of a live cluster.
type ActuateConfig struct {
	// Boot is how long a started backend takes to register.
	Boot time.Duration
	// WarmPool, ScaleInDelay and Max are the autoscaling policy's
	// (actuate.PolicyConfig). Max, the most backends, is required (at
	// least 1): the cluster's limit, cluster.gpus in the demo.
	WarmPool     int
	ScaleInDelay time.Duration
	Max          int
}

// DefaultLiveTTL is LiveConfig.TTL's default: one stall of the loaded
// machine a demo runs on (a lost keep-alive) must not depose a scheduler,
// and a takeover still comes within seconds.
const DefaultLiveTTL = 3 * time.Second

// LiveCluster is a running LiveConfig.
type LiveCluster struct {
	cfg  LiveConfig
	Etcd *etcdembed.Server
	// schedulers are the parts' scheduler services now (under mu: a
	// deposed one is replaced).
	schedulers []*service.Service
	Backends   []*backend.Agent
	Frontend   *frontend.Client
	Controller *live.Controller
	// Registry is a registry client of the cluster's, for reports.
	Registry *registry.Registry
	// Actuator starts and stops the backends with LiveConfig.Actuate
	// (Backends is then empty: the actuator owns them).
	Actuator *actuate.Process

	dir      string
	runCtx   context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	mu       sync.Mutex
	epochs   []live.EpochResult
	err      error
	restarts int
}

// StartLive starts a live cluster and returns once the first epoch has
// placed every model and the frontend follows its routes, or ctx ends.
func StartLive(ctx context.Context, cfg LiveConfig) (*LiveCluster, error) {
	if cfg.Epoch.Parts < 1 || len(cfg.Rates) != len(cfg.Models) || cfg.Backends < cfg.Epoch.Parts {
		return nil, fmt.Errorf("cluster: live: %d parts, %d rates for %d models, %d backends: want a backend per part at least and a rate per model",
			cfg.Epoch.Parts, len(cfg.Rates), len(cfg.Models), cfg.Backends)
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultLiveTTL
	}
	dir, err := os.MkdirTemp("", "symphony-etcd-")
	if err != nil {
		return nil, err
	}
	l := &LiveCluster{cfg: cfg, dir: dir}
	if l.Etcd, err = etcdembed.Start(etcdembed.Config{Dir: dir}); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	if err := l.start(ctx, rctx); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// registry opens a registry client of its own, as a process of its own
// would, closed when the cluster closes.
func (l *LiveCluster) registry() (*registry.Registry, error) {
	cl, err := l.Etcd.Client()
	if err != nil {
		return nil, err
	}
	rc := registry.Default()
	rc.TTL = l.cfg.TTL
	r, err := registry.New(cl, rc)
	if err != nil {
		_ = cl.Close()
		return nil, err
	}
	l.run(func(ctx context.Context) error {
		<-ctx.Done()
		return cl.Close()
	})
	return r, nil
}

// run runs f on a goroutine until the cluster closes; an error other than
// the end of the cluster's context is kept for Err.
func (l *LiveCluster) run(f func(ctx context.Context) error) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		if err := f(l.ctx()); err != nil && l.ctx().Err() == nil {
			l.fail(err)
		}
	}()
}

func (l *LiveCluster) ctx() context.Context { return l.runCtx }

func (l *LiveCluster) start(ctx, rctx context.Context) error {
	l.runCtx = rctx
	cfg := &l.cfg
	var err error
	if l.Registry, err = l.registry(); err != nil {
		return err
	}
	l.schedulers = make([]*service.Service, cfg.Epoch.Parts)
	for p := range cfg.Epoch.Parts {
		started := make(chan error, 1)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.schedulerProcess(p, started)
		}()
		if err := <-started; err != nil {
			return err
		}
	}
	var autoscaler *actuate.Autoscaler
	if cfg.Actuate == nil {
		for i := range cfg.Backends {
			a, err := l.startBackend(fmt.Sprintf("backend-%d", i))
			if err != nil {
				return err
			}
			l.Backends = append(l.Backends, a.agent)
			a.run(l.ctx())
		}
	} else if autoscaler, err = l.startActuator(ctx); err != nil {
		return err
	}
	fc := frontend.Default()
	fc.Name, fc.Network, fc.Log, fc.Preprocess = "frontend-0", cfg.Network, cfg.Log, cfg.Preprocess
	fc.DataPath = cfg.dataPath(fc.Name)
	if cfg.DataAddr != "" {
		fc.DataAddr = cfg.DataAddr
	}
	if l.Frontend, err = frontend.New(fc); err != nil {
		return err
	}
	r, err := l.registry()
	if err != nil {
		return err
	}
	l.run(func(ctx context.Context) error {
		return frontendagent.Run(ctx, frontendagent.Config{Registry: r, Client: l.Frontend, Name: fc.Name, Log: cfg.Log})
	})

	first := make(chan struct{})
	var once sync.Once
	cc := live.ControllerConfig{Registry: l.Registry, Epoch: cfg.Epoch, Period: cfg.Period, Log: cfg.Log, Autoscaler: autoscaler,
		SwitchTimeout: max(cfg.Period, 5*time.Second),
		OnEpoch: func(r live.EpochResult) {
			l.mu.Lock()
			l.epochs = append(l.epochs, r)
			l.mu.Unlock()
			once.Do(func() { close(first) })
		}}
	for i, m := range cfg.Models {
		cc.Models = append(cc.Models, epoch.Model{Model: m, DeclaredRate: cfg.Rates[i]})
	}
	if l.Controller, err = live.NewController(cc); err != nil {
		return err
	}
	l.run(l.Controller.Run)
	select {
	case <-first:
	case <-ctx.Done():
		return fmt.Errorf("cluster: live: waiting for the first epoch: %w (%v)", ctx.Err(), l.Err())
	}
	_, rev, err := l.Registry.Routes(ctx)
	if err != nil {
		return err
	}
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for l.Frontend.AppliedRevision() < rev {
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: live: waiting for the frontend to follow the first routes: %w", ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// schedulerProcess runs part p's scheduler as a process under a
// supervisor would: a service and its agent; when the agent loses the
// part's leadership (etcd lost it for a lease's TTL), the service stops,
// as a deposed scheduler must, and a new one starts and stands again. The
// first start's error goes to started.
func (l *LiveCluster) schedulerProcess(p int, started chan<- error) {
	cfg := &l.cfg
	for run := 0; l.ctx().Err() == nil; run++ {
		c := Cluster{cfg: cfg.Config}
		c.cfg.Unloaded = nil
		for _, m := range cfg.Models {
			c.cfg.Unloaded = append(c.cfg.Unloaded, m.Name)
		}
		svc, err := c.startScheduler(cfg.Addr)
		var r *registry.Registry
		if err == nil {
			r, err = l.registry()
		}
		if run == 0 {
			started <- err
		}
		if err != nil {
			if svc != nil {
				svc.Close()
			}
			if run > 0 {
				l.fail(fmt.Errorf("cluster: live: restarting part %d's scheduler: %w", p, err))
			}
			return
		}
		l.mu.Lock()
		l.schedulers[p] = svc
		l.mu.Unlock()
		err = schedagent.Run(l.ctx(), schedagent.Config{Registry: r, Service: svc, Part: p, Name: fmt.Sprintf("scheduler-%d-%d", p, run),
			Address: svc.Addr(), ReportEvery: min(cfg.Period/8, schedagent.DefaultReportEvery), Log: cfg.Log})
		if err != nil && l.ctx().Err() == nil {
			l.mu.Lock()
			l.restarts++
			l.mu.Unlock()
			cfg.Log.Warn().Err(err).Int("part", p).Msg("scheduler deposed: restarting it")
		}
		svc.Close()
	}
}

// fail keeps err for Err.
func (l *LiveCluster) fail(err error) {
	l.mu.Lock()
	l.err = errors.Join(l.err, err)
	l.mu.Unlock()
}

// Schedulers returns each part's scheduler service now.
func (l *LiveCluster) Schedulers() []*service.Service {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*service.Service(nil), l.schedulers...)
}

// Restarts counts the schedulers restarted after losing their part's
// leadership.
func (l *LiveCluster) Restarts() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.restarts
}

// liveBackend is one backend of a live cluster and its agent's registry.
type liveBackend struct {
	l     *LiveCluster
	name  string
	agent *backend.Agent
	reg   *registry.Registry
	done  chan struct{}
}

// startBackend starts a parked one-GPU backend called name; run then runs
// its agent.
func (l *LiveCluster) startBackend(name string) (*liveBackend, error) {
	cfg := &l.cfg
	bc := backend.Default()
	bc.Parked, bc.Name, bc.GPUs, bc.Network, bc.Log = true, name, 1, cfg.Network, cfg.Log
	bc.DataPath = cfg.dataPath(name)
	if cfg.Executor != nil {
		bc.Executor = cfg.Executor()
	}
	a, err := backend.Start(bc)
	if err != nil {
		return nil, err
	}
	r, err := l.registry()
	if err != nil {
		a.Close()
		return nil, err
	}
	return &liveBackend{l: l, name: name, agent: a, reg: r, done: make(chan struct{})}, nil
}

// run runs the backend's agent until ctx ends; done closes then.
func (b *liveBackend) run(ctx context.Context) {
	b.l.wg.Add(1)
	go func() {
		defer b.l.wg.Done()
		defer close(b.done)
		err := backendagent.Run(ctx, backendagent.Config{Registry: b.reg, Agent: b.agent, Name: b.name, GPUs: 1, Log: b.l.cfg.Log})
		if err != nil && ctx.Err() == nil {
			b.l.fail(err)
		}
	}()
}

// startActuator starts the process actuator with the pool's first
// backends, waits until they have registered, and returns the
// controller's autoscaler over it.
func (l *LiveCluster) startActuator(ctx context.Context) (*actuate.Autoscaler, error) {
	ac := l.cfg.Actuate
	names := map[int]string{}
	var mu sync.Mutex
	p, err := actuate.NewProcess(actuate.ProcessConfig{Boot: ac.Boot, Log: l.cfg.Log,
		Start: func(sctx context.Context, i int) (actuate.StopFunc, error) {
			name := fmt.Sprintf("backend-%d", i)
			b, err := l.startBackend(name)
			if err != nil {
				return nil, err
			}
			mu.Lock()
			names[i] = name
			mu.Unlock()
			bctx, cancel := context.WithCancel(l.ctx())
			b.run(bctx)
			return func(ctx context.Context) error {
				// Off the cluster's books first, then drained: its
				// scheduler finishes what it sent it.
				cancel()
				<-b.done
				return b.agent.Drain(ctx)
			}, nil
		},
		// Those the assignment leaves in the free pool go first.
		Idle: func() []int {
			a, _, err := l.Registry.Assignment(l.ctx())
			if err != nil {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			var idle []int
			for i, name := range names {
				if p, ok := a.Backends[name]; !ok || p == registry.FreePool {
					idle = append(idle, i)
				}
			}
			return idle
		}})
	if err != nil {
		return nil, err
	}
	l.Actuator = p
	pol, err := actuate.NewPolicy(actuate.PolicyConfig{WarmPool: ac.WarmPool, ScaleInDelay: ac.ScaleInDelay,
		Min: l.cfg.Epoch.Parts, Max: ac.Max})
	if err != nil {
		return nil, err
	}
	if err := p.Resize(ctx, l.cfg.Backends); err != nil {
		return nil, err
	}
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		bs, _, err := l.Registry.Backends(ctx)
		if err == nil && len(bs) >= l.cfg.Backends {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("cluster: live: waiting for the first %d backends: %w", l.cfg.Backends, ctx.Err())
		case <-t.C:
		}
	}
	return &actuate.Autoscaler{Policy: pol, Actuator: p, Log: l.cfg.Log}, nil
}

// Epochs returns the epochs carried out so far.
func (l *LiveCluster) Epochs() []live.EpochResult {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]live.EpochResult(nil), l.epochs...)
}

// Err is what went wrong in the cluster's processes (nil if nothing).
func (l *LiveCluster) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Close stops everything: the controller and the agents, the frontend,
// the backends, the schedulers, then etcd.
func (l *LiveCluster) Close() {
	if l.cancel != nil {
		l.cancel()
	}
	if l.Frontend != nil {
		_ = l.Frontend.Close()
	}
	if l.Actuator != nil {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = l.Actuator.Close(cctx)
		cancel()
	}
	for _, a := range l.Backends {
		a.Close()
	}
	l.wg.Wait() // the scheduler processes close their services
	l.Etcd.Close()
	_ = os.RemoveAll(l.dir)
}

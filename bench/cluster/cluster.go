// Package cluster starts a whole Symphony cluster in one process: the
// scheduler service, backends with emulated GPUs and a frontend client, all
// talking over a real network (loopback TCP in `symphony demo`) or the
// in-process transport (tests). It is what `symphony demo` runs and what the
// end-to-end tests kill and restart pieces of.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/backend"
	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/service"
	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/rdma"
)

// Config describes the cluster to start.
type Config struct {
	Network transport.Network
	// Addr is the scheduler's listen address (e.g. 127.0.0.1:0).
	Addr string
	// DataAddr is the frontends' data listen address.
	DataAddr string
	// Models, Policy, Schedulable, Drop and Delays configure the scheduler.
	Models      []service.Model
	Policy      scheduler.Policy
	Schedulable scheduler.Schedulable
	Drop        scheduler.DropPolicy
	Delays      scheduler.Delays
	// WakeupSlack is how late the scheduler's timers and hand-offs may run
	// (rt.Config.WakeupSlack); raise it on a loaded machine.
	WakeupSlack time.Duration
	// DrainTimeout is the scheduler's service.Config.DrainTimeout.
	DrainTimeout time.Duration
	// ResultTrip is the scheduler's service.Config.ResultTrip: the
	// network's own result delay, before the live floor.
	ResultTrip time.Duration
	// StallAfter is the scheduler's service.Config.StallAfter (0: its
	// default).
	StallAfter time.Duration
	// Unloaded is the scheduler's service.Config.Unloaded: the models
	// that start unloaded, for model-control tests.
	Unloaded []string
	// Backends is how many backend agents to start, GPUsPerBackend each.
	Backends, GPUsPerBackend int
	// Frontends is how many frontend clients to start.
	Frontends int
	// Executor, if set, makes each backend's executor (default: emulated
	// GPUs), for fault injection.
	Executor func() backend.Executor
	// Preprocess, if set, is every frontend's preprocessing hook.
	Preprocess frontend.Preprocessor
	// DataPath is every backend's and frontend's --data-path (auto by
	// default: RDMA where this build and machine have it), and RDMADevice
	// the device they open ("" for the first with an active port).
	DataPath   rdma.Mode
	RDMADevice string
	// Fabric, if set, gives each backend and frontend, by name, the RDMA
	// device to use instead of the machine's: tests pass the devices of
	// one rdma.MemNetwork.
	Fabric func(name string) rdma.Fabric
	// Faults makes each process's connections go through a wrapper that
	// fault scenarios can freeze, cut or kill (Play). Off, the processes
	// use Network directly and pay nothing for it.
	Faults bool
	Log    zerolog.Logger
}

// dataPath is the data-path configuration of the process called name.
func (c *Config) dataPath(name string) rdma.Config {
	dp := rdma.DefaultConfig()
	dp.Mode, dp.Device.Name = c.DataPath, c.RDMADevice
	if c.Fabric != nil && c.DataPath != rdma.ModeTCP {
		dp.Fabric = c.Fabric(name)
	}
	return dp
}

// FromWorkload fills the scheduler side of a Config from a workload file:
// its serving configuration (Workload.Serving: models, policy, limits, and
// network delays raised to the live floor, as service.FromServing does for
// `symphony scheduler`), and its GPUs spread over backends as
// workload.Cluster.Backends says.
func FromWorkload(w *workload.Workload, n transport.Network, addr string) (Config, error) {
	if w.Policy == scheduler.PolicyNexus {
		return Config{}, errors.New("cluster: the nexus policy exists only in the simulator")
	}
	sv := w.Serving()
	sc := service.FromServing(&sv)
	c := Config{
		Network: n, Addr: addr, DataAddr: addr,
		Models: sc.Models, Policy: sc.Policy, Schedulable: sc.Schedulable, Drop: sc.Drop, Delays: sc.Delays,
		ResultTrip: sc.ResultTrip, StallAfter: sc.StallAfter, DrainTimeout: sc.DrainTimeout,
		Frontends: 1, Log: zerolog.Nop(),
	}
	c.Backends, c.GPUsPerBackend = w.Cluster.Backends()
	return c, nil
}

// Cluster is a running in-process cluster.
//
// Scheduler, Backends and Frontends are the processes as Start and
// StartBackend/StartFrontend left them. A fault scenario (Play) replaces
// them as it kills and restarts them, under the cluster's lock: while one
// plays, read them through Backend, Frontend and Sched, and offer load
// through Target.
type Cluster struct {
	cfg       Config
	Scheduler *service.Service
	Backends  []*backend.Agent
	Frontends []*frontend.Client

	// schedAddr is where the scheduler listens, restarts included.
	schedAddr string
	// nets are the processes' networks, by name ("scheduler",
	// "backend-0", ...), when Config.Faults is set.
	nets map[string]*procNet
	mu   sync.Mutex
}

// Start starts the scheduler, then the backends and frontends, and waits
// until every backend has registered its GPUs and every frontend is
// connected, or ctx ends.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	c := &Cluster{cfg: cfg, nets: map[string]*procNet{}}
	svc, err := c.startScheduler(cfg.Addr)
	if err != nil {
		return nil, err
	}
	c.Scheduler, c.schedAddr = svc, svc.Addr()
	for i := 0; i < cfg.Backends; i++ {
		if _, err := c.StartBackend(ctx, fmt.Sprintf("backend-%d", i)); err != nil {
			c.Close()
			return nil, err
		}
	}
	for i := 0; i < cfg.Frontends; i++ {
		if _, err := c.StartFrontend(ctx, fmt.Sprintf("frontend-%d", i)); err != nil {
			c.Close()
			return nil, err
		}
	}
	// Backends register before they report their GPUs ready; wait for all
	// of them. (A backend's first pull from a frontend waits for its data
	// connection, so requests may start at once.)
	return c, c.waitGPUs(ctx, cfg.Backends*cfg.GPUsPerBackend)
}

// startScheduler starts a scheduler service listening on addr.
func (c *Cluster) startScheduler(addr string) (*service.Service, error) {
	cfg := c.cfg
	sc := service.Default()
	sc.Addr, sc.Network, sc.Models, sc.Log = addr, c.network("scheduler"), cfg.Models, cfg.Log
	sc.Policy, sc.Schedulable, sc.Drop, sc.Delays = cfg.Policy, cfg.Schedulable, cfg.Drop, cfg.Delays
	sc.WakeupSlack, sc.DrainTimeout, sc.ResultTrip, sc.StallAfter = cfg.WakeupSlack, cfg.DrainTimeout, cfg.ResultTrip, cfg.StallAfter
	sc.Unloaded = cfg.Unloaded
	return service.Start(sc)
}

// network is the network of the process called name: the cluster's own,
// or, when faults may be played, the process's fault-injecting wrapper of
// it, made anew for each start of the process.
func (c *Cluster) network(name string) transport.Network {
	if !c.cfg.Faults {
		return c.cfg.Network
	}
	p := newProcNet(c.cfg.Network)
	c.mu.Lock()
	c.nets[name] = p
	c.mu.Unlock()
	return p
}

func (c *Cluster) waitGPUs(ctx context.Context, n int) error {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for c.Sched().Snapshot().OnlineGPUs < n {
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: %d of %d GPUs online: %w", c.Sched().Snapshot().OnlineGPUs, n, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// StartBackend starts one more backend and waits until it has registered.
func (c *Cluster) StartBackend(ctx context.Context, name string) (*backend.Agent, error) {
	a, err := c.startBackend(ctx, name)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.Backends = append(c.Backends, a)
	c.mu.Unlock()
	return a, nil
}

func (c *Cluster) startBackend(ctx context.Context, name string) (*backend.Agent, error) {
	bc := backend.Default()
	bc.SchedulerAddr, bc.Name, bc.GPUs, bc.Network, bc.Log = c.schedAddr, name, c.cfg.GPUsPerBackend, c.network(name), c.cfg.Log
	bc.DataPath = c.cfg.dataPath(name)
	if c.cfg.Executor != nil {
		bc.Executor = c.cfg.Executor()
	}
	a, err := backend.Start(bc)
	if err != nil {
		return nil, err
	}
	if err := a.WaitReady(ctx); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// StartFrontend starts one more frontend and waits until it is connected.
func (c *Cluster) StartFrontend(ctx context.Context, name string) (*frontend.Client, error) {
	f, err := c.startFrontend(ctx, name)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.Frontends = append(c.Frontends, f)
	c.mu.Unlock()
	return f, nil
}

func (c *Cluster) startFrontend(ctx context.Context, name string) (*frontend.Client, error) {
	fc := frontend.Default()
	fc.SchedulerAddr, fc.Name, fc.Network, fc.Log = c.schedAddr, name, c.network(name), c.cfg.Log
	fc.Preprocess = c.cfg.Preprocess
	fc.DataPath = c.cfg.dataPath(name)
	if c.cfg.DataAddr != "" {
		fc.DataAddr = c.cfg.DataAddr
	}
	f, err := frontend.New(fc)
	if err != nil {
		return nil, err
	}
	if err := f.WaitReady(ctx); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// Sched is the scheduler now running (nil while a fault has it down).
func (c *Cluster) Sched() *service.Service {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Scheduler
}

// Backend is backend i now running (nil while a fault has it down).
func (c *Cluster) Backend(i int) *backend.Agent {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i < len(c.Backends) {
		return c.Backends[i]
	}
	return nil
}

// Frontend is frontend i now running (nil while a fault has it down).
func (c *Cluster) Frontend(i int) *frontend.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i < len(c.Frontends) {
		return c.Frontends[i]
	}
	return nil
}

// BackendTiming sums the timing of the backends now running: how late
// their batches started against the plans, and what they dropped for it.
func (c *Cluster) BackendTiming() report.BackendTiming {
	c.mu.Lock()
	backs := slices.Clone(c.Backends)
	c.mu.Unlock()
	var lag backend.LagSnapshot
	var dropped uint64
	for _, b := range backs {
		if b != nil {
			lag.Merge(b.Stats().StartLag.Snapshot())
			dropped += b.Stats().Dropped.Load()
		}
	}
	return report.BackendTiming{Batches: lag.Total(), StartLagP50ms: report.Ms(lag.Quantile(0.5)),
		StartLagP99ms: report.Ms(lag.Quantile(0.99)), StartLagP999ms: report.Ms(lag.Quantile(0.999)), DroppedLate: dropped}
}

// Close stops everything: frontends first (ending their pending requests),
// then backends, then the scheduler.
func (c *Cluster) Close() {
	c.mu.Lock()
	fronts, backs, sched := slices.Clone(c.Frontends), slices.Clone(c.Backends), c.Scheduler
	c.mu.Unlock()
	for _, f := range fronts {
		if f != nil {
			_ = f.Close()
		}
	}
	for _, b := range backs {
		if b != nil {
			b.Close()
		}
	}
	if sched != nil {
		sched.Close()
	}
}

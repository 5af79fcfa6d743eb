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
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/backend"
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
// its models and policy, its network delays raised to the live floor
// (service.LiveDelays), and its GPUs spread over backends as
// workload.Cluster.Backends says.
func FromWorkload(w *workload.Workload, n transport.Network, addr string) (Config, error) {
	if w.Policy == scheduler.PolicyNexus {
		return Config{}, errors.New("cluster: the nexus policy exists only in the simulator")
	}
	c := Config{
		Network: n, Addr: addr, DataAddr: addr,
		Policy: w.Policy, Schedulable: w.Schedulable, Drop: w.Drop, Delays: service.LiveDelays(w.Network), ResultTrip: w.Network.Result,
		Frontends: 1, Log: zerolog.Nop(),
	}
	for _, m := range w.Models {
		c.Models = append(c.Models, service.Model{Name: m.Name, Profile: m.Profile, SLO: m.SLO, InputBytes: m.InputBytes})
	}
	c.Backends, c.GPUsPerBackend = w.Cluster.Backends()
	return c, nil
}

// Cluster is a running in-process cluster.
type Cluster struct {
	cfg       Config
	Scheduler *service.Service
	Backends  []*backend.Agent
	Frontends []*frontend.Client
}

// Start starts the scheduler, then the backends and frontends, and waits
// until every backend has registered its GPUs and every frontend is
// connected, or ctx ends.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	sc := service.Default()
	sc.Addr, sc.Network, sc.Models, sc.Log = cfg.Addr, cfg.Network, cfg.Models, cfg.Log
	sc.Policy, sc.Schedulable, sc.Drop, sc.Delays = cfg.Policy, cfg.Schedulable, cfg.Drop, cfg.Delays
	sc.WakeupSlack, sc.DrainTimeout, sc.ResultTrip = cfg.WakeupSlack, cfg.DrainTimeout, cfg.ResultTrip
	svc, err := service.Start(sc)
	if err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, Scheduler: svc}
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

func (c *Cluster) waitGPUs(ctx context.Context, n int) error {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for c.Scheduler.Snapshot().OnlineGPUs < n {
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: %d of %d GPUs online: %w", c.Scheduler.Snapshot().OnlineGPUs, n, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// StartBackend starts one more backend and waits until it has registered.
func (c *Cluster) StartBackend(ctx context.Context, name string) (*backend.Agent, error) {
	bc := backend.Default()
	bc.SchedulerAddr, bc.Name, bc.GPUs, bc.Network, bc.Log = c.Scheduler.Addr(), name, c.cfg.GPUsPerBackend, c.cfg.Network, c.cfg.Log
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
	c.Backends = append(c.Backends, a)
	return a, nil
}

// StartFrontend starts one more frontend and waits until it is connected.
func (c *Cluster) StartFrontend(ctx context.Context, name string) (*frontend.Client, error) {
	fc := frontend.Default()
	fc.SchedulerAddr, fc.Name, fc.Network, fc.Log = c.Scheduler.Addr(), name, c.cfg.Network, c.cfg.Log
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
	c.Frontends = append(c.Frontends, f)
	return f, nil
}

// Close stops everything: frontends first (ending their pending requests),
// then backends, then the scheduler.
func (c *Cluster) Close() {
	for _, f := range c.Frontends {
		_ = f.Close()
	}
	for _, b := range c.Backends {
		b.Close()
	}
	c.Scheduler.Close()
}

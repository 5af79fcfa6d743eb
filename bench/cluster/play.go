package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/symphony-serving/symphony/backend"
	"github.com/symphony-serving/symphony/bench/loadgen"
	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/scheduler/service"
)

// Play plays a fault scenario against the cluster: each fault at start +
// its At, in the background (faults that overlap play at once). The
// cluster must have been started with Config.Faults. It returns at once,
// with the Playback that says when every fault has been played to its end
// and can stop the rest.
//
// What each fault does (docs/workload-format.md, "Faults"):
//   - kill: the process is closed at once, as a crash (a backend abandons
//     its batches; the scheduler's connections vanish before it can say
//     anything; a frontend ends its pending requests with ErrClosed);
//   - stall: every connection of the process holds its traffic both ways
//     for For, as SIGSTOP and SIGCONT look from outside;
//   - drain and restart: the process stops gracefully (Agent.Drain,
//     Service.Close, Client.Drain);
//   - with a restart, a new process of the same name starts For after the
//     old one is gone, and the others reconnect to it;
//   - cut: the process's connection to the scheduler closes; it
//     reconnects.
func (c *Cluster) Play(start time.Time, faults []workload.Fault) (*Playback, error) {
	if len(faults) > 0 && !c.cfg.Faults {
		return nil, fmt.Errorf("cluster: a fault scenario needs a cluster started with Config.Faults")
	}
	ctx, cancel := context.WithCancel(context.Background())
	pb := &Playback{cancel: cancel, done: make(chan struct{})}
	wg := &pb.wg
	for _, f := range faults {
		wg.Go(func() {
			if !sleepUntil(ctx, start.Add(f.At)) {
				return
			}
			if err := c.apply(ctx, f); err != nil {
				c.cfg.Log.Error().Err(err).Stringer("fault", f).Msg("fault not played")
			}
		})
	}
	go func() { wg.Wait(); close(pb.done) }()
	return pb, nil
}

// Playback is a fault scenario being played (Cluster.Play).
type Playback struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	done   chan struct{}
}

// Done is closed once every fault has been played to its end: stalls
// over, restarted processes back (or given up on).
func (pb *Playback) Done() <-chan struct{} { return pb.done }

// Stop cancels what has not happened yet (a fault still to come, a
// restart still to wait for) and waits for every fault under way to
// finish its step.
func (pb *Playback) Stop() {
	pb.cancel()
	pb.wg.Wait()
}

// sleepUntil waits until t, or returns false if ctx ends first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	tm := time.NewTimer(time.Until(t))
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// restartWait bounds how long a restarted process may take to join: past
// it the scenario gives up on it, with an error in the log.
const restartWait = 10 * time.Second

// apply carries out one fault, its restart included.
func (c *Cluster) apply(ctx context.Context, f workload.Fault) error {
	name := f.Target.String()
	log := c.cfg.Log.With().Stringer("fault", f).Logger()
	log.Info().Msg("fault")
	if f.Action == workload.FaultStall || f.Action == workload.FaultCut {
		c.mu.Lock()
		p := c.nets[name]
		c.mu.Unlock()
		if p == nil {
			return fmt.Errorf("cluster: no network for %s: start the cluster with Config.Faults", name)
		}
		if f.Action == workload.FaultCut {
			if !p.CutScheduler() {
				return fmt.Errorf("cluster: %s has no connection to the scheduler to cut", name)
			}
			return nil
		}
		p.Freeze()
		time.Sleep(f.For) // a stall always ends, whatever ctx says
		p.Thaw()
		log.Info().Msg("stall over")
		return nil
	}
	if err := c.stop(ctx, f); err != nil {
		return err
	}
	if !f.Restarts {
		return nil
	}
	if !sleepUntil(ctx, time.Now().Add(f.For)) {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, restartWait)
	defer cancel()
	if err := c.restart(sctx, f.Target); err != nil {
		return err
	}
	log.Info().Msg("restarted")
	return nil
}

// drainWait bounds a graceful stop: past it, the process is closed.
const drainWait = 10 * time.Second

// stop kills or drains the fault's target.
func (c *Cluster) stop(ctx context.Context, f workload.Fault) error {
	kill := f.Action == workload.FaultKill
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drainWait)
	defer cancel()
	drained := func(err error) {
		if err != nil {
			c.cfg.Log.Warn().Err(err).Stringer("target", f.Target).Msg("drain cut short")
		}
	}
	i := f.Target.Index
	c.mu.Lock()
	var a *backend.Agent
	var s *service.Service
	var fe *frontend.Client
	var p *procNet
	switch f.Target.Kind {
	case workload.TargetBackend:
		a, c.Backends[i] = c.Backends[i], nil
	case workload.TargetScheduler:
		s, p, c.Scheduler = c.Scheduler, c.nets["scheduler"], nil
	case workload.TargetFrontend:
		fe, c.Frontends[i] = c.Frontends[i], nil
	}
	c.mu.Unlock()
	switch {
	case a != nil && kill:
		a.Close()
	case a != nil:
		drained(a.Drain(dctx))
	case s != nil:
		if kill {
			p.Kill() // its peers see it vanish before it can say a word
		}
		s.Close()
	case fe != nil && kill:
		_ = fe.Close()
	case fe != nil:
		drained(fe.Drain(dctx))
	default:
		return fmt.Errorf("cluster: %v is already down", f.Target)
	}
	return nil
}

// restart starts a new process in the target's place.
func (c *Cluster) restart(ctx context.Context, t workload.FaultTarget) error {
	name := t.String()
	switch t.Kind {
	case workload.TargetBackend:
		a, err := c.startBackend(ctx, name)
		if err != nil {
			return fmt.Errorf("cluster: restarting %s: %w", name, err)
		}
		c.mu.Lock()
		c.Backends[t.Index] = a
		c.mu.Unlock()
	case workload.TargetScheduler:
		s, err := c.startScheduler(c.schedAddr)
		if err != nil {
			return fmt.Errorf("cluster: restarting the scheduler: %w", err)
		}
		c.mu.Lock()
		c.Scheduler = s
		c.mu.Unlock()
	case workload.TargetFrontend:
		f, err := c.startFrontend(ctx, name)
		if err != nil {
			return fmt.Errorf("cluster: restarting %s: %w", name, err)
		}
		c.mu.Lock()
		c.Frontends[t.Index] = f
		c.mu.Unlock()
	}
	return nil
}

// Target is the cluster's first frontend as a load generator's target,
// following it through kills and restarts: while it is down, each request
// fails at once with frontend.ErrClosed, as an app's calls would.
func (c *Cluster) Target() *Target { return &Target{c: c} }

// Target offers requests to a cluster's current first frontend; see
// Cluster.Target.
type Target struct{ c *Cluster }

// Start starts one request on the frontend now running (loadgen.Target).
func (t *Target) Start(ctx context.Context, model string, input []byte, priority uint8) loadgen.Call {
	if f := t.c.Frontend(0); f != nil {
		return loadgen.Client(f).Start(ctx, model, input, priority)
	}
	return loadgen.Failed(frontend.ErrClosed)
}

// Package backendagent is a backend in the live control plane
// (partition/live): it registers the backend in etcd and keeps its GPUs
// with its part's active scheduler, moving it when the controller's
// assignment moves it or a standby takes the part over, and parking it in
// the free pool. It lives beside the backend, not in partition, because
// the control plane's planning knows no running component.
package backendagent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/backend"
	"github.com/symphony-serving/symphony/partition/registry"
	"github.com/symphony-serving/symphony/transport"
)

// Config configures a backend in the live control plane.
type Config struct {
	Registry *registry.Registry
	// Agent is the backend; start it parked (backend.Config.Parked) so
	// that it serves no part before the controller gives it one.
	Agent *backend.Agent
	// Name is its record's name, unique among the backends; GPUs its
	// GPUs; Address its control address ("" for none).
	Name    string
	GPUs    int
	Address string
	Log     zerolog.Logger
}

// Run registers the backend and keeps its GPUs with its part's active
// scheduler until ctx ends: the assignment says which part
// (Assignment.Backends; the free pool parks it), the routing table which
// scheduler leads that part; it registers again whenever etcd loses the
// record. A move drains the plans the backend holds first
// (backend.Agent.MoveTo), so no request fails on the way.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Registry == nil || cfg.Agent == nil {
		return errors.New("backendagent: no registry or no agent")
	}
	log := cfg.Log.With().Str("component", "backend-agent").Str("name", cfg.Name).Logger()
	// One mover at a time, always toward the latest target.
	target := make(chan string, 1)
	moverDone := make(chan struct{})
	setTarget := func(addr string) {
		select {
		case <-target:
		default:
		}
		target <- addr
	}
	go func() {
		defer close(moverDone)
		backoff := transport.DefaultBackoff()
		failures := 0
		for {
			var addr string
			select {
			case <-ctx.Done():
				return
			case addr = <-target:
			}
			if addr == cfg.Agent.SchedulerAddr() {
				failures = 0
				continue
			}
			var err error
			if addr == "" {
				log.Info().Msg("to the free pool")
				err = cfg.Agent.Park(ctx)
			} else {
				log.Info().Str("scheduler", addr).Msg("moving")
				err = cfg.Agent.MoveTo(ctx, addr)
			}
			if err == nil || ctx.Err() != nil {
				failures = 0
				continue
			}
			// Try again after a backoff, unless a newer target came:
			// the registry may not change again for a while.
			wait := backoff.Delay(failures, nil)
			failures++
			log.Error().Err(err).Str("scheduler", addr).Dur("retry_in", wait).Msg("move failed")
			time.AfterFunc(wait, func() {
				select {
				case target <- addr: // none newer waits
				default:
				}
			})
		}
	}()
	defer func() { <-moverDone }()
	// A session ends when etcd is lost for a lease's TTL (the record is
	// gone) or a watch fails; the backend serves on where it is, and
	// registers and watches again.
	transport.KeepDialing(ctx, transport.DefaultBackoff(), log, func(ctx context.Context) error {
		return session(ctx, cfg, log, setTarget)
	})
	return nil
}

// session registers the backend and follows the assignment and the
// routing table until ctx ends (nil) or the registration or a watch
// fails, handing each place the backend is to be to setTarget.
func session(ctx context.Context, cfg Config, log zerolog.Logger, setTarget func(addr string)) error {
	reg, err := cfg.Registry.RegisterBackend(ctx, registry.Backend{Name: cfg.Name, GPUs: cfg.GPUs, Address: cfg.Address})
	if err != nil {
		return fmt.Errorf("backendagent: %s: %w", cfg.Name, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = reg.Close(cctx)
	}()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	assignments := cfg.Registry.WatchAssignment(wctx, 0)
	routes := cfg.Registry.WatchRoutes(wctx, 0)
	part, havePart := 0, false
	var table registry.Routes
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-reg.Done():
			return fmt.Errorf("backendagent: %s: %w", cfg.Name, reg.Err())
		case u, ok := <-assignments:
			if !ok {
				return fmt.Errorf("backendagent: %s: the assignment watch ended", cfg.Name)
			}
			if u.Err != nil {
				if !registry.IsDecodeError(u.Err) {
					return fmt.Errorf("backendagent: %s: %w", cfg.Name, u.Err)
				}
				log.Error().Err(u.Err).Msg("bad assignment: keeping the last good one")
				continue
			}
			part, havePart = u.Value.Backends[cfg.Name]
		case u, ok := <-routes:
			if !ok {
				return fmt.Errorf("backendagent: %s: the routes watch ended", cfg.Name)
			}
			if u.Err != nil {
				if !registry.IsDecodeError(u.Err) {
					return fmt.Errorf("backendagent: %s: %w", cfg.Name, u.Err)
				}
				log.Error().Err(u.Err).Msg("bad routing table: keeping the last good one")
				continue
			}
			table = u.Value
		}
		switch {
		case !havePart:
			// Not placed: it stays where it is.
		case part == registry.FreePool:
			setTarget("")
		default:
			if addr, ok := table.Schedulers[part]; ok {
				setTarget(addr)
			} // else no active scheduler yet: wait for the takeover's route
		}
	}
}

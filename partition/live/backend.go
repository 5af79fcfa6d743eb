package live

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/backend"
	"github.com/symphony-serving/symphony/partition/registry"
)

// BackendConfig configures a backend in the live control plane.
type BackendConfig struct {
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

// RunBackend registers the backend and keeps its GPUs with its part's
// active scheduler until ctx ends: the assignment says which part
// (Assignment.Backends; the free pool parks it), the routing table which
// scheduler leads that part. A move drains the plans the backend holds
// first (backend.Agent.MoveTo), so no request fails on the way.
func RunBackend(ctx context.Context, cfg BackendConfig) error {
	if cfg.Registry == nil || cfg.Agent == nil {
		return errors.New("live: backend: no registry or no agent")
	}
	log := cfg.Log.With().Str("component", "backend-agent").Str("name", cfg.Name).Logger()
	reg, err := cfg.Registry.RegisterBackend(ctx, registry.Backend{Name: cfg.Name, GPUs: cfg.GPUs, Address: cfg.Address})
	if err != nil {
		return fmt.Errorf("live: backend %s: %w", cfg.Name, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = reg.Close(cctx)
	}()
	// One mover at a time, always toward the latest target.
	target := make(chan string, 1)
	moverDone := make(chan struct{})
	go func() {
		defer close(moverDone)
		for {
			var addr string
			select {
			case <-ctx.Done():
				return
			case addr = <-target:
			}
			if addr == cfg.Agent.SchedulerAddr() {
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
			if err != nil && ctx.Err() == nil {
				log.Error().Err(err).Str("scheduler", addr).Msg("move failed")
			}
		}
	}()
	defer func() { <-moverDone }()
	setTarget := func(addr string) {
		select {
		case <-target:
		default:
		}
		target <- addr
	}

	assignments := cfg.Registry.WatchAssignment(ctx, 0)
	routes := cfg.Registry.WatchRoutes(ctx, 0)
	part, havePart := 0, false
	var table registry.Routes
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-reg.Done():
			return fmt.Errorf("live: backend %s: %w", cfg.Name, reg.Err())
		case u, ok := <-assignments:
			if !ok {
				return nil
			}
			if u.Err != nil {
				if !isDecodeError(u.Err) {
					return fmt.Errorf("live: backend %s: %w", cfg.Name, u.Err)
				}
				log.Error().Err(u.Err).Msg("bad assignment: keeping the last good one")
				continue
			}
			part, havePart = u.Value.Backends[cfg.Name]
		case u, ok := <-routes:
			if !ok {
				return nil
			}
			if u.Err != nil {
				if !isDecodeError(u.Err) {
					return fmt.Errorf("live: backend %s: %w", cfg.Name, u.Err)
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

func isDecodeError(err error) bool {
	var de *registry.DecodeError
	return errors.As(err, &de)
}

// Package frontendagent is a frontend in the live control plane
// (partition/live): it registers the frontend in etcd, hands each routing
// table to its client, and acknowledges a table in the frontend's record
// once every request goes by it. It lives beside the frontend, not in
// partition, because the control plane's planning knows no running
// component.
package frontendagent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/partition/registry"
	"github.com/symphony-serving/symphony/transport"
)

// Config configures a frontend in the live control plane.
type Config struct {
	Registry *registry.Registry
	// Client is the frontend; it may start with no scheduler address and
	// learn every route from the routing table.
	Client *frontend.Client
	// Name is its record's name, unique among the frontends.
	Name string
	Log  zerolog.Logger
}

// Run registers the frontend and has its client follow the routing table
// until ctx ends, registering again whenever etcd loses the record (the
// frontend serves on by the routes it has meanwhile). Each table is handed
// to the client (frontend.Client.SetRoutes), which switches each model
// once it is connected to the model's new scheduler; once every route of a
// table is in use, the frontend's record says so
// (registry.Frontend.Routes), which is what lets the controller have a
// moved model's old part unload it.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Registry == nil || cfg.Client == nil {
		return errors.New("frontendagent: no registry or no client")
	}
	log := cfg.Log.With().Str("component", "frontend-agent").Str("name", cfg.Name).Logger()
	applied := make(chan int64, 1)
	cfg.Client.OnRoutesApplied(func(rev int64) {
		select { // keep only the latest
		case <-applied:
		default:
		}
		applied <- rev
	})
	// A session ends when etcd is lost for a lease's TTL (the record is
	// gone) or the watch fails; the frontend serves on by the routes it
	// has, and registers and watches again.
	transport.KeepDialing(ctx, transport.DefaultBackoff(), log, func(ctx context.Context) error {
		return session(ctx, cfg, log, applied)
	})
	return nil
}

// session registers the frontend and follows the routing table until ctx
// ends (nil) or the registration or the watch fails.
func session(ctx context.Context, cfg Config, log zerolog.Logger, applied <-chan int64) error {
	rec := registry.Frontend{Name: cfg.Name, DataAddress: cfg.Client.DataAddr(), Routes: cfg.Client.AppliedRevision()}
	reg, err := cfg.Registry.RegisterFrontend(ctx, rec)
	if err != nil {
		return fmt.Errorf("frontendagent: %s: %w", cfg.Name, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = reg.Close(cctx)
	}()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	updates := cfg.Registry.WatchRoutes(wctx, 0)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-reg.Done():
			return fmt.Errorf("frontendagent: %s: %w", cfg.Name, reg.Err())
		case rev := <-applied:
			rec.Routes = rev
			if err := reg.Update(ctx, rec); err != nil && ctx.Err() == nil {
				log.Warn().Err(err).Int64("routes", rev).Msg("record not updated")
			}
		case u, ok := <-updates:
			if !ok {
				return fmt.Errorf("frontendagent: %s: the routes watch ended", cfg.Name)
			}
			if u.Err != nil {
				if registry.IsDecodeError(u.Err) {
					log.Error().Err(u.Err).Msg("bad routing table: keeping the last good one")
					continue
				}
				return fmt.Errorf("frontendagent: %s: %w", cfg.Name, u.Err)
			}
			if u.Deleted {
				continue
			}
			cfg.Client.SetRoutes(ClientRoutes(u.Value, u.Revision))
		}
	}
}

// ClientRoutes is the routing table t at revision rev as a frontend client
// takes it: each model's scheduler address. A model whose part has no
// active scheduler now (a takeover under way) is left out, so the client
// keeps its current route for it.
func ClientRoutes(t registry.Routes, rev int64) frontend.Routes {
	out := frontend.Routes{Revision: rev, Models: make(map[string]string, len(t.Models))}
	for name := range t.Models {
		if _, addr, ok := t.Route(name); ok {
			out.Models[name] = addr
		}
	}
	return out
}

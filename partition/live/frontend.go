package live

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/partition/registry"
)

// FrontendConfig configures a frontend in the live control plane.
type FrontendConfig struct {
	Registry *registry.Registry
	// Client is the frontend; it may start with no scheduler address and
	// learn every route from the routing table.
	Client *frontend.Client
	// Name is its record's name, unique among the frontends.
	Name string
	Log  zerolog.Logger
}

// RunFrontend registers the frontend and has its client follow the
// routing table until ctx ends: each table is handed to the client
// (frontend.Client.SetRoutes), which switches each model once it is
// connected to the model's new scheduler; once every route of a table is
// in use, the frontend's record says so (registry.Frontend.Routes), which
// is what lets the controller have a moved model's old part unload it.
func RunFrontend(ctx context.Context, cfg FrontendConfig) error {
	if cfg.Registry == nil || cfg.Client == nil {
		return errors.New("live: frontend: no registry or no client")
	}
	log := cfg.Log.With().Str("component", "frontend-agent").Str("name", cfg.Name).Logger()
	rec := registry.Frontend{Name: cfg.Name, DataAddress: cfg.Client.DataAddr()}
	reg, err := cfg.Registry.RegisterFrontend(ctx, rec)
	if err != nil {
		return fmt.Errorf("live: frontend %s: %w", cfg.Name, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = reg.Close(cctx)
	}()
	applied := make(chan int64, 1)
	cfg.Client.OnRoutesApplied(func(rev int64) {
		select { // keep only the latest
		case <-applied:
		default:
		}
		applied <- rev
	})
	updates := cfg.Registry.WatchRoutes(ctx, 0)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-reg.Done():
			return fmt.Errorf("live: frontend %s: %w", cfg.Name, reg.Err())
		case rev := <-applied:
			rec.Routes = rev
			if err := reg.Update(ctx, rec); err != nil && ctx.Err() == nil {
				log.Warn().Err(err).Int64("routes", rev).Msg("record not updated")
			}
		case u, ok := <-updates:
			if !ok {
				return nil
			}
			if u.Err != nil {
				var de *registry.DecodeError
				if errors.As(u.Err, &de) {
					log.Error().Err(u.Err).Msg("bad routing table: keeping the last good one")
					continue
				}
				return fmt.Errorf("live: frontend %s: %w", cfg.Name, u.Err)
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

package actuate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
)

// Autoscaler is what the epoch controller calls once per epoch: it asks
// Policy for the backends to run and has Actuator run that many. Both are
// required; Log is quiet if left zero.
type Autoscaler struct {
	Policy   *Policy
	Actuator Actuator
	Log      zerolog.Logger
}

// Apply records that the controller wants wantGPUs GPUs at time now and
// returns the backends Policy targets. It calls Resize only when the
// target differs from the actuator's Size, so an epoch that changes
// nothing makes no request (in Kubernetes, no write). On an error the
// target is still returned; the next epoch tries again, since Policy keeps
// its history whatever the actuator did.
func (a *Autoscaler) Apply(ctx context.Context, now time.Time, wantGPUs int) (target int, err error) {
	if a.Policy == nil || a.Actuator == nil {
		return 0, errors.New("actuate: autoscaler: needs a policy and an actuator")
	}
	target = a.Policy.Target(now, wantGPUs)
	size, err := a.Actuator.Size(ctx)
	if err != nil {
		return target, fmt.Errorf("actuate: autoscaler: size: %w", err)
	}
	if size == target {
		a.Log.Debug().Int("want_gpus", wantGPUs).Int("backends", size).Msg("autoscale: hold")
		return target, nil
	}
	if err := a.Actuator.Resize(ctx, target); err != nil {
		return target, fmt.Errorf("actuate: autoscaler: resize %d -> %d: %w", size, target, err)
	}
	a.Log.Info().Int("want_gpus", wantGPUs).Int("from", size).Int("to", target).Msg("autoscale: resize")
	return target, nil
}

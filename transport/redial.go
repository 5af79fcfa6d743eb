package transport

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/rs/zerolog"
)

// Backoff paces reconnection attempts: the first retry waits Min, each
// failed attempt multiplies the wait by Factor up to Max, and every wait is
// spread by ±Jitter of itself so that many clients do not retry in step.
type Backoff struct {
	Min, Max time.Duration
	Factor   float64
	Jitter   float64
}

// DefaultBackoff retries after 50ms, doubling up to 5s, ±20%.
func DefaultBackoff() Backoff {
	return Backoff{Min: 50 * time.Millisecond, Max: 5 * time.Second, Factor: 2, Jitter: 0.2}
}

// Validate checks the backoff.
func (b Backoff) Validate() error {
	if b.Min <= 0 || b.Max < b.Min || b.Factor < 1 || b.Jitter < 0 || b.Jitter >= 1 {
		return fmt.Errorf("transport: bad backoff %+v: need 0 < min <= max, factor >= 1, 0 <= jitter < 1", b)
	}
	return nil
}

// Delay is the wait before retry number attempt (0 for the first retry).
func (b Backoff) Delay(attempt int, rng *rand.Rand) time.Duration {
	d := float64(b.Min)
	for i := 0; i < attempt && d < float64(b.Max); i++ {
		d *= b.Factor
	}
	d = min(d, float64(b.Max))
	if b.Jitter > 0 && rng != nil {
		d *= 1 + b.Jitter*(2*rng.Float64()-1)
	}
	return time.Duration(d)
}

// KeepDialing runs session again and again until ctx ends. session dials,
// serves the connection and returns when it closes; KeepDialing waits with
// backoff before the next attempt. The backoff starts over after a session
// that lasted longer than Max, so one short outage does not slow the next
// reconnection.
func KeepDialing(ctx context.Context, b Backoff, log zerolog.Logger, session func(context.Context) error) {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x5eed))
	attempt := 0
	for ctx.Err() == nil {
		began := time.Now()
		err := session(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(began) > b.Max {
			attempt = 0
		}
		wait := b.Delay(attempt, rng)
		attempt++
		// One loss is routine (a peer restarting or leaving for good, as
		// a frontend does when its app stops); failing to get back is not.
		var rej *RejectedError
		ev := log.Info()
		switch {
		case errors.As(err, &rej):
			ev = log.Error()
		case attempt > 1:
			ev = log.Warn()
		}
		ev.Err(err).Str("retry_in", wait.Round(time.Millisecond).String()).Msg("not connected; will retry")
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

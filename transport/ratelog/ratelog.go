// Package ratelog keeps warnings that can repeat per connection or per
// request from flooding a log: a sampled logger passes the first lines of
// each period and counts the rest, so that a component's metrics can show
// how many it held back. A backend whose frontend is gone, say, would
// otherwise log every batch's undelivered results.
package ratelog

import (
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Default burst and period: a few lines a second at most, enough to see
// that something repeats and what, never a flood.
const (
	DefaultBurst  = 5
	DefaultPeriod = time.Second
)

// Sampler passes Burst lines per Period and counts the lines it drops. It
// is safe for concurrent use.
type Sampler struct {
	burst      zerolog.BurstSampler
	suppressed *atomic.Uint64
}

// NewSampler returns a sampler of burst lines per period that counts the
// lines it drops in into, a component's stats counter (nil: a counter of
// its own).
func NewSampler(burst uint32, period time.Duration, into *atomic.Uint64) *Sampler {
	if into == nil {
		into = new(atomic.Uint64)
	}
	return &Sampler{burst: zerolog.BurstSampler{Burst: burst, Period: period}, suppressed: into}
}

// Sample implements zerolog.Sampler.
func (s *Sampler) Sample(lvl zerolog.Level) bool {
	if s.burst.Sample(lvl) {
		return true
	}
	s.suppressed.Add(1)
	return false
}

// Suppressed is the number of lines held back so far.
func (s *Sampler) Suppressed() uint64 { return s.suppressed.Load() }

// New returns log sampled at the default rate, counting the lines it
// holds back in into (see NewSampler). Use the sampled logger for lines
// that can repeat per connection or request, and log itself for the rest.
func New(log zerolog.Logger, into *atomic.Uint64) zerolog.Logger {
	return log.Sample(NewSampler(DefaultBurst, DefaultPeriod, into))
}

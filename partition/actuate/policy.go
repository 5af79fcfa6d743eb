package actuate

import (
	"errors"
	"fmt"
	"time"
)

// PolicyConfig configures a Policy. Every count but the wanted GPUs is in
// backends, the unit an Actuator starts.
type PolicyConfig struct {
	// GPUsPerBackend converts the controller's wanted GPUs into backends,
	// rounding up (0 means 1).
	GPUsPerBackend int
	// WarmPool is how many idle backends to keep running beyond the want,
	// so that a scale-out finds a backend ready instead of waiting for one
	// to boot (0: none, the cluster is exactly the want).
	WarmPool int
	// ScaleInDelay is how long the want must stay lower before the
	// cluster shrinks: demand that dips for an epoch and comes back would
	// otherwise stop backends only to boot them again (0: shrink at once).
	ScaleInDelay time.Duration
	// Min and Max bound the target. Max is required (at least 1): it caps
	// what autoscaling may spend whatever the demand.
	Min, Max int
}

// Validate says what is wrong with the configuration, if anything.
func (c PolicyConfig) Validate() error {
	var errs []error
	if c.GPUsPerBackend < 0 {
		errs = append(errs, fmt.Errorf("actuate: policy: GPUs per backend %d is negative", c.GPUsPerBackend))
	}
	if c.WarmPool < 0 {
		errs = append(errs, fmt.Errorf("actuate: policy: warm pool %d is negative", c.WarmPool))
	}
	if c.ScaleInDelay < 0 {
		errs = append(errs, fmt.Errorf("actuate: policy: scale-in delay %v is negative", c.ScaleInDelay))
	}
	if c.Min < 0 {
		errs = append(errs, fmt.Errorf("actuate: policy: min %d backends is negative", c.Min))
	}
	switch {
	case c.Max < 1:
		errs = append(errs, fmt.Errorf("actuate: policy: max %d backends must be at least 1 (it bounds what autoscaling spends)", c.Max))
	case c.Min > c.Max:
		errs = append(errs, fmt.Errorf("actuate: policy: min %d backends exceeds max %d", c.Min, c.Max))
	}
	return errors.Join(errs...)
}

// Policy decides how many backends to run from the GPUs the controller
// wants at each epoch: the want plus the warm pool, growing at once,
// shrinking only once the want has stayed lower for ScaleInDelay (to the
// largest want within that window, plus the warm pool), bounded by Min and
// Max. Scaling out fast and in slowly is the usual asymmetry: too few
// backends lose requests, too many only cost money for a while.
//
// It is pure: it reads no clock and does no I/O, the caller gives the
// time. It keeps the wants of the last ScaleInDelay, so it is not safe for
// concurrent use; the controller calls it from its one epoch loop.
type Policy struct {
	cfg PolicyConfig
	// hist holds the wants in time order: the one in effect at the start
	// of the window (now - ScaleInDelay), then every later one.
	hist []sample
}

type sample struct {
	at   time.Time
	want int
}

// NewPolicy checks cfg and builds a policy.
func NewPolicy(cfg PolicyConfig) (*Policy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.GPUsPerBackend == 0 {
		cfg.GPUsPerBackend = 1
	}
	return &Policy{cfg: cfg}, nil
}

// Config is the policy's configuration, defaults filled in.
func (p *Policy) Config() PolicyConfig { return p.cfg }

// Target records that the controller wants wantGPUs GPUs from now on and
// returns the number of backends to run. A want holds until the next call,
// so the want "stayed lower for ScaleInDelay" once every want in effect
// over [now-ScaleInDelay, now] was lower. A time before the last call's
// counts as the last call's (the policy's time never goes back); a
// negative want counts as 0.
func (p *Policy) Target(now time.Time, wantGPUs int) int {
	want := ceilDiv(max(0, wantGPUs), p.cfg.GPUsPerBackend)
	if n := len(p.hist); n > 0 && now.Before(p.hist[n-1].at) {
		now = p.hist[n-1].at
	}
	p.hist = append(p.hist, sample{at: now, want: want})
	// Keep the want in effect at the window's start, and every later one.
	start := now.Add(-p.cfg.ScaleInDelay)
	first := 0
	for i, s := range p.hist {
		if s.at.After(start) {
			break
		}
		first = i
	}
	p.hist = append(p.hist[:0], p.hist[first:]...)
	peak := 0
	for _, s := range p.hist {
		peak = max(peak, s.want)
	}
	target := p.cfg.Max
	if peak <= p.cfg.Max-p.cfg.WarmPool {
		target = peak + p.cfg.WarmPool
	}
	return max(p.cfg.Min, target)
}

// ceilDiv is a/b rounded up, for a >= 0 and b > 0.
func ceilDiv(a, b int) int {
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}

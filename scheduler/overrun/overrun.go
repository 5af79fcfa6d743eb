// Package overrun measures how much longer than their profile a model's
// batches really run, and turns the tail of it into the factor the
// model's ModelCore plans deadlines with (ModelCore.SetTailFactor).
//
// The scheduler plans each batch to run ℓ(b), the profile's median, and
// the symphony policy holds a batch until it could take no more requests,
// which leaves it ℓ(b+1) − ℓ(b) of slack. Real batches spread around ℓ(b):
// a CPU executor shares its machine with everything else on it, a GPU
// throttles, a profile measured on a quiet machine meets a loaded one. Half
// of all batches then run over their plan, and those that run over by more
// than the slack finish after their deadline. A Tracker keeps the ratio of
// real run time to ℓ(b) of a model's recent batches; a high quantile of it
// is the factor by which the model's deadlines must be planned for a
// batch to finish in time even at the tail.
//
// Like the scheduler cores, a Tracker is a deterministic state machine:
// observations come in as arguments, the factor comes back as data. It is
// not safe for concurrent use.
package overrun

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Config configures a Tracker.
type Config struct {
	// Window is how many recent batches the quantile is taken over.
	Window int
	// Quantile is the quantile of the ratio real/ℓ(b) that becomes the
	// factor: the share of batches planned for.
	Quantile float64
	// Every is how many batches pass between two computations of the
	// factor; the first comes after Every batches.
	Every int
	// Max caps the factor: a model whose batches run this much over their
	// profile needs a new profile, not a margin.
	Max float64
}

// Default is the configuration the scheduler service uses: the 99.5th
// percentile of the last 256 batches (their second-longest ratio, so that
// one freak batch does not set it), recomputed every 32, at most 2. At a
// few tens of batches a second per model, the window is a few seconds:
// long enough for the tail, short enough to follow a machine whose load
// changes. On the benchmark ResNet at the simulator's goodput, the 99th
// percentile left more batches late, and the largest ratio fewer
// (docs/benchmarks.md, "The benchmark ResNet").
func Default() Config { return Config{Window: 256, Quantile: 0.995, Every: 32, Max: 2} }

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.Window < 1 || c.Every < 1 || c.Every > c.Window:
		return fmt.Errorf("overrun: need 1 <= Every (%d) <= Window (%d)", c.Every, c.Window)
	case !(c.Quantile > 0 && c.Quantile <= 1):
		return fmt.Errorf("overrun: quantile %v not in (0, 1]", c.Quantile)
	case !(c.Max >= 1):
		return fmt.Errorf("overrun: Max %v below 1", c.Max)
	}
	return nil
}

// Tracker follows one model's batches. See the package comment.
type Tracker struct {
	cfg    Config
	ratios []float64 // a ring of the last Window ratios
	n      int       // batches observed
	sorted []float64
	factor float64
}

// New returns a Tracker with no batch observed: its factor is 1.
func New(cfg Config) (*Tracker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Tracker{cfg: cfg, ratios: make([]float64, cfg.Window), sorted: make([]float64, 0, cfg.Window), factor: 1}, nil
}

// Observe records a batch that ran for ran and was planned for planned
// (ℓ of the requests it ran). It returns the factor, and whether this
// observation changed it. A batch with no planned time says nothing and
// is ignored.
func (t *Tracker) Observe(ran, planned time.Duration) (factor float64, changed bool) {
	if planned <= 0 || ran < 0 {
		return t.factor, false
	}
	t.ratios[t.n%len(t.ratios)] = float64(ran) / float64(planned)
	t.n++
	if t.n%t.cfg.Every != 0 {
		return t.factor, false
	}
	k := min(t.n, len(t.ratios))
	t.sorted = append(t.sorted[:0], t.ratios[:k]...)
	slices.Sort(t.sorted)
	q := t.sorted[min(k-1, int(math.Ceil(t.cfg.Quantile*float64(k)))-1)]
	f := min(max(q, 1), t.cfg.Max)
	if f == t.factor {
		return f, false
	}
	t.factor = f
	return f, true
}

// Factor is the current factor: 1 until the first computation, then the
// quantile of the window's ratios, between 1 and Config.Max.
func (t *Tracker) Factor() float64 { return t.factor }

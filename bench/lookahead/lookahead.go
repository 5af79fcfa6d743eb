// Package lookahead asks how much of a model's bad rate is the scheduler's
// fault. It replays one model's arrivals on N identical GPUs twice: once
// under Symphony's rules, run by the scheduler's own ModelCore and
// RankCore driven as the simulator drives them, and once under a
// clairvoyant scheduler that, at every decision (the model has a
// candidate and the rank loop could grant it a GPU now), tries what the
// rules do, waiting for the next arrival, and starting at once the largest
// batch that fits and up to MaxShrink smaller ones, behind up to MaxPrune
// dropped heads; plays each forward under the rules against the arrivals
// that will actually come, on clones of the cores (ModelCore.Clone,
// RankCore.Clone), for a horizon; and keeps whichever serves the most of
// the requests whose deadlines fall within it. The cores carry out the
// alternatives themselves (RankCore.GrantEarly, ModelCore.GrantBatch) and
// say which batches fit (ModelCore.LargestBatch), so no copy of the rules
// lives here.
//
// The clairvoyant scheduler knows the future, which no real one does, and
// it searches one decision deep, so it is neither an online policy nor an
// exact optimum: it is a strong, reproducible reference. When it cannot
// meet a target either, the target is a property of the load (Poisson
// bursts against an SLO that caps the batch size), not of the rules; when
// it beats the rules by far, a better rule exists. Its horizon should
// exceed the SLO, or most trials tie and it falls back on the rules.
//
// The rules replay is the simulator's run of the same workload, decision
// for decision (a test holds their bad rates and mean batches equal); only
// arrivals at the very same instant are enqueued together here, where the
// simulator enqueues them one by one.
package lookahead

import (
	"fmt"
	"runtime"
	"time"

	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/profile"
)

// Setting is the system the model runs on.
type Setting struct {
	Profile profile.Profile
	SLO     time.Duration
	GPUs    int
	Delays  scheduler.Delays
}

// Validate rejects settings no run can use.
func (s Setting) Validate() error {
	switch {
	case !s.Profile.Valid():
		return fmt.Errorf("lookahead: no latency profile")
	case s.SLO <= 0:
		return fmt.Errorf("lookahead: SLO %v must be positive", s.SLO)
	case s.GPUs < 1:
		return fmt.Errorf("lookahead: %d GPUs; need at least 1", s.GPUs)
	}
	return s.Delays.Validate()
}

// Options bound the clairvoyant scheduler's search.
type Options struct {
	// Horizon is how far each trial plays forward; 0 means 300ms. A trial
	// scores only the requests whose deadline falls inside it.
	Horizon time.Duration
	// MaxPrune is the most head requests a trial may drop; 0 means 6.
	MaxPrune int
	// MaxShrink is how far below the largest batch that fits a trial may
	// go; 0 means 4.
	MaxShrink int
	// Workers is how many goroutines share each decision's trials; 0
	// means GOMAXPROCS. The result does not depend on it.
	Workers int
	// Progress, when set, is called now and then with the fraction of the
	// arrivals decided.
	Progress func(done float64)
}

func (o Options) withDefaults() Options {
	if o.Horizon <= 0 {
		o.Horizon = 300 * time.Millisecond
	}
	if o.MaxPrune <= 0 {
		o.MaxPrune = 6
	}
	if o.MaxShrink <= 0 {
		o.MaxShrink = 4
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	return o
}

// Result counts the requests that arrived in the measured window and how
// many of them finished within their SLO (every other one was dropped: a
// batch is only started if it finishes in time).
type Result struct {
	Requests int `json:"requests"`
	Served   int `json:"served"`
	// Batches counts the batches started for the window's requests, by
	// size (index 0 unused).
	Batches []int `json:"batches"`
	// Decisions is how many times the scheduler decided with a GPU
	// grantable and requests queued, and Overrides how the clairvoyant
	// scheduler departed from the rules there (all zero under the rules),
	// over the whole replay, warmup included.
	Decisions int       `json:"decisions"`
	Overrides Overrides `json:"overrides"`
}

// Overrides counts the decisions where the clairvoyant scheduler did not do
// what the rules would have, by what it did instead: where a better online
// rule would have to come from.
type Overrides struct {
	// StartEarly: started a batch while the rules held for sched_at.
	StartEarly int `json:"start_early"`
	// Wait: waited for the next arrival while the rules started a batch.
	Wait int `json:"wait"`
	// SmallerBatch: started fewer requests behind the same head.
	SmallerBatch int `json:"smaller_batch"`
	// OtherHeads: dropped more or fewer head requests than the rules.
	OtherHeads int `json:"other_heads"`
}

// Total is the number of overridden decisions.
func (o Overrides) Total() int { return o.StartEarly + o.Wait + o.SmallerBatch + o.OtherHeads }

// BadRate is the fraction of the window's requests not served in time.
func (r Result) BadRate() float64 {
	if r.Requests == 0 {
		return 0
	}
	return float64(r.Requests-r.Served) / float64(r.Requests)
}

// MeanBatch is the batch size the average served request ran in (the
// simulator's mean_batch_size).
func (r Result) MeanBatch() float64 {
	var n, sum int
	for b, c := range r.Batches {
		n += b * c
		sum += b * b * c
	}
	if n == 0 {
		return 0
	}
	return float64(sum) / float64(n)
}

// Rules replays arrivals (in time order) under Symphony's rules, on the
// scheduler's cores, and counts the requests that arrived in [from, to).
func Rules(s Setting, arrivals []scheduler.Time, from, to scheduler.Time) (Result, error) {
	return run(s, arrivals, from, to, nil)
}

// Clairvoyant replays arrivals under the clairvoyant scheduler and counts
// the requests that arrived in [from, to).
func Clairvoyant(s Setting, arrivals []scheduler.Time, from, to scheduler.Time, o Options) (Result, error) {
	o = o.withDefaults()
	return run(s, arrivals, from, to, &o)
}

func run(s Setting, arrivals []scheduler.Time, from, to scheduler.Time, o *Options) (Result, error) {
	if err := s.Validate(); err != nil {
		return Result{}, err
	}
	for i := 1; i < len(arrivals); i++ {
		if arrivals[i] < arrivals[i-1] {
			return Result{}, fmt.Errorf("lookahead: arrival %d at %v is before arrival %d at %v", i, arrivals[i], i-1, arrivals[i-1])
		}
	}
	sys, err := newSystem(s, arrivals, from, to)
	if err != nil {
		return Result{}, fmt.Errorf("lookahead: %w", err)
	}
	if o == nil {
		sys.play(scheduler.Never, nil)
	} else {
		sys.playClairvoyant(*o)
	}
	if sys.err != nil {
		return Result{}, sys.err
	}
	return sys.result(), nil
}

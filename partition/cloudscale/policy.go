package cloudscale

import (
	"fmt"
	"math"
	"time"
)

// Observation is what a policy learns at each tick.
type Observation struct {
	Now time.Duration
	// Rate is the arrival rate (all models, req/s) over the last tick, and
	// ModelArrivals the tick's arrivals by model (the caller's order).
	Rate          float64
	ModelArrivals []uint64
	// Good and Bad count the requests that ended in the last tick: within
	// their SLO, or late, dropped or failed. The SLO monitor reads them.
	Good, Bad uint64
	// Fleet is every instance booting or serving, warned spot instances
	// included: those not released and not yet drained (a released one is
	// billed until its last batch ends, but is no longer the policy's).
	// The policy may keep it between ticks until the next call.
	Fleet []Instance
}

// Decision is what a policy asks of the cloud at a tick.
type Decision struct {
	// Launch holds one instance type index per instance to launch now.
	Launch []int
	// Release lists instances to give back now. A released instance stops
	// taking batches at once and is billed until its last batch ends.
	Release []InstanceID
	// SpillAbove is the arrival rate (req/s) above which arrivals go to the
	// burst pool until the next tick; +Inf spills nothing.
	SpillAbove float64
	// SLOs, when not nil, are the models' latency objectives from now on
	// (a re-plan's new budgets), by model.
	SLOs []time.Duration
}

// Policy decides the fleet over time. Tick is called every Tick() of
// virtual or real time, in order; the returned Decision's slices are the
// policy's, valid until its next call.
type Policy interface {
	Name() string
	// Start is the fleet (type indices) serving when the run begins, for
	// the first rate: a cluster provisioned before its load arrives.
	Start(rate float64) []int
	// Tick is how often the policy is asked.
	Tick() time.Duration
	Decide(o *Observation) Decision
}

// gpusOf sums the GPUs of the fleet that serve at now (ready, not
// released) and of all of it, warned instances apart.
func gpusOf(types []InstanceType, fleet []Instance, now time.Duration) (ready, planned int) {
	for _, in := range fleet {
		g := types[in.Type].GPUs
		if in.Ready(now) {
			ready += g
		}
		if !in.Warned() {
			planned += g
		}
	}
	return ready, planned
}

// mixTypes reports why types do not suit a policy that sizes one mix of
// models on one GPU kind by GPU counts (Static, Reactive, Predictive): a
// type that is invalid, a CPU machine, or one of a named hardware kind
// (a run whose models are pinned to kinds, which Replanner provisions).
func mixTypes(policy string, types []InstanceType) error {
	for _, t := range types {
		if err := t.Validate(); err != nil {
			return err
		}
		if t.GPUs == 0 || t.Hardware != "" {
			return fmt.Errorf("cloudscale: %s: instance type %q is a CPU machine or names hardware %q; the policy sizes one mix of models on one GPU kind (Replanner provisions pinned models, CPU modules included)", policy, t.Name, t.Hardware)
		}
	}
	return nil
}

// instancesFor is the fewest instances of type typ whose GPUs cover need.
func instancesFor(types []InstanceType, typ int, need float64) int {
	if !(need > 0) {
		return 0
	}
	return int(math.Ceil(need/float64(types[typ].GPUs) - 1e-9))
}

// Static provisions for the peak: the fleet that serves Peak is up from the
// start and never changes. It is the baseline a fixed cluster pays.
type Static struct {
	Types []InstanceType
	Type  int
	// Peak is the highest rate the run will see, known in advance.
	Peak     float64
	Sizer    Sizer
	Headroom float64
}

// Validate reports a configuration Static cannot run.
func (s *Static) Validate() error {
	switch {
	case s.Sizer == nil || s.Type < 0 || s.Type >= len(s.Types):
		return fmt.Errorf("cloudscale: static: needs a sizer and type %d among its %d types", s.Type, len(s.Types))
	case !(s.Peak >= 0) || !(s.Headroom >= 0):
		return fmt.Errorf("cloudscale: static: peak %v and headroom %v must be non-negative numbers", s.Peak, s.Headroom)
	}
	return mixTypes("static", s.Types)
}

func (s *Static) Name() string        { return "static-peak" }
func (s *Static) Tick() time.Duration { return time.Minute }
func (s *Static) Start(float64) []int {
	n := instancesFor(s.Types, s.Type, s.Sizer.Need(s.Peak)*(1+s.Headroom))
	out := make([]int, n)
	for i := range out {
		out[i] = s.Type
	}
	return out
}
func (s *Static) Decide(*Observation) Decision { return Decision{SpillAbove: math.Inf(1)} }

// Reactive is target tracking on utilisation, as a Kubernetes HPA or
// SageMaker's autoscaling does: every tick the desired GPUs are the measured
// need (the rate averaged over Window, sized) over Target; the fleet grows
// at once to the desired size and shrinks only to the highest desired size
// of the last Stabilization (the HPA's scale-down stabilization window,
// 5 min by default). It forecasts nothing and spills nothing.
type Reactive struct {
	Types         []InstanceType
	Type          int
	Sizer         Sizer
	Target        float64       // utilisation target, (0, 1]
	Window        time.Duration // the metric's averaging window
	Stabilization time.Duration
	TickEvery     time.Duration

	rates   []float64 // the last Window/Tick rates
	desired []int     // the last Stabilization/Tick desired sizes (GPUs)
	release []InstanceID
	launch  []int
}

// Validate reports a configuration Reactive cannot run.
func (r *Reactive) Validate() error {
	switch {
	case r.Sizer == nil || r.Type < 0 || r.Type >= len(r.Types):
		return fmt.Errorf("cloudscale: reactive: needs a sizer and type %d among its %d types", r.Type, len(r.Types))
	case !(r.Target > 0 && r.Target <= 1):
		return fmt.Errorf("cloudscale: reactive: target %v is not a utilisation in (0, 1]", r.Target)
	case r.TickEvery <= 0 || r.Window < 0 || r.Stabilization < 0:
		return fmt.Errorf("cloudscale: reactive: tick %v must be positive, window %v and stabilization %v not negative", r.TickEvery, r.Window, r.Stabilization)
	}
	return mixTypes("reactive", r.Types)
}

func (r *Reactive) Name() string {
	return fmt.Sprintf("reactive(target=%g)", r.Target)
}
func (r *Reactive) Tick() time.Duration { return r.TickEvery }
func (r *Reactive) Start(rate float64) []int {
	n := instancesFor(r.Types, r.Type, r.Sizer.Need(rate)/r.Target)
	out := make([]int, max(n, 1))
	for i := range out {
		out[i] = r.Type
	}
	return out
}

func (r *Reactive) Decide(o *Observation) Decision {
	r.rates = appendWindow(r.rates, o.Rate, int(r.Window/r.TickEvery))
	avg := 0.0
	for _, x := range r.rates {
		avg += x
	}
	avg /= float64(len(r.rates))
	want := int(math.Ceil(r.Sizer.Need(avg)/r.Target - 1e-9))
	r.desired = appendWindow(r.desired, want, int(r.Stabilization/r.TickEvery))
	keep := 0
	for _, d := range r.desired {
		keep = max(keep, d)
	}
	keep = max(keep, 1)
	_, have := gpusOf(r.Types, o.Fleet, o.Now)
	r.launch, r.release = r.launch[:0], r.release[:0]
	g := r.Types[r.Type].GPUs
	switch {
	case want > have:
		for n := have; n < want; n += g {
			r.launch = append(r.launch, r.Type)
		}
	case keep < have:
		// Release the newest first: the ones still booting cost the least
		// to give up.
		for i := len(o.Fleet) - 1; i >= 0 && have-r.Types[o.Fleet[i].Type].GPUs >= keep; i-- {
			if o.Fleet[i].Warned() {
				continue // going anyway, and not counted in have
			}
			r.release = append(r.release, o.Fleet[i].ID)
			have -= r.Types[o.Fleet[i].Type].GPUs
		}
	}
	return Decision{Launch: r.launch, Release: r.release, SpillAbove: math.Inf(1)}
}

// appendWindow appends x and keeps the last n (at least 1) values.
func appendWindow[T any](w []T, x T, n int) []T {
	w = append(w, x)
	if n = max(n, 1); len(w) > n {
		w = append(w[:0], w[len(w)-n:]...)
	}
	return w
}

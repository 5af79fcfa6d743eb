package cloudscale

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// GreedyInput is MArk's Algorithm 1's input at one step.
type GreedyInput struct {
	// Need[t] is the GPUs needed over step t from now (t = 0 is the step
	// starting now): the forecast's maximum rate of the step, sized.
	Need []float64
	Step time.Duration
	// Types are the instance types a new instance may be of, except those
	// Unusable marks (nil: all usable): MArk's Algorithm 1 drops the types
	// that cannot meet the SLO, here the ones whose GPUs cannot hold the
	// models.
	Types    []InstanceType
	Unusable []bool
	// Running counts, per type, the instances that may be kept: they serve
	// from the step Running[type][k] gives (0 once booted) and carry no
	// launch overhead.
	Running [][]int // per type: for each running instance, the step from which it serves
}

// GreedyPlan is Algorithm 1's answer: per type, how many of the running
// instances to keep, how many new ones to launch now, and how many the plan
// counts on launching at a later step (launched then, if a later plan
// still wants them).
type GreedyPlan struct {
	Keep   []int
	Launch []int
	Later  []int
}

// Greedy is MArk's Algorithm 1 (§4.3): fill the forecast need, step by
// step, each time with the instance that serves the unmet need of the next
// stretch of short steps [τ, e] at the lowest cost per unit served,
// (O_i + (e−τ+1)·P_i)/N, where O_i, the launch overhead, is what the
// instance costs while it boots and N is the GPU-steps of unmet need it
// covers. A new instance of type i serves from step ⌈Launch_i/Step⌉ on:
// the plan looks ahead by the launch delay, as MArk targets the load τ
// after now. Need the plan cannot cover in time (before any instance could
// be ready) is left to spill-over and the SLO monitor.
//
// Two changes to the printed algorithm, both about time: a new instance is
// launched just in time, at τ less its launch delay, so one chosen for a
// rise 30 steps ahead is not launched (nor billed) now but counted in
// Later, and a later plan launches it if the forecast still wants it; and
// a running instance costs (e+1)·P_i, its price from now to e, not from τ,
// since keeping it means paying for it while it waits, so an instance idle
// for longer than a relaunch would cost is let go.
//
// Running instances of a type are kept earliest-serving first; a running
// instance not kept is surplus, for the caller to release (after its
// turn-off delay).
func Greedy(in GreedyInput) GreedyPlan {
	nt := len(in.Types)
	plan := GreedyPlan{Keep: make([]int, nt), Launch: make([]int, nt), Later: make([]int, nt)}
	steps := len(in.Need)
	if steps == 0 || nt == 0 {
		return plan
	}
	stepH := in.Step.Hours()
	running := make([][]int, nt)
	for i := range nt {
		if i < len(in.Running) {
			running[i] = slices.Clone(in.Running[i])
			slices.Sort(running[i])
		}
	}
	// cover[t] is the planned capacity over step t.
	cover := make([]float64, steps)
	unmet := func(t int) float64 { return in.Need[t] - cover[t] }
	const eps = 1e-9
	from := 0 // no candidate covers need before this step
	for iter := 0; iter < 1<<20; iter++ {
		tau := -1
		for t := from; t < steps; t++ {
			if unmet(t) > eps {
				tau = t
				break
			}
		}
		if tau < 0 {
			return plan
		}
		e := tau
		for e+1 < steps && unmet(e+1) > eps {
			e++
		}
		type choice struct {
			typ     int
			keep    bool
			serves  int
			perUnit float64
		}
		best := choice{typ: -1, perUnit: math.Inf(1)}
		consider := func(typ int, keep bool, serves int) {
			t := in.Types[typ]
			capG := float64(t.GPUs)
			n := 0.0
			for s := max(tau, serves); s <= e; s++ {
				n += min(capG, unmet(s))
			}
			if n <= eps {
				return
			}
			cost := float64(e+1) * t.PricePerHour * stepH // kept from now to e
			if !keep {
				cost = t.PricePerHour*t.Launch.Hours() + float64(e-max(tau, serves)+1)*t.PricePerHour*stepH
			}
			c := choice{typ: typ, keep: keep, serves: max(tau, serves), perUnit: cost / n}
			// Ties: keep before launch, then the lower type index.
			if c.perUnit < best.perUnit-1e-12 || math.Abs(c.perUnit-best.perUnit) <= 1e-12 && c.keep && !best.keep {
				best = c
			}
		}
		for typ := range nt {
			if k := plan.Keep[typ]; k < len(running[typ]) {
				consider(typ, true, running[typ][k])
			}
		}
		for typ := range nt {
			if typ >= len(in.Unusable) || !in.Unusable[typ] {
				consider(typ, false, launchSteps(in.Types[typ].Launch, in.Step))
			}
		}
		if best.typ < 0 {
			// Nothing serves [τ, e] in time: leave it to spill-over.
			from = e + 1
			continue
		}
		switch {
		case best.keep:
			plan.Keep[best.typ]++
		case best.serves <= launchSteps(in.Types[best.typ].Launch, in.Step):
			plan.Launch[best.typ]++
		default:
			plan.Later[best.typ]++
		}
		for s := best.serves; s < steps; s++ {
			cover[s] += float64(in.Types[best.typ].GPUs)
		}
	}
	return plan
}

// launchSteps is the first step a new instance launched now serves in
// whole: ⌈launch/step⌉.
func launchSteps(launch, step time.Duration) int {
	if step <= 0 {
		return 0
	}
	return int((launch + step - 1) / step)
}

// keepOrder sorts a type's running instances in the order Greedy keeps
// them: earliest serving first, then the oldest.
func keepOrder(fleet []Instance) {
	slices.SortStableFunc(fleet, func(a, b Instance) int {
		return cmp.Or(cmp.Compare(a.ReadyAt, b.ReadyAt), cmp.Compare(a.LaunchedAt, b.LaunchedAt), cmp.Compare(a.ID, b.ID))
	})
}

package scheduler

import (
	"fmt"
	"math"
)

// Signals are what a scheduler observed over one window, the inputs of the
// §4.4 autoscaling rule.
type Signals struct {
	// GPUs is N, the GPUs serving during the window.
	GPUs int
	// Requests is how many requests ended in the window; too few make the
	// rates meaningless.
	Requests uint64
	// BadRate r is the fraction of those requests dropped or late.
	BadRate float64
	// IdleFraction f is the fraction of GPU time spent idle.
	IdleFraction float64
}

// AutoscaleConfig holds the thresholds of the autoscaling rule.
type AutoscaleConfig struct {
	// AddAbove: advise adding GPUs when the bad rate exceeds it.
	AddAbove float64
	// RemoveAbove: advise removing GPUs when the idle fraction exceeds it
	// (and the bad rate is within AddAbove).
	RemoveAbove float64
	// MinRequests: with fewer requests in the window, hold.
	MinRequests uint64
	// MaxBadRate caps r in N·r/(1−r), which diverges as r approaches 1.
	MaxBadRate float64
}

// DefaultAutoscaleConfig returns the thresholds reports use: add above a 1%
// bad rate (the goodput target), remove above 10% idle time, hold with fewer
// than 100 requests, and never more than N·99 new GPUs at once.
func DefaultAutoscaleConfig() AutoscaleConfig {
	return AutoscaleConfig{AddAbove: 0.01, RemoveAbove: 0.10, MinRequests: 100, MaxBadRate: 0.99}
}

// AutoscaleAction is what the advice says to do.
type AutoscaleAction string

const (
	// ScaleHold: keep the cluster as it is.
	ScaleHold AutoscaleAction = "hold"
	// ScaleAdd: add AutoscaleAdvice.GPUs GPUs.
	ScaleAdd AutoscaleAction = "add"
	// ScaleRemove: release AutoscaleAdvice.GPUs GPUs.
	ScaleRemove AutoscaleAction = "remove"
)

// AutoscaleAdvice is the rule's output: an action, a GPU count and why.
type AutoscaleAdvice struct {
	Action AutoscaleAction
	GPUs   int
	Reason string
}

// Advise applies §4.4: with bad rate r above the threshold, add N·r/(1−r)
// GPUs (the capacity that would have served the bad requests, since a
// flat-top scheduler's goodput stays at its peak); otherwise, with idle
// fraction f above its threshold, remove N·f GPUs (the capacity that sat
// idle, since a non-work-conserving scheduler idles GPUs instead of running
// small batches).
func (c AutoscaleConfig) Advise(s Signals) AutoscaleAdvice {
	switch {
	case s.GPUs <= 0:
		return AutoscaleAdvice{Action: ScaleHold, Reason: "no GPUs"}
	case s.Requests < c.MinRequests:
		return AutoscaleAdvice{Action: ScaleHold, Reason: fmt.Sprintf("too little data: %d requests < %d", s.Requests, c.MinRequests)}
	}
	n := float64(s.GPUs)
	if r := s.BadRate; r > c.AddAbove {
		r = math.Min(r, c.MaxBadRate)
		add := int(math.Ceil(n * r / (1 - r)))
		return AutoscaleAdvice{Action: ScaleAdd, GPUs: add,
			Reason: fmt.Sprintf("bad rate %.2f%% > %.2f%%: add N·r/(1−r) = %d", 100*s.BadRate, 100*c.AddAbove, add)}
	}
	if f := s.IdleFraction; f > c.RemoveAbove {
		remove := int(math.Floor(n * f))
		if remove >= s.GPUs {
			remove = s.GPUs - 1
		}
		if remove > 0 {
			return AutoscaleAdvice{Action: ScaleRemove, GPUs: remove,
				Reason: fmt.Sprintf("GPU idle %.1f%% > %.1f%%: remove N·f = %d", 100*f, 100*c.RemoveAbove, remove)}
		}
	}
	return AutoscaleAdvice{Action: ScaleHold, Reason: fmt.Sprintf("bad rate %.2f%%, GPU idle %.1f%%: within thresholds", 100*s.BadRate, 100*s.IdleFraction)}
}

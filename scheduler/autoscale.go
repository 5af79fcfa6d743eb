package scheduler

import (
	"fmt"
	"math"
	"time"
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

// SignalSample is what a live scheduler has counted since it started, read
// at one moment: the cumulative inputs of the autoscaling rule.
type SignalSample struct {
	At Time
	// Ended counts the requests that ended (planned or dropped), and Bad
	// those among them dropped, failed or dropped late by their backend.
	Ended, Bad uint64
	// GPUs is how many GPUs were online at At.
	GPUs int
	// Busy is the GPU time spent running batches, over all GPUs.
	Busy time.Duration
}

// SignalWindow turns SignalSamples, taken as time goes on, into the Signals
// of the last Window: the live form of what the simulator measures over a
// run, so that a running cluster gets the §4.4 advice of the same rule.
// It is a pure state machine: the caller samples and reads the clock.
type SignalWindow struct {
	window  time.Duration
	samples []SignalSample // oldest first; the first is at or before now − window
	// gpuTime[i] is the online GPU time from samples[0] to samples[i]:
	// the integral of the GPU count, each sample's count held until the
	// next.
	gpuTime []time.Duration
}

// NewSignalWindow returns a window of the given length (> 0).
func NewSignalWindow(window time.Duration) *SignalWindow {
	return &SignalWindow{window: window}
}

// Window is the window's length.
func (w *SignalWindow) Window() time.Duration { return w.window }

// Add records a sample. Samples must come in time order; one that does not
// (or repeats a time) is ignored. Samples older than needed to cover the
// window are forgotten.
func (w *SignalWindow) Add(s SignalSample) {
	if n := len(w.samples); n > 0 {
		last := w.samples[n-1]
		if s.At <= last.At {
			return
		}
		w.gpuTime = append(w.gpuTime, w.gpuTime[n-1]+time.Duration(last.GPUs)*s.At.Sub(last.At))
	} else {
		w.gpuTime = append(w.gpuTime, 0)
	}
	w.samples = append(w.samples, s)
	// Keep one sample at or before At − window, the window's start.
	drop := 0
	for drop+1 < len(w.samples) && w.samples[drop+1].At <= s.At.Add(-w.window) {
		drop++
	}
	if drop > 0 {
		w.samples = append(w.samples[:0], w.samples[drop:]...)
		base := w.gpuTime[drop]
		w.gpuTime = append(w.gpuTime[:0], w.gpuTime[drop:]...)
		for i := range w.gpuTime {
			w.gpuTime[i] -= base
		}
	}
}

// Signals are the rule's inputs over the window up to the last sample (or
// over what has been sampled, if less): the requests that ended in it,
// their bad rate, and the fraction of the online GPU time spent idle. GPUs
// is the count online at the last sample.
func (w *SignalWindow) Signals() Signals {
	n := len(w.samples)
	if n == 0 {
		return Signals{}
	}
	first, last := w.samples[0], w.samples[n-1]
	sig := Signals{GPUs: last.GPUs}
	if last.Ended >= first.Ended {
		sig.Requests = last.Ended - first.Ended
	}
	if sig.Requests > 0 && last.Bad >= first.Bad {
		sig.BadRate = math.Min(1, float64(last.Bad-first.Bad)/float64(sig.Requests))
	}
	if gt := w.gpuTime[n-1]; gt > 0 {
		busy := last.Busy - first.Busy
		sig.IdleFraction = math.Max(0, math.Min(1, 1-float64(busy)/float64(gt)))
	}
	return sig
}

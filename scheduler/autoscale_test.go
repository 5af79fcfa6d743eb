package scheduler

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestAutoscaleAdvise(t *testing.T) {
	def := DefaultAutoscaleConfig()
	cases := []struct {
		name   string
		cfg    AutoscaleConfig
		s      Signals
		action AutoscaleAction
		gpus   int
	}{
		// Add N·r/(1−r), rounded up.
		{"add 10·0.2/0.8 = 2.5 → 3", def, Signals{GPUs: 10, Requests: 1000, BadRate: 0.2}, ScaleAdd, 3},
		{"add 8·0.5/0.5 = 8", def, Signals{GPUs: 8, Requests: 1000, BadRate: 0.5}, ScaleAdd, 8},
		{"add 3·0.1/0.9 = 0.33 → 1", def, Signals{GPUs: 3, Requests: 1000, BadRate: 0.1}, ScaleAdd, 1},
		{"add just over the threshold → 1", def, Signals{GPUs: 4, Requests: 1000, BadRate: 0.0101}, ScaleAdd, 1},
		// r near 1 is capped at 0.99: N·0.99/0.01 = 99·N.
		{"r = 1 capped", def, Signals{GPUs: 2, Requests: 1000, BadRate: 1}, ScaleAdd, 198},
		{"r = 0.999 capped", def, Signals{GPUs: 1, Requests: 1000, BadRate: 0.999}, ScaleAdd, 99},
		// A high bad rate wins over a high idle fraction.
		{"add before remove", def, Signals{GPUs: 4, Requests: 1000, BadRate: 0.5, IdleFraction: 0.9}, ScaleAdd, 4},
		// Remove N·f, rounded down, never all.
		{"remove 10·0.35 = 3.5 → 3", def, Signals{GPUs: 10, Requests: 1000, IdleFraction: 0.35}, ScaleRemove, 3},
		{"remove 4·0.99 = 3.96 → 3", def, Signals{GPUs: 4, Requests: 1000, IdleFraction: 0.99}, ScaleRemove, 3},
		{"remove all capped at N−1", def, Signals{GPUs: 2, Requests: 1000, IdleFraction: 1}, ScaleRemove, 1},
		{"remove 1·0.9 = 0 → hold", def, Signals{GPUs: 1, Requests: 1000, IdleFraction: 0.9}, ScaleHold, 0},
		{"single GPU fully idle → hold", def, Signals{GPUs: 1, Requests: 1000, IdleFraction: 1}, ScaleHold, 0},
		{"remove 5·0.15 = 0.75 → hold", def, Signals{GPUs: 5, Requests: 1000, IdleFraction: 0.15}, ScaleHold, 0},
		// Thresholds are strict.
		{"bad rate at the threshold", def, Signals{GPUs: 4, Requests: 1000, BadRate: 0.01}, ScaleHold, 0},
		{"idle at the threshold", def, Signals{GPUs: 40, Requests: 1000, IdleFraction: 0.10}, ScaleHold, 0},
		{"idle just over the threshold", def, Signals{GPUs: 40, Requests: 1000, IdleFraction: 0.11}, ScaleRemove, 4},
		// Too little data, or no GPUs: hold whatever the rates say.
		{"too few requests", def, Signals{GPUs: 4, Requests: 99, BadRate: 0.9}, ScaleHold, 0},
		{"exactly enough requests", def, Signals{GPUs: 4, Requests: 100, BadRate: 0.5}, ScaleAdd, 4},
		{"no GPUs", def, Signals{GPUs: 0, Requests: 1000, BadRate: 0.9}, ScaleHold, 0},
		// Custom thresholds.
		{"custom add", AutoscaleConfig{AddAbove: 0.3, RemoveAbove: 0.5, MinRequests: 10, MaxBadRate: 0.5},
			Signals{GPUs: 4, Requests: 10, BadRate: 0.25}, ScaleHold, 0},
		{"custom cap", AutoscaleConfig{AddAbove: 0.3, RemoveAbove: 0.5, MinRequests: 10, MaxBadRate: 0.5},
			Signals{GPUs: 4, Requests: 10, BadRate: 0.9}, ScaleAdd, 4},
		{"custom remove", AutoscaleConfig{AddAbove: 0.3, RemoveAbove: 0.5, MinRequests: 10, MaxBadRate: 0.5},
			Signals{GPUs: 10, Requests: 10, IdleFraction: 0.45}, ScaleHold, 0},
		{"custom min requests", AutoscaleConfig{AddAbove: 0.3, RemoveAbove: 0.5, MinRequests: 10, MaxBadRate: 0.5},
			Signals{GPUs: 10, Requests: 9, IdleFraction: 0.9}, ScaleHold, 0},
	}
	for _, c := range cases {
		a := c.cfg.Advise(c.s)
		if a.Action != c.action || a.GPUs != c.gpus {
			t.Errorf("%s: %s %d (%s), want %s %d", c.name, a.Action, a.GPUs, a.Reason, c.action, c.gpus)
		}
		if a.Reason == "" {
			t.Errorf("%s: no reason given", c.name)
		}
	}
}

func TestAutoscaleReasons(t *testing.T) {
	def := DefaultAutoscaleConfig()
	for _, c := range []struct {
		s    Signals
		want string
	}{
		{Signals{GPUs: 4, Requests: 5}, "too little data"},
		{Signals{GPUs: 4, Requests: 1000, BadRate: 0.5}, "N·r/(1−r) = 4"},
		{Signals{GPUs: 10, Requests: 1000, IdleFraction: 0.5}, "N·f = 5"},
		{Signals{GPUs: 10, Requests: 1000}, "within thresholds"},
	} {
		if a := def.Advise(c.s); !strings.Contains(a.Reason, c.want) {
			t.Errorf("%+v: reason %q, want it to mention %q", c.s, a.Reason, c.want)
		}
	}
}

// A window of 3 s over samples a second apart: the signals are the deltas
// since the sample 3 s back, and the idle fraction weighs each GPU count by
// how long it held.
func TestSignalWindowByHand(t *testing.T) {
	w := NewSignalWindow(3 * time.Second)
	if sig := w.Signals(); sig != (Signals{}) {
		t.Fatalf("empty window: %+v", sig)
	}
	sec := func(s int) Time { return Time(int64(s) * int64(time.Second)) }
	for _, s := range []SignalSample{
		{At: sec(0), Ended: 0, Bad: 0, GPUs: 2, Busy: 0},
		{At: sec(1), Ended: 100, Bad: 0, GPUs: 2, Busy: 2 * time.Second}, // both busy
		{At: sec(2), Ended: 200, Bad: 10, GPUs: 4, Busy: 3 * time.Second},
		{At: sec(2), Ended: 999, Bad: 999, GPUs: 9, Busy: time.Hour}, // same time: ignored
		{At: sec(3), Ended: 300, Bad: 10, GPUs: 4, Busy: 5 * time.Second},
	} {
		w.Add(s)
	}
	// From 0 s to 3 s: 300 ended, 10 bad; GPU time 2+2+4 = 8 s, busy 5 s.
	want := Signals{GPUs: 4, Requests: 300, BadRate: 10.0 / 300, IdleFraction: 1 - 5.0/8}
	if sig := w.Signals(); !closeSignals(sig, want) {
		t.Errorf("at 3s: %+v, want %+v", sig, want)
	}
	w.Add(SignalSample{At: sec(4), Ended: 350, Bad: 40, GPUs: 4, Busy: 9 * time.Second})
	// From 1 s to 4 s: 250 ended, 40 bad; GPU time 2+4+4 = 10 s, busy 7 s.
	want = Signals{GPUs: 4, Requests: 250, BadRate: 40.0 / 250, IdleFraction: 1 - 7.0/10}
	if sig := w.Signals(); !closeSignals(sig, want) {
		t.Errorf("at 4s: %+v, want %+v", sig, want)
	}
	if a := DefaultAutoscaleConfig().Advise(w.Signals()); a.Action != ScaleAdd {
		t.Errorf("16%% bad: %+v, want add", a)
	}
}

// Against a recomputation from every sample kept, on random sample times
// and counts: the window's signals are those of the latest sample and the
// last one at or before it minus the window.
func TestSignalWindowMatchesRecomputation(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for run := 0; run < 50; run++ {
		window := time.Duration(1+rng.IntN(20)) * 100 * time.Millisecond
		w := NewSignalWindow(window)
		var all []SignalSample
		var s SignalSample
		for i := 0; i < 200; i++ {
			s.At += Time(1 + rng.Int64N(int64(300*time.Millisecond)))
			ended := uint64(rng.IntN(50))
			s.Ended += ended
			s.Bad += uint64(rng.IntN(int(ended) + 1))
			s.GPUs = 1 + rng.IntN(8)
			s.Busy += time.Duration(rng.Int64N(int64(time.Second)))
			w.Add(s)
			all = append(all, s)
			first := 0
			for j := range all {
				if all[j].At <= s.At.Add(-window) {
					first = j
				}
			}
			var gt time.Duration
			for j := first + 1; j < len(all); j++ {
				gt += time.Duration(all[j-1].GPUs) * all[j].At.Sub(all[j-1].At)
			}
			f := all[first]
			want := Signals{GPUs: s.GPUs, Requests: s.Ended - f.Ended}
			if want.Requests > 0 {
				want.BadRate = float64(s.Bad-f.Bad) / float64(want.Requests)
			}
			if gt > 0 {
				want.IdleFraction = math.Max(0, math.Min(1, 1-float64(s.Busy-f.Busy)/float64(gt)))
			}
			if got := w.Signals(); !closeSignals(got, want) {
				t.Fatalf("run %d sample %d: %+v, want %+v", run, i, got, want)
			}
		}
	}
}

func closeSignals(a, b Signals) bool {
	return a.GPUs == b.GPUs && a.Requests == b.Requests && math.Abs(a.BadRate-b.BadRate) < 1e-12 && math.Abs(a.IdleFraction-b.IdleFraction) < 1e-12
}

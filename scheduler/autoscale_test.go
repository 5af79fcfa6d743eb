package scheduler

import (
	"strings"
	"testing"
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

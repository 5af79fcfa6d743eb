package overrun

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func newTracker(t *testing.T, c Config) *Tracker {
	t.Helper()
	tr, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestValidate(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default() invalid: %v", err)
	}
	for name, c := range map[string]Config{
		"no window":         {Window: 0, Quantile: 0.9, Every: 1, Max: 2},
		"every > window":    {Window: 4, Quantile: 0.9, Every: 5, Max: 2},
		"zero quantile":     {Window: 4, Quantile: 0, Every: 1, Max: 2},
		"quantile above 1":  {Window: 4, Quantile: 1.5, Every: 1, Max: 2},
		"max under 1":       {Window: 4, Quantile: 0.9, Every: 1, Max: 0.5},
		"NaN quantile":      {Window: 4, Quantile: nan(), Every: 1, Max: 2},
		"NaN max":           {Window: 4, Quantile: 0.9, Every: 1, Max: nan()},
		"negative every":    {Window: 4, Quantile: 0.9, Every: -1, Max: 2},
		"zero-valued":       {},
		"quantile negative": {Window: 4, Quantile: -0.1, Every: 1, Max: 2},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("%s: New(%+v) accepted", name, c)
		}
	}
}

func nan() float64 { z := 0.0; return z / z }

// TestQuantileOfWindow: the factor is the nearest-rank quantile of the
// last Window ratios, computed every Every batches, at least 1 and at most
// Max.
func TestQuantileOfWindow(t *testing.T) {
	tr := newTracker(t, Config{Window: 10, Quantile: 0.9, Every: 5, Max: 1.5})
	const ms = time.Millisecond
	// Four batches: no computation yet.
	for _, r := range []time.Duration{12, 11, 13, 10} {
		if f, changed := tr.Observe(r*ms, 10*ms); f != 1 || changed {
			t.Fatalf("before Every batches: factor %v, changed %v; want 1, false", f, changed)
		}
	}
	// The fifth: ratios 1.2 1.1 1.3 1.0 1.4; p90 of 5 by nearest rank is
	// the 5th smallest, 1.4.
	if f, changed := tr.Observe(14*ms, 10*ms); f != 1.4 || !changed {
		t.Fatalf("after 5 batches: factor %v, changed %v; want 1.4, true", f, changed)
	}
	// Five more, all on time: the window holds 10 ratios, the 9th
	// smallest is 1.3.
	for i := range 5 {
		f, changed := tr.Observe(10*ms, 10*ms)
		if i < 4 && (f != 1.4 || changed) {
			t.Fatalf("batch %d of the second five: factor %v, changed %v; want 1.4 unchanged", i, f, changed)
		}
		if i == 4 && (f != 1.3 || !changed) {
			t.Fatalf("after 10 batches: factor %v, changed %v; want 1.3, true", f, changed)
		}
	}
	// Five batches at a third of their plan push the slow ones out: the
	// factor falls to 1, not below.
	for range 5 {
		tr.Observe(3*ms, 10*ms)
	}
	if f := tr.Factor(); f != 1 {
		t.Errorf("window of fast batches: factor %v, want 1", f)
	}
	// Batches at three times their plan: capped at Max.
	for range 10 {
		tr.Observe(30*ms, 10*ms)
	}
	if f := tr.Factor(); f != 1.5 {
		t.Errorf("window of slow batches: factor %v, want the cap 1.5", f)
	}
}

func TestIgnoresBatchesWithoutPlan(t *testing.T) {
	tr := newTracker(t, Config{Window: 2, Quantile: 1, Every: 1, Max: 2})
	for _, planned := range []time.Duration{0, -time.Millisecond} {
		if f, changed := tr.Observe(5*time.Millisecond, planned); f != 1 || changed {
			t.Errorf("Observe(5ms, %v) = %v, %v; want it ignored", planned, f, changed)
		}
	}
	if f, changed := tr.Observe(-time.Millisecond, time.Millisecond); f != 1 || changed {
		t.Errorf("a negative run time was not ignored: %v, %v", f, changed)
	}
}

// TestMatchesSortedWindow checks the ring against a plain recomputation
// over random ratios.
func TestMatchesSortedWindow(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	c := Config{Window: 37, Quantile: 0.95, Every: 6, Max: 1.8}
	tr := newTracker(t, c)
	var all []float64
	want := 1.0
	for i := range 2000 {
		planned := time.Duration(1+rng.IntN(50)) * time.Millisecond
		ran := time.Duration(float64(planned) * (0.8 + 0.6*rng.Float64()))
		all = append(all, float64(ran)/float64(planned))
		f, _ := tr.Observe(ran, planned)
		if (i+1)%c.Every == 0 {
			w := slices.Clone(all[max(0, len(all)-c.Window):])
			slices.Sort(w)
			rank := int(float64(len(w))*c.Quantile + 0.9999999) // nearest rank, ceil
			want = min(max(w[rank-1], 1), c.Max)
		}
		if f != want {
			t.Fatalf("batch %d: factor %v, want %v", i, f, want)
		}
	}
}

package cloudscale

import (
	"math"
	"testing"
)

func consecutive(rates ...float64) []MeasuredCapacity {
	out := make([]MeasuredCapacity, len(rates))
	for i, r := range rates {
		out[i] = MeasuredCapacity{GPUs: i + 1, Rate: r}
	}
	return out
}

// TestMeasuredSizerHandWorked: capacities measured at 1, 2, 3 and 6 GPUs
// (0, 100, 250 and 400 req/s) are interpolated in between and
// extrapolated at the last count's 400/6 req/s per GPU beyond, and Need
// inverts Capacity.
func TestMeasuredSizerHandWorked(t *testing.T) {
	s, err := NewMeasuredSizer(append(consecutive(0, 100, 250), MeasuredCapacity{GPUs: 6, Rate: 400}))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ gpus, rate float64 }{
		{0, 0}, {-1, 0}, {0.5, 0}, {1, 0}, {1.5, 50}, {2, 100}, {2.2, 130}, {3, 250}, {4, 300}, {5.5, 375}, {6, 400}, {12, 800},
	} {
		if got := s.Capacity(c.gpus); math.Abs(got-c.rate) > 1e-9 {
			t.Errorf("Capacity(%v) = %v, want %v", c.gpus, got, c.rate)
		}
	}
	for _, c := range []struct{ rate, gpus float64 }{
		{0, 0}, {-3, 0}, {1, 1.01}, {50, 1.5}, {100, 2}, {130, 2.2}, {250, 3}, {300, 4}, {400, 6}, {800, 12},
	} {
		if got := s.Need(c.rate); math.Abs(got-c.gpus) > 1e-9 {
			t.Errorf("Need(%v) = %v, want %v", c.rate, got, c.gpus)
		}
	}
	// Need is the least fraction whose capacity reaches the rate.
	for rate := 0.5; rate < 900; rate += 7.3 {
		n := s.Need(rate)
		if c := s.Capacity(n); math.Abs(c-rate) > 1e-9*rate {
			t.Errorf("Capacity(Need(%v)) = %v", rate, c)
		}
		if s.Capacity(n-1e-6) >= rate {
			t.Errorf("Need(%v) = %v is not the least", rate, n)
		}
	}
}

// TestMeasuredSizerFlatSegment: a count that serves no more than the one
// below never answers Need, which takes the lower count.
func TestMeasuredSizerFlatSegment(t *testing.T) {
	s, err := NewMeasuredSizer(consecutive(100, 100, 300))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Need(100); got != 1 {
		t.Errorf("Need(100) = %v, want 1", got)
	}
	if got := s.Need(200); got != 2.5 {
		t.Errorf("Need(200) = %v, want 2.5", got)
	}
}

func TestNewMeasuredSizerErrors(t *testing.T) {
	for _, points := range [][]MeasuredCapacity{
		nil, consecutive(0), consecutive(0, 0), consecutive(-1, 5), consecutive(5, 4), consecutive(math.NaN()), consecutive(math.Inf(1)),
		{{GPUs: 0, Rate: 5}}, {{GPUs: 2, Rate: 5}, {GPUs: 2, Rate: 6}}, {{GPUs: 3, Rate: 5}, {GPUs: 2, Rate: 6}},
	} {
		if _, err := NewMeasuredSizer(points); err == nil {
			t.Errorf("capacities %v accepted", points)
		}
	}
}

package profile

import (
	"errors"
	"math"
	"time"
)

// Fit is a linear latency profile fitted to measured batch latencies, and
// how well it fits.
type Fit struct {
	Alpha, Beta time.Duration
	// MaxRelErr is the largest |fitted − measured| / measured over the
	// batch sizes.
	MaxRelErr float64
	// Kept reports whether FromMeasured kept the line (else it kept the
	// measured table).
	Kept bool
}

// FitLinear fits ℓ(b) = α·b + β by least squares to latencies, where
// latencies[b-1] is the measured latency of a batch of b. α and β are kept
// non-negative: a latency that falls with the batch size is noise.
func FitLinear(latencies []time.Duration) (Fit, error) {
	n := float64(len(latencies))
	if len(latencies) == 0 {
		return Fit{}, errors.New("profile: no latencies to fit")
	}
	var sx, sy, sxx, sxy float64
	for i, l := range latencies {
		if l <= 0 {
			return Fit{}, errors.New("profile: a measured latency is not positive")
		}
		x, y := float64(i+1), float64(l)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	alpha := 0.0
	if d := n*sxx - sx*sx; d > 0 {
		alpha = (n*sxy - sx*sy) / d
	}
	alpha = math.Max(alpha, 0)
	beta := math.Max((sy-alpha*sx)/n, 0)
	f := Fit{Alpha: time.Duration(math.Round(alpha)), Beta: time.Duration(math.Round(beta))}
	for i, l := range latencies {
		fitted := float64(f.Alpha)*float64(i+1) + float64(f.Beta)
		f.MaxRelErr = math.Max(f.MaxRelErr, math.Abs(fitted-float64(l))/float64(l))
	}
	return f, nil
}

// FromMeasured is the profile of measured batch latencies (latencies[b-1]
// for a batch of b): the linear fit where it is within tolerance of every
// measurement, which the paper's α·b + β form keeps readable, else the
// measured table itself, made non-decreasing (a larger batch never takes
// less than a smaller one).
func FromMeasured(latencies []time.Duration, tolerance float64) (Profile, Fit, error) {
	f, err := FitLinear(latencies)
	if err != nil {
		return Profile{}, f, err
	}
	if f.MaxRelErr <= tolerance && (f.Alpha > 0 || f.Beta > 0) {
		f.Kept = true
		p, err := Linear(f.Alpha, f.Beta, len(latencies))
		return p, f, err
	}
	table := make([]time.Duration, len(latencies))
	for i, l := range latencies {
		table[i] = l
		if i > 0 && table[i] < table[i-1] {
			table[i] = table[i-1]
		}
	}
	p, err := Table(table)
	return p, f, err
}

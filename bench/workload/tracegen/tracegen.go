// Package tracegen makes synthetic day-long request-rate traces from stated
// parameters and a seed: a diurnal curve with one or more daily peaks,
// autocorrelated multiplicative noise, and Poisson bursts. WriteCSV writes
// a day in the minute,rate form that workload.ParseRateTrace reads, so a
// workload replays it with rate_trace. The traces under testdata/traces are
// Bundled, written by cmd/tracegen; see that directory's README.md.
//
// A day is made in four steps, each from its own random stream so that
// changing one part's parameters leaves the others' draws alone:
//
//  1. The diurnal curve (Smooth): a weighted sum of one periodic bump (von
//     Mises) per peak, mapped linearly onto [1, PeakToTrough].
//  2. Noise: the curve times exp(x - σ²/2), where x is an AR(1) series with
//     coefficient NoiseAR1 and stationary standard deviation σ = NoiseSigma,
//     so the noise has mean 1 and drifts instead of flickering.
//  3. Bursts (Bursts): a Poisson number with mean BurstsPerDay, each starting
//     at a uniform step, rising linearly over its ramp, holding its factor,
//     and falling over the same ramp; where bursts overlap the larger
//     factor wins.
//  4. The day is scaled so that its mean is exactly Mean.
package tracegen

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Day is the length of every generated trace.
const Day = 24 * time.Hour

// Random streams of one seed, one per part of a day.
const (
	streamNoise  = 0x6e6f697365 // "noise"
	streamBursts = 0x6275727374 // "burst"
)

// HistorySeedOffset is added to a trace's seed to make its history day.
const HistorySeedOffset = 1000

// A Peak is one daily maximum of the diurnal curve.
type Peak struct {
	At     time.Duration // time of day, in [0, 24h)
	Weight float64       // height relative to the other peaks, > 0
}

// Params states everything a generated day depends on. The zero value is
// not valid; see Validate.
type Params struct {
	Name string // file stem: letters, digits, '-', '_' and '.'
	Seed uint64 // seeds every random draw

	// Step is the span of one row: time.Minute (1440 rows, written as
	// minute,rate) or time.Second (86400 rows, second,rate).
	Step time.Duration
	// Mean is the day's mean rate in requests per second; the finished day
	// is scaled to it, so bursts take their share from the baseline.
	Mean float64

	// PeakToTrough is the ratio of the diurnal curve's highest value to its
	// lowest, >= 1. Noise and bursts come on top of it.
	PeakToTrough float64
	// Peaks are the curve's daily maxima, at least one.
	Peaks []Peak
	// PeakWidth is the spread of each peak: about the standard deviation of
	// its bump, in (0, 12h].
	PeakWidth time.Duration

	// NoiseSigma is the standard deviation of the logarithm of the noise
	// factor, in [0, 2]; 0 means no noise.
	NoiseSigma float64
	// NoiseAR1 is the correlation of the log noise between consecutive
	// steps, in [0, 1); 0 is white noise.
	NoiseAR1 float64

	// BurstsPerDay is the expected number of bursts (Poisson), in
	// [0, 10000]. The fields below are checked only when it is positive.
	BurstsPerDay float64
	// BurstMin and BurstMax bound a burst's factor (uniform), 1 <= min <= max.
	BurstMin, BurstMax float64
	// BurstHoldMin and BurstHoldMax bound the time a burst holds its full
	// factor (uniform in whole steps).
	BurstHoldMin, BurstHoldMax time.Duration
	// RampMin and RampMax bound the time a burst takes to rise to its
	// factor, and again to fall back (uniform in whole steps).
	RampMin, RampMax time.Duration
}

// Steps is the number of rows of a day at p.Step.
func (p Params) Steps() int { return int(Day / p.Step) }

// Validate reports the first parameter out of range.
func (p Params) Validate() error {
	fin := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case p.Name == "":
		return errors.New("tracegen: no name")
	case !validName(p.Name):
		return fmt.Errorf("tracegen: name %q: want letters, digits, '-', '_' and '.' only", p.Name)
	case p.Step != time.Minute && p.Step != time.Second:
		return fmt.Errorf("tracegen %s: step %v: want 1m or 1s", p.Name, p.Step)
	case !fin(p.Mean) || p.Mean <= 0:
		return fmt.Errorf("tracegen %s: mean %g: want a positive rate", p.Name, p.Mean)
	case !fin(p.PeakToTrough) || p.PeakToTrough < 1:
		return fmt.Errorf("tracegen %s: peak-to-trough %g: want >= 1", p.Name, p.PeakToTrough)
	case len(p.Peaks) == 0:
		return fmt.Errorf("tracegen %s: no peaks", p.Name)
	case p.PeakWidth <= 0 || p.PeakWidth > Day/2:
		return fmt.Errorf("tracegen %s: peak width %v: want (0, 12h]", p.Name, p.PeakWidth)
	case !fin(p.NoiseSigma) || p.NoiseSigma < 0 || p.NoiseSigma > 2:
		return fmt.Errorf("tracegen %s: noise sigma %g: want [0, 2]", p.Name, p.NoiseSigma)
	case !fin(p.NoiseAR1) || p.NoiseAR1 < 0 || p.NoiseAR1 >= 1:
		return fmt.Errorf("tracegen %s: noise AR(1) %g: want [0, 1)", p.Name, p.NoiseAR1)
	case !fin(p.BurstsPerDay) || p.BurstsPerDay < 0 || p.BurstsPerDay > 10000:
		return fmt.Errorf("tracegen %s: bursts per day %g: want [0, 10000]", p.Name, p.BurstsPerDay)
	}
	for i, pk := range p.Peaks {
		if pk.At < 0 || pk.At >= Day || !fin(pk.Weight) || pk.Weight <= 0 {
			return fmt.Errorf("tracegen %s: peak %d (%v, weight %g): want a time of day and a positive weight", p.Name, i, pk.At, pk.Weight)
		}
	}
	if p.BurstsPerDay == 0 {
		return nil
	}
	if !fin(p.BurstMax) || p.BurstMin < 1 || p.BurstMax < p.BurstMin {
		return fmt.Errorf("tracegen %s: burst factor %g-%g: want 1 <= min <= max", p.Name, p.BurstMin, p.BurstMax)
	}
	for _, r := range [...]struct {
		what     string
		min, max time.Duration
	}{{"burst hold", p.BurstHoldMin, p.BurstHoldMax}, {"burst ramp", p.RampMin, p.RampMax}} {
		if r.min < 0 || r.max < r.min || r.max > Day || r.min%p.Step != 0 || r.max%p.Step != 0 {
			return fmt.Errorf("tracegen %s: %s %v-%v: want 0 <= min <= max <= 24h in whole steps of %v", p.Name, r.what, r.min, r.max, p.Step)
		}
	}
	return nil
}

func validName(s string) bool {
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return s != "." && s != ".."
}

// History returns the parameters of the day before p's: the same day
// shape with the seed moved by HistorySeedOffset, named NAME.history. A
// forecaster is primed with it before it meets p's day.
func History(p Params) Params {
	p.Name += ".history"
	p.Seed += HistorySeedOffset
	p.Peaks = slices.Clone(p.Peaks)
	return p
}

// Smooth returns the diurnal curve of p, one value per step from midnight,
// with mean p.Mean and no noise or bursts. It panics if p is not valid.
func Smooth(p Params) []float64 {
	mustValid(p)
	n := p.Steps()
	theta := 2 * math.Pi * float64(p.PeakWidth) / float64(Day)
	kappa := 1 / (theta * theta) // von Mises concentration for that spread
	g := make([]float64, n)
	for i := range g {
		t := time.Duration(i) * p.Step
		for _, pk := range p.Peaks {
			d := 2 * math.Pi * float64(t-pk.At) / float64(Day)
			g[i] += float64(pk.Weight * math.Exp(kappa*(math.Cos(d)-1)))
		}
	}
	lo, hi := slices.Min(g), slices.Max(g)
	for i := range g {
		if hi-lo > 1e-12*hi {
			g[i] = 1 + (p.PeakToTrough-1)*(g[i]-lo)/(hi-lo)
		} else {
			g[i] = 1
		}
	}
	return scaleToMean(g, p.Mean)
}

// A Burst is one burst of a generated day.
type Burst struct {
	Start  time.Duration // when the rise begins, from midnight
	Ramp   time.Duration // the rise, and again the fall
	Hold   time.Duration // the time at full factor
	Factor float64       // the multiple of the rate at full factor
}

// Bursts returns the bursts of p's day in order of start. A burst that
// would run past midnight is cut there. It panics if p is not valid.
func Bursts(p Params) []Burst {
	mustValid(p)
	if p.BurstsPerDay == 0 {
		return nil
	}
	r := rand.New(rand.NewPCG(p.Seed, streamBursts))
	n := 0 // Poisson: the arrivals of a unit-rate process within BurstsPerDay
	for t := r.ExpFloat64(); t < p.BurstsPerDay; t += r.ExpFloat64() {
		n++
	}
	steps := func(lo, hi time.Duration) time.Duration {
		return p.Step * time.Duration(int64(lo/p.Step)+r.Int64N(int64((hi-lo)/p.Step)+1))
	}
	out := make([]Burst, n)
	for i := range out {
		out[i] = Burst{
			Start:  p.Step * time.Duration(r.IntN(p.Steps())),
			Factor: p.BurstMin + float64((p.BurstMax-p.BurstMin)*r.Float64()),
			Hold:   steps(p.BurstHoldMin, p.BurstHoldMax),
			Ramp:   steps(p.RampMin, p.RampMax),
		}
	}
	slices.SortStableFunc(out, func(a, b Burst) int { return cmp.Compare(a.Start, b.Start) })
	return out
}

// factorAt is b's multiple of the rate in the step that begins at t: the
// ramp rises in equal increments, so the first ramp step is already above 1
// and the last step of the fall is still above 1.
func (b Burst) factorAt(t, step time.Duration) float64 {
	k := (t - b.Start) / step
	r, h := b.Ramp/step, b.Hold/step
	var f float64
	switch {
	case k < 0 || k >= 2*r+h:
		return 1
	case k < r:
		f = float64(k+1) / float64(r+1)
	case k < r+h:
		f = 1
	default:
		f = float64(2*r+h-k) / float64(r+1)
	}
	return 1 + float64((b.Factor-1)*f)
}

// Generate returns p's day, one rate (requests per second) per step from
// midnight. The same p always gives the same day. It panics if p is not
// valid.
func Generate(p Params) []float64 {
	rates := Smooth(p)
	r := rand.New(rand.NewPCG(p.Seed, streamNoise))
	sigma, phi := p.NoiseSigma, p.NoiseAR1
	innov := sigma * math.Sqrt(1-phi*phi)
	x := sigma * r.NormFloat64()
	for i := range rates {
		if i > 0 {
			// float64(a*b) keeps the compiler from fusing a multiply and an
			// add into one FMA on some architectures (as elsewhere in this
			// file), so that every platform writes the same day.
			x = float64(phi*x) + float64(innov*r.NormFloat64())
		}
		rates[i] *= math.Exp(x - sigma*sigma/2)
	}
	bursts := Bursts(p)
	for i := range rates {
		t := time.Duration(i) * p.Step
		f := 1.0
		for _, b := range bursts {
			f = max(f, b.factorAt(t, p.Step))
		}
		rates[i] *= f
	}
	return scaleToMean(rates, p.Mean)
}

func scaleToMean(x []float64, mean float64) []float64 {
	var sum float64
	for _, v := range x {
		sum += v
	}
	k := mean * float64(len(x)) / sum
	for i := range x {
		x[i] *= k
	}
	return x
}

func mustValid(p Params) {
	if err := p.Validate(); err != nil {
		panic(err)
	}
}

// WriteCSV writes rates, p's day as Generate returns it, as a trace that
// workload.ParseRateTrace reads: # lines stating every parameter and the
// bursts drawn, a minute,rate (or second,rate) header, and one row per step
// numbered from 0 with the rate to 0.1 request per second.
func WriteCSV(w io.Writer, p Params, rates []float64) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if len(rates) != p.Steps() {
		return fmt.Errorf("tracegen %s: %d rates, want %d (a day of %v steps)", p.Name, len(rates), p.Steps(), p.Step)
	}
	for i, r := range rates {
		if math.IsNaN(r) || math.IsInf(r, 0) || r < 0 {
			return fmt.Errorf("tracegen %s: rate %g at step %d", p.Name, r, i)
		}
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# %s: a synthetic day of request rates (req/s), made by\n", p.Name)
	fmt.Fprintf(bw, "# github.com/symphony-serving/symphony/bench/workload/tracegen from:\n")
	fmt.Fprintf(bw, "# seed: %d\n", p.Seed)
	fmt.Fprintf(bw, "# step: %s\n", dur(p.Step))
	fmt.Fprintf(bw, "# mean: %g\n", p.Mean)
	fmt.Fprintf(bw, "# peak_to_trough: %g\n", p.PeakToTrough)
	fmt.Fprintf(bw, "# peaks: %s\n", peaksString(p.Peaks))
	fmt.Fprintf(bw, "# peak_width: %s\n", dur(p.PeakWidth))
	fmt.Fprintf(bw, "# noise_sigma: %g\n", p.NoiseSigma)
	fmt.Fprintf(bw, "# noise_ar1: %g\n", p.NoiseAR1)
	fmt.Fprintf(bw, "# bursts_per_day: %g\n", p.BurstsPerDay)
	if p.BurstsPerDay > 0 {
		fmt.Fprintf(bw, "# burst_factor: %g-%g\n", p.BurstMin, p.BurstMax)
		fmt.Fprintf(bw, "# burst_hold: %s-%s\n", dur(p.BurstHoldMin), dur(p.BurstHoldMax))
		fmt.Fprintf(bw, "# burst_ramp: %s-%s\n", dur(p.RampMin), dur(p.RampMax))
	}
	for _, b := range Bursts(p) {
		fmt.Fprintf(bw, "# burst: at %s, ramp %s, hold %s, factor %.2f\n", clock(b.Start), dur(b.Ramp), dur(b.Hold), b.Factor)
	}
	if p.Step == time.Minute {
		bw.WriteString("minute,rate\n")
	} else {
		bw.WriteString("second,rate\n")
	}
	var buf []byte
	for i, r := range rates {
		buf = strconv.AppendInt(buf[:0], int64(i), 10)
		buf = append(buf, ',')
		buf = strconv.AppendFloat(buf, r, 'f', 1, 64)
		buf = append(buf, '\n')
		bw.Write(buf)
	}
	return bw.Flush()
}

// peaksString writes peaks as "12:00 x0.8, 20:00 x1".
func peaksString(peaks []Peak) string {
	var b []byte
	for i, pk := range peaks {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = fmt.Appendf(b, "%s x%g", clock(pk.At), pk.Weight)
	}
	return string(b)
}

// clock writes a time of day as hh:mm, or hh:mm:ss when it has seconds.
func clock(t time.Duration) string {
	h, m, s := int(t/time.Hour), int(t%time.Hour/time.Minute), int(t%time.Minute/time.Second)
	if s != 0 {
		return fmt.Sprintf("%02d:%02d:%02d", h, m, s)
	}
	return fmt.Sprintf("%02d:%02d", h, m)
}

// dur writes d as time.Duration does, less zero minutes and seconds at the
// end: 2h30m, 5h, 90s.
func dur(d time.Duration) string {
	s := d.String()
	if t, ok := strings.CutSuffix(s, "m0s"); ok {
		s = t + "m"
	}
	if t, ok := strings.CutSuffix(s, "h0m"); ok {
		s = t + "h"
	}
	return s
}

package forecast

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Forecaster predicts a request rate series one step at a time.
type Forecaster interface {
	// Observe records the rate measured over the next step (oldest first,
	// one call per step). A negative rate counts as 0; NaN or ±Inf counts
	// as a repeat of the previous observation (0 before the first).
	Observe(rate float64)
	// Forecast returns the predicted rate for each of the next h steps
	// (len h, every value finite and >= 0; empty for h <= 0). Before any
	// observation it returns zeros. The caller owns the slice.
	Forecast(h int) []float64
	// Name names the method and its parameters, for reports, e.g.
	// "seasonal-naive(period=1440)".
	Name() string
}

// MaxPeriod is the longest season, in steps, a forecaster accepts: a week
// of 1-second steps, with room to spare. State grows linearly with it.
const MaxPeriod = 1_000_000

// maxRate caps observations: far above any real request rate, and far
// enough below math.MaxFloat64 that the sums and h-step trend
// extrapolations of Holt-Winters stay finite.
const maxRate = 1e100

// sanitize applies Observe's rule for bad rates, given the previous
// (already sanitized) observation.
func sanitize(rate, prev float64) float64 {
	switch {
	case math.IsNaN(rate) || math.IsInf(rate, 0):
		return prev
	case rate < 0:
		return 0
	case rate > maxRate:
		return maxRate
	}
	return rate
}

// clean makes a forecast value finite and non-negative.
func clean(v float64) float64 {
	switch {
	case !(v > 0): // negative, zero or NaN
		return 0
	case v > math.MaxFloat64:
		return math.MaxFloat64
	}
	return v
}

func zeros(h int) []float64 { return make([]float64, max(h, 0)) }

// MaxOver returns the largest forecast in steps [from, to) of f, 0 if the
// range is empty. from and to are clamped to [0, len(f)]; NaNs are
// skipped.
func MaxOver(f []float64, from, to int) float64 {
	from = min(max(from, 0), len(f))
	to = min(max(to, from), len(f))
	m := math.Inf(-1)
	for _, v := range f[from:to] {
		if v > m {
			m = v
		}
	}
	if math.IsInf(m, -1) {
		return 0
	}
	return m
}

// last is persistence: every step ahead is the last observation.
type last struct{ v float64 }

// NewLast returns the persistence forecaster: it repeats the last
// observation. It is the baseline any other method must beat, and what a
// reactive autoscaler implicitly assumes.
func NewLast() Forecaster { return &last{} }

func (l *last) Observe(rate float64) { l.v = sanitize(rate, l.v) }
func (l *last) Name() string         { return "last" }

func (l *last) Forecast(h int) []float64 {
	f := zeros(h)
	for i := range f {
		f[i] = l.v
	}
	return f
}

// seasonalNaive predicts each step as the observation one season before
// it. buf is a ring of the last period observations: observation t sits at
// buf[t%period].
type seasonalNaive struct {
	period int
	n      int // observations so far
	buf    []float64
	last   float64
}

// NewSeasonalNaive returns the seasonal-naive forecaster: step k ahead is
// the observation one season (period steps) before that step, or whole
// seasons before it when k > period. Until a whole season has been seen,
// every step is the last observation. period must be in 1..MaxPeriod.
func NewSeasonalNaive(period int) (Forecaster, error) {
	if err := checkPeriod(period); err != nil {
		return nil, err
	}
	// buf grows by append up to period, so a long period costs nothing
	// until it is observed.
	return &seasonalNaive{period: period}, nil
}

func (s *seasonalNaive) Name() string { return fmt.Sprintf("seasonal-naive(period=%d)", s.period) }

func (s *seasonalNaive) Observe(rate float64) {
	s.last = sanitize(rate, s.last)
	if len(s.buf) < s.period {
		s.buf = append(s.buf, s.last)
	} else {
		s.buf[s.n%s.period] = s.last
	}
	s.n++
}

func (s *seasonalNaive) Forecast(h int) []float64 {
	f := zeros(h)
	for k := range f {
		if s.n < s.period {
			f[k] = s.last
			continue
		}
		// Step k+1 ahead is time s.n+k; the latest observation in the
		// same phase is s.n+k minus one or more whole seasons, and its
		// slot in the ring is the phase itself.
		f[k] = s.buf[(s.n+k)%s.period]
	}
	return f
}

func checkPeriod(period int) error {
	if period < 1 || period > MaxPeriod {
		return fmt.Errorf("forecast: period %d out of range 1..%d", period, MaxPeriod)
	}
	return nil
}

// specSyntax is the grammar Parse accepts, for its error messages.
const specSyntax = `"last", "seasonal-naive:PERIOD" or "holt-winters:PERIOD[:ALPHA:BETA:GAMMA]"`

// Parse builds a forecaster from a spec, as given on a command line:
//
//	last
//	seasonal-naive:PERIOD
//	holt-winters:PERIOD                    (DefaultHoltWinters(PERIOD))
//	holt-winters:PERIOD:ALPHA:BETA:GAMMA
//
// PERIOD is in steps. An error names the spec and the part that is wrong.
func Parse(spec string) (Forecaster, error) {
	parts := strings.Split(spec, ":")
	bad := func(format string, args ...any) error {
		return fmt.Errorf("forecast: spec %q: %s", spec, fmt.Sprintf(format, args...))
	}
	method, args := parts[0], parts[1:]
	switch method {
	case "last":
		if len(args) != 0 {
			return nil, bad("last takes no parameters, got %d", len(args))
		}
		return NewLast(), nil
	case "seasonal-naive":
		if len(args) != 1 {
			return nil, bad("want seasonal-naive:PERIOD, got %d parameters", len(args))
		}
		p, err := parsePeriod(args[0])
		if err != nil {
			return nil, bad("%v", err)
		}
		return NewSeasonalNaive(p)
	case "holt-winters":
		if len(args) != 1 && len(args) != 4 {
			return nil, bad("want holt-winters:PERIOD or holt-winters:PERIOD:ALPHA:BETA:GAMMA, got %d parameters", len(args))
		}
		p, err := parsePeriod(args[0])
		if err != nil {
			return nil, bad("%v", err)
		}
		c := DefaultHoltWinters(p)
		if len(args) == 4 {
			for i, dst := range []*float64{&c.Alpha, &c.Beta, &c.Gamma} {
				name := [...]string{"alpha", "beta", "gamma"}[i]
				v, err := strconv.ParseFloat(args[1+i], 64)
				if err != nil {
					return nil, bad("%s %q is not a number", name, args[1+i])
				}
				if !(v > 0 && v <= 1) {
					return nil, bad("%s %s out of range (0, 1]", name, args[1+i])
				}
				*dst = v
			}
		}
		return NewHoltWinters(c)
	}
	return nil, bad("unknown method %q, want %s", method, specSyntax)
}

func parsePeriod(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("period %q is not an integer", s)
	}
	if err := checkPeriod(p); err != nil {
		return 0, fmt.Errorf("period %d out of range 1..%d", p, MaxPeriod)
	}
	return p, nil
}

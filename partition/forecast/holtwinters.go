package forecast

import (
	"fmt"
	"strconv"
)

// HoltWintersConfig configures additive Holt-Winters (triple exponential
// smoothing): a level, a linear trend and a seasonal offset per phase of
// the season, each smoothed with its own factor.
type HoltWintersConfig struct {
	// Period is the season length in steps, 1..MaxPeriod.
	Period int
	// Alpha smooths the level, in (0, 1]: the weight of the newest
	// deseasonalised observation.
	Alpha float64
	// Beta smooths the trend, in (0, 1].
	Beta float64
	// Gamma smooths the seasonal offsets, in (0, 1]. Each offset is
	// updated once per season, so its memory is counted in seasons.
	Gamma float64
}

// DefaultHoltWinters returns the configuration Parse uses for
// "holt-winters:PERIOD":
//
//   - Alpha 0.5: the level moves halfway to each new deseasonalised rate,
//     so a step change in load is mostly absorbed within 2-3 steps. An
//     autoscaler pays for lagging a rise, so the level should react fast.
//   - Beta 0.01: the trend is extrapolated over the whole horizon (MArk
//     looks 60 steps ahead), so noise in it is multiplied by h; a trend
//     averaged over ~100 steps keeps long forecasts from swinging on
//     one noisy step, while a drift that lasts is still learned.
//   - Gamma 0.3: the seasonal pattern keeps about half its weight after two
//     seasons (0.7² ≈ 0.5), so a shifted daily pattern is learned within a
//     few seasons while one odd season does not rewrite it.
func DefaultHoltWinters(period int) HoltWintersConfig {
	return HoltWintersConfig{Period: period, Alpha: 0.5, Beta: 0.01, Gamma: 0.3}
}

// Validate reports the first field out of range.
func (c HoltWintersConfig) Validate() error {
	if err := checkPeriod(c.Period); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"alpha", c.Alpha}, {"beta", c.Beta}, {"gamma", c.Gamma}} {
		if !(f.v > 0 && f.v <= 1) {
			return fmt.Errorf("forecast: holt-winters %s %v out of range (0, 1]", f.name, f.v)
		}
	}
	return nil
}

// holtWinters is additive Holt-Winters. Until two seasons are seen it runs
// Holt's linear method (level and trend only) and buffers the
// observations; at the end of the second season it initialises the
// seasonal model from the buffer and drops it.
type holtWinters struct {
	c    HoltWintersConfig
	n    int // observations so far
	last float64

	level, trend float64
	// first holds the first two seasons until they are complete; nil
	// after.
	first []float64
	// season[i] is the offset of phase i: observation t has phase
	// t%Period. nil until two seasons are seen.
	season []float64
}

// NewHoltWinters returns an additive Holt-Winters forecaster.
//
// With observation y at phase i, the update is
//
//	level' = Alpha·(y − season[i]) + (1−Alpha)·(level + trend)
//	trend' = Beta·(level' − level) + (1−Beta)·trend
//	season[i]' = Gamma·(y − level') + (1−Gamma)·season[i]
//
// and step k ahead is level + k·trend + season[phase of that step],
// clamped at 0.
//
// Initialisation is the classical one from the first two seasons s1 and
// s2 (trend = mean over i of (s2[i] − s1[i]) / Period, level from mean(s1),
// season[i] from s1[i] − mean(s1)), with the trend taken into account:
// mean(s1) is the level at the middle of season 1, so with m = (Period−1)/2
//
//	level     = mean(s1) + m·trend              (the end of season 1)
//	season[i] = s1[i] − (mean(s1) + (i−m)·trend)
//
// and season 2 is then smoothed in with the update above. Without the
// correction the seasonal offsets start tilted by the trend, an error
// that a small Beta takes many seasons to forget; with it, a linear trend
// plus a fixed seasonal pattern is forecast exactly from the end of
// season 2.
//
// Before two seasons are complete it falls back to Holt's linear method
// on what has been seen: the first observation sets the level (trend 0),
// the second sets level = y₂ and trend = y₂ − y₁, and later ones update
// level and trend as above with no seasonal term.
func NewHoltWinters(c HoltWintersConfig) (Forecaster, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &holtWinters{c: c}, nil
}

func (hw *holtWinters) Name() string {
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	return fmt.Sprintf("holt-winters(period=%d,alpha=%s,beta=%s,gamma=%s)",
		hw.c.Period, g(hw.c.Alpha), g(hw.c.Beta), g(hw.c.Gamma))
}

func (hw *holtWinters) Observe(rate float64) {
	y := sanitize(rate, hw.last)
	hw.last = y
	t := hw.n // this observation's index
	hw.n++
	if hw.season != nil {
		hw.update(t%hw.c.Period, y)
		return
	}
	// Holt's linear method on the observations so far.
	switch t {
	case 0:
		hw.level, hw.trend = y, 0
	case 1:
		hw.level, hw.trend = y, y-hw.level
	default:
		a, b := hw.c.Alpha, hw.c.Beta
		level := a*y + (1-a)*(hw.level+hw.trend)
		hw.trend = b*(level-hw.level) + (1-b)*hw.trend
		hw.level = level
	}
	hw.first = append(hw.first, y)
	if len(hw.first) == 2*hw.c.Period {
		hw.initSeasonal()
	}
}

// initSeasonal switches from Holt's linear method to Holt-Winters once
// hw.first holds two whole seasons.
func (hw *holtWinters) initSeasonal() {
	p := hw.c.Period
	s1, s2 := hw.first[:p], hw.first[p:]
	var sum, diff float64
	for i := range p {
		sum += s1[i]
		diff += (s2[i] - s1[i]) / float64(p)
	}
	mean := sum / float64(p)
	hw.trend = diff / float64(p)
	// mean is the level at the middle of season 1, (p-1)/2 steps before
	// its end; the trend carries it to the end, where smoothing goes on.
	mid := float64(p-1) / 2
	hw.level = mean + mid*hw.trend
	hw.season = make([]float64, p)
	for i := range p {
		hw.season[i] = s1[i] - (mean + (float64(i)-mid)*hw.trend)
	}
	for i, y := range s2 {
		hw.update(i, y)
	}
	hw.first = nil
}

func (hw *holtWinters) update(phase int, y float64) {
	a, b, g := hw.c.Alpha, hw.c.Beta, hw.c.Gamma
	level := a*(y-hw.season[phase]) + (1-a)*(hw.level+hw.trend)
	hw.trend = b*(level-hw.level) + (1-b)*hw.trend
	hw.level = level
	hw.season[phase] = g*(y-level) + (1-g)*hw.season[phase]
}

func (hw *holtWinters) Forecast(h int) []float64 {
	f := zeros(h)
	if hw.n == 0 {
		return f
	}
	for k := range f {
		v := hw.level + float64(k+1)*hw.trend
		if hw.season != nil {
			// Step k+1 ahead is observation hw.n+k.
			v += hw.season[(hw.n+k)%hw.c.Period]
		}
		f[k] = clean(v)
	}
	return f
}

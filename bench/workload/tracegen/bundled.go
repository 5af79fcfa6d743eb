package tracegen

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"time"
)

// Command is how to rewrite the bundled files, run from the repository root.
const Command = "go run ./bench/workload/tracegen/cmd/tracegen -out testdata/traces"

// Bundled returns the parameters of the traces shipped in testdata/traces,
// each of which also ships its History day. The bursty seed was picked
// among the first few so that both its days draw close to the expected
// number of bursts (7 and 7 of 8); the others are the first tried.
func Bundled() []Params {
	day := func(name string, seed uint64) Params {
		return Params{
			Name: name, Seed: seed, Step: time.Minute, Mean: 300,
			RampMin: time.Minute, RampMax: 2 * time.Minute,
		}
	}
	// A smooth day with one afternoon peak and two small bursts.
	diurnal := day("diurnal", 1)
	diurnal.PeakToTrough = 4
	diurnal.Peaks = []Peak{{At: 14 * time.Hour, Weight: 1}}
	diurnal.PeakWidth = 5 * time.Hour
	diurnal.NoiseSigma, diurnal.NoiseAR1 = 0.05, 0.95
	diurnal.BurstsPerDay, diurnal.BurstMin, diurnal.BurstMax = 2, 1.2, 1.5
	diurnal.BurstHoldMin, diurnal.BurstHoldMax = 5*time.Minute, 15*time.Minute

	// A flatter day with rougher noise and frequent large bursts.
	bursty := day("bursty", 10)
	bursty.PeakToTrough = 3
	bursty.Peaks = []Peak{{At: 16 * time.Hour, Weight: 1}}
	bursty.PeakWidth = 5 * time.Hour
	bursty.NoiseSigma, bursty.NoiseAR1 = 0.1, 0.8
	bursty.BurstsPerDay, bursty.BurstMin, bursty.BurstMax = 8, 1.5, 3
	bursty.BurstHoldMin, bursty.BurstHoldMax = 3*time.Minute, 15*time.Minute

	// Midday and evening peaks with a dip between, as social sites show.
	twin := day("twin-peak", 3)
	twin.PeakToTrough = 4
	twin.Peaks = []Peak{{At: 12 * time.Hour, Weight: 0.8}, {At: 20 * time.Hour, Weight: 1}}
	twin.PeakWidth = 150 * time.Minute
	twin.NoiseSigma, twin.NoiseAR1 = 0.07, 0.9
	twin.BurstsPerDay, twin.BurstMin, twin.BurstMax = 4, 1.3, 2
	twin.BurstHoldMin, twin.BurstHoldMax = 3*time.Minute, 15*time.Minute

	return []Params{diurnal, bursty, twin}
}

// A File is one file of the bundled set, by its name in testdata/traces.
type File struct {
	Name string
	Data []byte
}

// Files renders the bundled set: for each of Bundled, NAME.csv and its
// History day NAME.history.csv, then README.md describing them all.
func Files() ([]File, error) {
	var (
		files []File
		days  []Params
		sums  []Summary
	)
	for _, p := range Bundled() {
		for _, q := range []Params{p, History(p)} {
			rates := Generate(q)
			var b bytes.Buffer
			if err := WriteCSV(&b, q, rates); err != nil {
				return nil, err
			}
			files = append(files, File{Name: q.Name + ".csv", Data: b.Bytes()})
			days = append(days, q)
			sums = append(sums, Summarize(rounded(rates), q.Step))
		}
	}
	return append(files, File{Name: "README.md", Data: readme(days, sums)}), nil
}

// rounded is rates as WriteCSV writes them.
func rounded(rates []float64) []float64 {
	out := make([]float64, len(rates))
	for i, r := range rates {
		out[i] = math.Round(r*10) / 10
	}
	return out
}

// Summary describes a day of rates.
type Summary struct {
	Mean, Min, Max float64 // over all steps
	// Peak and Trough are the highest and lowest hourly medians: the
	// diurnal shape's extremes, little moved by noise or a burst.
	Peak, Trough float64
}

// Summarize measures rates, one per step.
func Summarize(rates []float64, step time.Duration) Summary {
	if len(rates) == 0 {
		return Summary{}
	}
	s := Summary{Min: math.Inf(1), Max: math.Inf(-1), Trough: math.Inf(1), Peak: math.Inf(-1)}
	for _, r := range rates {
		s.Mean += r
		s.Min, s.Max = min(s.Min, r), max(s.Max, r)
	}
	s.Mean /= float64(len(rates))
	perHour := max(1, int(time.Hour/step))
	for h := 0; h < len(rates); h += perHour {
		m := median(rates[h:min(h+perHour, len(rates))])
		s.Trough, s.Peak = min(s.Trough, m), max(s.Peak, m)
	}
	return s
}

func median(x []float64) float64 {
	y := slices.Clone(x)
	slices.Sort(y)
	if n := len(y); n%2 == 1 {
		return y[n/2]
	}
	return (y[len(y)/2-1] + y[len(y)/2]) / 2
}

func readme(days []Params, sums []Summary) []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p(`# Bundled request-rate traces

Synthetic day-long traces of requests per second, for replay with a
workload's `+"`rate_trace`"+` (see docs/workload-format.md, "Bundled traces").
They are generated, not recorded: bench/workload/tracegen makes each from
the parameters below and a seed, and writes this README too. Do not edit
these files; change Bundled in bench/workload/tracegen/bundled.go and run,
from the repository root,

    %s

TestBundledFilesMatch fails while the files here differ from what that
command writes.

Each file is one day, 1440 rows of `+"`minute,rate`"+` from minute 0 (00:00);
its `+"`#`"+` lines state its parameters and the bursts drawn. A replay longer
than a day holds the last minute's rate. NAME.history.csv is the day before
NAME.csv (the same parameters, seed + %d): prime a forecaster with it.

A day is made in four steps (the package comment has the details): a
diurnal curve with its peaks at the stated times, spanning peak/trough;
multiplicative lognormal noise whose logarithm is an AR(1) series (sigma is
its standard deviation, ar1 its step-to-step correlation); a Poisson number
of bursts, each rising linearly over its ramp, holding a factor, then
falling; and a scaling that sets the day's mean.

## Parameters

| trace | seed | mean req/s | peak/trough | peaks | peak width | noise sigma | ar1 | bursts/day | factor | hold | ramp |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
`, Command, HistorySeedOffset)
	for _, d := range days {
		p("| %s | %d | %g | %g | %s | %s | %g | %g | %g | %g-%g | %s-%s | %s-%s |\n",
			d.Name, d.Seed, d.Mean, d.PeakToTrough, peaksString(d.Peaks), dur(d.PeakWidth),
			d.NoiseSigma, d.NoiseAR1, d.BurstsPerDay, d.BurstMin, d.BurstMax,
			dur(d.BurstHoldMin), dur(d.BurstHoldMax), dur(d.RampMin), dur(d.RampMax))
	}
	p(`
## Measured

From the files as written. Peak and trough are the highest and lowest
hourly medians, which noise and single bursts barely move; min and max are
single minutes.

| file | mean | min | max | peak | trough | peak/trough | bursts |
| --- | --- | --- | --- | --- | --- | --- | --- |
`)
	for i, d := range days {
		s := sums[i]
		p("| %s.csv | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %d |\n",
			d.Name, s.Mean, s.Min, s.Max, s.Peak, s.Trough, s.Peak/s.Trough, len(Bursts(d)))
	}
	return b.Bytes()
}

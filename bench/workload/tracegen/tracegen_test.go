package tracegen

import (
	"bytes"
	"cmp"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/bench/workload"
)

// tracesDir is testdata/traces from this package.
const tracesDir = "../../../testdata/traces"

func TestGenerateDeterministic(t *testing.T) {
	for _, p := range Bundled() {
		a, b := Generate(p), Generate(p)
		if !slices.Equal(a, b) {
			t.Errorf("%s: two runs differ", p.Name)
		}
		q := p
		q.Seed++
		if c := Generate(q); slices.Equal(a, c) {
			t.Errorf("%s: seeds %d and %d give the same day", p.Name, p.Seed, q.Seed)
		}
		if h := Generate(History(p)); slices.Equal(a, h) {
			t.Errorf("%s: history is the same day", p.Name)
		}
	}
}

func TestGenerateNeverNegative(t *testing.T) {
	for _, p := range Bundled() {
		// Rougher than any bundled day: wide noise, many bursts.
		p.NoiseSigma, p.NoiseAR1 = 2, 0.99
		p.BurstsPerDay, p.BurstMax = 200, 50
		for seed := range uint64(20) {
			p.Seed = seed
			rates := Generate(p)
			if len(rates) != 1440 {
				t.Fatalf("%s: %d steps", p.Name, len(rates))
			}
			var sum float64
			for i, r := range rates {
				if !(r > 0) || math.IsInf(r, 0) {
					t.Fatalf("%s seed %d: step %d rate %g", p.Name, seed, i, r)
				}
				sum += r
			}
			if m := sum / 1440; math.Abs(m-p.Mean) > 1e-9*p.Mean {
				t.Errorf("%s seed %d: mean %g, want %g", p.Name, seed, m, p.Mean)
			}
		}
	}
}

func TestSmooth(t *testing.T) {
	for _, p := range Bundled() {
		s := Smooth(p)
		lo, hi := slices.Min(s), slices.Max(s)
		if math.Abs(hi/lo-p.PeakToTrough) > 1e-9 {
			t.Errorf("%s: smooth peak/trough %g, want %g", p.Name, hi/lo, p.PeakToTrough)
		}
		// The highest peak is the curve's maximum.
		top := slices.MaxFunc(p.Peaks, func(a, b Peak) int { return cmp.Compare(a.Weight, b.Weight) })
		if at := time.Duration(slices.Index(s, hi)) * p.Step; (at - top.At).Abs() > 30*time.Minute {
			t.Errorf("%s: smooth maximum at %v, want near %v", p.Name, at, top.At)
		}
	}
	// Twin peaks have a dip between them.
	p := Bundled()[2]
	s := Smooth(p)
	if noon, evening, between := s[12*60], s[20*60], s[16*60]; !(between < noon && between < evening) {
		t.Errorf("twin-peak: 12:00 %g, 16:00 %g, 20:00 %g; want a dip at 16:00", noon, between, evening)
	}
}

func TestBursts(t *testing.T) {
	p := Bundled()[1]
	total := 0
	const seeds = 400
	for seed := range uint64(seeds) {
		p.Seed = seed
		bs := Bursts(p)
		total += len(bs)
		for i, b := range bs {
			if b.Factor < p.BurstMin || b.Factor > p.BurstMax || b.Hold < p.BurstHoldMin || b.Hold > p.BurstHoldMax ||
				b.Ramp < p.RampMin || b.Ramp > p.RampMax || b.Start < 0 || b.Start >= Day || b.Start%p.Step != 0 {
				t.Fatalf("seed %d: burst %+v out of its ranges", seed, b)
			}
			if i > 0 && b.Start < bs[i-1].Start {
				t.Fatalf("seed %d: bursts out of order", seed)
			}
		}
	}
	// Poisson with mean 8: the mean over 400 days has standard deviation
	// sqrt(8/400) ≈ 0.14.
	if m := float64(total) / seeds; math.Abs(m-p.BurstsPerDay) > 0.6 {
		t.Errorf("mean bursts per day %g, want about %g", m, p.BurstsPerDay)
	}
	p.BurstsPerDay = 0
	if bs := Bursts(p); bs != nil {
		t.Errorf("no bursts expected, got %v", bs)
	}

	// One burst's shape, in steps: ramp 2, hold 3, factor 4.
	b := Burst{Start: 10 * time.Minute, Ramp: 2 * time.Minute, Hold: 3 * time.Minute, Factor: 4}
	var got []float64
	for k := 9; k <= 17; k++ {
		got = append(got, b.factorAt(time.Duration(k)*time.Minute, time.Minute))
	}
	if want := []float64{1, 2, 3, 4, 4, 4, 3, 2, 1}; !slices.Equal(got, want) {
		t.Errorf("burst factors %v, want %v", got, want)
	}
}

func TestValidate(t *testing.T) {
	good := Bundled()[0]
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Params)
		want string
	}{
		{"no name", func(p *Params) { p.Name = "" }, "no name"},
		{"path name", func(p *Params) { p.Name = "../x" }, "name"},
		{"step", func(p *Params) { p.Step = 5 * time.Minute }, "step"},
		{"mean", func(p *Params) { p.Mean = 0 }, "mean"},
		{"ratio", func(p *Params) { p.PeakToTrough = 0.5 }, "peak-to-trough"},
		{"no peaks", func(p *Params) { p.Peaks = nil }, "no peaks"},
		{"peak time", func(p *Params) { p.Peaks = []Peak{{At: 24 * time.Hour, Weight: 1}} }, "peak 0"},
		{"peak weight", func(p *Params) { p.Peaks = []Peak{{At: time.Hour}} }, "peak 0"},
		{"width", func(p *Params) { p.PeakWidth = 13 * time.Hour }, "peak width"},
		{"sigma", func(p *Params) { p.NoiseSigma = math.NaN() }, "noise sigma"},
		{"ar1", func(p *Params) { p.NoiseAR1 = 1 }, "AR(1)"},
		{"bursts", func(p *Params) { p.BurstsPerDay = -1 }, "bursts per day"},
		{"factor", func(p *Params) { p.BurstMin = 0.5 }, "burst factor"},
		{"hold order", func(p *Params) { p.BurstHoldMax = time.Minute }, "burst hold"},
		{"ramp step", func(p *Params) { p.RampMax = 90 * time.Second }, "burst ramp"},
	} {
		p := good
		tc.edit(&p)
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
	// Burst ranges matter only with bursts.
	p := good
	p.BurstsPerDay, p.BurstMin, p.BurstMax = 0, 0, 0
	if err := p.Validate(); err != nil {
		t.Errorf("no bursts: %v", err)
	}
}

func TestWriteCSVParses(t *testing.T) {
	for _, step := range []time.Duration{time.Minute, time.Second} {
		p := Bundled()[1]
		p.Step = step
		rates := Generate(p)
		var b bytes.Buffer
		if err := WriteCSV(&b, p, rates); err != nil {
			t.Fatal(err)
		}
		ph, err := workload.ParseRateTrace(&b, p.Name)
		if err != nil {
			t.Fatalf("step %v: %v", step, err)
		}
		if len(ph) != int(Day/step) {
			t.Fatalf("step %v: %d phases", step, len(ph))
		}
		for i, x := range ph {
			if x.Duration != step || math.Abs(x.Rate-rates[i]) > 0.05+1e-9 {
				t.Fatalf("step %v: phase %d = %+v, want %v at %g", step, i, x, step, rates[i])
			}
		}
	}
	p := Bundled()[0]
	if err := WriteCSV(&bytes.Buffer{}, p, make([]float64, 10)); err == nil {
		t.Error("10 rates for a day: no error")
	}
	bad := Generate(p)
	bad[5] = -1
	if err := WriteCSV(&bytes.Buffer{}, p, bad); err == nil {
		t.Error("negative rate: no error")
	}
}

// TestBundledFilesMatch keeps testdata/traces what the generator writes:
// if it fails, run the Command and review the diff.
func TestBundledFilesMatch(t *testing.T) {
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
		got, err := os.ReadFile(filepath.Join(tracesDir, f.Name))
		if err != nil {
			t.Errorf("%v (run %s)", err, Command)
			continue
		}
		if !bytes.Equal(got, f.Data) {
			t.Errorf("testdata/traces/%s differs from what the generator writes; run %s", f.Name, Command)
		}
	}
	entries, err := os.ReadDir(tracesDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !slices.Contains(names, e.Name()) {
			t.Errorf("testdata/traces/%s is not generated; remove it or add it to Bundled", e.Name())
		}
	}
}

// TestBundledTraces checks the committed files, as workload replay reads
// them, against their stated parameters.
func TestBundledTraces(t *testing.T) {
	for _, b := range Bundled() {
		for _, p := range []Params{b, History(b)} {
			f, err := os.Open(filepath.Join(tracesDir, p.Name+".csv"))
			if err != nil {
				t.Fatal(err)
			}
			ph, err := workload.ParseRateTrace(f, f.Name())
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			if len(ph) != 1440 {
				t.Fatalf("%s: %d phases, want 1440", p.Name, len(ph))
			}
			rates := make([]float64, len(ph))
			for i, x := range ph {
				if x.Duration != time.Minute || !(x.Rate > 0) {
					t.Fatalf("%s: phase %d = %+v", p.Name, i, x)
				}
				rates[i] = x.Rate
			}
			s := Summarize(rates, time.Minute)
			if r := s.Peak / s.Trough; math.Abs(r-p.PeakToTrough) > 0.3*p.PeakToTrough {
				t.Errorf("%s: hourly-median peak/trough %.2f, want %g ± 30%%", p.Name, r, p.PeakToTrough)
			}
			if math.Abs(s.Mean-p.Mean) > 0.1*p.Mean {
				t.Errorf("%s: mean %.1f, want %g ± 10%%", p.Name, s.Mean, p.Mean)
			}
			if b.Name != "bursty" {
				continue
			}
			smooth, n := Smooth(p), 0
			for i, r := range rates {
				if r > 1.5*smooth[i] {
					n++
				}
			}
			if n < 5 {
				t.Errorf("%s: %d minutes above 1.5x the smooth curve, want at least 5", p.Name, n)
			}
		}
	}
}

// TestBundledTraceReplays loads a bundled trace the way a workload file
// next to it would, with a relative rate_trace.
func TestBundledTraceReplays(t *testing.T) {
	const yaml = "duration: 24h\ncluster: {gpus: 20}\nmodels:\n" +
		"  - {name: m, profile: {alpha: 5ms, beta: 20ms, max_batch: 32}, slo: 200ms, rate_trace: bursty.csv}\n"
	w, err := workload.Parse([]byte(yaml), filepath.Join(tracesDir, "replay.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := w.Models[0]
	if len(m.Rates) != 1440 || m.Rates[0].Duration != time.Minute {
		t.Fatalf("%d phases, first %+v", len(m.Rates), m.Rates[0])
	}
	if r := m.MeanRate(0, Day); math.Abs(r-300) > 0.1 {
		t.Errorf("mean rate over the day %g, want 300", r)
	}
}

package workload

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/scheduler/serving"
)

const examplesDir = "../../testdata/workloads"

func mustParse(t *testing.T, src string) *Workload {
	t.Helper()
	w, err := Parse([]byte(src), "test.yaml")
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, src)
	}
	return w
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func modelNames(w *Workload) []string {
	out := make([]string, len(w.Models))
	for i, m := range w.Models {
		out[i] = m.Name
	}
	return out
}

func TestExamplesParse(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(examplesDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 7 {
		t.Fatalf("found %d example workloads in %s, want at least 7", len(files), examplesDir)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			w, err := ParseFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Validate(); err != nil {
				t.Fatal(err)
			}
			if w.Source != f {
				t.Errorf("Source = %q, want %q", w.Source, f)
			}
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(data), "#") {
				t.Errorf("%s has no header comment saying what it reproduces", f)
			}
		})
	}
}

func TestExampleContents(t *testing.T) {
	parse := func(name string) *Workload {
		t.Helper()
		w, err := ParseFile(filepath.Join(examplesDir, name))
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	paperNet := scheduler.Delays{Ctrl: 100 * time.Microsecond, DataPerRequest: 20 * time.Microsecond, Result: 100 * time.Microsecond}

	w := parse("table4-resnet50.yaml")
	m := w.Models[0]
	if w.Seed != 42 || w.Duration != 30*time.Second || w.Warmup != 5*time.Second || w.Cluster.GPUs != 8 ||
		w.Network != paperNet || w.Policy != scheduler.PolicySymphony || len(w.Models) != 1 ||
		m.Name != "ResNet50" || m.Profile.Alpha() != 1053*time.Microsecond || m.Profile.Beta() != 5072*time.Microsecond ||
		m.SLO != 25*time.Millisecond || len(m.Rates) != 1 || m.Rates[0].Rate != 5000 || m.Arrival.Kind != ArrivalPoisson {
		t.Errorf("table4-resnet50: %+v", w)
	}

	w = parse("table4-inceptionresnetv2.yaml")
	m = w.Models[0]
	if m.Name != "InceptionResNetV2" || m.Profile.Alpha() != 5090*time.Microsecond || m.Profile.Beta() != 18368*time.Microsecond ||
		m.SLO != 70*time.Millisecond || m.Rates[0].Rate != 900 {
		t.Errorf("table4-inceptionresnetv2: %+v", m)
	}

	w = parse("mixed-1080ti.yaml")
	zoo, _ := profile.Zoo("1080ti")
	if len(w.Models) != len(zoo) || w.Cluster.GPUs != 64 || !near(w.TotalRate(), 10000) {
		t.Errorf("mixed-1080ti: %d models, %d GPUs, total rate %g", len(w.Models), w.Cluster.GPUs, w.TotalRate())
	}
	for i, m := range w.Models {
		if m.Name != zoo[i].Name || m.SLO != zoo[i].SLO || !near(m.Rates[0].Rate, 10000.0/35) {
			t.Errorf("mixed-1080ti model %d: %s slo %v rate %g", i, m.Name, m.SLO, m.Rates[0].Rate)
		}
	}

	w = parse("flat-top.yaml")
	var want []string
	for k := range 10 {
		want = append(want, "ResNet50-"+string(rune('0'+k)))
	}
	if got := modelNames(w); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("flat-top names %v, want %v", got, want)
	}
	for _, m := range w.Models {
		if m.SLO != 100*time.Millisecond || m.Rates[0].Rate != 1000 || m.Profile.Alpha() != 2050*time.Microsecond {
			t.Errorf("flat-top model %s: slo %v rate %g alpha %v", m.Name, m.SLO, m.Rates[0].Rate, m.Profile.Alpha())
		}
	}

	w = parse("rate-schedule.yaml")
	if len(w.Models) != 12 || w.Warmup != 0 || w.AutoscaleWindow != time.Second || w.Cluster.GPUs != 16 {
		t.Errorf("rate-schedule: %+v", w)
	}
	for _, m := range w.Models {
		if m.Arrival != (Arrival{Kind: ArrivalGamma, Shape: 0.5}) || len(m.Rates) != 3 {
			t.Errorf("rate-schedule model %s: arrival %v, %d phases", m.Name, m.Arrival, len(m.Rates))
		}
	}
	for _, tc := range []struct {
		at   time.Duration
		want float64
	}{{5 * time.Second, 4000}, {15 * time.Second, 12000}, {25 * time.Second, 6000}, {100 * time.Second, 6000}} {
		var sum float64
		for i := range w.Models {
			sum += w.Models[i].RateAt(tc.at)
		}
		if !near(sum, tc.want) {
			t.Errorf("rate-schedule total rate at %v = %g, want %g", tc.at, sum, tc.want)
		}
	}

	w = parse("demo.yaml")
	if got := strings.Join(modelNames(w), ","); got != "ResNet50,DenseNet121,InceptionV3,MobileNet,EfficientNetB0,VGG16" ||
		w.Cluster.GPUs != 8 || w.Duration != 10*time.Second || w.Warmup != 2*time.Second || !near(w.TotalRate(), 1500) {
		t.Errorf("demo: models %s, %+v", got, w)
	}
	if w.Models[0].StaticMemory != 170<<20 || w.Models[0].DynamicMemory != 2798<<20 {
		t.Errorf("demo: ResNet50 memory %d/%d, want the zoo's", w.Models[0].StaticMemory, w.Models[0].DynamicMemory)
	}

	w = parse("trace.yaml")
	m = w.Models[0]
	if len(m.Rates) != 20 || w.Cluster.GPUs != 4 {
		t.Fatalf("trace: %d phases, %d GPUs", len(m.Rates), w.Cluster.GPUs)
	}
	for _, ph := range m.Rates {
		if ph.Duration != time.Second || ph.Rate < 200 || ph.Rate > 800 {
			t.Errorf("trace phase %+v", ph)
		}
	}
	if m.RateAt(time.Hour) != m.Rates[19].Rate {
		t.Errorf("trace: rate after the end %g, want the last row's %g", m.RateAt(time.Hour), m.Rates[19].Rate)
	}
}

func TestDefaults(t *testing.T) {
	w := mustParse(t, `
cluster: {gpus: 2}
models:
  - {name: m, profile: {alpha: 1ms, beta: 2ms}, slo: 10ms, rate: 100}
`)
	if w.Seed != 1 || w.Duration != 30*time.Second || w.Warmup != 5*time.Second ||
		w.Network != serving.DefaultNetwork() || w.Policy != scheduler.PolicySymphony || w.NexusFrontends != 1 ||
		w.ScheduleAhead != 0 || w.AutoscaleWindow != 0 {
		t.Errorf("defaults: %+v", w)
	}
	m := w.Models[0]
	if m.Arrival.Kind != ArrivalPoisson || m.Profile.MaxBatch() != profile.DefaultMaxBatch || m.StaticMemory != 0 {
		t.Errorf("model defaults: %+v", m)
	}

	// A network mapping that leaves delays out means those delays are 0.
	w = mustParse(t, `
cluster: {gpus: 2}
network: {ctrl_delay: 50us, data_delay_per_mib: 3ms}
models:
  - {name: m, profile: {alpha: 1ms, beta: 2ms}, slo: 10ms, rate: 100}
policy: clockwork
schedule_ahead: 3ms
nexus_frontends: 4
autoscale_window: 2s
seed: 7
`)
	if w.Network != (scheduler.Delays{Ctrl: 50 * time.Microsecond, DataPerMiB: 3 * time.Millisecond}) || w.Policy != scheduler.PolicyClockwork ||
		w.ScheduleAhead != 3*time.Millisecond || w.NexusFrontends != 4 || w.AutoscaleWindow != 2*time.Second || w.Seed != 7 {
		t.Errorf("explicit: %+v", w)
	}
}

func TestModelFields(t *testing.T) {
	w := mustParse(t, `
cluster: {gpus: 2}
models:
  - name: table
    profile: {batch_latency: [5ms, 6ms, 7.5ms]}
    memory: {static: 170MiB, dynamic: 1.5GiB}
    input_size: 588KiB
    slo: 30ms
    rates:
      - {duration: 10s, rate: 100}
      - {duration: 5s, rate: 300}
      - {rate: 50}
    arrival: const
  - name: linear
    profile: {alpha: 1ms, beta: 2ms, max_batch: 16}
    memory: {static: 1024}
    slo: 1s
    rate: 0
    arrival: gamma:0.3
`)
	a, b := w.Models[0], w.Models[1]
	if a.Profile.MaxBatch() != 3 || a.Profile.Latency(3) != 7500*time.Microsecond {
		t.Errorf("table profile: max batch %d, l(3) %v", a.Profile.MaxBatch(), a.Profile.Latency(3))
	}
	if a.StaticMemory != 170<<20 || a.DynamicMemory != 3<<29 {
		t.Errorf("memory %d/%d", a.StaticMemory, a.DynamicMemory)
	}
	wantRates := []RatePhase{{10 * time.Second, 100}, {5 * time.Second, 300}, {0, 50}}
	if len(a.Rates) != 3 || a.Rates[0] != wantRates[0] || a.Rates[1] != wantRates[1] || a.Rates[2] != wantRates[2] {
		t.Errorf("rates %v, want %v", a.Rates, wantRates)
	}
	if a.RateAt(12*time.Second) != 300 || a.RateAt(time.Minute) != 50 || a.Arrival.Kind != ArrivalConstant {
		t.Errorf("rate schedule or arrival wrong: %+v", a)
	}
	if a.InputBytes != 588<<10 || b.InputBytes != 0 {
		t.Errorf("input sizes %d and %d, want 588KiB and none", a.InputBytes, b.InputBytes)
	}
	if b.Profile.MaxBatch() != 16 || b.Profile.Latency(4) != 6*time.Millisecond || b.StaticMemory != 1024 ||
		b.Rates[0].Rate != 0 || b.Arrival != (Arrival{Kind: ArrivalGamma, Shape: 0.3}) {
		t.Errorf("linear model: %+v", b)
	}
}

func TestZooReference(t *testing.T) {
	w := mustParse(t, `
cluster: {gpus: 2}
models:
  - {name: a, profile: zoo:1080ti/ResNet50, rate: 10}
  - {name: b, profile: zoo:A100/ResNet50, slo: 50ms, memory: {static: 1MiB}, rate: 10}
`)
	a, b := w.Models[0], w.Models[1]
	if a.Profile.Alpha() != 2050*time.Microsecond || a.Profile.Beta() != 5378*time.Microsecond ||
		a.SLO != 27*time.Millisecond || a.StaticMemory != 170<<20 || a.DynamicMemory != 2798<<20 {
		t.Errorf("zoo:1080ti/ResNet50: alpha %v beta %v slo %v mem %d/%d", a.Profile.Alpha(), a.Profile.Beta(), a.SLO, a.StaticMemory, a.DynamicMemory)
	}
	if b.Profile.Alpha() != 268*time.Microsecond || b.SLO != 50*time.Millisecond || b.StaticMemory != 1<<20 || b.DynamicMemory != 0 {
		t.Errorf("zoo:a100/ResNet50 with overrides: %+v", b)
	}
}

func TestZooExpansion(t *testing.T) {
	t.Run("zipf", func(t *testing.T) {
		w := mustParse(t, `
cluster: {gpus: 4}
zoo: {profiles: a100, count: 5, total_rate: 1000, popularity: zipf:1.2, arrival: gamma:0.5}
`)
		zoo, _ := profile.Zoo("a100")
		var h float64
		for i := range 5 {
			h += math.Pow(float64(i+1), -1.2)
		}
		var sum float64
		for i, m := range w.Models {
			want := 1000 * math.Pow(float64(i+1), -1.2) / h
			if m.Name != zoo[i].Name || !near(m.Rates[0].Rate, want) || m.Arrival.Shape != 0.5 {
				t.Errorf("model %d: %s rate %g, want %s rate %g", i, m.Name, m.Rates[0].Rate, zoo[i].Name, want)
			}
			if i > 0 && m.Rates[0].Rate >= w.Models[i-1].Rates[0].Rate {
				t.Errorf("zipf: model %d is not less popular than model %d", i, i-1)
			}
			sum += m.Rates[0].Rate
		}
		if !near(sum, 1000) {
			t.Errorf("zipf rates add up to %g", sum)
		}
	})
	t.Run("even with select and suffixes", func(t *testing.T) {
		w := mustParse(t, `
cluster: {gpus: 4}
zoo: {profiles: 1080ti, select: [VGG16, MobileNet], count: 5, total_rate: 500, name_prefix: x.}
`)
		want := "x.VGG16-0,x.MobileNet-0,x.VGG16-1,x.MobileNet-1,x.VGG16-2"
		if got := strings.Join(modelNames(w), ","); got != want {
			t.Errorf("names %s, want %s", got, want)
		}
		for _, m := range w.Models {
			if m.Rates[0].Rate != 100 {
				t.Errorf("%s: rate %g, want 100", m.Name, m.Rates[0].Rate)
			}
		}
		if w.Models[1].Profile.Alpha() != 1009*time.Microsecond || w.Models[1].SLO != 20*time.Millisecond {
			t.Errorf("MobileNet spec not applied: %+v", w.Models[1])
		}
	})
	t.Run("count below the list: no suffix", func(t *testing.T) {
		w := mustParse(t, `
cluster: {gpus: 4}
zoo: {profiles: table4, count: 1, total_rate: 10}
`)
		if got := strings.Join(modelNames(w), ","); got != "ResNet50" {
			t.Errorf("names %s", got)
		}
	})
	t.Run("slo_scale, list of zoos, after models", func(t *testing.T) {
		w := mustParse(t, `
cluster: {gpus: 4}
zoo:
  - {profiles: table4, total_rate: 10, slo_scale: 1.5}
  - {profiles: table4, total_rate: 10, slo: 1s, name_prefix: b-}
models:
  - {name: first, profile: {alpha: 1ms, beta: 1ms}, slo: 5ms, rate: 1}
`)
		want := "first,ResNet50,InceptionResNetV2,b-ResNet50,b-InceptionResNetV2"
		if got := strings.Join(modelNames(w), ","); got != want {
			t.Fatalf("names %s, want %s", got, want)
		}
		if w.Models[1].SLO != 37500*time.Microsecond || w.Models[2].SLO != 105*time.Millisecond {
			t.Errorf("slo_scale: %v %v", w.Models[1].SLO, w.Models[2].SLO)
		}
		if w.Models[3].SLO != time.Second || w.Models[4].SLO != time.Second {
			t.Errorf("slo override: %v %v", w.Models[3].SLO, w.Models[4].SLO)
		}
	})
	t.Run("total_rates", func(t *testing.T) {
		w := mustParse(t, `
cluster: {gpus: 4}
zoo:
  profiles: table4
  total_rates: [{duration: 2s, rate: 100}, {rate: 300}]
`)
		for _, m := range w.Models {
			if len(m.Rates) != 2 || m.Rates[0] != (RatePhase{2 * time.Second, 50}) || m.Rates[1] != (RatePhase{0, 150}) {
				t.Errorf("%s: %v", m.Name, m.Rates)
			}
		}
	})
}

func TestGPUTypes(t *testing.T) {
	w := mustParse(t, `
cluster:
  gpu_types:
    - {name: a100, count: 16, memory: 40GiB, price_per_hour: 3.06}
    - {name: v100, count: 4, memory: 16GiB}
models:
  - {name: m, profile: zoo:a100/BERT, rate: 1}
`)
	c := w.Cluster
	if c.GPUs != 20 || len(c.GPUTypes) != 2 ||
		c.GPUTypes[0] != (GPUType{Name: "a100", Count: 16, Memory: 40 << 30, PricePerHour: 3.06}) ||
		c.GPUTypes[1] != (GPUType{Name: "v100", Count: 4, Memory: 16 << 30}) {
		t.Errorf("cluster %+v", c)
	}
	mustParse(t, `
cluster: {gpus: 20, gpu_types: [{name: a, count: 20}]}
models: [{name: m, profile: zoo:a100/BERT, rate: 1}]
`)
}

func TestAnchorsAndMerge(t *testing.T) {
	w := mustParse(t, `
cluster: {gpus: 2}
models:
  - &m {name: a, profile: &p {alpha: 1ms, beta: 1ms}, slo: 10ms, rate: 5}
  - {<<: *m, name: b, rate: 7}
  - {name: c, profile: *p, slo: 20ms, rate: 1}
  - <<: [{name: x, slo: 1s}, *m]
    name: d
`)
	if got := strings.Join(modelNames(w), ","); got != "a,b,c,d" {
		t.Fatalf("names %s", got)
	}
	b, c, d := w.Models[1], w.Models[2], w.Models[3]
	if b.SLO != 10*time.Millisecond || b.Rates[0].Rate != 7 || b.Profile.Alpha() != time.Millisecond {
		t.Errorf("merged model b: %+v", b)
	}
	if c.Profile.Beta() != time.Millisecond || c.SLO != 20*time.Millisecond {
		t.Errorf("aliased profile c: %+v", c)
	}
	// In a merged list the earlier mapping wins.
	if d.SLO != time.Second || d.Rates[0].Rate != 5 {
		t.Errorf("merged list d: %+v", d)
	}
}

func TestRateTraceFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("two.csv", "second,rate\n0,10\n1,20\n\n2,30\n")
	write("w.yaml", "cluster: {gpus: 1}\nmodels:\n  - {name: m, profile: zoo:table4/ResNet50, rate_trace: two.csv}\n  - {name: n, profile: zoo:table4/ResNet50, rate_trace: two.csv}\n")
	w, err := ParseFile(filepath.Join(dir, "w.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range w.Models {
		if len(m.Rates) != 3 || m.Rates[2] != (RatePhase{time.Second, 30}) {
			t.Errorf("%s: %v", m.Name, m.Rates)
		}
	}
	w.Models[0].Rates[0].Rate = 99
	if w.Models[1].Rates[0].Rate != 10 {
		t.Error("models share one trace slice")
	}

	write("bad.yaml", "cluster: {gpus: 1}\nmodels:\n  - {name: m, profile: zoo:table4/ResNet50, rate_trace: missing.csv}\n")
	_, err = ParseFile(filepath.Join(dir, "bad.yaml"))
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "bad.yaml:3: models[0].rate_trace:") {
		t.Errorf("missing trace: %v", err)
	}

	write("gap.csv", "1,10\n2,20\n4,30\n")
	write("gap.yaml", "cluster: {gpus: 1}\nmodels:\n  - name: m\n    profile: zoo:table4/ResNet50\n    rate_trace: gap.csv\n")
	_, err = ParseFile(filepath.Join(dir, "gap.yaml"))
	if err == nil || !strings.Contains(err.Error(), "gap.yaml:5: models[0].rate_trace:") || !strings.Contains(err.Error(), "gap.csv:3:") {
		t.Errorf("gap in trace: %v", err)
	}
}

func TestParseRateTrace(t *testing.T) {
	good := []struct {
		in   string
		want []float64
	}{
		{"5\n6\n7\n", []float64{5, 6, 7}},
		{"rate\n5\n\n6.5\n", []float64{5, 6.5}},
		{"# comment\nsecond, rate\r\n0, 1\r\n1, 2\r\n", []float64{1, 2}},
		{"1,0\n2,3\n", []float64{0, 3}},
		{"7", []float64{7}},
	}
	for _, tc := range good {
		got, err := ParseRateTrace(strings.NewReader(tc.in), "t.csv")
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if len(got) != len(tc.want) {
			t.Errorf("%q: %v, want %v", tc.in, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != (RatePhase{time.Second, tc.want[i]}) {
				t.Errorf("%q: row %d = %v, want rate %g", tc.in, i, got[i], tc.want[i])
			}
		}
	}
	bad := []struct{ in, want string }{
		{"", "t.csv: no rates"},
		{"rate\n", "t.csv: no rates"},
		{"5\n-1\n", "t.csv:2: rate -1 is negative"},
		{"5\nNaN\n", "t.csv:2: rate \"NaN\" is not a finite number"},
		{"5\n1e999\n", "t.csv:2: rate \"1e999\" is not a finite number"},
		{"5\nabc\n", "t.csv:2: rate \"abc\" is not a number"},
		{"0,5\n2,6\n", "t.csv:2: second 2 follows second 0"},
		{"0,5\n0,6\n", "t.csv:2: second 0 follows second 0"},
		{"2,5\n", "t.csv:1: first second is 2"},
		{"0.5,5\n", "t.csv:1: second \"0.5\" is not an integer"},
		{"1\n\n1,2\n", "t.csv:3: 2 columns, but earlier rows have 1"},
		{"1,2,3\n", "t.csv:1: 3 columns"},
		{"a,b\nc,d\n", "t.csv:2: second \"c\" is not an integer"},
		{"0,\n", "t.csv:1: empty rate column"},
		{"1\n" + strings.Repeat("9", maxTraceLine+1) + "\n", "t.csv:2: line longer than"},
	}
	for _, tc := range bad {
		_, err := ParseRateTrace(strings.NewReader(tc.in), "t.csv")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.30q: error %v, want it to contain %q", tc.in, err, tc.want)
		}
	}
}

// base is a valid workload prefix of 2 lines, so that the bad inputs below
// know their line numbers.
const base = "cluster: {gpus: 2}\nmodels:\n"

func TestParseErrors(t *testing.T) {
	model := func(lines ...string) string {
		return base + "  - name: m\n    profile: {alpha: 1ms, beta: 1ms}\n" + strings.Join(lines, "\n") + "\n"
	}
	tests := []struct {
		name, in string
		want     []string // substrings of the error
	}{
		{"empty file", "", []string{"test.yaml: empty workload file"}},
		{"comments only", "# nothing\n", []string{"test.yaml: empty workload file"}},
		{"not a mapping", "- a\n- b\n", []string{"test.yaml:1: want a mapping"}},
		{"cluster not a mapping", "cluster: 8\n", []string{"test.yaml:1: cluster: want a mapping", `got "8"`}},
		{"model not a mapping", base + "  - ResNet50\n", []string{"test.yaml:3: models[0]: want a model mapping"}},
		{"yaml syntax", "cluster: {gpus: 2\nmodels: x\n", []string{"test.yaml:", "YAML:"}},
		{"two documents", base + "  - {name: m, profile: zoo:table4/ResNet50, rate: 1}\n---\nseed: 1\n", []string{"test.yaml:4: more than one YAML document"}},
		{"unknown top-level key", "seed: 1\nmodles: []\n", []string{"test.yaml:2: modles: unknown key \"modles\"", `did you mean "models"`, "allowed: seed, duration"}},
		{"unknown model key", model("    slo: 10ms", "    rate: 1", "    sloo: 5ms"), []string{"test.yaml:7: models[0].sloo: unknown key", "allowed: name, profile"}},
		{"duplicate key", model("    slo: 10ms", "    rate: 1", "    slo: 5ms"), []string{"test.yaml:7: models[0].slo: key \"slo\" given twice (first at line 5)"}},
		{"bad duration", model("    slo: 25 ms", "    rate: 1"), []string{`test.yaml:5: models[0].slo: "25 ms" is not a duration (want Go syntax such as 25ms)`}},
		{"bare number duration", "duration: 30\n" + base, []string{`test.yaml:1: duration: "30" is not a duration`}},
		{"negative slo", model("    slo: -5ms", "    rate: 1"), []string{"test.yaml:5: models[0].slo: must be positive"}},
		{"missing slo", model("    rate: 1"), []string{"test.yaml:3: models[0].slo: required"}},
		{"negative rate", model("    slo: 10ms", "    rate: -5"), []string{"test.yaml:6: models[0].rate: must not be negative"}},
		{"nan rate", model("    slo: 10ms", "    rate: .nan"), []string{"test.yaml:6: models[0].rate:", "not a number"}},
		{"no rate", model("    slo: 10ms"), []string{"test.yaml:3: models[0]: needs one of rate, rates, rate_trace or daily_rate"}},
		{"rate and rates", model("    slo: 10ms", "    rate: 1", "    rates: [{rate: 2}]"), []string{"test.yaml:7: models[0].rates: rate and rates are mutually exclusive"}},
		{"phase without duration", model("    slo: 10ms", "    rates:", "      - {rate: 2}", "      - {rate: 3}"), []string{"test.yaml:7: models[0].rates[0].duration: required on every phase but the last"}},
		{"bad arrival", model("    slo: 10ms", "    rate: 1", "    arrival: burst"), []string{`test.yaml:7: models[0].arrival: unknown arrival "burst"`}},
		{"bad gamma", model("    slo: 10ms", "    rate: 1", "    arrival: gamma:-1"), []string{"test.yaml:7: models[0].arrival:", "gamma shape must be a positive number"}},
		{"bad size unit", model("    slo: 10ms", "    rate: 1", "    memory: {static: 12GB}"), []string{`test.yaml:7: models[0].memory.static: "12GB" has unknown unit "GB" (want B, KiB, MiB, GiB, TiB or PiB)`}},
		{"slo shorter than a batch of one", model("    slo: 1ms", "    rate: 1"), []string{"test.yaml:5: models[0].slo: 1ms is not longer than a batch of one takes with its input's pull and the network delays (2.22ms)"}},
		{"rate off by zeros", model("    slo: 10ms", "    rate: 1e9"), []string{"test.yaml:1: models: workload too large: the rates offer about 3.5e+10 requests over 35s", "is a rate off by a few zeros?"}},
		{"network delay too long", "network: {data_delay_per_mib: 2h}\n" + model("    slo: 10ms", "    rate: 1"), []string{`test.yaml:1: network.data_delay_per_mib: 2h0m0s is longer than 1s`}},
		{"input pull longer than the slo", model("    slo: 10ms", "    rate: 1", "    input_size: 8MiB"), []string{"test.yaml:5: models[0].slo: 10ms is not longer than a batch of one takes with its input's pull and the network delays (10.22ms)"}},
		{"input too large", model("    slo: 10ms", "    rate: 1", "    input_size: 1GiB"), []string{`test.yaml:7: models[0].input_size: "1GiB" is larger than 64MiB`}},
		{"negative size", model("    slo: 10ms", "    rate: 1", "    memory: {dynamic: -1MiB}"), []string{"test.yaml:7: models[0].memory.dynamic:", "negative"}},
		{"size overflow", model("    slo: 10ms", "    rate: 1", "    memory: {dynamic: 99999999TiB}"), []string{"test.yaml:7: models[0].memory.dynamic:", "too large"}},
		{"bad profile string", model("    slo: 10ms", "    rate: 1")[:len(base)] + "  - {name: m, profile: resnet, slo: 1s, rate: 1}\n", []string{"test.yaml:3: models[0].profile:", "is not a profile"}},
		{"unknown zoo in reference", base + "  - {name: m, profile: zoo:v100/ResNet50, rate: 1}\n", []string{`test.yaml:3: models[0].profile: unknown zoo "v100"`}},
		{"unknown zoo model", base + "  - {name: m, profile: zoo:1080ti/resnet50, rate: 1}\n", []string{`test.yaml:3: models[0].profile: zoo 1080ti has no model "resnet50" (did you mean ResNet50?)`}},
		{"profile table and alpha", base + "  - {name: m, profile: {alpha: 1ms, batch_latency: [1ms]}, slo: 1s, rate: 1}\n", []string{"test.yaml:3: models[0].profile.alpha: batch_latency and alpha are mutually exclusive"}},
		{"decreasing table", base + "  - name: m\n    profile:\n      batch_latency: [2ms, 1ms]\n    slo: 1s\n    rate: 1\n", []string{"test.yaml:5: models[0].profile.batch_latency[1]:", "below that of batch 1"}},
		{"zero profile", base + "  - {name: m, profile: {alpha: 0s, beta: 0s}, slo: 1s, rate: 1}\n", []string{"test.yaml:3: models[0].profile: alpha and beta are both zero"}},
		{"duplicate model name", base + "  - {name: m, profile: zoo:table4/ResNet50, rate: 1}\n  - {name: m, profile: zoo:table4/ResNet50, rate: 1}\n", []string{`test.yaml:4: models[1].name: duplicate model name "m" (models[0] at line 3 has it too)`}},
		{"bad model name", base + "  - {name: a/b, profile: zoo:table4/ResNet50, rate: 1}\n", []string{"test.yaml:3: models[0].name: model name", "'/'"}},
		{"zoo name clash", base + "  - {name: ResNet50, profile: zoo:table4/ResNet50, rate: 1}\nzoo: {profiles: table4, total_rate: 5}\n", []string{`test.yaml:4: zoo: expands to model "ResNet50", which models[0] at line 3 already names`}},
		{"unknown zoo", "cluster: {gpus: 2}\nzoo: {profiles: v100, total_rate: 1}\n", []string{`test.yaml:2: zoo.profiles: unknown zoo "v100" (known: 1080ti, a100, table4)`}},
		{"zoo without rate", "cluster: {gpus: 2}\nzoo:\n  profiles: a100\n", []string{"test.yaml:3: zoo.total_rate: required"}},
		{"zoo select unknown", "cluster: {gpus: 2}\nzoo:\n  - profiles: a100\n    total_rate: 5\n    select: [ResNet50, AlexNet]\n", []string{`test.yaml:5: zoo[0].select[1]: zoo a100 has no model "AlexNet"`}},
		{"zoo bad popularity", "cluster: {gpus: 2}\nzoo: {profiles: a100, total_rate: 5, popularity: zipf:0}\n", []string{"test.yaml:2: zoo.popularity:", "zipf exponent must be a positive number"}},
		{"zoo count zero", "cluster: {gpus: 2}\nzoo: {profiles: a100, total_rate: 5, count: 0}\n", []string{"test.yaml:2: zoo.count: 0 is outside 1.."}},
		{"zoo count huge", "cluster: {gpus: 2}\nzoo: {profiles: a100, total_rate: 5, count: 100000000}\n", []string{"test.yaml:2: zoo.count: 100000000 would make more than 100000 models in all"}},
		{"unknown policy", base + "  - {name: m, profile: zoo:table4/ResNet50, rate: 1}\npolicy: fifo\n", []string{`test.yaml:4: policy: unknown policy "fifo"`, "symphony"}},
		{"no cluster", "models:\n  - {name: m, profile: zoo:table4/ResNet50, rate: 1}\n", []string{"test.yaml:1: cluster: required"}},
		{"zero gpus", "cluster: {gpus: 0}\n", []string{"test.yaml:1: cluster.gpus: 0 is outside 1.."}},
		{"gpus disagree", "cluster:\n  gpus: 4\n  gpu_types: [{name: a, count: 3}]\n", []string{"test.yaml:2: cluster.gpus: 4 disagrees with the 3 GPUs"}},
		{"no models", "cluster: {gpus: 1}\n", []string{"test.yaml:1: models: no models"}},
		{"negative network delay", "network: {result_delay: -1us}\n" + base + "  - {name: m, profile: zoo:table4/ResNet50, rate: 1}\n", []string{"test.yaml:1: network.result_delay: must not be negative"}},
		{"negative seed", "seed: -1\n" + base, []string{`test.yaml:1: seed: "-1" is not a non-negative integer`}},
		{"null value", "seed:\n" + base, []string{"test.yaml:1: seed: want an integer, got nothing"}},
		{"merge cycle", "cluster: &c {<<: *c}\n", []string{"test.yaml:1: cluster: needs gpus or gpu_types"}},
		{"duplicate key in merged mapping", base + "  - {<<: {slo: 1s, slo: 2s}, name: m, profile: zoo:table4/ResNet50, rate: 1}\n", []string{"test.yaml:3: models[0].slo: key \"slo\" given twice"}},
		{"deep merge", "cluster: " + strings.Repeat("{<<: ", 20) + "{gpus: 1}" + strings.Repeat("}", 20) + "\n", []string{"test.yaml:1: cluster: merge keys (<<) nested more than 16 deep"}},
		{"alias cycle", "cluster: {gpus: 1}\nmodels: &m [*m]\n", []string{"test.yaml:2: models[0]: want a model mapping", "got a list"}},
		{"epoch without interval", "epoch: {parts: 2}\n" + base, []string{"test.yaml:1: epoch.interval: required"}},
		{"epoch bad engine", "epoch: {interval: 1m, engine: cplex}\n" + base, []string{`test.yaml:1: epoch.engine: "cplex" is not an engine (want one of heuristic, milp, random)`}},
		{"epoch unknown key", "epoch: {interval: 1m, partz: 2}\n" + base, []string{`test.yaml:1: epoch.partz: unknown key`, `did you mean "parts"`}},
		{"epoch negative headroom", "epoch: {interval: 1m, headroom: -1}\n" + base, []string{"test.yaml:1: epoch.headroom: must not be negative"}},
		{"daily high below low", model("    slo: 10ms", "    daily_rate: {low: 5, high: 2, period: 1h}"), []string{"test.yaml:6: models[0].daily_rate.high: 2 is below low 5"}},
		{"daily without period", model("    slo: 10ms", "    daily_rate: {low: 1, high: 2}"), []string{"test.yaml:6: models[0].daily_rate.period: required"}},
		{"daily tiny step", "duration: 1000h\n" + model("    slo: 10ms", "    daily_rate: {low: 1, high: 2, period: 1h, step: 1ns}"), []string{"models[0].daily_rate: workload too large"}},
		{"daily and rate", model("    slo: 10ms", "    rate: 1", "    daily_rate: {low: 1, high: 2, period: 1h}"), []string{"rate and daily_rate are mutually exclusive"}},
		{"fault unknown action", faulty("{at: 1s, action: stal, target: backend-0, for: 1s}"), []string{`test.yaml:5: faults[0].action: unknown action "stal"`, `did you mean "stall"`}},
		{"fault unknown target", faulty("{at: 1s, action: kill, target: gpu-0}"), []string{`test.yaml:5: faults[0].target: unknown target "gpu-0" (want backend-N, scheduler or frontend-N)`}},
		{"fault backend out of range", faulty("{at: 1s, action: kill, target: backend-2}"), []string{"test.yaml:5: faults[0].target: backend-2: the cluster has 1 backends (backend-0 to backend-0)"}},
		{"fault second frontend", faulty("{at: 1s, action: kill, target: frontend-1}"), []string{"faults[0].target: frontend-1: the load runs through one frontend, frontend-0"}},
		{"stall without for", faulty("{at: 1s, action: stall, target: backend-0}"), []string{"test.yaml:5: faults[0]: a stall needs a positive for"}},
		{"cut with for", faulty("{at: 1s, action: cut, target: frontend-0, for: 1s}"), []string{"faults[0].for: a cut has no duration"}},
		{"cut the scheduler", faulty("{at: 1s, action: cut, target: scheduler}"), []string{"faults[0].target: cut closes a backend's or a frontend's connection"}},
		{"fault after the run", faulty("{at: 40s, action: kill, target: scheduler}"), []string{"faults[0].at: 40s is not before the run's end (warmup plus duration: 35s)"}},
		{"fault without at", faulty("{action: kill, target: scheduler}"), []string{"faults[0].at: required"}},
		{"faults not a list", "faults: {at: 1s}\n" + base + "  - {name: m, profile: zoo:table4/ResNet50, rate: 1}\n", []string{"test.yaml:1: faults: want a list of faults"}},
		{"backends do not divide", "cluster: {gpus: 6, backends: 4}\nmodels:\n  - {name: m, profile: zoo:table4/ResNet50, rate: 1}\n", []string{"test.yaml:1: cluster.backends: 4 backends cannot share 6 GPUs evenly"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, err := Parse([]byte(tc.in), "test.yaml")
			if err == nil {
				t.Fatalf("no error; got %+v", w)
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q\ndoes not contain %q", err, s)
				}
			}
			t.Log(err)
			var pe *Error
			if !errors.As(err, &pe) {
				t.Errorf("error %T is not an *Error", err)
			}
		})
	}
}

// faulty is a valid workload with the given fault list entry.
func faulty(fault string) string {
	return base + "  - {name: m, profile: zoo:table4/ResNet50, rate: 1}\nfaults:\n  - " + fault + "\n"
}

// A fault list comes out in time order, with each fault's target and
// restart; cluster.backends sets how many backends share the GPUs, and
// both the live cluster and the simulator read the layout from Backends.
func TestParseFaults(t *testing.T) {
	in := "cluster: {gpus: 8, backends: 2}\nmodels:\n  - {name: m, profile: zoo:table4/ResNet50, rate: 1}\nfaults:\n" +
		"  - {at: 9s, action: restart, target: backend-1}\n" +
		"  - {at: 4s, action: stall, target: backend-0, for: 6s}\n" +
		"  - {at: 12s, action: kill, target: scheduler, for: 1s}\n" +
		"  - {at: 13s, action: drain, target: backend-0}\n" +
		"  - {at: 14s, action: cut, target: frontend-0}\n"
	w, err := Parse([]byte(in), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []Fault{
		{At: 4 * time.Second, Action: FaultStall, Target: FaultTarget{Kind: TargetBackend, Index: 0}, For: 6 * time.Second},
		{At: 9 * time.Second, Action: FaultRestart, Target: FaultTarget{Kind: TargetBackend, Index: 1}, Restarts: true},
		{At: 12 * time.Second, Action: FaultKill, Target: FaultTarget{Kind: TargetScheduler}, For: time.Second, Restarts: true},
		{At: 13 * time.Second, Action: FaultDrain, Target: FaultTarget{Kind: TargetBackend, Index: 0}},
		{At: 14 * time.Second, Action: FaultCut, Target: FaultTarget{Kind: TargetFrontend}},
	}
	if !slices.Equal(w.Faults, want) {
		t.Errorf("faults\n%+v\nwant\n%+v", w.Faults, want)
	}
	if n, each := w.Cluster.Backends(); n != 2 || each != 4 {
		t.Errorf("Backends() = %d of %d GPUs, want 2 of 4", n, each)
	}
	if got := w.Faults[0].String(); got != "4s stall backend-0 for 6s" {
		t.Errorf("String %q", got)
	}
	if w.Faults[0].End() != 10*time.Second || w.Faults[2].End() != 13*time.Second || w.Faults[3].End() != 13*time.Second {
		t.Errorf("ends %v %v %v", w.Faults[0].End(), w.Faults[2].End(), w.Faults[3].End())
	}
	if err := w.Validate(); err != nil {
		t.Errorf("a parsed scenario fails Validate: %v", err)
	}
	if s := w.Scaled(2); &s.Faults[0] == &w.Faults[0] || !slices.Equal(s.Faults, w.Faults) {
		t.Error("Scaled does not copy the faults")
	}
	for _, tc := range []struct {
		gpus, count, n, each int
	}{{8, 0, 2, 4}, {6, 0, 6, 1}, {2, 0, 1, 2}, {12, 3, 3, 4}} {
		if n, each := (Cluster{GPUs: tc.gpus, BackendCount: tc.count}).Backends(); n != tc.n || each != tc.each {
			t.Errorf("%d GPUs, backends %d: %d of %d, want %d of %d", tc.gpus, tc.count, n, each, tc.n, tc.each)
		}
	}
}

// An epoch mapping fills in the defaults it leaves out; a daily_rate
// expands into a phase per step that follows the curve.
func TestParseEpochAndDailyRate(t *testing.T) {
	in := "duration: 2h\nwarmup: 0s\nepoch: {interval: 5m, parts: 2, max_disruption: 1GiB}\n" + base +
		"  - {name: a, profile: zoo:table4/ResNet50, daily_rate: {low: 100, high: 300, period: 2h, peak_at: 1h, step: 10m}}\n" +
		"  - {name: b, profile: zoo:table4/ResNet50, rate: 5}\n"
	w, err := Parse([]byte(in), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultEpoch()
	want.Interval, want.Parts, want.MaxDisruption = 5*time.Minute, 2, 1<<30
	if w.Epoch == nil || *w.Epoch != want {
		t.Fatalf("epoch %+v, want %+v", w.Epoch, want)
	}
	ph := w.Models[0].Rates
	if len(ph) != 13 { // 12 steps cover 2h, and one more holds the rate after
		t.Fatalf("%d phases, want 13", len(ph))
	}
	if ph[0].Rate > 105 || ph[5].Rate < 295 || ph[6].Rate < 295 || ph[11].Rate > 105 {
		t.Errorf("curve does not trough at 0 and 2h and peak at 1h: %v", ph)
	}
	if r := w.Models[0].RateAt(time.Hour - time.Minute); r < 295 {
		t.Errorf("rate at 59m is %g, want near the peak", r)
	}
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	w.Epoch.Parts = 3
	if err := w.Validate(); err == nil || !strings.Contains(err.Error(), "epoch.parts must be in 1..2") {
		t.Errorf("3 parts for 2 models: %v", err)
	}
}

func TestTooLarge(t *testing.T) {
	big := make([]byte, MaxFileSize+1)
	for i := range big {
		big[i] = '#'
	}
	if _, err := Parse(big, "big.yaml"); err == nil || !strings.Contains(err.Error(), "larger than 16MiB") {
		t.Errorf("oversized file: %v", err)
	}
}

// TestAmplification feeds small files that would expand enormously if
// merges, aliases or zoo counts were followed naively. Each must finish
// quickly, either parsed or rejected with a budget error.
func TestAmplification(t *testing.T) {
	// 16 levels of merge lists, each naming the level below 4 times.
	inner := "&a0 {gpus: 1}"
	for i := 1; i < 16; i++ {
		inner = "&a" + itoa(i) + " {<<: [" + inner + ", *a" + itoa(i-1) + ", *a" + itoa(i-1) + ", *a" + itoa(i-1) + "]}"
	}
	in := "cluster: {<<: [" + inner + ", *a15, *a15]}\nmodels: [{name: m, profile: zoo:table4/ResNet50, rate: 1}]\n"
	if w, err := Parse([]byte(in), "merge.yaml"); err != nil || w.Cluster.GPUs != 1 {
		t.Errorf("nested merges: %v", err)
	}

	// A zoo of the largest count with many phases runs out of phase budget
	// before allocating.
	phases := strings.Repeat("{duration: 1s, rate: 1}, ", 200)
	in = "cluster: {gpus: 1}\nzoo: {profiles: table4, count: 100000, total_rates: [" + phases + "{rate: 1}]}\n"
	if _, err := Parse([]byte(in), "zoo.yaml"); err == nil || !strings.Contains(err.Error(), "zoo.yaml:2: zoo.total_rates: workload too large") {
		t.Errorf("phase budget: %v", err)
	}

	// The largest zoo count on its own is fine, and shares profiles.
	in = "cluster: {gpus: 1}\nzoo: {profiles: a100, count: 100000, total_rate: 1e6}\n"
	w, err := Parse([]byte(in), "zoo.yaml")
	if err != nil {
		t.Fatalf("count 100000: %v", err)
	}
	zoo, _ := profile.Zoo("a100")
	if want := zoo[99999%len(zoo)].Name + "-" + itoa(99999/len(zoo)); len(w.Models) != 100000 || w.Models[99999].Name != want {
		t.Errorf("count 100000: %d models, last %s, want %s", len(w.Models), w.Models[len(w.Models)-1].Name, want)
	}
	in = "cluster: {gpus: 1}\nmodels: [{name: m, profile: zoo:table4/ResNet50, rate: 1}]\nzoo: {profiles: a100, count: 100000, total_rate: 1e6}\n"
	if _, err := Parse([]byte(in), "zoo.yaml"); err == nil || !strings.Contains(err.Error(), "zoo.yaml:3: zoo.count:") {
		t.Errorf("too many models: %v", err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestParseSchedulable(t *testing.T) {
	base := "cluster: {gpus: 1}\nmodels:\n  - {name: m, profile: {alpha: 1ms, beta: 5ms}, slo: 25ms, rate: 10}\n"
	w, err := Parse([]byte(base+"schedulable: beta-lambda\n"), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if w.Schedulable != scheduler.SchedulableBetaLambda {
		t.Fatalf("schedulable = %v, want beta-lambda", w.Schedulable)
	}
	_, err = Parse([]byte(base+"schedulable: sometimes\n"), "s.yaml")
	if err == nil || !strings.Contains(err.Error(), "s.yaml:4: schedulable:") {
		t.Fatalf("bad schedulable: got %v, want an error naming s.yaml:4 and the field", err)
	}
}

func TestParseDropPolicy(t *testing.T) {
	base := "cluster: {gpus: 1}\nmodels:\n  - {name: m, profile: {alpha: 1ms, beta: 5ms}, slo: 25ms, rate: 10}\n"
	w, err := Parse([]byte(base+"drop_policy: timeout\n"), "d.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if w.Drop != scheduler.DropTimeout {
		t.Fatalf("drop = %v, want timeout", w.Drop)
	}
	if _, err = Parse([]byte(base+"drop_policy: never\n"), "d.yaml"); err == nil || !strings.Contains(err.Error(), "d.yaml:4: drop_policy:") {
		t.Fatalf("bad drop_policy: got %v, want an error naming d.yaml:4 and the field", err)
	}
}

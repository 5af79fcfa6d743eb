package provision

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/partition/strictyaml"
)

func TestParseTestdataApps(t *testing.T) {
	files, err := filepath.Glob("../../testdata/apps/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("testdata/apps: %v, %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			af, err := ParseAppFile(f)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Solve(af.App, af.Options)
			if err != nil {
				t.Fatal(err)
			}
			checkProperties(t, af.App, p)
		})
	}
}

func TestParseAppFields(t *testing.T) {
	af, err := ParseAppFile("../../testdata/apps/traffic.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a := af.App
	if a.SLO != 800*time.Millisecond || len(a.Hardware) != 3 || len(a.Modules) != 4 || len(a.Edges) != 3 {
		t.Fatalf("slo %v, %d hardware, %d modules, %d edges", a.SLO, len(a.Hardware), len(a.Modules), len(a.Edges))
	}
	if h := a.Hardware[1]; h.Name != "p100" || h.PricePerHour != 2.07 || h.Memory != 16<<30 {
		t.Errorf("hardware[1] = %+v", h)
	}
	dec := a.Modules[0]
	if dec.Kind != CPU || dec.Ingress != 120 || dec.Profiles[0].Points[1] != (Point{Batch: 1, Concurrency: 8, Latency: 20 * time.Millisecond}) {
		t.Errorf("decode = %+v", dec)
	}
	if det := a.Modules[1]; det.Memory != 3<<30 || det.Profiles[0].Points[3] != (Point{Batch: 8, Concurrency: 2, Latency: 300 * time.Millisecond}) {
		t.Errorf("detect = %+v", det)
	}
	// A linear profile expands to its listed batches: 2.05ms·b + 5.4ms.
	veh := a.Modules[2].Profiles[1]
	if veh.Hardware != "v100" || len(veh.Points) != 5 || veh.Points[2] != (Point{Batch: 16, Concurrency: 1, Latency: 16*2050*time.Microsecond + 5400*time.Microsecond}) {
		t.Errorf("vehicle on v100 = %+v", veh)
	}
	if a.Edges[1] != (Edge{From: "detect", To: "vehicle", Scale: 3.5}) {
		t.Errorf("edge 1 = %+v", a.Edges[1])
	}
	if af.Options != Default() {
		t.Errorf("options %+v, want the defaults", af.Options)
	}
	in, _ := compile(a)
	if in.rate[2] != 420 || in.rate[3] != 180 {
		t.Errorf("classifier rates %v", in.rate)
	}

	// Options in the file; max_batch expands 1..max_batch.
	af, err = ParseApp([]byte(`
slo: 50ms
hardware: [{name: a100, price_per_hour: 3.06}]
modules:
  - name: resnet
    rate: 1000
    profiles: {a100: [{alpha: 1ms, beta: 5ms, max_batch: 8, concurrency: 2}]}
dispatch: round-robin
max_configs: 2
dummy: false
split: quantized:5ms
`), "opts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	o := af.Options
	if o.Dispatch != RoundRobin || o.MaxConfigs != 2 || o.Dummy || o.Split != (Split{Kind: Quantized, Step: 5 * time.Millisecond}) {
		t.Errorf("options %+v", o)
	}
	pts := af.App.Modules[0].Profiles[0].Points
	if len(pts) != 8 || pts[7] != (Point{Batch: 8, Concurrency: 2, Latency: 13 * time.Millisecond}) {
		t.Errorf("points %+v", pts)
	}
}

// TestParseAppErrors: every mistake is an error naming the file, the line
// and the field.
func TestParseAppErrors(t *testing.T) {
	const head = "slo: 1s\nhardware: [{name: g, price_per_hour: 1}]\n"
	const mod = "modules: [{name: m, rate: 10, profiles: {g: [{batch: 2, latency: 10ms}]}}]\n"
	for _, tc := range []struct{ in, want string }{
		{"", "app.yaml: empty application file"},
		{"slo: 1s\n---\nslo: 2s\n", "more than one YAML document"},
		{"[1, 2]\n", "app.yaml:1: want a mapping of application fields"},
		{"slo: 1s\nhardwre: []\n", `app.yaml:2: hardwre: unknown key "hardwre" (did you mean "hardware"?)`},
		{"hardware: [{name: g, price_per_hour: 1}]\n" + mod, "app.yaml:1: slo: required"},
		{"slo: 1\n", `app.yaml:1: slo: "1" is not a duration`},
		{"slo: -1s\n", "app.yaml:1: slo: -1s is outside"},
		{"slo: 1s\n" + mod, "hardware: required"},
		{"slo: 1s\nhardware: []\n" + mod, "app.yaml:2: hardware: no hardware kinds"},
		{"slo: 1s\nhardware: [{name: g}]\n" + mod, "app.yaml:2: hardware[0].price_per_hour: required"},
		{"slo: 1s\nhardware: [{name: g, price_per_hour: 0}]\n" + mod, "hardware[0].price_per_hour: 0 is not in (0, 1e9]"},
		{"slo: 1s\nhardware: [{name: g, price_per_hour: .nan}]\n" + mod, "hardware[0].price_per_hour"},
		{"slo: 1s\nhardware: [{name: g, price_per_hour: 1}, {name: g, price_per_hour: 2}]\n" + mod, `hardware[1].name: hardware "g" listed twice`},
		{"slo: 1s\nhardware: [{name: 'a b', price_per_hour: 1}]\n" + mod, "hardware[0].name: hardware name"},
		{"slo: 1s\nhardware: [{name: g, price_per_hour: 1, memory: 16GB}]\n" + mod, `hardware[0].memory: "16GB" has unknown unit`},
		{head, "modules: required"},
		{head + "modules: []\n", "app.yaml:3: modules: no modules"},
		{head + "modules: [{name: m, rate: 10}]\n", "app.yaml:3: modules[0].profiles: required"},
		{head + "modules: [{name: m, rate: 10, profiles: {}}]\n", "modules[0].profiles: no profiles"},
		{head + "modules: [{name: m, rate: 10, profiles: {h: [{batch: 1, latency: 1ms}]}}]\n", `app.yaml:3: modules[0].profiles.h: no hardware named "h"`},
		{head + "modules: [{name: m, rate: 10, kind: tpu, profiles: {g: [{batch: 1, latency: 1ms}]}}]\n", `modules[0].kind: unknown module kind "tpu"`},
		{head + "modules: [{name: m, kind: cpu, rate: 10, profiles: {g: [{batch: 2, latency: 1ms}]}}]\n", "batch 2: a cpu module runs one input at a time"},
		{head + "modules: [{name: m, rate: 10, profiles: {g: [{batch: 0, latency: 1ms}]}}]\n", "modules[0].profiles.g[0].batch: 0 is outside 1..65536"},
		{head + "modules: [{name: m, rate: 10, profiles: {g: [{batch: 1}]}}]\n", "modules[0].profiles.g[0].latency: required"},
		{head + "modules: [{name: m, rate: 10, profiles: {g: [{batch: 1, latency: 0s}]}}]\n", "modules[0].profiles.g[0].latency: must be positive"},
		{head + "modules: [{name: m, rate: 10, profiles: {g: [{batch: 1, latency: 1ms}, {batch: 1, latency: 2ms}]}}]\n", "batch 1 at concurrency 1 profiled twice"},
		{head + "modules: [{name: m, rate: 10, profiles: {g: [{batch: 1, latency: 1ms, max_batch: 4}]}}]\n", "max_batch belongs to a linear profile"},
		{head + "modules: [{name: m, rate: 10, profiles: {g: [{alpha: 1ms, max_batch: 4}]}}]\n", "modules[0].profiles.g[0].beta: required"},
		{head + "modules: [{name: m, rate: 10, profiles: {g: [{alpha: 0s, beta: 0s}]}}]\n", "alpha and beta are both zero"},
		{head + "modules: [{name: m, rate: 10, profiles: {g: [{alpha: 1ms, beta: 1ms, batch: 3}]}}]\n", "a linear profile {alpha, beta} gives no batch"},
		{head + "modules: [{name: m, rate: 10, profiles: {g: [{alpha: 1ms, beta: 1ms, max_batch: 4, batches: [1]}]}}]\n", "give max_batch"},
		{head + "modules: [{name: m, rate: 10, profiles: {g: [{alpha: 1ms, beta: 1ms, batches: []}]}}]\n", "no batch sizes"},
		{head + "modules: [{name: m, rate: 10, profiles: {g: [{batch: 1, latency: 1ms, concurrency: 0}]}}]\n", "concurrency: 0 is outside 1..1024"},
		{head + "modules: [{name: m, profiles: {g: [{batch: 1, latency: 1ms}]}}]\n", "app.yaml:3: ingress: module m has no incoming edge"},
		{head + "modules: [{name: m, rate: -1, profiles: {g: [{batch: 1, latency: 1ms}]}}]\n", "modules[0].rate: must not be negative"},
		{head + mod + "edges: [{from: m, to: n}]\n", `edges[0].to: no module named "n"`},
		{head + mod + "edges: [{from: m, to: m}]\n", "module m feeds itself"},
		{head + "modules:\n  - {name: a, rate: 1, profiles: {g: [{batch: 1, latency: 1ms}]}}\n  - {name: b, profiles: {g: [{batch: 1, latency: 1ms}]}}\nedges: [{from: a, to: b, scale: 0}]\n", "edges[0].scale: 0 is not in (0, 1e6]"},
		{head + "modules:\n  - {name: a, rate: 1, profiles: {g: [{batch: 1, latency: 1ms}]}}\n  - {name: b, profiles: {g: [{batch: 1, latency: 1ms}]}}\nedges: [{from: a, to: b}, {from: a, to: b}]\n", "edge a -> b listed twice"},
		{head + "modules:\n  - {name: a, rate: 1, profiles: {g: [{batch: 1, latency: 1ms}]}}\n  - {name: b, profiles: {g: [{batch: 1, latency: 1ms}]}}\n  - {name: c, profiles: {g: [{batch: 1, latency: 1ms}]}}\nedges: [{from: a, to: b}, {from: b, to: c}, {from: c, to: b}]\n", "the edges form a cycle: "},
		{head + mod + "ingress: {x: 3}\n", `ingress.x: no module named "x"`},
		{head + mod + "ingress: {m: 3}\n", "module m also gives rate"},
		{head + mod + "dispatch: fast\n", `dispatch: unknown dispatch "fast"`},
		{head + mod + "split: quantized:0s\n", "split: quantized step"},
		{head + mod + "max_configs: -1\n", "max_configs: -1 is outside"},
		{head + mod + "dummy: maybe\n", "dummy: want true or false"},
		// alpha·max_batch overflowed a Duration: the planner's backstop
		// reported it without a line.
		{head + "modules: [{name: m, rate: 10, profiles: {g: [{alpha: 2000000h, beta: 1ms, max_batch: 2}]}}]\n", "app.yaml:3: modules[0].profiles.g[0].alpha: 2000000h0m0s is longer than 24h0m0s"},
		{"slo: 1s\nhardware: [{name: g, price_per_hour: 1, memory: 1GiB}]\nmodules:\n  - {name: m, rate: 10, memory: 2GiB, profiles: {g: [{batch: 1, latency: 1ms}]}}\n", "app.yaml:4: modules[0].memory: 2GiB per instance fits no"},
		{head + "modules:\n  - {name: a, rate: 1e9, profiles: {g: [{batch: 1, latency: 1ms}]}}\n  - {name: b, profiles: {g: [{batch: 1, latency: 1ms}]}}\nedges: [{from: a, to: b, scale: 2}]\n", "app.yaml:5: modules[1]: module b: its rate"},
	} {
		_, err := ParseApp([]byte(tc.in), "app.yaml")
		if err == nil {
			t.Errorf("accepted %q", tc.in)
			continue
		}
		var se *strictyaml.Error
		if !errors.As(err, &se) {
			t.Errorf("%q: error %T (%v), want a *strictyaml.Error", tc.in, err, err)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\n got  %v\n want %s", tc.in, err, tc.want)
		}
	}
}

func TestParseAppLimits(t *testing.T) {
	big := make([]byte, MaxAppFileSize+1)
	if _, err := ParseApp(big, "big.yaml"); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("oversized file: %v", err)
	}
	// Aliases are followed (a shared profile, say), and each use counts
	// towards the work budget that stops alias bombs.
	shared := "slo: 1s\nhardware: [{name: g, price_per_hour: 1}]\nmodules:\n" +
		"  - {name: a, rate: 5, profiles: {g: &p [{batch: 1, latency: 1ms}, {batch: 4, latency: 3ms}]}}\n" +
		"  - {name: b, profiles: {g: *p}}\nedges: [{from: a, to: b}]\n"
	af, err := ParseApp([]byte(shared), "shared.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(af.App.Modules[1].Profiles[0].Points) != 2 {
		t.Fatalf("aliased profile: %+v", af.App.Modules[1])
	}
	if _, err := ParseAppFile(t.TempDir()); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Fatalf("directory: %v", err)
	}
	if _, err := ParseAppFile(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func FuzzParseApp(f *testing.F) {
	for _, name := range []string{"harpagon-m3.yaml", "detect-classify.yaml", "traffic.yaml"} {
		data, err := os.ReadFile(filepath.Join("../../testdata/apps", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("slo: 1s\nhardware: [{name: g, price_per_hour: 1}]\nmodules: [{name: m, rate: 5, profiles: {g: [{alpha: 1ms, beta: 2ms, max_batch: 4}]}}]\n"))
	f.Add([]byte("slo: 1s\nhardware: &h [{name: g, price_per_hour: 1}]\nmodules: [{name: m, rate: 5, profiles: {g: [{batch: 1, latency: 1ms}]}}]\nedges: []\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		af, err := ParseApp(data, "fuzz.yaml")
		if err != nil {
			var se *strictyaml.Error
			if !errors.As(err, &se) {
				t.Fatalf("error %T is not a *strictyaml.Error: %v", err, err)
			}
			return
		}
		if err := af.App.Validate(); err != nil {
			t.Fatalf("accepted an invalid application: %v", err)
		}
		if err := af.Options.Validate(); err != nil {
			t.Fatalf("accepted invalid options: %v", err)
		}
		// Provision what is small enough to provision quickly, and check the provision.
		total := 0
		for _, m := range af.App.Modules {
			for _, pr := range m.Profiles {
				total += len(pr.Points)
			}
		}
		if len(af.App.Modules) <= 4 && total <= 64 {
			o := af.Options
			o.ModuleNodes = 500
			if p, err := Solve(af.App, o); err == nil {
				if err := Verify(af.App, p); err != nil {
					t.Fatalf("invalid provision: %v", err)
				}
			} else if !errors.Is(err, ErrInfeasible) {
				t.Fatalf("provision: %v", err)
			}
		}
	})
}

package serving

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/profile"
)

// A file with only models gets every setting's default.
func TestParseDefaults(t *testing.T) {
	c, err := Parse([]byte(`
models:
  - {name: a, profile: {alpha: 1ms, beta: 2ms}, slo: 20ms, input_size: 4KiB}
`), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Models) != 1 || c.Models[0].Name != "a" || c.Models[0].SLO != 20*time.Millisecond || c.Models[0].InputBytes != 4<<10 {
		t.Fatalf("models %+v", c.Models)
	}
	if got := c.Models[0].Profile.Latency(3); got != 5*time.Millisecond {
		t.Errorf("ℓ(3) = %v, want 5ms", got)
	}
	if c.Settings != DefaultSettings() {
		t.Errorf("settings %+v, want the defaults %+v", c.Settings, DefaultSettings())
	}
	if c.Source != "t.yaml" || len(c.Ignored) != 0 {
		t.Errorf("source %q, ignored %v", c.Source, c.Ignored)
	}
}

// Every setting is read, and the live delays are the network's raised to
// the floor, delay by delay.
func TestParseSettings(t *testing.T) {
	c, err := Parse([]byte(`
network: {ctrl_delay: 1ms, result_delay: 50us}
live_floor: {ctrl_delay: 200us, data_delay_per_request: 10us, data_delay_per_mib: 3ms, result_delay: 2ms}
limits: {max_gpus: 64, stall_after: 250ms, drain_timeout: -1s}
policy: clockwork
schedule_ahead: 3ms
zoo: {profiles: 1080ti, select: [ResNet50], slo_scale: 2}
`), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{
		Policy: scheduler.PolicyClockwork, ScheduleAhead: 3 * time.Millisecond,
		Network:   scheduler.Delays{Ctrl: time.Millisecond, Result: 50 * time.Microsecond},
		LiveFloor: scheduler.Delays{Ctrl: 200 * time.Microsecond, DataPerRequest: 10 * time.Microsecond, DataPerMiB: 3 * time.Millisecond, Result: 2 * time.Millisecond},
		Limits:    Limits{MaxGPUs: 64, StallAfter: 250 * time.Millisecond, DrainTimeout: -time.Second},
	}
	if c.Settings != want {
		t.Errorf("settings\n %+v\nwant\n %+v", c.Settings, want)
	}
	live := scheduler.Delays{Ctrl: time.Millisecond, DataPerRequest: 10 * time.Microsecond, DataPerMiB: 3 * time.Millisecond, Result: 2 * time.Millisecond}
	if got := c.LiveDelays(); got != live {
		t.Errorf("live delays %+v, want %+v", got, live)
	}
	specs, err := profile.Zoo("1080ti")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		if s.Name == "ResNet50" && c.Models[0].SLO != 2*s.SLO {
			t.Errorf("slo_scale 2: SLO %v, want %v", c.Models[0].SLO, 2*s.SLO)
		}
	}
}

// A workload file is a serving configuration: its load keys, at the top,
// in models and in zoos, are skipped and named.
func TestParseWorkloadFile(t *testing.T) {
	c, err := Parse([]byte(`
seed: 3
duration: 5s
cluster: {gpus: 4}
models:
  - {name: a, profile: zoo:1080ti/ResNet50, rate: 100, arrival: poisson}
zoo: {profiles: 1080ti, select: [VGG16], total_rate: 50, popularity: even}
faults: []
`), "w.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Models) != 2 || c.Models[0].Name != "a" || c.Models[1].Name != "VGG16" {
		t.Fatalf("models %+v", c.Models)
	}
	want := []string{"arrival", "cluster", "duration", "faults", "popularity", "rate", "seed", "total_rate"}
	if strings.Join(c.Ignored, ",") != strings.Join(want, ",") {
		t.Errorf("ignored %v, want %v", c.Ignored, want)
	}
}

// Bad files are refused with the file, the line and the field.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, file, want string
	}{
		{"typo", "modles: []\n", `t.yaml:1: modles: unknown key "modles" (did you mean "models"?)`},
		{"no models", "policy: symphony\n", "no models: give a models list or a zoo"},
		{"duplicate across models and zoo", "models: [{name: ResNet50, profile: zoo:1080ti/ResNet50}]\nzoo: {profiles: 1080ti, select: [ResNet50]}\n", `expands to model "ResNet50", which models[0] at line 1 already names`},
		{"slo too short", "models: [{name: a, profile: {alpha: 1ms, beta: 5ms}, slo: 5ms}]\n", "is not longer than a batch of one takes"},
		{"max_gpus zero", "limits: {max_gpus: 0}\nzoo: {profiles: 1080ti}\n", "limits.max_gpus"},
		{"negative stall", "limits: {stall_after: -1s}\nzoo: {profiles: 1080ti}\n", "limits.stall_after"},
		{"unknown policy", "policy: fastest\nzoo: {profiles: 1080ti}\n", "t.yaml:1: policy:"},
		{"floor too slow", "live_floor: {result_delay: 2s}\nzoo: {profiles: 1080ti}\n", "no network is that slow"},
		{"not a mapping", "- a\n", "t.yaml:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.file), "t.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("error %T is not an *Error", err)
			}
		})
	}
}

// ParseFile names the file it could not read.
func TestParseFileMissing(t *testing.T) {
	_, err := ParseFile("no/such/file.yaml")
	if err == nil || !strings.Contains(err.Error(), "no/such/file.yaml") {
		t.Fatalf("error %v", err)
	}
}

// Validate catches what a configuration built in code can get wrong.
func TestValidate(t *testing.T) {
	pr, err := profile.Linear(time.Millisecond, time.Millisecond, 8)
	if err != nil {
		t.Fatal(err)
	}
	good := Config{Source: "code", Models: []Model{{Name: "a", Profile: pr, SLO: time.Second}}, Settings: DefaultSettings()}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for name, mod := range map[string]func(c *Config){
		"no models": func(c *Config) { c.Models = nil },
		"duplicate": func(c *Config) { c.Models = append(c.Models, c.Models[0]) },
		"no SLO":    func(c *Config) { c.Models[0].SLO = 0 },
		"no GPUs":   func(c *Config) { c.Limits.MaxGPUs = 0 },
	} {
		c := good
		c.Models = append([]Model(nil), good.Models...)
		mod(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
	}
}

// FuzzParse: no input makes Parse panic, and what it accepts is valid.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"zoo: {profiles: 1080ti}\n",
		"models: [{name: a, profile: {batch_latency: [1ms, 2ms]}, slo: 10ms, memory: {static: 1GiB}}]\nlimits: {max_gpus: 2}\n",
		"network: {}\nlive_floor: {ctrl_delay: 1ms}\nzoo: [{profiles: a100, count: 3, name_prefix: x-}]\n",
		"a: &x [*x]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "fuzz.yaml")
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted an invalid configuration: %v", err)
		}
	})
}

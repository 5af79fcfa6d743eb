package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cloudWorkloadFile writes 20 minutes of a rising load: a day's shape
// compressed, on a pool of 64 GPU slots.
func cloudWorkloadFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cloud.yaml")
	const w = `seed: 1
duration: 20m
warmup: 0s
cluster: {gpus: 64}
models:
  - {name: a, profile: {alpha: 4ms, beta: 16ms, max_batch: 32}, slo: 150ms, daily_rate: {low: 100, high: 600, period: 40m, peak_at: 20m, step: 1m}}
policy: symphony
`
	if err := os.WriteFile(p, []byte(w), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSimCloud: `sim --cloud POLICY` runs the workload on the simulated
// cloud, prints the cloud's cost beside the report, holds both in --json,
// and draws the fleet, cost and SLO with --plot.
func TestSimCloud(t *testing.T) {
	w := cloudWorkloadFile(t)
	code, stdout, stderr := runCLI(t, "sim", "-f", w, "--cloud", "reactive:0.6", "--quiet")
	if code != 0 || !strings.Contains(stdout, "cloud    reactive(target=0.6): cost ") || !strings.Contains(stdout, "goodput") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	dir := t.TempDir()
	code, stdout, stderr = runCLI(t, "sim", "-f", w, "--cloud", "mark", "--forecast", "seasonal-naive:40", "--json", "--plot", dir, "--quiet")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out struct {
		Report struct {
			Offered uint64 `json:"offered"`
		} `json:"report"`
		Cloud struct {
			Policy     string  `json:"policy"`
			Cost       float64 `json:"cost"`
			Offered    uint64  `json:"offered"`
			Attainment float64 `json:"attainment"`
			Series     []struct {
				GPUsBilled float64 `json:"gpus_billed"`
			} `json:"series"`
		} `json:"cloud"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	c := out.Cloud
	if !strings.HasPrefix(c.Policy, "predictive(seasonal-naive(period=40)") || c.Cost <= 0 || c.Offered != out.Report.Offered || len(c.Series) != 20 || c.Attainment < 0.99 {
		t.Errorf("cloud %+v (report offered %d)", c, out.Report.Offered)
	}
	for _, f := range []string{"cloud-gpus.svg", "cloud-cost.png", "cloud-slo.svg"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	for _, bad := range [][]string{
		{"--cloud", "elastic"},
		{"--cloud", "reactive:2"},
		{"--cloud", "mark", "--forecast", "arima"},
		{"--cloud", "mark", "--find-goodput"},
		{"--forecast", "last"},
		{"--sizer", "eqs"},
		{"--cloud", "mark", "--sizer", "guess"},
	} {
		if code, _, stderr := runCLI(t, append([]string{"sim", "-f", w, "--quiet"}, bad...)...); code != 2 || stderr == "" {
			t.Errorf("%v: exit %d, %q; want a usage error", bad, code, stderr)
		}
	}
}

// TestSimCloudSizer: a cloud run measures what each GPU count serves
// before it starts, says so on stderr, and sizes its fleet by the
// measurement, unless --sizer eqs sizes by the epoch job's equations; a
// wrong policy costs no measurement.
func TestSimCloudSizer(t *testing.T) {
	w := cloudWorkloadFile(t)
	cloudLine := map[bool]string{}
	for _, c := range []struct {
		args     []string
		measures bool
	}{
		{nil, true}, {[]string{"--sizer", "measured"}, true}, {[]string{"--sizer", "eqs"}, false},
	} {
		code, stdout, stderr := runCLI(t, append([]string{"sim", "-f", w, "--cloud", "reactive:0.9"}, c.args...)...)
		if code != 0 || !strings.Contains(stdout, "cloud    reactive(target=0.9)") {
			t.Fatalf("%v: exit %d\n%s\n%s", c.args, code, stdout, stderr)
		}
		if got := strings.Contains(stderr, "capacity measured"); got != c.measures {
			t.Errorf("%v: measured %v, want %v; stderr:\n%s", c.args, got, c.measures, stderr)
		}
		line := stdout[strings.Index(stdout, "cloud    "):]
		if prev, ok := cloudLine[c.measures]; ok && prev != line {
			t.Errorf("%v: the default and --sizer measured differ:\n%s\n%s", c.args, prev, line)
		}
		cloudLine[c.measures] = line
	}
	if cloudLine[true] == cloudLine[false] {
		t.Errorf("the measured and the eqs sizer ran the same fleet:\n%s", cloudLine[true])
	}
	if _, _, stderr := runCLI(t, "sim", "-f", w, "--cloud", "elastic"); strings.Contains(stderr, "measuring") {
		t.Errorf("an unknown policy was measured for first:\n%s", stderr)
	}
}

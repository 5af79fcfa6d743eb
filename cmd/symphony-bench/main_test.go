package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const table4 = "../../testdata/workloads/table4-resnet50.yaml"

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// shortWorkload writes a copy of the Table 4 workload with a short window,
// so that CLI tests stay fast.
func shortWorkload(t *testing.T) string { return shortened(t, table4) }

// shortened writes a copy of the workload file with a 1s warmup and a 3s
// window.
func shortened(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), "duration: 30s", "duration: 3s", 1)
	s = strings.Replace(s, "warmup: 5s", "warmup: 1s", 1)
	p := filepath.Join(t.TempDir(), "w.yaml")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSimJSONHasReportFields(t *testing.T) {
	w := shortWorkload(t)
	code, out, stderr := runCLI(t, "sim", "-f", w, "--json", "--quiet")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	for _, k := range []string{"offered_rps", "goodput_rps", "bad_rate", "latency_p50", "latency_p99", "latency_p999",
		"queueing_p50", "queueing_p99", "batch_size_hist", "gpu_busy_fraction", "gpu_idle_fraction", "autoscale", "models"} {
		if _, ok := rep[k]; !ok {
			t.Errorf("report lacks %q", k)
		}
	}
	// Same workload and seed: byte-identical output.
	_, again, _ := runCLI(t, "sim", "-f", w, "--json", "--quiet")
	if again != out {
		t.Error("two runs of the same workload gave different JSON")
	}
}

func TestSimCompareWritesCSVAndPlots(t *testing.T) {
	w := shortWorkload(t)
	dir := t.TempDir()
	csvPath := filepath.Join(dir, "cmp.csv")
	code, out, stderr := runCLI(t, "sim", "-f", w, "--compare", "--quiet", "--csv", csvPath, "--plot", filepath.Join(dir, "plots"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, p := range []string{"symphony", "work-conserving", "clockwork", "nexus"} {
		if !strings.Contains(out, p) {
			t.Errorf("comparison table lacks %s:\n%s", p, out)
		}
	}
	csv, err := os.ReadFile(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(strings.TrimSpace(string(csv)), "\n") + 1; lines != 5 {
		t.Errorf("comparison CSV has %d lines, want a header and 4 policies:\n%s", lines, csv)
	}
	for _, f := range []string{"goodput_by_policy.svg", "goodput_by_policy.png", "symphony/latency_cdf.svg", "nexus/batch_size_hist.png"} {
		if st, err := os.Stat(filepath.Join(dir, "plots", f)); err != nil || st.Size() == 0 {
			t.Errorf("plot %s missing or empty (%v)", f, err)
		}
	}
}

// Each command's -h starts with its own lines of the top-level usage,
// then its flags.
func TestCommandHelpHasItsSynopsis(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		want, not string
	}{
		{[]string{"sim", "-h"}, "symphony-bench sim -f WORKLOAD", "lookahead"},
		{[]string{"sim", "lookahead", "-h"}, "symphony-bench sim lookahead -f WORKLOAD", "discrete-event"},
		{[]string{"bench", "scheduler", "-h"}, "symphony-bench bench scheduler [--models N]", "--gateway"},
		{[]string{"partition", "experiment", "-h"}, "symphony-bench partition experiment [--models N]", "discrete-event"},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code != 0 || !strings.HasPrefix(stderr, "Usage:\n  "+tc.want) || !strings.Contains(stderr, "Flags:\n") || strings.Contains(stderr, tc.not) {
			t.Errorf("%v: exit %d, help:\n%s", tc.args, code, stderr)
		}
	}
}

func TestSimErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("cluster: {gpus: 1}\nmodels:\n  - {name: m, profile: {alpha: 1ms, beta: 5ms}, slo: 25ms, rate: 10, colour: red}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"sim"}, 2, "-f WORKLOAD is required"},
		{[]string{"sim", "-f", bad}, 1, "bad.yaml:3"},
		{[]string{"sim", "-f", table4, "--policy", "fastest"}, 2, "unknown policy"},
		{[]string{"sim", "-f", table4, "--compare", "--policy", "nexus"}, 2, "exclude each other"},
		{[]string{"sim", "-f", table4, "--sweep", "0.5,x"}, 2, "--sweep"},
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"bench", "everything"}, 2, `unknown bench subcommand "everything"`},
		{[]string{"bench", "--quiet"}, 2, "-f WORKLOAD is required"},
	}
	for _, c := range cases {
		code, _, stderr := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
}

func TestBenchSchedulerJSON(t *testing.T) {
	code, out, stderr := runCLI(t, "bench", "scheduler", "--models", "2", "--gpus", "4", "--threads", "2",
		"--rate", "20000", "--warmup", "100ms", "--duration", "300ms", "--json", "--quiet")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res struct {
		RequestsPerSecond float64           `json:"requests_per_second"`
		Runs              []json.RawMessage `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	if res.RequestsPerSecond <= 0 || len(res.Runs) != 1 {
		t.Errorf("requests_per_second %v with %d runs; want a positive rate from one run", res.RequestsPerSecond, len(res.Runs))
	}
}

package main

import (
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/symphony-serving/symphony/scheduler/serving"
)

const (
	harpagonApp = "../../testdata/apps/harpagon-m3.yaml"
	trafficApp  = "../../testdata/apps/traffic.yaml"
)

type provisionJSON struct {
	Planner           string   `json:"planner"`
	CostPerHour       *float64 `json:"cost_per_hour"`
	RentedCostPerHour float64  `json:"rented_cost_per_hour"`
	Instances         []struct {
		Hardware string `json:"hardware"`
	} `json:"instances"`
	SLO     float64 `json:"slo"`
	Options struct {
		Dispatch   string `json:"dispatch"`
		MaxConfigs int    `json:"max_configs"`
		Dummy      bool   `json:"dummy"`
		Split      string `json:"split"`
	} `json:"options"`
	Modules []struct {
		Name      string   `json:"name"`
		Budget    *float64 `json:"budget"`
		Rate      *float64 `json:"rate"`
		DummyRate *float64 `json:"dummy_rate"`
		WorstCase float64  `json:"worst_case"`
		Configs   []struct {
			Hardware    string   `json:"hardware"`
			Batch       int      `json:"batch"`
			Concurrency int      `json:"concurrency"`
			Machines    *float64 `json:"machines"`
			Rate        *float64 `json:"rate"`
			DummyRate   *float64 `json:"dummy_rate"`
		} `json:"configs"`
	} `json:"modules"`
	Paths []struct {
		Modules   []string `json:"modules"`
		WorstCase *float64 `json:"worst_case"`
		Budget    float64  `json:"budget"`
	} `json:"paths"`
	Compare []struct {
		Planner     string   `json:"planner"`
		CostPerHour *float64 `json:"cost_per_hour"`
		Error       string   `json:"error"`
	} `json:"compare"`
}

func provisionCLI(t *testing.T, args ...string) provisionJSON {
	t.Helper()
	code, out, stderr := runCLI(t, append([]string{"provision"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got provisionJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	return got
}

// TestProvisionJSON: Harpagon Table II's M_3 through the command: the default
// provision (S_4, dummies) and, with flags overriding the file, S_1.
func TestProvisionJSON(t *testing.T) {
	got := provisionCLI(t, "-f", harpagonApp, "--json")
	if got.CostPerHour == nil || *got.CostPerHour != 5 || got.Planner != "symphony" || got.SLO != 1 || got.Options.Dispatch != "batch-aware" {
		t.Fatalf("default provision: %+v", got)
	}
	m := got.Modules[0]
	if m.Budget == nil || m.Rate == nil || *m.Rate != 198 || m.DummyRate == nil || *m.DummyRate != 2 || len(m.Configs) != 1 {
		t.Fatalf("module %+v", m)
	}
	c := m.Configs[0]
	if c.Hardware != "gpu" || c.Batch != 32 || c.Concurrency != 1 || c.Machines == nil || *c.Machines != 5 || c.Rate == nil || *c.Rate != 200 || c.DummyRate == nil || *c.DummyRate != 2 {
		t.Fatalf("configuration %+v", c)
	}
	if len(got.Paths) != 1 || got.Paths[0].WorstCase == nil || *got.Paths[0].WorstCase > 1 || *m.Budget > 1 || m.WorstCase > *m.Budget {
		t.Fatalf("paths %+v, budget %v", got.Paths, *m.Budget)
	}
	// S_1: round-robin, two configurations, no dummies: 6.3.
	got = provisionCLI(t, "-f", harpagonApp, "--json", "--dispatch", "round-robin", "--max-configs", "2", "--dummy=false")
	if math.Abs(*got.CostPerHour-6.3) > 1e-9 || got.Options.Dispatch != "round-robin" || got.Options.MaxConfigs != 2 || got.Options.Dummy {
		t.Fatalf("S_1: %v %+v", *got.CostPerHour, got.Options)
	}
	// Table II's other rows, as the paper's heuristics provision them: S_2 is
	// 5.9 (the full planner finds 5.4375 within two configurations), S_3
	// 5.3 and S_4 (dummies) 5.0.
	for _, tc := range []struct {
		args []string
		want float64
	}{
		{[]string{"--max-configs", "2", "--dummy=false"}, 5.9},
		{[]string{"--dummy=false"}, 5.3},
		{nil, 5.0},
	} {
		args := append([]string{"-f", harpagonApp, "--json", "--heuristics-only"}, tc.args...)
		got = provisionCLI(t, args...)
		if math.Abs(*got.CostPerHour-tc.want) > 1e-9 || got.Planner != "harpagon-heuristics" {
			t.Errorf("%v: %s costs %v, want %v", tc.args, got.Planner, *got.CostPerHour, tc.want)
		}
	}
	if got = provisionCLI(t, "-f", harpagonApp, "--json", "--max-configs", "2", "--dummy=false"); *got.CostPerHour > 5.9 {
		t.Errorf("the full planner within two configurations costs %v, more than the heuristics' 5.9", *got.CostPerHour)
	}
	got = provisionCLI(t, "-f", harpagonApp, "--json", "--baseline", "clipper")
	if got.Planner != "clipper" || *got.CostPerHour < 5 {
		t.Fatalf("clipper: %s %v", got.Planner, *got.CostPerHour)
	}
}

func TestProvisionTextCompareAndWorkload(t *testing.T) {
	out := filepath.Join(t.TempDir(), "w", "traffic-workload.yaml")
	code, stdout, stderr := runCLI(t, "provision", "-f", trafficApp, "--compare", "--workload-out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"traffic.yaml: 4 modules, SLO 800ms", "cost:", "module", "decode -> detect -> vehicle", "nexus", "brute-force", "workload written to"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	w, err := serving.ParseFile(out) // the exported workload's serving part: its models and SLOs
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Models) != 4 { // the CPU decoder too
		t.Fatalf("%d models in the exported workload", len(w.Models))
	}
	got := provisionCLI(t, "-f", trafficApp, "--json", "--compare")
	ours := *got.CostPerHour
	// Whole instances cost at least the occupancy-charged plan: 3 v100 and
	// a cpu8 for traffic.
	if got.RentedCostPerHour < ours || len(got.Instances) != 4 || math.Abs(got.RentedCostPerHour-9.58) > 1e-9 {
		t.Errorf("rents %v per hour on %d instances, want 9.58 on 4 (the plan costs %v)", got.RentedCostPerHour, len(got.Instances), ours)
	}
	if code, _, stderr := runCLI(t, "provision", "-f", trafficApp, "--workload-out", out, "--arrival", "gamma"); code == 0 || !strings.Contains(stderr, "want const or poisson") {
		t.Errorf("--arrival gamma: exit %d, %s", code, stderr)
	}
	for _, c := range got.Compare {
		if c.CostPerHour != nil && *c.CostPerHour < ours*(1-1e-9) && c.Planner != "brute-force" {
			t.Errorf("%s costs %v, below ours %v", c.Planner, *c.CostPerHour, ours)
		}
	}
	budgets := map[string]float64{}
	for _, m := range got.Modules {
		budgets[m.Name] = *m.Budget
	}
	for _, m := range w.Models {
		if d := math.Abs(m.SLO.Seconds() - budgets[m.Name]); d > 1e-9 {
			t.Errorf("model %s: SLO %v, budget %v", m.Name, m.SLO, budgets[m.Name])
		}
	}
}

func TestProvisionErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("slo: 1s\nhardware: [{name: g, price_per_hour: 1}]\nmodules: [{name: m, rate: 1, profiles: {h: [{batch: 1, latency: 1ms}]}}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"provision"}, 2, "-f APPFILE is required"},
		{[]string{"provision", "-f", harpagonApp, "--dispatch", "fast"}, 2, "--dispatch"},
		{[]string{"provision", "-f", harpagonApp, "--split", "fast"}, 2, "--split"},
		{[]string{"provision", "-f", harpagonApp, "--baseline", "orca"}, 2, "--baseline"},
		{[]string{"provision", "-f", harpagonApp, "--baseline", "nexus", "--dummy=false"}, 2, "--dummy and --baseline"},
		{[]string{"provision", "-f", harpagonApp, "--max-configs", "-1"}, 2, "--max-configs"},
		{[]string{"provision", "-f", harpagonApp, "extra"}, 2, "unexpected arguments"},
		{[]string{"provision", "-f", bad}, 1, "bad.yaml:3: modules[0].profiles.h: no hardware named \"h\""},
		{[]string{"provision", "-f", "/nonexistent/app.yaml"}, 1, "no such file"},
		{[]string{"provision", "experiment", "--instances", "0"}, 2, "instances"},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
}

func TestProvisionExperimentCLI(t *testing.T) {
	csvPath := filepath.Join(t.TempDir(), "exp.csv")
	code, out, stderr := runCLI(t, "provision", "experiment", "--instances", "6", "--seed", "2", "--milp=false", "--json", "--csv", csvPath, "--quiet")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		Systems []struct {
			System       string  `json:"system"`
			Planned      int     `json:"planned"`
			AvgExtra     float64 `json:"avg_extra"`
			OptimalShare float64 `json:"optimal_share"`
			Below        int     `json:"below_ours"`
		} `json:"systems"`
		BruteForced int `json:"brute_forced"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	if rep.BruteForced != 6 || len(rep.Systems) != 7 || rep.Systems[0].System != "symphony" || rep.Systems[0].Planned != 6 {
		t.Fatalf("report %+v", rep)
	}
	for _, s := range rep.Systems[2:6] { // the baselines
		if s.Below != 0 {
			t.Errorf("%s cheaper than ours on %d instances", s.System, s.Below)
		}
	}
	f, err := os.Open(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil || len(recs) != 1+6*7 {
		t.Fatalf("CSV: %d records, %v", len(recs), err)
	}
	code, out, _ = runCLI(t, "provision", "experiment", "--instances", "3", "--milp=false", "--quiet")
	if code != 0 || !strings.Contains(out, "avg extra over ours") || !strings.Contains(out, "optimal") {
		t.Fatalf("text report (exit %d):\n%s", code, out)
	}
}

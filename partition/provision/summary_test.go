package provision

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A summary holds the provision in plain units, and its text lists every
// configuration, path and comparison without trailing spaces.
func TestSummary(t *testing.T) {
	app := validApp()
	p, err := Solve(app, Default())
	if err != nil {
		t.Fatal(err)
	}
	s := NewSummary("apps/two.yaml", p, 1500*time.Microsecond)
	if s.Source != "apps/two.yaml" || s.Planner != p.Planner || s.SLO != 1 || s.CostPerHour != p.CostPerHour || s.PlanSeconds != 0.0015 {
		t.Errorf("header %+v", s)
	}
	if s.Options != (SummaryOptions{Dispatch: "batch-aware", MaxConfigs: 0, Dummy: true, Split: p.Options.Split.String()}) {
		t.Errorf("options %+v", s.Options)
	}
	if len(s.Modules) != len(p.Modules) || len(s.Paths) != 1 || strings.Join(s.Paths[0].Modules, ",") != "a,b" {
		t.Fatalf("modules %+v, paths %+v", s.Modules, s.Paths)
	}
	for i, m := range s.Modules {
		pm := p.Modules[i]
		if m.Name != pm.Name || m.Budget != pm.Budget.Seconds() || m.WorstCase > m.Budget || len(m.Configs) != len(pm.Configs) || len(m.Configs) == 0 {
			t.Errorf("module %+v from %+v", m, pm)
			continue
		}
		if c, pc := m.Configs[0], pm.Configs[0]; c.Hardware != "g" || c.Batch != pc.Batch || c.Latency != pc.Latency.Seconds() || c.Machines != pc.Machines {
			t.Errorf("configuration %+v from %+v", c, pc)
		}
	}
	cost, extra := 2*p.CostPerHour, 1.0
	s.Compare = []Comparison{
		{Planner: "nexus", CostPerHour: &cost, ExtraOverOurs: &extra, PlanSeconds: 0.002},
		{Planner: SystemMILP, Error: "no solver installed"},
	}
	s.WorkloadOut = "out/w.yaml"
	s.Notes = []string{"a note"}
	var text strings.Builder
	if err := s.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	for _, want := range []string{"two.yaml: 2 modules, SLO 1s\n", "planner:  symphony (dispatch batch-aware, max configs any, dummy true",
		"planned in 1.5ms\n", "a -> b", "nexus", "+100.0%", "scrooge-milp  -", "no solver installed\n",
		"\nworkload written to out/w.yaml\n", "\nnotes:\n  - a note\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasSuffix(line, " ") {
			t.Errorf("trailing space in %q", line)
		}
	}

	// The JSON is the command's --json: these names, with the comparison
	// and the workload only when there are some.
	keys := func(s *Summary) map[string]bool {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		k := map[string]bool{}
		for name := range m {
			k[name] = true
		}
		return k
	}
	all := keys(s)
	for _, k := range []string{"source", "planner", "options", "slo", "cost_per_hour", "modules", "paths", "paths_omitted",
		"plan_seconds", "notes", "compare", "workload_out"} {
		if !all[k] {
			t.Errorf("JSON lacks %q", k)
		}
		delete(all, k)
	}
	if len(all) != 0 {
		t.Errorf("JSON has more fields than the command's: %v", all)
	}
	if bare := keys(NewSummary("x", p, 0)); bare["compare"] || bare["workload_out"] || !bare["notes"] {
		t.Errorf("a bare summary's fields: %v", bare)
	}
}

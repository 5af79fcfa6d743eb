package main

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPartitionExperiment(t *testing.T) {
	dir := t.TempDir()
	csvPath := filepath.Join(dir, "runs.csv")
	plotDir := filepath.Join(dir, "plots")
	code, out, stderr := runCLI(t, "partition", "experiment", "--models", "30", "--parts", "3", "--instances", "2",
		"--time-limit", "50ms", "--engines", "heuristic,random", "--csv", csvPath, "--plot", plotDir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"2 instances of 30 models into 3 parts", "rate imbalance", "memory imbalance", "balanced (both <= 0.02)"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr, "4/4") {
		t.Errorf("no progress on stderr:\n%s", stderr)
	}
	f, err := os.Open(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil || len(rows) != 5 {
		t.Fatalf("CSV: %d rows, %v", len(rows), err)
	}
	if _, err := os.Stat(filepath.Join(plotDir, "imbalance_cdf.svg")); err != nil {
		t.Fatal(err)
	}

	code, out, stderr = runCLI(t, "partition", "experiment", "--models", "20", "--parts", "2", "--instances", "1",
		"--time-limit", "20ms", "--engines", "heuristic", "--json", "--quiet")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var rep struct {
		Summaries []struct {
			Engine string `json:"engine"`
			Runs   int    `json:"runs"`
		} `json:"summaries"`
		Runs []map[string]any `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Summaries) != 1 || rep.Summaries[0].Runs != 1 || len(rep.Runs) != 1 {
		t.Fatalf("JSON %v: %s", err, out)
	}
}

func TestPartitionExperimentErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"partition", "experiment", "--instances", "0"}, "instances must be in"},
		{[]string{"partition", "experiment", "--engines", "heuristic,nope"}, `unknown engine "nope"`},
		{[]string{"partition", "-f", "m.yaml"}, "the processes and planners are symphony's"},
	} {
		code, out, stderr := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q, stdout %q; want exit 2 and %q", tc.args, code, stderr, out, tc.want)
		}
	}
}

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSimLookaheadJSON(t *testing.T) {
	w := shortened(t, "../../testdata/workloads/table4-inceptionresnetv2.yaml")
	dir := t.TempDir()
	code, out, stderr := runCLI(t, "sim", "lookahead", "-f", w, "--multipliers", "1.1", "--horizon", "150ms", "--json", "--quiet",
		"--csv", filepath.Join(dir, "steps.csv"), "--plot", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		Model string `json:"model"`
		Steps []struct {
			Scheduler  string  `json:"scheduler"`
			OfferedRPS float64 `json:"offered_rps"`
			BadRate    float64 `json:"bad_rate"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	if rep.Model != "InceptionResNetV2" || len(rep.Steps) != 2 || rep.Steps[0].Scheduler != "rules" || rep.Steps[1].Scheduler != "clairvoyant" {
		t.Fatalf("report %+v; want a rules and a clairvoyant replay of InceptionResNetV2", rep)
	}
	if rep.Steps[0].OfferedRPS != rep.Steps[1].OfferedRPS || rep.Steps[1].BadRate > rep.Steps[0].BadRate {
		t.Fatalf("steps %+v: both replays must see the same arrivals, and the clairvoyant one do no worse", rep.Steps)
	}
	csv, err := os.ReadFile(filepath.Join(dir, "steps.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(csv)), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[1], "rules,1.1,") {
		t.Errorf("CSV %q: want a header and one row per replay", csv)
	}
	for _, ext := range []string{".svg", ".png"} {
		if st, err := os.Stat(filepath.Join(dir, "lookahead-bad-rate"+ext)); err != nil || st.Size() == 0 {
			t.Errorf("chart %s: %v", ext, err)
		}
	}
}

func TestSimLookaheadErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sim", "lookahead"}, "-f WORKLOAD is required"},
		{[]string{"sim", "lookahead", "-f", "../../testdata/workloads/mixed-1080ti.yaml"}, "exactly one"},
		{[]string{"sim", "lookahead", "-f", table4, "--multipliers", "1,x"}, `"x" is not a positive finite number`},
		{[]string{"sim", "lookahead", "-f", table4, "--multipliers", "inf"}, `"inf" is not a positive finite number`},
		{[]string{"sim", "lookahead", "-f", table4, "--horizon", "0s"}, "must be positive"},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want a failure saying %q", tc.args, code, stderr, tc.want)
		}
	}
}

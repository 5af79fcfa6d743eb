package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestSimLookaheadJSON(t *testing.T) {
	w := shortened(t, "../../testdata/workloads/table4-inceptionresnetv2.yaml")
	code, out, stderr := runCLI(t, "sim", "lookahead", "-f", w, "--multipliers", "1.1", "--horizon", "150ms", "--json", "--quiet")
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

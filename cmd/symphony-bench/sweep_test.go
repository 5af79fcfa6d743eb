package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/symphony-serving/symphony/bench/loadgen"
	"github.com/symphony-serving/symphony/frontend"
)

// writeSweepWorkload writes the walk-through's small load (two zoo models
// at a light load on 4 GPUs, network budgets loose enough for a loaded CI
// machine); the tests shorten its windows with --duration and --warmup.
func writeSweepWorkload(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sweep.yaml")
	if err := os.WriteFile(p, []byte(walkthroughWorkload), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// shortRun appends to args the flags that keep a test's live runs short.
func shortRun(args ...string) []string {
	return append(args, "--duration", "400ms", "--warmup", "100ms")
}

func TestSweepFlagErrors(t *testing.T) {
	wl := writeSweepWorkload(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"demo", "-f", wl, "--sweep", "1,x"}, `--sweep: "x" is not a positive finite number`},
		{[]string{"demo", "-f", wl, "--sweep", "1,0"}, `--sweep: "0" is not a positive`},
		{[]string{"demo", "-f", wl, "--policy", "fastest"}, "unknown policy"},
		{[]string{"demo", "-f", wl, "--policy", "nexus", "--sweep", "1"}, "exists only in the simulator"},
		{[]string{"demo", "-f", wl, "--sweep", "1", "--http-addr", "127.0.0.1:0"}, "exclude each other"},
		{[]string{"bench", "-f", wl, "--scheduler", "127.0.0.1:1", "--sweep", "-1"}, `--sweep: "-1"`},
	} {
		code, _, stderr := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", c.args, code, stderr, c.want)
		}
	}
}

// `demo --sweep` starts a cluster per point and reports the live curve
// beside the simulator's, both with the --policy given.
func TestDemoSweep(t *testing.T) {
	wl := writeSweepWorkload(t)
	dir := t.TempDir()
	csvPath := filepath.Join(dir, "sweep.csv")
	code, out, stderr := runCLI(t, shortRun("demo", "-f", wl, "--policy", "work-conserving", "--sweep", "0.5,1", "--json", "--quiet",
		"--csv", csvPath, "--plot", filepath.Join(dir, "plots"))...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got struct {
		Workload       string  `json:"workload"`
		Scale          float64 `json:"scale"`
		BaseMultiplier float64 `json:"base_multiplier"`
		Live, Sim      struct {
			Policy string `json:"policy"`
			Points []struct {
				Multiplier float64 `json:"multiplier"`
				OfferedRPS float64 `json:"offered_rps"`
				Outcomes   *struct {
					Offered uint64 `json:"offered"`
				} `json:"outcomes"`
			} `json:"points"`
		}
		Comparison []map[string]float64 `json:"comparison"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	if got.Live.Policy != "work-conserving (live)" || got.Sim.Policy != "work-conserving" {
		t.Errorf("policies: live %q, simulator %q; want work-conserving for both", got.Live.Policy, got.Sim.Policy)
	}
	if got.Workload != wl || got.Scale != 1 || got.BaseMultiplier != 1 || len(got.Comparison) != 2 {
		t.Errorf("report %+v", got)
	}
	for _, c := range []struct {
		name   string
		points int
	}{{"live", len(got.Live.Points)}, {"sim", len(got.Sim.Points)}} {
		if c.points != 2 {
			t.Fatalf("%s curve has %d points, want 2", c.name, c.points)
		}
	}
	for i := range 2 {
		l, s := got.Live.Points[i], got.Sim.Points[i]
		if l.Outcomes == nil || s.Outcomes == nil || l.Outcomes.Offered != s.Outcomes.Offered || l.Outcomes.Offered == 0 {
			t.Errorf("point %d: the live and simulated runs should offer the same arrivals (same file, seed and scale): %+v vs %+v", i, l, s)
		}
	}
	if _, ok := got.Comparison[1]["goodput_vs_sim"]; !ok {
		t.Errorf("comparison lacks the live/sim ratio: %v", got.Comparison)
	}
	if b, err := os.ReadFile(csvPath); err != nil || strings.Count(string(b), "\n") != 3 {
		t.Errorf("CSV (%v):\n%s\nwant a header and 2 rows", err, b)
	}
	for _, f := range []string{"sweep_goodput.svg", "sweep_bad_rate.png", "sweep_gpu_idle.svg"} {
		if st, err := os.Stat(filepath.Join(dir, "plots", f)); err != nil || st.Size() == 0 {
			t.Errorf("chart %s missing or empty (%v)", f, err)
		}
	}
}

// answerAll is a target that answers every request at once.
type answerAll struct{}

func (answerAll) Start(context.Context, string, []byte, uint8) loadgen.Call {
	return loadgen.Go(func() (frontend.Timing, error) { return frontend.Timing{}, nil })
}

// A sweep stopped by a signal prints the table of what it measured, with
// the simulator's curve whole and the stop said, and returns the
// context's error (exit 130).
func TestSweepStoppedPrintsWhatRan(t *testing.T) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	lf := addLoadFlags(fs, "")
	if err := fs.Parse(shortRun("-f", writeSweepWorkload(t), "--sweep", "1,2,3", "--quiet")); err != nil {
		t.Fatal(err)
	}
	w, err := lf.workload(fs)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	points := 0
	target := func(context.Context) (loadgen.Target, func(), error) {
		if points++; points == 2 {
			cancel() // Ctrl-C as the second point starts
		}
		return answerAll{}, func() {}, nil
	}
	var out, errb strings.Builder
	err = lf.runSweep(ctx, target, w, "fake (live)", []string{"a fake cluster"}, &out, &errb)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want the stop (exit 130)", err)
	}
	text := out.String()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`live: fake \(live\) +simulator: symphony`),
		// Measured: every request offered was answered at once (no bad
		// request, so no shares); the live/sim ratio is 1.
		regexp.MustCompile(`(?m)^ +1\.00 +(\d+\.\d) +(\d+\.\d) +0\.00% +- +\S+ +(\d+\.\d) +0\.00% +\S+ +1\.000 +1\.000$`),
		// Not reached live: the simulator's figures only.
		regexp.MustCompile(`(?m)^ +2\.00 +\d+\.\d +- +- +- +- +\d+\.\d +\S+ +\S+ +- +-$`),
		regexp.MustCompile(`(?m)^ +3\.00 +\d+\.\d +- +- +- +- +\d+\.\d +\S+ +\S+ +- +-$`),
		regexp.MustCompile(`note: a fake cluster`), regexp.MustCompile(`stopped: sweep at 2: `),
	} {
		if !want.MatchString(text) {
			t.Errorf("output lacks %v:\n%s", want, text)
		}
	}
}

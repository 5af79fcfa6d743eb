package main

import (
	"context"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/cmd/internal/cli"
)

// demoReport is what the tests read of a run's JSON report.
type demoReport struct {
	Policy          string  `json:"policy"`
	GPUs            int     `json:"gpus"`
	DurationSeconds float64 `json:"duration_seconds"`
	demoEnds
	OfferedRPS float64 `json:"offered_rps"`
	GoodputRPS float64 `json:"goodput_rps"`
	BadRate    float64 `json:"bad_rate"`
	LatencyP50 float64 `json:"latency_p50"`
	LatencyP99 float64 `json:"latency_p99"`
	GPUBusy    float64 `json:"gpu_busy_fraction"`
	GPUIdle    float64 `json:"gpu_idle_fraction"`
	MeanBatch  float64 `json:"mean_batch_size"`
	Models     []struct {
		Name string `json:"name"`
		demoEnds
		ProfileBatches  uint64  `json:"profile_batches"`
		ProfileRatioP50 float64 `json:"profile_ratio_p50"`
		ProfileRatioP99 float64 `json:"profile_ratio_p99"`
	} `json:"models"`
	Backends *struct {
		Batches uint64 `json:"batches"`
	} `json:"backends"`
}

// demoEnds are a run's (or a model's) requests by how they ended.
type demoEnds struct {
	Offered uint64 `json:"offered"`
	Good    uint64 `json:"good"`
	Late    uint64 `json:"late"`
	Dropped uint64 `json:"dropped"`
	Failed  uint64 `json:"failed"`
}

func (e demoEnds) addUp() bool { return e.Good+e.Late+e.Dropped+e.Failed == e.Offered }

// checkReport checks what holds of every live run's report however loaded
// the machine: requests were offered, each ended exactly once, the models
// add up to the whole, and the rates and fractions agree with the counts.
func checkReport(t *testing.T, r demoReport, window float64, models ...string) {
	t.Helper()
	if r.Offered == 0 || !r.addUp() {
		t.Errorf("ends %+v: want requests offered, each ending once", r.demoEnds)
	}
	if r.DurationSeconds != window || math.Abs(r.OfferedRPS-float64(r.Offered)/window) > 1e-6 || math.Abs(r.GoodputRPS-float64(r.Good)/window) > 1e-6 {
		t.Errorf("window %vs, offered %v/s, goodput %v/s for %+v", r.DurationSeconds, r.OfferedRPS, r.GoodputRPS, r.demoEnds)
	}
	if r.Offered > 0 && math.Abs(r.BadRate-float64(r.Offered-r.Good)/float64(r.Offered)) > 1e-9 {
		t.Errorf("bad rate %v for %+v", r.BadRate, r.demoEnds)
	}
	if math.Abs(r.GPUBusy+r.GPUIdle-1) > 1e-9 || r.GPUBusy < 0 || r.GPUBusy > 1 {
		t.Errorf("GPU busy %v, idle %v", r.GPUBusy, r.GPUIdle)
	}
	if r.Good > 0 && (r.MeanBatch < 1 || r.LatencyP50 <= 0 || r.LatencyP99 < r.LatencyP50) {
		t.Errorf("mean batch %v, latency p50 %v p99 %v", r.MeanBatch, r.LatencyP50, r.LatencyP99)
	}
	var sum demoEnds
	var names []string
	for _, m := range r.Models {
		if !m.addUp() {
			t.Errorf("model %s: ends %+v do not add up", m.Name, m.demoEnds)
		}
		sum.Offered, sum.Good, sum.Late, sum.Dropped, sum.Failed = sum.Offered+m.Offered, sum.Good+m.Good, sum.Late+m.Late, sum.Dropped+m.Dropped, sum.Failed+m.Failed
		names = append(names, m.Name)
	}
	if sum != r.demoEnds || strings.Join(names, ",") != strings.Join(models, ",") {
		t.Errorf("models %q sum to %+v, the run has %+v; want models %q", names, sum, r.demoEnds, models)
	}
}

// `symphony demo --json` runs a whole cluster and reports the run, with
// the backends' timing beside it.
func TestDemoJSONReport(t *testing.T) {
	code, out, stderr := runCLI(t, shortRun("demo", "-f", writeSweepWorkload(t), "--json", "--quiet")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r demoReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	if r.Policy != "symphony (live)" || r.GPUs != 4 {
		t.Errorf("policy %q on %d GPUs, want symphony (live) on 4", r.Policy, r.GPUs)
	}
	checkReport(t, r, 0.4, "ResNet50", "MobileNet")
	if r.Backends == nil || (r.Good > 0 && r.Backends.Batches == 0) {
		t.Errorf("backends %+v for %d good requests", r.Backends, r.Good)
	}
	// The emulated GPUs sleep ℓ(b) of the scheduler's profile, which the
	// frontend learned: every model that ran batches compares them with
	// it, and they took at least about ℓ(b).
	for _, m := range r.Models {
		if m.Good > 0 && (m.ProfileBatches == 0 || m.ProfileRatioP50 < 0.9 || m.ProfileRatioP99 < m.ProfileRatioP50) {
			t.Errorf("model %s: %d good requests, %d batches compared with the profile, real/ℓ(b) p50 %v p99 %v",
				m.Name, m.Good, m.ProfileBatches, m.ProfileRatioP50, m.ProfileRatioP99)
		}
	}
	if stderr != "" {
		t.Errorf("--quiet printed %q", stderr)
	}
}

// The text report, the announcement of the cluster and of the gateway
// --http-addr serves, and the CSV beside them.
func TestDemoTextWithGateway(t *testing.T) {
	csvPath := filepath.Join(t.TempDir(), "run.csv")
	code, out, stderr := runCLI(t, shortRun("demo", "-f", writeSweepWorkload(t), "--http-addr", "127.0.0.1:0", "--csv", csvPath)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, re := range []string{`demo: scheduler 127\.0\.0\.1:\d+, 1 backends × 4 GPUs`, `demo: KServe v2 gateway on http://127\.0\.0\.1:\d+\n`, `issued \d+ requests`} {
		if !regexp.MustCompile(re).MatchString(stderr) {
			t.Errorf("stderr lacks %s:\n%s", re, stderr)
		}
	}
	m := regexp.MustCompile(`(?m)^requests (\d+) offered, (\d+) good, (\d+) late, (\d+) dropped, (\d+) failed$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no request counts in:\n%s", out)
	}
	var n [5]uint64
	for i := range n {
		n[i], _ = strconv.ParseUint(m[i+1], 10, 64)
	}
	if e := (demoEnds{n[0], n[1], n[2], n[3], n[4]}); e.Offered == 0 || !e.addUp() {
		t.Errorf("request counts %+v", e)
	}
	for _, want := range []string{"policy symphony (live)  GPUs 4  duration 0.4s  seed 7", "  ResNet50 ", "  MobileNet ", "backends batches started behind plan"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	b, err := os.ReadFile(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(rows) != 4 || !strings.HasPrefix(rows[0], "model,offered,good,") || !strings.HasPrefix(rows[3], "total,"+m[1]+","+m[2]+",") {
		t.Errorf("CSV: want a header, 2 models and the total of %s offered:\n%s", m[1], b)
	}
}

// A sweep prints one progress line per point as it starts and one as it
// ends, beside the simulator's figures, then the table with one row per
// multiplier.
func TestDemoSweepText(t *testing.T) {
	code, out, stderr := runCLI(t, shortRun("demo", "-f", writeSweepWorkload(t), "--sweep", "0.5,1")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, re := range []string{
		`(?m)^sweep 1/2: 0\.5x, \d+\.\d req/s offered$`,
		`(?m)^sweep 1/2: 0\.5x  goodput \d+\.\d req/s \(simulator \d+\.\d(, live/sim \d\.\d{3})?\)  bad \d+\.\d\d%.*  GPU idle \d+\.\d%$`,
		`(?m)^sweep 2/2: 1x, \d+\.\d req/s offered$`,
		`(?m)^sweep 2/2: 1x  goodput `,
	} {
		if !regexp.MustCompile(re).MatchString(stderr) {
			t.Errorf("progress lacks %s:\n%s", re, stderr)
		}
	}
	for _, re := range []string{`live: symphony \(live\) +simulator: symphony`, `(?m)^ +0\.50 +\d`, `(?m)^ +1\.00 +\d`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("table lacks %s:\n%s", re, out)
		}
	}
}

// `symphony bench --scheduler ADDR --sweep` drives one running cluster at
// every multiplier in turn, beside the simulator's curve of the file, and
// says that the live curve ran the cluster's own policy.
func TestBenchRunningSweep(t *testing.T) {
	wl := writeSweepWorkload(t)
	w, err := workload.ParseFile(wl)
	if err != nil {
		t.Fatal(err)
	}
	c, _, release, err := startDemoCluster(context.Background(), w, tcpDataPath(t), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	code, out, stderr := runCLI(t, shortRun("bench", "-f", wl, "--scheduler", c.Scheduler.Addr(), "--data-path", "tcp", "--sweep", "0.5,1", "--json", "--quiet")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got struct {
		Notes     []string `json:"notes"`
		Live, Sim struct {
			Policy string `json:"policy"`
			Points []struct {
				Multiplier float64 `json:"multiplier"`
				Outcomes   *struct {
					demoEnds
				} `json:"outcomes"`
			} `json:"points"`
		}
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	if got.Live.Policy != "the cluster's policy (live)" || got.Sim.Policy != "symphony" || len(got.Notes) != 1 || !strings.Contains(got.Notes[0], "own policy") {
		t.Errorf("policies: live %q, simulator %q; notes %q", got.Live.Policy, got.Sim.Policy, got.Notes)
	}
	if len(got.Live.Points) != 2 || len(got.Sim.Points) != 2 {
		t.Fatalf("%d live and %d simulated points, want 2 each", len(got.Live.Points), len(got.Sim.Points))
	}
	for i, want := range []float64{0.5, 1} {
		l, s := got.Live.Points[i], got.Sim.Points[i]
		if l.Multiplier != want || s.Multiplier != want || l.Outcomes == nil || s.Outcomes == nil {
			t.Fatalf("point %d: live %+v, simulator %+v", i, l, s)
		}
		if l.Outcomes.Offered == 0 || !l.Outcomes.addUp() || l.Outcomes.Offered != s.Outcomes.Offered {
			t.Errorf("point %d: live ends %+v, simulator's %+v; want the same arrivals, each ending once", i, l.Outcomes.demoEnds, s.Outcomes.demoEnds)
		}
	}
}

// tcpDataPath is --data-path tcp.
func tcpDataPath(t *testing.T) *cli.DataPathFlags {
	t.Helper()
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	dp := cli.AddDataPathFlags(fs)
	if err := fs.Parse([]string{"--data-path", "tcp"}); err != nil {
		t.Fatal(err)
	}
	return dp
}

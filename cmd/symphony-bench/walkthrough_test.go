package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// walkthroughWorkload is the load of TestThreeProcessWalkthrough: two models
// of the bundled 1080Ti zoo at a light load on 4 emulated GPUs. The network
// delays the scheduler budgets for are those of loopback TCP between five
// processes on a shared CI machine, not of a datacenter network: with the
// defaults raised to the live floor (serving.DefaultLiveFloor), 0-3.5% of the
// requests were late there beside other jobs; with these, under 0.5%.
const walkthroughWorkload = `seed: 7
duration: 2s
warmup: 500ms
cluster:
  gpus: 4
network: {ctrl_delay: 2ms, data_delay_per_request: 100us, result_delay: 3ms}
zoo: {profiles: 1080ti, select: [ResNet50, MobileNet], total_rate: 200, popularity: even, arrival: poisson}
policy: symphony
`

// TestThreeProcessWalkthrough is README's "Running a cluster by hand" as
// separate OS processes: a scheduler, two backends with 2 emulated GPUs each
// and a frontend with the KServe v2 gateway, driven by `symphony bench
// --gateway`, then stopped with SIGTERM.
func TestThreeProcessWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a cluster of processes for a few seconds")
	}
	dir := t.TempDir()
	bin := buildSymphony(t)
	wl := filepath.Join(dir, "walkthrough.yaml")
	if err := os.WriteFile(wl, []byte(walkthroughWorkload), 0o644); err != nil {
		t.Fatal(err)
	}
	ps := newProcSet(t, bin)
	start := ps.start

	sched := start("scheduler", "scheduler", "-f", wl, "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0")
	addr := sched.waitLine(t, regexp.MustCompile(`^scheduler listening on (\S+) \(2 models`), 15*time.Second)[1]
	metricsURL := sched.waitLine(t, regexp.MustCompile(`^metrics on (http://\S+)$`), 15*time.Second)[1]
	b1 := start("backend b1", "backend", "--scheduler", addr, "--gpus", "2", "--name", "b1", "--metrics-addr", "127.0.0.1:0")
	b2 := start("backend b2", "backend", "--scheduler", addr, "--gpus", "2", "--name", "b2")
	front := start("frontend", "frontend", "--scheduler", addr, "--http-addr", "127.0.0.1:0", "--name", "f1")
	b1Metrics := b1.waitLine(t, regexp.MustCompile(`^metrics on (http://\S+)$`), 15*time.Second)[1]
	for _, b := range []*proc{b1, b2} {
		b.waitLine(t, regexp.MustCompile(`^backend b[12] registered 2 GPUs with `), 15*time.Second)
	}
	gw := front.waitLine(t, regexp.MustCompile(`^frontend f1: KServe v2 gateway on (http://\S+),`), 15*time.Second)[1]

	// The gateway listens before the frontend has joined the scheduler;
	// bench refuses a gateway whose models are not ready yet.
	hc := &http.Client{Timeout: 5 * time.Second}
	waitHTTPReady(t, hc, gw, "/v2/health/ready", "/v2/models/ResNet50/ready", "/v2/models/MobileNet/ready")

	// README's curl example: one small JSON UINT8 tensor. On a busy machine
	// a lone request may miss its 27ms SLO and be dropped (HTTP 503): that
	// is tried again, and not held against the cluster if the CPUs stay
	// oversubscribed (see maxCPUPressure).
	var skipLatency string
	var inf struct {
		ModelName string `json:"model_name"`
		Outputs   []struct {
			Datatype string `json:"datatype"`
			Data     []int  `json:"data"`
		} `json:"outputs"`
	}
	const tries = 10
	curlPressure := startCPUPressure()
	for try := 1; ; try++ {
		resp, err := hc.Post(gw+"/v2/models/ResNet50/infer", "application/json", strings.NewReader(
			`{"inputs":[{"name":"input0","datatype":"UINT8","shape":[4],"data":[1,2,3,4]}]}`))
		if err != nil {
			t.Fatalf("POST /v2/models/ResNet50/infer: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// A drop (503) or an answer past the SLO (504, "expired") is a
		// matter of timing on a loaded machine: try again.
		if resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusGatewayTimeout {
			t.Logf("POST /v2/models/ResNet50/infer, try %d: HTTP %d: %s", try, resp.StatusCode, bytes.TrimSpace(body))
			if try < tries {
				continue
			}
			if p, known := curlPressure.stop(); known && p > maxCPUPressure {
				skipLatency = fmt.Sprintf("%d requests in a row dropped under CPU pressure %s", tries, curlPressure)
				break
			}
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &inf) != nil || inf.ModelName != "ResNet50" ||
			len(inf.Outputs) != 1 || inf.Outputs[0].Datatype != "UINT8" || len(inf.Outputs[0].Data) == 0 {
			t.Errorf("POST /v2/models/ResNet50/infer: HTTP %d: %s", resp.StatusCode, body)
		}
		break
	}

	// The load, from a fourth process, through the gateway. Every run must
	// account for each request exactly once. The bad rate is a matter of
	// timing on a machine shared with other jobs: a run over 5% is tried
	// again, and it is not held against the cluster when the kernel says
	// the CPUs were oversubscribed in every run (see maxCPUPressure).
	const attempts = 3
	overloaded := true
	for i := 1; ; i++ {
		p := startCPUPressure()
		out := benchProcess(t, bin, "-f", wl, "--gateway", gw, "--json", "--quiet")
		pressure, known := p.stop()
		failed := t.Failed()
		badRate, slow := checkWalkthroughReport(t, out, "ResNet50", "MobileNet")
		t.Logf("bench run %d: bad rate %.3f, CPU pressure %s", i, badRate, p)
		if !failed && t.Failed() {
			t.Logf("bench report:\n%s", out)
			break
		}
		if len(slow) == 0 {
			break
		}
		overloaded = overloaded && known && pressure > maxCPUPressure
		msg := fmt.Sprintf("bench run %d of %d (CPU pressure %s): %s", i, attempts, p, strings.Join(slow, "; "))
		if i < attempts {
			t.Logf("%s; running again", msg)
			continue
		}
		if overloaded {
			t.Logf("%s\nbench report:\n%s", msg, out)
			skipLatency = fmt.Sprintf("bad rate over 5%% in %d runs, all under CPU pressure over %.0f%%", attempts, 100*maxCPUPressure)
		} else {
			t.Errorf("bad rate over 5%% in %d runs in a row; the last: %s\nbench report:\n%s", attempts, msg, out)
		}
		break
	}

	// The Prometheus metrics of the scheduler, the frontend and a backend
	// saw the cluster and the load.
	checkSchedulerMetrics(t, hc, metricsURL)
	checkFrontendMetrics(t, hc, gw+"/metrics")
	positive(t, b1Metrics, scrape(t, hc, b1Metrics), "symphony_backend_plans_total")

	// SIGTERM everything, newest first; each must exit by itself, cleanly.
	ps.stopAll(10 * time.Second)
	if skipLatency != "" {
		t.Skipf("the processes worked, but their latency was not checked: %s (other jobs had the CPUs)", skipLatency)
	}
}

// scrape returns the text of a Prometheus endpoint.
func scrape(t *testing.T, hc *http.Client, url string) string {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: HTTP %d: %s", url, resp.StatusCode, body)
	}
	return string(body)
}

// positive checks that the unlabelled or labelled series named (a
// regular expression) has a positive value.
func positive(t *testing.T, url, text, series string) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + series + ` (\S+)$`).FindStringSubmatch(text)
	if m == nil || m[1] == "0" {
		t.Errorf("GET %s: %s is %v; want the load's requests counted", url, series, m)
	}
}

// checkFrontendMetrics scrapes the frontend gateway's /metrics: the
// gateway answered ResNet50 requests, and the client counted results.
func checkFrontendMetrics(t *testing.T, hc *http.Client, url string) {
	t.Helper()
	text := scrape(t, hc, url)
	positive(t, url, text, `symphony_gateway_requests_total\{code="200",model="ResNet50"\}`)
	positive(t, url, text, `symphony_gateway_request_duration_seconds_count\{code="200",model="ResNet50"\}`)
	positive(t, url, text, `symphony_frontend_answered_requests_total`)
}

// checkSchedulerMetrics scrapes the scheduler's /metrics: four GPUs of two
// backends online, one frontend, and tasks received and planned.
func checkSchedulerMetrics(t *testing.T, hc *http.Client, url string) {
	t.Helper()
	text := scrape(t, hc, url)
	for _, want := range []string{"symphony_scheduler_online_gpus 4\n", "symphony_scheduler_backends 2\n", "symphony_scheduler_frontends 1\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("GET %s: no %q in\n%s", url, strings.TrimSpace(want), text)
		}
	}
	positive(t, url, text, "symphony_scheduler_tasks_total")
	positive(t, url, text, "symphony_scheduler_planned_requests_total")
}

// walkthroughStats are the report fields the walk-through checks
// (bench/report.Stats).
type walkthroughStats struct {
	Offered    uint64  `json:"offered"`
	Good       uint64  `json:"good"`
	Late       uint64  `json:"late"`
	Dropped    uint64  `json:"dropped"`
	Failed     uint64  `json:"failed"`
	GoodputRPS float64 `json:"goodput_rps"`
	BadRate    float64 `json:"bad_rate"`
}

// benchProcess runs `symphony bench ARGS` as a process and returns its stdout.
func benchProcess(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"bench"}, args...)...)
	cmd.WaitDelay = 2 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("symphony bench: %v\nstderr:\n%s\nstdout:\n%s", err, stderr.String(), stdout.String())
	}
	return stdout.Bytes()
}

// checkWalkthroughReport fails the test unless the bench report offered
// requests of exactly the given models and accounted for every one, and
// returns the overall bad rate and the bad rates over 5%, overall and per
// model.
func checkWalkthroughReport(t *testing.T, out []byte, models ...string) (badRate float64, slow []string) {
	t.Helper()
	var rep struct {
		walkthroughStats
		Models []struct {
			Name string `json:"name"`
			walkthroughStats
		} `json:"models"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, out)
	}
	check := func(what string, s walkthroughStats) {
		if s.Offered == 0 {
			t.Errorf("%s: no request offered", what)
		}
		if sum := s.Good + s.Late + s.Dropped + s.Failed; sum != s.Offered {
			t.Errorf("%s: offered %d != good %d + late %d + dropped %d + failed %d", what, s.Offered, s.Good, s.Late, s.Dropped, s.Failed)
		}
		// Generous: the cluster and its load share a noisy CI machine.
		if s.BadRate > 0.05 {
			slow = append(slow, fmt.Sprintf("%s: bad rate %.3f (late %d, dropped %d, failed %d of %d)",
				what, s.BadRate, s.Late, s.Dropped, s.Failed, s.Offered))
		}
	}
	check("overall", rep.walkthroughStats)
	seen := map[string]bool{}
	for _, m := range rep.Models {
		seen[m.Name] = true
		check("model "+m.Name, m.walkthroughStats)
	}
	for _, m := range models {
		if !seen[m] {
			t.Errorf("report lacks model %q", m)
		}
	}
	if len(rep.Models) != len(models) {
		t.Errorf("report has %d models, want %d", len(rep.Models), len(models))
	}
	return rep.BadRate, slow
}

// maxCPUPressure is the share of the time some task waited for a CPU above
// which the walk-through's latency is not checked: five processes passing
// each request along cannot meet a 20ms SLO when every hand-off waits for
// a CPU. On a 2-core machine, the walk-through alone puts the pressure at
// 15-25% and its bad rate near 0; with other jobs beside it, at 35-100%
// pressure, its bad rate was anywhere from 1% to 100%.
const maxCPUPressure = 0.25

// cpuPressure measures the machine's CPU pressure over an interval: the
// share of the time some task was runnable but waiting for a CPU (Linux
// pressure stall information, /proc/pressure/cpu).
type cpuPressure struct {
	start    time.Time
	stall0   time.Duration
	known    bool
	pressure float64
}

func startCPUPressure() *cpuPressure {
	s, ok := cpuStall()
	return &cpuPressure{start: time.Now(), stall0: s, known: ok}
}

// stop returns the pressure since start, and false where the kernel does
// not report it.
func (p *cpuPressure) stop() (float64, bool) {
	s, ok := cpuStall()
	p.known = p.known && ok
	if el := time.Since(p.start); p.known && el > 0 {
		p.pressure = float64(s-p.stall0) / float64(el)
	}
	return p.pressure, p.known
}

func (p *cpuPressure) String() string {
	if !p.known {
		return "unknown"
	}
	return fmt.Sprintf("%.0f%%", 100*p.pressure)
}

// cpuStall is the total time some task has waited for a CPU since boot.
func cpuStall() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/pressure/cpu")
	if err != nil {
		return 0, false
	}
	// some avg10=0.00 avg60=0.00 avg300=0.00 total=12345 (microseconds)
	line, _, _ := strings.Cut(string(b), "\n")
	_, total, ok := strings.Cut(line, "total=")
	if !ok || !strings.HasPrefix(line, "some ") {
		return 0, false
	}
	us, err := strconv.ParseUint(strings.TrimSpace(total), 10, 64)
	if err != nil {
		return 0, false
	}
	return time.Duration(us) * time.Microsecond, true
}

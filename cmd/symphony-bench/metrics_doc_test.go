package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// documentedSeries is one row of docs/metrics.md's tables: a series, the
// process that serves it, and whether any load moves it.
type documentedSeries struct {
	name, process string
	moves         bool
}

// readDocumentedSeries reads the series tables of docs/metrics.md.
func readDocumentedSeries(t *testing.T) []documentedSeries {
	t.Helper()
	f, err := os.Open("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []documentedSeries
	process := ""
	row := regexp.MustCompile("^\\| `(symphony_[a-z_]+)` \\|[^|]*\\|[^|]*\\| ([^|]*) \\|")
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## Frontend"):
			process = "frontend"
		case strings.HasPrefix(line, "## Scheduler"):
			process = "scheduler"
		case strings.HasPrefix(line, "## Backend"):
			process = "backend"
		case strings.HasPrefix(line, "## "):
			process = ""
		}
		if m := row.FindStringSubmatch(line); m != nil && process != "" {
			out = append(out, documentedSeries{name: m[1], process: process, moves: strings.HasPrefix(m[2], "moves")})
		}
	}
	if len(out) < 40 {
		t.Fatalf("read %d series from docs/metrics.md: its tables changed shape", len(out))
	}
	return out
}

// samples are a scrape's sample lines of the family name (a histogram's
// _bucket, _sum and _count lines too).
func samples(scrape, name string) []string {
	var out []string
	for _, line := range strings.Split(scrape, "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		rest, ok := strings.CutPrefix(line, name)
		if !ok {
			continue
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			rest = strings.TrimPrefix(rest, suffix)
		}
		if strings.HasPrefix(rest, "{") || strings.HasPrefix(rest, " ") {
			out = append(out, line)
		}
	}
	return out
}

// metricsLoad overloads one emulated GPU with two models for a moment.
const metricsLoad = `seed: 3
duration: 1500ms
warmup: 200ms
cluster:
  gpus: 1
network: {ctrl_delay: 2ms, data_delay_per_request: 100us, result_delay: 3ms}
zoo: {profiles: 1080ti, select: [ResNet50, MobileNet], total_rate: 1500, popularity: even, arrival: poisson}
policy: symphony
`

// TestDocumentedMetricsMove runs an overloaded three-process cluster
// through the HTTP gateway and checks docs/metrics.md against the
// processes' /metrics: every series documented exists, and every one
// documented as moving under load changed.
func TestDocumentedMetricsMove(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a cluster of processes")
	}
	docs := readDocumentedSeries(t)
	bin := buildSymphony(t)
	wl := filepath.Join(t.TempDir(), "load.yaml")
	if err := os.WriteFile(wl, []byte(metricsLoad), 0o644); err != nil {
		t.Fatal(err)
	}
	ps := newProcSet(t, bin)
	sched := ps.start("scheduler", "scheduler", "-f", wl, "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--advice-window", "1s")
	addr := sched.waitLine(t, regexp.MustCompile(`^scheduler listening on (\S+) `), 15*time.Second)[1]
	urls := map[string]string{"scheduler": sched.waitLine(t, regexp.MustCompile(`^metrics on (http://\S+)$`), 15*time.Second)[1]}
	back := ps.start("backend", "backend", "--scheduler", addr, "--gpus", "1", "--name", "b1", "--metrics-addr", "127.0.0.1:0")
	urls["backend"] = back.waitLine(t, regexp.MustCompile(`^metrics on (http://\S+)$`), 15*time.Second)[1]
	back.waitLine(t, regexp.MustCompile(`^backend b1 registered`), 15*time.Second)
	front := ps.start("frontend", "frontend", "--scheduler", addr, "--http-addr", "127.0.0.1:0", "--name", "f1")
	gw := front.waitLine(t, regexp.MustCompile(`^frontend f1: KServe v2 gateway on (http://\S+),`), 15*time.Second)[1]
	urls["frontend"] = gw + "/metrics"
	hc := &http.Client{Timeout: 5 * time.Second}
	waitHTTPReady(t, hc, gw, "/v2/models/ResNet50/ready", "/v2/models/MobileNet/ready")
	scrape := func() map[string]string {
		out := map[string]string{}
		for p, u := range urls {
			resp, err := hc.Get(u)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			out[p] = string(b)
		}
		return out
	}
	before := scrape()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "bench", "-f", wl, "--gateway", gw, "--quiet", "--json")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("symphony bench: %v\n%s", err, out)
	}
	after := scrape()
	moving := 0
	for _, d := range docs {
		if d.moves {
			moving++
		}
		now := samples(after[d.process], d.name)
		if len(now) == 0 {
			t.Errorf("%s: documented for the %s, not in its /metrics", d.name, d.process)
			continue
		}
		if d.moves && strings.Join(now, "\n") == strings.Join(samples(before[d.process], d.name), "\n") {
			t.Errorf("%s (%s): documented to move under load, unchanged:\n%s", d.name, d.process, strings.Join(now, "\n"))
		}
	}
	// The series of each process's own: none undocumented.
	documented := map[string]bool{}
	for _, d := range docs {
		documented[d.name] = true
	}
	family := regexp.MustCompile(`(?m)^# TYPE (symphony_[a-z_]+) `)
	for p, text := range after {
		for _, m := range family.FindAllStringSubmatch(text, -1) {
			if !documented[m[1]] {
				t.Errorf("%s serves %s, which docs/metrics.md does not list", p, m[1])
			}
		}
	}
	t.Logf("%d documented series checked, %d of them moved", len(docs), moving)
	ps.stopAll(30 * time.Second)
}

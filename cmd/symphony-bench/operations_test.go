package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Every process takes the same option by flag, by SYMPHONY_* variable and
// by config file, in that precedence, prints --version, and shows where
// each value came from with --print-config.
func TestEveryProcessConfiguresAlike(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildSymphony(t)
	file := filepath.Join(t.TempDir(), "symphony.yaml")
	// One file for the whole deployment: a common key, and one per process.
	if err := os.WriteFile(file, []byte(`
pprof-addr: 127.0.0.1:1
scheduler:
  max-gpus: 7
backend:
  gpus: 3
frontend:
  http-addr: 127.0.0.1:9999
`), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(env []string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v %v: %v\n%s", env, args, err, out)
		}
		return string(out)
	}
	for _, tc := range []struct{ process, own, ownValue string }{
		{"scheduler", "max-gpus", "7"},
		{"backend", "gpus", "3"},
		{"frontend", "http-addr", "127.0.0.1:9999"},
	} {
		if v := run(nil, tc.process, "--version"); !strings.HasPrefix(v, "symphony ") || !strings.Contains(v, " go1.") {
			t.Errorf("%s --version: %q", tc.process, v)
		}
		for _, c := range []struct {
			env  []string
			args []string
			want string
		}{
			{nil, []string{"--config", file}, "pprof-addr: 127.0.0.1:1 # file"},
			{[]string{"SYMPHONY_CONFIG=" + file}, nil, "pprof-addr: 127.0.0.1:1 # file"},
			{[]string{"SYMPHONY_PPROF_ADDR=127.0.0.1:2"}, []string{"--config", file}, "pprof-addr: 127.0.0.1:2 # environment SYMPHONY_PPROF_ADDR"},
			{[]string{"SYMPHONY_PPROF_ADDR=127.0.0.1:2"}, []string{"--config", file, "--pprof-addr", "127.0.0.1:3"}, "pprof-addr: 127.0.0.1:3 # flag"},
			{nil, nil, "pprof-addr: 127.0.0.1:0 # default"},
		} {
			out := run(c.env, append([]string{tc.process, "--print-config"}, c.args...)...)
			if !strings.Contains(out, "\n"+tc.process+":\n") || !strings.Contains(out, c.want) {
				t.Errorf("%s %v with %v: want %q in\n%s", tc.process, c.args, c.env, c.want, out)
			}
			fromFile := len(c.args) > 0 || len(c.env) > 0 && strings.HasPrefix(c.env[0], "SYMPHONY_CONFIG")
			if own := tc.own + ": " + tc.ownValue + " # file"; fromFile && !strings.Contains(out, own) {
				t.Errorf("%s %v: its section's %q missing from\n%s", tc.process, c.args, own, out)
			}
		}
	}
	// A mistake names the variable or the key, and exits 2 before anything starts.
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{[]string{"SYMPHONY_GPUS=many"}, []string{"backend"}, "SYMPHONY_GPUS"},
		{nil, []string{"scheduler", "--config", file + ".missing"}, "config file"},
	} {
		cmd := exec.Command(bin, c.args...)
		cmd.Env = append(os.Environ(), c.env...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), c.want) {
			t.Errorf("%v %v: %v, %q; want exit 2 naming %q", c.env, c.args, err, out, c.want)
		}
	}
}

// Each process answers /livez and /readyz; a backend is ready only once
// its GPUs are registered with a scheduler, and logs JSON lines with full
// timestamps when asked.
func TestEveryProcessAnswersProbes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a cluster of processes")
	}
	bin := buildSymphony(t)
	ps := newProcSet(t, bin)
	hc := &http.Client{Timeout: 5 * time.Second}
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := hc.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// The scheduler's address, reserved and freed: the backend starts
	// first, to show it is not ready while no scheduler answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	schedAddr := ln.Addr().String()
	ln.Close()
	back := ps.start("backend", "backend", "--scheduler", schedAddr, "--gpus", "1", "--name", "b1", "--metrics-addr", "127.0.0.1:0", "--log-format", "json")
	backURL := strings.TrimSuffix(back.waitLine(t, regexp.MustCompile(`^metrics on (http://\S+)$`), 15*time.Second)[1], "/metrics")
	if code, body := get(backURL + "/livez"); code != 200 || body != "ok\n" {
		t.Errorf("backend /livez before the scheduler: %d %q", code, body)
	}
	if code, body := get(backURL + "/readyz"); code != 503 || !strings.Contains(body, "not registered") {
		t.Errorf("backend /readyz before the scheduler: %d %q; want 503 naming why", code, body)
	}
	sched := ps.start("scheduler", "scheduler", "--addr", schedAddr, "--metrics-addr", "127.0.0.1:0")
	schedURL := strings.TrimSuffix(sched.waitLine(t, regexp.MustCompile(`^metrics on (http://\S+)$`), 15*time.Second)[1], "/metrics")
	back.waitLine(t, regexp.MustCompile(`^backend b1 registered 1 GPUs`), 15*time.Second)
	// The frontend advertises a proxy in front of its data port, as a pod
	// advertises its IP: the backend must pull the inputs through it.
	dataLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dataAddr := dataLn.Addr().String()
	dataLn.Close()
	proxied := startProxy(t, dataAddr)
	front := ps.start("frontend", "frontend", "--scheduler", schedAddr, "--http-addr", "127.0.0.1:0", "--name", "f1",
		"--data-addr", dataAddr, "--advertise-data-addr", proxied.addr)
	gw := front.waitLine(t, regexp.MustCompile(`^frontend f1: KServe v2 gateway on (http://\S+), inputs served on `+regexp.QuoteMeta(proxied.addr)+`,`), 15*time.Second)[1]
	waitHTTPReady(t, hc, backURL, "/readyz")
	waitHTTPReady(t, hc, gw, "/v2/models/MobileNet/ready")
	answered := false
	for try := 0; try < 10 && !answered; try++ { // a lone request on a busy machine may miss its SLO: 503
		resp, err := hc.Post(gw+"/v2/models/MobileNet/infer", "application/json",
			strings.NewReader(`{"inputs":[{"name":"input0","datatype":"UINT8","shape":[4],"data":[1,2,3,4]}]}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answered = resp.StatusCode == 200
		if !answered && resp.StatusCode != 503 && resp.StatusCode != 504 { // a busy machine: dropped, or answered late
			t.Fatalf("infer: %d %s", resp.StatusCode, body)
		}
	}
	if !answered {
		t.Fatal("10 requests in a row dropped")
	}
	if proxied.accepted() == 0 {
		t.Error("the backend did not dial the advertised data address")
	}
	for name, base := range map[string]string{"scheduler": schedURL, "backend": backURL, "frontend": gw} {
		for _, path := range []string{"/livez", "/readyz"} {
			if code, body := get(base + path); code != 200 || body != "ok\n" {
				t.Errorf("%s %s: %d %q", name, path, code, body)
			}
		}
		if code, body := get(base + "/metrics"); code != 200 || !strings.Contains(body, "# TYPE ") {
			t.Errorf("%s /metrics: %d", name, code)
		}
	}
	ps.stopAll(30 * time.Second)
	// Every stderr line of the JSON backend is a JSON object stamped to
	// the microsecond.
	sc := bufio.NewScanner(strings.NewReader(back.stderr.String()))
	lines := 0
	for sc.Scan() {
		var l struct {
			Time, Level, Message string
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`).MatchString(l.Time) {
			t.Errorf("backend log line %q: %v, time %q", sc.Text(), err, l.Time)
		}
		lines++
	}
	if lines == 0 {
		t.Error("the backend logged nothing")
	}
}

// tcpProxy forwards each connection it accepts to a target address,
// counting them.
type tcpProxy struct {
	addr string
	n    chan struct{}
}

func (p *tcpProxy) accepted() int { return len(p.n) }

func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &tcpProxy{addr: ln.Addr().String(), n: make(chan struct{}, 1024)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case p.n <- struct{}{}:
			default:
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { _, _ = io.Copy(u, c); u.Close() }()
				_, _ = io.Copy(c, u)
			}()
		}
	}()
	return p
}

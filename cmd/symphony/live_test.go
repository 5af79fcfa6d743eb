package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/symphony-serving/symphony/partition/registry"
	"github.com/symphony-serving/symphony/partition/registry/etcdtest"
)

// The live control plane's flags refuse what cannot work before anything
// connects, naming the flag or the model.
func TestLiveFlagErrors(t *testing.T) {
	serving := writeLiveServing(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"backend", "--etcd", "x:1", "--scheduler", "y:1"}, "--scheduler and --etcd do not go together"},
		{[]string{"frontend", "--etcd", "x:1", "--scheduler", "y:1"}, "--scheduler and --etcd do not go together"},
		{[]string{"backend", "--etcd", "x:1", "--registry-ttl", "1500ms"}, "--registry-ttl"},
		{[]string{"backend", "--etcd", "x:1", "--registry-prefix", "nope"}, "--registry-prefix"},
		{[]string{"scheduler", "--etcd", "x:1"}, "--etcd needs --part N"},
		{[]string{"scheduler", "--etcd", "x:1", "--part", "0", "--name", "a/b"}, "--name: name: \"a/b\" has a '/'"},
		{[]string{"backend", "--etcd", "x:1", "--name", "a b"}, "--name or --gpus: name:"},
		{[]string{"frontend", "--etcd", "x:1", "--name", ".."}, "--name: name:"},
		{[]string{"scheduler", "--part", "0"}, "--part is for the live control plane: it needs --etcd"},
		{[]string{"scheduler", "--advertise-addr", "h:1"}, "--advertise-addr is for the live control plane"},
		{[]string{"scheduler", "--etcd", "x:1", "--part", "0", "--addr", "0.0.0.0:7100"}, "give --advertise-addr"},
		{[]string{"scheduler", "--etcd", "x:1", "--part", "0", "--advertise-addr", "0.0.0.0:7100"}, "--advertise-addr \"0.0.0.0:7100\""},
		{[]string{"scheduler", "--etcd", "x:1", "--part", "0", "--model-control-mode", "explicit"}, "--model-control-mode explicit"},
		{[]string{"controller", "-f", serving, "--parts", "1", "--default-rate", "1"}, "--etcd ENDPOINTS is required"},
		{[]string{"controller", "--etcd", "x:1", "-f", serving, "--default-rate", "1"}, "--parts N is required"},
		{[]string{"controller", "--etcd", "x:1", "--parts", "1", "--default-rate", "1"}, "-f SERVING.yaml or --model-repo is required"},
		{[]string{"controller", "--etcd", "x:1", "-f", serving, "--parts", "1", "--rate", "a=10"}, "no declared rate for model(s) b of"},
		{[]string{"controller", "--etcd", "x:1", "-f", serving, "--parts", "1"}, "no declared rate for model(s) a, b of"},
		{[]string{"controller", "--etcd", "x:1", "-f", serving, "--parts", "1", "--default-rate", "1", "--rate", "c=2"}, "--rate names model(s) c, not among"},
		{[]string{"controller", "--etcd", "x:1", "-f", serving, "--parts", "1", "--rate", "a=fast"}, "non-negative number of requests/s"},
		{[]string{"controller", "--etcd", "x:1", "-f", serving, "--parts", "1", "--rate", "a=1", "--rate", "a=2"}, "given twice"},
		{[]string{"controller", "--etcd", "x:1", "-f", serving, "--parts", "3", "--default-rate", "1"}, "more parts than the 2 models"},
		{[]string{"controller", "--etcd", "x:1", "-f", serving, "--parts", "1", "--default-rate", "1", "--engine", "best"}, "--engine \"best\""},
		{[]string{"controller", "--etcd", "x:1", "-f", serving, "--parts", "1", "--default-rate", "1", "--epoch", "0s"}, "--epoch"},
		{[]string{"controller", "--etcd", "x:1", "-f", serving, "--parts", "1", "--default-rate", "1", "--max-disruption", "12GB"}, "unknown unit"},
		{[]string{"controller", "--etcd", "x:1", "-f", serving, "--parts", "1", "--default-rate", "1", "--scale-statefulset", "gpus"}, "--max-backends N is required"},
		{[]string{"controller", "--etcd", "x:1", "-f", serving, "--parts", "1", "--default-rate", "1", "--scale-statefulset", "gpus", "--scale-deployment", "gpus"}, "exclude each other"},
		{[]string{"controller", "--etcd", "x:1", "-f", serving, "--parts", "2", "--default-rate", "1", "--scale-statefulset", "gpus", "--max-backends", "1"}, "--max-backends 1 is below the 2 backends"},
		{[]string{"controller", "--etcd", "x:1", "-f", serving, "--parts", "1", "--default-rate", "1", "--scale-deployment", "gpus", "--max-backends", "4", "--warm-pool", "-1"}, "warm"},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	// Outside a pod the Kubernetes actuator has no credentials: the
	// controller says so rather than run without autoscaling.
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if code, _, stderr := runCLI(t, "controller", "--etcd", "x:1", "-f", serving, "--parts", "1", "--default-rate", "1",
		"--scale-statefulset", "gpus", "--max-backends", "4"); code != 1 || !strings.Contains(stderr, "must run in a pod") {
		t.Errorf("--scale-statefulset outside a pod: exit %d, stderr %q", code, stderr)
	}
	// The controller's flags read back from --print-config as given.
	code, stdout, stderr := runCLI(t, "controller", "--etcd", "x:1", "-f", serving, "--parts", "2", "--rate", "a=10", "--rate", "b=2.5/s",
		"--max-disruption", "2GiB", "--print-config")
	if code != 0 || !strings.Contains(stdout, "rate: [a=10, b=2.5/s]") || !strings.Contains(stdout, "max-disruption: 2147483648") {
		t.Errorf("--print-config: exit %d, stderr %q:\n%s", code, stderr, stdout)
	}
}

// writeLiveServing writes a serving configuration of two light models
// whose SLOs a loaded machine meets, and returns its path. The
// work-conserving policy runs each request at once: the symphony policy
// would run a lone request as late as its SLO allows (to batch it with
// others), which a machine short of CPU turns into drops; the control
// plane is what the tests check.
func writeLiveServing(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "serving.yaml")
	const yaml = `policy: work-conserving
models:
  - {name: a, profile: {alpha: 100us, beta: 1ms}, slo: 1s}
  - {name: b, profile: {alpha: 100us, beta: 1ms}, slo: 1s}
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The live control plane from the command line, in this process: an
// embedded etcd, `symphony scheduler --etcd --part 0`, `symphony backend
// --etcd`, `symphony frontend --etcd` and `symphony controller --etcd
// --parts 1`. The controller's first epoch places both models in part 0
// and the backend with its scheduler; requests through the frontend's
// gateway are answered; the probes and `symphony cluster status` say
// so; every process stops cleanly on its signal.
func TestLiveControlPlane(t *testing.T) {
	srv := etcdtest.Start(t)
	serving := writeLiveServing(t)
	const prefix = "/e2e/"
	plane := []string{"--etcd", srv.Endpoint, "--registry-prefix", prefix, "--pprof-addr", ""}
	procs := append(slices.Clone(plane), "--insecure")

	sched := startLiveCmd(t, "scheduler", append([]string{"scheduler", "-f", serving, "--addr", "127.0.0.1:0", "--part", "0", "--name", "s0",
		"--metrics-addr", "127.0.0.1:0"}, procs...)...)
	back := startLiveCmd(t, "backend", append([]string{"backend", "--name", "b0", "--metrics-addr", "127.0.0.1:0"}, procs...)...)
	front := startLiveCmd(t, "frontend", append([]string{"frontend", "--name", "f0", "--http-addr", "127.0.0.1:0", "--grpc-addr", "",
		"--data-addr", "127.0.0.1:0"}, procs...)...)
	ctl := startLiveCmd(t, "controller", append([]string{"controller", "-f", serving, "--parts", "1", "--rate", "a=20", "--default-rate", "10",
		"--epoch", "2s", "--switch-timeout", "60s", "--metrics-addr", "127.0.0.1:0"}, plane...)...)

	const start = 90 * time.Second // generous: a loaded 2-core machine, -race
	schedMetrics := sched.waitLine(t, sched.stdout, regexp.MustCompile(`^metrics on (http://\S+)/metrics$`), start)[1]
	backMetrics := back.waitLine(t, back.stdout, regexp.MustCompile(`^metrics on (http://\S+)/metrics$`), start)[1]
	ctlMetrics := ctl.waitLine(t, ctl.stdout, regexp.MustCompile(`^metrics on (http://\S+)/metrics$`), start)[1]
	gw := front.waitLine(t, front.stdout, regexp.MustCompile(`^frontend f0: KServe v2 gateway on (http://\S+),`), start)[1]
	back.waitLine(t, back.stdout, regexp.MustCompile(`^backend b0 registered 1 GPUs with 127\.0\.0\.1:\d+,`), start)

	hc := &http.Client{Timeout: 10 * time.Second}
	// The gateway has no event for a model's readiness: poll, bounded.
	for _, m := range []string{"a", "b"} {
		waitHTTP(t, hc, gw+"/v2/models/"+m+"/ready", start)
	}
	const requests = 20
	for i := range requests {
		model := []string{"a", "b"}[i%2]
		infer(t, hc, gw, model)
	}

	for _, tc := range []struct{ url, want string }{
		{schedMetrics + "/readyz", "ok: active for part 0 (term "},
		{backMetrics + "/readyz", "ok: with the scheduler at 127.0.0.1:"},
		{ctlMetrics + "/readyz", "ok: epoch "},
		{ctlMetrics + "/livez", "ok\n"},
	} {
		code, body := get(t, hc, tc.url)
		if code != http.StatusOK || !strings.HasPrefix(body, tc.want) {
			t.Errorf("%s: %d %q; want 200 %q", tc.url, code, body, tc.want)
		}
	}

	// The reports are put every 250ms: poll the status until part 0's
	// counts all the requests, bounded.
	var st clusterStatus
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, stdout, stderr := runCLI(t, "cluster", "status", "--etcd", srv.Endpoint, "--prefix", prefix, "--json")
		if code != 0 {
			t.Fatalf("cluster status: exit %d: %s", code, stderr)
		}
		st = clusterStatus{}
		if err := json.Unmarshal([]byte(stdout), &st); err != nil {
			t.Fatalf("cluster status: %v:\n%s", err, stdout)
		}
		if len(st.Reports) == 1 && st.Reports[0].Models["a"].Tasks+st.Reports[0].Models["b"].Tasks >= requests {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("part 0's report does not count the %d requests: %+v", requests, st.Reports)
		}
		time.Sleep(100 * time.Millisecond)
	}
	r := st.Reports[0]
	if r.Scheduler != "s0" || strings.Join(r.Ready, ",") != "a,b" || strings.Join(r.Backends, ",") != "b0" || r.Online <= 0 {
		t.Errorf("report %+v", r)
	}
	if st.Epoch == nil || st.Epoch.Epoch < 1 || len(st.Epoch.PartGPUs) != 1 || st.Epoch.GPUs != 1 {
		t.Errorf("epoch record %+v", st.Epoch)
	}
	if a := st.Assignment; a == nil || a.Backends["b0"] != 0 || a.Parts != 1 || len(st.Parts) != 1 || st.Parts[0].Route == "" ||
		strings.Join(st.Parts[0].Assigned, ",") != "a,b" || len(st.Frontends) != 1 || len(st.Models) != 2 || !st.Models[0].Registered {
		t.Errorf("status: assignment %+v, parts %+v, frontends %+v, models %+v", st.Assignment, st.Parts, st.Frontends, st.Models)
	}

	// The controller first, then the frontend, the backend and the
	// scheduler, each on its own signal, each exiting 0.
	for _, c := range []*liveCmd{ctl, front, back, sched} {
		if code := c.stop(t, time.Minute); code != 0 {
			t.Errorf("%s exited %d after its signal, want 0", c.name, code)
		}
	}
}

// A part's schedulers: the first elected is active, the second stands
// by, and /readyz says which. When the active one's leadership is lost
// (its election key deleted, as when etcd expires its lease), it exits
// non-zero and the standby takes over.
func TestLiveSchedulerFailover(t *testing.T) {
	srv := etcdtest.Start(t)
	serving := writeLiveServing(t)
	const prefix = "/failover/"
	args := func(name string) []string {
		return []string{"scheduler", "-f", serving, "--addr", "127.0.0.1:0", "--part", "0", "--name", name, "--metrics-addr", "127.0.0.1:0",
			"--etcd", srv.Endpoint, "--registry-prefix", prefix, "--pprof-addr", "", "--insecure"}
	}
	const start = 90 * time.Second
	elected := regexp.MustCompile(`elected: the part's active scheduler`)
	s0 := startLiveCmd(t, "s0", args("s0")...)
	s0.waitLine(t, s0.stderr, elected, start)
	s1 := startLiveCmd(t, "s1", args("s1")...)
	m1 := s1.waitLine(t, s1.stdout, regexp.MustCompile(`^metrics on (http://\S+)/metrics$`), start)[1]

	// The standby learns the leader from a watch: poll its probe, bounded.
	hc := &http.Client{Timeout: 10 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := get(t, hc, m1+"/readyz")
		if code == http.StatusOK && strings.HasPrefix(body, "ok: standby for part 0; active: s0 at 127.0.0.1:") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standby's /readyz: %d %q", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Depose s0: delete its election key, the part's first.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := srv.Client(t)
	resp, err := cl.Get(ctx, prefix+"elections/0/", clientv3.WithFirstCreate()...)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the part's leader key: %v %v", resp, err)
	}
	if _, err := cl.Delete(ctx, string(resp.Kvs[0].Key)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s0.done:
	case <-time.After(start):
		t.Fatal("s0 still runs after losing its part's leadership")
	}
	if s0.code != 1 || !strings.Contains(s0.stderr.String(), "leadership lost") {
		t.Errorf("s0 exited %d; want 1 saying the leadership was lost", s0.code)
	}
	s1.waitLine(t, s1.stderr, elected, start)
	if code := s1.stop(t, time.Minute); code != 0 {
		t.Errorf("s1 exited %d after its signal, want 0", code)
	}
	// It resigned: the part has no leader, and the routes no scheduler.
	reg, err := registry.New(cl, registry.Config{Prefix: prefix, TTL: registry.Default().TTL})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := reg.Leader(ctx, 0); ok || err != nil {
		t.Errorf("a leader after the last scheduler resigned (%v)", err)
	}
	if routes, _, err := reg.Routes(ctx); err != nil || len(routes.Schedulers) != 0 {
		t.Errorf("routes %+v (%v) after the last scheduler resigned", routes, err)
	}
}

// liveCmd is a command of the symphony binary run in the test's process
// (runWith), stopped by its own signals, its output kept line by line.
type liveCmd struct {
	name           string
	stdout, stderr *lineLog
	sigs           chan os.Signal
	done           chan struct{}
	code           int // valid once done is closed
}

// startLiveCmd runs args; the test's cleanup stops the command if it
// still runs, and logs its output if the test failed.
func startLiveCmd(t *testing.T, name string, args ...string) *liveCmd {
	t.Helper()
	c := &liveCmd{name: name, stdout: newLineLog(), stderr: newLineLog(), sigs: make(chan os.Signal, 2), done: make(chan struct{})}
	notify := func(int) (<-chan os.Signal, func()) { return c.sigs, func() {} }
	go func() {
		defer close(c.done)
		c.code = runWith(args, c.stdout, c.stderr, notify)
	}()
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			c.sigs <- os.Interrupt
			select {
			case <-c.done:
			case <-time.After(time.Minute):
				t.Errorf("%s still runs a minute after its signal", c.name)
			}
		}
		if t.Failed() {
			t.Logf("%s stdout:\n%s\n%s stderr:\n%s", c.name, c.stdout, c.name, c.stderr)
		}
	})
	return c
}

// stop sends the command one signal and returns its exit status once it
// has returned, failing the test after timeout.
func (c *liveCmd) stop(t *testing.T, timeout time.Duration) int {
	t.Helper()
	c.sigs <- os.Interrupt
	select {
	case <-c.done:
		return c.code
	case <-time.After(timeout):
		t.Fatalf("%s still runs %v after its signal", c.name, timeout)
		return -1
	}
}

// waitLine waits up to timeout for a line of out matching re and returns
// its submatches; it fails the test if the command returns first.
func (c *liveCmd) waitLine(t *testing.T, out *lineLog, re *regexp.Regexp, timeout time.Duration) []string {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		m, grew := out.find(re)
		if m != nil {
			return m
		}
		select {
		case <-grew:
		case <-c.done:
			if m, _ := out.find(re); m != nil {
				return m
			}
			t.Fatalf("%s returned %d before writing a line matching %q; stderr:\n%s", c.name, c.code, re, c.stderr)
		case <-timer.C:
			t.Fatalf("%s wrote no line matching %q within %v", c.name, re, timeout)
		}
	}
}

// lineLog is an io.Writer that keeps what a command writes, and says when
// a line is added.
type lineLog struct {
	mu    sync.Mutex
	text  bytes.Buffer
	lines []string
	grew  chan struct{} // closed when a line is added, then replaced
}

func newLineLog() *lineLog { return &lineLog{grew: make(chan struct{})} }

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.text.Write(p)
	all := l.text.String()
	if n := strings.Count(all, "\n"); n > len(l.lines) {
		l.lines = strings.Split(all, "\n")[:n]
		close(l.grew)
		l.grew = make(chan struct{})
	}
	return len(p), nil
}

// find returns the submatches of the first line matching re (nil if
// none), and a channel closed when a line is added.
func (l *lineLog) find(re *regexp.Regexp) ([]string, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if m := re.FindStringSubmatch(line); m != nil {
			return m, l.grew
		}
	}
	return nil, l.grew
}

func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.text.String()
}

// get returns a GET's status and body (0 if it failed).
func get(t *testing.T, hc *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitHTTP polls url until it answers 200, failing the test after
// timeout.
func waitHTTP(t *testing.T, hc *http.Client, url string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		code, body := get(t, hc, url)
		if code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %d %q after %v", url, code, body, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// infer sends one KServe v2 request for model through the gateway and
// checks its answer. A request dropped under CPU pressure (HTTP 503, or
// 504 for one whose result came too late) is sent again, a few times.
func infer(t *testing.T, hc *http.Client, gw, model string) {
	t.Helper()
	const tries = 5
	for try := 1; ; try++ {
		resp, err := hc.Post(gw+"/v2/models/"+model+"/infer", "application/json", strings.NewReader(
			`{"inputs":[{"name":"input0","datatype":"UINT8","shape":[4],"data":[1,2,3,4]}]}`))
		if err != nil {
			t.Fatalf("POST %s: %v", model, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if (resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusGatewayTimeout) && try < tries {
			t.Logf("POST %s, try %d: HTTP %d: %s", model, try, resp.StatusCode, bytes.TrimSpace(body))
			continue
		}
		var out struct {
			ModelName string `json:"model_name"`
			Outputs   []struct {
				Data []int `json:"data"`
			} `json:"outputs"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &out) != nil || out.ModelName != model || len(out.Outputs) != 1 {
			t.Fatalf("POST /v2/models/%s/infer: HTTP %d: %s", model, resp.StatusCode, body)
		}
		return
	}
}

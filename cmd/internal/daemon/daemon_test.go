package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var sections = []string{"scheduler", "backend", "frontend"}

// testCommand is a command's flag set as the processes declare theirs:
// the common flags and a few of its own.
type testCommand struct {
	fs      *flag.FlagSet
	common  *Flags
	addr    *string
	gpus    *int
	drain   *time.Duration
	loads   StringList
	enabled *bool
}

func newCommand(name string) *testCommand {
	c := &testCommand{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	c.fs.SetOutput(io.Discard)
	c.common = AddFlags(c.fs, "log more")
	c.addr = c.fs.String("metrics-addr", "", "metrics")
	c.gpus = c.fs.Int("gpus", 1, "GPUs")
	c.drain = c.fs.Duration("drain", 30*time.Second, "drain")
	c.enabled = c.fs.Bool("metrics", true, "metrics on")
	c.fs.Var(&c.loads, "load-model", "repeatable")
	return c
}

func env(m map[string]string) Lookup {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// run parses args, then resolves the configuration as a process does.
func (c *testCommand) run(t *testing.T, args []string, e map[string]string) (string, bool, error) {
	t.Helper()
	if err := c.fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	done, err := c.common.Resolve(c.fs, &out, env(e), sections)
	return out.String(), done, err
}

// The same option set three ways takes the flag's value; without the flag
// the environment's; without both the file's; without any the default.
// The command's own section wins over the file's top level.
func TestPrecedenceFlagEnvFileDefault(t *testing.T) {
	file := writeFile(t, `
metrics-addr: file:1
gpus: 2
drain: 5s
backend:
  gpus: 3
  load-model: [a, b]
frontend:
  nonsense-for-the-frontend: 1
`)
	for _, tc := range []struct {
		name  string
		args  []string
		env   map[string]string
		addr  string
		src   Source
		gpus  int
		drain time.Duration
	}{
		{"flag wins", []string{"--config", file, "--metrics-addr", "flag:1"}, map[string]string{"SYMPHONY_METRICS_ADDR": "env:1"}, "flag:1", FromFlag, 3, 5 * time.Second},
		{"environment over file", []string{"--config", file}, map[string]string{"SYMPHONY_METRICS_ADDR": "env:1", "SYMPHONY_DRAIN": "7s"}, "env:1", FromEnv, 3, 7 * time.Second},
		{"file", []string{"--config", file}, nil, "file:1", FromFile, 3, 5 * time.Second},
		{"file named by the environment", nil, map[string]string{ConfigEnv: file}, "file:1", FromFile, 3, 5 * time.Second},
		{"default", nil, nil, "", FromDefault, 1, 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCommand("backend")
			if _, done, err := c.run(t, tc.args, tc.env); err != nil || done {
				t.Fatalf("done %v, err %v", done, err)
			}
			if *c.addr != tc.addr || c.common.Resolved().Source("metrics-addr") != tc.src {
				t.Errorf("metrics-addr %q from %s; want %q from %s", *c.addr, c.common.Resolved().Source("metrics-addr"), tc.addr, tc.src)
			}
			if *c.gpus != tc.gpus || *c.drain != tc.drain {
				t.Errorf("gpus %d, drain %v; want %d, %v", *c.gpus, *c.drain, tc.gpus, tc.drain)
			}
			if tc.src == FromFile && c.loads.String() != "a,b" {
				t.Errorf("load-model %q, want the list a,b", c.loads)
			}
		})
	}
}

// Mistakes in a file or the environment are errors that name the key, the
// line and the file; nothing is silently ignored.
func TestConfigErrorsNameTheProblem(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		env        map[string]string
		want       string
	}{
		{"unknown key", "gpuz: 2\n", nil, `line 1: gpuz is not a flag of backend`},
		{"unknown key in own section", "backend:\n  addr: x\n", nil, `line 2: backend.addr is not a flag of backend`},
		{"bad value", "gpus: many\n", nil, `gpus: "many"`},
		{"bad env value", "", map[string]string{"SYMPHONY_GPUS": "many"}, `SYMPHONY_GPUS="many" (for --gpus)`},
		{"command-line only", "version: true\n", nil, `version: only the command line sets it`},
		{"not a mapping", "- gpus\n", nil, `want a mapping`},
		{"section not a mapping", "backend: 3\n", nil, `section backend: want a mapping`},
		{"nested value", "gpus: {a: 1}\n", nil, `gpus: want a value or a list`},
		{"duplicate", "gpus: 1\ngpus: 2\n", nil, `gpus given twice`},
		{"not YAML", "gpus: [1\n", nil, `not YAML`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCommand("backend")
			_, _, err := c.run(t, []string{"--config", writeFile(t, tc.file)}, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want it to say %q", err, tc.want)
			}
		})
	}
	c := newCommand("backend")
	if _, _, err := c.run(t, []string{"--config", filepath.Join(t.TempDir(), "missing.yaml")}, nil); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
}

// An empty file sets nothing, and is no error.
func TestEmptyConfigFile(t *testing.T) {
	for _, text := range []string{"", "# nothing\n", "~\n"} {
		c := newCommand("backend")
		if _, _, err := c.run(t, []string{"--config", writeFile(t, text)}, nil); err != nil || *c.gpus != 1 {
			t.Errorf("%q: gpus %d, err %v", text, *c.gpus, err)
		}
	}
}

// --print-config prints a file that, read back, gives the same values.
func TestPrintConfigReadsBack(t *testing.T) {
	c := newCommand("frontend")
	out, done, err := c.run(t, []string{"--print-config", "--gpus", "4", "--metrics=false", "--load-model", "x"},
		map[string]string{"SYMPHONY_DRAIN": "9s", "SYMPHONY_METRICS_ADDR": "127.0.0.1:0"})
	if err != nil || !done {
		t.Fatalf("done %v, err %v", done, err)
	}
	for _, want := range []string{"frontend:", "gpus: 4 # flag", "drain: 9s # environment SYMPHONY_DRAIN", "log-format: console # default", "pprof-addr: 127.0.0.1:0 # default", "load-model: [x] # flag"} {
		if !strings.Contains(out, want) {
			t.Errorf("printed config lacks %q:\n%s", want, out)
		}
	}
	back := newCommand("frontend")
	if _, _, err := back.run(t, []string{"--config", writeFile(t, out)}, nil); err != nil {
		t.Fatalf("reading the printed config back: %v\n%s", err, out)
	}
	if *back.gpus != 4 || strings.Join(back.loads, ",") != "x" || *back.drain != 9*time.Second || *back.enabled || *back.addr != "127.0.0.1:0" {
		t.Errorf("read back gpus %d drain %v metrics %v addr %q", *back.gpus, *back.drain, *back.enabled, *back.addr)
	}
}

// --version prints one line naming the Go version, and the command stops.
func TestVersion(t *testing.T) {
	c := newCommand("scheduler")
	out, done, err := c.run(t, []string{"--version"}, nil)
	if err != nil || !done || !strings.HasPrefix(out, "symphony ") || !strings.Contains(out, ReadBuild().GoVersion) || strings.Count(out, "\n") != 1 {
		t.Errorf("done %v, err %v, %q", done, err, out)
	}
	b := Build{Version: "(devel)", Revision: "0123456789abcdef", Time: "2026-11-27T16:00:00Z", Modified: true, GoVersion: "go1.26.8"}
	if s := b.String(); !strings.HasPrefix(s, "symphony (devel) commit 0123456789ab (2026-11-27T16:00:00Z, modified), go1.26.8 ") {
		t.Errorf("%q", s)
	}
}

// Both log formats carry the full UTC time; JSON lines are JSON.
func TestLogFormats(t *testing.T) {
	at := time.Date(2026, 11, 27, 16, 0, 0, 123456000, time.FixedZone("CET", 3600))
	now := func() time.Time { return at }
	var js bytes.Buffer
	log := NewLogger(&js, LogJSON, false, now)
	log.Info().Str("model", "m").Msg("hello")
	log.Debug().Msg("hidden")
	var line map[string]any
	if err := json.Unmarshal(js.Bytes(), &line); err != nil {
		t.Fatalf("%v: %q", err, js.String())
	}
	if line["time"] != "2026-11-27T15:00:00.123456Z" || line["message"] != "hello" || line["model"] != "m" || line["level"] != "info" {
		t.Errorf("%v", line)
	}
	var con bytes.Buffer
	clog := NewLogger(&con, LogConsole, true, now)
	clog.Debug().Msg("shown")
	if !strings.HasPrefix(con.String(), "2026-11-27T15:00:00.123456Z DBG shown") {
		t.Errorf("%q", con.String())
	}
	var f LogFormat
	if err := f.UnmarshalText([]byte("xml")); err == nil {
		t.Error("xml accepted")
	}
}

// The probes answer 200 or 503 with the reason, and a probe that hangs
// fails rather than hanging the endpoint.
func TestProbes(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	h := Health{
		Live:  func(context.Context) error { <-block; return nil },
		Ready: func(context.Context) error { return errors.New("draining") },
	}
	srv := httptest.NewServer(AdminMux(h, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "m 1\n") })))
	defer srv.Close()
	for _, tc := range []struct {
		path   string
		status int
		body   string
	}{
		{"/livez", 503, "not ok: no answer within"},
		{"/readyz", 503, "not ok: draining"},
		{"/metrics", 200, "m 1"},
	} {
		resp, err := http.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.HasPrefix(string(b), tc.body) {
			t.Errorf("%s: %d %q; want %d %q", tc.path, resp.StatusCode, b, tc.status, tc.body)
		}
	}
	ok := httptest.NewServer(AdminMux(Health{}, nil))
	defer ok.Close()
	resp, err := http.Get(ok.URL + "/readyz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	resp.Body.Close()
	// A ready process's status follows the ok; /livez has none.
	st := httptest.NewServer(AdminMux(Health{Status: func() string { return "standby for part 0" }}, nil))
	defer st.Close()
	for path, want := range map[string]string{"/readyz": "ok: standby for part 0\n", "/livez": "ok\n"} {
		resp, err := http.Get(st.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != want {
			t.Errorf("%s: %d %q; want 200 %q", path, resp.StatusCode, b, want)
		}
	}
	if resp, _ := http.Get(ok.URL + "/metrics"); resp.StatusCode != 404 {
		t.Errorf("/metrics without a handler: %d", resp.StatusCode)
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:0": true, "[::1]:80": true, "localhost:6060": true, "0.0.0.0:6060": false, ":6060": false, "10.0.0.1:1": false, "nonsense": false} {
		if IsLoopback(addr) != want {
			t.Errorf("%s: %v", addr, !want)
		}
	}
}

// The profiles are served on their own loopback address.
func TestServePprof(t *testing.T) {
	c := newCommand("backend")
	if _, _, err := c.run(t, nil, nil); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	srv, err := c.common.ServePprof(NewLogger(&logs, LogJSON, false, time.Now))
	if err != nil {
		t.Fatal(err)
	}
	defer Shutdown(srv, time.Second)
	var line struct{ URL string }
	if err := json.Unmarshal(logs.Bytes(), &line); err != nil || !strings.HasPrefix(line.URL, "http://127.0.0.1:") {
		t.Fatalf("%v %q", err, logs.String())
	}
	resp, err := http.Get(line.URL + "cmdline")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	resp.Body.Close()
	c.common.PprofAddr = ""
	if srv, err := c.common.ServePprof(NewLogger(io.Discard, LogJSON, false, time.Now)); srv != nil || err != nil {
		t.Errorf("off: %v %v", srv, err)
	}
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The helpers of the tests that run symphony's processes: the binaries,
// built once, and processes whose stdout lines the tests wait on.

// built is the symphony and symphony-bench binaries, built once for all
// the tests that run them as processes, into a folder TestMain removes.
var built struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// buildSymphony returns the production binary, built (once per test
// binary) beside this harness as make build leaves them: its bench
// commands run the harness beside it. It is built without -race, whatever
// the tests run with.
func buildSymphony(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "symphony-bin-")
		if err != nil {
			built.err = err
			return
		}
		built.dir = dir
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		for _, b := range []struct{ name, pkg string }{{"symphony", "../symphony"}, {"symphony-bench", "."}} {
			// go test puts its own GOROOT/bin first on PATH.
			cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, b.name), b.pkg)
			if out, err := cmd.CombinedOutput(); err != nil {
				built.err = fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
				return
			}
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return filepath.Join(built.dir, "symphony")
}

// proc is one long-running symphony process: its stdout lines arrive on
// lines, its stderr is kept for failure messages.
type proc struct {
	name   string
	cmd    *exec.Cmd
	stderr lockedBuffer
	lines  chan string
	done   chan struct{} // closed once the process has exited and been waited for
	err    error         // cmd.Wait's, valid after done
}

// procSet is the processes a test starts from one binary: if the test
// fails, each logs its stderr.
type procSet struct {
	t     *testing.T
	bin   string
	procs []*proc // in the order started
}

func newProcSet(t *testing.T, bin string) *procSet {
	s := &procSet{t: t, bin: bin}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range s.procs {
				t.Logf("%s stderr:\n%s", p.name, p.stderr.String())
			}
		}
	})
	return s
}

// stopAll sends each process SIGTERM, newest first, and fails the test
// unless each then exits by itself with status 0 within timeout (of all
// of them together).
func (s *procSet) stopAll(timeout time.Duration) {
	t := s.t
	t.Helper()
	for i := len(s.procs) - 1; i >= 0; i-- {
		s.procs[i].signal(t, syscall.SIGTERM)
	}
	deadline := time.Now().Add(timeout)
	for i := len(s.procs) - 1; i >= 0; i-- {
		p := s.procs[i]
		if code := p.wait(t, time.Until(deadline)); code != 0 {
			t.Errorf("%s exited with status %d after SIGTERM, want 0", p.name, code)
		}
	}
}

// start starts the binary with args as the process called name.
func (s *procSet) start(name string, args ...string) *proc {
	p := startProc(s.t, name, s.bin, args...)
	s.procs = append(s.procs, p)
	return p
}

func startProc(t *testing.T, name, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(bin, args...), lines: make(chan string, 64), done: make(chan struct{})}
	p.cmd.Stderr = &p.stderr
	// A frontend serves gRPC on Triton's fixed port by default, which a
	// developer's own frontend, or another test's, may hold: the tests'
	// frontends take a free one unless a test names its own.
	p.cmd.Env = append(os.Environ(), "SYMPHONY_GRPC_ADDR=127.0.0.1:0")
	// Its own process group, so that the cleanup ends whatever it started.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default: // nobody waits for more lines: drop them
			}
		}
		close(p.lines)
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	// Whatever happens to the test, no process outlives it.
	t.Cleanup(func() {
		select {
		case <-p.done:
			return
		default:
		}
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			t.Errorf("%s (pid %d) still running 10s after SIGKILL", p.name, p.cmd.Process.Pid)
		}
	})
	return p
}

// waitLine waits up to timeout for a stdout line matching re and returns
// its submatches; it fails the test if the process exits first.
func (p *proc) waitLine(t *testing.T, re *regexp.Regexp, timeout time.Duration) []string {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				<-p.done
				t.Fatalf("%s exited (%v) before printing a line matching %q; stderr:\n%s", p.name, p.err, re, p.stderr.String())
			}
			if m := re.FindStringSubmatch(line); m != nil {
				return m
			}
		case <-timer.C:
			t.Fatalf("%s printed no line matching %q within %v; stderr:\n%s", p.name, re, timeout, p.stderr.String())
		}
	}
}

func (p *proc) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Errorf("%s: signal %v: %v", p.name, sig, err)
	}
}

// wait waits up to timeout for the process to exit and returns its exit
// status; past the timeout it kills the process and fails the test.
func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(max(timeout, 0)):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("%s did not exit within %v of SIGTERM; killed", p.name, timeout.Round(time.Millisecond))
		return -1
	}
}

// waitHTTPReady polls each path of the gateway at base until it answers
// 200, for at most 10 seconds in all.
func waitHTTPReady(t *testing.T, hc *http.Client, base string, paths ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for _, path := range paths {
		last := ""
		for {
			resp, err := hc.Get(base + path)
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
				last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(b))
			} else {
				last = err.Error()
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET %s%s: not ready after 10s: %s", base, path, last)
			}
			<-tick.C
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for a process's stderr copier and
// the test's readers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

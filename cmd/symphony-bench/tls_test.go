package main

import (
	"context"
	"crypto/tls"
	"errors"
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

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/tcp"
	"github.com/symphony-serving/symphony/transport/tlsnet"
	"github.com/symphony-serving/symphony/transport/wire"
)

// TestMutualTLSCluster runs a scheduler, a backend and a frontend with the
// certificates `symphony certs` makes, gets an inference answered through
// the gateway (the backend pulls its input from the frontend over mutual
// TLS too), and shows that peers without a valid certificate are refused,
// counted and logged: a TLS client without a certificate, a plaintext
// dialer, a dialer whose certificate another CA signed, a backend started
// without TLS and a frontend of another cluster.
func TestMutualTLSCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a cluster of processes")
	}
	bin := buildSymphony(t)
	dir := t.TempDir()
	certs, other := filepath.Join(dir, "certs"), filepath.Join(dir, "other")
	for _, d := range []string{certs, other} {
		out, err := exec.Command(bin, "certs", "--out", d, "--days", "2").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--tls-ca "+filepath.Join(d, "ca.crt")) {
			t.Fatalf("symphony certs --out %s: %v\n%s", d, err, out)
		}
	}
	for _, f := range []string{"ca.key", "scheduler.key", "backend.key", "frontend.key"} {
		if fi, err := os.Stat(filepath.Join(certs, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", f, err, fi.Mode().Perm())
		}
	}
	if out, err := exec.Command(bin, "certs", "--out", certs).CombinedOutput(); err == nil || !strings.Contains(string(out), "exists") {
		t.Errorf("certs into a folder that has them: %v, %s; want a refusal to overwrite", err, out)
	}
	tlsFlags := func(d, role string) []string {
		return []string{"--tls-ca", filepath.Join(d, "ca.crt"), "--tls-cert", filepath.Join(d, role+".crt"), "--tls-key", filepath.Join(d, role+".key")}
	}

	ps := newProcSet(t, bin)
	sched := ps.start("scheduler", append([]string{"scheduler", "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0"}, tlsFlags(certs, "scheduler")...)...)
	addr := sched.waitLine(t, regexp.MustCompile(`^scheduler listening on (\S+) `), 15*time.Second)[1]
	schedMetrics := sched.waitLine(t, regexp.MustCompile(`^metrics on (http://\S+)$`), 15*time.Second)[1]
	back := ps.start("backend", append([]string{"backend", "--scheduler", addr, "--gpus", "2", "--name", "b1"}, tlsFlags(certs, "backend")...)...)
	front := ps.start("frontend", append([]string{"frontend", "--scheduler", addr, "--http-addr", "127.0.0.1:0", "--name", "f1"}, tlsFlags(certs, "frontend")...)...)
	back.waitLine(t, regexp.MustCompile(`^backend b1 registered 2 GPUs with `), 15*time.Second)
	m := front.waitLine(t, regexp.MustCompile(`^frontend f1: KServe v2 gateway on (http://\S+), inputs served on (\S+),`), 15*time.Second)
	gw, dataAddr := m[1], m[2]
	hc := &http.Client{Timeout: 5 * time.Second}
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
		answered = resp.StatusCode == http.StatusOK
		if !answered && resp.StatusCode != http.StatusServiceUnavailable && resp.StatusCode != http.StatusGatewayTimeout {
			t.Fatalf("infer: %d %s", resp.StatusCode, body)
		}
	}
	if !answered {
		t.Fatal("10 requests in a row dropped")
	}
	for _, p := range []*proc{sched, back, front} {
		if s := p.stderr.String(); strings.Contains(s, "insecure") || !strings.Contains(s, "mutual TLS") {
			t.Errorf("%s: its log does not say it runs mutual TLS:\n%s", p.name, s)
		}
	}

	// Raw clients, one at a time, each refusal waited for in the
	// listener's log before the next (a burst of them would be
	// rate-limited).
	good, ca, err := tlsnet.LoadCredentials(filepath.Join(certs, "ca.crt"), filepath.Join(certs, "backend.crt"), filepath.Join(certs, "backend.key"))
	if err != nil {
		t.Fatal(err)
	}
	intruder, _, err := tlsnet.LoadCredentials(filepath.Join(other, "ca.crt"), filepath.Join(other, "backend.crt"), filepath.Join(other, "backend.key"))
	if err != nil {
		t.Fatal(err)
	}
	hello := &wire.Hello{Version: wire.Version, Role: wire.RoleBackend, Name: "intruder", DataAddr: "x", GPUs: 1}
	dial := func(n transport.Network, addr string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, _, err := n.Dial(ctx, addr, hello, nil)
		if err == nil {
			c.Close(nil)
		}
		return err
	}
	for name, listener := range map[string]*proc{addr: sched, dataAddr: front} {
		c, err := tls.Dial("tcp", name, &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: ca})
		if err != nil {
			t.Fatalf("TLS dial of %s without a certificate: the client's half of the handshake failed: %v", name, err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || !strings.Contains(err.Error(), "certificate required") {
			t.Errorf("TLS client without a certificate, to the %s: read %v; want a certificate required alert", listener.name, err)
		}
		waitStderr(t, listener, "TLS handshake refused: remote "+c.LocalAddr().String()+": client didn't provide a certificate")
		c.Close()
	}
	plain := tcp.New(tcp.Default())
	defer plain.Close()
	var rej *transport.RejectedError
	if err := dial(plain, addr); !errors.As(err, &rej) || !strings.Contains(rej.Reason, "requires mutual TLS") {
		t.Errorf("plaintext dial: %v; want a Reject saying that mutual TLS is required", err)
	}
	waitStderr(t, sched, "TLS handshake refused: remote 127.0.0.1:", "not TLS")
	if err := dial(tlsnet.New(tlsnet.Options{Certificate: intruder, CA: ca}), addr); err == nil || !strings.Contains(err.Error(), "refused this dialer's certificate") {
		t.Errorf("a dialer with another CA's certificate: %v; want a refusal", err)
	}
	waitStderr(t, sched, "TLS handshake refused: remote 127.0.0.1:", "certificate signed by unknown authority")
	if err := dial(tlsnet.New(tlsnet.Options{Certificate: good, CA: ca}), addr); err != nil {
		t.Errorf("a dialer of the cluster: %v", err)
	}

	// Processes without a valid certificate: never registered, and each
	// says why.
	plainBack := ps.start("backend without TLS", "backend", "--scheduler", addr, "--gpus", "1", "--name", "plain")
	foreignFront := ps.start("frontend of another cluster", append([]string{"frontend", "--scheduler", addr, "--http-addr", "127.0.0.1:0", "--name", "foreign"}, tlsFlags(other, "frontend")...)...)
	waitStderr(t, plainBack, "insecure: connections are neither encrypted nor authenticated")
	waitStderr(t, plainBack, "this listener requires mutual TLS")
	waitStderr(t, foreignFront, "certificate signed by unknown authority")

	// The scheduler counted every refusal (two raw TLS handshakes, the
	// plaintext dial, the foreign dialer, and at least one each of the two
	// processes); the frontend its one.
	waitCounter(t, hc, schedMetrics, "symphony_scheduler_tls_refused_total", 5)
	waitCounter(t, hc, gw+"/metrics", "symphony_frontend_tls_refused_total", 1)
	ps.stopAll(30 * time.Second)
}

// waitStderr waits up to 15 seconds for a line of p's stderr that holds
// all of subs.
func waitStderr(t *testing.T, p *proc, subs ...string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, line := range strings.Split(p.stderr.String(), "\n") {
			all := true
			for _, s := range subs {
				all = all && strings.Contains(line, s)
			}
			if all {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s logged no line with %q within 15s; stderr:\n%s", p.name, subs, p.stderr.String())
		}
		<-tick.C
	}
}

// waitCounter waits up to 10 seconds for the counter name at url to reach
// at least want.
func waitCounter(t *testing.T, hc *http.Client, url, name string, want float64) {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`)
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	last := "no scrape"
	for {
		resp, err := hc.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if m := re.FindStringSubmatch(string(b)); m != nil {
				v, _ := strconv.ParseFloat(m[1], 64)
				if v >= want {
					return
				}
				last = m[0]
			} else {
				last = name + " missing"
			}
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: want %s at least %v within 10s; last: %s", url, name, want, last)
		}
		<-tick.C
	}
}

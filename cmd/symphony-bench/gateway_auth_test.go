package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
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

// A frontend started with --gateway-tls-cert/--gateway-tls-key and
// --gateway-tls-client-ca serves the gateway over mutual TLS, and with
// --gateway-token-file asks for a bearer token: a client with the CA's
// certificate and the token is answered; without the token it gets 401;
// without a client certificate its handshake fails; in plaintext it gets
// no answer. /readyz needs no token.
func TestGatewayTLSAndTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a cluster of processes")
	}
	bin := buildSymphony(t)
	dir := t.TempDir()
	certs := filepath.Join(dir, "certs")
	if out, err := exec.Command(bin, "certs", "--out", certs, "--days", "2").CombinedOutput(); err != nil {
		t.Fatalf("symphony certs: %v\n%s", err, out)
	}
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("# clients\ns3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ps := newProcSet(t, bin)
	sched := ps.start("scheduler", "scheduler", "--addr", "127.0.0.1:0", "--insecure")
	addr := sched.waitLine(t, regexp.MustCompile(`^scheduler listening on (\S+) `), 15*time.Second)[1]
	ps.start("backend", "backend", "--scheduler", addr, "--gpus", "2", "--name", "b1", "--insecure")
	front := ps.start("frontend", "frontend", "--scheduler", addr, "--http-addr", "127.0.0.1:0", "--name", "f1",
		"--gateway-tls-cert", filepath.Join(certs, "frontend.crt"), "--gateway-tls-key", filepath.Join(certs, "frontend.key"),
		"--gateway-tls-client-ca", filepath.Join(certs, "ca.crt"), "--gateway-token-file", tokens)
	gw := front.waitLine(t, regexp.MustCompile(`^frontend f1: KServe v2 gateway on (https://\S+),`), 15*time.Second)[1]

	caPEM, err := os.ReadFile(filepath.Join(certs, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client, err := tls.LoadX509KeyPair(filepath.Join(certs, "backend.crt"), filepath.Join(certs, "backend.key"))
	if err != nil {
		t.Fatal(err)
	}
	withCert := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{client}}}}
	noCert := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	waitHTTPReady(t, withCert, gw, "/readyz")

	infer := func(hc *http.Client, token string) (int, string, error) {
		req, _ := http.NewRequest("POST", gw+"/v2/models/MobileNet/infer",
			strings.NewReader(`{"inputs":[{"name":"input0","datatype":"UINT8","shape":[4],"data":[1,2,3,4]}]}`))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	answered := false
	for try := 0; try < 10 && !answered; try++ { // a lone request on a busy machine may miss its SLO: 503 or 504
		code, body, err := infer(withCert, "s3cret-token")
		if err != nil {
			t.Fatal(err)
		}
		answered = code == http.StatusOK
		if !answered && code != http.StatusServiceUnavailable && code != http.StatusGatewayTimeout {
			t.Fatalf("infer with the token: %d %s", code, body)
		}
	}
	if !answered {
		t.Fatal("10 requests in a row dropped")
	}
	if code, body, err := infer(withCert, ""); err != nil || code != http.StatusUnauthorized || !strings.Contains(body, "unauthenticated") {
		t.Errorf("without the token: %d %s %v; want 401", code, body, err)
	}
	if code, body, err := infer(withCert, "guess"); err != nil || code != http.StatusUnauthorized {
		t.Errorf("with a wrong token: %d %s %v; want 401", code, body, err)
	}
	if _, _, err := infer(noCert, "s3cret-token"); err == nil {
		t.Error("a client without a certificate was answered")
	}
	plain := &http.Client{Timeout: 5 * time.Second}
	if code, _, err := infer(plain, "s3cret-token"); err == nil && code == http.StatusOK {
		t.Error("a plaintext client was answered")
	}
	ps.stopAll(30 * time.Second)
}

// symphony bench --token-file drives a gateway that asks for a token, over
// HTTP and gRPC; without the token every request fails as unauthenticated.
func TestBenchWithToken(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a cluster of processes")
	}
	bin := buildSymphony(t)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("bench-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wl := filepath.Join(dir, "wl.yaml")
	if err := os.WriteFile(wl, []byte(walkthroughWorkload), 0o644); err != nil {
		t.Fatal(err)
	}
	ps := newProcSet(t, bin)
	sched := ps.start("scheduler", "scheduler", "-f", wl, "--addr", "127.0.0.1:0", "--insecure")
	addr := sched.waitLine(t, regexp.MustCompile(`^scheduler listening on (\S+) `), 15*time.Second)[1]
	ps.start("backend", "backend", "--scheduler", addr, "--gpus", "4", "--name", "b1", "--insecure")
	front := ps.start("frontend", "frontend", "--scheduler", addr, "--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0",
		"--name", "f1", "--insecure", "--gateway-token-file", tokens)
	m := front.waitLine(t, regexp.MustCompile(`^frontend f1: KServe v2 gateway on (http://\S+),.*; gRPC on (\S+)$`), 15*time.Second)
	gw, grpcAddr := m[1], m[2]
	waitHTTPReady(t, &http.Client{Timeout: 5 * time.Second}, gw, "/v2/models/ResNet50/ready", "/v2/models/MobileNet/ready")
	bench := func(args ...string) (good, failed uint64, out string) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"bench", "-f", wl, "--duration", "1s", "--warmup", "200ms", "--json", "--quiet"}, args...)...)
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("bench %v: %v\n%s", args, err, b)
		}
		var r struct{ Good, Failed uint64 }
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("bench %v: %v\n%s", args, err, b)
		}
		return r.Good, r.Failed, string(b)
	}
	for _, target := range [][]string{{"--gateway", gw}, {"--grpc", grpcAddr}} {
		if good, failed, out := bench(append(target, "--token-file", tokens)...); good == 0 || failed != 0 {
			t.Errorf("%v with the token: %d good, %d failed\n%s", target, good, failed, out)
		}
		if good, failed, out := bench(target...); good != 0 || failed == 0 || !strings.Contains(out, "unauthenticated") {
			t.Errorf("%v without the token: %d good, %d failed, want all failed as unauthenticated\n%s", target, good, failed, out[strings.Index(out, "drop_reasons"):min(len(out), strings.Index(out, "drop_reasons")+300)])
		}
	}
	ps.stopAll(30 * time.Second)
}

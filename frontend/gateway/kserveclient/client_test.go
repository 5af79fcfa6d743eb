package kserveclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/frontend/gateway"
)

// fixed is a gateway Inferer that ends every request for "m" with err, or
// answers it with its input reversed, run in a batch of 4, when err is
// nil; the cluster is connected unless down.
type fixed struct {
	err  error
	down bool
}

func (f fixed) Infer(ctx context.Context, model string, input []byte, deadline time.Time) ([]byte, error) {
	out, _, err := f.InferTimed(ctx, model, input, deadline)
	return out, err
}

func (f fixed) InferTimed(_ context.Context, _ string, input []byte, _ time.Time) ([]byte, gateway.Batch, error) {
	if f.err != nil {
		return nil, gateway.Batch{}, f.err
	}
	out := make([]byte, len(input))
	for i, b := range input {
		out[len(input)-1-i] = b
	}
	return out, gateway.Batch{Size: 4, Started: time.Unix(100, 0), Finished: time.Unix(100, 5e6)}, nil
}

func (f fixed) Model(name string) (gateway.ModelInfo, bool) {
	return gateway.ModelInfo{Name: name, SLO: 25 * time.Millisecond, Ready: !f.down}, name == "m"
}

func (f fixed) Ready() bool { return !f.down }

// serve starts a gateway in front of inf and returns a client of it.
func serve(t testing.TB, inf gateway.Inferer) *Client {
	t.Helper()
	gw, err := gateway.New(inf, gateway.Default())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	c, err := New(srv.URL+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNewTakesHTTPURLsOnly(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8000", "ftp://h/", "http://", "http://h:80/%zz"} {
		if _, err := New(u, nil); err == nil {
			t.Errorf("New(%q) took it", u)
		}
	}
	c, err := New("https://h:8443/prefix/", nil)
	if err != nil || c.URL() != "https://h:8443/prefix" {
		t.Errorf("New: %v, URL %q", err, c.URL())
	}
}

// A request through a Symphony gateway returns its output and the batch
// it ran in; the readiness and metadata endpoints read as the gateway
// says.
func TestInferThroughTheGateway(t *testing.T) {
	ctx := context.Background()
	c := serve(t, fixed{})
	out, b, err := c.Infer(ctx, "m", []byte{1, 2, 3})
	if err != nil || string(out) != "\x03\x02\x01" {
		t.Fatalf("Infer: %v %v", out, err)
	}
	if b.Size != 4 || !b.Started.Equal(time.Unix(100, 0)) || b.Finished.Sub(b.Started) != 5*time.Millisecond {
		t.Errorf("batch %+v", b)
	}
	if ok, err := c.ServerReady(ctx); !ok || err != nil {
		t.Errorf("ServerReady: %v %v", ok, err)
	}
	if ok, err := c.ModelReady(ctx, "m"); !ok || err != nil {
		t.Errorf("ModelReady: %v %v", ok, err)
	}
	if md, err := c.ModelMetadata(ctx, "m"); err != nil || md != (Metadata{Name: "m", Platform: "symphony", SLO: 25 * time.Millisecond}) {
		t.Errorf("ModelMetadata: %+v %v", md, err)
	}
	// An empty input is a request like any other.
	if out, _, err := c.Infer(ctx, "m", nil); err != nil || len(out) != 0 {
		t.Errorf("empty input: %v %v", out, err)
	}

	down := serve(t, fixed{down: true})
	if ok, err := down.ServerReady(ctx); ok || err != nil {
		t.Errorf("ServerReady of a disconnected frontend: %v %v", ok, err)
	}
	if ok, err := down.ModelReady(ctx, "m"); ok || err != nil {
		t.Errorf("ModelReady of a disconnected frontend: %v %v", ok, err)
	}
	var e *Error
	if ok, err := c.ModelReady(ctx, "other"); ok || !errors.As(err, &e) || e.Status != http.StatusNotFound || !errors.Is(err, frontend.ErrUnknownModel) {
		t.Errorf("ModelReady of an unknown model: %v %v", ok, err)
	}
	if _, err := c.ModelMetadata(ctx, "other"); !errors.Is(err, frontend.ErrUnknownModel) {
		t.Errorf("ModelMetadata of an unknown model: %v", err)
	}
}

// Every error answer keeps its status, the gateway's reason and its
// Retry-After hint, and unwraps to the frontend's typed error.
func TestErrorsKeepTheGatewaysReasons(t *testing.T) {
	for _, tc := range []struct {
		model  string
		err    error
		status int
		reason string
		retry  time.Duration
		is     func(error) bool
	}{
		{"m", &frontend.DropError{Model: "m", Reason: frontend.DropOverload}, 503, "drop: overload", time.Second,
			func(err error) bool { r, ok := frontend.IsDrop(err); return ok && r == frontend.DropOverload }},
		{"m", &frontend.DropError{Model: "m", Reason: frontend.DropExpired}, 504, "drop: expired", 0,
			func(err error) bool { r, ok := frontend.IsDrop(err); return ok && r == frontend.DropExpired }},
		{"m", frontend.ErrSchedulerLost, 503, gateway.ReasonSchedulerLost, time.Second,
			func(err error) bool { return errors.Is(err, frontend.ErrSchedulerLost) }},
		{"m", frontend.ErrClosed, 503, gateway.ReasonClosed, 0,
			func(err error) bool { return errors.Is(err, frontend.ErrClosed) }},
		{"m", fmt.Errorf("%w: clock skew", frontend.ErrRefused), 500, gateway.ReasonRefused, 0,
			func(err error) bool { return errors.Is(err, frontend.ErrRefused) }},
		{"m", &frontend.BackendError{Model: "m", Cause: "input unavailable: pulled too late"}, 502, "backend: input unavailable", 0,
			func(err error) bool {
				var be *frontend.BackendError
				return errors.As(err, &be) && strings.HasPrefix(be.Cause, "input unavailable: ")
			}},
		{"other", fmt.Errorf("%w %q", frontend.ErrUnknownModel, "other"), 404, gateway.ReasonUnknownModel, 0,
			func(err error) bool { return errors.Is(err, frontend.ErrUnknownModel) }},
		{"m", errors.New("disk on fire"), 500, gateway.ReasonInternal, 0,
			func(err error) bool {
				var se *gateway.StatusError
				return errors.As(err, &se) && se.Reason == gateway.ReasonInternal
			}},
	} {
		c := serve(t, fixed{err: tc.err})
		_, _, err := c.Infer(context.Background(), tc.model, []byte{1})
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%v: %T %v, want an *Error", tc.err, err, err)
			continue
		}
		if e.Model != tc.model || e.Status != tc.status || e.Reason != tc.reason || e.RetryAfter != tc.retry || e.Message == "" || !tc.is(err) {
			t.Errorf("%v: %+v (%v); want status %d, reason %q, Retry-After %v", tc.err, e, err, tc.status, tc.reason, tc.retry)
		}
	}
}

// A server other than Symphony's: errors without a reason, and an answer
// in the JSON form although the request asked for binary data.
func TestStockServer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v2/models/json/infer":
			_, _ = w.Write([]byte(`{"model_name":"json","outputs":[{"name":"o","datatype":"UINT8","shape":[3],"data":[7,8,255]}]}`))
		case "/v2/models/wide/infer":
			_, _ = w.Write([]byte(`{"outputs":[{"name":"o","datatype":"INT32","shape":[1],"data":[4096]}]}`))
		case "/v2/models/plain/infer":
			http.Error(w, "no such thing here", http.StatusNotFound)
		case "/v2/models/busy/infer":
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":"try later"}`))
		}
	}))
	defer srv.Close()
	c, err := New(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if out, b, err := c.Infer(ctx, "json", []byte{1}); err != nil || string(out) != "\x07\x08\xff" || b != (gateway.Batch{}) {
		t.Errorf("JSON answer: %v %+v %v", out, b, err)
	}
	if _, _, err := c.Infer(ctx, "wide", []byte{1}); err == nil {
		t.Error("an output element past a byte was taken")
	}
	var e *Error
	var se *gateway.StatusError
	if _, _, err := c.Infer(ctx, "plain", []byte{1}); !errors.As(err, &e) || e.Status != 404 || e.Reason != "" || e.Message != "no such thing here" || !errors.As(err, &se) {
		t.Errorf("plain-text error: %#v", err)
	}
	if _, _, err := c.Infer(ctx, "busy", []byte{1}); !errors.As(err, &e) || e.Status != 503 || e.Reason != "" || e.Message != "try later" || e.RetryAfter != 3*time.Second {
		t.Errorf("error without a reason: %#v", err)
	}
}

// A request that got no answer is a canceled drop if its caller canceled
// it, as with the embedded client, and a *NoAnswerError otherwise.
func TestNoAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	c, err := New("http://"+addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	var na *NoAnswerError
	if _, _, err := c.Infer(context.Background(), "m", []byte{1}); !errors.As(err, &na) || na.URL != "http://"+addr || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("refused connection: %#v", err)
	}
	if _, err := c.ServerReady(context.Background()); !errors.As(err, &na) {
		t.Errorf("ServerReady of a server that is down: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := c.Infer(ctx, "m", []byte{1}); !isCanceledDrop(err) {
		t.Errorf("canceled request: %v", err)
	}
}

func isCanceledDrop(err error) bool {
	r, ok := frontend.IsDrop(err)
	return ok && r == frontend.DropCanceled
}

// An answer that announces a body longer than it sends is an error, not
// a short output.
func TestTruncatedAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		_, _ = w.Write([]byte("short"))
	}))
	defer srv.Close()
	c, err := New(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	var na *NoAnswerError
	if _, _, err := c.Infer(context.Background(), "m", []byte{1}); !errors.As(err, &na) {
		t.Errorf("truncated answer: %v", err)
	}
}

// echo is an Inferer that answers every request with its input at once,
// so that a benchmark measures the HTTP path alone.
type echo struct{}

func (echo) Infer(_ context.Context, _ string, input []byte, _ time.Time) ([]byte, error) {
	return input, nil
}
func (echo) Ready() bool { return true }
func (echo) Model(name string) (gateway.ModelInfo, bool) {
	return gateway.ModelInfo{Name: name, SLO: time.Second, Ready: true}, true
}

// BenchmarkGatewayRoundTrip is the CPU the gateway path adds to a
// request, client and server side together: a Client posting a 1 KiB
// input (the demo's) to a gateway served as `symphony frontend` serves it,
// in front of an Inferer that answers at once, from 16 requests at a time.
//
//	go test -run '^$' -bench GatewayRoundTrip -benchmem -cpu 2 ./frontend/gateway/kserveclient/
func BenchmarkGatewayRoundTrip(b *testing.B) {
	gw, err := gateway.New(echo{}, gateway.Default())
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := gw.Server(gw)
	go func() { _ = srv.Serve(gw.Listener(ln)) }()
	defer srv.Close()
	c, err := New("http://"+ln.Addr().String(), nil)
	if err != nil {
		b.Fatal(err)
	}
	input := make([]byte, 1024)
	b.SetParallelism(8)
	cpu := processCPU(b)
	b.ResetTimer()
	defer func() { b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op") }()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			out, _, err := c.Infer(context.Background(), "m", input)
			if err != nil || len(out) != len(input) {
				b.Errorf("%d bytes, %v", len(out), err)
				return
			}
		}
	})
}

// processCPU is the CPU time the process has used, user and system: on a
// shared 2-core machine, what a request costs is its CPU, which its wall
// time per op hides when the cores are not saturated.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A client with a bearer token is answered by a gateway that asks for one;
// the same client without it gets the gateway's 401, as an *Error with the
// reason unauthenticated.
func TestBearerToken(t *testing.T) {
	toks, err := gateway.NewTokens("s3cret")
	if err != nil {
		t.Fatal(err)
	}
	cfg := gateway.Default()
	cfg.Tokens = toks
	gw, err := gateway.New(fixed{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	plain, err := New(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var e *Error
	if _, _, err := plain.Infer(ctx, "m", []byte{1}); !errors.As(err, &e) || e.Status != http.StatusUnauthorized || e.Reason != gateway.ReasonUnauthenticated {
		t.Errorf("without the token: %v", err)
	}
	withToken := plain.WithBearerToken("s3cret")
	if out, _, err := withToken.Infer(ctx, "m", []byte{1, 2}); err != nil || string(out) != "\x02\x01" {
		t.Errorf("with the token: %q %v", out, err)
	}
	if ok, err := withToken.ModelReady(ctx, "m"); !ok || err != nil {
		t.Errorf("ModelReady with the token: %v %v", ok, err)
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/bench/loadgen"
	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/frontend/gateway"
	"github.com/symphony-serving/symphony/scheduler/profile"
)

// bench --gateway refuses a workload whose SLO differs from the one the
// cluster serves the model with (the gateway's metadata), and takes one
// that agrees.
func TestHTTPTargetChecksTheServedSLO(t *testing.T) {
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v2/models/m/ready":
			w.WriteHeader(http.StatusOK)
		case "/v2/models/m":
			_, _ = w.Write([]byte(`{"name":"m","parameters":{"slo_ms":30}}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer gw.Close()
	for _, tc := range []struct {
		slo     time.Duration
		refused bool
	}{{30 * time.Millisecond, false}, {200 * time.Millisecond, true}} {
		w := &workload.Workload{Source: "w.yaml", Models: []workload.Model{{Name: "m", SLO: tc.slo}}}
		_, err := newHTTPTarget(context.Background(), gw.URL, w)
		if refused := err != nil && strings.Contains(err.Error(), "serves it with 30ms"); refused != tc.refused {
			t.Errorf("SLO %v: err %v, want refused=%v", tc.slo, err, tc.refused)
		}
	}
}

// endings are the ways an embedded client's request can end, one per
// request in turn: every drop reason, backend failures of several kinds,
// and the client's other errors, with answers between them.
var endings = []error{
	nil,
	&frontend.DropError{Model: "m", Reason: frontend.DropDeadline},
	&frontend.DropError{Model: "m", Reason: frontend.DropOverload},
	&frontend.DropError{Model: "m", Reason: frontend.DropShutdown},
	&frontend.DropError{Model: "m", Reason: frontend.DropCanceled},
	&frontend.BackendError{Model: "m", Backend: "b1", Cause: "input unavailable: pulled too late"},
	&frontend.BackendError{Model: "m", Cause: "executor failed"},
	&frontend.DropError{Model: "m", Reason: frontend.DropExpired},
	frontend.ErrNotConnected,
	frontend.ErrSchedulerLost,
	frontend.ErrClosed,
	fmt.Errorf("%w for %q: clock skew?", frontend.ErrRefused, "m"),
	fmt.Errorf("%w: already passed", frontend.ErrBadDeadline),
	nil,
}

// cycler ends its k-th request with endings[k % len(endings)]: as an
// embedded target (Go) and as the Inferer behind a gateway.
type cycler struct{ n atomic.Int64 }

func (c *cycler) next(input []byte) ([]byte, error) {
	if err := endings[(c.n.Add(1)-1)%int64(len(endings))]; err != nil {
		return nil, err
	}
	return input, nil
}

func (c *cycler) Go(_ context.Context, model string, input []byte, _ ...frontend.CallOption) *frontend.Call {
	return frontend.Async(model, func() ([]byte, frontend.Timing, error) {
		out, err := c.next(input)
		return out, frontend.Timing{}, err
	})
}

func (c *cycler) Infer(_ context.Context, _ string, input []byte, _ time.Time) ([]byte, error) {
	return c.next(input)
}

func (c *cycler) Model(name string) (gateway.ModelInfo, bool) {
	return gateway.ModelInfo{Name: name, SLO: time.Second, Ready: true}, name == "m"
}

func (c *cycler) Ready() bool { return true }

// The same endings, through the gateway and httpTarget or from an
// embedded target, give a report with the same drop and failure reasons.
func TestGatewayReportsTheEmbeddedReasons(t *testing.T) {
	w := &workload.Workload{Source: "test", Seed: 3, Duration: 300 * time.Millisecond, Cluster: workload.Cluster{GPUs: 1},
		Models: []workload.Model{{Name: "m", SLO: time.Second, Profile: profile.MustLinear(time.Millisecond, 100*time.Microsecond, 8),
			Rates: []workload.RatePhase{{Rate: 400}}}}}
	reasons := func(target loadgen.Target) []string {
		rep, err := loadgen.Run(context.Background(), target, w, loadgen.Options{InputBytes: func(string) int { return 16 }})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Offered < 2*uint64(len(endings)) {
			t.Fatalf("%d requests offered; the test wants every ending twice", rep.Offered)
		}
		return slices.Sorted(maps.Keys(rep.DropReasons))
	}
	embedded := reasons(&cycler{})
	gw, err := gateway.New(&cycler{}, gateway.Default())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	defer srv.Close()
	target, err := newHTTPTarget(context.Background(), srv.URL, w)
	if err != nil {
		t.Fatal(err)
	}
	remote := reasons(target)
	if !slices.Equal(embedded, remote) {
		t.Fatalf("reasons through the gateway:\n  %q\nembedded:\n  %q", remote, embedded)
	}
	if len(embedded) != len(endings)-2 { // the two answers have no reason
		t.Fatalf("%d reasons for %d endings: %q", len(embedded), len(endings)-2, embedded)
	}
}

// A request that got no answer is a canceled drop if the load generator
// canceled it, as with an embedded client, and a plain error otherwise.
func TestHTTPTargetTransportErrors(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r, ok := frontend.IsDrop(transportError(ctx, "m", context.Canceled)); !ok || r != frontend.DropCanceled {
		t.Errorf("canceled request: %v", transportError(ctx, "m", context.Canceled))
	}
	refused := errors.New("connection refused")
	if err := transportError(context.Background(), "m", refused); !errors.Is(err, refused) || errors.As(err, new(*frontend.BackendError)) {
		t.Errorf("unanswered request: %v", err)
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
// request, client and server side together: httpTarget posting a 1 KiB
// input (the demo's) to a gateway served as `symphony frontend` serves it,
// in front of an Inferer that answers at once, from 16 requests at a time.
//
//	go test -run '^$' -bench GatewayRoundTrip -benchmem -cpu 2 ./cmd/symphony/
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
	w := &workload.Workload{Source: "bench", Models: []workload.Model{{Name: "m", SLO: time.Second}}}
	target, err := newHTTPTarget(context.Background(), "http://"+ln.Addr().String(), w)
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
			call := target.Go(context.Background(), "m", input)
			<-call.Done()
			if call.Err != nil || len(call.Output) != len(input) {
				b.Errorf("%d bytes, %v", len(call.Output), call.Err)
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

package loadgen

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/frontend/gateway"
	"github.com/symphony-serving/symphony/frontend/gateway/kserveclient"
	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/scheduler/serving"
)

func gatewayClient(t *testing.T, url string) *kserveclient.Client {
	t.Helper()
	c, err := kserveclient.New(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// bench --gateway refuses a workload whose SLO differs from the one the
// cluster serves the model with (the gateway's metadata), takes one that
// agrees, and one whose server says nothing of SLOs; it fails early on a
// model that is not ready and on a server that is down.
func TestGatewayTargetChecksTheModels(t *testing.T) {
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v2/models/m/ready", "/v2/models/silent/ready":
			w.WriteHeader(http.StatusOK)
		case "/v2/models/m":
			_, _ = w.Write([]byte(`{"name":"m","parameters":{"slo_ms":30}}`))
		case "/v2/models/cold/ready":
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			http.NotFound(w, r)
		}
	}))
	c := gatewayClient(t, gw.URL)
	for _, tc := range []struct {
		model string
		slo   time.Duration
		want  string // "" to be taken
	}{
		{"m", 30 * time.Millisecond, ""},
		{"m", 200 * time.Millisecond, "serves it with 30ms"},
		{"silent", 200 * time.Millisecond, ""}, // its metadata is a 404
		{"cold", 30 * time.Millisecond, `model "cold" not ready`},
		{"absent", 30 * time.Millisecond, "HTTP 404"},
	} {
		w := &workload.Workload{Source: "w.yaml", Models: []workload.Model{{Model: serving.Model{Name: tc.model, SLO: tc.slo}}}}
		target, err := NewGatewayTarget(context.Background(), c, w)
		if tc.want == "" && (err != nil || target == nil) || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s with SLO %v: err %v, want %q", tc.model, tc.slo, err, tc.want)
		}
	}
	gw.Close()
	w := &workload.Workload{Source: "w.yaml", Models: []workload.Model{{Model: serving.Model{Name: "m", SLO: 30 * time.Millisecond}}}}
	if _, err := NewGatewayTarget(context.Background(), c, w); err == nil || !strings.Contains(err.Error(), "no answer") {
		t.Errorf("server down: %v", err)
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
// embedded target (Go) and as the timed Inferer behind a gateway, which
// says that every answered request ran in a batch of 3.
type cycler struct{ n atomic.Int64 }

func (c *cycler) next(input []byte) ([]byte, error) {
	if err := endings[(c.n.Add(1)-1)%int64(len(endings))]; err != nil {
		return nil, err
	}
	return input, nil
}

func (c *cycler) Start(_ context.Context, model string, input []byte, _ uint8) Call {
	return Go(func() (frontend.Timing, error) {
		_, err := c.next(input)
		return frontend.Timing{}, err
	})
}

func (c *cycler) Infer(_ context.Context, _ string, input []byte, _ time.Time) ([]byte, error) {
	return c.next(input)
}

func (c *cycler) InferTimed(_ context.Context, _ string, input []byte, _ time.Time) ([]byte, gateway.Batch, error) {
	out, err := c.next(input)
	if err != nil {
		return nil, gateway.Batch{}, err
	}
	now := time.Now()
	return out, gateway.Batch{Size: 3, Started: now.Add(-time.Millisecond), Finished: now}, nil
}

func (c *cycler) Model(name string) (gateway.ModelInfo, bool) {
	return gateway.ModelInfo{Name: name, SLO: time.Second, Ready: true}, name == "m"
}

func (c *cycler) Ready() bool { return true }

// The same endings, through the gateway and a GatewayTarget or from an
// embedded target, give a report with the same drop and failure reasons;
// the batches the gateway reports reach the report.
func TestGatewayReportsTheEmbeddedReasons(t *testing.T) {
	w := &workload.Workload{Source: "test", Seed: 3, Duration: 300 * time.Millisecond, Cluster: workload.Cluster{GPUs: 1},
		Models: []workload.Model{{Model: serving.Model{Name: "m", SLO: time.Second, Profile: profile.MustLinear(time.Millisecond, 100*time.Microsecond, 8)}, Rates: []workload.RatePhase{{Rate: 400}}}}}
	run := func(target Target) ([]string, map[int]uint64) {
		rep, err := Run(context.Background(), target, w, Options{InputBytes: func(string) int { return 16 }})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Offered < 2*uint64(len(endings)) {
			t.Fatalf("%d requests offered; the test wants every ending twice", rep.Offered)
		}
		return slices.Sorted(maps.Keys(rep.DropReasons)), rep.BatchSizeHist
	}
	embedded, _ := run(&cycler{})
	gw, err := gateway.New(&cycler{}, gateway.Default())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	defer srv.Close()
	target, err := NewGatewayTarget(context.Background(), gatewayClient(t, srv.URL), w)
	if err != nil {
		t.Fatal(err)
	}
	remote, batches := run(target)
	if !slices.Equal(embedded, remote) {
		t.Fatalf("reasons through the gateway:\n  %q\nembedded:\n  %q", remote, embedded)
	}
	if len(embedded) != len(endings)-2 { // the two answers have no reason
		t.Fatalf("%d reasons for %d endings: %q", len(embedded), len(endings)-2, embedded)
	}
	if len(batches) != 1 || batches[3] == 0 {
		t.Errorf("batch sizes through the gateway %v, want only 3s", batches)
	}
}

package loadgen

import (
	"context"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/frontend/gateway"
	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/scheduler/serving"
)

// serveGRPC serves a gateway on inf over gRPC on a loopback port and
// returns its address and a connection to it.
func serveGRPC(t *testing.T, inf gateway.Inferer) (string, *grpc.ClientConn) {
	t.Helper()
	gw, err := gateway.New(inf, gateway.Default())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := gw.GRPCServer()
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return ln.Addr().String(), conn
}

// bench --grpc refuses a workload whose SLO differs from the one the
// cluster serves the model with (the gRPC metadata's header), takes one
// that agrees, and fails early on a model the server does not serve and
// on a server that is down.
func TestGRPCTargetChecksTheModels(t *testing.T) {
	addr, conn := serveGRPC(t, &cycler{}) // serves "m", ready, with an SLO of 1s
	for _, tc := range []struct {
		model string
		slo   time.Duration
		want  string // "" to be taken
	}{
		{"m", time.Second, ""},
		{"m", 200 * time.Millisecond, "serves it with 1s"},
		{"absent", time.Second, `unknown model "absent"`},
	} {
		w := &workload.Workload{Source: "w.yaml", Models: []workload.Model{{Model: serving.Model{Name: tc.model, SLO: tc.slo}}}}
		target, err := NewGRPCTarget(context.Background(), addr, []grpc.ClientConnInterface{conn}, w)
		if tc.want == "" && (err != nil || target == nil) || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s with SLO %v: err %v, want %q", tc.model, tc.slo, err, tc.want)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	dead, err := grpc.NewClient(down, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	w := &workload.Workload{Source: "w.yaml", Models: []workload.Model{{Model: serving.Model{Name: "m", SLO: time.Second}}}}
	if _, err := NewGRPCTarget(context.Background(), down, []grpc.ClientConnInterface{dead}, w); err == nil || !strings.Contains(err.Error(), "Unavailable") {
		t.Errorf("server down: %v", err)
	}
}

// The same endings, through the gRPC endpoint and a GRPCTarget or from an
// embedded target, give a report with the same drop and failure reasons;
// the batches the answers' parameters report reach the report.
func TestGRPCReportsTheEmbeddedReasons(t *testing.T) {
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
	addr, c1 := serveGRPC(t, &cycler{})
	c2, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	target, err := NewGRPCTarget(context.Background(), addr, []grpc.ClientConnInterface{c1, c2}, w)
	if err != nil {
		t.Fatal(err)
	}
	remote, batches := run(target)
	if !slices.Equal(embedded, remote) {
		t.Fatalf("reasons through gRPC:\n  %q\nembedded:\n  %q", remote, embedded)
	}
	if len(batches) != 1 || batches[3] == 0 {
		t.Errorf("batch sizes through gRPC %v, want only 3s", batches)
	}
}

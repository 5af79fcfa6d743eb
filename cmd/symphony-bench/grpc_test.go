package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/frontend/gateway"
	"github.com/symphony-serving/symphony/frontend/gateway/inferencepb"
	"github.com/symphony-serving/symphony/frontend/gatewayserver"
)

// `symphony bench --grpc ADDR` drives a running cluster through a
// frontend's gRPC endpoint and reports it as an embedded frontend's run
// is reported: every request ending once, and batch sizes, which the
// answers' parameters carry.
func TestBenchGRPC(t *testing.T) {
	wl := writeSweepWorkload(t)
	w, err := workload.ParseFile(wl)
	if err != nil {
		t.Fatal(err)
	}
	c, _, release, err := startDemoCluster(context.Background(), w, tcpDataPath(t), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	srv, err := gatewayserver.Start(c.Frontends[0], gatewayserver.Config{GRPCAddr: "127.0.0.1:0", Gateway: gateway.Default(), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	code, out, stderr := runCLI(t, shortRun("bench", "-f", wl, "--grpc", srv.GRPCAddr, "--grpc-conns", "2", "--json", "--quiet")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r demoReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	if r.Policy != "symphony (gRPC)" {
		t.Errorf("policy %q", r.Policy)
	}
	checkReport(t, r, 0.4, "ResNet50", "MobileNet")
	if r.Good > 0 && r.MeanBatch < 1 {
		t.Errorf("mean batch %v for %d good requests: the batches did not reach the report", r.MeanBatch, r.Good)
	}
}

// `symphony demo --grpc-addr` serves the gRPC endpoint beside its cluster
// and says where; bench takes one target only.
func TestDemoGRPCAddrAndBenchTargets(t *testing.T) {
	wl := writeSweepWorkload(t)
	code, _, stderr := runCLI(t, shortRun("demo", "-f", wl, "--grpc-addr", "127.0.0.1:0")...)
	if code != 0 || !regexp.MustCompile(`demo: KServe v2 gRPC endpoint on 127\.0\.0\.1:\d+\n`).MatchString(stderr) ||
		strings.Contains(stderr, "gateway on http://") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
	for _, args := range [][]string{
		{"bench", "-f", wl, "--gateway", "http://127.0.0.1:1", "--grpc", "127.0.0.1:1"},
		{"bench", "-f", wl},
	} {
		if code, _, stderr := runCLI(t, args...); code != 2 || !strings.Contains(stderr, "exactly one of --scheduler ADDR, --gateway URL and --grpc ADDR") {
			t.Errorf("%v: exit %d, %s", args, code, stderr)
		}
	}
	if code, _, stderr := runCLI(t, "bench", "-f", wl, "--grpc", "127.0.0.1:1", "--grpc-conns", "0"); code != 2 || !strings.Contains(stderr, "--grpc-conns 0") {
		t.Errorf("--grpc-conns 0: exit %d, %s", code, stderr)
	}
}

// `symphony frontend --grpc-addr` serves the gRPC endpoint beside the HTTP
// gateway, says where on its announcement line, answers a request there,
// and stops gracefully on SIGTERM.
func TestFrontendProcessServesGRPC(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a cluster of processes")
	}
	wl := writeSweepWorkload(t)
	ps := newProcSet(t, buildSymphony(t))
	sched := ps.start("scheduler", "scheduler", "-f", wl, "--addr", "127.0.0.1:0")
	addr := sched.waitLine(t, regexp.MustCompile(`^scheduler listening on (\S+) `), 15*time.Second)[1]
	back := ps.start("backend", "backend", "--scheduler", addr, "--gpus", "2", "--name", "b1")
	back.waitLine(t, regexp.MustCompile(`^backend b1 registered 2 GPUs`), 15*time.Second)
	front := ps.start("frontend", "frontend", "--scheduler", addr, "--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--name", "f1")
	grpcAddr := front.waitLine(t, regexp.MustCompile(`^frontend f1: KServe v2 gateway on http://\S+, inputs served on .*; gRPC on (127\.0\.0\.1:\d+)$`), 15*time.Second)[1]
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := inferencepb.NewGRPCInferenceServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if r, err := c.ModelReady(ctx, &inferencepb.ModelReadyRequest{Name: "ResNet50"}); err != nil || !r.Ready {
		t.Fatalf("ResNet50 ready: %v %v", r, err)
	}
	req := &inferencepb.ModelInferRequest{ModelName: "ResNet50", Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{
		{Name: "input0", Datatype: "UINT8", Shape: []int64{4}}}, RawInputContents: [][]byte{{1, 2, 3, 4}}}
	// On a busy machine a lone request may miss its SLO and be dropped
	// (UNAVAILABLE, a drop's reason): try again, a few times.
	var resp *inferencepb.ModelInferResponse
	for range 20 {
		if resp, err = c.ModelInfer(ctx, req); status.Code(err) != codes.Unavailable {
			break
		}
	}
	if err != nil || len(resp.RawOutputContents) != 1 || len(resp.RawOutputContents[0]) == 0 {
		t.Fatalf("ModelInfer: %v %v", resp, err)
	}
	if b, ok := gateway.GRPCResponseBatch(resp.Parameters); !ok || b.Size < 1 {
		t.Errorf("no batch in the answer's parameters %v", resp.Parameters)
	}
	ps.stopAll(15 * time.Second)
}

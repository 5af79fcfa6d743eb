package gatewayserver

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/frontend/gateway"
	"github.com/symphony-serving/symphony/frontend/gateway/inferencepb"
	"github.com/symphony-serving/symphony/transport/inproc"
)

// A frontend that has not reached its scheduler serves the gateway, says
// it is not ready, knows no model, and serves its metrics beside it.
func TestServeUnconnected(t *testing.T) {
	fc := frontend.Default()
	fc.SchedulerAddr, fc.Network = "nowhere", inproc.New()
	client, err := frontend.New(fc)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	srv, addr, err := Serve(client, "127.0.0.1:0", gateway.Default(), true, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/v2/health/live"); code != http.StatusOK {
		t.Errorf("live: %d", code)
	}
	if code, _ := get("/v2/health/ready"); code == http.StatusOK {
		t.Errorf("ready before the frontend is connected")
	}
	// The probes every process answers, in plain text.
	if code, body := get("/livez"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("livez: %d %q", code, body)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not connected to the scheduler") {
		t.Errorf("readyz before the frontend is connected: %d %q", code, body)
	}
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "symphony_frontend") {
		t.Errorf("metrics: %d %.200q", code, body)
	}
	if _, ok := (Inferer{client}).Model("ResNet50"); ok {
		t.Error("a model is known before the scheduler's Welcome")
	}
	if LongestInference(client) != 0 {
		t.Error("a longest inference with no models")
	}
}

// Start serves HTTP and gRPC on listeners of their own; an address that is
// taken fails the start, naming the endpoint, and leaves nothing bound;
// Shutdown stops both.
func TestStartBoth(t *testing.T) {
	fc := frontend.Default()
	fc.SchedulerAddr, fc.Network = "nowhere", inproc.New()
	client, err := frontend.New(fc)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	srv, err := Start(client, Config{HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", Gateway: gateway.Default(), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(srv.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	gc := inferencepb.NewGRPCInferenceServiceClient(conn)
	if r, err := gc.ServerLive(context.Background(), &inferencepb.ServerLiveRequest{}); err != nil || !r.Live {
		t.Errorf("gRPC live: %v %v", r, err)
	}
	if r, err := gc.ServerReady(context.Background(), &inferencepb.ServerReadyRequest{}); err != nil || r.Ready {
		t.Errorf("gRPC ready before the frontend is connected: %v %v", r, err)
	}
	resp, err := http.Get("http://" + srv.HTTPAddr + "/v2/health/live")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP live: %v %v", resp, err)
	}
	resp.Body.Close()

	// The gRPC address is taken: no start, and the HTTP one is free again.
	httpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpAddr := httpLn.Addr().String()
	httpLn.Close()
	if _, err := Start(client, Config{HTTPAddr: httpAddr, GRPCAddr: srv.GRPCAddr, Gateway: gateway.Default()}); err == nil || !strings.Contains(err.Error(), "gateway gRPC") {
		t.Errorf("a taken gRPC address: %v", err)
	}
	if ln, err := net.Listen("tcp", httpAddr); err != nil {
		t.Errorf("the HTTP address is still bound after the failed start: %v", err)
	} else {
		ln.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Error(err)
	}
	if _, err := gc.ServerLive(context.Background(), &inferencepb.ServerLiveRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("gRPC after Shutdown: %v", err)
	}
}

package gatewayserver

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/frontend/gateway"
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

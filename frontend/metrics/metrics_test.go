package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/frontend/gateway"
)

func TestHandlerExportsRequestsAndEnds(t *testing.T) {
	var st frontend.Stats
	st.Submitted.Store(9)
	st.Answered.Store(6)
	st.Dropped.Store(2)
	st.Failed.Store(1)
	m := New(&st)
	var gs gateway.Stats
	gs.OpenConns.Store(5)
	gs.RejectedConns.Store(3)
	gs.InFlight.Store(4)
	gs.RejectedRequests.Store(7)
	m.Gateway(&gs)
	m.Observe("resnet", 200, 12*time.Millisecond)
	m.Observe("resnet", 200, 30*time.Millisecond)
	m.Observe("resnet", 503, time.Millisecond)
	m.Observe("", 404, 0)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	text := string(body)
	for _, want := range []string{
		`symphony_gateway_requests_total{code="200",model="resnet"} 2` + "\n",
		`symphony_gateway_requests_total{code="503",model="resnet"} 1` + "\n",
		`symphony_gateway_requests_total{code="404",model=""} 1` + "\n",
		`symphony_gateway_request_duration_seconds_count{code="200",model="resnet"} 2` + "\n",
		`symphony_gateway_request_duration_seconds_bucket{code="200",model="resnet",le="0.016"} 1` + "\n",
		`symphony_gateway_request_duration_seconds_count{code="503",model="resnet"} 1` + "\n",
		"symphony_frontend_submitted_requests_total 9\n",
		"symphony_frontend_answered_requests_total 6\n",
		"symphony_frontend_dropped_requests_total 2\n",
		"symphony_frontend_failed_requests_total 1\n",
		"symphony_gateway_open_connections 5\n",
		"symphony_gateway_rejected_connections_total 3\n",
		"symphony_gateway_in_flight_requests 4\n",
		"symphony_gateway_rejected_requests_total 7\n",
		"process_cpu_seconds_total",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", strings.TrimSpace(want))
		}
	}
}

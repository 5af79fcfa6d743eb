package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/bench/workload"
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

package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/backend"
)

func TestHandlerExportsTheAgentsCounters(t *testing.T) {
	var st backend.Stats
	st.Plans.Store(3)
	st.Requests.Store(20)
	st.Failed.Store(2)
	st.Undelivered.Store(5)
	st.StartLag.Record(3 * time.Microsecond)
	st.StartLag.Record(2 * time.Second)
	rec := httptest.NewRecorder()
	Handler(&st).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		"symphony_backend_plans_total 3\n",
		"symphony_backend_requests_total 20\n",
		"symphony_backend_failed_requests_total 2\n",
		"symphony_backend_undelivered_results_total 5\n",
		`symphony_backend_batch_start_lag_seconds_bucket{le="4e-06"} 1` + "\n",
		`symphony_backend_batch_start_lag_seconds_bucket{le="+Inf"} 2` + "\n",
		"symphony_backend_batch_start_lag_seconds_count 2\n",
		"go_goroutines ",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", strings.TrimSpace(want))
		}
	}
}

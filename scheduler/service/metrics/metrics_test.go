package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/scheduler/service"
)

type fixed service.Stats

func (f fixed) Snapshot() service.Stats { return service.Stats(f) }

func TestHandlerExportsTheSnapshot(t *testing.T) {
	src := fixed{Tasks: 7, Planned: 5, Plans: 2, Dropped: 1, Failed: 1, Orphaned: 3, Unsent: 8, Rejects: 4,
		Frontends: 2, Backends: 3, OnlineGPUs: 12, PlansInFlight: 6, RankBusy: 1500 * time.Millisecond,
		Stalls: 9, StalledGPUs: 4, Resubmitted: 11, WakeupLead: 250 * time.Microsecond,
		TailFactors: map[string]float64{"m": 1.25, "n": 1}}
	rec := httptest.NewRecorder()
	Handler(src).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("status %d", rec.Code)
	}
	body, _ := io.ReadAll(rec.Body)
	text := string(body)
	for _, want := range []string{
		"# TYPE symphony_scheduler_tasks_total counter",
		"symphony_scheduler_tasks_total 7\n",
		"symphony_scheduler_planned_requests_total 5\n",
		"symphony_scheduler_plans_total 2\n",
		"symphony_scheduler_dropped_requests_total 1\n",
		"symphony_scheduler_failed_requests_total 1\n",
		"symphony_scheduler_orphaned_requests_total 3\n",
		"symphony_scheduler_unsent_ends_total 8\n",
		"symphony_scheduler_rejected_connections_total 4\n",
		"symphony_scheduler_rank_busy_seconds_total 1.5\n",
		"# TYPE symphony_scheduler_online_gpus gauge",
		"symphony_scheduler_frontends 2\n",
		"symphony_scheduler_backends 3\n",
		"symphony_scheduler_online_gpus 12\n",
		"symphony_scheduler_plans_in_flight 6\n",
		"symphony_scheduler_gpu_stalls_total 9\n",
		"symphony_scheduler_stalled_gpus 4\n",
		"symphony_scheduler_resubmitted_requests_total 11\n",
		"symphony_scheduler_wakeup_lead_seconds 0.00025\n",
		"# TYPE symphony_scheduler_tail_factor gauge",
		`symphony_scheduler_tail_factor{model="m"} 1.25` + "\n",
		`symphony_scheduler_tail_factor{model="n"} 1` + "\n",
		"go_goroutines ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

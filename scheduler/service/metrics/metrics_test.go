package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/service"
)

type fixed service.Stats

func (f fixed) Snapshot() service.Stats { return service.Stats(f) }

func TestHandlerExportsTheSnapshot(t *testing.T) {
	src := fixed{Tasks: 7, Planned: 5, Plans: 2, Dropped: 1, Failed: 1, Orphaned: 3, Unsent: 8, Rejects: 4,
		Frontends: 2, Backends: 3, OnlineGPUs: 12, PlansInFlight: 6, RankBusy: 1500 * time.Millisecond,
		Stalls: 9, StalledGPUs: 4, Resubmitted: 11, WakeupLead: 250 * time.Microsecond,
		TailFactors: map[string]float64{"m": 1.25, "n": 1},
		Models: []service.ModelStats{{Name: "m", Tasks: 20, Plans: 4, BatchSizes: []uint64{0, 1, 0, 2, 0, 1}, Failed: 2, DroppedLate: 1,
			Dropped: map[string]uint64{"overload": 3, "not_loaded": 1}}},
		GPUs: []service.GPUStats{{ID: 3, Backend: "b1", Online: true, Busy: 2500 * time.Millisecond}, {ID: 4, Backend: "b1"}},
		Advice: service.Advice{Window: time.Minute, Signals: scheduler.Signals{GPUs: 2, Requests: 400, BadRate: 0.05, IdleFraction: 0.02},
			AutoscaleAdvice: scheduler.AutoscaleAdvice{Action: scheduler.ScaleAdd, GPUs: 1}}}
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
		`symphony_scheduler_model_tasks_total{model="m"} 20` + "\n",
		`symphony_scheduler_model_plans_total{model="m"} 4` + "\n",
		`symphony_scheduler_model_failed_requests_total{model="m"} 2` + "\n",
		`symphony_scheduler_model_late_dropped_requests_total{model="m"} 1` + "\n",
		`symphony_scheduler_model_dropped_requests_total{model="m",reason="overload"} 3` + "\n",
		`symphony_scheduler_model_dropped_requests_total{model="m",reason="not_loaded"} 1` + "\n",
		`symphony_scheduler_model_dropped_requests_total{model="m",reason="deadline"} 0` + "\n",
		// Batches of 1, 3, 3 and 5.
		`symphony_scheduler_batch_size_bucket{model="m",le="1"} 1` + "\n",
		`symphony_scheduler_batch_size_bucket{model="m",le="2"} 1` + "\n",
		`symphony_scheduler_batch_size_bucket{model="m",le="3"} 3` + "\n",
		`symphony_scheduler_batch_size_bucket{model="m",le="6"} 4` + "\n",
		`symphony_scheduler_batch_size_sum{model="m"} 12` + "\n",
		`symphony_scheduler_batch_size_count{model="m"} 4` + "\n",
		`symphony_scheduler_gpu_busy_seconds_total{backend="b1",gpu="3"} 2.5` + "\n",
		`symphony_scheduler_gpu_online{backend="b1",gpu="3"} 1` + "\n",
		`symphony_scheduler_gpu_online{backend="b1",gpu="4"} 0` + "\n",
		"symphony_autoscale_window_seconds 60\n",
		"symphony_autoscale_requests 400\n",
		"symphony_autoscale_bad_rate 0.05\n",
		"symphony_autoscale_idle_fraction 0.02\n",
		"symphony_autoscale_gpus 2\n",
		"symphony_autoscale_gpus_delta 1\n",
		`symphony_autoscale_advice{action="add"} 1` + "\n",
		`symphony_autoscale_advice{action="hold"} 0` + "\n",
		"go_goroutines ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

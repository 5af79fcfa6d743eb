// Package metrics exports a running scheduler service's counters in the
// Prometheus format, for operators: what it was offered, planned, dropped
// and failed, the cluster it sees, and how busy its rank loop is. It reads
// service.Snapshot at scrape time: a scrape holds the service's locks only
// as long as a plan's bookkeeping does, and nothing is counted twice.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/symphony-serving/symphony/scheduler/service"
)

// Source is what the collector reads: a *service.Service.
type Source interface {
	Snapshot() service.Stats
}

// collector turns one snapshot per scrape into metrics.
type collector struct {
	src     Source
	metrics []metric
	tail    *prometheus.Desc
}

type metric struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(*service.Stats) float64
}

// NewCollector returns a Prometheus collector of src's counters.
func NewCollector(src Source) prometheus.Collector {
	c := &collector{src: src}
	add := func(name, help string, kind prometheus.ValueType, value func(*service.Stats) float64) {
		c.metrics = append(c.metrics, metric{prometheus.NewDesc("symphony_scheduler_"+name, help, nil, nil), kind, value})
	}
	counter, gauge := prometheus.CounterValue, prometheus.GaugeValue
	add("tasks_total", "Task descriptors received from frontends.", counter, func(s *service.Stats) float64 { return float64(s.Tasks) })
	add("planned_requests_total", "Requests sent to backends in batch plans.", counter, func(s *service.Stats) float64 { return float64(s.Planned) })
	add("plans_total", "Batch plans sent to backends.", counter, func(s *service.Stats) float64 { return float64(s.Plans) })
	add("dropped_requests_total", "Requests dropped by the scheduler (deadline, overload, shutdown, unknown model).", counter, func(s *service.Stats) float64 { return float64(s.Dropped) })
	add("failed_requests_total", "Planned requests that failed (backend lost, input unavailable, executor failure).", counter, func(s *service.Stats) float64 { return float64(s.Failed) })
	add("late_dropped_requests_total", "Planned requests their backend dropped before running them, because they could no longer finish in time.", counter, func(s *service.Stats) float64 { return float64(s.DroppedLate) })
	add("orphaned_requests_total", "Queued requests left out of plans because their frontend left.", counter, func(s *service.Stats) float64 { return float64(s.Orphaned) })
	add("unsent_ends_total", "Drop and failure notices not delivered because the frontend's connection had closed (that frontend ends those requests itself).", counter, func(s *service.Stats) float64 { return float64(s.Unsent) })
	add("rejected_connections_total", "Connections refused at the handshake.", counter, func(s *service.Stats) float64 { return float64(s.Rejects) })
	add("rank_busy_seconds_total", "Time the rank loop spent working; its rate is the loop's utilization.", counter, func(s *service.Stats) float64 { return s.RankBusy.Seconds() })
	add("frontends", "Frontends connected.", gauge, func(s *service.Stats) float64 { return float64(s.Frontends) })
	add("backends", "Backends whose GPUs are online.", gauge, func(s *service.Stats) float64 { return float64(s.Backends) })
	add("online_gpus", "GPUs the scheduler can plan on.", gauge, func(s *service.Stats) float64 { return float64(s.OnlineGPUs) })
	add("plans_in_flight", "Plans sent to backends and not yet reported finished.", gauge, func(s *service.Stats) float64 { return float64(s.PlansInFlight) })
	add("gpu_stalls_total", "GPUs taken out of rotation because a plan was overdue or their backend fell silent.", counter, func(s *service.Stats) float64 { return float64(s.Stalls) })
	add("stalled_gpus", "GPUs out of rotation now, waiting for their backend to answer.", gauge, func(s *service.Stats) float64 { return float64(s.StalledGPUs) })
	add("resubmitted_requests_total", "Requests whose plan could not reach its backend (it had left or drained) and went back to their model's queue.", counter, func(s *service.Stats) float64 { return float64(s.Resubmitted) })
	add("suppressed_log_lines_total", "Warnings that repeat per request or GPU, held back by the log's rate limit.", counter, func(s *service.Stats) float64 { return float64(s.SuppressedLogs) })
	add("wakeup_lead_seconds", "How early the rank loop's timers fire: the measured lateness of its timers.", gauge, func(s *service.Stats) float64 { return s.WakeupLead.Seconds() })
	c.tail = prometheus.NewDesc("symphony_scheduler_tail_factor", "The factor by which a model's deadlines are planned beyond its profile's ℓ(b): a high quantile of its batches' real run time over ℓ(b) (1: they keep to the profile).", []string{"model"}, nil)
	return c
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.metrics {
		ch <- m.desc
	}
	ch <- c.tail
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.Snapshot()
	for _, m := range c.metrics {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.value(&st))
	}
	for model, f := range st.TailFactors {
		ch <- prometheus.MustNewConstMetric(c.tail, prometheus.GaugeValue, f, model)
	}
}

// Handler serves src's metrics, with the Go runtime's and the process's,
// on a registry of its own (no global state).
func Handler(src Source) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(src), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

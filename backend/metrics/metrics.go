// Package metrics exports a backend agent's counters in the Prometheus
// format: the batch plans it received, their requests, the requests it
// failed (inputs that could not be pulled in time, executor errors) and
// those it dropped because its GPU ran too late for them.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/symphony-serving/symphony/backend"
)

// Handler serves the counters in stats (Agent.Stats()), with the Go
// runtime's, the process's and extra (the process's own, such as its
// network's TLS refusals), on a registry of its own.
func Handler(stats *backend.Stats, extra ...prometheus.Collector) http.Handler {
	counter := func(name, help string, v func() uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "symphony_backend_" + name, Help: help},
			func() float64 { return float64(v()) })
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		counter("plans_total", "Batch plans received from the scheduler.", stats.Plans.Load),
		counter("requests_total", "Requests in those plans.", stats.Requests.Load),
		counter("failed_requests_total", "Requests the backend failed: input unavailable or executor error.", stats.Failed.Load),
		counter("dropped_requests_total", "Requests the backend dropped because its GPU ran too late for their batch to finish by their deadline.", stats.Dropped.Load),
		counter("undelivered_results_total", "Results not sent because their frontend's data connection was down or the frontend had left.", stats.Undelivered.Load),
		counter("suppressed_log_lines_total", "Warnings that repeat per plan or connection, held back by the log's rate limit (the counters above count every event).", stats.SuppressedLogs.Load),
		lagCollector{stats, prometheus.NewDesc("symphony_backend_batch_start_lag_seconds",
			"How late batches started against their plans' exec_at: a GPU that runs behind its plans, which the scheduler corrects for.", nil, nil)},
		newModelCollector(stats),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(extra...)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// modelCollector exports Stats.Models, one series per model, read at
// scrape time.
type modelCollector struct {
	stats                                  *backend.Stats
	plans, requests, failed, dropped, busy *prometheus.Desc
}

func newModelCollector(stats *backend.Stats) modelCollector {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("symphony_backend_model_"+name, help, []string{"model"}, nil)
	}
	return modelCollector{stats: stats,
		plans:    desc("plans_total", "Batch plans received, by model (Triton: execution count)."),
		requests: desc("requests_total", "Requests in those plans, by model."),
		failed:   desc("failed_requests_total", "Requests failed (input unavailable, executor error), by model."),
		dropped:  desc("dropped_requests_total", "Requests dropped because the GPU ran too late for them, by model."),
		busy:     desc("busy_seconds_total", "Time the model's batches ran on this backend's GPUs; its rate is the GPU time the model takes here (Triton: compute time)."),
	}
}

func (c modelCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.plans, c.requests, c.failed, c.dropped, c.busy} {
		ch <- d
	}
}

func (c modelCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.stats.Models() {
		ch <- prometheus.MustNewConstMetric(c.plans, prometheus.CounterValue, float64(m.Plans), m.Model)
		ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, float64(m.Requests), m.Model)
		ch <- prometheus.MustNewConstMetric(c.failed, prometheus.CounterValue, float64(m.Failed), m.Model)
		ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(m.Dropped), m.Model)
		ch <- prometheus.MustNewConstMetric(c.busy, prometheus.CounterValue, m.Busy.Seconds(), m.Model)
	}
}

// lagCollector exports Stats.StartLag as a histogram, read at scrape time.
type lagCollector struct {
	stats *backend.Stats
	desc  *prometheus.Desc
}

func (c lagCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c lagCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats.StartLag.Snapshot()
	buckets := make(map[float64]uint64, backend.LagBuckets-1)
	var cum uint64
	for i := range backend.LagBuckets - 1 {
		cum += s.Counts[i]
		buckets[backend.LagBound(i).Seconds()] = cum
	}
	ch <- prometheus.MustNewConstHistogram(c.desc, s.Total(), s.Sum.Seconds(), buckets)
}

// Package metrics exports a frontend's request outcomes in the Prometheus
// format: per model and status, the inference requests its KServe gateway
// answered and how long they took, what its connection and in-flight caps
// turned away, and the client's own end counts (answered, dropped,
// failed), which cover embedded callers too; per model, every request's
// outcome and reason and its queue, compute and end-to-end times (the
// series docs/metrics.md lists beside their Triton counterparts).
package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/frontend/gateway"
)

// Metrics holds a frontend's metrics on a registry of its own.
type Metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec

	ends    *prometheus.CounterVec   // model, outcome, reason
	queue   *prometheus.HistogramVec // model
	compute *prometheus.HistogramVec // model
	e2e     *prometheus.HistogramVec // model, outcome
}

// SLOBuckets are the latency histograms' bucket bounds, in seconds: 1, 2,
// 3, 5 and 7.5 steps a decade from 0.5 ms to 2 s, so that a quantile
// resolves any SLO from 1 ms to 1 s to within a step (Triton's summaries
// and the paper's zoos' 5-500 ms SLOs included).
var SLOBuckets = []float64{0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075,
	0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 2}

// New returns the metrics of the client whose counters stats holds
// (Client.Stats()), with extra (the process's own, such as its network's
// TLS refusals).
func New(stats *frontend.Stats, extra ...prometheus.Collector) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "symphony_gateway_requests_total",
			Help: "Inference requests the KServe gateway ended, by model (\"\" for one not served) and HTTP status (499: the caller left).",
		}, []string{"model", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "symphony_gateway_request_duration_seconds",
			Help: "Time from an inference request's arrival at the gateway to its answer, by model and HTTP status (compare code=\"200\" with the SLO).",
			// 0.5ms to 8s: the SLOs of the paper's zoos are 20-200ms.
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 15),
		}, []string{"model", "code"}),
	}
	m.ends = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "symphony_frontend_model_requests_total",
		Help: "Requests ended, by model, outcome (success, drop, failure) and reason (a drop's: deadline, overload, shutdown, canceled, expired; a failure's: backend, not_connected, unknown_model, ...; \"\" for a success). Requests for a model not served count under model=\"\".",
	}, []string{"model", "outcome", "reason"})
	m.queue = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "symphony_frontend_queue_duration_seconds",
		Help:    "Time from a request's submission to the start of the batch that ran it, by model: the scheduler's delay plus the input pull (Triton: queue time).",
		Buckets: SLOBuckets,
	}, []string{"model"})
	m.compute = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "symphony_frontend_compute_duration_seconds",
		Help:    "Run time of the batch that ran a request, on its GPU, by model (Triton: compute infer time).",
		Buckets: SLOBuckets,
	}, []string{"model"})
	m.e2e = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "symphony_frontend_request_duration_seconds",
		Help:    "Time from a request's submission to its end, by model and outcome: compare outcome=\"success\" with the SLO.",
		Buckets: SLOBuckets,
	}, []string{"model", "outcome"})
	ends := func(name, help string, v func() uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "symphony_frontend_" + name, Help: help},
			func() float64 { return float64(v()) })
	}
	m.reg.MustRegister(m.requests, m.duration, m.ends, m.queue, m.compute, m.e2e,
		ends("submitted_requests_total", "Requests made (Infer and Go calls, those failed at once included); each ends answered, dropped or failed.", stats.Submitted.Load),
		ends("answered_requests_total", "Requests that ended with a result.", stats.Answered.Load),
		ends("dropped_requests_total", "Requests that ended with a drop (deadline, overload, shutdown, canceled, expired).", stats.Dropped.Load),
		ends("failed_requests_total", "Requests that ended with an error.", stats.Failed.Load),
		ends("expired_requests_total", "Requests among the dropped whose result came after their deadline.", stats.Expired.Load),
		ends("suppressed_log_lines_total", "Warnings that repeat per message or connection, held back by the log's rate limit.", stats.SuppressedLogs.Load),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reg.MustRegister(extra...)
	return m
}

// Gateway exports the gateway's connection and in-flight counts, and what
// its caps turned away, from stats (Gateway.Stats()). It is separate from
// New because the gateway is built after its Observe hook, which is m's.
func (m *Metrics) Gateway(stats *gateway.Stats) {
	gauge := func(name, help string, v func() int64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "symphony_gateway_" + name, Help: help},
			func() float64 { return float64(v()) })
	}
	counter := func(name, help string, v func() uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "symphony_gateway_" + name, Help: help},
			func() float64 { return float64(v()) })
	}
	m.reg.MustRegister(
		gauge("open_connections", "Connections to the gateway open now.", stats.OpenConns.Load),
		counter("rejected_connections_total", "Connections answered 503 and closed because the gateway had its --max-connections open.", stats.RejectedConns.Load),
		gauge("in_flight_requests", "Inference requests the gateway has handed to the frontend and not yet answered.", stats.InFlight.Load),
		counter("rejected_requests_total", "Inference requests answered 503 because the gateway had its --max-in-flight requests in flight.", stats.RejectedRequests.Load),
		counter("unauthenticated_requests_total", "Requests refused 401 (gRPC UNAUTHENTICATED) for want of an accepted bearer token (--gateway-token-file).", stats.Unauthenticated.Load))
}

// Observe records one gateway request; it is gateway.Config.Observe.
func (m *Metrics) Observe(model string, status int, took time.Duration) {
	code := strconv.Itoa(status)
	m.requests.WithLabelValues(model, code).Inc()
	m.duration.WithLabelValues(model, code).Observe(took.Seconds())
}

// Ended records one request's end; it is what the client's ObserveEnds
// calls.
func (m *Metrics) Ended(c *frontend.Call) {
	outcome, reason := frontend.Classify(c.Err)
	model := c.Model
	if reason == "unknown_model" {
		model = "" // any name a caller sends would be a series of its own
	}
	m.ends.WithLabelValues(model, string(outcome), reason).Inc()
	t := c.Timing
	if !t.Submitted.IsZero() && !t.Ended.IsZero() {
		m.e2e.WithLabelValues(model, string(outcome)).Observe(t.Ended.Sub(t.Submitted).Seconds())
	}
	if !t.Started.IsZero() && !t.Finished.IsZero() {
		m.compute.WithLabelValues(model).Observe(t.Finished.Sub(t.Started).Seconds())
		if !t.Submitted.IsZero() {
			m.queue.WithLabelValues(model).Observe(max(t.Started.Sub(t.Submitted), 0).Seconds())
		}
	}
}

// Handler serves the metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

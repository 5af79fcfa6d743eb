// Package metrics exports a frontend's request outcomes in the Prometheus
// format: per model and status, the inference requests its KServe gateway
// answered and how long they took, what its connection and in-flight caps
// turned away, and the client's own end counts (answered, dropped,
// failed), which cover embedded callers too.
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
}

// New returns the metrics of the client whose counters stats holds
// (Client.Stats()).
func New(stats *frontend.Stats) *Metrics {
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
	ends := func(name, help string, v func() uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "symphony_frontend_" + name, Help: help},
			func() float64 { return float64(v()) })
	}
	m.reg.MustRegister(m.requests, m.duration,
		ends("submitted_requests_total", "Requests made (Infer and Go calls, those failed at once included); each ends answered, dropped or failed.", stats.Submitted.Load),
		ends("answered_requests_total", "Requests that ended with a result.", stats.Answered.Load),
		ends("dropped_requests_total", "Requests that ended with a drop (deadline, overload, shutdown, canceled, expired).", stats.Dropped.Load),
		ends("failed_requests_total", "Requests that ended with an error.", stats.Failed.Load),
		ends("expired_requests_total", "Requests among the dropped whose result came after their deadline.", stats.Expired.Load),
		ends("suppressed_log_lines_total", "Warnings that repeat per message or connection, held back by the log's rate limit.", stats.SuppressedLogs.Load),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
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
		counter("rejected_requests_total", "Inference requests answered 503 because the gateway had its --max-in-flight requests in flight.", stats.RejectedRequests.Load))
}

// Observe records one gateway request; it is gateway.Config.Observe.
func (m *Metrics) Observe(model string, status int, took time.Duration) {
	code := strconv.Itoa(status)
	m.requests.WithLabelValues(model, code).Inc()
	m.duration.WithLabelValues(model, code).Observe(took.Seconds())
}

// Handler serves the metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

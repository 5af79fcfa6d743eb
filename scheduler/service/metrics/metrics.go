// Package metrics exports a running scheduler service's counters in the
// Prometheus format, for operators: what it was offered, planned, dropped
// and failed, the cluster it sees, and how busy its rank loop is; per
// model, its tasks, batches, batch sizes, drops by reason and failures;
// per GPU, its busy time; and the live §4.4 autoscaling advice
// (docs/metrics.md lists every series). It reads
// service.Snapshot at scrape time: a scrape holds the service's locks only
// as long as a plan's bookkeeping does, and nothing is counted twice.
package metrics

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/symphony-serving/symphony/scheduler"
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

	modelTasks, modelPlans, modelDropped, modelFailed, modelLate, batchSize *prometheus.Desc
	gpuBusy, gpuOnline                                                      *prometheus.Desc
	advice                                                                  []metric
	adviceAction                                                            *prometheus.Desc
}

// BatchSizeBuckets are the batch-size histogram's bounds: powers of two
// and the steps between them, up to the largest batches profiles have.
var BatchSizeBuckets = []float64{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256}

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
	model := []string{"model"}
	c.modelTasks = prometheus.NewDesc("symphony_scheduler_model_tasks_total", "Task descriptors received, by model.", model, nil)
	c.modelPlans = prometheus.NewDesc("symphony_scheduler_model_plans_total", "Batches sent to backends, by model (Triton: execution count).", model, nil)
	c.batchSize = prometheus.NewDesc("symphony_scheduler_batch_size", "Requests per batch sent to a backend, by model.", model, nil)
	c.modelDropped = prometheus.NewDesc("symphony_scheduler_model_dropped_requests_total", "Requests the scheduler ended without running them, by model and reason: deadline, overload, shutdown (its planning's drops), not_loaded, bad_request (refused on arrival).", []string{"model", "reason"}, nil)
	c.modelFailed = prometheus.NewDesc("symphony_scheduler_model_failed_requests_total", "Planned requests that failed (backend lost or stalled, input unavailable, executor failure), by model.", model, nil)
	c.modelLate = prometheus.NewDesc("symphony_scheduler_model_late_dropped_requests_total", "Planned requests their backend dropped because they could no longer finish in time, by model.", model, nil)
	c.gpuBusy = prometheus.NewDesc("symphony_scheduler_gpu_busy_seconds_total", "Time a GPU spent running batches, from its backend's reports; its rate is the GPU's busy fraction. Restarts from 0 when its backend reconnects.", []string{"gpu", "backend"}, nil)
	c.gpuOnline = prometheus.NewDesc("symphony_scheduler_gpu_online", "1 while the scheduler plans on the GPU, 0 while its backend drains or it is stalled.", []string{"gpu", "backend"}, nil)
	adv := func(name, help string, value func(*service.Stats) float64) {
		c.advice = append(c.advice, metric{prometheus.NewDesc("symphony_autoscale_"+name, help, nil, nil), gauge, value})
	}
	adv("window_seconds", "How far back the autoscaling signals look.", func(s *service.Stats) float64 { return s.Advice.Window.Seconds() })
	adv("requests", "Requests that ended in the window (the advice holds with under 100).", func(s *service.Stats) float64 { return float64(s.Advice.Signals.Requests) })
	adv("bad_rate", "Fraction of the requests ended in the window that the scheduler dropped or that failed (r of §4.4).", func(s *service.Stats) float64 { return s.Advice.Signals.BadRate })
	adv("idle_fraction", "Fraction of the online GPU time in the window not spent running batches (f of §4.4).", func(s *service.Stats) float64 { return s.Advice.Signals.IdleFraction })
	adv("gpus", "GPUs online (N of §4.4).", func(s *service.Stats) float64 { return float64(s.Advice.Signals.GPUs) })
	adv("gpus_delta", "The advice: GPUs to add (positive: N·r/(1−r) above a 1% bad rate) or remove (negative: N·f above 10% idle), 0 to hold.", func(s *service.Stats) float64 {
		switch s.Advice.Action {
		case scheduler.ScaleAdd:
			return float64(s.Advice.GPUs)
		case scheduler.ScaleRemove:
			return -float64(s.Advice.GPUs)
		}
		return 0
	})
	c.adviceAction = prometheus.NewDesc("symphony_autoscale_advice", "1 for the action the autoscaling rule advises now (add, remove or hold), 0 for the others.", []string{"action"}, nil)
	c.tail = prometheus.NewDesc("symphony_scheduler_tail_factor", "The factor by which a model's deadlines are planned beyond its profile's ℓ(b): a high quantile of its batches' real run time over ℓ(b) (1: they keep to the profile).", []string{"model"}, nil)
	return c
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.metrics {
		ch <- m.desc
	}
	ch <- c.tail
	for _, d := range []*prometheus.Desc{c.modelTasks, c.modelPlans, c.batchSize, c.modelDropped, c.modelFailed, c.modelLate, c.gpuBusy, c.gpuOnline, c.adviceAction} {
		ch <- d
	}
	for _, m := range c.advice {
		ch <- m.desc
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.Snapshot()
	for _, m := range c.metrics {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.value(&st))
	}
	for model, f := range st.TailFactors {
		ch <- prometheus.MustNewConstMetric(c.tail, prometheus.GaugeValue, f, model)
	}
	counter := prometheus.CounterValue
	for _, m := range st.Models {
		ch <- prometheus.MustNewConstMetric(c.modelTasks, counter, float64(m.Tasks), m.Name)
		ch <- prometheus.MustNewConstMetric(c.modelPlans, counter, float64(m.Plans), m.Name)
		ch <- prometheus.MustNewConstMetric(c.modelFailed, counter, float64(m.Failed), m.Name)
		ch <- prometheus.MustNewConstMetric(c.modelLate, counter, float64(m.DroppedLate), m.Name)
		for _, reason := range []string{"deadline", "overload", "shutdown", "not_loaded", "bad_request"} {
			ch <- prometheus.MustNewConstMetric(c.modelDropped, counter, float64(m.Dropped[reason]), m.Name, reason)
		}
		count, sum, buckets := batchHistogram(m.BatchSizes)
		ch <- prometheus.MustNewConstHistogram(c.batchSize, count, sum, buckets, m.Name)
	}
	for _, g := range st.GPUs {
		id := strconv.Itoa(int(g.ID))
		ch <- prometheus.MustNewConstMetric(c.gpuBusy, counter, g.Busy.Seconds(), id, g.Backend)
		online := 0.0
		if g.Online {
			online = 1
		}
		ch <- prometheus.MustNewConstMetric(c.gpuOnline, prometheus.GaugeValue, online, id, g.Backend)
	}
	for _, m := range c.advice {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.value(&st))
	}
	for _, a := range []scheduler.AutoscaleAction{scheduler.ScaleAdd, scheduler.ScaleRemove, scheduler.ScaleHold} {
		v := 0.0
		if st.Advice.Action == a || st.Advice.Action == "" && a == scheduler.ScaleHold {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.adviceAction, prometheus.GaugeValue, v, string(a))
	}
}

// batchHistogram turns counts by batch size (sizes[b]: batches of b) into
// a Prometheus histogram over BatchSizeBuckets: the count, the sum of the
// sizes, and the cumulative count at each bound.
func batchHistogram(sizes []uint64) (count uint64, sum float64, buckets map[float64]uint64) {
	buckets = make(map[float64]uint64, len(BatchSizeBuckets))
	for b, n := range sizes {
		count += n
		sum += float64(b) * float64(n)
		for _, ub := range BatchSizeBuckets {
			if float64(b) <= ub {
				buckets[ub] += n
			}
		}
	}
	return count, sum, buckets
}

// Handler serves src's metrics, with the Go runtime's, the process's and
// extra (the process's own, such as its network's TLS refusals), on a
// registry of its own (no global state).
func Handler(src Source, extra ...prometheus.Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(src), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(extra...)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

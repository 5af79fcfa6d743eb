package sim

import (
	"maps"
	"math"
	"time"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/scheduler"
)

// ms converts a duration to the milliseconds reports use.
func ms(d time.Duration) float64 { return d.Seconds() * 1e3 }

// stats fills the per-model or total statistics from counters.
func fillStats(s *report.Stats, m *modelAcct, seconds float64) {
	s.Offered, s.Good, s.Late, s.Dropped, s.Failed = m.offered, m.good, m.late, m.dropped, m.failed
	s.OfferedRPS = float64(m.offered) / seconds
	s.GoodputRPS = float64(m.good) / seconds
	if m.offered > 0 {
		s.BadRate = float64(m.late+m.dropped+s.Failed) / float64(m.offered)
	}
	s.LatencyP50 = ms(m.latency.Quantile(0.50))
	s.LatencyP99 = ms(m.latency.Quantile(0.99))
	s.LatencyP999 = ms(m.latency.Quantile(0.999))
	s.QueueingP50 = ms(m.queueing.Quantile(0.50))
	s.QueueingP99 = ms(m.queueing.Quantile(0.99))
	s.BatchSizeHist = map[int]uint64{}
	for bs, n := range m.batches {
		if n > 0 {
			s.BatchSizeHist[bs] = n
		}
	}
	if answered := m.good + m.late; answered > 0 {
		s.MeanBatchSize = float64(m.batchWeighted) / float64(answered)
	}
	for r, n := range m.reasons {
		if n > 0 {
			if s.DropReasons == nil {
				s.DropReasons = map[string]uint64{}
			}
			s.DropReasons[scheduler.DropReason(r).String()] = n
		}
	}
	if len(m.named) > 0 {
		s.DropReasons = maps.Clone(m.named)
	}
}

// build turns the accounting into a report.
func (a *accounting) build() *report.Report {
	w := a.w
	seconds := w.Duration.Seconds()
	rep := &report.Report{
		Workload:        w.Source,
		Policy:          w.Policy.String(),
		Seed:            w.Seed,
		GPUs:            w.Cluster.GPUs,
		DurationSeconds: seconds,
		Latency:         &a.total,
	}
	var total modelAcct
	for i := range a.models {
		m := &a.models[i]
		mr := report.ModelReport{Name: w.Models[i].Name, SLOms: ms(w.Models[i].SLO), Latency: &m.latency}
		fillStats(&mr.Stats, m, seconds)
		rep.Models = append(rep.Models, mr)
		total.offered += m.offered
		total.good += m.good
		total.late += m.late
		total.dropped += m.dropped
		total.failed += m.failed
		for k, n := range m.named {
			if total.named == nil {
				total.named = map[string]uint64{}
			}
			total.named[k] += n
		}
		total.batchWeighted += m.batchWeighted
		total.latency.Merge(&m.latency)
		total.queueing.Merge(&m.queueing)
		for bs, n := range m.batches {
			for len(total.batches) <= bs {
				total.batches = append(total.batches, 0)
			}
			total.batches[bs] += n
		}
		for r, n := range m.reasons {
			total.reasons[r] += n
		}
	}
	fillStats(&rep.Stats, &total, seconds)
	var busy float64
	for _, b := range a.gpuBusy {
		f := b.Seconds() / seconds
		rep.GPUBusy = append(rep.GPUBusy, f)
		busy += f
	}
	rep.GPUBusyFraction = busy / float64(len(a.gpuBusy))
	if a.epochs && a.inUseInWindow > 0 {
		// With an epoch job, GPUs outside every part are not the
		// scheduler's to idle: fractions are of the GPU time in use.
		rep.GPUBusyFraction = busy * seconds / a.inUseInWindow.Seconds()
	}
	rep.GPUIdleFraction = 1 - rep.GPUBusyFraction
	for i := range rep.Models {
		// A model's share of the cluster: the GPU time its batches used.
		rep.Models[i].GPUBusyFraction = a.models[i].busy.Seconds() / seconds / float64(len(a.gpuBusy))
	}
	cfg := scheduler.DefaultAutoscaleConfig()
	rep.Autoscale = toAdvice(cfg.Advise(scheduler.Signals{
		GPUs: w.Cluster.GPUs, Requests: total.offered, BadRate: rep.BadRate, IdleFraction: rep.GPUIdleFraction,
	}))
	if w.AutoscaleWindow > 0 {
		iv := a.interval.Seconds()
		for i, b := range a.series {
			start := float64(i) * iv
			if start >= (w.Warmup + w.Duration).Seconds() {
				break
			}
			tp := report.TimePoint{
				Start:      start,
				OfferedRPS: float64(b.offered) / iv,
				GoodputRPS: float64(b.good) / iv,
				BusyGPUs:   b.busy.Seconds() / iv,
				GPUs:       w.Cluster.GPUs,
			}
			if b.offered > 0 {
				tp.BadRate = float64(b.bad) / float64(b.offered)
			}
			inUse := float64(w.Cluster.GPUs)
			if a.epochs {
				inUse = b.inUse.Seconds() / iv
				tp.GPUsInUse = inUse
				tp.GPUs = int(math.Round(inUse))
				for m := range w.Models {
					tp.ModelGoodputRPS = append(tp.ModelGoodputRPS, float64(b.modelGood[m])/iv)
					tp.ModelBadRPS = append(tp.ModelBadRPS, float64(b.modelBad[m])/iv)
				}
			}
			idle := 0.0
			if inUse > 0 {
				idle = 1 - tp.BusyGPUs/inUse
			}
			tp.Advice = toAdvice(cfg.Advise(scheduler.Signals{
				GPUs: tp.GPUs, Requests: b.offered, BadRate: tp.BadRate, IdleFraction: idle,
			}))
			rep.TimeSeries = append(rep.TimeSeries, tp)
		}
	}
	if a.tally != nil {
		rep.Faults = a.tally.Report()
	}
	return rep
}

func toAdvice(a scheduler.AutoscaleAdvice) report.Advice {
	return report.Advice{Action: string(a.Action), GPUs: a.GPUs, Reason: a.Reason}
}

package report

import (
	"math"
	"slices"
	"time"

	"github.com/symphony-serving/symphony/scheduler"
)

// Counts are the outcomes of one model's requests, or of a whole run's, over
// a run's measured window: what the simulator (bench/sim), the live load
// generator (bench/loadgen) and the lookahead study (bench/lookahead) count
// as their requests end. Build turns them into a Report, so that the three
// mean the same by "offered", "bad rate" or "mean batch size".
type Counts struct {
	// Offered requests arrived in the window; each ended Good (answered
	// within its SLO), Late (answered after it), Dropped (refused with a
	// reason) or Failed (ended with an error).
	Offered, Good, Late, Dropped, Failed uint64
	// Latency holds the answered requests' end-to-end latencies, Queueing
	// the time from arrival to the start of the request's batch.
	Latency, Queueing Histogram
	// Batches counts the batches that started in the window by size; nil
	// until AddBatch.
	Batches map[int]uint64
	// BatchWeighted is the sum over answered requests of their batch size,
	// for the request-weighted mean batch size.
	BatchWeighted uint64
	// Reasons counts the drops by reason, and the failures by kind
	// ("failed: ..."); nil until AddReason.
	Reasons map[string]uint64
	// Busy is the GPU time of the batches in the window.
	Busy time.Duration
	// Profile compares the real run time of the batches that started in
	// the window with the profile's ℓ(b): live runs that know the
	// scheduler's profile fill it (the simulator runs ℓ(b) exactly).
	Profile ProfileFit
	// Levels counts the requests by priority level, for workloads with a
	// priority_mix; nil until AddLevel.
	Levels map[scheduler.Priority]LevelCounts
}

// LevelCounts are the requests of one priority level that arrived in the
// window, and those answered within their SLO.
type LevelCounts struct{ Offered, Good uint64 }

// AddLevel counts offered and good requests at level p.
func (c *Counts) AddLevel(p scheduler.Priority, offered, good uint64) {
	if c.Levels == nil {
		c.Levels = map[scheduler.Priority]LevelCounts{}
	}
	l := c.Levels[p]
	l.Offered += offered
	l.Good += good
	c.Levels[p] = l
}

// AddBatch counts n batches of size requests.
func (c *Counts) AddBatch(size int, n uint64) {
	if c.Batches == nil {
		c.Batches = map[int]uint64{}
	}
	c.Batches[size] += n
}

// AddReason counts n bad requests under reason, the name the report's
// DropReasons gives them.
func (c *Counts) AddReason(reason string, n uint64) {
	if c.Reasons == nil {
		c.Reasons = map[string]uint64{}
	}
	c.Reasons[reason] += n
}

// Merge adds o's counts to c: how a run's total is made from its models'.
func (c *Counts) Merge(o *Counts) {
	c.Offered += o.Offered
	c.Good += o.Good
	c.Late += o.Late
	c.Dropped += o.Dropped
	c.Failed += o.Failed
	c.Latency.Merge(&o.Latency)
	c.Queueing.Merge(&o.Queueing)
	for bs, n := range o.Batches {
		c.AddBatch(bs, n)
	}
	c.BatchWeighted += o.BatchWeighted
	for r, n := range o.Reasons {
		c.AddReason(r, n)
	}
	c.Busy += o.Busy
	c.Profile.Merge(&o.Profile)
	for p, l := range o.Levels {
		c.AddLevel(p, l.Offered, l.Good)
	}
}

// Bad is the number of requests that were not good.
func (c *Counts) Bad() uint64 { return c.Late + c.Dropped + c.Failed }

// Stats are the counts as a report states them over a window of seconds:
// rates per second, the bad rate (0 with nothing offered), latency and
// queueing quantiles in milliseconds, the batch sizes seen and the
// request-weighted mean batch size. The GPU fractions are left to Build,
// which knows the cluster.
func (c *Counts) Stats(seconds float64) Stats {
	s := Stats{Offered: c.Offered, Good: c.Good, Late: c.Late, Dropped: c.Dropped, Failed: c.Failed,
		OfferedRPS: float64(c.Offered) / seconds, GoodputRPS: float64(c.Good) / seconds,
		LatencyP50: Ms(c.Latency.Quantile(0.50)), LatencyP99: Ms(c.Latency.Quantile(0.99)),
		LatencyP999: Ms(c.Latency.Quantile(0.999)),
		QueueingP50: Ms(c.Queueing.Quantile(0.50)), QueueingP99: Ms(c.Queueing.Quantile(0.99)),
		BatchSizeHist: map[int]uint64{},
	}
	if c.Offered > 0 {
		s.BadRate = float64(c.Bad()) / float64(c.Offered)
	}
	for bs, n := range c.Batches {
		if n > 0 {
			s.BatchSizeHist[bs] = n
		}
	}
	if answered := c.Good + c.Late; answered > 0 {
		s.MeanBatchSize = float64(c.BatchWeighted) / float64(answered)
	}
	if n := c.Profile.Batches(); n > 0 {
		s.ProfileBatches = uint64(n)
		s.ProfileRatioP50, s.ProfileRatioP99 = c.Profile.Quantile(0.50), c.Profile.Quantile(0.99)
	}
	for p, l := range c.Levels {
		ps := PriorityStats{Level: uint8(p), Offered: l.Offered, Good: l.Good}
		if l.Offered > 0 {
			ps.BadRate = float64(l.Offered-min(l.Good, l.Offered)) / float64(l.Offered)
		}
		s.Priorities = append(s.Priorities, ps)
	}
	slices.SortFunc(s.Priorities, func(a, b PriorityStats) int { return int(b.Level) - int(a.Level) })
	for r, n := range c.Reasons {
		if n > 0 {
			if s.DropReasons == nil {
				s.DropReasons = map[string]uint64{}
			}
			s.DropReasons[r] = n
		}
	}
	return s
}

// Ms converts a duration to the milliseconds reports state latencies in.
func Ms(d time.Duration) float64 { return d.Seconds() * 1e3 }

// ModelCounts are one model's Counts with the model's name and SLO.
type ModelCounts struct {
	Name string
	SLO  time.Duration
	Counts
}

// Interval is one interval of a run's time series: its requests by arrival
// time, and the GPU time of batches that ran in it.
type Interval struct {
	Offered, Good, Bad uint64
	Busy               time.Duration
	// With an epoch job (Measurement.Epochs): the GPU time assigned to a
	// part, and the good and bad requests by model.
	InUse               time.Duration
	ModelGood, ModelBad []uint64
}

// Add adds o's requests and busy time to iv: how a run measured by several
// collectors makes one series.
func (iv *Interval) Add(o *Interval) {
	iv.Offered += o.Offered
	iv.Good += o.Good
	iv.Bad += o.Bad
	iv.Busy += o.Busy
}

// Measurement is what a run measured, the input of Build.
type Measurement struct {
	Workload, Policy string
	Seed             uint64
	GPUs             int
	CostPerHour      float64
	// Seconds is the length of the measured window (or of the part of it
	// that ran).
	Seconds float64
	Models  []ModelCounts
	// GPUBusy is each GPU's busy time in the window, by GPU ID, when the
	// run knows it (the simulator); nil otherwise (the live cluster's
	// timings carry no GPU), and the cluster's busy fraction is then the
	// models' busy time over the cluster's.
	GPUBusy []time.Duration
	// Epochs marks a run with an epoch job: GPUs outside every part are
	// not the scheduler's to idle, so fractions are of InUse, the GPU time
	// assigned to a part in the window, and the series of InUse per
	// interval.
	Epochs bool
	InUse  time.Duration
	// Series is the time series, from the start of the run, by Interval;
	// intervals that start at or after End are left out.
	Series   []Interval
	Interval time.Duration
	End      time.Duration
	Faults   *FaultReport
}

// Build turns a run's measurement into its report: per-model and total
// statistics, the GPU busy and idle fractions, the autoscaler's advice for
// the window and for each interval of the series. It is the one report
// builder of the simulator and the live load generator, so that their
// reports can be compared field by field.
func Build(m *Measurement) *Report {
	seconds := m.Seconds
	rep := &Report{Workload: m.Workload, Policy: m.Policy, Seed: m.Seed, GPUs: m.GPUs, DurationSeconds: seconds, CostPerHour: m.CostPerHour}
	var total Counts
	for i := range m.Models {
		mc := &m.Models[i]
		mr := ModelReport{Name: mc.Name, SLOms: Ms(mc.SLO), Stats: mc.Stats(seconds), Latency: &mc.Latency}
		// A model's share of the cluster: the GPU time its batches used.
		mr.GPUBusyFraction = fraction(mc.Busy.Seconds() / seconds / float64(m.GPUs))
		rep.Models = append(rep.Models, mr)
		total.Merge(&mc.Counts)
	}
	rep.Stats = total.Stats(seconds)
	rep.Latency, rep.Queueing = &total.Latency, &total.Queueing
	if len(m.GPUBusy) > 0 {
		var busy float64
		for _, b := range m.GPUBusy {
			f := b.Seconds() / seconds
			rep.GPUBusy = append(rep.GPUBusy, f)
			busy += f
		}
		rep.GPUBusyFraction = busy / float64(len(m.GPUBusy))
		if m.Epochs && m.InUse > 0 {
			rep.GPUBusyFraction = busy * seconds / m.InUse.Seconds()
		}
	} else {
		rep.GPUBusyFraction = fraction(total.Busy.Seconds() / seconds / float64(m.GPUs))
	}
	rep.GPUIdleFraction = 1 - rep.GPUBusyFraction
	cfg := scheduler.DefaultAutoscaleConfig()
	rep.Autoscale = advice(cfg.Advise(scheduler.Signals{
		GPUs: m.GPUs, Requests: total.Offered, BadRate: rep.BadRate, IdleFraction: rep.GPUIdleFraction,
	}))
	iv := m.Interval.Seconds()
	for i := range m.Series {
		if time.Duration(i)*m.Interval >= m.End {
			break
		}
		b := &m.Series[i]
		tp := TimePoint{Start: float64(i) * iv, OfferedRPS: float64(b.Offered) / iv, GoodputRPS: float64(b.Good) / iv,
			BusyGPUs: b.Busy.Seconds() / iv, GPUs: m.GPUs}
		if b.Offered > 0 {
			tp.BadRate = float64(b.Bad) / float64(b.Offered)
		}
		inUse := float64(m.GPUs)
		if m.Epochs {
			inUse = b.InUse.Seconds() / iv
			tp.GPUsInUse = inUse
			tp.GPUs = int(math.Round(inUse))
			for j := range m.Models {
				tp.ModelGoodputRPS = append(tp.ModelGoodputRPS, float64(b.ModelGood[j])/iv)
				tp.ModelBadRPS = append(tp.ModelBadRPS, float64(b.ModelBad[j])/iv)
			}
		}
		idle := 0.0
		if inUse > 0 {
			idle = fraction(1 - tp.BusyGPUs/inUse)
		}
		tp.Advice = advice(cfg.Advise(scheduler.Signals{GPUs: tp.GPUs, Requests: b.Offered, BadRate: tp.BadRate, IdleFraction: idle}))
		rep.TimeSeries = append(rep.TimeSeries, tp)
	}
	rep.Faults = m.Faults
	return rep
}

// fraction clamps f into [0, 1]: live timings from several clocks can put a
// busy time a little past its window.
func fraction(f float64) float64 { return min(max(f, 0), 1) }

// advice is the autoscaler's advice as a report states it.
func advice(a scheduler.AutoscaleAdvice) Advice {
	return Advice{Action: string(a.Action), GPUs: a.GPUs, Reason: a.Reason}
}

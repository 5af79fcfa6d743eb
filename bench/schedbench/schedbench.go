// Package schedbench measures the real-time scheduler alone, like Figure 11
// (left) of the Symphony paper: in-process frontends offer requests to the
// ModelThreads, and in-process GPUs are just the rank loop's free_at times.
// There is no network and no executor, so what is measured is the scheduling
// path: enqueue, candidate update, rank, grant, plan.
package schedbench

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/scheduler/rt"
)

// Options configure one benchmark run.
type Options struct {
	Models int
	GPUs   int
	// Threads is GOMAXPROCS during the run: the worker threads the model
	// and rank goroutines (and the load generator) share.
	Threads int
	// Rate is the offered load, requests per second over all models.
	Rate     float64
	Warmup   time.Duration
	Duration time.Duration
	// Alpha, Beta and SLO describe every model. The defaults give the
	// cluster room for well over the offered load, so that what limits the
	// run is the scheduler, not the emulated GPUs.
	Alpha, Beta, SLO time.Duration
	Policy           scheduler.Policy
}

// DefaultOptions are the settings of the acceptance run: 20 models and 200
// GPUs offered 1.2 million requests per second.
func DefaultOptions() Options {
	return Options{
		Models: 20, GPUs: 200, Threads: 2, Rate: 1_200_000,
		Warmup: time.Second, Duration: 5 * time.Second,
		Alpha: 50 * time.Microsecond, Beta: time.Millisecond, SLO: 50 * time.Millisecond,
	}
}

// Validate checks the options.
func (o Options) Validate() error {
	switch {
	case o.Models < 1 || o.GPUs < 1 || o.Threads < 1:
		return fmt.Errorf("schedbench: models, gpus and threads must be at least 1")
	case !(o.Rate > 0):
		return fmt.Errorf("schedbench: rate must be positive")
	case o.Duration <= 0 || o.Warmup < 0:
		return fmt.Errorf("schedbench: duration must be positive and warmup not negative")
	case o.SLO <= 0:
		return fmt.Errorf("schedbench: slo must be positive")
	}
	return nil
}

// Result is one run's measurement.
type Result struct {
	Models  int `json:"models"`
	GPUs    int `json:"gpus"`
	Threads int `json:"threads"`
	// OfferedRPS is what the load generator managed to offer.
	OfferedRPS float64 `json:"offered_rps"`
	// RequestsPerSecond is the rate of requests the scheduler placed in
	// batches in time: the throughput it sustained.
	RequestsPerSecond float64 `json:"requests_per_second"`
	// BadRate is the fraction of requests dropped in the window.
	BadRate       float64 `json:"bad_rate"`
	MeanBatchSize float64 `json:"mean_batch_size"`
	// RankUtilization is the fraction of wall time the rank loop was busy.
	RankUtilization float64 `json:"rank_utilization"`
	// PlansPerSecond is the rank loop's grant rate.
	PlansPerSecond float64 `json:"plans_per_second"`
	// Sustained says whether the load generator offered at least 99% of the
	// target rate and the bad rate stayed within 1%.
	Sustained bool `json:"sustained"`
}

// counters are written by one model's goroutine and read by the benchmark.
type counters struct {
	planned, dropped, plans atomic.Uint64
	_                       [40]byte // keep models' counters on separate cache lines
}

type sink struct{ per []counters }

func (s *sink) Planned(p *scheduler.BatchPlan) scheduler.Time {
	c := &s.per[p.Model]
	c.planned.Add(uint64(len(p.Requests)))
	c.plans.Add(1)
	return p.FinishAt // in-process GPUs run exactly as planned
}

func (s *sink) Dropped(m scheduler.ModelID, _ *scheduler.Drop) { s.per[m].dropped.Add(1) }

func (s *sink) totals() (planned, dropped, plans uint64) {
	for i := range s.per {
		planned += s.per[i].planned.Load()
		dropped += s.per[i].dropped.Load()
		plans += s.per[i].plans.Load()
	}
	return
}

// Run runs the benchmark. It sets GOMAXPROCS to Threads for the run.
func Run(o Options) (Result, error) {
	if err := o.Validate(); err != nil {
		return Result{}, err
	}
	prev := runtime.GOMAXPROCS(o.Threads)
	defer runtime.GOMAXPROCS(prev)

	prof, err := profile.Linear(o.Alpha, o.Beta, 0)
	if err != nil {
		return Result{}, err
	}
	cfg := rt.Config{Rank: scheduler.RankConfig{Models: o.Models, GPUs: o.GPUs, Policy: o.Policy}}
	for i := 0; i < o.Models; i++ {
		cfg.Models = append(cfg.Models, scheduler.ModelConfig{
			ID: scheduler.ModelID(i), Name: fmt.Sprintf("model-%d", i), Profile: prof, Policy: o.Policy,
		})
	}
	sk := &sink{per: make([]counters, o.Models)}
	s, err := rt.Start(cfg, sk)
	if err != nil {
		return Result{}, err
	}

	// The load generator: open loop, paced by the wall clock, offering
	// every model its share in chunks.
	type snapshot struct {
		at                      time.Time
		issued                  uint64
		planned, dropped, plans uint64
		rankBusy                time.Duration
	}
	take := func(issued uint64) snapshot {
		p, d, n := sk.totals()
		busy, _ := s.RankStats()
		return snapshot{at: time.Now(), issued: issued, planned: p, dropped: d, plans: n, rankBusy: busy}
	}
	var issued uint64
	var nextID scheduler.RequestID
	chunk := make([]scheduler.Request, 0, 4096)
	start := time.Now()
	warmEnd := start.Add(o.Warmup)
	end := warmEnd.Add(o.Duration)
	var before snapshot
	warmed := false
	model := 0
	for {
		now := time.Now()
		if !warmed && !now.Before(warmEnd) {
			before, warmed = take(issued), true
		}
		if !now.Before(end) {
			break
		}
		due := uint64(o.Rate*now.Sub(start).Seconds()) - issued
		if due == 0 {
			runtime.Gosched()
			continue
		}
		if due > uint64(o.Models)*1024 {
			due = uint64(o.Models) * 1024 // catch up gradually, never in one huge burst
		}
		at := s.Time(now)
		per := int(due) / o.Models
		extra := int(due) % o.Models
		for i := 0; i < o.Models; i++ {
			n := per
			if i < extra {
				n++
			}
			if n == 0 {
				continue
			}
			chunk = chunk[:0]
			for j := 0; j < n; j++ {
				nextID++
				chunk = append(chunk, scheduler.Request{ID: nextID, Arrival: at, Deadline: at.Add(o.SLO)})
			}
			if err := s.Submit(scheduler.ModelID(model), chunk); err != nil {
				s.Stop()
				return Result{}, err
			}
			model = (model + 1) % o.Models
		}
		issued += due
	}
	after := take(issued)
	// Let every request end: planned, or dropped at its deadline.
	deadline := time.Now().Add(o.SLO + 2*time.Second)
	for time.Now().Before(deadline) {
		p, d, _ := sk.totals()
		if p+d >= issued {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.Stop()
	if p, d, _ := sk.totals(); p+d != issued {
		return Result{}, fmt.Errorf("schedbench: %d requests issued but %d ended", issued, p+d)
	}

	secs := after.at.Sub(before.at).Seconds()
	planned := float64(after.planned - before.planned)
	dropped := float64(after.dropped - before.dropped)
	plans := float64(after.plans - before.plans)
	r := Result{
		Models: o.Models, GPUs: o.GPUs, Threads: o.Threads,
		OfferedRPS:        float64(after.issued-before.issued) / secs,
		RequestsPerSecond: planned / secs,
		PlansPerSecond:    plans / secs,
		RankUtilization:   (after.rankBusy - before.rankBusy).Seconds() / secs,
	}
	if planned+dropped > 0 {
		r.BadRate = dropped / (planned + dropped)
	}
	if plans > 0 {
		r.MeanBatchSize = planned / plans
	}
	r.Sustained = r.BadRate <= 0.01 && r.OfferedRPS >= 0.99*o.Rate
	return r, nil
}

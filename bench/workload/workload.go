// Package workload describes the load a simulation or benchmark offers: the
// cluster, the network delays, the models with their profiles and SLOs, and
// each model's arrival process. Parse reads the YAML format documented in
// docs/workload-format.md; Generator turns a Workload into arrivals.
package workload

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/symphony-serving/symphony/partition/epoch"
	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/serving"
)

// Workload is one parsed workload file, with zoos expanded into models.
type Workload struct {
	// Source names where the workload came from (a file path), for messages.
	Source string
	// Seed drives every random draw; the same seed gives the same run.
	Seed uint64
	// Duration is the measured window; Warmup is load offered before it.
	Duration time.Duration
	Warmup   time.Duration
	Cluster  Cluster
	// Settings are the file's serving settings: the policy and its
	// tuning, the network delays the scheduler budgets for and the
	// simulator applies, the live floor and the limits.
	serving.Settings
	Models []Model
	// NexusFrontends is how many frontends route requests independently
	// under the nexus policy (0: default 1).
	NexusFrontends int
	// AutoscaleWindow is the window for the autoscaling signals in time
	// series; 0 means the whole measured window only.
	AutoscaleWindow time.Duration
	// Epoch, when set, makes the simulator run the epoch job: it partitions
	// the models into sub-clusters, sizes them and applies the autoscaler's
	// advice every Epoch.Interval, within Cluster.GPUs.
	Epoch *Epoch
	// Faults is the fault scenario, in time order: what demo plays against
	// its in-process cluster and the simulator against its model of it.
	Faults []Fault
}

// Epoch configures the epoch job (paper §4.7 and §4.4) in a simulation.
type Epoch struct {
	// Interval is how often the job runs.
	Interval time.Duration
	// ModelLoadTime is how long a GPU takes to load one model; a loading
	// GPU runs no batches.
	ModelLoadTime time.Duration
	// Parts is the number of sub-clusters, each with its own rank loop.
	Parts int
	// Headroom is the capacity each part gets above its measured need.
	Headroom float64
	// MaxDisruption is C_max, the bytes of model loads and unloads one
	// re-partitioning may cost; negative means no limit.
	MaxDisruption int64
	// MaxRatePerPart (R_max, 0: none) and GPUMemory (S_max, 0: none) bound
	// each part.
	MaxRatePerPart float64
	GPUMemory      int64
	// RebalanceAbove: the job keeps the current assignment while its rate
	// imbalance ((max−min)/avg over parts) stays within it, since every
	// move costs loads for a gain the rank loops barely notice.
	RebalanceAbove float64
	// Engine names the partitioning engine: heuristic, milp or random.
	Engine string
}

// DefaultEpoch returns the epoch settings a workload's epoch mapping starts
// from: one part, loads of 1 s per model, 25% headroom (the sizing default),
// no disruption limit, re-partitioning above a 10% rate imbalance and the
// heuristic engine.
func DefaultEpoch() Epoch {
	return Epoch{ModelLoadTime: time.Second, Parts: 1, Headroom: 0.25, MaxDisruption: -1, RebalanceAbove: 0.1, Engine: "heuristic"}
}

// Cluster is the GPU pool.
type Cluster struct {
	// GPUs is the total number of GPUs (the sum over GPUTypes when given).
	GPUs     int
	GPUTypes []GPUType
	// BackendCount is how many backend processes share the GPUs evenly
	// (cluster.backends); 0 lets Backends choose.
	BackendCount int
}

// GPUType is one kind of GPU in a heterogeneous pool, for placement and cost.
type GPUType struct {
	Name         string
	Count        int
	Memory       int64 // bytes
	PricePerHour float64
}

// Model is one served model and the load offered to it: the serving
// configuration's model (which the file's serving keys set; the load
// generator sends inputs of its InputBytes) plus its rates and arrival
// process.
type Model struct {
	serving.Model
	// Rates is the offered rate over time: consecutive phases, the last of
	// which lasts forever. A constant rate is one phase.
	Rates   []RatePhase
	Arrival Arrival
	// PriorityMix is the share of the model's requests sent at each
	// priority level above 0, highest level first; level 0 takes the rest.
	// Empty: every request at level 0, as if priorities did not exist.
	PriorityMix []PriorityShare
	// GPUType pins the model to the GPUs of one of the cluster's gpu_types
	// (empty: any GPU). Pinned models run in one rank loop per type, so a
	// heterogeneous cluster serves each model only on the hardware its
	// profile was measured on (a provision's export, docs/workload-format.md).
	GPUType string
	// Concurrency is how many of the model's batches a GPU runs at once
	// (Scrooge's concurrency level; 0 and 1 mean one). Profile is then the
	// latency of one batch while that many run together: a batch holds its
	// GPU for ℓ(b)/Concurrency and answers ℓ(b) after it starts. Only the
	// simulator models it.
	Concurrency int
	// Stream names an arrival stream the model shares with the other
	// models that name it: one stream at their rates' sum, each arrival
	// dispatched to one of them in runs of its StreamBatch (0: 1)
	// consecutive requests, so that each collects a batch at the stream's
	// whole rate, as batch-aware dispatch (Harpagon's Theorem 1) sends a
	// module's requests to its configurations' machines. Members of a
	// stream have one constant rate each and the same arrival process.
	Stream      string
	StreamBatch int
}

// Occupancy is how long a batch of b holds its GPU: ℓ(b) over the
// model's concurrency.
func (m *Model) Occupancy(b int) time.Duration {
	l := m.Profile.Latency(b)
	if m.Concurrency > 1 {
		e := time.Duration(m.Concurrency)
		l = (l + e - 1) / e
	}
	return l
}

// PriorityShare is the fraction of a model's requests sent at one
// priority level.
type PriorityShare struct {
	Level scheduler.Priority
	Share float64
}

// PriorityOf is the priority level of the model's k-th request (from 0).
// It is a pure function of k, without a random draw, so that the simulator
// and the live load generator give the same requests the same levels, and a
// mix changes no other random draw of the run: the golden-ratio sequence
// frac((k+1)·0.618…) spreads the levels evenly, and any stretch of n
// requests holds each level's share of them to within a few requests.
func (m *Model) PriorityOf(k uint64) scheduler.Priority {
	if len(m.PriorityMix) == 0 {
		return 0
	}
	const invPhi = 0.6180339887498949
	_, u := math.Modf(float64(k+1) * invPhi)
	for _, s := range m.PriorityMix {
		if u < s.Share {
			return s.Level
		}
		u -= s.Share
	}
	return 0
}

// RatePhase is a stretch of constant offered rate.
type RatePhase struct {
	// Duration is how long the phase lasts; 0 on the last phase means until
	// the end of the run.
	Duration time.Duration
	// Rate is requests per second.
	Rate float64
}

// DailyRate is a rate that follows a day's shape: a raised cosine between
// Low and High that peaks at PeakAt and repeats every Period, held constant
// for each Step (a rate schedule, as the simulator's generator needs).
type DailyRate struct {
	Low, High    float64
	Period       time.Duration
	PeakAt, Step time.Duration
}

// At is the curve's rate at time t.
func (d DailyRate) At(t time.Duration) float64 {
	x := 2 * math.Pi * float64(t-d.PeakAt) / float64(d.Period)
	return d.Low + (d.High-d.Low)*(1+math.Cos(x))/2
}

// Phases expands the curve into one phase per step, covering [0, length];
// each phase takes the curve's value at its middle.
func (d DailyRate) Phases(length time.Duration) []RatePhase {
	// Count the steps first: a loop on t+Step > length would overflow
	// and never end for a length near the largest Duration.
	n := int64(max(length, 0)/d.Step) + 1
	out := make([]RatePhase, 0, n)
	for i := range n {
		t := time.Duration(i) * d.Step
		mid := t + d.Step/2
		if mid < t { // overflowed
			mid = t
		}
		out = append(out, RatePhase{Duration: d.Step, Rate: d.At(mid)})
	}
	return out
}

// ArrivalKind is the distribution of the gaps between arrivals.
type ArrivalKind uint8

const (
	// ArrivalPoisson: exponential gaps.
	ArrivalPoisson ArrivalKind = iota
	// ArrivalGamma: Gamma(shape) gaps; burstier as shape falls below 1.
	// Gamma(1) is Poisson.
	ArrivalGamma
	// ArrivalConstant: evenly spaced arrivals.
	ArrivalConstant
)

// Arrival is a model's arrival process.
type Arrival struct {
	Kind  ArrivalKind
	Shape float64 // Gamma shape, only for ArrivalGamma
}

// String returns the arrival as written in workload files.
func (a Arrival) String() string {
	switch a.Kind {
	case ArrivalPoisson:
		return "poisson"
	case ArrivalGamma:
		return fmt.Sprintf("gamma:%g", a.Shape)
	case ArrivalConstant:
		return "const"
	}
	return fmt.Sprintf("Arrival(%d)", a.Kind)
}

// Serving is the served model, without its load.
func (m *Model) Serving() serving.Model { return m.Model }

// fromServing is a workload model serving sm, with no load yet.
func fromServing(sm serving.Model) Model { return Model{Model: sm} }

// Serving is the workload's serving configuration: what a scheduler
// serving its models is configured with (symphony scheduler -f reads the
// same from the file through serving.ParseFile).
func (w *Workload) Serving() serving.Config {
	c := serving.Config{Source: w.Source, Settings: w.Settings}
	for i := range w.Models {
		c.Models = append(c.Models, w.Models[i].Model)
	}
	return c
}

// RateAt is the model's offered rate t after the start of the run (warmup
// included).
func (m *Model) RateAt(t time.Duration) float64 {
	var start time.Duration
	for i, p := range m.Rates {
		if p.Duration == 0 || i == len(m.Rates)-1 || t < start+p.Duration {
			return p.Rate
		}
		start += p.Duration
	}
	return 0
}

// MeanRate is the model's average offered rate over [from, to).
func (m *Model) MeanRate(from, to time.Duration) float64 {
	if to <= from {
		return m.RateAt(from)
	}
	var sum float64
	var start time.Duration
	for i, p := range m.Rates {
		end := start + p.Duration
		if p.Duration == 0 || i == len(m.Rates)-1 {
			end = to
		}
		lo, hi := max(start, from), min(end, to)
		if hi > lo {
			sum += p.Rate * (hi - lo).Seconds()
		}
		start = end
		if start >= to {
			break
		}
	}
	return sum / (to - from).Seconds()
}

// TotalRate is the sum of every model's mean rate over the measured window.
func (w *Workload) TotalRate() float64 {
	var s float64
	for i := range w.Models {
		s += w.Models[i].MeanRate(w.Warmup, w.Warmup+w.Duration)
	}
	return s
}

// Scaled returns a copy of w with every rate multiplied by k, as the goodput
// search does.
func (w *Workload) Scaled(k float64) *Workload {
	c := *w
	c.Models = make([]Model, len(w.Models))
	for i, m := range w.Models {
		m.Rates = append([]RatePhase(nil), m.Rates...)
		for j := range m.Rates {
			m.Rates[j].Rate *= k
		}
		c.Models[i] = m
	}
	c.Faults = slices.Clone(w.Faults)
	return &c
}

// EpochConfig is the epoch controller core's configuration for w's epoch
// section (nil Epoch: the zero Config): what the simulator's epoch job and
// the live controller of `symphony-bench demo --controller` both run.
func (w *Workload) EpochConfig() epoch.Config {
	c := w.Epoch
	if c == nil {
		return epoch.Config{}
	}
	return epoch.Config{
		Parts: c.Parts, Headroom: c.Headroom, MaxDisruption: c.MaxDisruption, RebalanceAbove: c.RebalanceAbove,
		MaxRatePerPart: c.MaxRatePerPart, GPUMemory: c.GPUMemory, Engine: c.Engine, Seed: w.Seed,
		ModelLoadTime: c.ModelLoadTime, Network: w.Network, Autoscale: epoch.DefaultAutoscale(c.Headroom),
	}
}

// Validate checks the invariants Parse guarantees, for workloads built in
// code.
func (w *Workload) Validate() error {
	switch {
	case w.Duration <= 0:
		return fmt.Errorf("workload %s: duration must be positive", w.Source)
	case w.Warmup < 0:
		return fmt.Errorf("workload %s: warmup must not be negative", w.Source)
	case w.Cluster.GPUs < 1:
		return fmt.Errorf("workload %s: cluster.gpus must be at least 1", w.Source)
	case len(w.Models) == 0:
		return fmt.Errorf("workload %s: no models", w.Source)
	case w.Cluster.BackendCount < 0 || w.Cluster.BackendCount > 0 && w.Cluster.GPUs%w.Cluster.BackendCount != 0:
		return fmt.Errorf("workload %s: cluster.backends %d does not divide cluster.gpus %d", w.Source, w.Cluster.BackendCount, w.Cluster.GPUs)
	}
	backends, _ := w.Cluster.Backends()
	for i, f := range w.Faults {
		switch {
		case f.At < 0 || f.For < 0:
			return fmt.Errorf("workload %s: faults[%d]: negative time", w.Source, i)
		case f.Action < FaultKill || f.Action > FaultCut:
			return fmt.Errorf("workload %s: faults[%d]: unknown action %d", w.Source, i, f.Action)
		case f.Target.Kind < TargetBackend || f.Target.Kind > TargetFrontend:
			return fmt.Errorf("workload %s: faults[%d]: unknown target", w.Source, i)
		case f.Target.Kind == TargetBackend && (f.Target.Index < 0 || f.Target.Index >= backends):
			return fmt.Errorf("workload %s: faults[%d]: %v, but the cluster has %d backends", w.Source, i, f.Target, backends)
		case f.Target.Kind == TargetFrontend && f.Target.Index != 0:
			return fmt.Errorf("workload %s: faults[%d]: %v: the load runs through frontend-0 only", w.Source, i, f.Target)
		case f.Action == FaultStall && f.For <= 0:
			return fmt.Errorf("workload %s: faults[%d]: a stall needs a positive for", w.Source, i)
		case f.Action == FaultCut && f.Target.Kind == TargetScheduler:
			return fmt.Errorf("workload %s: faults[%d]: cut takes a backend or a frontend", w.Source, i)
		case i > 0 && f.At < w.Faults[i-1].At:
			return fmt.Errorf("workload %s: faults out of time order", w.Source)
		}
	}
	if err := w.Network.Validate(); err != nil {
		return fmt.Errorf("workload %s: %w", w.Source, err)
	}
	seen := make(map[string]bool, len(w.Models))
	for i := range w.Models {
		m := &w.Models[i]
		if seen[m.Name] {
			return fmt.Errorf("workload %s: model %q appears twice", w.Source, m.Name)
		}
		seen[m.Name] = true
		if !m.Profile.Valid() {
			return fmt.Errorf("workload %s: model %q has no profile", w.Source, m.Name)
		}
		if m.SLO <= 0 {
			return fmt.Errorf("workload %s: model %q: slo must be positive", w.Source, m.Name)
		}
		if len(m.Rates) == 0 {
			return fmt.Errorf("workload %s: model %q has no rate", w.Source, m.Name)
		}
		for _, p := range m.Rates {
			if p.Rate < 0 || p.Duration < 0 {
				return fmt.Errorf("workload %s: model %q: negative rate or phase duration", w.Source, m.Name)
			}
		}
		if m.Arrival.Kind == ArrivalGamma && !(m.Arrival.Shape > 0) {
			return fmt.Errorf("workload %s: model %q: gamma shape must be positive", w.Source, m.Name)
		}
		if m.Concurrency < 0 || m.Concurrency > MaxConcurrency {
			return fmt.Errorf("workload %s: model %q: concurrency %d is outside 1..%d", w.Source, m.Name, m.Concurrency, MaxConcurrency)
		}
		if (m.GPUType == "") != (w.Models[0].GPUType == "") {
			return fmt.Errorf("workload %s: model %q: give every model a gpu_type or none (model %q has %q)", w.Source, m.Name, w.Models[0].Name, w.Models[0].GPUType)
		}
		if m.GPUType != "" && !slices.ContainsFunc(w.Cluster.GPUTypes, func(g GPUType) bool { return g.Name == m.GPUType }) {
			return fmt.Errorf("workload %s: model %q: gpu_type %q is not one of the cluster's gpu_types", w.Source, m.Name, m.GPUType)
		}
	}
	streams := map[string]*Model{}
	for i := range w.Models {
		m := &w.Models[i]
		if m.Stream == "" {
			if m.StreamBatch != 0 {
				return fmt.Errorf("workload %s: model %q: stream_batch without a stream", w.Source, m.Name)
			}
			continue
		}
		switch lead := streams[m.Stream]; {
		case len(m.Rates) != 1 || m.Rates[0].Duration != 0:
			return fmt.Errorf("workload %s: model %q: a stream's models each take one constant rate", w.Source, m.Name)
		case m.StreamBatch < 0 || m.StreamBatch > MaxStreamBatch:
			return fmt.Errorf("workload %s: model %q: stream_batch %d is outside 1..%d", w.Source, m.Name, m.StreamBatch, MaxStreamBatch)
		case lead == nil:
			streams[m.Stream] = m
		case lead.Arrival != m.Arrival:
			return fmt.Errorf("workload %s: model %q: stream %q has the arrival process of %q, which differs", w.Source, m.Name, m.Stream, lead.Name)
		}
	}
	if w.Pinned() || w.Concurrent() {
		switch {
		case w.Epoch != nil:
			return fmt.Errorf("workload %s: gpu_type and concurrency are the simulator's static placement; the epoch job places models itself", w.Source)
		case len(w.Faults) > 0:
			return fmt.Errorf("workload %s: gpu_type and concurrency are not modelled under faults", w.Source)
		case w.Policy == scheduler.PolicyNexus:
			return fmt.Errorf("workload %s: gpu_type and concurrency run with the symphony, work-conserving and clockwork policies, not nexus", w.Source)
		}
	}
	if e := w.Epoch; e != nil {
		switch {
		case e.Interval <= 0:
			return fmt.Errorf("workload %s: epoch.interval must be positive", w.Source)
		case e.ModelLoadTime < 0:
			return fmt.Errorf("workload %s: epoch.model_load_time must not be negative", w.Source)
		case e.Parts < 1 || e.Parts > len(w.Models):
			return fmt.Errorf("workload %s: epoch.parts must be in 1..%d (the number of models), have %d", w.Source, len(w.Models), e.Parts)
		case e.Parts > w.Cluster.GPUs:
			return fmt.Errorf("workload %s: epoch.parts %d exceeds cluster.gpus %d", w.Source, e.Parts, w.Cluster.GPUs)
		case !(e.RebalanceAbove >= 0) || math.IsInf(e.RebalanceAbove, 0):
			return fmt.Errorf("workload %s: epoch.rebalance_above must be a non-negative number", w.Source)
		case !(e.Headroom >= 0) || math.IsInf(e.Headroom, 0):
			return fmt.Errorf("workload %s: epoch.headroom must be a non-negative number", w.Source)
		case e.MaxRatePerPart < 0 || e.GPUMemory < 0:
			return fmt.Errorf("workload %s: epoch limits must not be negative", w.Source)
		case !slices.Contains(EpochEngines, e.Engine):
			return fmt.Errorf("workload %s: epoch.engine %q is not one of %s", w.Source, e.Engine, strings.Join(EpochEngines, ", "))
		case w.Policy == scheduler.PolicyNexus:
			return fmt.Errorf("workload %s: the epoch job runs with the symphony, work-conserving and clockwork policies, not nexus (which binds models to GPUs itself)", w.Source)
		}
	}
	return nil
}

// MaxConcurrency bounds a model's concurrency, as the application file's.
const MaxConcurrency = 1024

// MaxStreamBatch bounds a stream's run length, as a profile's batch.
const MaxStreamBatch = 1 << 16

// Pinned reports whether the models are pinned to gpu_types.
func (w *Workload) Pinned() bool { return len(w.Models) > 0 && w.Models[0].GPUType != "" }

// Concurrent reports whether a model runs more than one batch at once on a
// GPU.
func (w *Workload) Concurrent() bool {
	return slices.ContainsFunc(w.Models, func(m Model) bool { return m.Concurrency > 1 })
}

// CostPerHour is what the cluster's GPUs cost per hour, from the prices of
// its gpu_types (0 when none has a price).
func (c *Cluster) CostPerHour() float64 {
	sum := 0.0
	for _, g := range c.GPUTypes {
		sum += float64(g.Count) * g.PricePerHour
	}
	return sum
}

// GPUsOfType returns the IDs of the GPUs of the named type: the types hold
// consecutive IDs in the order the cluster lists them.
func (c *Cluster) GPUsOfType(name string) (first, count int) {
	for _, g := range c.GPUTypes {
		if g.Name == name {
			return first, g.Count
		}
		first += g.Count
	}
	return 0, 0
}

// EpochEngines are the partitioning engines an epoch may name.
var EpochEngines = []string{"heuristic", "milp", "random"}

// Package report holds the results of a simulation or benchmark run, the
// fields users and CI script against (docs/workload-format.md), and writes
// them as JSON, CSV, a human table and charts.
package report

// Report is one run's results. Latencies are in milliseconds, rates in
// requests per second, fractions in [0, 1].
type Report struct {
	Workload        string  `json:"workload"`
	Policy          string  `json:"policy"`
	Seed            uint64  `json:"seed"`
	GPUs            int     `json:"gpus"`
	DurationSeconds float64 `json:"duration_seconds"`
	// CostPerHour is what the cluster's GPUs cost an hour, from its
	// gpu_types' prices (absent without prices).
	CostPerHour float64 `json:"cost_per_hour,omitempty"`
	Stats
	// GPUBusy is each GPU's busy fraction over the window, by GPU ID.
	GPUBusy   []float64     `json:"gpu_busy_per_gpu"`
	Autoscale Advice        `json:"autoscale"`
	Models    []ModelReport `json:"models"`
	// GoodputSearch is present when the run searched for goodput.
	GoodputSearch *GoodputSearch `json:"goodput_search,omitempty"`
	// TimeSeries has one point per interval of the run, warmup included.
	TimeSeries []TimePoint `json:"timeseries,omitempty"`
	// Epochs has one record per run of the epoch job, when the workload
	// has one (§4.7 and §4.4 in the simulator).
	Epochs []EpochRecord `json:"epochs,omitempty"`
	// Faults is how the run fared under its fault scenario, when the
	// workload has one.
	Faults *FaultReport `json:"faults,omitempty"`
	// Backends is what a live cluster's backends saw of their own timing
	// (symphony demo), over the whole run, warmup included.
	Backends *BackendTiming `json:"backends,omitempty"`

	// Latency holds every answered request's end-to-end latency, for plots.
	Latency *Histogram `json:"-"`
	// Queueing holds every started request's time from arrival to the
	// start of its batch (the paper's queuing delay, Figure 9), for plots.
	Queueing *Histogram `json:"-"`
}

// Stats are the fields reported for the whole run and for each model.
type Stats struct {
	Offered uint64 `json:"offered"`
	// Good were answered within their SLO; Late were answered after it.
	Good    uint64 `json:"good"`
	Late    uint64 `json:"late"`
	Dropped uint64 `json:"dropped"`
	Failed  uint64 `json:"failed"`

	OfferedRPS  float64 `json:"offered_rps"`
	GoodputRPS  float64 `json:"goodput_rps"`
	BadRate     float64 `json:"bad_rate"`
	LatencyP50  float64 `json:"latency_p50"`
	LatencyP99  float64 `json:"latency_p99"`
	LatencyP999 float64 `json:"latency_p999"`
	QueueingP50 float64 `json:"queueing_p50"`
	QueueingP99 float64 `json:"queueing_p99"`
	// BatchSizeHist maps a batch size to the number of batches of that size.
	BatchSizeHist map[int]uint64 `json:"batch_size_hist"`
	// MeanBatchSize is the mean batch size weighted by requests: the batch
	// size the average request ran in.
	MeanBatchSize   float64           `json:"mean_batch_size"`
	GPUBusyFraction float64           `json:"gpu_busy_fraction"`
	GPUIdleFraction float64           `json:"gpu_idle_fraction"`
	DropReasons     map[string]uint64 `json:"drop_reasons,omitempty"`
	// ProfileBatches is the number of distinct batches (by start, finish
	// and size) that started in the window and were compared with the
	// scheduler's profile; ProfileRatioP50 and ProfileRatioP99 are the
	// quantiles over them of each batch's real run time over the profile's
	// ℓ(b) for its size (ProfileFit). Live runs through an embedded
	// frontend fill them; the simulator, which runs ℓ(b) exactly, and the
	// gateway, which does not see the profile, leave them out.
	ProfileBatches  uint64  `json:"profile_batches,omitempty"`
	ProfileRatioP50 float64 `json:"profile_ratio_p50,omitempty"`
	ProfileRatioP99 float64 `json:"profile_ratio_p99,omitempty"`
	// Priorities are the outcomes by priority level, highest first, for a
	// model whose workload gives a priority_mix (and the run's total); nil
	// otherwise.
	Priorities []PriorityStats `json:"priorities,omitempty"`
}

// PriorityStats are the requests of one priority level: how many arrived in
// the window, how many were answered within their SLO, and the rest's
// share.
type PriorityStats struct {
	Level   uint8   `json:"level"`
	Offered uint64  `json:"offered"`
	Good    uint64  `json:"good"`
	BadRate float64 `json:"bad_rate"`
}

// ModelReport is one model's share of a run. Its GPUBusyFraction is the
// model's share of the cluster's GPU time; idle time belongs to no model, so
// its GPUIdleFraction is always 0.
type ModelReport struct {
	Name  string  `json:"name"`
	SLOms float64 `json:"slo_ms"`
	Stats
	// Latency holds the model's answered latencies, for plots.
	Latency *Histogram `json:"-"`
}

// Advice is the autoscaler's recommendation (§4.4).
type Advice struct {
	// Action is "add", "remove" or "hold".
	Action string `json:"action"`
	GPUs   int    `json:"gpus"`
	Reason string `json:"reason"`
}

// GoodputSearch records a --find-goodput search: the largest multiplier of
// every rate at which every model's bad rate stays within the target.
type GoodputSearch struct {
	TargetBadRate float64      `json:"target_bad_rate"`
	Multiplier    float64      `json:"multiplier"`
	GoodputRPS    float64      `json:"goodput_rps"`
	Steps         []SearchStep `json:"steps"`
}

// SearchStep is one run of a goodput search. WorstModel and WorstBadRate
// are the worst of the models judged on their own; Sparse, when the run
// offered some models too few requests to measure the target alone, is
// those models judged together (SearchOptions.Judge).
type SearchStep struct {
	Multiplier   float64      `json:"multiplier"`
	OfferedRPS   float64      `json:"offered_rps"`
	GoodputRPS   float64      `json:"goodput_rps"`
	WorstBadRate float64      `json:"worst_bad_rate"`
	WorstModel   string       `json:"worst_model"`
	Sparse       *SparseGroup `json:"sparse,omitempty"`
	OK           bool         `json:"ok"`
}

// SparseGroup is the models of a run that were each offered fewer requests
// than can measure the search's target (SearchOptions.MeasurableRequests),
// judged as one: how many such models, and their requests and bad
// (dropped, failed or late) requests together.
type SparseGroup struct {
	Models  int    `json:"models"`
	Offered uint64 `json:"offered"`
	Bad     uint64 `json:"bad"`
}

// TimePoint summarizes one interval of a run.
type TimePoint struct {
	// Start is seconds since the start of the run (warmup included).
	Start      float64 `json:"start"`
	OfferedRPS float64 `json:"offered_rps"`
	GoodputRPS float64 `json:"goodput_rps"`
	BadRate    float64 `json:"bad_rate"`
	// BusyGPUs is the average number of busy GPUs over the interval.
	BusyGPUs float64 `json:"busy_gpus"`
	// GPUs is the cluster's GPUs, or with an epoch job the GPUs in use
	// (assigned to a part, loading included), rounded; GPUsInUse is the
	// unrounded mean over the interval.
	GPUs      int     `json:"gpus"`
	GPUsInUse float64 `json:"gpus_in_use,omitempty"`
	Advice    Advice  `json:"advice"`
	// ModelGoodputRPS and ModelBadRPS are each model's good and bad
	// (dropped, failed or late) requests per second, by model index, in
	// runs with an epoch job: the stacked panel of the paper's Figure 14.
	ModelGoodputRPS []float64 `json:"model_goodput_rps,omitempty"`
	ModelBadRPS     []float64 `json:"model_bad_rps,omitempty"`
}

// BackendTiming is how far behind their plans a live cluster's GPUs ran:
// what the scheduler corrects for, and what the backends could not make
// up for and dropped.
type BackendTiming struct {
	Batches uint64 `json:"batches"`
	// StartLag quantiles are upper bounds (the histogram's buckets double
	// from 1µs), in milliseconds, of how late batches started against
	// their plans' exec_at.
	StartLagP50ms  float64 `json:"start_lag_p50_ms"`
	StartLagP99ms  float64 `json:"start_lag_p99_ms"`
	StartLagP999ms float64 `json:"start_lag_p999_ms"`
	// DroppedLate counts the requests backends dropped before running
	// them because their GPU ran too late for them.
	DroppedLate uint64 `json:"dropped_late"`
}

// EpochRecord is what one run of the epoch job saw and decided.
type EpochRecord struct {
	// Start is seconds since the start of the run.
	Start float64 `json:"start"`
	// BadRate and IdleFraction are the signals of the epoch that ended
	// (zero for the first, planned on the declared rates).
	BadRate      float64 `json:"bad_rate"`
	IdleFraction float64 `json:"idle_fraction"`
	// GPUsBefore were in use before the decision; Need is the sized need
	// (Eqs. 2-3, without headroom); GPUs is the new total in use.
	GPUsBefore int     `json:"gpus_before"`
	Need       float64 `json:"need"`
	GPUs       int     `json:"gpus"`
	// AdviceGPUs is the autoscaler's net advice summed over parts: GPUs to
	// add (positive) or remove (negative).
	AdviceGPUs int `json:"advice_gpus"`
	// CapacityLimited is true when the parts wanted more GPUs than the
	// cluster has.
	CapacityLimited bool `json:"capacity_limited,omitempty"`
	// The re-partitioning: its engine, imbalance, disruption (bytes) and
	// the models it moved; Skipped says why it did not run.
	Engine          string  `json:"engine,omitempty"`
	RateImbalance   float64 `json:"rate_imbalance"`
	MemoryImbalance float64 `json:"memory_imbalance"`
	Disruption      int64   `json:"disruption"`
	Moves           int     `json:"moves"`
	Skipped         string  `json:"skipped,omitempty"`
	// PartGPUs is each part's GPUs after the decision.
	PartGPUs []int `json:"part_gpus"`
}

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
	Stats
	// GPUBusy is each GPU's busy fraction over the window, by GPU ID.
	GPUBusy   []float64     `json:"gpu_busy_per_gpu"`
	Autoscale Advice        `json:"autoscale"`
	Models    []ModelReport `json:"models"`
	// GoodputSearch is present when the run searched for goodput.
	GoodputSearch *GoodputSearch `json:"goodput_search,omitempty"`
	// TimeSeries has one point per interval of the run, warmup included.
	TimeSeries []TimePoint `json:"timeseries,omitempty"`

	// Latency holds every answered request's end-to-end latency, for plots.
	Latency *Histogram `json:"-"`
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

// SearchStep is one run of a goodput search.
type SearchStep struct {
	Multiplier   float64 `json:"multiplier"`
	OfferedRPS   float64 `json:"offered_rps"`
	GoodputRPS   float64 `json:"goodput_rps"`
	WorstBadRate float64 `json:"worst_bad_rate"`
	WorstModel   string  `json:"worst_model"`
	OK           bool    `json:"ok"`
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
	GPUs     int     `json:"gpus"`
	Advice   Advice  `json:"advice"`
}

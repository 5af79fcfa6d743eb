package workload

import (
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/symphony-serving/symphony/partition/strictyaml"
	"github.com/symphony-serving/symphony/scheduler/serving"
)

// MaxFileSize is the largest workload file Parse accepts, in bytes. A real
// workload is a few kilobytes even with hundreds of models; the limit keeps
// a mistaken or hostile input (a trace passed with -f, say) from exhausting
// memory in the YAML parser.
const MaxFileSize = 16 << 20

// Limits on what one workload may expand to. They are far above any real
// workload and exist so that a small file using anchors, aliases or a large
// zoo count cannot make Parse allocate without bound.
const (
	// maxGPUs bounds cluster.gpus and the sum of gpu_types counts.
	maxGPUs = 1 << 20
	// maxRatePhases bounds the rate phases of all models together.
	maxRatePhases = 16 << 20
	// maxWork bounds the YAML nodes visited, aliases counted each time they
	// are followed.
	maxWork = 20_000_000
	// maxNameLen bounds GPU type names, as serving.MaxNameLen does model
	// names.
	maxNameLen = serving.MaxNameLen
	// maxTraceFileSize bounds a rate trace file; MaxTraceRows rows of
	// "second,rate" fit easily.
	maxTraceFileSize = 1 << 30
	// maxNexusFrontends bounds nexus_frontends.
	maxNexusFrontends = 1 << 16
)

// Defaults for keys a workload file leaves out, so that a minimal file
// (cluster and models) runs as the documented example does.
const (
	DefaultSeed           uint64 = 1
	DefaultDuration              = 30 * time.Second
	DefaultWarmup                = 5 * time.Second
	DefaultNexusFrontends        = 1
)

// Error is a problem at one place in a workload file (or a rate trace). Its
// message names the file, the line and the field, so that a user can fix the
// file without guessing, and callers can still inspect the parts. It is the
// error of every Symphony input file (package strictyaml).
type Error = strictyaml.Error

// ParseFile reads and parses the workload file at path. Relative rate_trace
// paths in it are resolved against the file's directory, so a workload and
// its traces can move together.
func ParseFile(path string) (*Workload, error) {
	// Pipes are fine (a process substitution, say), but only up to
	// MaxFileSize, which the limited read enforces.
	data, err := strictyaml.ReadFile(path, MaxFileSize, "workload", "a workload file")
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

// Parse parses a workload file's contents. source names the file in error
// messages and in Workload.Source; its directory is where relative
// rate_trace paths are looked up ("" means the current directory). Zoos are
// expanded into models appended after the models list, defaults are filled
// in, and the result has passed Validate. Every error is an *Error naming
// the file, the line and the field, except Validate's own.
func Parse(data []byte, source string) (*Workload, error) {
	name := source
	if name == "" {
		name = "workload"
	}
	root, err := strictyaml.Decode(data, name, MaxFileSize, "empty workload file (want a YAML mapping with at least cluster and models or zoo)")
	if err != nil {
		return nil, err
	}
	dir := "."
	if source != "" {
		dir = filepath.Dir(source)
	}
	r := &strictyaml.Reader{Source: name, Work: maxWork}
	p := &parser{
		Reader: r,
		dec:    serving.NewDecoder(r),
		dir:    dir,
		phases: maxRatePhases,
		traces: make(map[string][]RatePhase),
	}
	w, err := p.workload(root)
	if err != nil {
		return nil, err
	}
	w.Source = source
	if err := w.Validate(); err != nil {
		return nil, err
	}
	return w, nil
}

// MaxRequests bounds the requests a workload may offer over its run: a
// billion takes the simulator many minutes and gigabytes, and is almost
// always a typo in a rate.
const MaxRequests = 1e9

// expectedRequests is the number of requests w offers over warmup and
// duration at its nominal rates.
func (w *Workload) expectedRequests() float64 {
	run := w.Warmup + w.Duration
	var n float64
	for i := range w.Models {
		n += w.Models[i].MeanRate(0, run) * run.Seconds()
	}
	return n
}

// parser walks one document's node tree. It holds per-call caches and
// budgets only; nothing outlives the Parse call.
type parser struct {
	// Reader holds the file's name and the budget of YAML nodes (maxWork),
	// which dec shares.
	*strictyaml.Reader
	// dec reads the serving configuration's keys: models, zoos and the
	// settings.
	dec *serving.Decoder
	dir string // base of relative rate_trace paths

	// phases counts down the rate phases all models may still have.
	phases int

	// traces caches rate traces by cleaned path.
	traces map[string][]RatePhase
	// runLength is warmup plus duration, which daily_rate curves cover.
	runLength time.Duration
	// gpuTypes are the cluster's, which a model's gpu_type names.
	gpuTypes []GPUType
}

// topKeys are a workload file's root keys: a serving configuration's and
// the load's.
var topKeys = slices.Concat(serving.LoadTopKeys, serving.TopKeys)

// workload walks the root mapping.
func (p *parser) workload(root *yaml.Node) (*Workload, error) {
	m, err := p.Mapping(root, "", "a mapping of workload fields (seed, duration, cluster, models, ...)", topKeys)
	if err != nil {
		return nil, err
	}
	w := &Workload{
		Seed:           DefaultSeed,
		Duration:       DefaultDuration,
		Warmup:         DefaultWarmup,
		NexusFrontends: DefaultNexusFrontends,
	}
	if v, ok := m.Lookup("seed"); ok {
		n, err := p.Scalar(v, "seed", "an integer")
		if err != nil {
			return nil, err
		}
		if w.Seed, err = strconv.ParseUint(strings.TrimSpace(n.Value), 10, 64); err != nil {
			return nil, p.ErrAt(n, "seed", "%q is not a non-negative integer", n.Value)
		}
	}
	if v, ok := m.Lookup("duration"); ok {
		if w.Duration, err = p.PosDuration(v, "duration"); err != nil {
			return nil, err
		}
	}
	if v, ok := m.Lookup("warmup"); ok {
		if w.Warmup, err = p.NonNegDuration(v, "warmup"); err != nil {
			return nil, err
		}
	}
	if w.Warmup > math.MaxInt64-w.Duration {
		return nil, p.ErrAt(m.Node, "duration", "duration plus warmup overflows")
	}
	v, err := p.Required(m, "cluster", " (give gpus: N or gpu_types)")
	if err != nil {
		return nil, err
	}
	if w.Cluster, err = p.cluster(v, "cluster"); err != nil {
		return nil, err
	}
	p.gpuTypes = w.Cluster.GPUTypes
	w.Settings = serving.DefaultSettings()
	if err := p.dec.Settings(m, &w.Settings); err != nil {
		return nil, err
	}
	if v, ok := m.Lookup("nexus_frontends"); ok {
		if w.NexusFrontends, err = p.IntIn(v, "nexus_frontends", 1, maxNexusFrontends); err != nil {
			return nil, err
		}
	}
	if v, ok := m.Lookup("autoscale_window"); ok {
		if w.AutoscaleWindow, err = p.NonNegDuration(v, "autoscale_window"); err != nil {
			return nil, err
		}
	}

	if v, ok := m.Lookup("epoch"); ok {
		e, err := p.epoch(v, "epoch")
		if err != nil {
			return nil, err
		}
		w.Epoch = &e
	}

	p.runLength = w.Warmup + w.Duration
	if v, ok := m.Lookup("models"); ok {
		err := p.dec.Models(v, "models", serving.LoadModelKeys, func(mm *strictyaml.Map, sm serving.Model) error {
			md, err := p.model(mm, sm)
			w.Models = append(w.Models, md)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	if v, ok := m.Lookup("zoo"); ok {
		err := p.dec.Zoos(v, "zoo", serving.LoadZooKeys, func(zm *strictyaml.Map, sms []serving.Model) error {
			ms, err := p.zooLoad(zm, sms)
			w.Models = append(w.Models, ms...)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	if len(w.Models) == 0 {
		return nil, p.ErrAt(m.Node, "models", "no models: give a models list or a zoo")
	}
	if n := w.expectedRequests(); n > MaxRequests {
		return nil, p.ErrAt(m.Node, "models", "workload too large: the rates offer about %.3g requests over %v (warmup and duration), more than %.0g; is a rate off by a few zeros?", n, p.runLength, float64(MaxRequests))
	}
	if v, ok := m.Lookup("faults"); ok {
		if w.Faults, err = p.faults(v, "faults", w.Cluster, p.runLength); err != nil {
			return nil, err
		}
	}
	return w, nil
}

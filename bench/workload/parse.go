package workload

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/symphony-serving/symphony/partition/strictyaml"
	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/profile"
)

// maxInputSize bounds a model's input_size: the largest input a task
// descriptor may announce (transport/wire.MaxInputSize).
const maxInputSize = 64 << 20

// MaxFileSize is the largest workload file Parse accepts, in bytes. A real
// workload is a few kilobytes even with hundreds of models; the limit keeps
// a mistaken or hostile input (a trace passed with -f, say) from exhausting
// memory in the YAML parser.
const MaxFileSize = 16 << 20

// Limits on what one workload may expand to. They are far above any real
// workload and exist so that a small file using anchors, aliases or a large
// zoo count cannot make Parse allocate without bound.
const (
	// maxModels bounds the models after zoo expansion.
	maxModels = 100_000
	// maxGPUs bounds cluster.gpus and the sum of gpu_types counts.
	maxGPUs = 1 << 20
	// maxRatePhases bounds the rate phases of all models together.
	maxRatePhases = 16 << 20
	// maxProfileEntries bounds the batch latencies of all distinct profiles
	// together (a profile shared through an alias or a zoo counts once).
	maxProfileEntries = 64 << 20
	// maxWork bounds the YAML nodes visited, aliases counted each time they
	// are followed.
	maxWork = 20_000_000
	// maxMergeDepth bounds merge keys (<<) in merged mappings in merged
	// mappings..., which would otherwise recurse once per mapping.
	maxMergeDepth = 16
	// maxNameLen bounds model and GPU type names.
	maxNameLen = 128
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

// DefaultNetwork returns the network delays of a workload without a network
// key: those of the documented example (100us control, 20us per input,
// 100us result), a LAN like the paper's testbed. A network mapping that
// leaves a delay out sets that delay to 0 instead, so that network: {}
// means an ideal network. It is a function so that no caller can change
// the default for everyone.
func DefaultNetwork() scheduler.Delays {
	return scheduler.Delays{
		Ctrl:           100 * time.Microsecond,
		DataPerRequest: 20 * time.Microsecond,
		DataPerMiB:     time.Millisecond, // about 1 GiB/s, for models with an input_size
		Result:         100 * time.Microsecond,
	}
}

// Error is a problem at one place in a workload file (or a rate trace). Its
// message names the file, the line and the field, so that a user can fix the
// file without guessing, and callers can still inspect the parts. It is the
// error of every Symphony input file (package strictyaml).
type Error = strictyaml.Error

// ParseFile reads and parses the workload file at path. Relative rate_trace
// paths in it are resolved against the file's directory, so a workload and
// its traces can move together.
func ParseFile(path string) (*Workload, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	defer f.Close()
	// Pipes are fine (a process substitution, say), but only up to
	// MaxFileSize, which the limited read enforces.
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return nil, &Error{Source: path, Msg: "is a directory, not a workload file"}
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, &Error{Source: path, Msg: err.Error(), Err: err}
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
	p := &parser{
		Reader:   strictyaml.Reader{Source: name, Work: maxWork},
		dir:      dir,
		phases:   maxRatePhases,
		entries:  maxProfileEntries,
		tables:   make(map[*yaml.Node]profile.Profile),
		zooProfs: make(map[string]profile.Profile),
		traces:   make(map[string][]RatePhase),
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
	// Reader holds the file's name and the budget of YAML nodes (maxWork).
	strictyaml.Reader
	dir string // base of relative rate_trace paths

	// Budgets, counting down; see the max* constants.
	phases  int
	entries int
	nmodels int

	// tables caches profiles by their (alias-resolved) YAML node, so an
	// anchored profile used by many models is built and counted once.
	tables map[*yaml.Node]profile.Profile
	// zooProfs caches bundled profiles by "zoo/model".
	zooProfs map[string]profile.Profile
	// traces caches rate traces by cleaned path.
	traces map[string][]RatePhase
	// runLength is warmup plus duration, which daily_rate curves cover.
	runLength time.Duration
	// delays are the workload's network delays, which models' SLOs are
	// checked against.
	delays scheduler.Delays
}

var topKeys = []string{"seed", "duration", "warmup", "cluster", "network", "models", "zoo", "policy", "schedulable", "drop_policy", "schedule_ahead", "nexus_frontends", "autoscale_window", "epoch", "faults"}

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
		Network:        DefaultNetwork(),
		Policy:         scheduler.PolicySymphony,
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
	if v, ok := m.Lookup("network"); ok {
		if w.Network, err = p.network(v, "network"); err != nil {
			return nil, err
		}
	}
	if v, ok := m.Lookup("policy"); ok {
		if w.Policy, err = enumField(p, v, "policy", "a policy name", scheduler.ParsePolicy); err != nil {
			return nil, err
		}
	}
	if v, ok := m.Lookup("schedulable"); ok {
		if w.Schedulable, err = enumField(p, v, "schedulable", "a schedulable condition", scheduler.ParseSchedulable); err != nil {
			return nil, err
		}
	}
	if v, ok := m.Lookup("drop_policy"); ok {
		if w.Drop, err = enumField(p, v, "drop_policy", "a drop policy", scheduler.ParseDropPolicy); err != nil {
			return nil, err
		}
	}
	if v, ok := m.Lookup("schedule_ahead"); ok {
		if w.ScheduleAhead, err = p.NonNegDuration(v, "schedule_ahead"); err != nil {
			return nil, err
		}
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

	p.runLength, p.delays = w.Warmup+w.Duration, w.Network
	names := make(map[string]string) // model name -> where it was defined
	if v, ok := m.Lookup("models"); ok {
		if w.Models, err = p.models(v, "models", names); err != nil {
			return nil, err
		}
	}
	if v, ok := m.Lookup("zoo"); ok {
		if w.Models, err = p.zoos(v, "zoo", w.Models, names); err != nil {
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

var clusterKeys = []string{"gpus", "gpu_types", "backends"}
var gpuTypeKeys = []string{"name", "count", "memory", "price_per_hour"}

func (p *parser) cluster(n *yaml.Node, path string) (Cluster, error) {
	var c Cluster
	m, err := p.Mapping(n, path, "a mapping such as {gpus: 8}", clusterKeys)
	if err != nil {
		return c, err
	}
	if !m.Has("gpus") && !m.Has("gpu_types") {
		return c, p.ErrAt(m.Node, path, "needs gpus or gpu_types")
	}
	if v, ok := m.Lookup("gpu_types"); ok {
		tp := m.At("gpu_types")
		seq, err := p.Resolve(v, tp)
		if err != nil {
			return c, err
		}
		if seq.Kind != yaml.SequenceNode || len(seq.Content) == 0 {
			return c, p.ErrAt(seq, tp, "want a non-empty list of {name, count, memory, price_per_hour}, got %s", strictyaml.Describe(seq))
		}
		seen := make(map[string]int)
		for i, e := range seq.Content {
			ep := strictyaml.Index(tp, i)
			em, err := p.Mapping(e, ep, "a mapping {name, count, memory, price_per_hour}", gpuTypeKeys)
			if err != nil {
				return c, err
			}
			var g GPUType
			v, err := p.Required(em, "name", "")
			if err != nil {
				return c, err
			}
			name, nn, err := p.Str(v, em.At("name"), "a name")
			if err != nil {
				return c, err
			}
			if err := strictyaml.CheckName(name, maxNameLen); err != nil {
				return c, p.ErrAt(nn, em.At("name"), "GPU type name %v", err)
			}
			if line, dup := seen[name]; dup {
				return c, p.ErrAt(nn, em.At("name"), "GPU type %q listed twice (first at line %d)", name, line)
			}
			seen[name] = nn.Line
			g.Name = name
			if v, err = p.Required(em, "count", ""); err != nil {
				return c, err
			}
			if g.Count, err = p.IntIn(v, em.At("count"), 1, maxGPUs); err != nil {
				return c, err
			}
			if v, ok := em.Lookup("memory"); ok {
				if g.Memory, err = p.Size(v, em.At("memory"), math.MaxInt64); err != nil {
					return c, err
				}
			}
			if v, ok := em.Lookup("price_per_hour"); ok {
				if g.PricePerHour, err = p.NonNegFloat(v, em.At("price_per_hour")); err != nil {
					return c, err
				}
			}
			c.GPUs += g.Count
			if c.GPUs > maxGPUs {
				return c, p.ErrAt(em.Node, ep, "more than %d GPUs in all", maxGPUs)
			}
			c.GPUTypes = append(c.GPUTypes, g)
		}
	}
	if v, ok := m.Lookup("gpus"); ok {
		gpus, err := p.IntIn(v, m.At("gpus"), 1, maxGPUs)
		if err != nil {
			return c, err
		}
		if c.GPUTypes != nil && gpus != c.GPUs {
			return c, p.ErrAt(m.KeyNode("gpus"), m.At("gpus"), "%d disagrees with the %d GPUs that gpu_types lists (give one or make them agree)", gpus, c.GPUs)
		}
		c.GPUs = gpus
	}
	if v, ok := m.Lookup("backends"); ok {
		if c.BackendCount, err = p.IntIn(v, m.At("backends"), 1, c.GPUs); err != nil {
			return c, err
		}
		if c.GPUs%c.BackendCount != 0 {
			return c, p.ErrAt(v, m.At("backends"), "%d backends cannot share %d GPUs evenly", c.BackendCount, c.GPUs)
		}
	}
	return c, nil
}

var networkKeys = []string{"ctrl_delay", "data_delay_per_request", "data_delay_per_mib", "result_delay"}

// network reads the delays; a delay left out of a given mapping is 0, so
// that network: {} means an ideal network.
func (p *parser) network(n *yaml.Node, path string) (scheduler.Delays, error) {
	var d scheduler.Delays
	m, err := p.Mapping(n, path, "a mapping {ctrl_delay, data_delay_per_request, data_delay_per_mib, result_delay}", networkKeys)
	if err != nil {
		return d, err
	}
	for _, f := range []struct {
		key string
		dst *time.Duration
	}{{"ctrl_delay", &d.Ctrl}, {"data_delay_per_request", &d.DataPerRequest}, {"data_delay_per_mib", &d.DataPerMiB}, {"result_delay", &d.Result}} {
		if v, ok := m.Lookup(f.key); ok {
			if *f.dst, err = p.NonNegDuration(v, m.At(f.key)); err != nil {
				return d, err
			}
			if *f.dst > maxNetworkDelay {
				return d, p.ErrAt(v, m.At(f.key), "%v is longer than %v: no network is that slow", *f.dst, maxNetworkDelay)
			}
		}
	}
	return d, nil
}

// maxNetworkDelay bounds each network delay: beyond it a value is a typo,
// and data_delay_per_mib times a 64 MiB input stays far from overflowing.
const maxNetworkDelay = time.Second

var epochKeys = []string{"interval", "model_load_time", "parts", "headroom", "max_disruption", "max_rate_per_part", "gpu_memory", "rebalance_above", "engine"}

// epoch reads the epoch job's settings; fields left out keep DefaultEpoch's
// values, and interval is required.
func (p *parser) epoch(n *yaml.Node, path string) (Epoch, error) {
	e := DefaultEpoch()
	m, err := p.Mapping(n, path, "a mapping {interval, model_load_time, parts, headroom, max_disruption, ...}", epochKeys)
	if err != nil {
		return e, err
	}
	v, err := p.Required(m, "interval", " (how often the epoch job runs, such as 5m)")
	if err != nil {
		return e, err
	}
	if e.Interval, err = p.PosDuration(v, m.At("interval")); err != nil {
		return e, err
	}
	if v, ok := m.Lookup("model_load_time"); ok {
		if e.ModelLoadTime, err = p.NonNegDuration(v, m.At("model_load_time")); err != nil {
			return e, err
		}
	}
	if v, ok := m.Lookup("parts"); ok {
		if e.Parts, err = p.IntIn(v, m.At("parts"), 1, maxModels); err != nil {
			return e, err
		}
	}
	if v, ok := m.Lookup("headroom"); ok {
		if e.Headroom, err = p.NonNegFloat(v, m.At("headroom")); err != nil {
			return e, err
		}
	}
	if v, ok := m.Lookup("max_disruption"); ok {
		if e.MaxDisruption, err = p.Size(v, m.At("max_disruption"), math.MaxInt64); err != nil {
			return e, err
		}
	}
	if v, ok := m.Lookup("rebalance_above"); ok {
		if e.RebalanceAbove, err = p.NonNegFloat(v, m.At("rebalance_above")); err != nil {
			return e, err
		}
	}
	if v, ok := m.Lookup("max_rate_per_part"); ok {
		if e.MaxRatePerPart, err = p.NonNegFloat(v, m.At("max_rate_per_part")); err != nil {
			return e, err
		}
	}
	if v, ok := m.Lookup("gpu_memory"); ok {
		if e.GPUMemory, err = p.Size(v, m.At("gpu_memory"), math.MaxInt64); err != nil {
			return e, err
		}
	}
	if v, ok := m.Lookup("engine"); ok {
		s, sn, err := p.Str(v, m.At("engine"), "an engine name")
		if err != nil {
			return e, err
		}
		if !slices.Contains(EpochEngines, s) {
			return e, p.ErrAt(sn, m.At("engine"), "%q is not an engine (want one of %s)%s", s, strings.Join(EpochEngines, ", "), strictyaml.Suggest(s, EpochEngines))
		}
		e.Engine = s
	}
	return e, nil
}

var modelKeys = []string{"name", "profile", "memory", "input_size", "slo", "rate", "rates", "rate_trace", "daily_rate", "arrival"}

func (p *parser) models(n *yaml.Node, path string, names map[string]string) ([]Model, error) {
	seq, err := p.Resolve(n, path)
	if err != nil {
		return nil, err
	}
	if seq.Kind != yaml.SequenceNode {
		return nil, p.ErrAt(seq, path, "want a list of models, got %s", strictyaml.Describe(seq))
	}
	if len(seq.Content) > maxModels {
		return nil, p.ErrAt(seq, path, "more than %d models", maxModels)
	}
	out := make([]Model, 0, len(seq.Content))
	for i, e := range seq.Content {
		ep := strictyaml.Index(path, i)
		md, nameNode, err := p.model(e, ep)
		if err != nil {
			return nil, err
		}
		if where, dup := names[md.Name]; dup {
			return nil, p.ErrAt(nameNode, strictyaml.Join(ep, "name"), "duplicate model name %q (%s has it too)", md.Name, where)
		}
		names[md.Name] = fmt.Sprintf("%s at line %d", ep, nameNode.Line)
		p.nmodels++
		out = append(out, md)
	}
	return out, nil
}

func (p *parser) model(n *yaml.Node, path string) (Model, *yaml.Node, error) {
	var md Model
	m, err := p.Mapping(n, path, "a model mapping {name, profile, slo, rate, ...}", modelKeys)
	if err != nil {
		return md, nil, err
	}
	v, err := p.Required(m, "name", "")
	if err != nil {
		return md, nil, err
	}
	name, nameNode, err := p.Str(v, m.At("name"), "a model name")
	if err != nil {
		return md, nil, err
	}
	if err := strictyaml.CheckName(name, maxNameLen); err != nil {
		return md, nil, p.ErrAt(nameNode, m.At("name"), "model name %v", err)
	}
	md.Name = name

	if v, err = p.Required(m, "profile", " (give {alpha, beta}, {batch_latency: [...]} or zoo:<zoo>/<model>)"); err != nil {
		return md, nil, err
	}
	var spec *profile.ModelSpec
	if md.Profile, spec, err = p.profile(v, m.At("profile")); err != nil {
		return md, nil, err
	}
	if spec != nil {
		md.SLO = spec.SLO
		md.StaticMemory, md.DynamicMemory = spec.StaticMemory, spec.DynamicMemory
	}
	if v, ok := m.Lookup("memory"); ok {
		if md.StaticMemory, md.DynamicMemory, err = p.memory(v, m.At("memory")); err != nil {
			return md, nil, err
		}
	}
	if v, ok := m.Lookup("input_size"); ok {
		if md.InputBytes, err = p.Size(v, m.At("input_size"), maxInputSize); err != nil {
			return md, nil, err
		}
	}
	if v, ok := m.Lookup("slo"); ok {
		if md.SLO, err = p.PosDuration(v, m.At("slo")); err != nil {
			return md, nil, err
		}
	} else if spec == nil {
		return md, nil, p.ErrAt(m.Node, m.At("slo"), "required (a duration such as 25ms) unless the profile is a zoo reference")
	}
	if least := md.LeastLatency(p.delays); md.SLO <= least {
		where := m.Node
		if v, ok := m.Lookup("slo"); ok {
			where = v
		}
		return md, nil, p.ErrAt(where, m.At("slo"), "%v is not longer than a batch of one takes with its input's pull and the network delays (%v): no request could meet it", md.SLO, least)
	}
	if md.Rates, err = p.modelRates(m); err != nil {
		return md, nil, err
	}
	if v, ok := m.Lookup("arrival"); ok {
		if md.Arrival, err = p.arrival(v, m.At("arrival")); err != nil {
			return md, nil, err
		}
	}
	return md, nameNode, nil
}

var memoryKeys = []string{"static", "dynamic"}

func (p *parser) memory(n *yaml.Node, path string) (static, dynamic int64, err error) {
	m, err := p.Mapping(n, path, "a mapping {static, dynamic}", memoryKeys)
	if err != nil {
		return 0, 0, err
	}
	if v, ok := m.Lookup("static"); ok {
		if static, err = p.Size(v, m.At("static"), math.MaxInt64); err != nil {
			return 0, 0, err
		}
	}
	if v, ok := m.Lookup("dynamic"); ok {
		if dynamic, err = p.Size(v, m.At("dynamic"), math.MaxInt64); err != nil {
			return 0, 0, err
		}
	}
	return static, dynamic, nil
}

var profileKeys = []string{"alpha", "beta", "max_batch", "batch_latency"}

// profile reads a model's profile. For a zoo reference it also returns the
// zoo's spec, whose SLO and memory the model inherits unless it gives its
// own.
func (p *parser) profile(n *yaml.Node, path string) (profile.Profile, *profile.ModelSpec, error) {
	n, err := p.Resolve(n, path)
	if err != nil {
		return profile.Profile{}, nil, err
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() != "!!null" {
		return p.zooRef(n, path)
	}
	if pr, ok := p.tables[n]; ok {
		return pr, nil, nil
	}
	m, err := p.Mapping(n, path, "{alpha, beta}, {batch_latency: [...]} or zoo:<zoo>/<model>", profileKeys)
	if err != nil {
		return profile.Profile{}, nil, err
	}
	var pr profile.Profile
	if v, ok := m.Lookup("batch_latency"); ok {
		for _, k := range []string{"alpha", "beta", "max_batch"} {
			if m.Has(k) {
				return pr, nil, p.ErrAt(m.KeyNode(k), m.At(k), "batch_latency and %s are mutually exclusive (a table profile lists every batch size)", k)
			}
		}
		if pr, err = p.table(v, m.At("batch_latency")); err != nil {
			return pr, nil, err
		}
	} else {
		pr, err = p.linear(m)
		if err != nil {
			return pr, nil, err
		}
	}
	p.tables[n] = pr
	return pr, nil, nil
}

func (p *parser) linear(m *strictyaml.Map) (profile.Profile, error) {
	hint := " (a linear profile gives alpha and beta: latency of batch b = alpha*b + beta)"
	av, err := p.Required(m, "alpha", hint)
	if err != nil {
		return profile.Profile{}, err
	}
	bv, err := p.Required(m, "beta", hint)
	if err != nil {
		return profile.Profile{}, err
	}
	alpha, err := p.NonNegDuration(av, m.At("alpha"))
	if err != nil {
		return profile.Profile{}, err
	}
	beta, err := p.NonNegDuration(bv, m.At("beta"))
	if err != nil {
		return profile.Profile{}, err
	}
	if alpha == 0 && beta == 0 {
		return profile.Profile{}, p.ErrAt(m.Node, m.Path, "alpha and beta are both zero")
	}
	maxBatch := profile.DefaultMaxBatch
	if v, ok := m.Lookup("max_batch"); ok {
		if maxBatch, err = p.IntIn(v, m.At("max_batch"), 1, 1<<16); err != nil {
			return profile.Profile{}, err
		}
	}
	// ℓ(maxBatch) must not overflow a Duration.
	if alpha > 0 && (math.MaxInt64-beta)/alpha < time.Duration(maxBatch) {
		return profile.Profile{}, p.ErrAt(m.Node, m.Path, "alpha*max_batch + beta overflows")
	}
	if err := p.spendEntries(m.Node, m.Path, maxBatch); err != nil {
		return profile.Profile{}, err
	}
	pr, err := profile.Linear(alpha, beta, maxBatch)
	if err != nil {
		return pr, p.ErrAt(m.Node, m.Path, "%s", strings.TrimPrefix(err.Error(), "profile: "))
	}
	return pr, nil
}

func (p *parser) table(n *yaml.Node, path string) (profile.Profile, error) {
	seq, err := p.Resolve(n, path)
	if err != nil {
		return profile.Profile{}, err
	}
	if seq.Kind != yaml.SequenceNode || len(seq.Content) == 0 {
		return profile.Profile{}, p.ErrAt(seq, path, "want a non-empty list of durations (latency of batch 1, 2, ...), got %s", strictyaml.Describe(seq))
	}
	if len(seq.Content) > 1<<16 {
		return profile.Profile{}, p.ErrAt(seq, path, "more than 65536 batch sizes")
	}
	if err := p.spendEntries(seq, path, len(seq.Content)); err != nil {
		return profile.Profile{}, err
	}
	lat := make([]time.Duration, len(seq.Content))
	for i, e := range seq.Content {
		ep := strictyaml.Index(path, i)
		d, en, err := p.Duration(e, ep)
		if err != nil {
			return profile.Profile{}, err
		}
		if d <= 0 {
			return profile.Profile{}, p.ErrAt(en, ep, "latency of batch %d must be positive, got %v", i+1, d)
		}
		if i > 0 && d < lat[i-1] {
			return profile.Profile{}, p.ErrAt(en, ep, "latency of batch %d (%v) is below that of batch %d (%v); latency must not fall as batches grow", i+1, d, i, lat[i-1])
		}
		lat[i] = d
	}
	pr, err := profile.Table(lat)
	if err != nil {
		return pr, p.ErrAt(seq, path, "%s", strings.TrimPrefix(err.Error(), "profile: "))
	}
	return pr, nil
}

func (p *parser) spendEntries(n *yaml.Node, path string, k int) error {
	if k > p.entries {
		return p.ErrAt(n, path, "workload too large: more than %d batch latencies over all profiles", maxProfileEntries)
	}
	p.entries -= k
	return nil
}

// zooRef reads a profile given as zoo:<zoo>/<model>.
func (p *parser) zooRef(n *yaml.Node, path string) (profile.Profile, *profile.ModelSpec, error) {
	const want = "(want {alpha, beta}, {batch_latency: [...]} or zoo:<zoo>/<model> such as zoo:1080ti/ResNet50)"
	ref, ok := strings.CutPrefix(strings.TrimSpace(n.Value), "zoo:")
	if !ok {
		return profile.Profile{}, nil, p.ErrAt(n, path, "%q is not a profile %s", n.Value, want)
	}
	zooName, modelName, ok := strings.Cut(ref, "/")
	if !ok || zooName == "" || modelName == "" {
		return profile.Profile{}, nil, p.ErrAt(n, path, "%q is not a zoo reference %s", n.Value, want)
	}
	specs, err := profile.Zoo(zooName)
	if err != nil {
		return profile.Profile{}, nil, p.ErrAt(n, path, "unknown zoo %q (known: %s)", zooName, strings.Join(profile.ZooNames(), ", "))
	}
	i, msg := findSpec(specs, modelName)
	if msg != "" {
		return profile.Profile{}, nil, p.ErrAt(n, path, "zoo %s %s", zooName, msg)
	}
	spec := specs[i]
	return p.zooProfile(strings.ToLower(zooName), spec), &spec, nil
}

// findSpec finds a model in a zoo by exact name, or explains the miss.
func findSpec(specs []profile.ModelSpec, name string) (int, string) {
	for i, s := range specs {
		if s.Name == name {
			return i, ""
		}
	}
	for _, s := range specs {
		if strings.EqualFold(s.Name, name) {
			return -1, fmt.Sprintf("has no model %q (did you mean %s?)", name, s.Name)
		}
	}
	all := make([]string, len(specs))
	for i, s := range specs {
		all[i] = s.Name
	}
	return -1, fmt.Sprintf("has no model %q (it has %s)", name, strings.Join(all, ", "))
}

// zooProfile returns the spec's profile, built once per Parse and shared:
// profiles are immutable, and a zoo expanded to thousands of copies would
// otherwise hold thousands of identical tables.
func (p *parser) zooProfile(zoo string, spec profile.ModelSpec) profile.Profile {
	key := zoo + "/" + spec.Name
	pr, ok := p.zooProfs[key]
	if !ok {
		pr = spec.Profile()
		p.zooProfs[key] = pr
	}
	return pr
}

// modelRates reads exactly one of rate, rates and rate_trace.
func (p *parser) modelRates(m *strictyaml.Map) ([]RatePhase, error) {
	var given []string
	for _, k := range []string{"rate", "rates", "rate_trace", "daily_rate"} {
		if m.Has(k) {
			given = append(given, k)
		}
	}
	switch len(given) {
	case 0:
		return nil, p.ErrAt(m.Node, m.Path, "needs one of rate, rates, rate_trace or daily_rate")
	case 1:
	default:
		// Point at whichever of the two comes later in the file.
		k := given[1]
		if m.KeyNode(given[0]).Line > m.KeyNode(k).Line {
			k = given[0]
		}
		return nil, p.ErrAt(m.KeyNode(k), m.At(k), "%s and %s are mutually exclusive; give exactly one of rate, rates, rate_trace or daily_rate", given[0], given[1])
	}
	switch k := given[0]; k {
	case "rate":
		r, err := p.NonNegFloat(m.Get(k), m.At(k))
		if err != nil {
			return nil, err
		}
		if err := p.spendPhases(m.KeyNode(k), m.At(k), 1); err != nil {
			return nil, err
		}
		return []RatePhase{{Rate: r}}, nil
	case "rates":
		ph, err := p.phaseList(m.Get(k), m.At(k), 1)
		if err != nil {
			return nil, err
		}
		return ph, nil
	case "daily_rate":
		return p.dailyRate(m.Get(k), m.At(k))
	default:
		return p.rateTrace(m.Get(k), m.At(k))
	}
}

var dailyKeys = []string{"low", "high", "period", "peak_at", "step"}

// dailyRate reads {low, high, period, peak_at, step}: a rate that follows a
// raised cosine between low and high, peaking at peak_at and repeating every
// period, held constant for each step. It expands into one phase per step
// over the whole run, so it charges the phase budget like a rates list.
func (p *parser) dailyRate(n *yaml.Node, path string) ([]RatePhase, error) {
	m, err := p.Mapping(n, path, "a mapping {low, high, period, peak_at, step}", dailyKeys)
	if err != nil {
		return nil, err
	}
	var d DailyRate
	for _, f := range []struct {
		key string
		dst *float64
	}{{"low", &d.Low}, {"high", &d.High}} {
		v, err := p.Required(m, f.key, " (requests per second)")
		if err != nil {
			return nil, err
		}
		if *f.dst, err = p.NonNegFloat(v, m.At(f.key)); err != nil {
			return nil, err
		}
	}
	if d.High < d.Low {
		return nil, p.ErrAt(m.KeyNode("high"), m.At("high"), "%g is below low %g", d.High, d.Low)
	}
	v, err := p.Required(m, "period", " (such as 24h)")
	if err != nil {
		return nil, err
	}
	if d.Period, err = p.PosDuration(v, m.At("period")); err != nil {
		return nil, err
	}
	if v, ok := m.Lookup("peak_at"); ok {
		if d.PeakAt, err = p.NonNegDuration(v, m.At("peak_at")); err != nil {
			return nil, err
		}
	}
	d.Step = time.Minute
	if v, ok := m.Lookup("step"); ok {
		if d.Step, err = p.PosDuration(v, m.At("step")); err != nil {
			return nil, err
		}
	}
	k := int64(p.runLength/d.Step) + 1
	if k > int64(p.phases) {
		return nil, p.ErrAt(m.Node, path, "workload too large: a step of %v over %v makes more than %d rate phases over all models", d.Step, p.runLength, maxRatePhases)
	}
	if err := p.spendPhases(m.Node, path, int(k)); err != nil {
		return nil, err
	}
	return d.Phases(p.runLength), nil
}

func (p *parser) spendPhases(n *yaml.Node, path string, k int) error {
	if k > p.phases {
		return p.ErrAt(n, path, "workload too large: more than %d rate phases over all models", maxRatePhases)
	}
	p.phases -= k
	return nil
}

var phaseKeys = []string{"duration", "rate"}

// phaseList reads [{duration, rate}, ...]. Every phase but the last needs a
// positive duration; the last may omit it, and holds its rate until the end
// either way. copies is how many models will get the list (a zoo's
// total_rates), charged to the phase budget up front.
func (p *parser) phaseList(n *yaml.Node, path string, copies int) ([]RatePhase, error) {
	seq, err := p.Resolve(n, path)
	if err != nil {
		return nil, err
	}
	if seq.Kind != yaml.SequenceNode || len(seq.Content) == 0 {
		return nil, p.ErrAt(seq, path, "want a non-empty list of {duration, rate}, got %s", strictyaml.Describe(seq))
	}
	if len(seq.Content) > p.phases/copies {
		return nil, p.ErrAt(seq, path, "workload too large: more than %d rate phases over all models", maxRatePhases)
	}
	p.phases -= len(seq.Content) * copies
	out := make([]RatePhase, len(seq.Content))
	var total time.Duration
	for i, e := range seq.Content {
		ep := strictyaml.Index(path, i)
		m, err := p.Mapping(e, ep, "a phase {duration, rate}", phaseKeys)
		if err != nil {
			return nil, err
		}
		last := i == len(seq.Content)-1
		if v, ok := m.Lookup("duration"); ok {
			d, err := p.PosDuration(v, m.At("duration"))
			if err != nil {
				return nil, err
			}
			if d > math.MaxInt64-total {
				return nil, p.ErrAt(m.KeyNode("duration"), m.At("duration"), "phase durations add up to more than %v", time.Duration(math.MaxInt64))
			}
			total += d
			out[i].Duration = d
		} else if !last {
			return nil, p.ErrAt(m.Node, m.At("duration"), "required on every phase but the last")
		}
		v, err := p.Required(m, "rate", " (requests per second)")
		if err != nil {
			return nil, err
		}
		if out[i].Rate, err = p.NonNegFloat(v, m.At("rate")); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// rateTrace loads a per-second rate trace, relative to the workload file.
func (p *parser) rateTrace(n *yaml.Node, path string) ([]RatePhase, error) {
	name, sn, err := p.Str(n, path, "a CSV file name")
	if err != nil {
		return nil, err
	}
	file := name
	if !filepath.IsAbs(file) {
		file = filepath.Join(p.dir, file)
	}
	file = filepath.Clean(file)
	phases, ok := p.traces[file]
	if !ok {
		if phases, err = readTrace(file); err != nil {
			var te *Error
			if errors.As(err, &te) && te.Source == file {
				// A problem inside the trace: keep its own file:line.
				return nil, &Error{Source: p.Source, Line: sn.Line, Field: path, Msg: err.Error(), Err: err}
			}
			return nil, &Error{Source: p.Source, Line: sn.Line, Field: path, Msg: fmt.Sprintf("cannot read rate trace: %v", err), Err: err}
		}
		p.traces[file] = phases
	}
	if err := p.spendPhases(sn, path, len(phases)); err != nil {
		return nil, err
	}
	// Each model gets its own copy, so that changing one model's rates
	// (as a caller building variants might) never changes another's.
	return append([]RatePhase(nil), phases...), nil
}

// readTrace opens only regular files: a FIFO or a device named by mistake
// would block or never end.
func readTrace(file string) ([]RatePhase, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return nil, err
	}
	switch {
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s is not a regular file", file)
	case fi.Size() == 0:
		return nil, fmt.Errorf("%s is empty", file)
	case fi.Size() > maxTraceFileSize:
		return nil, fmt.Errorf("%s is larger than %d MiB", file, maxTraceFileSize>>20)
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseRateTrace(io.LimitReader(f, fi.Size()), file)
}

// arrival reads poisson, gamma:<shape> or const.
func (p *parser) arrival(n *yaml.Node, path string) (Arrival, error) {
	const want = "(want poisson, gamma:<shape> such as gamma:0.3, or const)"
	s, sn, err := p.Str(n, path, "an arrival process "+want)
	if err != nil {
		return Arrival{}, err
	}
	s = strings.TrimSpace(s)
	switch {
	case s == "poisson":
		return Arrival{Kind: ArrivalPoisson}, nil
	case s == "const":
		return Arrival{Kind: ArrivalConstant}, nil
	case strings.HasPrefix(s, "gamma:"):
		shape, err := strconv.ParseFloat(strings.TrimSpace(s[len("gamma:"):]), 64)
		if err != nil || math.IsNaN(shape) || math.IsInf(shape, 0) || shape <= 0 {
			return Arrival{}, p.ErrAt(sn, path, "%q: gamma shape must be a positive number, such as gamma:0.3", s)
		}
		return Arrival{Kind: ArrivalGamma, Shape: shape}, nil
	}
	return Arrival{}, p.ErrAt(sn, path, "unknown arrival %q %s", s, want)
}

var zooKeys = []string{"profiles", "count", "select", "total_rate", "total_rates", "popularity", "arrival", "slo_scale", "slo", "name_prefix"}

// zoos reads zoo: a single zoo mapping or a list of them, and appends their
// models to models.
func (p *parser) zoos(n *yaml.Node, path string, models []Model, names map[string]string) ([]Model, error) {
	n, err := p.Resolve(n, path)
	if err != nil {
		return nil, err
	}
	if n.Kind != yaml.SequenceNode {
		return p.zoo(n, path, models, names)
	}
	for i, e := range n.Content {
		if models, err = p.zoo(e, strictyaml.Index(path, i), models, names); err != nil {
			return nil, err
		}
	}
	return models, nil
}

// zoo expands one zoo entry. Model i takes spec i mod len(list); when count
// exceeds the list, every name gets the copy number i/len(list) as a suffix
// so that names stay unique. Rates follow the popularity law, model 0 being
// the most popular under zipf.
func (p *parser) zoo(n *yaml.Node, path string, models []Model, names map[string]string) ([]Model, error) {
	m, err := p.Mapping(n, path, "a zoo mapping {profiles, total_rate, ...}", zooKeys)
	if err != nil {
		return nil, err
	}
	v, err := p.Required(m, "profiles", fmt.Sprintf(" (a bundled zoo: %s)", strings.Join(profile.ZooNames(), ", ")))
	if err != nil {
		return nil, err
	}
	zooName, zn, err := p.Str(v, m.At("profiles"), "a zoo name")
	if err != nil {
		return nil, err
	}
	specs, err := profile.Zoo(zooName)
	if err != nil {
		return nil, p.ErrAt(zn, m.At("profiles"), "unknown zoo %q (known: %s)", zooName, strings.Join(profile.ZooNames(), ", "))
	}
	zooName = strings.ToLower(zooName)

	list := specs
	if v, ok := m.Lookup("select"); ok {
		sp := m.At("select")
		seq, err := p.Resolve(v, sp)
		if err != nil {
			return nil, err
		}
		if seq.Kind != yaml.SequenceNode || len(seq.Content) == 0 {
			return nil, p.ErrAt(seq, sp, "want a non-empty list of model names from zoo %s, got %s", zooName, strictyaml.Describe(seq))
		}
		list = nil
		picked := make(map[string]int)
		for i, e := range seq.Content {
			ep := strictyaml.Index(sp, i)
			name, en, err := p.Str(e, ep, "a model name")
			if err != nil {
				return nil, err
			}
			j, msg := findSpec(specs, name)
			if msg != "" {
				return nil, p.ErrAt(en, ep, "zoo %s %s", zooName, msg)
			}
			if line, dup := picked[name]; dup {
				return nil, p.ErrAt(en, ep, "%q selected twice (first at line %d); use count for copies", name, line)
			}
			picked[name] = en.Line
			list = append(list, specs[j])
		}
	}

	count := len(list)
	room := maxModels - p.nmodels
	if v, ok := m.Lookup("count"); ok {
		if count, err = p.IntIn(v, m.At("count"), 1, math.MaxInt32); err != nil {
			return nil, err
		}
		if count > room {
			return nil, p.ErrAt(m.KeyNode("count"), m.At("count"), "%d would make more than %d models in all", count, maxModels)
		}
	} else if count > room {
		return nil, p.ErrAt(m.Node, path, "more than %d models in all", maxModels)
	}

	weights := make([]float64, count)
	pop := "even"
	var popNode *yaml.Node
	if v, ok := m.Lookup("popularity"); ok {
		if pop, popNode, err = p.Str(v, m.At("popularity"), "a popularity law"); err != nil {
			return nil, err
		}
	}
	switch s := strings.TrimSpace(pop); {
	case s == "even":
		for i := range weights {
			weights[i] = 1 / float64(count)
		}
	case strings.HasPrefix(s, "zipf:"):
		z, err := strconv.ParseFloat(strings.TrimSpace(s[len("zipf:"):]), 64)
		if err != nil || math.IsNaN(z) || math.IsInf(z, 0) || z <= 0 {
			return nil, p.ErrAt(popNode, m.At("popularity"), "%q: zipf exponent must be a positive number, such as zipf:0.9", s)
		}
		var sum float64
		for i := range weights {
			weights[i] = math.Pow(float64(i+1), -z)
			sum += weights[i]
		}
		for i := range weights {
			weights[i] /= sum
		}
	default:
		return nil, p.ErrAt(popNode, m.At("popularity"), "unknown popularity %q (want even or zipf:<s> such as zipf:0.9)", s)
	}

	var base []RatePhase
	switch {
	case m.Has("total_rate") && m.Has("total_rates"):
		k := "total_rates"
		if m.KeyNode("total_rate").Line > m.KeyNode(k).Line {
			k = "total_rate"
		}
		return nil, p.ErrAt(m.KeyNode(k), m.At(k), "total_rate and total_rates are mutually exclusive")
	case m.Has("total_rate"):
		r, err := p.NonNegFloat(m.Get("total_rate"), m.At("total_rate"))
		if err != nil {
			return nil, err
		}
		if err := p.spendPhases(m.KeyNode("total_rate"), m.At("total_rate"), count); err != nil {
			return nil, err
		}
		base = []RatePhase{{Rate: r}}
	case m.Has("total_rates"):
		if base, err = p.phaseList(m.Get("total_rates"), m.At("total_rates"), count); err != nil {
			return nil, err
		}
	default:
		return nil, p.ErrAt(m.Node, m.At("total_rate"), "required (the aggregate requests per second), or give total_rates")
	}

	var arr Arrival
	if v, ok := m.Lookup("arrival"); ok {
		if arr, err = p.arrival(v, m.At("arrival")); err != nil {
			return nil, err
		}
	}

	var slo time.Duration
	scale := 1.0
	if m.Has("slo") && m.Has("slo_scale") {
		return nil, p.ErrAt(m.KeyNode("slo_scale"), m.At("slo_scale"), "slo and slo_scale are mutually exclusive (slo replaces every zoo SLO)")
	}
	if v, ok := m.Lookup("slo"); ok {
		if slo, err = p.PosDuration(v, m.At("slo")); err != nil {
			return nil, err
		}
	}
	var scaleNode *yaml.Node
	if v, ok := m.Lookup("slo_scale"); ok {
		if scale, scaleNode, err = p.Float(v, m.At("slo_scale")); err != nil {
			return nil, err
		}
		if scale <= 0 {
			return nil, p.ErrAt(scaleNode, m.At("slo_scale"), "must be positive, got %g", scale)
		}
	}

	prefix := ""
	if v, ok := m.Lookup("name_prefix"); ok {
		var pn *yaml.Node
		if prefix, pn, err = p.Str(v, m.At("name_prefix"), "a name prefix"); err != nil {
			return nil, err
		}
		if err := strictyaml.CheckName(prefix, maxNameLen); err != nil {
			return nil, p.ErrAt(pn, m.At("name_prefix"), "name prefix %v", err)
		}
	}

	suffix := count > len(list)
	for i := range count {
		spec := list[i%len(list)]
		name := prefix + spec.Name
		if suffix {
			name += "-" + strconv.Itoa(i/len(list))
		}
		if len(name) > maxNameLen {
			return nil, p.ErrAt(m.Node, path, "model name %q is longer than %d bytes", name, maxNameLen)
		}
		if where, dup := names[name]; dup {
			return nil, p.ErrAt(m.Node, path, "expands to model %q, which %s already names (use name_prefix)", name, where)
		}
		names[name] = fmt.Sprintf("%s at line %d", path, m.Node.Line)
		md := Model{
			Name:          name,
			Profile:       p.zooProfile(zooName, spec),
			SLO:           spec.SLO,
			StaticMemory:  spec.StaticMemory,
			DynamicMemory: spec.DynamicMemory,
			Rates:         make([]RatePhase, len(base)),
			Arrival:       arr,
		}
		if slo > 0 {
			md.SLO = slo
		} else if scale != 1 {
			d := math.Round(float64(spec.SLO) * scale)
			if !(d >= 1 && d < math.MaxInt64) {
				return nil, p.ErrAt(scaleNode, m.At("slo_scale"), "%g puts the SLO of %s (%v) out of range", scale, spec.Name, spec.SLO)
			}
			md.SLO = time.Duration(d)
		}
		for j, ph := range base {
			md.Rates[j] = RatePhase{Duration: ph.Duration, Rate: ph.Rate * weights[i]}
		}
		models = append(models, md)
		p.nmodels++
	}
	return models, nil
}

// enumField reads a string field holding one of a scheduler enum's names,
// and reports an unknown name at the field's line.
func enumField[T any](p *parser, v *yaml.Node, key, want string, parse func(string) (T, error)) (T, error) {
	var zero T
	s, n, err := p.Str(v, key, want)
	if err != nil {
		return zero, err
	}
	t, err := parse(s)
	if err != nil {
		return zero, p.ErrAt(n, key, "%v", err)
	}
	return t, nil
}

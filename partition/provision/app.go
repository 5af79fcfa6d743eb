// Package provision is Symphony's cost planner for multi-model applications
// (`symphony provision`), after Harpagon, Piccolo and Scrooge: given a DAG of
// modules (detect → classify, speech → translate → synthesize), one
// end-to-end latency SLO, an ingress rate and hardware kinds with prices, it
// chooses for every module a list of configurations (hardware, batch,
// concurrency, machines) and a latency budget so that the cluster costs the
// least per hour and every source-to-sink path meets the SLO.
//
// The pipeline (see README.md) is a latency splitter (Harpagon Algorithm 2
// with node merging and cost-direct) that gives every module a budget, a
// module scheduler (Algorithm 1's multi-tuple configurations, the dummy
// generator of Theorem 2) that fills each budget at the least cost under a
// worst-case latency model (Theorem 1's d + b/w for batch-aware dispatch),
// and a latency reassigner that hands the slack left on each path back to
// the modules that can use it. Baselines (Nexus, Scrooge, InferLine,
// Clipper) are the same pipeline with the papers' restrictions; an exact
// brute force and Scrooge's MILP are references to check it against.
//
// The package is a library of plain functions over plain values: no I/O,
// no goroutines, no clock except where a caller asks for planning times.
package provision

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/symphony-serving/symphony/partition/strictyaml"
)

// Kind says where a module runs. Both are planned the same way; a CPU
// module's batch is always 1 (Scrooge §3.3, footnote 5), which Validate
// enforces.
type Kind int

const (
	// GPU is a DNN module, batched on an accelerator.
	GPU Kind = iota
	// CPU is a processing module (decode, resize, track) run one input at a
	// time, possibly several at once (concurrency).
	CPU
)

// String returns "gpu" or "cpu", the application file's spelling.
func (k Kind) String() string {
	switch k {
	case GPU:
		return "gpu"
	case CPU:
		return "cpu"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// ParseKind reads "gpu" or "cpu".
func ParseKind(s string) (Kind, error) {
	switch s {
	case "gpu":
		return GPU, nil
	case "cpu":
		return CPU, nil
	}
	return 0, fmt.Errorf("unknown module kind %q (want gpu or cpu)", s)
}

// Hardware is one kind of machine the cloud rents: a VM type with one
// accelerator (or only CPUs), billed by the hour.
type Hardware struct {
	Name string
	// PricePerHour is what one machine costs per hour; it must be
	// positive, since configurations are ranked by throughput per price.
	PricePerHour float64
	// Memory is the accelerator's memory in bytes, 0 when not given. A
	// configuration whose concurrent instances need more (Module.Memory ×
	// concurrency) is left out.
	Memory int64
}

// Point is one profiled configuration of a module on one hardware kind:
// Concurrency batches of Batch inputs run at once, each taking Latency. One
// machine then sustains Batch·Concurrency/Latency requests per second
// (Scrooge Eq. 1's denominator).
type Point struct {
	Batch       int
	Concurrency int
	Latency     time.Duration
}

// Throughput is the requests per second one machine sustains at p.
func (p Point) Throughput() float64 {
	return float64(p.Batch) * float64(p.Concurrency) / p.Latency.Seconds()
}

// Profile is a module's measured points on one hardware kind.
type Profile struct {
	Hardware string
	Points   []Point
}

// Module is one node of the application DAG.
type Module struct {
	Name string
	Kind Kind
	// Memory is the bytes one running instance needs, 0 when not given.
	Memory int64
	// Profiles lists the module's points per hardware kind; a hardware
	// kind without a profile cannot run the module.
	Profiles []Profile
	// Ingress is the rate (requests per second) entering the module from
	// outside the application; sources need one. A module's rate is its
	// ingress plus, over its incoming edges, the parent's rate times the
	// edge's scale.
	Ingress float64
}

// Edge feeds a module's outputs to another module: every input of From
// becomes Scale inputs of To (Scrooge's scaling factor: a detector that
// finds four faces per frame has scale 4 towards the face classifier).
type Edge struct {
	From, To string
	Scale    float64
}

// App is one application: the DAG, its hardware and its SLO.
type App struct {
	// SLO is the end-to-end latency objective over every source-to-sink
	// path.
	SLO      time.Duration
	Hardware []Hardware
	Modules  []Module
	Edges    []Edge
}

// Limits on what an App may hold. They are far above any real application
// and keep the planner's work (configurations × modules × iterations) and
// the rates' arithmetic bounded on hostile input.
const (
	// MaxModules bounds the modules of one application.
	MaxModules = 256
	// MaxHardware bounds the hardware kinds.
	MaxHardware = 64
	// MaxConfigsPerModule bounds the configurations of one module over all
	// hardware kinds (a linear profile expands to one per batch size).
	MaxConfigsPerModule = 4096
	// MaxRate bounds any module's rate, requests per second.
	MaxRate = 1e9
	// MaxBatch bounds a batch size; MaxConcurrency a concurrency level.
	MaxBatch       = 1 << 16
	MaxConcurrency = 1024
	// MaxLatency bounds a profiled latency and the SLO.
	MaxLatency = 24 * time.Hour
)

// instance is an App checked and indexed for planning: modules by index,
// their rates, the DAG in topological order, and every module's candidate
// configurations ranked by throughput-cost ratio. It is immutable once
// built, so planner variants share it.
type instance struct {
	app      *App
	slo      float64 // seconds
	hw       []Hardware
	names    []string
	rate     []float64
	parents  [][]int
	children [][]int
	topo     []int
	cands    [][]cand
	// pathLen[m] is the number of modules on the longest source-to-sink
	// path through m (the even split's divisor).
	pathLen []int
}

// cand is one candidate configuration of a module: a profile point on a
// hardware kind, with what the planner computes from it. Candidates are
// sorted by ratio (throughput per price) descending, the order of the
// throughput-cost dispatcher and of Algorithm 1.
type cand struct {
	hw       int
	batch    int
	conc     int
	latency  time.Duration
	d        float64 // latency in seconds
	b, e     float64
	tput     float64 // requests per second per machine, b·e/d
	price    float64 // per hour
	costRate float64 // price/tput: cost per hour of one request per second
	ratio    float64 // tput/price
}

// Validate checks the application: names unique and well-formed, every
// module with at least one usable configuration, edges between known
// modules with positive scales, no cycles, sources with ingress, rates and
// latencies finite and within the limits. The planner calls it; it is
// exported so that files and code can be checked without planning.
func (a *App) Validate() error {
	_, err := compile(a)
	return err
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// compile validates a and builds its instance.
func compile(a *App) (*instance, error) {
	if a == nil {
		return nil, errors.New("provision: nil application")
	}
	if a.SLO <= 0 || a.SLO > MaxLatency {
		return nil, fmt.Errorf("provision: slo %v is outside (0, %v]", a.SLO, MaxLatency)
	}
	if len(a.Hardware) == 0 {
		return nil, errors.New("provision: no hardware kinds")
	}
	if len(a.Hardware) > MaxHardware {
		return nil, fmt.Errorf("provision: %d hardware kinds, more than %d", len(a.Hardware), MaxHardware)
	}
	if len(a.Modules) == 0 {
		return nil, errors.New("provision: no modules")
	}
	if len(a.Modules) > MaxModules {
		return nil, fmt.Errorf("provision: %d modules, more than %d", len(a.Modules), MaxModules)
	}
	in := &instance{app: a, slo: a.SLO.Seconds(), hw: a.Hardware}
	hwIndex := make(map[string]int, len(a.Hardware))
	for i, h := range a.Hardware {
		if err := strictyaml.CheckName(h.Name, maxNameLen); err != nil {
			return nil, fmt.Errorf("provision: hardware %d: name %v", i, err)
		}
		if _, dup := hwIndex[h.Name]; dup {
			return nil, fmt.Errorf("provision: hardware %q listed twice", h.Name)
		}
		hwIndex[h.Name] = i
		if !finite(h.PricePerHour) || h.PricePerHour <= 0 || h.PricePerHour > 1e9 {
			return nil, fmt.Errorf("provision: hardware %q: price_per_hour %v is not in (0, 1e9]", h.Name, h.PricePerHour)
		}
		if h.Memory < 0 {
			return nil, fmt.Errorf("provision: hardware %q: negative memory", h.Name)
		}
	}
	n := len(a.Modules)
	modIndex := make(map[string]int, n)
	in.names = make([]string, n)
	in.cands = make([][]cand, n)
	for i, m := range a.Modules {
		if err := strictyaml.CheckName(m.Name, maxNameLen); err != nil {
			return nil, fmt.Errorf("provision: module %d: name %v", i, err)
		}
		if _, dup := modIndex[m.Name]; dup {
			return nil, fmt.Errorf("provision: module %q listed twice", m.Name)
		}
		modIndex[m.Name] = i
		in.names[i] = m.Name
		if m.Kind != GPU && m.Kind != CPU {
			return nil, fmt.Errorf("provision: module %q: unknown kind %d", m.Name, int(m.Kind))
		}
		if !finite(m.Ingress) || m.Ingress < 0 || m.Ingress > MaxRate {
			return nil, fmt.Errorf("provision: module %q: ingress %v is not in [0, %g]", m.Name, m.Ingress, MaxRate)
		}
		if m.Memory < 0 {
			return nil, fmt.Errorf("provision: module %q: negative memory", m.Name)
		}
		cs, err := candidates(m, a.Hardware, hwIndex)
		if err != nil {
			return nil, err
		}
		in.cands[i] = cs
	}
	in.parents = make([][]int, n)
	in.children = make([][]int, n)
	scale := make(map[[2]int]float64, len(a.Edges))
	for i, e := range a.Edges {
		f, okf := modIndex[e.From]
		t, okt := modIndex[e.To]
		switch {
		case !okf:
			return nil, fmt.Errorf("provision: edge %d: no module named %q", i, e.From)
		case !okt:
			return nil, fmt.Errorf("provision: edge %d: no module named %q", i, e.To)
		case f == t:
			return nil, fmt.Errorf("provision: edge %d: %s feeds itself", i, e.From)
		case !finite(e.Scale) || e.Scale <= 0 || e.Scale > 1e6:
			return nil, fmt.Errorf("provision: edge %s -> %s: scale %v is not in (0, 1e6]", e.From, e.To, e.Scale)
		}
		if _, dup := scale[[2]int{f, t}]; dup {
			return nil, fmt.Errorf("provision: edge %s -> %s listed twice", e.From, e.To)
		}
		scale[[2]int{f, t}] = e.Scale
		in.parents[t] = append(in.parents[t], f)
		in.children[f] = append(in.children[f], t)
	}
	// Kahn's algorithm, smallest index first, so that the order is
	// deterministic and follows the file where the DAG allows.
	indeg := make([]int, n)
	for t := range in.parents {
		indeg[t] = len(in.parents[t])
	}
	ready := make([]int, 0, n)
	for i := 0; i < n; i++ {
		if indeg[i] == 0 {
			ready = append(ready, i)
		}
	}
	for len(ready) > 0 {
		sort.Ints(ready)
		m := ready[0]
		ready = ready[1:]
		in.topo = append(in.topo, m)
		for _, c := range in.children[m] {
			if indeg[c]--; indeg[c] == 0 {
				ready = append(ready, c)
			}
		}
	}
	if len(in.topo) != n {
		var cyc []string
		for i := 0; i < n; i++ {
			if indeg[i] > 0 {
				cyc = append(cyc, in.names[i])
			}
		}
		return nil, fmt.Errorf("provision: the edges form a cycle through %s", strings.Join(cyc, ", "))
	}
	in.rate = make([]float64, n)
	for _, m := range in.topo {
		r := a.Modules[m].Ingress
		for _, p := range in.parents[m] {
			r += in.rate[p] * scale[[2]int{p, m}]
		}
		if len(in.parents[m]) == 0 && r <= 0 {
			return nil, fmt.Errorf("provision: module %q is a source (no incoming edge) without ingress", in.names[m])
		}
		if !finite(r) || r > MaxRate {
			return nil, fmt.Errorf("provision: module %q: rate %g exceeds %g", in.names[m], r, MaxRate)
		}
		in.rate[m] = r
	}
	in.pathLen = make([]int, n)
	for m, l := range longestThrough(in, func(int) float64 { return 1 }) {
		in.pathLen[m] = int(math.Round(l))
	}
	return in, nil
}

// candidates expands a module's profiles into candidate configurations,
// sorted by ratio (throughput per price) descending; ties go to the higher
// throughput, then the lower latency, then the hardware and batch order, so
// that the order is total and deterministic.
func candidates(m Module, hw []Hardware, hwIndex map[string]int) ([]cand, error) {
	var cs []cand
	seenHW := make(map[int]bool, len(m.Profiles))
	for _, p := range m.Profiles {
		h, ok := hwIndex[p.Hardware]
		if !ok {
			return nil, fmt.Errorf("provision: module %q: profile for unknown hardware %q", m.Name, p.Hardware)
		}
		if seenHW[h] {
			return nil, fmt.Errorf("provision: module %q: two profiles for hardware %q", m.Name, p.Hardware)
		}
		seenHW[h] = true
		seen := make(map[[2]int]bool, len(p.Points))
		for _, pt := range p.Points {
			where := fmt.Sprintf("provision: module %q on %s, batch %d", m.Name, p.Hardware, pt.Batch)
			switch {
			case pt.Batch < 1 || pt.Batch > MaxBatch:
				return nil, fmt.Errorf("%s: batch is outside 1..%d", where, MaxBatch)
			case pt.Concurrency < 1 || pt.Concurrency > MaxConcurrency:
				return nil, fmt.Errorf("%s: concurrency %d is outside 1..%d", where, pt.Concurrency, MaxConcurrency)
			case pt.Latency <= 0 || pt.Latency > MaxLatency:
				return nil, fmt.Errorf("%s: latency %v is outside (0, %v]", where, pt.Latency, MaxLatency)
			case m.Kind == CPU && pt.Batch != 1:
				return nil, fmt.Errorf("%s: a cpu module runs one input at a time (batch 1)", where)
			}
			key := [2]int{pt.Batch, pt.Concurrency}
			if seen[key] {
				return nil, fmt.Errorf("%s: concurrency %d profiled twice", where, pt.Concurrency)
			}
			seen[key] = true
			if mem := hw[h].Memory; mem > 0 && m.Memory > 0 && m.Memory > mem/int64(pt.Concurrency) {
				continue // does not fit: Memory × concurrency > hardware memory
			}
			c := cand{hw: h, batch: pt.Batch, conc: pt.Concurrency, latency: pt.Latency, d: pt.Latency.Seconds(),
				b: float64(pt.Batch), e: float64(pt.Concurrency), price: hw[h].PricePerHour}
			c.tput = c.b * c.e / c.d
			c.costRate = c.price / c.tput
			c.ratio = c.tput / c.price
			cs = append(cs, c)
			if len(cs) > MaxConfigsPerModule {
				return nil, fmt.Errorf("provision: module %q has more than %d configurations", m.Name, MaxConfigsPerModule)
			}
		}
	}
	if len(cs) == 0 {
		return nil, fmt.Errorf("provision: module %q has no configuration that fits any hardware kind", m.Name)
	}
	sort.SliceStable(cs, func(i, j int) bool { return candLess(&cs[i], &cs[j]) })
	return cs, nil
}

// candLess is the ranking of candidates: ratio descending, then throughput
// descending, latency ascending, hardware, batch and concurrency.
func candLess(x, y *cand) bool {
	switch {
	case x.ratio != y.ratio:
		return x.ratio > y.ratio
	case x.tput != y.tput:
		return x.tput > y.tput
	case x.d != y.d:
		return x.d < y.d
	case x.hw != y.hw:
		return x.hw < y.hw
	case x.batch != y.batch:
		return x.batch < y.batch
	}
	return x.conc < y.conc
}

// longestThrough returns, for every module, the largest sum of w over a
// source-to-sink path through it.
func longestThrough(in *instance, w func(m int) float64) []float64 {
	n := len(in.topo)
	fwd := make([]float64, n)
	bwd := make([]float64, n)
	for _, m := range in.topo {
		best := 0.0
		for _, p := range in.parents[m] {
			best = math.Max(best, fwd[p])
		}
		fwd[m] = best + w(m)
	}
	for i := n - 1; i >= 0; i-- {
		m := in.topo[i]
		best := 0.0
		for _, c := range in.children[m] {
			best = math.Max(best, bwd[c])
		}
		bwd[m] = best + w(m)
	}
	out := make([]float64, n)
	for m := range out {
		out[m] = fwd[m] + bwd[m] - w(m)
	}
	return out
}

// Paths lists the application's source-to-sink paths as module names, in
// a deterministic order, up to limit of them (all when limit <= 0); more
// reports that some were left out. A DAG can have exponentially many paths,
// so reports list a bounded number while the planner itself checks the SLO
// with a longest-path pass.
func (a *App) Paths(limit int) (paths [][]string, more bool, err error) {
	in, err := compile(a)
	if err != nil {
		return nil, false, err
	}
	idx := in.paths(limit)
	more = limit > 0 && len(idx) > limit
	if more {
		idx = idx[:limit]
	}
	for _, p := range idx {
		names := make([]string, len(p))
		for i, m := range p {
			names[i] = in.names[m]
		}
		paths = append(paths, names)
	}
	return paths, more, nil
}

// paths enumerates source-to-sink paths by module index, stopping after
// limit+1 of them (so that the caller can tell there are more).
func (in *instance) paths(limit int) [][]int {
	var out [][]int
	var stack []int
	var walk func(m int) bool
	walk = func(m int) bool {
		stack = append(stack, m)
		defer func() { stack = stack[:len(stack)-1] }()
		if len(in.children[m]) == 0 {
			out = append(out, append([]int(nil), stack...))
			return limit <= 0 || len(out) <= limit
		}
		for _, c := range in.children[m] {
			if !walk(c) {
				return false
			}
		}
		return true
	}
	for _, m := range in.topo {
		if len(in.parents[m]) == 0 && !walk(m) {
			break
		}
	}
	return out
}

package workload

// The load of a workload file: each model's rates (a rate, phases, a daily
// curve or a trace) and arrival process, and a zoo's shares of its total
// rate. The serving keys of the same entries are read by serving.Decoder.

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
	"github.com/symphony-serving/symphony/scheduler/serving"
)

// model adds a models entry's load (its rate and arrival keys) to the
// served model sm read from it.
func (p *parser) model(m *strictyaml.Map, sm serving.Model) (Model, error) {
	md := fromServing(sm)
	var err error
	if md.Rates, err = p.modelRates(m); err != nil {
		return md, err
	}
	if v, ok := m.Lookup("arrival"); ok {
		if md.Arrival, err = p.arrival(v, m.At("arrival")); err != nil {
			return md, err
		}
	}
	if v, ok := m.Lookup("priority_mix"); ok {
		if md.PriorityMix, err = p.priorityMix(v, m.At("priority_mix")); err != nil {
			return md, err
		}
	}
	if v, ok := m.Lookup("gpu_type"); ok {
		if md.GPUType, _, err = p.Str(v, m.At("gpu_type"), "the name of one of the cluster's gpu_types"); err != nil {
			return md, err
		}
		if !slices.ContainsFunc(p.gpuTypes, func(g GPUType) bool { return g.Name == md.GPUType }) {
			return md, p.ErrAt(v, m.At("gpu_type"), "no gpu_type named %q in the cluster (it lists %s)", md.GPUType, gpuTypeNames(p.gpuTypes))
		}
	}
	if v, ok := m.Lookup("concurrency"); ok {
		if md.Concurrency, err = p.IntIn(v, m.At("concurrency"), 1, MaxConcurrency); err != nil {
			return md, err
		}
	}
	if v, ok := m.Lookup("stream"); ok {
		if md.Stream, _, err = p.Str(v, m.At("stream"), "the name of an arrival stream the model shares"); err != nil {
			return md, err
		}
		if md.Stream == "" {
			return md, p.ErrAt(v, m.At("stream"), "an empty stream name")
		}
	}
	if v, ok := m.Lookup("stream_batch"); ok {
		if md.StreamBatch, err = p.IntIn(v, m.At("stream_batch"), 1, MaxStreamBatch); err != nil {
			return md, err
		}
	}
	return md, nil
}

// gpuTypeNames lists the types' names for an error message.
func gpuTypeNames(types []GPUType) string {
	if len(types) == 0 {
		return "no gpu_types"
	}
	names := make([]string, len(types))
	for i, g := range types {
		names[i] = g.Name
	}
	return strings.Join(names, ", ")
}

// priorityMix reads a list of {level, share}: the shares of a model's
// requests sent at each priority level above 0, which takes the rest.
func (p *parser) priorityMix(n *yaml.Node, path string) ([]PriorityShare, error) {
	items, err := p.Seq(n, path, "a list of {level, share}")
	if err != nil {
		return nil, err
	}
	var mix []PriorityShare
	total := 0.0
	for i, it := range items {
		at := fmt.Sprintf("%s[%d]", path, i)
		m, err := p.Mapping(it, at, "a mapping {level, share}", []string{"level", "share"})
		if err != nil {
			return nil, err
		}
		lv, err := p.Required(m, "level", " (1 to 255; 0 is the default level, which takes the rest)")
		if err != nil {
			return nil, err
		}
		level, err := p.IntIn(lv, m.At("level"), 1, 255)
		if err != nil {
			return nil, err
		}
		sv, err := p.Required(m, "share", " (the fraction of the model's requests, in (0, 1])")
		if err != nil {
			return nil, err
		}
		share, err := p.FloatIn(sv, m.At("share"), 0, 1)
		if err != nil {
			return nil, err
		}
		if share == 0 {
			return nil, p.ErrAt(sv, m.At("share"), "a share of 0 sends nothing at level %d: leave the level out", level)
		}
		for _, e := range mix {
			if e.Level == scheduler.Priority(level) {
				return nil, p.ErrAt(lv, m.At("level"), "level %d given twice", level)
			}
		}
		if total += share; total > 1+1e-9 {
			return nil, p.ErrAt(sv, m.At("share"), "the shares add up to %g, over 1", total)
		}
		mix = append(mix, PriorityShare{Level: scheduler.Priority(level), Share: share})
	}
	slices.SortFunc(mix, func(a, b PriorityShare) int { return int(b.Level) - int(a.Level) })
	return mix, nil
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

// zooLoad adds a zoo mapping's load to the served models it expands to:
// their rates follow the popularity law (model 0 the most popular under
// zipf), sharing total_rate or total_rates, and they share its arrival.
func (p *parser) zooLoad(m *strictyaml.Map, sms []serving.Model) ([]Model, error) {
	count := len(sms)
	weights := make([]float64, count)
	pop := "even"
	var popNode *yaml.Node
	var err error
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
	models := make([]Model, count)
	for i, sm := range sms {
		md := fromServing(sm)
		md.Arrival = arr
		md.Rates = make([]RatePhase, len(base))
		for j, ph := range base {
			md.Rates[j] = RatePhase{Duration: ph.Duration, Rate: ph.Rate * weights[i]}
		}
		models[i] = md
	}
	return models, nil
}

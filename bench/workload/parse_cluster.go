package workload

// The harness's cluster and epoch job of a workload file: how many GPUs of
// which types the simulator and demo run, over how many backends, and the
// simulated epoch job's settings.

import (
	"math"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/symphony-serving/symphony/partition/strictyaml"
	"github.com/symphony-serving/symphony/scheduler/serving"
)

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
		if e.Parts, err = p.IntIn(v, m.At("parts"), 1, serving.MaxModels); err != nil {
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

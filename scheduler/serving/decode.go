package serving

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/symphony-serving/symphony/partition/strictyaml"
	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/profile"
)

// Limits on what one file may expand to. They are far above any real
// configuration and exist so that a small file using anchors, aliases or a
// large zoo count cannot make a parse allocate without bound.
const (
	// MaxModels bounds the models after zoo expansion.
	MaxModels = 100_000
	// MaxNameLen bounds model names.
	MaxNameLen = 128
	// MaxInputSize bounds a model's input_size: the largest input a task
	// descriptor may announce (transport/wire.MaxInputSize).
	MaxInputSize = 64 << 20
	// maxProfileEntries bounds the batch latencies of all distinct
	// profiles together (a profile shared through an alias or a zoo
	// counts once).
	maxProfileEntries = 64 << 20
	// maxNetworkDelay bounds each network delay: beyond it a value is a
	// typo, and data_delay_per_mib times a 64 MiB input stays far from
	// overflowing.
	maxNetworkDelay = time.Second
)

// The keys of the serving configuration. A workload file uses the same
// keys with the same meaning and adds its own (LoadKeys).
var (
	// TopKeys are the keys of the file's root mapping.
	TopKeys = []string{"network", "live_floor", "limits", "models", "zoo", "policy", "schedulable", "drop_policy", "schedule_ahead"}
	// ModelKeys are the keys of one entry of models.
	ModelKeys = []string{"name", "profile", "memory", "input_size", "slo"}
	// ZooKeys are the keys of one zoo mapping.
	ZooKeys = []string{"profiles", "count", "select", "slo_scale", "slo", "name_prefix"}
)

var (
	networkKeys = []string{"ctrl_delay", "data_delay_per_request", "data_delay_per_mib", "result_delay"}
	limitKeys   = []string{"max_gpus", "stall_after", "drain_timeout"}
	memoryKeys  = []string{"static", "dynamic"}
	profileKeys = []string{"alpha", "beta", "max_batch", "batch_latency"}
)

// Decoder reads the serving parts of a file's node tree. One Decoder
// serves one parse: it shares the caller's Reader (its work budget and
// file name), caches profiles shared through aliases and zoos, and checks
// that model names are unique across models and zoos.
type Decoder struct {
	r *strictyaml.Reader
	// entries counts down the batch latencies all profiles may hold.
	entries int
	nmodels int
	// tables caches profiles by their (alias-resolved) YAML node, so an
	// anchored profile used by many models is built and counted once.
	tables map[*yaml.Node]profile.Profile
	// zooProfs caches bundled profiles by "zoo/model".
	zooProfs map[string]profile.Profile
	// names maps each model name to where it was defined.
	names map[string]string
	// delays are the network's, which models' SLOs are checked against.
	delays scheduler.Delays
}

// NewDecoder returns a Decoder reading through r.
func NewDecoder(r *strictyaml.Reader) *Decoder {
	return &Decoder{
		r:        r,
		entries:  maxProfileEntries,
		tables:   make(map[*yaml.Node]profile.Profile),
		zooProfs: make(map[string]profile.Profile),
		names:    make(map[string]string),
		delays:   DefaultNetwork(),
	}
}

// Settings reads the settings keys of the root mapping m (opened with at
// least TopKeys) into s, which holds the defaults for keys m leaves out.
// Call it before Models and Zoos: they check SLOs against the network.
func (d *Decoder) Settings(m *strictyaml.Map, s *Settings) error {
	var err error
	if v, ok := m.Lookup("network"); ok {
		if s.Network, err = d.delaysAt(v, "network"); err != nil {
			return err
		}
	}
	if v, ok := m.Lookup("live_floor"); ok {
		if s.LiveFloor, err = d.delaysAt(v, "live_floor"); err != nil {
			return err
		}
	}
	if v, ok := m.Lookup("limits"); ok {
		if s.Limits, err = d.limits(v, "limits", s.Limits); err != nil {
			return err
		}
	}
	if v, ok := m.Lookup("policy"); ok {
		if s.Policy, err = enumField(d.r, v, "policy", "a policy name", scheduler.ParsePolicy); err != nil {
			return err
		}
	}
	if v, ok := m.Lookup("schedulable"); ok {
		if s.Schedulable, err = enumField(d.r, v, "schedulable", "a schedulable condition", scheduler.ParseSchedulable); err != nil {
			return err
		}
	}
	if v, ok := m.Lookup("drop_policy"); ok {
		if s.Drop, err = enumField(d.r, v, "drop_policy", "a drop policy", scheduler.ParseDropPolicy); err != nil {
			return err
		}
	}
	if v, ok := m.Lookup("schedule_ahead"); ok {
		if s.ScheduleAhead, err = d.r.NonNegDuration(v, "schedule_ahead"); err != nil {
			return err
		}
	}
	d.delays = s.Network
	return nil
}

// delaysAt reads a mapping of delays; a delay left out of a given mapping
// is 0, so that network: {} means an ideal network.
func (d *Decoder) delaysAt(n *yaml.Node, path string) (scheduler.Delays, error) {
	var ds scheduler.Delays
	m, err := d.r.Mapping(n, path, "a mapping {ctrl_delay, data_delay_per_request, data_delay_per_mib, result_delay}", networkKeys)
	if err != nil {
		return ds, err
	}
	for _, f := range []struct {
		key string
		dst *time.Duration
	}{{"ctrl_delay", &ds.Ctrl}, {"data_delay_per_request", &ds.DataPerRequest}, {"data_delay_per_mib", &ds.DataPerMiB}, {"result_delay", &ds.Result}} {
		if v, ok := m.Lookup(f.key); ok {
			if *f.dst, err = d.r.NonNegDuration(v, m.At(f.key)); err != nil {
				return ds, err
			}
			if *f.dst > maxNetworkDelay {
				return ds, d.r.ErrAt(v, m.At(f.key), "%v is longer than %v: no network is that slow", *f.dst, maxNetworkDelay)
			}
		}
	}
	return ds, nil
}

// limits reads limits:, keeping lim's values for keys left out.
func (d *Decoder) limits(n *yaml.Node, path string, lim Limits) (Limits, error) {
	m, err := d.r.Mapping(n, path, "a mapping {max_gpus, stall_after, drain_timeout}", limitKeys)
	if err != nil {
		return lim, err
	}
	if v, ok := m.Lookup("max_gpus"); ok {
		if lim.MaxGPUs, err = d.r.IntIn(v, m.At("max_gpus"), 1, MaxGPUsLimit); err != nil {
			return lim, err
		}
	}
	if v, ok := m.Lookup("stall_after"); ok {
		if lim.StallAfter, err = d.r.NonNegDuration(v, m.At("stall_after")); err != nil {
			return lim, err
		}
	}
	if v, ok := m.Lookup("drain_timeout"); ok {
		// Negative means not to wait: read it as a plain duration.
		if lim.DrainTimeout, _, err = d.r.Duration(v, m.At("drain_timeout")); err != nil {
			return lim, err
		}
	}
	return lim, nil
}

// Models reads the models list n. Each entry is opened with ModelKeys
// plus extra (the keys a caller's format adds, such as a workload's
// rates); each reads the caller's keys of one entry, given the model read
// from it, in file order.
func (d *Decoder) Models(n *yaml.Node, path string, extra []string, each func(m *strictyaml.Map, md Model) error) error {
	seq, err := d.r.Resolve(n, path)
	if err != nil {
		return err
	}
	if seq.Kind != yaml.SequenceNode {
		return d.r.ErrAt(seq, path, "want a list of models, got %s", strictyaml.Describe(seq))
	}
	if len(seq.Content) > MaxModels-d.nmodels {
		return d.r.ErrAt(seq, path, "more than %d models", MaxModels)
	}
	keys := append(append([]string(nil), ModelKeys...), extra...)
	for i, e := range seq.Content {
		ep := strictyaml.Index(path, i)
		m, err := d.r.Mapping(e, ep, "a model mapping {name, profile, slo, ...}", keys)
		if err != nil {
			return err
		}
		md, err := d.model(m)
		if err != nil {
			return err
		}
		if err := each(m, md); err != nil {
			return err
		}
	}
	return nil
}

// model reads one model entry's serving keys.
func (d *Decoder) model(m *strictyaml.Map) (Model, error) {
	var md Model
	v, err := d.r.Required(m, "name", "")
	if err != nil {
		return md, err
	}
	name, nameNode, err := d.r.Str(v, m.At("name"), "a model name")
	if err != nil {
		return md, err
	}
	if err := strictyaml.CheckName(name, MaxNameLen); err != nil {
		return md, d.r.ErrAt(nameNode, m.At("name"), "model name %v", err)
	}
	if where, dup := d.names[name]; dup {
		return md, d.r.ErrAt(nameNode, m.At("name"), "duplicate model name %q (%s has it too)", name, where)
	}
	d.names[name] = fmt.Sprintf("%s at line %d", m.Path, nameNode.Line)
	d.nmodels++
	md.Name = name

	if v, err = d.r.Required(m, "profile", " (give {alpha, beta}, {batch_latency: [...]} or zoo:<zoo>/<model>)"); err != nil {
		return md, err
	}
	var spec *profile.ModelSpec
	if md.Profile, spec, err = d.profile(v, m.At("profile")); err != nil {
		return md, err
	}
	if spec != nil {
		md.SLO = spec.SLO
		md.StaticMemory, md.DynamicMemory = spec.StaticMemory, spec.DynamicMemory
	}
	if err := d.sizes(m, &md); err != nil {
		return md, err
	}
	if v, ok := m.Lookup("slo"); ok {
		if md.SLO, err = d.r.PosDuration(v, m.At("slo")); err != nil {
			return md, err
		}
	} else if spec == nil {
		return md, d.r.ErrAt(m.Node, m.At("slo"), "required (a duration such as 25ms) unless the profile is a zoo reference")
	}
	if least := md.LeastLatency(d.delays); md.SLO <= least {
		where := m.Node
		if v, ok := m.Lookup("slo"); ok {
			where = v
		}
		return md, d.r.ErrAt(where, m.At("slo"), "%v is not longer than a batch of one takes with its input's pull and the network delays (%v): no request could meet it", md.SLO, least)
	}
	return md, nil
}

// sizes reads a model's memory and input_size, where given, into md: the
// keys a models entry and a repository model's config.yaml share.
func (d *Decoder) sizes(m *strictyaml.Map, md *Model) error {
	var err error
	if v, ok := m.Lookup("memory"); ok {
		if md.StaticMemory, md.DynamicMemory, err = d.memory(v, m.At("memory")); err != nil {
			return err
		}
	}
	if v, ok := m.Lookup("input_size"); ok {
		if md.InputBytes, err = d.r.Size(v, m.At("input_size"), MaxInputSize); err != nil {
			return err
		}
	}
	return nil
}

func (d *Decoder) memory(n *yaml.Node, path string) (static, dynamic int64, err error) {
	m, err := d.r.Mapping(n, path, "a mapping {static, dynamic}", memoryKeys)
	if err != nil {
		return 0, 0, err
	}
	if v, ok := m.Lookup("static"); ok {
		if static, err = d.r.Size(v, m.At("static"), math.MaxInt64); err != nil {
			return 0, 0, err
		}
	}
	if v, ok := m.Lookup("dynamic"); ok {
		if dynamic, err = d.r.Size(v, m.At("dynamic"), math.MaxInt64); err != nil {
			return 0, 0, err
		}
	}
	return static, dynamic, nil
}

// profile reads a model's profile. For a zoo reference it also returns the
// zoo's spec, whose SLO and memory the model inherits unless it gives its
// own.
func (d *Decoder) profile(n *yaml.Node, path string) (profile.Profile, *profile.ModelSpec, error) {
	n, err := d.r.Resolve(n, path)
	if err != nil {
		return profile.Profile{}, nil, err
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() != "!!null" {
		return d.zooRef(n, path)
	}
	if pr, ok := d.tables[n]; ok {
		return pr, nil, nil
	}
	m, err := d.r.Mapping(n, path, "{alpha, beta}, {batch_latency: [...]} or zoo:<zoo>/<model>", profileKeys)
	if err != nil {
		return profile.Profile{}, nil, err
	}
	var pr profile.Profile
	if v, ok := m.Lookup("batch_latency"); ok {
		for _, k := range []string{"alpha", "beta", "max_batch"} {
			if m.Has(k) {
				return pr, nil, d.r.ErrAt(m.KeyNode(k), m.At(k), "batch_latency and %s are mutually exclusive (a table profile lists every batch size)", k)
			}
		}
		if pr, err = d.table(v, m.At("batch_latency")); err != nil {
			return pr, nil, err
		}
	} else if pr, err = d.linear(m); err != nil {
		return pr, nil, err
	}
	d.tables[n] = pr
	return pr, nil, nil
}

func (d *Decoder) linear(m *strictyaml.Map) (profile.Profile, error) {
	hint := " (a linear profile gives alpha and beta: latency of batch b = alpha*b + beta)"
	av, err := d.r.Required(m, "alpha", hint)
	if err != nil {
		return profile.Profile{}, err
	}
	bv, err := d.r.Required(m, "beta", hint)
	if err != nil {
		return profile.Profile{}, err
	}
	alpha, err := d.r.NonNegDuration(av, m.At("alpha"))
	if err != nil {
		return profile.Profile{}, err
	}
	beta, err := d.r.NonNegDuration(bv, m.At("beta"))
	if err != nil {
		return profile.Profile{}, err
	}
	if alpha == 0 && beta == 0 {
		return profile.Profile{}, d.r.ErrAt(m.Node, m.Path, "alpha and beta are both zero")
	}
	maxBatch := profile.DefaultMaxBatch
	if v, ok := m.Lookup("max_batch"); ok {
		if maxBatch, err = d.r.IntIn(v, m.At("max_batch"), 1, 1<<16); err != nil {
			return profile.Profile{}, err
		}
	}
	// ℓ(maxBatch) must not overflow a Duration.
	if alpha > 0 && (math.MaxInt64-beta)/alpha < time.Duration(maxBatch) {
		return profile.Profile{}, d.r.ErrAt(m.Node, m.Path, "alpha*max_batch + beta overflows")
	}
	if err := d.spendEntries(m.Node, m.Path, maxBatch); err != nil {
		return profile.Profile{}, err
	}
	pr, err := profile.Linear(alpha, beta, maxBatch)
	if err != nil {
		return pr, d.r.ErrAt(m.Node, m.Path, "%s", strings.TrimPrefix(err.Error(), "profile: "))
	}
	return pr, nil
}

func (d *Decoder) table(n *yaml.Node, path string) (profile.Profile, error) {
	seq, err := d.r.Resolve(n, path)
	if err != nil {
		return profile.Profile{}, err
	}
	if seq.Kind != yaml.SequenceNode || len(seq.Content) == 0 {
		return profile.Profile{}, d.r.ErrAt(seq, path, "want a non-empty list of durations (latency of batch 1, 2, ...), got %s", strictyaml.Describe(seq))
	}
	if len(seq.Content) > 1<<16 {
		return profile.Profile{}, d.r.ErrAt(seq, path, "more than 65536 batch sizes")
	}
	if err := d.spendEntries(seq, path, len(seq.Content)); err != nil {
		return profile.Profile{}, err
	}
	lat := make([]time.Duration, len(seq.Content))
	for i, e := range seq.Content {
		ep := strictyaml.Index(path, i)
		dur, en, err := d.r.Duration(e, ep)
		if err != nil {
			return profile.Profile{}, err
		}
		if dur <= 0 {
			return profile.Profile{}, d.r.ErrAt(en, ep, "latency of batch %d must be positive, got %v", i+1, dur)
		}
		if i > 0 && dur < lat[i-1] {
			return profile.Profile{}, d.r.ErrAt(en, ep, "latency of batch %d (%v) is below that of batch %d (%v); latency must not fall as batches grow", i+1, dur, i, lat[i-1])
		}
		lat[i] = dur
	}
	pr, err := profile.Table(lat)
	if err != nil {
		return pr, d.r.ErrAt(seq, path, "%s", strings.TrimPrefix(err.Error(), "profile: "))
	}
	return pr, nil
}

func (d *Decoder) spendEntries(n *yaml.Node, path string, k int) error {
	if k > d.entries {
		return d.r.ErrAt(n, path, "file too large: more than %d batch latencies over all profiles", maxProfileEntries)
	}
	d.entries -= k
	return nil
}

// zooRef reads a profile given as zoo:<zoo>/<model>.
func (d *Decoder) zooRef(n *yaml.Node, path string) (profile.Profile, *profile.ModelSpec, error) {
	const want = "(want {alpha, beta}, {batch_latency: [...]} or zoo:<zoo>/<model> such as zoo:1080ti/ResNet50)"
	ref, ok := strings.CutPrefix(strings.TrimSpace(n.Value), "zoo:")
	if !ok {
		return profile.Profile{}, nil, d.r.ErrAt(n, path, "%q is not a profile %s", n.Value, want)
	}
	zooName, modelName, ok := strings.Cut(ref, "/")
	if !ok || zooName == "" || modelName == "" {
		return profile.Profile{}, nil, d.r.ErrAt(n, path, "%q is not a zoo reference %s", n.Value, want)
	}
	specs, err := profile.Zoo(zooName)
	if err != nil {
		return profile.Profile{}, nil, d.r.ErrAt(n, path, "unknown zoo %q (known: %s)", zooName, strings.Join(profile.ZooNames(), ", "))
	}
	i, msg := findSpec(specs, modelName)
	if msg != "" {
		return profile.Profile{}, nil, d.r.ErrAt(n, path, "zoo %s %s", zooName, msg)
	}
	spec := specs[i]
	return d.zooProfile(strings.ToLower(zooName), spec), &spec, nil
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

// zooProfile returns the spec's profile, built once per parse and shared:
// profiles are immutable, and a zoo expanded to thousands of copies would
// otherwise hold thousands of identical tables.
func (d *Decoder) zooProfile(zoo string, spec profile.ModelSpec) profile.Profile {
	key := zoo + "/" + spec.Name
	pr, ok := d.zooProfs[key]
	if !ok {
		pr = spec.Profile()
		d.zooProfs[key] = pr
	}
	return pr
}

// Zoos reads zoo: a single zoo mapping or a list of them. Each mapping is
// opened with ZooKeys plus extra (a caller's own keys, such as a
// workload's total_rate); each reads them, given the models the mapping
// expands to, in order.
func (d *Decoder) Zoos(n *yaml.Node, path string, extra []string, each func(m *strictyaml.Map, models []Model) error) error {
	n, err := d.r.Resolve(n, path)
	if err != nil {
		return err
	}
	entries, paths := []*yaml.Node{n}, []string{path}
	if n.Kind == yaml.SequenceNode {
		entries, paths = n.Content, make([]string, len(n.Content))
		for i := range paths {
			paths[i] = strictyaml.Index(path, i)
		}
	}
	keys := append(append([]string(nil), ZooKeys...), extra...)
	for i, e := range entries {
		m, err := d.r.Mapping(e, paths[i], "a zoo mapping {profiles, ...}", keys)
		if err != nil {
			return err
		}
		models, err := d.zoo(m)
		if err != nil {
			return err
		}
		if err := each(m, models); err != nil {
			return err
		}
	}
	return nil
}

// zoo expands one zoo mapping. Model i takes spec i mod len(list); when
// count exceeds the list, every name gets the copy number i/len(list) as a
// suffix so that names stay unique.
func (d *Decoder) zoo(m *strictyaml.Map) ([]Model, error) {
	r := d.r
	v, err := r.Required(m, "profiles", fmt.Sprintf(" (a bundled zoo: %s)", strings.Join(profile.ZooNames(), ", ")))
	if err != nil {
		return nil, err
	}
	zooName, zn, err := r.Str(v, m.At("profiles"), "a zoo name")
	if err != nil {
		return nil, err
	}
	specs, err := profile.Zoo(zooName)
	if err != nil {
		return nil, r.ErrAt(zn, m.At("profiles"), "unknown zoo %q (known: %s)", zooName, strings.Join(profile.ZooNames(), ", "))
	}
	zooName = strings.ToLower(zooName)

	list := specs
	if v, ok := m.Lookup("select"); ok {
		if list, err = d.selectSpecs(v, m.At("select"), zooName, specs); err != nil {
			return nil, err
		}
	}

	count := len(list)
	room := MaxModels - d.nmodels
	if v, ok := m.Lookup("count"); ok {
		if count, err = r.IntIn(v, m.At("count"), 1, math.MaxInt32); err != nil {
			return nil, err
		}
		if count > room {
			return nil, r.ErrAt(m.KeyNode("count"), m.At("count"), "%d would make more than %d models in all", count, MaxModels)
		}
	} else if count > room {
		return nil, r.ErrAt(m.Node, m.Path, "more than %d models in all", MaxModels)
	}

	slo, scale, scaleNode, err := d.zooSLO(m)
	if err != nil {
		return nil, err
	}
	prefix := ""
	if v, ok := m.Lookup("name_prefix"); ok {
		var pn *yaml.Node
		if prefix, pn, err = r.Str(v, m.At("name_prefix"), "a name prefix"); err != nil {
			return nil, err
		}
		if err := strictyaml.CheckName(prefix, MaxNameLen); err != nil {
			return nil, r.ErrAt(pn, m.At("name_prefix"), "name prefix %v", err)
		}
	}

	suffix := count > len(list)
	models := make([]Model, 0, count)
	for i := range count {
		spec := list[i%len(list)]
		name := prefix + spec.Name
		if suffix {
			name += "-" + strconv.Itoa(i/len(list))
		}
		if len(name) > MaxNameLen {
			return nil, r.ErrAt(m.Node, m.Path, "model name %q is longer than %d bytes", name, MaxNameLen)
		}
		if where, dup := d.names[name]; dup {
			return nil, r.ErrAt(m.Node, m.Path, "expands to model %q, which %s already names (use name_prefix)", name, where)
		}
		d.names[name] = fmt.Sprintf("%s at line %d", m.Path, m.Node.Line)
		md := Model{
			Name:          name,
			Profile:       d.zooProfile(zooName, spec),
			SLO:           spec.SLO,
			StaticMemory:  spec.StaticMemory,
			DynamicMemory: spec.DynamicMemory,
		}
		if slo > 0 {
			md.SLO = slo
		} else if scale != 1 {
			s := math.Round(float64(spec.SLO) * scale)
			if !(s >= 1 && s < math.MaxInt64) {
				return nil, r.ErrAt(scaleNode, m.At("slo_scale"), "%g puts the SLO of %s (%v) out of range", scale, spec.Name, spec.SLO)
			}
			md.SLO = time.Duration(s)
		}
		models = append(models, md)
		d.nmodels++
	}
	return models, nil
}

// selectSpecs reads a zoo's select: the zoo models to take, in order.
func (d *Decoder) selectSpecs(v *yaml.Node, sp, zooName string, specs []profile.ModelSpec) ([]profile.ModelSpec, error) {
	seq, err := d.r.Resolve(v, sp)
	if err != nil {
		return nil, err
	}
	if seq.Kind != yaml.SequenceNode || len(seq.Content) == 0 {
		return nil, d.r.ErrAt(seq, sp, "want a non-empty list of model names from zoo %s, got %s", zooName, strictyaml.Describe(seq))
	}
	var list []profile.ModelSpec
	picked := make(map[string]int)
	for i, e := range seq.Content {
		ep := strictyaml.Index(sp, i)
		name, en, err := d.r.Str(e, ep, "a model name")
		if err != nil {
			return nil, err
		}
		j, msg := findSpec(specs, name)
		if msg != "" {
			return nil, d.r.ErrAt(en, ep, "zoo %s %s", zooName, msg)
		}
		if line, dup := picked[name]; dup {
			return nil, d.r.ErrAt(en, ep, "%q selected twice (first at line %d); use count for copies", name, line)
		}
		picked[name] = en.Line
		list = append(list, specs[j])
	}
	return list, nil
}

// zooSLO reads a zoo's slo (replacing every model's) or slo_scale
// (scaling each).
func (d *Decoder) zooSLO(m *strictyaml.Map) (slo time.Duration, scale float64, scaleNode *yaml.Node, err error) {
	scale = 1
	if m.Has("slo") && m.Has("slo_scale") {
		return 0, 0, nil, d.r.ErrAt(m.KeyNode("slo_scale"), m.At("slo_scale"), "slo and slo_scale are mutually exclusive (slo replaces every zoo SLO)")
	}
	if v, ok := m.Lookup("slo"); ok {
		if slo, err = d.r.PosDuration(v, m.At("slo")); err != nil {
			return 0, 0, nil, err
		}
	}
	if v, ok := m.Lookup("slo_scale"); ok {
		if scale, scaleNode, err = d.r.Float(v, m.At("slo_scale")); err != nil {
			return 0, 0, nil, err
		}
		if scale <= 0 {
			return 0, 0, nil, d.r.ErrAt(scaleNode, m.At("slo_scale"), "must be positive, got %g", scale)
		}
	}
	return slo, scale, scaleNode, nil
}

// enumField reads a string field holding one of a scheduler enum's names,
// and reports an unknown name at the field's line.
func enumField[T any](r *strictyaml.Reader, v *yaml.Node, key, want string, parse func(string) (T, error)) (T, error) {
	var zero T
	s, n, err := r.Str(v, key, want)
	if err != nil {
		return zero, err
	}
	t, err := parse(s)
	if err != nil {
		return zero, r.ErrAt(n, key, "%v", err)
	}
	return t, nil
}

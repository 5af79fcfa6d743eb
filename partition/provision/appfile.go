package provision

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/symphony-serving/symphony/partition/strictyaml"
	"github.com/symphony-serving/symphony/scheduler/profile"
)

// MaxAppFileSize is the largest application file ParseApp accepts. An
// application lists a handful of modules with tens of profile points; the
// limit keeps a mistaken or hostile input from exhausting memory in the
// YAML parser.
const MaxAppFileSize = 4 << 20

// maxAppFileWork bounds the YAML nodes visited (aliases count each time
// they are followed), so that a small file of aliases cannot make the
// parser work without bound.
const maxAppFileWork = 2_000_000

// maxNameLen bounds hardware and module names.
const maxNameLen = 128

// AppFile is a parsed application file (docs/workload-format.md,
// "Application file"): the application and the planner options it sets.
type AppFile struct {
	// Source is the file as named to ParseAppFile or ParseApp.
	Source string
	App    *App
	// Options are Default() with the file's dispatch, max_configs, dummy
	// and split applied.
	Options Options
}

// ParseAppFile reads and parses the application file at path.
func ParseAppFile(path string) (*AppFile, error) {
	data, err := strictyaml.ReadFile(path, MaxAppFileSize, "provision", "an application file")
	if err != nil {
		return nil, err
	}
	return ParseApp(data, path)
}

// ParseApp parses an application file's contents; source names it in
// errors ("" reads as "app"). Parsing is strict: unknown keys, wrong types,
// non-finite or out-of-range numbers, duplicate names, profiles for unknown
// hardware, edges between unknown modules, cycles and sources without
// ingress are errors, each a *strictyaml.Error naming the line and field.
// The returned application passes App.Validate.
func ParseApp(data []byte, source string) (*AppFile, error) {
	name := source
	if name == "" {
		name = "app"
	}
	root, err := strictyaml.Decode(data, name, MaxAppFileSize, "empty application file (want a YAML mapping with slo, hardware and modules)")
	if err != nil {
		return nil, err
	}
	p := &appParser{Reader: strictyaml.Reader{Source: name, Work: maxAppFileWork}}
	af, err := p.file(root)
	if err != nil {
		return nil, err
	}
	af.Source = source
	if err := af.App.Validate(); err != nil {
		// The checks above cover compile's; this is a backstop, and says
		// which rule of the application as a whole failed.
		return nil, &strictyaml.Error{Source: name, Msg: strings.TrimPrefix(err.Error(), "provision: "), Err: err}
	}
	return af, nil
}

type appParser struct {
	strictyaml.Reader
	// lines remember where names were defined, for errors about what
	// refers to them.
	moduleLine map[string]int
}

var (
	appKeys      = []string{"slo", "hardware", "modules", "edges", "ingress", "dispatch", "max_configs", "dummy", "split"}
	hardwareKeys = []string{"name", "price_per_hour", "memory"}
	moduleKeys   = []string{"name", "kind", "memory", "rate", "profiles"}
	pointKeys    = []string{"batch", "concurrency", "latency", "alpha", "beta", "max_batch", "batches"}
	edgeKeys     = []string{"from", "to", "scale"}
)

func (p *appParser) file(root *yaml.Node) (*AppFile, error) {
	m, err := p.Mapping(root, "", "a mapping of application fields (slo, hardware, modules, ...)", appKeys)
	if err != nil {
		return nil, err
	}
	app := &App{}
	af := &AppFile{App: app, Options: Default()}
	v, err := p.Required(m, "slo", " (the end-to-end latency objective, such as 1.0s)")
	if err != nil {
		return nil, err
	}
	slo, sloNode, err := p.Duration(v, "slo")
	if err != nil {
		return nil, err
	}
	if slo <= 0 || slo > MaxLatency {
		return nil, p.ErrAt(sloNode, "slo", "%v is outside (0, %v]", slo, MaxLatency)
	}
	app.SLO = slo

	v, err = p.Required(m, "hardware", " (a list of {name, price_per_hour})")
	if err != nil {
		return nil, err
	}
	hw, err := p.hardware(v, "hardware")
	if err != nil {
		return nil, err
	}
	app.Hardware = hw

	v, err = p.Required(m, "modules", " (a list of {name, profiles})")
	if err != nil {
		return nil, err
	}
	if app.Modules, err = p.modules(v, "modules", hw); err != nil {
		return nil, err
	}
	if v, ok := m.Lookup("edges"); ok {
		if app.Edges, err = p.edges(v, "edges", app.Modules); err != nil {
			return nil, err
		}
	}
	if v, ok := m.Lookup("ingress"); ok {
		if err := p.ingress(v, "ingress", app.Modules); err != nil {
			return nil, err
		}
	}
	if err := p.checkDAG(m, app); err != nil {
		return nil, err
	}
	if err := p.options(m, &af.Options); err != nil {
		return nil, err
	}
	return af, nil
}

func (p *appParser) hardware(n *yaml.Node, path string) ([]Hardware, error) {
	items, err := p.Seq(n, path, "a list of {name, price_per_hour, memory}")
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, p.ErrAt(n, path, "no hardware kinds; list at least one")
	}
	if len(items) > MaxHardware {
		return nil, p.ErrAt(n, path, "%d hardware kinds, more than %d", len(items), MaxHardware)
	}
	var out []Hardware
	seen := map[string]int{}
	for i, it := range items {
		ip := strictyaml.Index(path, i)
		hm, err := p.Mapping(it, ip, "a mapping {name, price_per_hour, memory}", hardwareKeys)
		if err != nil {
			return nil, err
		}
		v, err := p.Required(hm, "name", "")
		if err != nil {
			return nil, err
		}
		name, nn, err := p.Name(v, hm.At("name"), "hardware name", maxNameLen)
		if err != nil {
			return nil, err
		}
		if line, dup := seen[name]; dup {
			return nil, p.ErrAt(nn, hm.At("name"), "hardware %q listed twice (first at line %d)", name, line)
		}
		seen[name] = nn.Line
		h := Hardware{Name: name}
		if v, err = p.Required(hm, "price_per_hour", " (what one machine costs per hour)"); err != nil {
			return nil, err
		}
		price, pn, err := p.Float(v, hm.At("price_per_hour"))
		if err != nil {
			return nil, err
		}
		if !(price > 0) || price > 1e9 {
			return nil, p.ErrAt(pn, hm.At("price_per_hour"), "%g is not in (0, 1e9]: configurations are ranked by throughput per price", price)
		}
		h.PricePerHour = price
		if v, ok := hm.Lookup("memory"); ok {
			if h.Memory, err = p.Size(v, hm.At("memory"), 1<<50); err != nil {
				return nil, err
			}
		}
		out = append(out, h)
	}
	return out, nil
}

func (p *appParser) modules(n *yaml.Node, path string, hw []Hardware) ([]Module, error) {
	items, err := p.Seq(n, path, "a list of modules")
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, p.ErrAt(n, path, "no modules; list at least one")
	}
	if len(items) > MaxModules {
		return nil, p.ErrAt(n, path, "%d modules, more than %d", len(items), MaxModules)
	}
	p.moduleLine = map[string]int{}
	var out []Module
	for i, it := range items {
		mod, err := p.module(it, strictyaml.Index(path, i), hw)
		if err != nil {
			return nil, err
		}
		out = append(out, mod)
	}
	return out, nil
}

func (p *appParser) module(n *yaml.Node, path string, hw []Hardware) (Module, error) {
	var mod Module
	mm, err := p.Mapping(n, path, "a module mapping {name, kind, profiles}", moduleKeys)
	if err != nil {
		return mod, err
	}
	v, err := p.Required(mm, "name", "")
	if err != nil {
		return mod, err
	}
	name, nn, err := p.Name(v, mm.At("name"), "module name", maxNameLen)
	if err != nil {
		return mod, err
	}
	if line, dup := p.moduleLine[name]; dup {
		return mod, p.ErrAt(nn, mm.At("name"), "module %q listed twice (first at line %d)", name, line)
	}
	p.moduleLine[name] = nn.Line
	mod.Name = name
	if v, ok := mm.Lookup("kind"); ok {
		s, kn, err := p.Str(v, mm.At("kind"), "gpu or cpu")
		if err != nil {
			return mod, err
		}
		if mod.Kind, err = ParseKind(s); err != nil {
			return mod, p.ErrAt(kn, mm.At("kind"), "%v%s", err, strictyaml.Suggest(s, []string{"gpu", "cpu"}))
		}
	}
	if v, ok := mm.Lookup("memory"); ok {
		if mod.Memory, err = p.Size(v, mm.At("memory"), 1<<50); err != nil {
			return mod, err
		}
	}
	if v, ok := mm.Lookup("rate"); ok {
		if mod.Ingress, err = p.FloatIn(v, mm.At("rate"), 0, MaxRate); err != nil {
			return mod, err
		}
	}
	v, err = p.Required(mm, "profiles", " (a mapping from hardware name to profile points)")
	if err != nil {
		return mod, err
	}
	pm, err := p.Mapping(v, mm.At("profiles"), "a mapping from hardware name to a list of profile points", nil)
	if err != nil {
		return mod, err
	}
	keys := pm.Keys()
	if len(keys) == 0 {
		return mod, p.ErrAt(pm.Node, pm.Path, "no profiles; give at least one hardware kind")
	}
	// File order, not map order, so that errors and candidates are
	// deterministic.
	sort.Slice(keys, func(a, b int) bool {
		return pm.KeyNode(keys[a]).Line < pm.KeyNode(keys[b]).Line || pm.KeyNode(keys[a]).Line == pm.KeyNode(keys[b]).Line && pm.KeyNode(keys[a]).Column < pm.KeyNode(keys[b]).Column
	})
	total := 0
	for _, h := range keys {
		kp := pm.At(h)
		found := false
		var names []string
		for _, x := range hw {
			found = found || x.Name == h
			names = append(names, x.Name)
		}
		if !found {
			return mod, p.ErrAt(pm.KeyNode(h), kp, "no hardware named %q%s (hardware lists %s)", h, strictyaml.Suggest(h, names), strings.Join(names, ", "))
		}
		pts, err := p.points(pm.Get(h), kp, mod.Kind)
		if err != nil {
			return mod, err
		}
		total += len(pts)
		if total > MaxConfigsPerModule {
			return mod, p.ErrAt(pm.KeyNode(h), kp, "the module has more than %d profile points", MaxConfigsPerModule)
		}
		mod.Profiles = append(mod.Profiles, Profile{Hardware: h, Points: pts})
	}
	if mod.Memory > 0 && !fitsSomewhere(mod, hw) {
		return mod, p.ErrAt(mm.Get("memory"), mm.At("memory"), "%s per instance fits no profiled concurrency on any hardware kind's memory", strictyaml.FormatSize(mod.Memory))
	}
	return mod, nil
}

// fitsSomewhere reports whether some point of mod fits its hardware's
// memory (the rule candidates applies).
func fitsSomewhere(mod Module, hw []Hardware) bool {
	for _, pr := range mod.Profiles {
		for _, h := range hw {
			if h.Name != pr.Hardware {
				continue
			}
			for _, pt := range pr.Points {
				if h.Memory == 0 || mod.Memory <= h.Memory/int64(pt.Concurrency) {
					return true
				}
			}
		}
	}
	return false
}

// points reads one hardware kind's profile: a list whose entries are
// measured points {batch, concurrency, latency} or linear profiles {alpha,
// beta, max_batch | batches, concurrency}, expanded to one point per batch
// size.
func (p *appParser) points(n *yaml.Node, path string, kind Kind) ([]Point, error) {
	items, err := p.Seq(n, path, "a list of profile points {batch, latency} or {alpha, beta, max_batch}")
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, p.ErrAt(n, path, "no profile points")
	}
	var out []Point
	seen := map[[2]int]int{}
	add := func(pt Point, node *yaml.Node, ip string) error {
		k := [2]int{pt.Batch, pt.Concurrency}
		if line, dup := seen[k]; dup {
			return p.ErrAt(node, ip, "batch %d at concurrency %d profiled twice (first at line %d)", pt.Batch, pt.Concurrency, line)
		}
		if kind == CPU && pt.Batch != 1 {
			return p.ErrAt(node, ip, "batch %d: a cpu module runs one input at a time (batch 1)", pt.Batch)
		}
		if len(out) >= MaxConfigsPerModule {
			return p.ErrAt(node, ip, "more than %d profile points", MaxConfigsPerModule)
		}
		seen[k] = node.Line
		out = append(out, pt)
		return nil
	}
	for i, it := range items {
		ip := strictyaml.Index(path, i)
		em, err := p.Mapping(it, ip, "a profile point {batch, latency} or {alpha, beta, max_batch}", pointKeys)
		if err != nil {
			return nil, err
		}
		conc := 1
		if v, ok := em.Lookup("concurrency"); ok {
			if conc, err = p.IntIn(v, em.At("concurrency"), 1, MaxConcurrency); err != nil {
				return nil, err
			}
		}
		linear := em.Has("alpha") || em.Has("beta")
		if !linear {
			for _, k := range []string{"max_batch", "batches"} {
				if em.Has(k) {
					return nil, p.ErrAt(em.KeyNode(k), em.At(k), "%s belongs to a linear profile {alpha, beta}; a measured point gives batch and latency", k)
				}
			}
			v, err := p.Required(em, "batch", " (or alpha and beta for a linear profile)")
			if err != nil {
				return nil, err
			}
			b, err := p.IntIn(v, em.At("batch"), 1, MaxBatch)
			if err != nil {
				return nil, err
			}
			if v, err = p.Required(em, "latency", " (one batch's execution time, such as 40ms)"); err != nil {
				return nil, err
			}
			lat, err := p.PosDuration(v, em.At("latency"))
			if err != nil {
				return nil, err
			}
			if lat > MaxLatency {
				return nil, p.ErrAt(v, em.At("latency"), "%v is longer than %v", lat, MaxLatency)
			}
			if err := add(Point{Batch: b, Concurrency: conc, Latency: lat}, em.Node, ip); err != nil {
				return nil, err
			}
			continue
		}
		for _, k := range []string{"batch", "latency"} {
			if em.Has(k) {
				return nil, p.ErrAt(em.KeyNode(k), em.At(k), "a linear profile {alpha, beta} gives no %s; list a measured point separately", k)
			}
		}
		var alpha, beta time.Duration
		for _, f := range []struct {
			key string
			dst *time.Duration
		}{{"alpha", &alpha}, {"beta", &beta}} {
			v, err := p.Required(em, f.key, " (a linear profile needs alpha and beta: latency = alpha·batch + beta)")
			if err != nil {
				return nil, err
			}
			if *f.dst, err = p.NonNegDuration(v, em.At(f.key)); err != nil {
				return nil, err
			}
			// Bounded here, alpha·max_batch + beta cannot overflow below.
			if *f.dst > MaxLatency {
				return nil, p.ErrAt(v, em.At(f.key), "%v is longer than %v", *f.dst, MaxLatency)
			}
		}
		if em.Has("max_batch") && em.Has("batches") {
			return nil, p.ErrAt(em.KeyNode("batches"), em.At("batches"), "give max_batch (batches 1..max_batch) or batches (a list), not both")
		}
		maxBatch := profile.DefaultMaxBatch
		var batches []int
		if v, ok := em.Lookup("max_batch"); ok {
			if maxBatch, err = p.IntIn(v, em.At("max_batch"), 1, MaxBatch); err != nil {
				return nil, err
			}
		}
		if v, ok := em.Lookup("batches"); ok {
			bs, err := p.Seq(v, em.At("batches"), "a list of batch sizes")
			if err != nil {
				return nil, err
			}
			if len(bs) == 0 {
				return nil, p.ErrAt(v, em.At("batches"), "no batch sizes")
			}
			maxBatch = 0
			for j, bn := range bs {
				b, err := p.IntIn(bn, strictyaml.Index(em.At("batches"), j), 1, MaxBatch)
				if err != nil {
					return nil, err
				}
				batches = append(batches, b)
				maxBatch = max(maxBatch, b)
			}
		} else {
			for b := 1; b <= maxBatch; b++ {
				batches = append(batches, b)
			}
		}
		prof, err := profile.Linear(alpha, beta, maxBatch)
		if err != nil {
			return nil, p.ErrAt(em.Node, ip, "%s", strings.TrimPrefix(err.Error(), "profile: "))
		}
		if prof.Latency(maxBatch) > MaxLatency {
			return nil, p.ErrAt(em.Node, ip, "a batch of %d takes %v, longer than %v", maxBatch, prof.Latency(maxBatch), MaxLatency)
		}
		for _, b := range batches {
			if err := add(Point{Batch: b, Concurrency: conc, Latency: prof.Latency(b)}, em.Node, ip); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func (p *appParser) edges(n *yaml.Node, path string, mods []Module) ([]Edge, error) {
	items, err := p.Seq(n, path, "a list of {from, to, scale}")
	if err != nil {
		return nil, err
	}
	if len(items) > MaxModules*MaxModules {
		return nil, p.ErrAt(n, path, "%d edges, more than %d", len(items), MaxModules*MaxModules)
	}
	var out []Edge
	seen := map[[2]string]int{}
	for i, it := range items {
		ip := strictyaml.Index(path, i)
		em, err := p.Mapping(it, ip, "an edge {from, to, scale}", edgeKeys)
		if err != nil {
			return nil, err
		}
		var ends [2]string
		for j, k := range []string{"from", "to"} {
			v, err := p.Required(em, k, "")
			if err != nil {
				return nil, err
			}
			s, sn, err := p.Str(v, em.At(k), "a module name")
			if err != nil {
				return nil, err
			}
			if _, ok := p.moduleLine[s]; !ok {
				return nil, p.ErrAt(sn, em.At(k), "no module named %q%s", s, strictyaml.Suggest(s, moduleNames(mods)))
			}
			ends[j] = s
		}
		if ends[0] == ends[1] {
			return nil, p.ErrAt(em.Node, ip, "module %s feeds itself", ends[0])
		}
		if line, dup := seen[ends]; dup {
			return nil, p.ErrAt(em.Node, ip, "edge %s -> %s listed twice (first at line %d)", ends[0], ends[1], line)
		}
		seen[ends] = em.Node.Line
		e := Edge{From: ends[0], To: ends[1], Scale: 1}
		if v, ok := em.Lookup("scale"); ok {
			s, sn, err := p.Float(v, em.At("scale"))
			if err != nil {
				return nil, err
			}
			if !(s > 0) || s > 1e6 {
				return nil, p.ErrAt(sn, em.At("scale"), "%g is not in (0, 1e6]", s)
			}
			e.Scale = s
		}
		out = append(out, e)
	}
	return out, nil
}

func moduleNames(mods []Module) []string {
	out := make([]string, len(mods))
	for i, m := range mods {
		out[i] = m.Name
	}
	return out
}

// ingress reads {module: rate}; a module may get its ingress here or from
// its own rate key, not both.
func (p *appParser) ingress(n *yaml.Node, path string, mods []Module) error {
	im, err := p.Mapping(n, path, "a mapping from module name to requests per second", nil)
	if err != nil {
		return err
	}
	for _, name := range im.Keys() {
		kp := im.At(name)
		idx := -1
		for i, m := range mods {
			if m.Name == name {
				idx = i
			}
		}
		if idx < 0 {
			return p.ErrAt(im.KeyNode(name), kp, "no module named %q%s", name, strictyaml.Suggest(name, moduleNames(mods)))
		}
		if mods[idx].Ingress != 0 {
			return p.ErrAt(im.KeyNode(name), kp, "module %s also gives rate (line %d); give its ingress once", name, p.moduleLine[name])
		}
		r, err := p.FloatIn(im.Get(name), kp, 0, MaxRate)
		if err != nil {
			return err
		}
		mods[idx].Ingress = r
	}
	return nil
}

// checkDAG reports a cycle, a source without ingress, or a module whose
// rate overflows, at the line of a module involved.
func (p *appParser) checkDAG(m *strictyaml.Map, app *App) error {
	idx := map[string]int{}
	for i, mod := range app.Modules {
		idx[mod.Name] = i
	}
	n := len(app.Modules)
	parents := make([][]int, n)
	for _, e := range app.Edges {
		parents[idx[e.To]] = append(parents[idx[e.To]], idx[e.From])
	}
	// Depth-first search for a cycle, colouring 1 = on the stack.
	color := make([]int, n)
	var stack []int
	var visit func(v int) []int
	visit = func(v int) []int {
		color[v] = 1
		stack = append(stack, v)
		for _, u := range parents[v] {
			if color[u] == 1 {
				for k, w := range stack {
					if w == u {
						return append([]int(nil), stack[k:]...)
					}
				}
			}
			if color[u] == 0 {
				if c := visit(u); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[v] = 2
		return nil
	}
	for v := 0; v < n; v++ {
		if color[v] == 0 {
			if cyc := visit(v); cyc != nil {
				var names []string
				for k := len(cyc) - 1; k >= 0; k-- {
					names = append(names, app.Modules[cyc[k]].Name)
				}
				names = append(names, names[0])
				return p.ErrAt(m.Get("edges"), "edges", "the edges form a cycle: %s", strings.Join(names, " -> "))
			}
		}
	}
	for i, mod := range app.Modules {
		if len(parents[i]) == 0 && mod.Ingress <= 0 {
			return &strictyaml.Error{Source: p.Source, Line: p.moduleLine[mod.Name], Field: "ingress",
				Msg: fmt.Sprintf("module %s has no incoming edge, so it is a source, and needs a positive ingress (ingress: {%s: RATE} or rate on the module)", mod.Name, mod.Name)}
		}
	}
	// Rates: ingress plus the parents' rates times the edges' scales.
	scale := map[[2]int]float64{}
	for _, e := range app.Edges {
		scale[[2]int{idx[e.From], idx[e.To]}] = e.Scale
	}
	rate := make([]float64, n)
	done := make([]bool, n)
	var rateOf func(v int) float64
	rateOf = func(v int) float64 {
		if !done[v] {
			r := app.Modules[v].Ingress
			for _, u := range parents[v] {
				r += rateOf(u) * scale[[2]int{u, v}]
			}
			rate[v], done[v] = r, true
		}
		return rate[v]
	}
	for i, mod := range app.Modules {
		if r := rateOf(i); !(r <= MaxRate) {
			return &strictyaml.Error{Source: p.Source, Line: p.moduleLine[mod.Name], Field: strictyaml.Index("modules", i),
				Msg: fmt.Sprintf("module %s: its rate (ingress plus its parents' rates times the edges' scales) is %g, over %g", mod.Name, r, MaxRate)}
		}
	}
	return nil
}

func (p *appParser) options(m *strictyaml.Map, o *Options) error {
	var err error
	if v, ok := m.Lookup("dispatch"); ok {
		s, sn, err := p.Str(v, "dispatch", "a dispatch model")
		if err != nil {
			return err
		}
		if o.Dispatch, err = ParseDispatch(s); err != nil {
			return p.ErrAt(sn, "dispatch", "%v%s", err, strictyaml.Suggest(s, []string{"batch-aware", "machine-throughput", "round-robin"}))
		}
	}
	if v, ok := m.Lookup("max_configs"); ok {
		if o.MaxConfigs, err = p.IntIn(v, "max_configs", 0, MaxConfigsPerModule); err != nil {
			return err
		}
	}
	if v, ok := m.Lookup("dummy"); ok {
		if o.Dummy, err = p.Bool(v, "dummy"); err != nil {
			return err
		}
	}
	if v, ok := m.Lookup("split"); ok {
		s, sn, err := p.Str(v, "split", "a split method")
		if err != nil {
			return err
		}
		if o.Split, err = ParseSplit(s); err != nil {
			return p.ErrAt(sn, "split", "%v", err)
		}
	}
	return nil
}

package provision

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Options are the planner's choices. Default() is Harpagon's full design;
// the baselines (Baseline.Options) switch parts of it off.
type Options struct {
	// Dispatch is the worst-case latency model.
	Dispatch Dispatch
	// MaxConfigs bounds the distinct configurations of a module; 0 means
	// any number.
	MaxConfigs int
	// Dummy enables the dummy generator.
	Dummy bool
	// Split is how the SLO is split into module budgets.
	Split Split
	// NodeMerge lets the latency-cost split also try siblings (modules with
	// the same parents and children) as one unit.
	NodeMerge bool
	// CostDirect is R: the latency-cost split also tries replacing its last
	// 1..R moves by cost-greedy ones. 0 disables it.
	CostDirect int
	// Reassign enables the latency reassigner: the slack each path leaves
	// goes back to the modules that can turn it into a saving.
	Reassign bool
	// SingleHardware runs every GPU module on one and the same hardware
	// kind (the cheapest such provision wins), for baselines without
	// heterogeneity; CPU modules keep their own machines.
	SingleHardware bool
	// Search is how many greedy leaves the module scheduler may visit when
	// Algorithm 1's first pass finds no provision (see modSched.greedy).
	Search int
	// ModuleNodes is the node budget of the branch-and-bound that refines
	// each module provision the heuristics produce (Algorithm 1, dummies); 0
	// keeps the heuristics' provisions.
	ModuleNodes int
	// SplitOverModules makes the latency-cost split also run over the module
	// scheduler's provisions (their real latencies and costs) besides the
	// papers' single configurations.
	SplitOverModules bool
}

// Default returns Harpagon's design: batch-aware dispatch, any number of
// configurations, dummy requests, the latency-cost split with node merging
// and cost-direct over the last 3 moves, and latency reassignment.
func Default() Options {
	return Options{
		Dispatch:         BatchAware,
		Dummy:            true,
		Split:            Split{Kind: LatencyCost},
		NodeMerge:        true,
		CostDirect:       3,
		Reassign:         true,
		Search:           64,
		ModuleNodes:      5000,
		SplitOverModules: true,
	}
}

// Validate checks the options' ranges.
func (o Options) Validate() error {
	switch {
	case o.Dispatch < BatchAware || o.Dispatch > RoundRobin:
		return fmt.Errorf("provision: unknown dispatch %d", int(o.Dispatch))
	case o.MaxConfigs < 0 || o.MaxConfigs > MaxConfigsPerModule:
		return fmt.Errorf("provision: max_configs %d is outside 0..%d", o.MaxConfigs, MaxConfigsPerModule)
	case o.Split.Kind < LatencyCost || o.Split.Kind > Quantized:
		return fmt.Errorf("provision: unknown split %d", int(o.Split.Kind))
	case o.Split.Step < 0:
		return fmt.Errorf("provision: negative quantized step %v", o.Split.Step)
	case o.CostDirect < 0 || o.CostDirect > 1000:
		return fmt.Errorf("provision: cost-direct R %d is outside 0..1000", o.CostDirect)
	case o.Search < 0 || o.Search > 1_000_000:
		return fmt.Errorf("provision: search %d is outside 0..1000000", o.Search)
	case o.ModuleNodes < 0 || o.ModuleNodes > 100_000_000:
		return fmt.Errorf("provision: module nodes %d is outside 0..100000000", o.ModuleNodes)
	}
	return nil
}

// ErrInfeasible is returned when no provision meets the SLO.
var ErrInfeasible = errors.New("provision: no provision meets the SLO")

// Provision is the planner's answer.
type Provision struct {
	// Planner names what produced the provision: "symphony", a baseline,
	// "brute-force" or "scrooge-milp".
	Planner string
	Options Options
	// SLO is the application's.
	SLO time.Duration
	// CostPerHour is the sum over modules; partial machines count by their
	// occupancy (frame-rate proportionality).
	CostPerHour float64
	Modules     []ModuleProvision
	// Paths are the source-to-sink paths, up to MaxReportedPaths of them;
	// PathsOmitted counts the rest.
	Paths        []PathLatency
	PathsOmitted bool
	// Notes say what the planner wants the reader to know (a search cut
	// short, a variant that won).
	Notes []string
}

// MaxReportedPaths bounds Provision.Paths: a DAG may have exponentially many.
const MaxReportedPaths = 1000

// ModuleProvision is one module's part of a provision.
type ModuleProvision struct {
	Name string
	Kind Kind
	// Rate is the module's real request rate; DummyRate the dummy requests
	// added to it. Dummies raise the rate every earlier configuration
	// collects its batches at, wherever they go; they are booked on the
	// configurations dispatched last, each holding at most its own rate.
	Rate      float64
	DummyRate float64
	// Budget is the module's latency budget: every configuration meets it,
	// and the budgets of every path sum to at most the SLO.
	Budget time.Duration
	// WorstCase is the largest worst-case latency of the module's machines.
	WorstCase   time.Duration
	CostPerHour float64
	// Configs are in dispatch order; only the last may have a fractional
	// machine count.
	Configs []ConfigProvision
}

// ConfigProvision is one configuration of a module's provision: Machines machines of
// one hardware kind at one batch size and concurrency.
type ConfigProvision struct {
	Hardware    string
	Batch       int
	Concurrency int
	// Latency is the profiled execution time of one batch.
	Latency time.Duration
	// Throughput is one machine's requests per second, Batch ·
	// Concurrency / Latency.
	Throughput float64
	// Machines counts the machines; on the last configuration it may be
	// fractional: its last machine is partial, charged by occupancy.
	Machines float64
	// Rate is the requests per second the configuration is assigned,
	// DummyRate of them dummies.
	Rate      float64
	DummyRate float64
	// Remaining is w of Theorem 1: this configuration's rate plus that of
	// every configuration dispatched after it.
	Remaining float64
	// WorstCase is the largest worst-case latency of its machines.
	WorstCase   time.Duration
	CostPerHour float64
}

// PathLatency is one source-to-sink path.
type PathLatency struct {
	Modules []string
	// WorstCase sums the modules' worst cases; Budget their budgets.
	WorstCase time.Duration
	Budget    time.Duration
}

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * float64(time.Second))) }

// Solve provisions app with options o; the Provision is named "symphony" (callers
// may rename it). It returns an error wrapping ErrInfeasible when no provision
// within the SLO is found.
func Solve(app *App, o Options) (*Provision, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	in, err := compile(app)
	if err != nil {
		return nil, err
	}
	return solve(in, o, "symphony")
}

func solve(in *instance, o Options, name string) (*Provision, error) {
	var best *solution
	var notes []string
	if o.SingleHardware {
		for h := range in.hw {
			cs := restrict(in, h)
			if cs == nil {
				continue
			}
			s, n := solveWith(in, cs, o)
			notes = append(notes, n...)
			if s != nil && (best == nil || s.cost < best.cost-1e-9*math.Max(1, best.cost)) {
				best = s
			}
		}
	} else {
		best, notes = solveWith(in, in.cands, o)
	}
	if best == nil {
		// Say so when no planner could: the fastest executions alone
		// overrun the SLO on some path.
		why := ""
		lo := maxLatencies(in, in.cands)
		for m := range lo {
			// Every worst case exceeds its execution time.
			if least := in.slo - lo[m] + minExec(in.cands[m]); least >= in.slo {
				why = fmt.Sprintf("; a path through %s needs at least %v (its modules' fastest executions alone), over the SLO %v", in.names[m], seconds(least), in.app.SLO)
				break
			}
		}
		return nil, fmt.Errorf("%w (%s, %v dispatch, split %v)%s", ErrInfeasible, name, o.Dispatch, o.Split, why)
	}
	p := best.provision(in, o, name)
	p.Notes = append(p.Notes, notes...)
	return p, nil
}

// restrict returns the candidates of a provision on one hardware kind h: every
// GPU module only on h, CPU modules on whatever runs them (a "homogeneous"
// cluster of the papers' baselines still decodes video on CPU machines). In
// an application without GPU modules every module is restricted. It
// returns nil when some restricted module cannot run on h.
func restrict(in *instance, h int) [][]cand {
	anyGPU := false
	for _, m := range in.app.Modules {
		anyGPU = anyGPU || m.Kind == GPU
	}
	out := make([][]cand, len(in.cands))
	for m, cs := range in.cands {
		if anyGPU && in.app.Modules[m].Kind == CPU {
			out[m] = cs
			continue
		}
		for _, c := range cs {
			if c.hw == h {
				out[m] = append(out[m], c)
			}
		}
		if out[m] == nil {
			return nil
		}
	}
	return out
}

// solution is a provision under construction: one module provision per module.
type solution struct {
	cs    [][]cand
	disp  Dispatch
	mods  []*modProv
	cost  float64
	label string
}

// provCache remembers module provisions by (module, budget), since the split
// variants often ask for the same budgets.
type provCache struct {
	scheds []*modSched
	rate   []float64
	memo   map[cacheKey]*modProv
	fronts map[int]frontier
}

type cacheKey struct {
	m int
	L float64
}

// maxFrontPoints bounds the provisions per module the provision-level splitter
// weighs, and frontNodes the branch-and-bound nodes spent on each: the
// frontier only steers the split, and the final budgets' provisions get the
// full ModuleNodes. With 64 and 100 the planner is as often optimal on the
// random instances as with 256 and 20000, at a fraction of the time.
const (
	maxFrontPoints = 64
	frontNodes     = 100
)

// front is module m's frontier of provisions as the module scheduler makes them:
// its provision within maxLat, then its provision strictly faster than that one, and
// so on, up to maxFrontPoints.
func (pc *provCache) front(m int, maxLat float64) frontier {
	if f, ok := pc.fronts[m]; ok {
		return f
	}
	var f frontier
	lam := maxLat
	fs := *pc.scheds[m]
	fs.nodes = min(fs.nodes, frontNodes)
	fs.buf = nil
	for i := 0; i < maxFrontPoints; i++ {
		p := fs.schedule(pc.rate[m], lam)
		if !p.ok() {
			break
		}
		f = f.add(frontPoint{lat: p.lat, cost: p.cost, tiers: p.tiers})
		lam = p.lat - 2*eps
	}
	pc.fronts[m] = f
	return f
}

// maxLatencies bounds each module's worst case: the SLO less the least
// execution time of the other modules on the longest path through it.
func maxLatencies(in *instance, cs [][]cand) []float64 {
	minD := make([]float64, len(cs))
	for m := range minD {
		minD[m] = math.Inf(1)
		for i := range cs[m] {
			minD[m] = math.Min(minD[m], cs[m][i].d)
		}
	}
	through := longestThrough(in, func(m int) float64 { return minD[m] })
	out := make([]float64, len(cs))
	for m := range out {
		out[m] = in.slo - (through[m] - minD[m])
	}
	return out
}

// minExec is the least execution time of cs, seconds.
func minExec(cs []cand) float64 {
	d := math.Inf(1)
	for i := range cs {
		d = math.Min(d, cs[i].d)
	}
	return d
}

// get is module m's provision within budget L (seconds), nil when it has none.
func (pc *provCache) get(m int, L float64) *modProv {
	k := cacheKey{m, L}
	if p, ok := pc.memo[k]; ok {
		return p
	}
	p := pc.scheds[m].schedule(pc.rate[m], L)
	pc.memo[k] = p
	return p
}

// solveWith runs the pipeline on candidates cs and returns the cheapest
// solution over the split variants, with notes.
func solveWith(in *instance, cs [][]cand, o Options) (*solution, []string) {
	n := len(in.names)
	pc := &provCache{scheds: make([]*modSched, n), rate: in.rate, memo: map[cacheKey]*modProv{}, fronts: map[int]frontier{}}
	for m := range pc.scheds {
		pc.scheds[m] = &modSched{cs: cs[m], disp: o.Dispatch, maxConfigs: o.MaxConfigs, dummy: o.Dummy, search: o.Search, nodes: o.ModuleNodes}
	}
	type variant struct {
		budgets []float64
		label   string
	}
	var variants []variant
	var notes []string
	addStates := func(sp *splitter, st []int, label string) {
		if st == nil {
			return
		}
		variants = append(variants, variant{sp.budgets(st, true), label + ", scaled"}, variant{sp.budgets(st, false), label})
	}
	switch o.Split.Kind {
	case LatencyCost:
		merges := []bool{false}
		if o.NodeMerge && len(units(in, true)) < n {
			merges = append(merges, true)
		}
		family := func(sp *splitter, label string, exchange bool) {
			st, moves := sp.latencyCost()
			addStates(sp, st, label)
			if exchange && st != nil {
				addStates(sp, sp.exchange(st), label+", exchange")
			}
			for r := 1; r <= o.CostDirect && r <= len(moves); r++ {
				cd := sp.costDirect(moves, r)
				addStates(sp, cd, fmt.Sprintf("%s, cost-direct R=%d", label, r))
				if exchange {
					addStates(sp, sp.exchange(cd), fmt.Sprintf("%s, cost-direct R=%d, exchange", label, r))
				}
			}
			if sp.exchangeCut {
				notes = append(notes, fmt.Sprintf("the %s exchange search stopped at its work limit (%d module visits); the best so far is used", label, maxExchangeWork))
			}
		}
		for _, merge := range merges {
			suffix := ""
			if merge {
				suffix = "+merge"
			}
			family(configSplitter(in, cs, o.Dispatch, merge), "latency-cost"+suffix, false)
		}
		if o.SplitOverModules {
			fronts := make([]frontier, n)
			maxLat := maxLatencies(in, cs)
			ok := true
			for m := 0; m < n && ok; m++ {
				fronts[m] = pc.front(m, maxLat[m])
				ok = len(fronts[m]) > 0
			}
			if ok {
				for _, merge := range merges {
					suffix := ""
					if merge {
						suffix = "+merge"
					}
					family(pointSplitter(in, fronts, merge), "latency-cost over module provisions"+suffix, true)
				}
			}
		}
	case Throughput:
		sp := configSplitter(in, cs, o.Dispatch, false)
		addStates(sp, sp.throughput(), "throughput")
	case Even:
		variants = append(variants, variant{evenBudgets(in), "even"})
	case Quantized:
		step := o.Split.Step.Seconds()
		if step <= 0 {
			step = in.slo / 10
		}
		if in.slo/step > maxQuantizedLevels {
			step = in.slo / maxQuantizedLevels
			notes = append(notes, fmt.Sprintf("quantized step %v is below SLO/%d; used %v", o.Split.Step, maxQuantizedLevels, seconds(step)))
		}
		b, cut := quantized(in, step, func(m int, L float64) (float64, bool) {
			p := pc.get(m, L)
			if !p.ok() {
				return 0, false
			}
			return p.cost, true
		})
		if cut {
			notes = append(notes, fmt.Sprintf("quantized split stopped after %d budget combinations; the best so far is used", maxQuantizedWork))
		}
		if b != nil {
			variants = append(variants, variant{b, "quantized"})
		}
	}
	var best *solution
	for _, v := range variants {
		s := &solution{cs: cs, disp: o.Dispatch, mods: make([]*modProv, n), label: v.label}
		ok := true
		for m := 0; m < n && ok; m++ {
			s.mods[m] = pc.get(m, v.budgets[m])
			ok = s.mods[m].ok()
		}
		if !ok {
			continue
		}
		if o.Reassign {
			reassign(in, pc, s)
		}
		s.cost = 0
		for _, p := range s.mods {
			s.cost += p.cost
		}
		if best == nil || s.cost < best.cost-1e-9*math.Max(1, best.cost) {
			best = s
		}
	}
	return best, notes
}

// reassign is the latency reassigner (Harpagon §III-C, Piccolo §III-C): a
// module's provision often finishes under its budget, and the gap, summed along
// a path, is budget no module uses. For every module it computes the most
// latency it could have with the others at their realized worst cases (the
// SLO minus the longest path through it without it), re-provisions the module
// (whole, and its residual workload alone behind its majority tier) at that
// budget, and applies the largest saving; then again, until nothing saves.
func reassign(in *instance, pc *provCache, s *solution) {
	n := len(in.names)
	lat := func(m int) float64 { return s.mods[m].lat }
	for iter := 0; iter < 4*n+4; iter++ {
		through := longestThrough(in, lat)
		bestM, bestSave := -1, 0.0
		var bestProv *modProv
		for m := 0; m < n; m++ {
			cur := s.mods[m]
			maxL := in.slo - (through[m] - cur.lat)
			if maxL <= cur.lat+eps {
				continue
			}
			// Round down to a nanosecond, so that the budget is a
			// time.Duration the provision can state and recheck.
			maxL = math.Floor(maxL*1e9) / 1e9
			q := pc.get(m, maxL)
			if r := pc.scheds[m].residual(cur, in.rate[m], maxL); better(r, q) {
				q = r
			}
			if !q.ok() {
				continue
			}
			if save := cur.cost - q.cost; save > bestSave+1e-9*math.Max(1, cur.cost) {
				bestM, bestSave, bestProv = m, save, q
			}
		}
		if bestM < 0 {
			return
		}
		s.mods[bestM] = bestProv
	}
}

// provision turns a solution into a Provision: budgets that share each path's slack
// in proportion to the modules' worst cases, configurations in dispatch
// order, path latencies.
func (s *solution) provision(in *instance, o Options, name string) *Provision {
	n := len(in.names)
	lats := make([]float64, n)
	for m, p := range s.mods {
		lats[m] = p.lat
	}
	budgets := finalBudgets(in, lats)
	p := &Provision{Planner: name, Options: o, SLO: in.app.SLO}
	for m, mp := range s.mods {
		p.Modules = append(p.Modules, moduleProvision(in, s.cs[m], s.disp, m, mp, budgets[m]))
		p.CostPerHour += mp.cost
	}
	p.Paths, p.PathsOmitted = pathLatencies(in, p.Modules)
	if s.label != "" {
		p.Notes = append(p.Notes, "budgets from the "+s.label+" split")
	}
	return p
}

// finalBudgets gives every module its worst case stretched by SLO over the
// longest worst-case path through it, rounded to a nanosecond (and never
// below the worst case): every budget holds its module's worst case and
// every path's budgets sum to the SLO or less, within a nanosecond per
// module.
func finalBudgets(in *instance, lats []float64) []time.Duration {
	through := longestThrough(in, func(m int) float64 { return lats[m] })
	out := make([]time.Duration, len(lats))
	for m, l := range lats {
		b := l
		if through[m] > 0 && through[m] <= in.slo+eps {
			b = l * math.Min(in.slo/through[m], 1e9)
		}
		d, w := seconds(b), seconds(l)
		if d < w {
			d = w
		}
		out[m] = d
	}
	return out
}

func moduleProvision(in *instance, cs []cand, disp Dispatch, m int, mp *modProv, budget time.Duration) ModuleProvision {
	out := ModuleProvision{
		Name: in.names[m], Kind: in.app.Modules[m].Kind, Rate: in.rate[m],
		DummyRate: math.Max(0, mp.total-in.rate[m]),
		Budget:    budget, WorstCase: seconds(mp.lat), CostPerHour: mp.cost,
	}
	if out.DummyRate < 1e-9*math.Max(1, in.rate[m]) {
		out.DummyRate = 0
	}
	full, part := tierLatencies(cs, disp, mp.tiers)
	w := remaining(cs, mp.tiers)
	for i, t := range mp.tiers {
		c := &cs[t.c]
		cp := ConfigProvision{
			Hardware: in.hw[c.hw].Name, Batch: c.batch, Concurrency: c.conc, Latency: c.latency,
			Throughput: c.tput, Machines: t.machines(cs), Rate: t.rate(cs), Remaining: w[i],
			WorstCase: seconds(math.Max(full[i], part[i])), CostPerHour: c.price * t.machines(cs),
		}
		out.Configs = append(out.Configs, cp)
	}
	// A provision of the branch-and-bound may top up a configuration that is
	// not the last (more dummies than the last one's rate): book them
	// from the last configuration backwards.
	left := out.DummyRate
	for i := len(out.Configs) - 1; i >= 0 && left > 0; i-- {
		d := math.Min(left, out.Configs[i].Rate)
		if i == 0 {
			d = left
		}
		out.Configs[i].DummyRate = d
		left -= d
	}
	return out
}

func pathLatencies(in *instance, mods []ModuleProvision) ([]PathLatency, bool) {
	idx := in.paths(MaxReportedPaths)
	more := len(idx) > MaxReportedPaths
	if more {
		idx = idx[:MaxReportedPaths]
	}
	out := make([]PathLatency, 0, len(idx))
	for _, path := range idx {
		var pl PathLatency
		for _, m := range path {
			pl.Modules = append(pl.Modules, in.names[m])
			pl.WorstCase += mods[m].WorstCase
			pl.Budget += mods[m].Budget
		}
		out = append(out, pl)
	}
	return out, more
}

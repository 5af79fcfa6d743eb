package provision

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// RandomConfig shapes the random instances of the comparison experiment
// (Harpagon §IV: workloads of 1-4 module applications on heterogeneous
// hardware). DefaultRandom matches the acceptance criteria: DAGs of 1-4
// modules, 2-3 hardware kinds, profiles shaped like the papers' tables.
type RandomConfig struct {
	MinModules, MaxModules   int
	MinHardware, MaxHardware int
	// Points is the number of batch sizes profiled per hardware kind, as in
	// the papers' tables (three).
	MinPoints, MaxPoints int
	// MinRate and MaxRate bound the source's ingress (req/s).
	MinRate, MaxRate float64
	// MaxMachines bounds a module's rate in machines of its fastest
	// configuration, which keeps the brute force tractable.
	MaxMachines float64
	// ConcurrencyShare is the chance that a GPU module's profile also has
	// points at concurrency 2 (Scrooge's spatial multiplexing); CPUShare
	// the chance that a module is a CPU module.
	ConcurrencyShare float64
	CPUShare         float64
	// MinSlack and MaxSlack bound the SLO as a multiple of the fastest
	// possible path under round-robin dispatch, so that every baseline
	// can meet it.
	MinSlack, MaxSlack float64
}

// DefaultRandom returns the experiment's instance shape.
func DefaultRandom() RandomConfig {
	return RandomConfig{
		MinModules: 1, MaxModules: 4,
		MinHardware: 2, MaxHardware: 3,
		MinPoints: 3, MaxPoints: 3,
		MinRate: 20, MaxRate: 200,
		MaxMachines:      12,
		ConcurrencyShare: 0.25,
		CPUShare:         0.1,
		MinSlack:         1.3, MaxSlack: 3,
	}
}

// Validate checks the ranges.
func (c RandomConfig) Validate() error {
	switch {
	case c.MinModules < 1 || c.MaxModules < c.MinModules || c.MaxModules > MaxModules:
		return fmt.Errorf("provision: random modules %d..%d", c.MinModules, c.MaxModules)
	case c.MinHardware < 1 || c.MaxHardware < c.MinHardware || c.MaxHardware > 26:
		return fmt.Errorf("provision: random hardware kinds %d..%d", c.MinHardware, c.MaxHardware)
	case c.MinPoints < 1 || c.MaxPoints < c.MinPoints || c.MaxPoints > 8:
		return fmt.Errorf("provision: random points %d..%d", c.MinPoints, c.MaxPoints)
	case !(c.MinRate > 0) || c.MaxRate < c.MinRate || c.MaxRate > 1e6:
		return fmt.Errorf("provision: random rates %v..%v", c.MinRate, c.MaxRate)
	case !(c.MaxMachines >= 1):
		return fmt.Errorf("provision: random max machines %v", c.MaxMachines)
	case c.ConcurrencyShare < 0 || c.ConcurrencyShare > 1 || c.CPUShare < 0 || c.CPUShare > 1:
		return fmt.Errorf("provision: random shares %v, %v", c.ConcurrencyShare, c.CPUShare)
	case !(c.MinSlack >= 1) || c.MaxSlack < c.MinSlack:
		return fmt.Errorf("provision: random slack %v..%v", c.MinSlack, c.MaxSlack)
	}
	return nil
}

// Random returns instance number i of the series seeded by seed; the same
// (seed, i) always gives the same application.
//
// Hardware kinds have a speed s in [1, 3] and a price that grows with it,
// s^0.8 within ±30%, so that no kind is cheapest per request for every
// module. A module's batch latency is d(b) = (β + α·b^1.1)/s^κ with β in
// [40, 200] ms, α in [5, 40] ms and a sensitivity κ in [0.5, 1.2] to the
// hardware's speed, at three batch sizes from a geometric series (2, 4, 8;
// 2, 8, 32; 5, 20, 80 ...) like Harpagon's and Piccolo's Table I. Some GPU
// modules also run two batches at once (1.5-1.9 times the latency), some
// modules are CPU modules (batch 1, concurrency 1-4). The DAG is a random
// one over 1-4 modules: each module after the first gets one or two
// parents, edges scale by 0.5-3. The SLO is 1.3-3 times the fastest path
// under round-robin dispatch.
func (c RandomConfig) Random(seed uint64, i int) *App {
	rng := rand.New(rand.NewPCG(seed, uint64(i)*0x9e3779b97f4a7c15+1))
	uniform := func(lo, hi float64) float64 { return lo + (hi-lo)*rng.Float64() }
	between := func(lo, hi int) int { return lo + rng.IntN(hi-lo+1) }

	app := &App{}
	nh := between(c.MinHardware, c.MaxHardware)
	speed := make([]float64, nh)
	for h := 0; h < nh; h++ {
		speed[h] = uniform(1, 3)
		price := math.Pow(speed[h], 0.8) * uniform(0.7, 1.3) * 1.5
		app.Hardware = append(app.Hardware, Hardware{Name: fmt.Sprintf("hw%d", h), PricePerHour: math.Round(price*100) / 100})
	}
	n := between(c.MinModules, c.MaxModules)
	for m := 0; m < n; m++ {
		mod := Module{Name: fmt.Sprintf("m%d", m)}
		if rng.Float64() < c.CPUShare {
			mod.Kind = CPU
		}
		beta, alpha := uniform(0.04, 0.2), uniform(0.005, 0.04)
		kappa := uniform(0.5, 1.2)
		starts := []int{1, 2, 4, 5}
		first, ratio := starts[rng.IntN(len(starts))], []int{2, 4}[rng.IntN(2)]
		np := between(c.MinPoints, c.MaxPoints)
		conc := mod.Kind == GPU && rng.Float64() < c.ConcurrencyShare
		for h := 0; h < nh; h++ {
			pr := Profile{Hardware: app.Hardware[h].Name}
			f := math.Pow(speed[h], kappa)
			if mod.Kind == CPU {
				base := (beta + alpha) / f
				for e := 1; e <= np && e <= 4; e++ {
					pr.Points = append(pr.Points, Point{Batch: 1, Concurrency: e, Latency: roundMS(base * (1 + 0.2*float64(e-1)) * uniform(0.95, 1.05))})
				}
				mod.Profiles = append(mod.Profiles, pr)
				continue
			}
			b := first
			prev := time.Duration(0)
			for k := 0; k < np; k++ {
				d := roundMS((beta + alpha*math.Pow(float64(b), 1.1)) / f * uniform(0.95, 1.05))
				if d <= prev {
					d = prev + time.Millisecond
				}
				prev = d
				pr.Points = append(pr.Points, Point{Batch: b, Concurrency: 1, Latency: d})
				if conc && k > 0 {
					pr.Points = append(pr.Points, Point{Batch: b, Concurrency: 2, Latency: roundMS(d.Seconds() * uniform(1.5, 1.9))})
				}
				b *= ratio
				if b > MaxBatch {
					break // 5·4^7: MaxPoints 8 would pass the limit
				}
			}
			mod.Profiles = append(mod.Profiles, pr)
		}
		app.Modules = append(app.Modules, mod)
	}
	scales := []float64{0.5, 1, 1, 2, 3}
	// rel is each module's rate per unit of ingress. Scales compound along
	// paths (and paths multiply with two parents), so on large DAGs a
	// module whose rel would pass 1e6 gets scale 0.5 on its edges instead.
	rel := make([]float64, n)
	rel[0] = 1
	idx := map[string]int{}
	for m, mod := range app.Modules {
		idx[mod.Name] = m
	}
	for m := 1; m < n; m++ {
		first := len(app.Edges)
		p := rng.IntN(m)
		app.Edges = append(app.Edges, Edge{From: app.Modules[p].Name, To: app.Modules[m].Name, Scale: scales[rng.IntN(len(scales))]})
		if m >= 2 && rng.Float64() < 0.3 {
			q := rng.IntN(m)
			if q != p {
				app.Edges = append(app.Edges, Edge{From: app.Modules[q].Name, To: app.Modules[m].Name, Scale: scales[rng.IntN(len(scales))]})
			}
		}
		for _, e := range app.Edges[first:] {
			rel[m] += rel[idx[e.From]] * e.Scale
		}
		if rel[m] > 1e6 {
			rel[m] = 0
			for i := first; i < len(app.Edges); i++ {
				app.Edges[i].Scale = 0.5
				rel[m] += rel[idx[app.Edges[i].From]] * 0.5
			}
		}
	}
	app.Modules[0].Ingress = math.Round(uniform(c.MinRate, c.MaxRate))
	maxRel := 0.0
	for _, r := range rel {
		maxRel = math.Max(maxRel, r)
	}
	if app.Modules[0].Ingress*maxRel > MaxRate {
		app.Modules[0].Ingress = math.Floor(MaxRate / maxRel)
	}
	// Keep every module within MaxMachines of its fastest configuration:
	// scale the ingress down if some module's rate would exceed it.
	in, err := compile(&App{SLO: time.Hour, Hardware: app.Hardware, Modules: app.Modules, Edges: app.Edges})
	if err != nil {
		panic(fmt.Sprintf("provision: random instance %d/%d is invalid: %v", seed, i, err))
	}
	shrink := 1.0
	for m := range in.rate {
		best := 0.0
		for _, cd := range in.cands[m] {
			best = math.Max(best, cd.tput)
		}
		if lim := c.MaxMachines * best; in.rate[m] > lim {
			shrink = math.Min(shrink, lim/in.rate[m])
		}
	}
	if shrink < 1 {
		app.Modules[0].Ingress = math.Max(1, math.Floor(app.Modules[0].Ingress*shrink))
		in, _ = compile(&App{SLO: time.Hour, Hardware: app.Hardware, Modules: app.Modules, Edges: app.Edges})
	}
	// The SLO: a multiple of the fastest path when every module runs its
	// fastest configuration as full machines under round-robin (2d).
	fastest := longestThrough(in, func(m int) float64 {
		best := math.Inf(1)
		for _, cd := range in.cands[m] {
			best = math.Min(best, RoundRobin.full(&cd, in.rate[m]))
		}
		return best
	})
	worst := 0.0
	for _, l := range fastest {
		worst = math.Max(worst, l)
	}
	app.SLO = min(roundMS(worst*uniform(c.MinSlack, c.MaxSlack)), MaxLatency)
	return app
}

// roundMS rounds seconds to a whole millisecond (at least 1 ms), as
// profiles are printed.
func roundMS(s float64) time.Duration {
	d := time.Duration(math.Round(s*1000)) * time.Millisecond
	if d < time.Millisecond {
		d = time.Millisecond
	}
	return d
}

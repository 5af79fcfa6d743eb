package workload

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/idheap"
)

// Generator yields every model's arrivals in time order. Each model draws
// from its own random stream, derived from the workload seed and the model's
// index, so a model's arrivals do not depend on the other models: the same
// seed gives the same arrivals whatever else changes.
type Generator struct {
	models []modelStream
	heap   *idheap.Heap[int] // models with arrivals left, by next arrival
	end    float64
}

type modelStream struct {
	m     *Model
	rates []RatePhase // m.Rates, or a stream's summed rate
	rng   *rand.Rand
	next  float64 // next arrival, ns since start; +Inf when done
	phase int     // index into rates of the phase holding next
	start float64 // start of that phase, ns
	// group dispatches a stream's arrivals (Model.Stream) to its models:
	// it is set on the stream's first model, which draws the arrivals, and
	// to is the model the next one goes to.
	group *streamGroup
	to    int
}

// streamGroup is batch-aware dispatch over a stream's models: runs of
// each model's StreamBatch consecutive arrivals, the next run going to the
// model furthest behind its share of the stream (largest credit), so that
// each model's long-run share is its rate's.
type streamGroup struct {
	members   []int     // model indices, in file order
	share     []float64 // each model's rate over the stream's
	batch     []int
	credit    []float64
	cur, left int
}

// next returns the model the stream's next arrival goes to.
func (g *streamGroup) next() int {
	if g.left == 0 {
		best := -1
		for k := range g.members {
			if g.share[k] > 0 && (best < 0 || g.credit[k] > g.credit[best]) {
				best = k
			}
		}
		g.cur, g.left = best, g.batch[best]
		g.credit[best] -= float64(g.batch[best])
	}
	for k := range g.credit {
		g.credit[k] += g.share[k]
	}
	g.left--
	return g.members[g.cur]
}

// NewGenerator returns a generator of arrivals in [0, end) for w's models.
func NewGenerator(w *Workload, end time.Duration) *Generator {
	g := &Generator{models: make([]modelStream, len(w.Models)), end: float64(end)}
	g.heap = idheap.New(len(w.Models), func(a, b int) bool {
		ta, tb := g.models[a].next, g.models[b].next
		return ta < tb || ta == tb && a < b
	})
	groups := map[string]*streamGroup{}
	lead := map[string]int{}
	for i := range w.Models {
		m := &w.Models[i]
		if m.Stream == "" {
			continue
		}
		gr := groups[m.Stream]
		if gr == nil {
			gr = &streamGroup{}
			groups[m.Stream], lead[m.Stream] = gr, i
		}
		gr.members = append(gr.members, i)
		gr.share = append(gr.share, m.Rates[0].Rate)
		gr.batch = append(gr.batch, max(m.StreamBatch, 1))
		gr.credit = append(gr.credit, 0)
	}
	for i := range w.Models {
		s := &g.models[i]
		s.m = &w.Models[i]
		s.rates = s.m.Rates
		if name := s.m.Stream; name != "" {
			if lead[name] != i {
				continue // the stream's first model draws its arrivals
			}
			gr := groups[name]
			total := 0.0
			for _, r := range gr.share {
				total += r
			}
			if total == 0 {
				continue
			}
			for k := range gr.share {
				gr.share[k] /= total
			}
			s.rates = []RatePhase{{Rate: total}}
			s.group = gr
			s.to = gr.next()
		}
		s.rng = rand.New(rand.NewPCG(w.Seed, splitmix(uint64(i)+0x9e3779b97f4a7c15)))
		s.next = 0
		if s.m.Arrival.Kind == ArrivalConstant {
			// Start each model at a random phase of its period so that
			// constant-rate models do not all arrive at the same instants.
			s.advance(s.rng.Float64())
		} else {
			s.advance(s.firstGap())
		}
		if s.next < g.end {
			g.heap.Push(i)
		}
	}
	return g
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Peek returns the next arrival's model index and time, or ok=false when no
// arrival remains before the end.
func (g *Generator) Peek() (model int, at scheduler.Time, ok bool) {
	if g.heap.Len() == 0 {
		return 0, scheduler.Never, false
	}
	m := g.heap.Top()
	s := &g.models[m]
	if s.group != nil {
		return s.to, scheduler.Time(s.next), true
	}
	return m, scheduler.Time(s.next), true
}

// Pop consumes the arrival Peek returned and draws that model's next one.
func (g *Generator) Pop() {
	m := g.heap.Top()
	s := &g.models[m]
	if s.group != nil {
		s.to = s.group.next()
	}
	s.advance(s.unitGap())
	if s.next >= g.end {
		g.heap.Remove(m)
	} else {
		g.heap.Fix(m)
	}
}

// unitGap draws a gap with mean 1 from the model's arrival distribution; it
// is measured in "expected arrivals", so advance can map it through a rate
// that changes over time.
func (s *modelStream) unitGap() float64 {
	switch s.m.Arrival.Kind {
	case ArrivalConstant:
		return 1
	case ArrivalGamma:
		k := s.m.Arrival.Shape
		return gammaVariate(s.rng, k) / k
	default:
		return s.rng.ExpFloat64()
	}
}

// firstGap draws the gap from the start of the run to the model's first
// arrival as a stationary arrival process has it, one that has been
// running long before the run: the time left of the gap that spans the
// start. A random instant falls in a gap with probability proportional to
// the gap's length, and anywhere in it, so the residual is U·L with L drawn
// length-biased: Gamma(k+1)/k for Gamma(k)/k gaps. Starting at an arrival
// instead would open every bursty model with a burst, which a short or
// sparse run then measures: with Γ(0.05) gaps and a few requests a second,
// the window got about 3.5 times the declared rate. The exponential is its
// own residual (and its draw is kept, so Poisson runs are unchanged).
func (s *modelStream) firstGap() float64 {
	if s.m.Arrival.Kind != ArrivalGamma {
		return s.unitGap()
	}
	k := s.m.Arrival.Shape
	return s.rng.Float64() * gammaVariate(s.rng, k+1) / k
}

// advance moves next forward by u expected arrivals: the time t' at which
// the integral of the rate from next to t' equals u. This is exact for
// piecewise-constant rates and keeps each phase's rate right even when a
// gap crosses a phase boundary.
func (s *modelStream) advance(u float64) {
	rates := s.rates
	for {
		p := rates[s.phase]
		last := s.phase == len(rates)-1 || p.Duration == 0
		end := math.Inf(1)
		if !last {
			end = s.start + float64(p.Duration)
		}
		if p.Rate > 0 {
			dt := u / p.Rate * 1e9
			if s.next+dt <= end {
				s.next += dt
				return
			}
			u -= (end - s.next) * p.Rate / 1e9
		}
		if last {
			s.next = math.Inf(1)
			return
		}
		s.next = end
		s.start = end
		s.phase++
	}
}

// gammaVariate draws from Gamma(k, 1) by Marsaglia and Tsang's method,
// boosting shapes below 1 with U^(1/k).
func gammaVariate(rng *rand.Rand, k float64) float64 {
	if k < 1 {
		u := rng.Float64()
		for u == 0 {
			u = rng.Float64()
		}
		return gammaVariate(rng, k+1) * math.Pow(u, 1/k)
	}
	d := k - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}

package partition

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/serving"
)

// Size is the answer of Eqs. 2-3 for one model on GPUs of its own: N GPUs
// staggered by ℓ(b)/N, each running batches of b.
type Size struct {
	// Batch is b, the batch size each GPU runs.
	Batch int
	// GPUs is N, the fewest GPUs that serve the rate within the SLO.
	GPUs int
	// Latency is ℓ(b); Throughput is N·b/ℓ(b), the rate the GPUs sustain.
	Latency    time.Duration
	Throughput float64
}

// ErrUnservable is wrapped by sizing errors of models whose SLO is shorter
// than a batch of one plus the budgeted delays: no number of GPUs serves them.
var ErrUnservable = errors.New("partition: model cannot meet its SLO at any batch size")

// budget is the part of the SLO left for queueing and execution once the
// network delays of a batch of b are paid.
func budget(slo time.Duration, d scheduler.Delays, b int) time.Duration {
	return slo - d.Dispatch(b) - d.Result
}

// SizeModel solves the paper's Eqs. 2-3 for one model: the fewest GPUs N,
// and with it the largest batch b, such that (1 + 1/N)·ℓ(b) ≤ SLO (the
// worst request waits ℓ(b)/N for the next staggered GPU, then runs for
// ℓ(b)) and N·b/ℓ(b) ≥ λ. The delays are taken off the SLO first (pass the
// zero Delays for the paper's idealized setting). A zero rate needs no GPU.
func SizeModel(m serving.Demand, delays scheduler.Delays) (Size, error) {
	if !m.Profile.Valid() {
		return Size{}, fmt.Errorf("partition: model %q has no profile", m.Name)
	}
	if m.Rate < 0 || math.IsNaN(m.Rate) || math.IsInf(m.Rate, 0) {
		return Size{}, fmt.Errorf("partition: model %q: rate must be a non-negative number, have %v", m.Name, m.Rate)
	}
	best := Size{}
	for b := 1; b <= m.Profile.MaxBatch(); b++ {
		l := m.Profile.Latency(b)
		slo := budget(m.SLO, delays.ForInput(m.InputBytes), b)
		if l >= slo {
			break // latency grows with b: larger batches fit no better
		}
		// Eq. 3: enough GPUs for the rate; Eq. 2: enough to stagger within
		// the SLO, (1+1/N)·l ≤ slo ⇔ N ≥ l/(slo−l).
		n := int(math.Ceil(m.Rate * l.Seconds() / float64(b)))
		n = max(n, int(math.Ceil(float64(l)/float64(slo-l))), 1)
		if m.Rate == 0 {
			n = 0
		}
		if best.Batch == 0 || n <= best.GPUs {
			best = Size{Batch: b, GPUs: n, Latency: l}
		}
	}
	if best.Batch == 0 {
		return Size{}, fmt.Errorf("%w: %q: ℓ(1) = %v with an SLO of %v", ErrUnservable, m.Name, m.Profile.Latency(1), m.SLO)
	}
	best.Throughput = float64(best.GPUs) * float64(best.Batch) / best.Latency.Seconds()
	return best, nil
}

// DefaultHeadroom is the capacity SizePart adds on top of the steady-state
// need: the scheduler reaches about 90% of the analytic Eqs. 2-3 bound under
// Poisson arrivals (docs/benchmarks.md, Table 4), and a rate may grow during
// the epoch before the next re-sizing, so a part sized without headroom
// would drop requests from its first burst.
const DefaultHeadroom = 0.25

// PartSize is the sizing of one part: the models sharing its GPUs.
type PartSize struct {
	// Need is the GPUs the part's models keep busy at their rates, a
	// fraction: Σ λ·ℓ(b)/b over the models.
	Need float64
	// GPUs is ⌈Need·(1+headroom)⌉, at least 1 when any model has load.
	GPUs int
	// Batches holds each model's batch size b, in the order given.
	Batches []int
}

// SizePart sizes a set of models that share one part's GPUs. A model whose
// batches start every b/λ seconds on some GPU of the part waits at most b/λ,
// so each model runs the largest b with b/λ + ℓ(b) ≤ SLO (for a model alone
// on N staggered GPUs, b/λ = ℓ(b)/N and this is Eq. 2), and keeps
// λ·ℓ(b)/b GPUs busy (Eq. 3). A batch of one waits for no other request,
// so b = 1 needs only ℓ(1) within the SLO: a model whose rate is below
// 1/SLO still runs, one request a batch, instead of being taken for
// unservable. The part needs the sum, times 1+headroom.
func SizePart(models []serving.Demand, delays scheduler.Delays, headroom float64) (PartSize, error) {
	if headroom < 0 || math.IsNaN(headroom) || math.IsInf(headroom, 0) {
		return PartSize{}, fmt.Errorf("partition: headroom must be a non-negative number, have %v", headroom)
	}
	ps := PartSize{Batches: make([]int, len(models))}
	for i, m := range models {
		if !m.Profile.Valid() {
			return PartSize{}, fmt.Errorf("partition: model %q has no profile", m.Name)
		}
		if m.Rate < 0 || math.IsNaN(m.Rate) || math.IsInf(m.Rate, 0) {
			return PartSize{}, fmt.Errorf("partition: model %q: rate must be a non-negative number, have %v", m.Name, m.Rate)
		}
		b := 0
		for k := 1; k <= m.Profile.MaxBatch(); k++ {
			wait := time.Duration(0)
			if m.Rate > 0 && k > 1 {
				wait = time.Duration(float64(k) / m.Rate * float64(time.Second))
			}
			if wait+m.Profile.Latency(k) > budget(m.SLO, delays.ForInput(m.InputBytes), k) {
				break
			}
			b = k
		}
		if b == 0 {
			if m.Rate == 0 {
				continue
			}
			return PartSize{}, fmt.Errorf("%w: %q: ℓ(1) = %v with an SLO of %v", ErrUnservable, m.Name, m.Profile.Latency(1), m.SLO)
		}
		ps.Batches[i] = b
		ps.Need += m.Rate * m.Profile.Latency(b).Seconds() / float64(b)
	}
	if ps.Need > 0 {
		ps.GPUs = max(1, int(math.Ceil(ps.Need*(1+headroom)-1e-9)))
	}
	return ps, nil
}

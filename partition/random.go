package partition

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// randomStream is the second PCG word of the random search's generator.
const randomStream = 0x72616e646f6d7372 // "randomsr"

// DefaultRandomTime is RandomSearch's time limit when ctx has no deadline:
// the paper's 10 s, the limit it gives both its solver and its baseline.
const DefaultRandomTime = 10 * time.Second

// RandomSearch is the paper's baseline (Appendix A.2): it draws random
// assignments, checks each against every constraint, scores the feasible
// ones by the MILP objective and keeps the best, until ctx's deadline (or
// DefaultRandomTime when ctx has none). It exists to measure how much the
// real engines gain over chance, as Figure 15 does; it is not meant for
// production.
//
// Without a disruption budget each draw puts every model in a uniformly
// random part. With one (Current set and MaxDisruption ≥ 0) draws respect
// it by construction, as rejecting uniform draws would almost never accept
// one: new models go to uniformly random parts, and the others, taken in a
// random order, each draw a uniformly random part and move there only if the
// budget left affords it, staying home otherwise. It is deterministic for a
// given Seed and number of draws, which the time limit decides.
type RandomSearch struct {
	Seed uint64
}

// Name reports "random", the engine's name in results and flags.
func (RandomSearch) Name() string { return "random" }

// Solve runs the random search on p. An error wraps ErrInfeasible, with the
// violation of the last draw, when no draw met every constraint.
func (r RandomSearch) Solve(ctx context.Context, p *Problem) (*Result, error) {
	start := time.Now()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var notes []string
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultRandomTime)
		defer cancel()
		notes = append(notes, fmt.Sprintf("random: no deadline given; searched for the default %v", DefaultRandomTime))
	}
	n, l := len(p.Models), p.Parts
	rng := rand.New(rand.NewPCG(r.Seed, randomStream))
	w := p.Weight()
	budgeted := p.Current != nil && p.MaxDisruption >= 0
	var fixed int64 // the load cost of new models, paid wherever they go
	var totalRate, totalStatic float64
	for i, m := range p.Models {
		totalRate += m.Rate
		totalStatic += float64(m.StaticMemory)
		if p.Current != nil && p.Current[i] == Unassigned {
			fixed += MoveCost(m)
		}
	}
	if budgeted && fixed > p.MaxDisruption {
		return nil, fmt.Errorf("%w: random: max_disruption %d B is below the %d B needed to load the new models", ErrInfeasible, p.MaxDisruption, fixed)
	}
	avgRate, avgStatic := totalRate/float64(l), totalStatic/float64(l)

	assign := make([]int, n)
	best := make([]int, n)
	bestObj := math.Inf(1)
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	prate := make([]float64, l)
	pstat := make([]int64, l)
	pdyn := make([]int64, l)
	draws := 0
	for ctx.Err() == nil {
		draws++
		if budgeted {
			left := p.MaxDisruption - fixed
			rng.Shuffle(n, func(x, y int) { order[x], order[y] = order[y], order[x] })
			for _, i := range order {
				j, c := rng.IntN(l), p.Current[i]
				switch {
				case c == Unassigned || c == j:
				case 2*MoveCost(p.Models[i]) <= left:
					left -= 2 * MoveCost(p.Models[i])
				default:
					j = c
				}
				assign[i] = j
			}
		} else {
			for i := range assign {
				assign[i] = rng.IntN(l)
			}
		}
		clear(prate)
		clear(pstat)
		clear(pdyn)
		for i, m := range p.Models {
			j := assign[i]
			prate[j] += m.Rate
			pstat[j] += m.StaticMemory
			pdyn[j] = max(pdyn[j], m.DynamicMemory)
		}
		var dr, ds float64
		feasible := true
		for j := 0; j < l; j++ {
			if (p.MaxRatePerPart > 0 && prate[j] > p.MaxRatePerPart) || (p.GPUMemory > 0 && pstat[j]+pdyn[j] > p.GPUMemory) {
				feasible = false
				break
			}
			dr = max(dr, math.Abs(prate[j]-avgRate))
			ds = max(ds, math.Abs(float64(pstat[j])-avgStatic))
		}
		if obj := dr + w*ds; feasible && obj < bestObj {
			bestObj = obj
			copy(best, assign)
		}
	}
	if math.IsInf(bestObj, 1) {
		msg := "no draw was made before the deadline"
		if draws > 0 {
			e, err := p.Evaluate(assign)
			if err != nil {
				return nil, err
			}
			msg = fmt.Sprintf("none of %d random draws was feasible; the last: %s", draws, e.Violations[0])
		}
		return nil, fmt.Errorf("%w: random: %s", ErrInfeasible, msg)
	}
	res, err := p.NewResult(r.Name(), best, time.Since(start))
	if err != nil {
		return nil, err
	}
	res.Notes = append(notes, fmt.Sprintf("random: best of %d draws", draws))
	return res, nil
}

package partition

import "math/rand/v2"

// ShiftRates returns a copy of p for the next epoch after the workload
// changed, the scenario of the paper's disruption minimisation (Appendix
// A.1): a share fraction (in [0, 1]; 0.3 for a "30% rate shift") of the
// total request rate is redistributed among the models. Each new rate is
//
//	r'_i = (1−fraction)·r_i + fraction·R·q_i,
//
// where R is the total rate and q a fresh popularity: independent Exp(1)
// weights normalised to sum to 1. The total rate is unchanged, so only the
// balance between models moves, and at most 2·fraction·R of rate changes
// hands (Σ|r'_i − r_i| ≤ 2·fraction·R). Current is set to current (copied;
// nil leaves none), so the new problem asks how to rebalance with a budget
// of disruption; MaxDisruption and the other fields are p's. p is not
// modified. The same seed always gives the same shift.
func ShiftRates(p *Problem, current []int, seed uint64, fraction float64) *Problem {
	q := *p
	q.Models = append([]Model(nil), p.Models...)
	if current != nil {
		q.Current = append([]int(nil), current...)
	} else {
		q.Current = nil
	}
	rng := rand.New(rand.NewPCG(seed, shiftStream))
	weights := make([]float64, len(q.Models))
	var total, wsum float64
	for i, m := range q.Models {
		total += m.Rate
		weights[i] = rng.ExpFloat64()
		wsum += weights[i]
	}
	if wsum == 0 {
		return &q
	}
	for i := range q.Models {
		q.Models[i].Rate = (1-fraction)*q.Models[i].Rate + fraction*total*weights[i]/wsum
	}
	return &q
}

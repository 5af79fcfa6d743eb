package partition

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/symphony-serving/symphony/scheduler/profile"
)

// instanceStream and shiftStream are the second PCG words of the generators,
// so that an instance and a shift drawn with the same seed are independent.
const (
	instanceStream = 0x73796d70686f6e79 // "symphony"
	shiftStream    = 0x7368696674726174 // "shiftrat"
)

// zooBases returns the models of the 1080Ti zoo whose memory sizes the paper
// gives (Table 1's six models): only they can stand for a model in a
// partitioning instance, whose memory balance is half the objective.
func zooBases() []profile.ModelSpec {
	zoo, err := profile.Zoo("1080ti")
	if err != nil {
		// The zoo is bundled with the binary; a missing one is a build bug.
		panic(err)
	}
	var bases []profile.ModelSpec
	for _, m := range zoo {
		if m.StaticMemory > 0 {
			bases = append(bases, m)
		}
	}
	return bases
}

// RandomInstance builds one of Appendix A.2's evaluation instances, so that
// engines can be compared on the configurations the paper reports (Figure
// 15: 800 models into 20 parts). Each of the models is a variant (a
// specialised instantiation) of a base model drawn uniformly from the
// bundled zoo's models with known memory sizes, named after it, as
// "resnet50-v17" for model 17; its static and dynamic memory are exactly the
// base's (variants share an architecture, so they weigh the same), and its
// rate is drawn independently from an exponential distribution with mean
// meanRate, as in the paper.
//
// The problem has no R_max or S_max (zero), no current assignment and no
// disruption limit (MaxDisruption −1); callers set those for the scenario
// they test. The same seed always gives the same instance.
func RandomInstance(seed uint64, models, parts int, meanRate float64) *Problem {
	rng := rand.New(rand.NewPCG(seed, instanceStream))
	bases := zooBases()
	p := &Problem{Models: make([]Model, models), Parts: parts, MaxDisruption: -1}
	for i := range p.Models {
		b := bases[rng.IntN(len(bases))]
		p.Models[i] = Model{
			Name:          fmt.Sprintf("%s-v%d", strings.ToLower(b.Name), i),
			Rate:          rng.ExpFloat64() * meanRate,
			StaticMemory:  b.StaticMemory,
			DynamicMemory: b.DynamicMemory,
		}
	}
	return p
}

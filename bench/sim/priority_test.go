package sim

import (
	"testing"

	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/scheduler"
)

// Table 4's ResNet50 at twice its capacity with a quarter of its requests
// at level 1: the oracle holds (every request ends once, no batch late),
// the report counts each level, and level 1 keeps within 1% bad while
// level 0 takes the drops; without the mix nothing is reported by level.
func TestPriorityLevelsInTheSimulator(t *testing.T) {
	for _, pol := range []scheduler.Policy{scheduler.PolicySymphony, scheduler.PolicyWorkConserving, scheduler.PolicyClockwork} {
		w := table4(pol, 12000)
		w.Models[0].PriorityMix = []workload.PriorityShare{{Level: 1, Share: 0.25}}
		rep := run(t, w)
		ps := rep.Models[0].Priorities
		if len(ps) != 2 || ps[0].Level != 1 || ps[1].Level != 0 {
			t.Fatalf("%v: priorities %+v, want levels 1 and 0", pol, ps)
		}
		if off := ps[0].Offered + ps[1].Offered; off != rep.Models[0].Offered || ps[0].Good+ps[1].Good != rep.Models[0].Good {
			t.Errorf("%v: levels %+v do not add up to the model's %d offered, %d good", pol, ps, rep.Models[0].Offered, rep.Models[0].Good)
		}
		if ps[0].BadRate > 0.01 || ps[1].BadRate < 0.3 {
			t.Errorf("%v: level 1 bad %.2f%%, level 0 bad %.2f%%: want level 1 within 1%% and level 0 absorbing the overload", pol, 100*ps[0].BadRate, 100*ps[1].BadRate)
		}
		if plain := run(t, table4(pol, 12000)); plain.Models[0].Priorities != nil {
			t.Errorf("%v: levels reported without a mix", pol)
		}
	}
}

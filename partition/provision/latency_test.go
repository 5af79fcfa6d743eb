package provision

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestDispatchNames(t *testing.T) {
	for _, d := range []Dispatch{BatchAware, MachineThroughput, RoundRobin} {
		got, err := ParseDispatch(d.String())
		if err != nil || got != d {
			t.Errorf("ParseDispatch(%q) = %v, %v", d.String(), got, err)
		}
	}
	if _, err := ParseDispatch("2d"); err == nil {
		t.Error("ParseDispatch accepted 2d")
	}
	for _, b := range Baselines() {
		got, err := ParseBaseline(b.String())
		if err != nil || got != b {
			t.Errorf("ParseBaseline(%q) = %v, %v", b, got, err)
		}
		if err := b.Options().Validate(); err != nil {
			t.Errorf("%v: %v", b, err)
		}
	}
	if _, err := ParseBaseline("harpagon"); err == nil {
		t.Error("ParseBaseline accepted harpagon")
	}
	// Harpagon Table III.
	for b, want := range map[Baseline][3]int{Nexus: {int(RoundRobin), 2, int(Quantized)}, Scrooge: {int(MachineThroughput), 2, int(Throughput)},
		InferLine: {int(RoundRobin), 1, int(Throughput)}, Clipper: {int(RoundRobin), 1, int(Even)}} {
		o := b.Options()
		if got := [3]int{int(o.Dispatch), o.MaxConfigs, int(o.Split.Kind)}; got != want || o.Dummy || o.Reassign {
			t.Errorf("%v options %+v", b, o)
		}
	}
}

// TestWorstCaseModels: on the same machines, batch-aware dispatch's worst
// case is at most machine-throughput's, which is at most round-robin's
// (which is what makes a baseline's provision valid for the planner too).
func TestWorstCaseModels(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		cs, T := randomSmallModule(rng)
		var ts []tier
		rw := T
		for j := range cs {
			if n := int(rw / cs[j].tput); n > 0 && rng.IntN(2) == 0 {
				ts = append(ts, tier{c: j, full: n})
				rw -= float64(n) * cs[j].tput
			}
		}
		if rw > eps {
			P := rng.IntN(len(cs))
			for cs[P].tput <= rw {
				ts = append(ts, tier{c: P, full: 1})
				rw -= cs[P].tput
			}
			ts = append(ts, tier{c: P, part: rw})
		}
		ts = normalize(ts)
		ba, c1, _ := evalTiers(cs, BatchAware, ts)
		mt, c2, _ := evalTiers(cs, MachineThroughput, ts)
		rr, c3, _ := evalTiers(cs, RoundRobin, ts)
		if ba > mt+1e-12 || mt > rr+1e-12 || c1 != c2 || c2 != c3 {
			t.Fatalf("tiers %+v: latencies %v, %v, %v; costs %v %v %v", ts, ba, mt, rr, c1, c2, c3)
		}
	}
}

// TestTraceBoundsTheorem1: replaying throughput-cost dispatch request by
// request never exceeds Theorem 1's d + b/w, on random groups of machines
// that take one batch per cycle and finish it within the cycle (with more
// batches per cycle, a cycle's batches of one machine arrive back to back
// and queue, which the replay shows and Theorem 1 leaves out).
func TestTraceBoundsTheorem1(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for i := 0; i < 500; i++ {
		// A cycle of C seconds; each group's machines take `batches`
		// batches of b per cycle and run each in at most C/batches.
		cycle := 1.0 + rng.Float64()*2
		var ms []TraceMachine
		var perCycle int
		type grp struct {
			b, n, batches int
			d             float64
		}
		var gs []grp
		for g := 0; g < 1+rng.IntN(3); g++ {
			x := grp{b: 1 + rng.IntN(8), n: 1 + rng.IntN(3), batches: 1}
			x.d = cycle / float64(x.batches) * (0.5 + 0.5*rng.Float64())
			gs = append(gs, x)
			for k := 0; k < x.n; k++ {
				ms = append(ms, TraceMachine{Batch: x.b, Latency: seconds(x.d), Batches: x.batches, Group: g})
			}
			perCycle += x.b * x.batches * x.n
		}
		rate := float64(perCycle) / cycle
		got, err := Trace(ms, rate, BatchAware, 3)
		if err != nil {
			t.Fatal(err)
		}
		// Theorem 1: w of group g is the rate of g and every later group.
		bound, w := 0.0, rate
		for _, x := range gs {
			bound = math.Max(bound, x.d+float64(x.b)/w)
			w -= float64(x.b*x.batches*x.n) / cycle
		}
		if got.Seconds() > bound+2e-9 {
			t.Fatalf("case %d: replay %v exceeds Theorem 1's %v (groups %+v, rate %v)", i, got, bound, gs, rate)
		}
	}
	if _, err := Trace(nil, 1, BatchAware, 1); err == nil {
		t.Error("empty trace accepted")
	}
	if _, err := Trace([]TraceMachine{{Batch: 1, Latency: time.Second, Batches: 1}}, 1, MachineThroughput, 1); err == nil {
		t.Error("machine-throughput replay accepted")
	}
}

func TestNormalize(t *testing.T) {
	got := normalize([]tier{{c: 3, full: 1}, {c: 1, full: 2}, {c: 3, full: 2}, {c: 0, part: 4}, {c: 1, full: 1}})
	want := []tier{{c: 1, full: 3}, {c: 3, full: 3}, {c: 0, part: 4}}
	if len(got) != len(want) {
		t.Fatalf("normalize = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("normalize = %+v, want %+v", got, want)
		}
	}
	// A partial machine of the last full tier's configuration joins it.
	got = normalize([]tier{{c: 2, full: 1}, {c: 2, part: 1.5}})
	if len(got) != 1 || got[0] != (tier{c: 2, full: 1, part: 1.5}) {
		t.Fatalf("normalize = %+v", got)
	}
}

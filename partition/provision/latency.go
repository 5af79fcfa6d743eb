package provision

import (
	"fmt"
	"math"
	"time"
)

// Dispatch is how a module's requests are spread over its machines. It
// fixes each machine's worst-case latency: the execution d of a batch plus
// the time to collect its b inputs, which is what every budget is checked
// against.
type Dispatch int

const (
	// BatchAware is Harpagon's throughput-cost dispatch (§III-B): machines
	// are ranked by throughput per price, and the dispatcher sends each one
	// b consecutive requests in turn, so that machine i collects its batch
	// at w_i, the rate of all machines ranked no higher (Theorem 1):
	// L = d + b/w.
	BatchAware Dispatch = iota
	// MachineThroughput is Scrooge's model (§3.3, Eq. 2c and Eq. 3): a
	// machine collects its batch at its own rate, its throughput t = b·e/d
	// when full, the rate it is assigned when partial: L = d + b/t.
	MachineThroughput
	// RoundRobin is the single-request round-robin of Nexus, InferLine and
	// Clipper: each of a machine's e concurrent batch slots is a separate
	// destination and collects at 1/e of the machine's rate, so a full
	// machine's worst case is 2d (Harpagon §II) and a partial one's is
	// d + e·b/f.
	RoundRobin
)

// String returns the application file's spelling.
func (d Dispatch) String() string {
	switch d {
	case BatchAware:
		return "batch-aware"
	case MachineThroughput:
		return "machine-throughput"
	case RoundRobin:
		return "round-robin"
	}
	return fmt.Sprintf("Dispatch(%d)", int(d))
}

// ParseDispatch reads "batch-aware", "machine-throughput" or "round-robin".
func ParseDispatch(s string) (Dispatch, error) {
	for _, d := range []Dispatch{BatchAware, MachineThroughput, RoundRobin} {
		if s == d.String() {
			return d, nil
		}
	}
	return 0, fmt.Errorf("unknown dispatch %q (want batch-aware, machine-throughput or round-robin)", s)
}

// eps is the tolerance of latency and rate comparisons, in seconds and
// requests per second: the papers' examples sit exactly on their budgets
// (M_1's b = 8 has 0.32 + 8/100 = 0.4 s against an SLO of 0.4 s), which
// floating point must not turn into a miss.
const eps = 1e-9

// full is the worst-case latency of a full machine at c whose tier (its
// configuration and every one dispatched after it) receives w requests per
// second.
func (disp Dispatch) full(c *cand, w float64) float64 {
	switch disp {
	case MachineThroughput:
		return c.d + c.b/c.tput
	case RoundRobin:
		return c.d + c.e*c.b/c.tput
	}
	return c.d + c.b/w
}

// partial is the worst-case latency of the one partial machine at c, which
// is dispatched last and receives r requests per second.
func (disp Dispatch) partial(c *cand, r float64) float64 {
	if disp == RoundRobin {
		return c.d + c.e*c.b/r
	}
	return c.d + c.b/r
}

// single is the latency the splitter charges a configuration serving a
// module's whole rate T alone (GetWCL in Harpagon's Algorithm 2). For
// batch-aware dispatch it is d + b/T, as in the papers' worked examples
// (Harpagon §III-D: 0.2 + 4/100 for M_1's b = 4; Piccolo §III-C: 0.25 +
// 20/100 for M1's b = 20, whose 0.25 machine at 20 req/s would need more):
// the module scheduler gives the remainder to other configurations. The
// baselines' models charge what the configuration alone really needs: its
// full machines, and the partial machine that takes the remainder, which
// under round-robin or machine-throughput dispatch collects its batch at its
// own small rate. Charging less makes the throughput split hand out budgets
// no provision of the baseline's can meet.
func (disp Dispatch) single(c *cand, T float64) float64 {
	if disp == BatchAware {
		return c.d + c.b/T
	}
	if T < c.tput {
		return disp.partial(c, T)
	}
	lat := disp.full(c, T)
	if r := T - math.Floor(T/c.tput+eps)*c.tput; r > eps {
		lat = math.Max(lat, disp.partial(c, r))
	}
	return lat
}

// tier is one step of a module's dispatch order: full machines of one
// configuration and, on the last tier only, one partial machine. A module's
// provision is a list of tiers in canonical order: full tiers by candidate index
// (ratio descending, the throughput-cost dispatcher's order), then the
// partial machine, which the dispatcher serves last because it takes the
// remainder. Treating the partial machine as its own, lowest tier is what
// Algorithm 1 does (it checks the partial machine at the workload left after
// the full ones, line 5 after line 9) and what makes Harpagon's Table II
// come out: 38 req/s on M_3's b = 8 would need a partial machine at 6 req/s,
// 0.25 + 8/6 s, so S_2 and S_3 use b = 2 for it.
type tier struct {
	c    int     // index into the module's candidates
	full int     // full machines
	part float64 // the partial machine's rate; 0 when there is none
}

// rate is the requests per second the tier's machines are assigned.
func (t tier) rate(cs []cand) float64 { return float64(t.full)*cs[t.c].tput + t.part }

// machines is the tier's machine count, the partial one counted by its
// occupancy (frame-rate proportionality, Scrooge §3.1).
func (t tier) machines(cs []cand) float64 { return float64(t.full) + t.part/cs[t.c].tput }

// evalTiers measures a module provision: its worst-case latency (seconds, the
// largest over its machines), its cost per hour and the total rate it is
// assigned (the module's rate plus dummies). ts must be canonical.
func evalTiers(cs []cand, disp Dispatch, ts []tier) (lat, cost, total float64) {
	for _, t := range ts {
		total += t.rate(cs)
	}
	w := total
	for _, t := range ts {
		c := &cs[t.c]
		if t.full > 0 {
			lat = math.Max(lat, disp.full(c, w))
		}
		if t.part > 0 {
			lat = math.Max(lat, disp.partial(c, t.part))
		}
		cost += c.price * t.machines(cs)
		w -= t.rate(cs)
	}
	return lat, cost, total
}

// tierLatencies returns the worst-case latency of each tier's full
// machines and of its partial machine (0 where there are none).
func tierLatencies(cs []cand, disp Dispatch, ts []tier) (full, part []float64) {
	full = make([]float64, len(ts))
	part = make([]float64, len(ts))
	w := 0.0
	for _, t := range ts {
		w += t.rate(cs)
	}
	for i, t := range ts {
		c := &cs[t.c]
		if t.full > 0 {
			full[i] = disp.full(c, w)
		}
		if t.part > 0 {
			part[i] = disp.partial(c, t.part)
		}
		w -= t.rate(cs)
	}
	return full, part
}

// remaining returns w_i of Theorem 1 for every tier: the rate of the tier
// and of every tier dispatched after it.
func remaining(cs []cand, ts []tier) []float64 {
	w := make([]float64, len(ts))
	sum := 0.0
	for i := len(ts) - 1; i >= 0; i-- {
		sum += ts[i].rate(cs)
		w[i] = sum
	}
	return w
}

// distinct counts the different configurations of ts.
func distinct(ts []tier) int {
	n := 0
	for i, t := range ts {
		dup := false
		for _, u := range ts[:i] {
			if u.c == t.c {
				dup = true
				break
			}
		}
		if !dup {
			n++
		}
	}
	return n
}

// normalize puts tiers in canonical order: full tiers sorted by candidate
// and merged, then the partial machine (which joins the last full tier
// when it has the same candidate). At most one tier of ts may have a
// partial machine. It works in place on a copy the caller owns.
func normalize(ts []tier) []tier {
	var part tier
	hasPart := false
	out := ts[:0]
	for _, t := range ts {
		if t.part > 0 {
			part, hasPart = tier{c: t.c, part: t.part}, true
		}
		if t.full > 0 {
			out = append(out, tier{c: t.c, full: t.full})
		}
	}
	// insertion sort: provisions have a handful of tiers
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].c < out[j-1].c; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	merged := out[:0]
	for _, t := range out {
		if n := len(merged); n > 0 && merged[n-1].c == t.c {
			merged[n-1].full += t.full
			continue
		}
		merged = append(merged, t)
	}
	if hasPart {
		if n := len(merged); n > 0 && merged[n-1].c == part.c {
			merged[n-1].part = part.part
		} else {
			merged = append(merged, part)
		}
	}
	return merged
}

// TraceMachine is one machine of a dispatch trace: its configuration and
// how many batches it takes per dispatch cycle.
type TraceMachine struct {
	Batch   int
	Latency time.Duration
	// Batches is the number of batches the machine receives per cycle.
	Batches int
	// Group ranks the machine: lower groups are dispatched first, and the
	// machines of one group share the group's turn (batch by batch under
	// batch-aware dispatch, request by request under round-robin).
	Group int
}

// Trace replays a dispatch cycle request by request, Harpagon's Fig. 4: a
// module receives rate requests per second, evenly spaced, and the
// dispatcher hands each cycle's requests to the groups in order, each
// group's share going to its machines in turn, a batch (BatchAware) or a
// single request (RoundRobin) at a time. Request k occupies the slot
// ((k-1)/rate, k/rate]; a batch waits for its last request and for its
// machine, then runs for its latency, and its worst latency is counted from
// the start of its first request's slot (the papers' convention: six
// requests at 8 req/s take 6/8 s to collect). Trace returns the worst
// latency over cycles cycles; concurrency is 1. A machine's batches within
// one cycle arrive back to back, so with several per cycle they may queue
// (as C's two batches do in Fig. 4). It exists to check Theorem 1 against a
// real dispatch order, and to show why round-robin needs more.
func Trace(machines []TraceMachine, rate float64, disp Dispatch, cycles int) (time.Duration, error) {
	if rate <= 0 || !finite(rate) {
		return 0, fmt.Errorf("provision: trace rate %v is not positive", rate)
	}
	if disp != BatchAware && disp != RoundRobin {
		return 0, fmt.Errorf("provision: trace replays batch-aware or round-robin dispatch, not %v", disp)
	}
	perCycle := 0
	for i, m := range machines {
		if m.Batch < 1 || m.Batches < 0 || m.Latency <= 0 {
			return 0, fmt.Errorf("provision: trace machine %d: batch %d, %d batches, latency %v", i, m.Batch, m.Batches, m.Latency)
		}
		perCycle += m.Batch * m.Batches
	}
	if perCycle == 0 || perCycle > 1<<20 || cycles < 1 || cycles > 1<<10 {
		return 0, fmt.Errorf("provision: trace of %d requests per cycle over %d cycles is out of range", perCycle, cycles)
	}
	// The order of one cycle: machine per request position.
	var order []int
	groups := map[int][]int{}
	var keys []int
	for i, m := range machines {
		if _, ok := groups[m.Group]; !ok {
			keys = append(keys, m.Group)
		}
		groups[m.Group] = append(groups[m.Group], i)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	for _, g := range keys {
		ms := groups[g]
		left := make([]int, len(ms)) // requests still owed this cycle
		total := 0
		for k, i := range ms {
			left[k] = machines[i].Batch * machines[i].Batches
			total += left[k]
		}
		for k := 0; total > 0; k = (k + 1) % len(ms) {
			if left[k] == 0 {
				continue
			}
			n := 1
			if disp == BatchAware {
				n = machines[ms[k]].Batch
			}
			for j := 0; j < n; j++ {
				order = append(order, ms[k])
			}
			left[k] -= n
			total -= n
		}
	}
	slot := 1 / rate
	free := make([]float64, len(machines))      // when each machine can start its next batch
	pending := make([][]float64, len(machines)) // slot starts of the batch being collected
	worst := 0.0
	for cyc := 0; cyc < cycles; cyc++ {
		for pos, i := range order {
			k := cyc*len(order) + pos
			pending[i] = append(pending[i], float64(k)*slot)
			if len(pending[i]) == machines[i].Batch {
				start := math.Max(float64(k+1)*slot, free[i])
				end := start + machines[i].Latency.Seconds()
				free[i] = end
				worst = math.Max(worst, end-pending[i][0])
				pending[i] = pending[i][:0]
			}
		}
	}
	return time.Duration(math.Round(worst * float64(time.Second))), nil
}

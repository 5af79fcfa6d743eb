package lookahead

import (
	"fmt"
	"slices"
	"sort"

	"github.com/symphony-serving/symphony/scheduler"
)

// system is one model's arrivals replayed on the real scheduler cores: a
// ModelCore and a RankCore over the setting's GPUs, driven as the
// simulator drives them (bench/sim): each arrival enqueued when it comes
// (simultaneous ones together), then every core wake-up that is due, the
// model's before the rank's, each grant answered and returned at once; the
// GPUs take exactly ℓ(b) per batch. Requests are named by their index in
// arr: one model's requests share one SLO, so they leave the queue in
// arrival order, served or dropped, and the queue is arr[head:next].
//
// A system copies with clone (the cores' Clone), which is how the
// clairvoyant scheduler plays alternatives forward.
type system struct {
	s        Setting
	arr      []scheduler.Time
	wLo, wHi int // the measured window's requests: arr[wLo:wHi]
	t        scheduler.Time
	next     int // the next arrival to enqueue
	head     int // the first request that has not ended
	model    *scheduler.ModelCore
	rank     *scheduler.RankCore
	gpuFree  []scheduler.Time // when each GPU finishes its last batch
	// holdFor, while above next, keeps the rank loop from granting until
	// arrival holdFor-1 has come: the clairvoyant scheduler chose to wait
	// for it.
	holdFor int

	// Accounting of the measured window (off during trials).
	trial     bool
	served    int
	batches   []int
	decisions int
	overrides Overrides
	// err records the first impossible schedule, which ends the replay: a
	// check on the cores, like the simulator's oracle.
	err error
	// A trial scores the requests below cut that it serves, and keeps its
	// first batch to compare with the rules'.
	cut    int
	scored int
	first  batch
	reqs   []scheduler.Request // Enqueue's argument, reused
}

// batch is a planned batch as the clairvoyant scheduler compares them: its
// first request, size and start, and when it was planned.
type batch struct {
	planned  bool
	first, k int
	exec, at scheduler.Time
}

func newSystem(s Setting, arr []scheduler.Time, from, to scheduler.Time) (*system, error) {
	model, err := scheduler.NewModelCore(scheduler.ModelConfig{Name: "lookahead", Profile: s.Profile, Policy: scheduler.PolicySymphony, Delays: s.Delays})
	if err != nil {
		return nil, err
	}
	rank, err := scheduler.NewRankCore(scheduler.RankConfig{Models: 1, GPUs: s.GPUs, Policy: scheduler.PolicySymphony, Delays: s.Delays})
	if err != nil {
		return nil, err
	}
	y := &system{
		s:       s,
		arr:     arr,
		wLo:     sort.Search(len(arr), func(i int) bool { return arr[i] >= from }),
		wHi:     sort.Search(len(arr), func(i int) bool { return arr[i] >= to }),
		model:   model,
		rank:    rank,
		gpuFree: make([]scheduler.Time, s.GPUs),
		batches: make([]int, s.Profile.MaxBatch()+1),
		t:       scheduler.Past,
	}
	for i := range y.gpuFree {
		y.gpuFree[i] = scheduler.Past
	}
	return y, nil
}

// clone copies y for trial play: the cores are cloned, the arrivals shared
// (no one writes them), and the window's accounting left behind.
func (y *system) clone() *system {
	c := *y
	c.model, c.rank = y.model.Clone(), y.rank.Clone()
	c.gpuFree = slices.Clone(y.gpuFree)
	c.batches, c.reqs = nil, nil
	return &c
}

func (y *system) result() Result {
	return Result{Requests: y.wHi - y.wLo, Served: y.served, Batches: y.batches, Decisions: y.decisions, Overrides: y.overrides}
}

// deadline is when request i's batch must finish executing.
func (y *system) deadline(i int) scheduler.Time {
	return y.arr[i].Add(y.s.SLO - y.s.Delays.Result)
}

// chooser is called at each decision, with the grant the rank loop could
// make at once: it may act (and report so) or leave the rules to decide.
type chooser func(g scheduler.Grant) (acted bool)

// play runs the cores from the current state until the clock would pass
// horizon or nothing is left, asking choose (if set) at each decision.
func (y *system) play(horizon scheduler.Time, choose chooser) {
	for y.err == nil {
		ta := scheduler.Never
		if y.next < len(y.arr) {
			ta = y.arr[y.next]
		}
		te := y.wakeAt()
		t := scheduler.MinTime(ta, te)
		if t == scheduler.Never || t > horizon {
			return
		}
		y.t = t
		if ta <= te {
			y.enqueue()
		}
		y.settle(choose, true)
	}
}

// wakeAt is the next moment something is due: a core's wake-up (the rank's
// only once a wait is over), or a GPU becoming grantable, which is a
// decision.
func (y *system) wakeAt() scheduler.Time {
	t := y.model.WakeAt()
	if y.holdFor <= y.next {
		t = scheduler.MinTime(t, y.rank.WakeAt())
	}
	if _, at := y.rank.NextGrant(0); at > y.t {
		t = scheduler.MinTime(t, at)
	}
	return t
}

// enqueue gives the model the arrivals due at y.t.
func (y *system) enqueue() {
	y.reqs = y.reqs[:0]
	for ; y.next < len(y.arr) && y.arr[y.next] == y.t; y.next++ {
		a := y.arr[y.next]
		y.reqs = append(y.reqs, scheduler.Request{ID: scheduler.RequestID(y.next), Arrival: a, Deadline: a.Add(y.s.SLO)})
	}
	y.handle(y.model.Enqueue(y.t, y.reqs))
}

// settle runs everything due at y.t until nothing more is. A decision is
// due when the model has a candidate and a GPU can be granted to it now
// (and the clairvoyant is not waiting for an arrival); decide says
// whether to look for one before the rank loop's next tick.
func (y *system) settle(choose chooser, decide bool) {
	for y.err == nil {
		progressed := false
		if y.model.WakeAt() <= y.t {
			y.handle(y.model.Tick(y.t))
			progressed = true
		}
		if decide && y.holdFor <= y.next {
			decide = false
			if g, at := y.rank.NextGrant(0); at <= y.t {
				if !y.trial {
					y.decisions++
				}
				if choose != nil && choose(g) {
					decide = true
					continue
				}
			}
		}
		if y.holdFor <= y.next && y.rank.WakeAt() <= y.t {
			for _, g := range y.rank.Tick(y.t) {
				y.handle(y.model.Grant(y.t, g))
				decide = true
			}
			progressed = true
		}
		if !progressed {
			return
		}
	}
}

// handle carries out one ModelCore output, as the simulator does.
func (y *system) handle(out *scheduler.ModelOutput) {
	for i := range out.Drops {
		y.end(int(out.Drops[i].Request.ID))
	}
	for i := range out.Plans {
		y.planned(&out.Plans[i])
	}
	if len(out.Returns) > 0 {
		for _, r := range out.Returns {
			y.rank.Return(r)
		}
	} else if out.CandidateChanged {
		y.rank.Update(0, out.Candidate)
	}
}

// end checks that request i is the next to end.
func (y *system) end(i int) {
	if i != y.head && y.err == nil {
		y.err = fmt.Errorf("lookahead: request %d ended at %v; request %d is the next due to", i, y.t, y.head)
	}
	y.head++
}

// planned checks a batch against the GPUs and its deadline, and counts it.
func (y *system) planned(p *scheduler.BatchPlan) {
	k := len(p.Requests)
	first := int(p.Requests[0].ID)
	for i := range p.Requests {
		y.end(int(p.Requests[i].ID))
	}
	switch {
	case p.ExecAt < y.gpuFree[p.GPU]:
		y.err = fmt.Errorf("lookahead: batch of %d at %v starts on GPU %d at %v, before its previous batch ends at %v", k, y.t, p.GPU, p.ExecAt, y.gpuFree[p.GPU])
	case p.ExecAt < y.t.Add(y.s.Delays.Dispatch(k)):
		y.err = fmt.Errorf("lookahead: batch of %d planned at %v starts at %v, before its inputs can arrive", k, y.t, p.ExecAt)
	case p.FinishAt > y.deadline(first):
		y.err = fmt.Errorf("lookahead: batch of %d started at %v finishes at %v, after its head's deadline %v", k, p.ExecAt, p.FinishAt, y.deadline(first))
	}
	if y.err != nil {
		return
	}
	y.gpuFree[p.GPU] = p.FinishAt
	if !y.first.planned {
		y.first = batch{planned: true, first: first, k: k, exec: p.ExecAt, at: y.t}
	}
	if y.trial {
		y.scored += max(0, min(first+k, y.cut)-first)
		return
	}
	if n := min(first+k, y.wHi) - max(first, y.wLo); n > 0 {
		y.served += n
		y.batches[k]++
	}
}

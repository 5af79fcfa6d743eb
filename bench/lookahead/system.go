package lookahead

import (
	"fmt"
	"sort"

	"github.com/symphony-serving/symphony/scheduler"
)

// pruneKeepFraction mirrors scheduler's: with a GPU in hand the head is kept
// if its batch is at least this fraction of the best window's and dropping
// would lose at least as many requests as the batch gains.
const pruneKeepFraction = 0.6

// system is one model's queue and its GPUs at virtual time t. The queue is
// arr[head:next]: requests arrive in order and leave from the head, served
// or dropped, so indices stand for requests.
type system struct {
	s        Setting
	arr      []scheduler.Time
	wLo, wHi int // the measured window's requests: arr[wLo:wHi]
	t        scheduler.Time
	head     int
	next     int
	free     []scheduler.Time // when each GPU finishes its last batch
	first    int              // the GPU that frees first

	// Accounting of the measured window (off during trials).
	trial     bool
	served    int
	batches   []int
	decisions int
	overrides Overrides
	// err records the first impossible batch, which ends the replay: a
	// check on this model itself, like the simulator's oracle.
	err error
	// A trial scores the requests below cut that it serves.
	cut    int
	scored int
}

func newSystem(s Setting, arr []scheduler.Time, from, to scheduler.Time) *system {
	y := &system{
		s:       s,
		arr:     arr,
		wLo:     sort.Search(len(arr), func(i int) bool { return arr[i] >= from }),
		wHi:     sort.Search(len(arr), func(i int) bool { return arr[i] >= to }),
		free:    make([]scheduler.Time, s.GPUs),
		batches: make([]int, s.Profile.MaxBatch()+1),
	}
	for i := range y.free {
		y.free[i] = scheduler.Past
	}
	if len(arr) > 0 {
		y.t = arr[0]
	}
	return y
}

// maxBatch is the profile's largest batch.
func (y *system) maxBatch() int { return y.s.Profile.MaxBatch() }

func (y *system) result() Result {
	return Result{Requests: y.wHi - y.wLo, Served: y.served, Batches: y.batches, Decisions: y.decisions, Overrides: y.overrides}
}

// deadline is when request i's batch must finish executing.
func (y *system) deadline(i int) scheduler.Time {
	return y.arr[i].Add(y.s.SLO - y.s.Delays.Result)
}

// fits reports whether k requests behind a head with deadline dl, granted
// now a GPU free at g, finish in time.
func (y *system) fits(g, dl scheduler.Time, k int) bool {
	// Plain arithmetic rather than Time.Add, which saturates: every time
	// here is finite but g, which may be Past and only meets max. This is
	// the replay's innermost loop.
	start := max(y.t+scheduler.Time(y.s.Delays.Dispatch(k)), g)
	return start+scheduler.Time(y.s.Profile.Latency(k)) <= dl
}

// largest is the biggest batch starting at queue position i that fits on a
// GPU free at g (0 if none).
func (y *system) largest(i int, g scheduler.Time) int {
	return y.largestUpTo(g, y.deadline(i), min(y.next-i, y.maxBatch()))
}

// largestUpTo is the biggest k ≤ hi for which fits(g, dl, k) holds (0 if
// none); the finish time grows with k, so a binary search works.
func (y *system) largestUpTo(g, dl scheduler.Time, hi int) int {
	lo := 0
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if y.fits(g, dl, mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// earliest is when the first GPU frees.
func (y *system) earliest() scheduler.Time { return y.free[y.first] }

// occupy makes the first GPU busy until finish and finds the new first.
func (y *system) occupy(finish scheduler.Time) {
	y.free[y.first] = finish
	for j, f := range y.free {
		if f < y.free[y.first] {
			y.first = j
		}
	}
}

// schedAt is sched_at of a batch of k behind request i: the last moment it
// could still take one more, its head's deadline less ℓ(k+1). A batch of
// the profile's largest size can take no more: it is due at once.
func (y *system) schedAt(i, k int) scheduler.Time {
	if k >= y.maxBatch() {
		return scheduler.Past
	}
	return y.deadline(i).Add(-y.s.Profile.Latency(k + 1))
}

// dropLate drops head requests that cannot finish even alone on a GPU
// granted now (ModelCore.update with no GPU in hand).
func (y *system) dropLate() {
	for y.head < y.next && !y.fits(scheduler.Past, y.deadline(y.head), 1) {
		y.head++
	}
}

// action is one decision with a GPU grantable: drop the queue before
// position i, then start requests [i, i+k) at start or, with k = 0, wait
// until the clock reaches until.
type action struct {
	i, k  int
	start scheduler.Time
	until scheduler.Time
}

// apply carries out a.
func (y *system) apply(a action, horizon scheduler.Time) bool {
	if a.i < y.head || a.i > y.next {
		y.err = fmt.Errorf("lookahead: decision at %v drops to position %d, outside the queue [%d, %d]", y.t, a.i, y.head, y.next)
		return false
	}
	if a.k == 0 {
		y.head = a.i
		return y.step(horizon, a.until)
	}
	g := y.earliest()
	end := a.i + a.k
	finish := a.start.Add(y.s.Profile.Latency(a.k))
	switch {
	case a.i < y.head || end > y.next:
		y.err = fmt.Errorf("lookahead: batch [%d, %d) at %v is outside the queue [%d, %d)", a.i, end, y.t, y.head, y.next)
	case a.start < g || a.start < y.t.Add(y.s.Delays.Dispatch(a.k)):
		y.err = fmt.Errorf("lookahead: batch of %d at %v starts at %v, before its GPU (free at %v) or its inputs", a.k, y.t, a.start, g)
	case finish > y.deadline(a.i):
		y.err = fmt.Errorf("lookahead: batch of %d started at %v finishes at %v, after its head's deadline %v", a.k, a.start, finish, y.deadline(a.i))
	}
	if y.err != nil {
		return false
	}
	y.occupy(finish)
	if y.trial {
		y.scored += max(0, min(end, y.cut)-a.i)
	} else {
		if n := min(end, y.wHi) - max(a.i, y.wLo); n > 0 {
			y.served += n
			y.batches[a.k]++
		}
	}
	y.head = end
	return true
}

// step moves the clock to the next event: arrivals, or the moment wake
// (a hold timer or a GPU becoming grantable) if sooner. It returns false
// when there is none before horizon.
func (y *system) step(horizon, wake scheduler.Time) bool {
	nt, arrival := scheduler.Never, false
	if y.next < len(y.arr) {
		nt, arrival = y.arr[y.next], true
	}
	if wake > y.t && wake < nt {
		nt, arrival = wake, false
	}
	if nt == scheduler.Never || nt > horizon {
		return false
	}
	y.t = nt
	for arrival && y.next < len(y.arr) && y.arr[y.next] == nt {
		y.next++ // simultaneous arrivals come together, as in the simulator
	}
	return true
}

// due returns whether a decision is due: requests are queued and a GPU can
// be granted (the rank loop grants a GPU ahead of its free time by the
// candidate's dispatch delay). If not, it returns when to look again.
func (y *system) due() (bool, scheduler.Time) {
	if y.head == y.next {
		return false, scheduler.Never
	}
	k := y.largest(y.head, scheduler.Past)
	grantable := y.earliest().Add(-y.s.Delays.Dispatch(k))
	return grantable <= y.t, grantable
}

// play runs the rules from the current state until the clock would pass
// horizon or nothing is left, letting choose (if set) override each
// decision.
func (y *system) play(horizon scheduler.Time, choose func(rules action) action) {
	for y.err == nil {
		y.dropLate()
		ok, wake := y.due()
		if !ok {
			if !y.step(horizon, wake) {
				return
			}
			continue
		}
		if !y.trial {
			y.decisions++
		}
		a := y.rules()
		if choose != nil {
			a = choose(a)
		}
		if !y.apply(a, horizon) {
			return
		}
	}
}

// rules is what the model of Symphony's rules does now, a GPU being
// grantable. The candidate (the largest batch behind the head, no GPU in
// hand) is held until sched_at = deadline − ℓ(bs+1), less its dispatch
// delay (the rank loop's timer); then the GPU is granted, and, as
// ModelCore.Grant does, the heads it came too late for are dropped and the
// batch re-formed for its free time with the keep-up and window prunes of
// DropWindow, to start at the new head's sched_at if that is later. If
// nothing fits the GPU, the queue is dropped and the GPU handed back.
func (y *system) rules() action {
	bs := y.largest(y.head, scheduler.Past)
	if hold := y.schedAt(y.head, bs).Add(-y.s.Delays.Dispatch(bs)); hold > y.t {
		return action{i: y.head, until: hold}
	}
	g := y.earliest()
	h := y.head
	for h < y.next && !y.fits(g, y.deadline(h), 1) {
		h++
	}
	if h == y.next {
		return action{i: h, until: scheduler.Never}
	}
	i, k := h, y.largest(h, g)
	if k < y.next-h && k < y.maxBatch() {
		i, k = y.pruneToKeepUp(g, i, k)
		i, k = y.pruneWindow(g, i, k)
	}
	start := scheduler.MaxTime(y.t.Add(y.s.Delays.Dispatch(k)), g)
	return action{i: i, k: k, start: scheduler.MaxTime(start, y.schedAt(i, k))}
}

func (y *system) keepsUp(b int) bool {
	return float64(y.s.GPUs)*y.s.Profile.Throughput(b) >= y.s.Rate
}

// pruneToKeepUp mirrors ModelCore.pruneToKeepUp: if the batch behind head
// h is below the keep-up size, drop the fewest heads that leave a window
// of that size; under overload, go for the largest window.
func (y *system) pruneToKeepUp(g scheduler.Time, h, k0 int) (int, int) {
	if y.keepsUp(k0) {
		return h, k0
	}
	// The most a batch can hold from now on: one behind a request
	// arriving now.
	fresh := y.largestUpTo(g, y.t.Add(y.s.SLO-y.s.Delays.Result), y.maxBatch())
	if fresh == 0 || !y.keepsUp(fresh) {
		i, k, short := y.largestWindow(g, h, k0)
		if short {
			return h, k0
		}
		return i, k
	}
	keep := k0 + 1
	for keep < fresh && !y.keepsUp(keep) {
		keep++
	}
	for i := h + 1; i+keep <= y.next; i++ {
		if y.fits(g, y.deadline(i), keep) {
			return i, y.largest(i, g)
		}
	}
	return h, k0
}

// pruneWindow mirrors ModelCore.pruneWindow.
func (y *system) pruneWindow(g scheduler.Time, h, k0 int) (int, int) {
	i, k, short := y.largestWindow(g, h, k0)
	if short || k-k0 <= i-h && float64(k0) >= pruneKeepFraction*float64(k) {
		return h, k0
	}
	return i, k
}

// largestWindow mirrors ModelCore.largestWindow: the window start after h
// with the biggest batch on g, if bigger than k0, and whether that window
// is limited by the queue's length rather than its head's deadline.
func (y *system) largestWindow(g scheduler.Time, h, k0 int) (bestI, bestK int, short bool) {
	bestI, bestK = h, k0
	for i := h + 1; i < y.next && y.next-i > bestK; i++ {
		if k := y.largest(i, g); k > bestK {
			bestI, bestK = i, k
		}
		if bestK >= y.maxBatch() {
			break
		}
	}
	short = bestI > h && bestK < y.maxBatch() && y.fits(g, y.deadline(bestI), bestK+1)
	return bestI, bestK, short
}

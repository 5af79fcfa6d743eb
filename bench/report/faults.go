package report

import (
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/symphony-serving/symphony/bench/workload"
)

// FaultReport is how a run fared under its fault scenario: the faults,
// each with how long the cluster took to recover from it, and per phase
// (the stretches of the measured window between the faults' starts and
// ends) the requests that arrived in it and how they ended.
type FaultReport struct {
	Faults []FaultEvent `json:"faults"`
	Phases []Phase      `json:"phases"`
	// RecoveryThreshold is the bad rate that a RecoveryWindow of requests
	// after a fault must stay within for the cluster to count as
	// recovered: the bad rate before the first fault, plus a point or
	// doubled, whichever is more.
	RecoveryThreshold float64 `json:"recovery_threshold"`
	// BucketSeconds is the width of the Timeline's buckets.
	BucketSeconds float64 `json:"bucket_seconds"`
	// Timeline counts requests by arrival, warmup included.
	Timeline []TimelineBucket `json:"timeline"`
}

// FaultEvent is one fault of the scenario as it was played.
type FaultEvent struct {
	Description string `json:"description"`
	Action      string `json:"action"`
	Target      string `json:"target"`
	// AtSeconds is when it hit, EndSeconds when its own disturbance was
	// over (a stall's end, a restart), from the start of the run.
	AtSeconds  float64 `json:"at_seconds"`
	EndSeconds float64 `json:"end_seconds"`
	// RecoverySeconds is how long after EndSeconds requests took to fare
	// as they did before the first fault: from EndSeconds to the first
	// bucket from which the next RecoveryWindow of requests, taken
	// together, had a bad rate within RecoveryThreshold. Recovered is false
	// when no such bucket came before the next fault (less the longest
	// SLO: requests that close to it may be its victims) or the window's
	// end; RecoverySeconds is then all the time there was.
	RecoverySeconds float64 `json:"recovery_seconds"`
	Recovered       bool    `json:"recovered"`
}

// Phase is a stretch of the measured window between fault boundaries.
type Phase struct {
	FromSeconds float64 `json:"from_seconds"`
	ToSeconds   float64 `json:"to_seconds"`
	// Label says what the phase is: before the faults, which faults are
	// in effect, or after which.
	Label      string  `json:"label"`
	Offered    uint64  `json:"offered"`
	Good       uint64  `json:"good"`
	Late       uint64  `json:"late"`
	Dropped    uint64  `json:"dropped"`
	Failed     uint64  `json:"failed"`
	GoodputRPS float64 `json:"goodput_rps"`
	BadRate    float64 `json:"bad_rate"`
	// Reasons counts the bad requests by why they were bad ("late", drop
	// reasons, "failed: ..." kinds), as the run's DropReasons does.
	Reasons map[string]uint64 `json:"reasons,omitempty"`
}

// TimelineBucket counts the requests that arrived in one bucket.
type TimelineBucket struct {
	StartSeconds float64 `json:"start_seconds"`
	Offered      uint64  `json:"offered"`
	Good         uint64  `json:"good"`
	Bad          uint64  `json:"bad"`
}

// TimelineBucketWidth is the fault timeline's resolution: fine enough to
// time a recovery of a fraction of a second, coarse enough that a bucket
// of a demo's load holds a hundred requests or more.
const TimelineBucketWidth = 100 * time.Millisecond

// RecoveryWindow is how long the bad rate must stay within the threshold,
// taken together, for the cluster to count as recovered: long enough that
// one lucky bucket in a backlog does not count, short enough that a
// hiccup seconds later (a loaded machine's) does not undo a recovery.
const RecoveryWindow = time.Second

// Outcome is how one request ended, for a FaultTally.
type Outcome uint8

const (
	// OutcomeGood: answered within its SLO.
	OutcomeGood Outcome = iota
	// OutcomeLate: answered after its SLO.
	OutcomeLate
	// OutcomeDropped: ended without running, with a reason.
	OutcomeDropped
	// OutcomeFailed: ended with an error.
	OutcomeFailed
)

// FaultTally counts a run's requests by arrival against its fault
// scenario. The simulator and the live load generator feed it alike, one
// Add per request, so that their fault reports compare. It is not safe for
// concurrent use: give each goroutine its own and Merge them.
type FaultTally struct {
	faults           []workload.Fault
	longestSLO       time.Duration
	winStart, winEnd time.Duration
	bounds           []time.Duration // phase boundaries, winStart..winEnd
	phases           []Phase
	timeline         []TimelineBucket
}

// NewFaultTally returns a tally for a run of w's fault scenario of
// runLength (warmup included) whose measured window is [winStart, winEnd).
func NewFaultTally(w *workload.Workload, winStart, winEnd, runLength time.Duration) *FaultTally {
	faults := w.Faults
	t := &FaultTally{faults: faults, winStart: winStart, winEnd: winEnd}
	for _, m := range w.Models {
		t.longestSLO = max(t.longestSLO, m.SLO)
	}
	bounds := []time.Duration{winStart, winEnd}
	for _, f := range faults {
		for _, b := range []time.Duration{f.At, f.End()} {
			if b > winStart && b < winEnd {
				bounds = append(bounds, b)
			}
		}
	}
	slices.Sort(bounds)
	t.bounds = slices.Compact(bounds)
	t.phases = make([]Phase, len(t.bounds)-1)
	for i := range t.phases {
		t.phases[i].Reasons = map[string]uint64{}
	}
	n := int((runLength + TimelineBucketWidth - 1) / TimelineBucketWidth)
	t.timeline = make([]TimelineBucket, n)
	return t
}

// Add counts one request that arrived at at (from the run's start) and
// ended with o; reason says why it was bad ("" for a good one).
func (t *FaultTally) Add(at time.Duration, o Outcome, reason string) {
	if at < 0 {
		return
	}
	bad := o != OutcomeGood
	if i := int(at / TimelineBucketWidth); i < len(t.timeline) {
		b := &t.timeline[i]
		b.Offered++
		if bad {
			b.Bad++
		} else {
			b.Good++
		}
	}
	if at < t.winStart || at >= t.winEnd {
		return
	}
	p := &t.phases[sort.Search(len(t.bounds), func(i int) bool { return t.bounds[i] > at })-1]
	p.Offered++
	switch o {
	case OutcomeGood:
		p.Good++
	case OutcomeLate:
		p.Late++
	case OutcomeDropped:
		p.Dropped++
	case OutcomeFailed:
		p.Failed++
	}
	if bad {
		if reason == "" {
			reason = "late"
		}
		p.Reasons[reason]++
	}
}

// Merge adds o's counts, a tally of the same run, into t.
func (t *FaultTally) Merge(o *FaultTally) {
	for i := range t.phases {
		p, q := &t.phases[i], &o.phases[i]
		p.Offered += q.Offered
		p.Good += q.Good
		p.Late += q.Late
		p.Dropped += q.Dropped
		p.Failed += q.Failed
		for k, n := range q.Reasons {
			p.Reasons[k] += n
		}
	}
	for i := range t.timeline {
		b, c := &t.timeline[i], &o.timeline[i]
		b.Offered += c.Offered
		b.Good += c.Good
		b.Bad += c.Bad
	}
}

// Report builds the fault report; nil when the run had no faults.
func (t *FaultTally) Report() *FaultReport {
	if len(t.faults) == 0 {
		return nil
	}
	r := &FaultReport{BucketSeconds: TimelineBucketWidth.Seconds(), Timeline: slices.Clone(t.timeline)}
	for i := range r.Timeline {
		r.Timeline[i].StartSeconds = (time.Duration(i) * TimelineBucketWidth).Seconds()
	}
	for i := range t.phases {
		p := t.phases[i]
		p.Reasons = maps.Clone(p.Reasons)
		if len(p.Reasons) == 0 {
			p.Reasons = nil
		}
		from, to := t.bounds[i], t.bounds[i+1]
		p.FromSeconds, p.ToSeconds = from.Seconds(), to.Seconds()
		if s := (to - from).Seconds(); s > 0 {
			p.GoodputRPS = float64(p.Good) / s
		}
		if p.Offered > 0 {
			p.BadRate = float64(p.Offered-p.Good) / float64(p.Offered)
		}
		p.Label = t.label(from)
		r.Phases = append(r.Phases, p)
	}
	r.RecoveryThreshold = t.threshold()
	for i, f := range t.faults {
		next := t.winEnd
		if i+1 < len(t.faults) {
			// A request that arrives within an SLO of the next fault
			// may be hit by it: it says nothing of this one.
			next = t.faults[i+1].At - t.longestSLO
		}
		ev := FaultEvent{Description: f.String(), Action: f.Action.String(), Target: f.Target.String(),
			AtSeconds: f.At.Seconds(), EndSeconds: f.End().Seconds()}
		ev.RecoverySeconds, ev.Recovered = t.recovery(f.End(), max(next, f.End()), r.RecoveryThreshold)
		r.Faults = append(r.Faults, ev)
	}
	return r
}

// label names the phase that starts at from.
func (t *FaultTally) label(from time.Duration) string {
	var on []string
	var after string
	for _, f := range t.faults {
		switch {
		case f.At <= from && from < f.End():
			on = append(on, f.String())
		case f.End() <= from:
			after = "after " + f.String()
		}
	}
	switch {
	case len(on) > 0:
		return strings.Join(on, "; ")
	case after != "":
		return after
	}
	return "before the faults"
}

// threshold is the bad rate a bucket may have and count as recovered: the
// bad rate of the window before the first fault, plus a point or doubled,
// whichever is more.
func (t *FaultTally) threshold() float64 {
	var offered, bad uint64
	first := t.winEnd
	if len(t.faults) > 0 {
		first = t.faults[0].At
	}
	for i, b := range t.timeline {
		at := time.Duration(i) * TimelineBucketWidth
		if at >= t.winStart && at+TimelineBucketWidth <= first {
			offered += b.Offered
			bad += b.Bad
		}
	}
	base := 0.0
	if offered > 0 {
		base = float64(bad) / float64(offered)
	}
	return max(base+0.01, 2*base)
}

// recovery finds the first bucket from from on at which the next
// RecoveryWindow of requests (up to to), taken together, is within the
// threshold, and returns how long after from it starts; false if there is
// none.
func (t *FaultTally) recovery(from, to time.Duration, threshold float64) (float64, bool) {
	first := int(from / TimelineBucketWidth)
	last := min(int((to+TimelineBucketWidth-1)/TimelineBucketWidth), len(t.timeline))
	span := int(RecoveryWindow / TimelineBucketWidth)
	for i := first; i < last; i++ {
		var offered, bad uint64
		for _, b := range t.timeline[i:min(i+span, last)] {
			offered += b.Offered
			bad += b.Bad
		}
		if offered > 0 && float64(bad) <= threshold*float64(offered) {
			return max(time.Duration(i)*TimelineBucketWidth-from, 0).Seconds(), true
		}
	}
	return max(to-from, 0).Seconds(), false
}

package lookahead

import (
	"sync"

	"github.com/symphony-serving/symphony/scheduler"
)

// playClairvoyant runs the whole replay, deciding each time by trial play.
// A decision's trials are independent, so o.Workers goroutines share them;
// the choice depends only on the scores, never on which worker ran what.
func (y *system) playClairvoyant(o Options) {
	trials := make([]*system, o.Workers)
	for w := range trials {
		trials[w] = &system{}
	}
	var options []action
	var scores []int
	var errs []error
	total := len(y.arr)
	y.play(scheduler.Never, func(rules action) action {
		if o.Progress != nil && y.decisions%1024 == 0 && total > 0 {
			o.Progress(float64(y.next) / float64(total))
		}
		options = y.options(rules, o, options[:0])
		horizon := y.t.Add(o.Horizon)
		cut := y.head
		for cut < len(y.arr) && y.deadline(cut) <= horizon {
			cut++
		}
		scores = append(scores[:0], make([]int, len(options))...)
		errs = append(errs[:0], make([]error, len(options))...)
		try := func(trial *system, first, stride int) {
			for n := first; n < len(options); n += stride {
				trial.copyFrom(y)
				trial.trial, trial.cut, trial.scored = true, cut, 0
				if trial.apply(options[n], horizon) {
					trial.play(horizon, nil)
				}
				scores[n], errs[n] = trial.scored, trial.err
			}
		}
		workers := min(len(trials), len(options))
		var wg sync.WaitGroup
		for w := 1; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				try(trials[w], w, workers)
			}()
		}
		try(trials[0], 0, workers)
		wg.Wait()
		best := 0
		for n := range options {
			if errs[n] != nil {
				y.err = errs[n]
				return rules
			}
			if scores[n] > scores[best] {
				best = n
			}
		}
		if best != 0 {
			y.overrides.count(rules, options[best])
		}
		return options[best]
	})
}

// options lists what the clairvoyant scheduler tries: the rules' own action
// first (it wins ties), then waiting for the next arrival, then starting
// now a batch behind up to MaxPrune dropped heads, from the largest that
// fits down to MaxShrink fewer (among equal scores the bigger batch wins,
// since the trial does not see the GPU time it costs past the horizon).
func (y *system) options(rules action, o Options, out []action) []action {
	out = append(out, rules)
	if rules.k > 0 && y.next < len(y.arr) {
		out = append(out, action{i: y.head, until: y.arr[y.next]})
	}
	g := y.earliest()
	for i := y.head; i < y.next && i <= y.head+o.MaxPrune; i++ {
		kmax := y.largest(i, g)
		for k := kmax; k >= max(1, kmax-o.MaxShrink); k-- {
			a := action{i: i, k: k, start: scheduler.MaxTime(y.t.Add(y.s.Delays.Dispatch(k)), g)}
			if a != rules {
				out = append(out, a)
			}
		}
	}
	return out
}

// count files the clairvoyant scheduler's choice a against the rules'.
func (o *Overrides) count(rules, a action) {
	switch {
	case rules.k == 0:
		o.StartEarly++
	case a.k == 0:
		o.Wait++
	case a.i != rules.i:
		o.OtherHeads++
	case a.k < rules.k:
		o.SmallerBatch++
	default:
		o.StartEarly++ // the same batch, without the rules' hold
	}
}

// copyFrom makes y a copy of x for trial play, reusing y's GPU slice.
func (y *system) copyFrom(x *system) {
	free := append(y.free[:0], x.free...)
	*y = *x
	y.free = free
	y.batches = nil
}

package lookahead

import (
	"fmt"
	"sort"
	"sync"

	"github.com/symphony-serving/symphony/scheduler"
)

// option is one thing the clairvoyant scheduler may do at a decision: what
// the rules do (the zero option), wait for the next arrival, or grant the
// GPU at once for the size requests behind skip dropped heads.
type option struct {
	wait       bool
	skip, size int
}

// trial is how an option fared: the requests it served that are due within
// the horizon, and the first batch it planned.
type trial struct {
	score int
	first batch
	err   error
}

// playClairvoyant runs the whole replay, deciding each time by trial play
// on clones of the cores. A decision's trials are independent, so
// o.Workers goroutines share them; the choice depends only on the scores,
// never on which worker ran what.
func (y *system) playClairvoyant(o Options) {
	var options []option
	var trials []trial
	total := len(y.arr)
	y.play(scheduler.Never, func(g scheduler.Grant) bool {
		if o.Progress != nil && y.decisions%1024 == 0 && total > 0 {
			o.Progress(float64(y.next) / float64(total))
		}
		horizon := y.t.Add(o.Horizon)
		cut := sort.Search(len(y.arr), func(i int) bool { return y.deadline(i) > horizon })
		// The rules' own trial first: it says what the rules do now.
		rules := y.try(option{}, horizon, cut, batch{})
		if rules.err != nil {
			y.err = rules.err
			return false
		}
		ruleBatch := rules.first
		if !ruleBatch.planned || ruleBatch.at != y.t {
			ruleBatch = batch{} // the rules hold
		}
		options = y.options(g, ruleBatch, o, options[:0])
		trials = append(trials[:0], make([]trial, len(options))...)
		trials[0] = rules
		workers := min(o.Workers, len(options)-1)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 1 + w; n < len(options); n += workers {
					trials[n] = y.try(options[n], horizon, cut, ruleBatch)
				}
			}()
		}
		wg.Wait()
		best := 0
		for n := range options {
			if trials[n].err != nil {
				y.err = trials[n].err
				return false
			}
			if trials[n].score > trials[best].score {
				best = n
			}
		}
		if best == 0 {
			return false
		}
		y.overrides.count(ruleBatch, options[best], trials[best].first)
		return y.apply(options[best], y.t)
	})
}

// options lists what the clairvoyant scheduler tries: the rules' own
// choice first (it wins ties), then, if the rules start a batch, waiting
// for the next arrival, then starting at once on the GPU g the batches
// behind up to MaxPrune dropped heads, from the largest that fits down to
// MaxShrink fewer (among equal scores the bigger batch wins, since the
// trial does not see the GPU time it costs past the horizon). The model
// core says what fits.
func (y *system) options(g scheduler.Grant, rules batch, o Options, out []option) []option {
	out = append(out, option{})
	if rules.planned && y.next < len(y.arr) {
		out = append(out, option{wait: true})
	}
	for skip := 0; skip <= o.MaxPrune; skip++ {
		largest := y.model.LargestBatch(y.t, g.FreeAt, skip)
		for k := largest; k >= max(1, largest-o.MaxShrink); k-- {
			out = append(out, option{skip: skip, size: k})
		}
	}
	return out
}

// try plays option a forward on a clone of y until horizon under the
// rules. A trial whose first batch is the rules' own (rules) stops there:
// it would score the same, and ties go to the rules anyway.
func (y *system) try(a option, horizon scheduler.Time, cut int, rules batch) trial {
	x := y.clone()
	x.trial, x.cut, x.scored, x.first = true, cut, 0, batch{}
	x.apply(a, x.t)
	x.settle(nil, false)
	if rules.planned && x.first == rules {
		return trial{first: x.first}
	}
	x.play(horizon, nil)
	return trial{score: x.scored, first: x.first, err: x.err}
}

// apply carries out option a at now and reports whether it acted (the
// rules' own option, and waiting, leave the rank loop to act).
func (y *system) apply(a option, now scheduler.Time) bool {
	switch {
	case a.wait:
		y.holdFor = y.next + 1
		return false
	case a.size == 0:
		return false
	}
	g, ok := y.rank.GrantEarly(now, 0)
	if !ok {
		y.err = fmt.Errorf("lookahead: no GPU to grant early at %v", now)
		return false
	}
	out, err := y.model.GrantBatch(now, g, a.skip, a.size)
	if err != nil {
		y.err = fmt.Errorf("lookahead: %w", err)
		return false
	}
	y.handle(out)
	return true
}

// count files the clairvoyant scheduler's choice a, whose first batch was
// chosen, against the rules' batch (none if they held).
func (o *Overrides) count(rules batch, a option, chosen batch) {
	switch {
	case !rules.planned:
		o.StartEarly++
	case a.wait:
		o.Wait++
	case chosen.first != rules.first:
		o.OtherHeads++
	case chosen.k < rules.k:
		o.SmallerBatch++
	default:
		o.StartEarly++ // the same batch, without the rules' hold
	}
}

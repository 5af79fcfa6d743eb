package report

import (
	"fmt"
	"math"
	"strings"
)

const (
	// DefaultTargetBadRate is the goodput criterion: every model's bad
	// rate at or below 1%, the paper's p99-within-SLO goodput
	// (docs/workload-format.md, "--find-goodput").
	DefaultTargetBadRate = 0.01
	// DefaultSearchPrecision is the relative width of the bracket at
	// which a search stops when its caller sets none: 0.5%, fine enough
	// for the simulator, whose steps cost milliseconds to seconds.
	DefaultSearchPrecision = 0.005

	// maxBracketSteps bounds the doubling of an uncapped search whose
	// target always holds: a run that offers no load never fails.
	maxBracketSteps = 40
	// minMultiplier is the smallest multiplier a search halves down to
	// before it gives up: a millionth of the load still failing means no
	// load passes.
	minMultiplier = 1e-6
)

// SearchOptions tune a goodput search.
type SearchOptions struct {
	// TargetBadRate is the largest bad rate any model may have; 0 means
	// DefaultTargetBadRate.
	TargetBadRate float64
	// Precision is the relative width at which the search stops; 0 means
	// DefaultSearchPrecision.
	Precision float64
	// MaxSteps caps the runs of the search (0: no cap), for runs that
	// cost real time: the live load generator's steps each take the
	// workload's warmup and duration.
	MaxSteps int
	// Step, when set, is called after each run of the search.
	Step func(SearchStep)
}

// Target is the bad-rate target o sets, the default where it sets none.
func (o SearchOptions) Target() float64 {
	if o.TargetBadRate > 0 {
		return o.TargetBadRate
	}
	return DefaultTargetBadRate
}

// Passes reports whether a run whose worst model has bad rate worst meets
// the target: at or below it, as the documented "stays at or below 1%".
func (o SearchOptions) Passes(worst float64) bool { return worst <= o.Target() }

// MeasurableRequests is the fewest requests whose bad rate can show the
// target: ⌈1/target⌉, 100 at 1%. Below it one bad request is already above
// the target, so a model offered fewer would fail on a single unlucky
// request, however light the load.
func (o SearchOptions) MeasurableRequests() uint64 {
	return uint64(math.Ceil(1/o.Target() - 1e-9))
}

// Judge is the search's verdict on one run, as a SearchStep without the
// multiplier and rates: every model offered at least MeasurableRequests
// requests must meet the target on its own (Passes), and WorstModel and
// WorstBadRate are the worst of those (none when none had a bad request).
// The models offered fewer, too few to measure the target alone, are
// judged together as Sparse: their bad requests must stay within the
// target of their requests, or of MeasurableRequests when the group holds
// fewer (at 1%: at most one bad request in a group of under 100). A model
// with no requests counted (a report without counts) is judged on its bad
// rate alone. On a run whose every model was offered enough requests, the
// verdict is the worst model's, as it has always been.
func (o SearchOptions) Judge(r *Report) SearchStep {
	least := o.MeasurableRequests()
	var st SearchStep
	var sparse SparseGroup
	for i := range r.Models {
		m := &r.Models[i]
		if m.Offered > 0 && m.Offered < least {
			sparse.Models++
			sparse.Offered += m.Offered
			sparse.Bad += m.Late + m.Dropped + m.Failed
			continue
		}
		if m.BadRate > st.WorstBadRate {
			st.WorstModel, st.WorstBadRate = m.Name, m.BadRate
		}
	}
	if sparse.Models > 0 {
		st.Sparse = &sparse
	}
	st.OK = o.Passes(st.WorstBadRate) && o.sparsePasses(st.Sparse)
	return st
}

// sparsePasses reports whether a step's sparse models (nil: none) meet the
// target together: bad requests within the target of their requests, or
// of MeasurableRequests when they had fewer.
func (o SearchOptions) sparsePasses(sp *SparseGroup) bool {
	return sp == nil || float64(sp.Bad) <= o.Target()*float64(max(sp.Offered, o.MeasurableRequests()))
}

// why says what failed a step: its worst model's bad rate, its sparse
// models' bad requests, or both.
func (st SearchStep) why(o SearchOptions) string {
	var parts []string
	if !o.Passes(st.WorstBadRate) {
		parts = append(parts, fmt.Sprintf("%s %.2f%% bad", st.WorstModel, 100*st.WorstBadRate))
	}
	if sp := st.Sparse; !o.sparsePasses(sp) {
		parts = append(parts, fmt.Sprintf("%d bad of %d requests to the %d models offered under %d each", sp.Bad, sp.Offered, sp.Models, o.MeasurableRequests()))
	}
	return strings.Join(parts, "; ")
}

// Bracket is where a multiplier search ended: Lo is the largest multiplier
// that passed (0 when none did), Hi the smallest that failed (+Inf when
// none did), Steps the runs that completed.
type Bracket struct {
	Lo, Hi float64
	Steps  int
}

// Found reports whether any multiplier passed.
func (b Bracket) Found() bool { return b.Lo > 0 }

// SearchMultiplier finds the largest load multiplier k for which ok(k)
// holds, to a relative precision prec, given that ok turns false as k grows:
// the one bisection behind every goodput search (the simulator's, the live
// load generator's and the lookahead study's), so that they try the same
// multipliers and agree on what they found.
//
// It brackets the answer by doubling or halving from 1, then bisects until
// Hi−Lo ≤ prec·Lo (prec ≤ 0: DefaultSearchPrecision); ok sees every multiplier tried and keeps what it needs
// of each run. It stops early after maxSteps runs when maxSteps > 0, with
// the bracket so far; Lo stays 0 if ok fails even at a millionth of the
// load. An error from ok ends the search with the bracket so far, and so
// does, without a step cap, ok holding at every load tried (2^39 times the
// load).
func SearchMultiplier(ok func(k float64) (bool, error), prec float64, maxSteps int) (Bracket, error) {
	if prec <= 0 {
		prec = DefaultSearchPrecision
	}
	b := Bracket{Hi: math.Inf(1)}
	k := 1.0
	for maxSteps <= 0 || b.Steps < maxSteps {
		good, err := ok(k)
		if err != nil {
			return b, err
		}
		b.Steps++
		if good {
			b.Lo = k
		} else {
			b.Hi = k
		}
		switch {
		case math.IsInf(b.Hi, 1):
			if maxSteps <= 0 && b.Steps >= maxBracketSteps {
				return b, fmt.Errorf("goodput search: the target still holds at %.3gx the offered load; is any load offered?", b.Lo)
			}
			k = 2 * b.Lo
		case b.Lo == 0:
			k = b.Hi / 2
			if k < minMultiplier {
				return b, nil
			}
		case b.Hi-b.Lo <= prec*b.Lo:
			return b, nil
		default:
			k = (b.Lo + b.Hi) / 2
		}
	}
	return b, nil
}

// WorstModel is the model of r with the highest bad rate, the first in
// the report's order on a tie, and none ("", 0) when no model had a bad
// request, since naming one model of many at 0% would only point a reader
// at a model with nothing wrong. A goodput search judges a run by it when
// every model was offered enough requests to measure the target; Judge
// says how it judges the models that were not.
func WorstModel(r *Report) (name string, badRate float64) {
	for _, m := range r.Models {
		if m.BadRate > badRate {
			name, badRate = m.Name, m.BadRate
		}
	}
	return name, badRate
}

// FindGoodput searches for the largest multiplier of every model's rate at
// which every model's bad rate stays within the target (each run judged by
// Judge, which takes the models offered too few requests to measure the
// target together), run(k) being the run at multiplier k, and returns the report of the best passing run with
// the search recorded in it (Report.GoodputSearch), and the bracket. It is
// the one goodput search of `symphony sim`, `symphony demo` and `symphony
// bench`; only run differs.
//
// A run that fails ends the search with its error, wrapped with the
// multiplier, and the best passing report so far (nil when none passed; its
// search holds the steps done), a lower bound worth keeping when each step
// cost real time; so does an uncapped search whose target always holds.
// When no multiplier passes, the report is nil and the error says so, and
// what failed the last (lowest) run.
func FindGoodput(run func(k float64) (*Report, error), o SearchOptions) (*Report, Bracket, error) {
	search := &GoodputSearch{TargetBadRate: o.Target()}
	var best *Report
	done := func() *Report {
		if best != nil {
			search.GoodputRPS = best.GoodputRPS
			best.GoodputSearch = search
		}
		return best
	}
	b, err := SearchMultiplier(func(k float64) (bool, error) {
		rep, err := run(k)
		if err != nil {
			return false, fmt.Errorf("goodput search at %.4gx: %w", k, err)
		}
		st := o.Judge(rep)
		st.Multiplier, st.OfferedRPS, st.GoodputRPS = k, rep.OfferedRPS, rep.GoodputRPS
		search.Steps = append(search.Steps, st)
		if o.Step != nil {
			o.Step(st)
		}
		if st.OK && (best == nil || k > search.Multiplier) {
			best, search.Multiplier = rep, k
		}
		return st.OK, nil
	}, o.Precision, o.MaxSteps)
	switch {
	case err != nil:
		return done(), b, err
	case !b.Found():
		why := ""
		if n := len(search.Steps); n > 0 {
			why = " (" + search.Steps[n-1].why(o) + ")"
		}
		return nil, b, fmt.Errorf("goodput search: a model's bad rate is above %g%% even at %.3gx the offered load%s", 100*o.Target(), b.Hi, why)
	}
	return done(), b, nil
}

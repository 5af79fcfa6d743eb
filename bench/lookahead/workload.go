package lookahead

import (
	"fmt"

	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/scheduler"
)

// Replay is a single-model workload made ready for Rules and Clairvoyant:
// its setting, every arrival the simulator would generate, and the
// measured window.
type Replay struct {
	Model    string
	Setting  Setting
	Arrivals []scheduler.Time
	From, To scheduler.Time
}

// FromWorkload generates the arrivals of w, which must hold exactly one
// model on a homogeneous cluster, with the same generator and seed as the
// simulator, so that both see the same requests.
func FromWorkload(w *workload.Workload) (*Replay, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	if len(w.Models) != 1 {
		return nil, fmt.Errorf("lookahead: workload %s has %d models; it replays exactly one", w.Source, len(w.Models))
	}
	if w.Epoch != nil {
		return nil, fmt.Errorf("lookahead: workload %s runs an epoch job; it replays a fixed cluster", w.Source)
	}
	m := &w.Models[0]
	end := w.Warmup + w.Duration
	r := &Replay{
		Model: m.Name,
		Setting: Setting{
			Profile: m.Profile,
			SLO:     m.SLO,
			GPUs:    w.Cluster.GPUs,
			Delays:  w.Network,
			Rate:    m.MeanRate(w.Warmup, end),
		},
		From: scheduler.Time(w.Warmup),
		To:   scheduler.Time(end),
	}
	gen := workload.NewGenerator(w, end)
	for {
		_, at, ok := gen.Peek()
		if !ok {
			break
		}
		gen.Pop()
		r.Arrivals = append(r.Arrivals, at)
	}
	return r, r.Setting.Validate()
}

// OfferedRPS is the measured window's arrival rate.
func (r *Replay) OfferedRPS() float64 {
	n := 0
	for _, a := range r.Arrivals {
		if a >= r.From && a < r.To {
			n++
		}
	}
	return float64(n) / r.To.Sub(r.From).Seconds()
}

// Rules replays the arrivals under the rules.
func (r *Replay) Rules() (Result, error) { return Rules(r.Setting, r.Arrivals, r.From, r.To) }

// Clairvoyant replays the arrivals under the clairvoyant scheduler.
func (r *Replay) Clairvoyant(o Options) (Result, error) {
	return Clairvoyant(r.Setting, r.Arrivals, r.From, r.To, o)
}

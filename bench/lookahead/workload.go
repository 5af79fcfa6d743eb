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

// FromWorkload generates the arrivals of w with the same generator and
// seed as the simulator, so that both see the same requests. w must hold
// exactly one model on a fixed cluster of one kind of GPU, scheduled by the
// rules this package replays: the symphony policy with its default
// schedulable condition (sched-at) and drop policy (window).
func FromWorkload(w *workload.Workload) (*Replay, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	switch {
	case len(w.Models) != 1:
		return nil, fmt.Errorf("lookahead: workload %s has %d models; it replays exactly one", w.Source, len(w.Models))
	case w.Epoch != nil:
		return nil, fmt.Errorf("lookahead: workload %s runs an epoch job; it replays a fixed cluster", w.Source)
	case len(w.Cluster.GPUTypes) > 1:
		return nil, fmt.Errorf("lookahead: workload %s has %d GPU types; it replays one kind of GPU", w.Source, len(w.Cluster.GPUTypes))
	case w.Policy != scheduler.PolicySymphony:
		return nil, fmt.Errorf("lookahead: workload %s has policy %v; it models the symphony policy's rules only", w.Source, w.Policy)
	case w.Schedulable != scheduler.SchedulableDefault && w.Schedulable != scheduler.SchedulableSchedAt:
		return nil, fmt.Errorf("lookahead: workload %s has schedulable %v; it models sched-at only", w.Source, w.Schedulable)
	case w.Drop != scheduler.DropDefault && w.Drop != scheduler.DropWindow:
		return nil, fmt.Errorf("lookahead: workload %s has drop %v; it models the window drop policy only", w.Source, w.Drop)
	}
	m := &w.Models[0]
	end := w.Warmup + w.Duration
	r := &Replay{
		Model: m.Name,
		Setting: Setting{
			Profile: m.Profile,
			SLO:     m.SLO,
			GPUs:    w.Cluster.GPUs,
			Delays:  w.Network.ForInput(m.InputBytes),
		},
		From: scheduler.Time(w.Warmup),
		To:   scheduler.Time(end),
	}
	gen := workload.NewGenerator(w, end)
	inWindow := 0
	for {
		_, at, ok := gen.Peek()
		if !ok {
			break
		}
		gen.Pop()
		r.Arrivals = append(r.Arrivals, at)
		if at >= r.From {
			inWindow++
		}
	}
	if inWindow == 0 {
		return nil, fmt.Errorf("lookahead: workload %s offers no requests in its measured window", w.Source)
	}
	return r, r.Setting.Validate()
}

// Rules replays the arrivals under the rules.
func (r *Replay) Rules() (Result, error) { return Rules(r.Setting, r.Arrivals, r.From, r.To) }

// Clairvoyant replays the arrivals under the clairvoyant scheduler.
func (r *Replay) Clairvoyant(o Options) (Result, error) {
	return Clairvoyant(r.Setting, r.Arrivals, r.From, r.To, o)
}

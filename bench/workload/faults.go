package workload

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/symphony-serving/symphony/partition/strictyaml"
)

// FaultAction is what a fault does to its target.
type FaultAction uint8

const (
	// FaultKill crashes the target: a backend's batches are abandoned (the
	// scheduler fails their requests as "backend lost"), the scheduler
	// loses its queues, a frontend ends its pending requests. With For, a
	// new one starts For later.
	FaultKill FaultAction = iota + 1
	// FaultStall stops the target for For, as SIGSTOP and SIGCONT would: it
	// neither computes nor answers, and then carries on.
	FaultStall
	// FaultDrain stops the target gracefully, as SIGTERM does: a backend
	// takes no new plans, finishes those it holds and delivers their
	// results; the scheduler drains its plans in flight. With For, a new
	// one starts For after it has gone.
	FaultDrain
	// FaultRestart drains the target and starts a new one For after it
	// has gone (at once if For is 0): one step of a rolling restart.
	FaultRestart
	// FaultCut closes the target's connection to the scheduler; it
	// reconnects, as after a network blip.
	FaultCut
)

var faultActionNames = [...]string{"", "kill", "stall", "drain", "restart", "cut"}

// String names the action as workload files do.
func (a FaultAction) String() string {
	if int(a) < len(faultActionNames) && a > 0 {
		return faultActionNames[a]
	}
	return fmt.Sprintf("FaultAction(%d)", uint8(a))
}

// MarshalText lets actions appear by name in JSON reports.
func (a FaultAction) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// TargetKind is the kind of process a fault hits.
type TargetKind uint8

const (
	// TargetBackend is one backend (a GPU agent with its GPUs).
	TargetBackend TargetKind = iota + 1
	// TargetScheduler is the scheduler.
	TargetScheduler
	// TargetFrontend is one frontend: the load's, in demo and sim.
	TargetFrontend
)

// FaultTarget names the process a fault hits: backend-N and frontend-N
// count from 0, in the order the cluster starts them.
type FaultTarget struct {
	Kind  TargetKind
	Index int
}

// String names the target as workload files do.
func (t FaultTarget) String() string {
	switch t.Kind {
	case TargetBackend:
		return "backend-" + strconv.Itoa(t.Index)
	case TargetScheduler:
		return "scheduler"
	case TargetFrontend:
		return "frontend-" + strconv.Itoa(t.Index)
	}
	return fmt.Sprintf("FaultTarget(%d)", uint8(t.Kind))
}

// MarshalText lets targets appear by name in JSON reports.
func (t FaultTarget) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// Fault is one event of a fault scenario: at At (from the start of the
// run, warmup included), Action hits Target.
type Fault struct {
	At     time.Duration
	Action FaultAction
	Target FaultTarget
	// For is how long a stall lasts, or how long a killed or drained
	// target stays down before a new one starts (0 with Restart: at once;
	// 0 with Kill or Drain: it stays down).
	For time.Duration
	// Restarts says whether a new target starts after a kill or drain.
	Restarts bool
}

// End is when the fault's own disturbance is over, as far as the
// schedule says: a stall's resumption, a restart's start (For after the
// moment it was hit: the time a drain takes comes on top), or At for a
// fault that leaves nothing to undo.
func (f Fault) End() time.Duration {
	switch {
	case f.Action == FaultStall, f.Restarts:
		return f.At + f.For
	}
	return f.At
}

// String describes the fault for logs and reports: "4s stall backend-0 for 6s".
func (f Fault) String() string {
	s := fmt.Sprintf("%v %v %v", f.At, f.Action, f.Target)
	switch {
	case f.Action == FaultStall:
		s += fmt.Sprintf(" for %v", f.For)
	case f.Restarts && f.For > 0:
		s += fmt.Sprintf(", back after %v", f.For)
	}
	return s
}

// maxFaults bounds a scenario's length: a file with more is a mistake.
const maxFaults = 1000

var faultKeys = []string{"at", "action", "target", "for"}

// faults reads the faults list: the fault scenario the run plays against
// the cluster (docs/workload-format.md, "Faults").
func (p *parser) faults(n *yaml.Node, path string, c Cluster, runLength time.Duration) ([]Fault, error) {
	seq, err := p.Seq(n, path, "a list of faults such as {at: 4s, action: stall, target: backend-0, for: 6s}")
	if err != nil {
		return nil, err
	}
	if len(seq) > maxFaults {
		return nil, p.ErrAt(n, path, "%d faults, more than %d", len(seq), maxFaults)
	}
	backends, _ := c.Backends()
	out := make([]Fault, 0, len(seq))
	for i, e := range seq {
		ep := strictyaml.Index(path, i)
		m, err := p.Mapping(e, ep, "a mapping {at, action, target, for}", faultKeys)
		if err != nil {
			return nil, err
		}
		var f Fault
		v, err := p.Required(m, "at", " (when, from the start of the run, such as 4s)")
		if err != nil {
			return nil, err
		}
		if f.At, err = p.NonNegDuration(v, m.At("at")); err != nil {
			return nil, err
		}
		if f.At >= runLength {
			return nil, p.ErrAt(v, m.At("at"), "%v is not before the run's end (warmup plus duration: %v)", f.At, runLength)
		}
		if v, err = p.Required(m, "action", " (kill, stall, drain, restart or cut)"); err != nil {
			return nil, err
		}
		s, sn, err := p.Str(v, m.At("action"), "an action")
		if err != nil {
			return nil, err
		}
		i := slices.Index(faultActionNames[:], s)
		if i <= 0 {
			return nil, p.ErrAt(sn, m.At("action"), "unknown action %q (want kill, stall, drain, restart or cut)%s", s, strictyaml.Suggest(s, faultActionNames[1:]))
		}
		f.Action = FaultAction(i)
		if v, err = p.Required(m, "target", " (backend-N, scheduler or frontend-N)"); err != nil {
			return nil, err
		}
		s, sn, err = p.Str(v, m.At("target"), "a target")
		if err != nil {
			return nil, err
		}
		if f.Target, err = parseTarget(s); err != nil {
			return nil, p.ErrAt(sn, m.At("target"), "%v", err)
		}
		switch {
		case f.Target.Kind == TargetBackend && f.Target.Index >= backends:
			return nil, p.ErrAt(sn, m.At("target"), "%s: the cluster has %d backends (backend-0 to backend-%d)", s, backends, backends-1)
		case f.Target.Kind == TargetFrontend && f.Target.Index > 0:
			return nil, p.ErrAt(sn, m.At("target"), "%s: the load runs through one frontend, frontend-0", s)
		case f.Action == FaultCut && f.Target.Kind == TargetScheduler:
			return nil, p.ErrAt(sn, m.At("target"), "cut closes a backend's or a frontend's connection to the scheduler: give backend-N or frontend-N")
		}
		if v, ok := m.Lookup("for"); ok {
			if f.Action == FaultCut {
				return nil, p.ErrAt(v, m.At("for"), "a cut has no duration: the target reconnects at once")
			}
			if f.For, err = p.NonNegDuration(v, m.At("for")); err != nil {
				return nil, err
			}
			f.Restarts = f.Action != FaultStall
		}
		switch f.Action {
		case FaultStall:
			if f.For <= 0 {
				return nil, p.ErrAt(m.Node, ep, "a stall needs a positive for: (how long the target stays stopped)")
			}
		case FaultRestart:
			f.Restarts = true
		}
		if f.At+f.For < f.At {
			return nil, p.ErrAt(m.Node, ep, "at plus for overflows")
		}
		out = append(out, f)
	}
	slices.SortStableFunc(out, func(a, b Fault) int { return int(a.At - b.At) })
	return out, nil
}

// parseTarget reads backend-N, scheduler or frontend-N.
func parseTarget(s string) (FaultTarget, error) {
	s = strings.TrimSpace(s)
	if s == "scheduler" {
		return FaultTarget{Kind: TargetScheduler}, nil
	}
	for _, k := range []struct {
		prefix string
		kind   TargetKind
	}{{"backend-", TargetBackend}, {"frontend-", TargetFrontend}} {
		if rest, ok := strings.CutPrefix(s, k.prefix); ok {
			n, err := strconv.Atoi(rest)
			if err != nil || n < 0 || n > maxGPUs {
				return FaultTarget{}, fmt.Errorf("%q: want %sN with N a number from 0", s, k.prefix)
			}
			return FaultTarget{Kind: k.kind, Index: n}, nil
		}
	}
	return FaultTarget{}, fmt.Errorf("unknown target %q (want backend-N, scheduler or frontend-N)", s)
}

// Backends is how the cluster's GPUs are spread over backend processes:
// n backends of gpusEach GPUs. Backends gives it; without it, backends of 4
// GPUs where the GPUs divide evenly, else one GPU each. The live cluster
// (bench/cluster) and the simulator's model of it use the same layout, so
// that a fault scenario's backend-N means the same GPUs in both.
func (c Cluster) Backends() (n, gpusEach int) {
	if c.BackendCount > 0 {
		return c.BackendCount, c.GPUs / c.BackendCount
	}
	each := min(4, c.GPUs)
	if c.GPUs%each != 0 {
		return c.GPUs, 1
	}
	return c.GPUs / each, each
}

package provision

import (
	"fmt"
	"strings"
)

// Baseline is one of the systems the papers compare against (Harpagon
// Table III), reproduced as planner options so that comparison tables run
// them on the same instances.
type Baseline int

const (
	// Nexus: round-robin dispatch (2d), two configurations per module,
	// the quantized split, one hardware kind.
	Nexus Baseline = iota + 1
	// Scrooge: dispatch at machine throughput (d + b/t), two
	// configurations, the throughput-based split, heterogeneous hardware.
	Scrooge
	// InferLine: round-robin dispatch, one configuration, the
	// throughput-based split, heterogeneous hardware.
	InferLine
	// Clipper: round-robin dispatch, one configuration, the even split,
	// one hardware kind.
	Clipper
)

// Baselines lists every baseline in the papers' order.
func Baselines() []Baseline { return []Baseline{Nexus, Scrooge, InferLine, Clipper} }

// String returns the baseline's name in lower case, as flags spell it.
func (b Baseline) String() string {
	switch b {
	case Nexus:
		return "nexus"
	case Scrooge:
		return "scrooge"
	case InferLine:
		return "inferline"
	case Clipper:
		return "clipper"
	}
	return fmt.Sprintf("Baseline(%d)", int(b))
}

// ParseBaseline reads a baseline name.
func ParseBaseline(s string) (Baseline, error) {
	for _, b := range Baselines() {
		if strings.EqualFold(s, b.String()) {
			return b, nil
		}
	}
	return 0, fmt.Errorf("unknown baseline %q (want nexus, scrooge, inferline or clipper)", s)
}

// Options returns the planner options that make the baseline: its dispatch
// model, configuration limit and split, without dummies, node merging,
// cost-direct, latency reassignment or the branch-and-bound (the papers'
// baselines have none of them). Its module scheduler is the greedy
// ⟨c_opt, c_res⟩ of Harpagon §II: as many machines as fit at the best
// ratio that meets the budget, the rest on the best configuration that can
// take all of it. The greedy backtracks, like the planner's, when a
// remainder is too small to collect within the budget; the papers' systems
// would overrun the SLO there instead. Nexus's quantized split steps by a
// tenth of the SLO (Harpagon's Harp-q0.1 at its ~1 s SLOs).
func (b Baseline) Options() Options {
	o := Options{Search: Default().Search}
	switch b {
	case Nexus:
		o.Dispatch, o.MaxConfigs, o.Split, o.SingleHardware = RoundRobin, 2, Split{Kind: Quantized}, true
	case Scrooge:
		o.Dispatch, o.MaxConfigs, o.Split = MachineThroughput, 2, Split{Kind: Throughput}
	case InferLine:
		o.Dispatch, o.MaxConfigs, o.Split = RoundRobin, 1, Split{Kind: Throughput}
	case Clipper:
		o.Dispatch, o.MaxConfigs, o.Split, o.SingleHardware = RoundRobin, 1, Split{Kind: Even}, true
	}
	return o
}

// SolveBaseline provisions app the way baseline b would; the Provision is named
// after it.
func SolveBaseline(app *App, b Baseline) (*Provision, error) {
	if b < Nexus || b > Clipper {
		return nil, fmt.Errorf("provision: unknown baseline %d", int(b))
	}
	in, err := compile(app)
	if err != nil {
		return nil, err
	}
	return solve(in, b.Options(), b.String())
}

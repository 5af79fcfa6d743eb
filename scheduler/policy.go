package scheduler

import (
	"fmt"
	"strings"
	"time"
)

// Policy selects how candidates become schedulable and how a free GPU picks
// among them. Each is one flag away so that the paper's comparisons (§5.2)
// run on the same code.
type Policy uint8

const (
	// PolicySymphony is the paper's non-work-conserving policy: a candidate
	// becomes schedulable at sched_at = dl − ℓ(|reqs|+1), the last moment it
	// could still grow, or, with SchedulableBetaLambda, as soon as it holds
	// βλ requests (λ estimated online per model). Under the sched-at
	// default, a held candidate of a weakly batching model (β ≤ α) that
	// holds βλ requests may still backfill a GPU that no other candidate
	// needs (Candidate.Backfill, scheduler/README.md "Backfill"), and a
	// held batch starts early on a GPU that would otherwise idle where
	// another held batch could not start in time after it (Grant.Early,
	// RankCore.collision, scheduler/README.md "Collisions on one GPU" and
	// "Collisions on several GPUs").
	PolicySymphony Policy = iota
	// PolicyWorkConserving makes every candidate schedulable as soon as it
	// has one request: a free GPU never waits.
	PolicyWorkConserving
	// PolicyClockwork models Clockwork's controller: work-conserving,
	// greedy, earliest deadline first, and it commits a batch to a GPU up
	// to ScheduleAhead before the GPU frees, so batches are formed early.
	PolicyClockwork
	// PolicyNexus models Nexus: models bound to GPUs by bin-packing each
	// epoch, frontends routing round-robin, and each GPU running its models'
	// batches in turn (§3.3). It runs in scheduler/nexus, not in these cores.
	PolicyNexus
)

var policyNames = [...]string{"symphony", "work-conserving", "clockwork", "nexus"}

// String returns the policy's name as used in workload files and flags.
func (p Policy) String() string { return enumName(policyNames[:], int(p), "Policy") }

// ParsePolicy reads a policy name. It accepts the names String returns.
func ParsePolicy(s string) (Policy, error) {
	i, err := parseEnum(policyNames[:], s, "policy")
	return Policy(i), err
}

// Policies lists every policy, in the order reports show them.
func Policies() []Policy {
	return []Policy{PolicySymphony, PolicyWorkConserving, PolicyClockwork, PolicyNexus}
}

// MarshalText lets policies appear by name in JSON reports.
func (p Policy) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText reads a policy by name.
func (p *Policy) UnmarshalText(b []byte) error {
	v, err := ParsePolicy(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// DefaultScheduleAhead is how far ahead of a GPU freeing the clockwork
// policy commits the GPU's next batch. Clockwork's controller keeps each
// worker's queue filled a few milliseconds ahead so the GPU never idles.
const DefaultScheduleAhead = 5 * time.Millisecond

// DefaultRateWindow is the window over which a ModelCore estimates its
// arrival rate λ for the βλ rule.
const DefaultRateWindow = time.Second

// DropPolicy decides which queued requests a candidate gives up on.
type DropPolicy uint8

const (
	// DropDefault picks the policy's own: DropWindow for symphony and
	// work-conserving, DropTimeout for clockwork (whose greedy earliest-
	// deadline batching is what the baseline reproduces).
	DropDefault DropPolicy = iota
	// DropTimeout drops a request only when it cannot meet its deadline
	// even in a batch of one; the candidate is the earliest-deadline prefix
	// that fits (§4.3 pruning).
	DropTimeout
	// DropWindow also drops head requests, but only with a GPU in hand and a
	// backlog behind the head: when the head's batch is below the keep-up
	// size, the smallest batch at which the rank loop's GPUs serve the
	// model's arrival rate (dropping the fewest heads that leave a window
	// of that size, or, if not even the largest batch a fresh request could
	// join keeps up, those before the largest window), and when dropping
	// lets the batch grow by more than the number dropped. Under light load
	// the whole queue fits and nothing is dropped; near capacity a Poisson
	// burst no longer cascades into ever smaller batches; under overload
	// batches keep their size instead of collapsing to nearly-expired
	// singletons, which gives the flat top of §4.4.
	DropWindow
)

var dropPolicyNames = [...]string{"default", "timeout", "window"}

// String returns the drop policy's name.
func (d DropPolicy) String() string { return enumName(dropPolicyNames[:], int(d), "DropPolicy") }

// ParseDropPolicy reads a drop policy name.
func ParseDropPolicy(s string) (DropPolicy, error) {
	i, err := parseEnum(dropPolicyNames[:], s, "drop policy")
	return DropPolicy(i), err
}

// resolve turns DropDefault into the policy's own drop policy.
func (d DropPolicy) resolve(p Policy) DropPolicy {
	if d != DropDefault {
		return d
	}
	if p == PolicyClockwork {
		return DropTimeout
	}
	return DropWindow
}

// Schedulable decides when a symphony candidate stops waiting for more
// requests (§4.3, "When is a candidate schedulable?").
type Schedulable uint8

const (
	// SchedulableDefault picks SchedulableSchedAt: in the simulator, βλ
	// makes light models in a shared cluster nearly work-conserving (βλ is
	// one or two requests for them) and spoils the idle-time autoscaling
	// signal at low load, while it changes nothing for one heavy model
	// (docs/benchmarks.md, "Why `schedulable: sched-at` is the default",
	// has the figures and commands).
	SchedulableDefault Schedulable = iota
	// SchedulableBetaLambda: at sched_at, or as soon as the batch holds
	// βλ requests, with λ the model's arrival rate estimated online. The
	// paper derives βλ for one GPU serving one model, where a GPU that
	// waits for one more request sits idle.
	SchedulableBetaLambda
	// SchedulableSchedAt: only at sched_at, but for a weakly batching
	// model's backfill of a GPU that would otherwise idle
	// (Candidate.Backfill). In a cluster shared by many light models (βλ of
	// one or two requests) it keeps batches growing instead of
	// degenerating into work-conserving scheduling.
	SchedulableSchedAt
)

var schedulableNames = [...]string{"default", "beta-lambda", "sched-at"}

// String returns the condition's name as used in workload files.
func (s Schedulable) String() string { return enumName(schedulableNames[:], int(s), "Schedulable") }

// ParseSchedulable reads a condition name.
func ParseSchedulable(s string) (Schedulable, error) {
	i, err := parseEnum(schedulableNames[:], s, "schedulable condition")
	return Schedulable(i), err
}

// enumName is the String of a named enum value, with a fallback for values
// outside the table.
func enumName(names []string, i int, typ string) string {
	if i >= 0 && i < len(names) {
		return names[i]
	}
	return fmt.Sprintf("%s(%d)", typ, i)
}

// parseEnum finds s, case-insensitively, in a named enum's table.
func parseEnum(names []string, s, kind string) (int, error) {
	for i, n := range names {
		if strings.EqualFold(s, n) {
			return i, nil
		}
	}
	return 0, fmt.Errorf("unknown %s %q (want one of %s)", kind, s, strings.Join(names, ", "))
}

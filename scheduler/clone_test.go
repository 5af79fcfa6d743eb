package scheduler_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/profile"
)

// Clone's contract, checked on random cores fed random events:
//
//   - a clone fed other events leaves the original alone: the original
//     goes on deciding exactly as an un-cloned twin fed the original's
//     events does, even when the clone is called between the original's
//     call and the moment its output is read;
//   - a clone fed the same events as the original decides exactly as it;
//   - a clone fed other events decides exactly as an un-cloned core fed
//     the original's events up to the clone, then those others.
//
// Each event is drawn from a random source that depends only on the seed,
// a stream number and the step, and on the state of the core it is fed
// to; cores in the same state fed from the same stream get the same
// events, and the diverging clone reads another stream.

const (
	cloneSeeds = 150
	// cloneSteps events before the clone, and as many after.
	cloneSteps = 250
)

// eventRNG is the random source for event step of stream.
func eventRNG(seed uint64, stream, step int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(stream)<<32|uint64(step)))
}

// randDur is a duration in [lo, hi].
func randDur(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
}

// randomModelConfig is a model under any policy a ModelCore runs, with
// random profile, drop policy, schedulable condition, delays and λ window.
func randomModelConfig(seed uint64) scheduler.ModelConfig {
	r := rand.New(rand.NewPCG(seed, 0x636c6f6e65))
	maxBatch := 0
	if r.IntN(3) == 0 {
		maxBatch = 1 + r.IntN(16)
	}
	cfg := scheduler.ModelConfig{
		ID:          scheduler.ModelID(r.IntN(4)),
		Name:        fmt.Sprintf("m%d", seed),
		Profile:     profile.MustLinear(randDur(r, 100*time.Microsecond, 2*time.Millisecond), randDur(r, time.Millisecond, 10*time.Millisecond), maxBatch),
		Policy:      []scheduler.Policy{scheduler.PolicySymphony, scheduler.PolicyWorkConserving, scheduler.PolicyClockwork}[r.IntN(3)],
		Drop:        scheduler.DropPolicy(r.IntN(3)),
		Schedulable: scheduler.Schedulable(r.IntN(3)),
		RateWindow:  randDur(r, 0, 2*time.Second),
	}
	if r.IntN(3) > 0 {
		cfg.Delays = scheduler.Delays{
			Ctrl:           randDur(r, 0, time.Millisecond),
			DataPerRequest: randDur(r, 0, 100*time.Microsecond),
			Result:         randDur(r, 0, time.Millisecond),
		}
	}
	return cfg
}

// modelDriver feeds one ModelCore random events: arrivals (now and then
// out of deadline order), ticks, grants of GPUs free now or later, batches
// chosen by GrantBatch, and a rare DropAll.
type modelDriver struct {
	core   *scheduler.ModelCore
	now    scheduler.Time
	nextID scheduler.RequestID
	slo    time.Duration
}

func newModelDriver(t *testing.T, cfg scheduler.ModelConfig) *modelDriver {
	t.Helper()
	core, err := scheduler.NewModelCore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// An SLO from a batch of one's latency to a few times it.
	slo := time.Duration(float64(cfg.Profile.Latency(1)+cfg.Delays.Dispatch(1)+cfg.Delays.Result) * 2.5)
	return &modelDriver{core: core, slo: slo}
}

// clone copies the driver with a clone of its core.
func (d *modelDriver) clone() *modelDriver {
	c := *d
	c.core = d.core.Clone()
	return &c
}

// feed gives the core one event drawn from r and returns its output, which
// the caller reads with observe, and what the event was.
func (d *modelDriver) feed(r *rand.Rand) (*scheduler.ModelOutput, string) {
	d.now = d.now.Add(randDur(r, 0, d.slo/4))
	switch op := r.IntN(20); {
	case op < 9:
		n := 1 + r.IntN(3)
		reqs := make([]scheduler.Request, n)
		for i := range reqs {
			slo := time.Duration(float64(d.slo) * (0.5 + r.Float64()))
			reqs[i] = scheduler.Request{ID: d.nextID, Arrival: d.now, Deadline: d.now.Add(slo)}
			d.nextID++
		}
		return d.core.Enqueue(d.now, reqs), fmt.Sprintf("enqueue %d", n)
	case op < 12:
		if w := d.core.WakeAt(); r.IntN(2) == 0 && w != scheduler.Never {
			d.now = scheduler.MaxTime(d.now, w)
		}
		return d.core.Tick(d.now), "tick"
	case op < 16:
		g := d.grant(r)
		return d.core.Grant(d.now, g), fmt.Sprintf("grant %+v", g)
	case op < 19:
		g := d.grant(r)
		skip := r.IntN(3)
		size := 1 + r.IntN(d.core.LargestBatch(d.now, g.FreeAt, skip)+1)
		out, err := d.core.GrantBatch(d.now, g, skip, size)
		if err != nil {
			// Nothing changed; answer the grant the usual way.
			return d.core.Grant(d.now, g), fmt.Sprintf("refused batch of %d behind %d, then grant %+v", size, skip, g)
		}
		return out, fmt.Sprintf("batch of %d behind %d on %+v", size, skip, g)
	default:
		return d.core.DropAll(d.now, scheduler.DropShutdown), "drop all"
	}
}

// grant is a random grant: a GPU free now or within the SLO.
func (d *modelDriver) grant(r *rand.Rand) scheduler.Grant {
	g := scheduler.Grant{Model: d.core.Config().ID, GPU: scheduler.GPUID(r.IntN(4)), FreeAt: scheduler.Past, GPUs: r.IntN(5)}
	if r.IntN(2) == 0 {
		g.FreeAt = d.now.Add(randDur(r, 0, d.slo))
	}
	return g
}

// observe renders out and the core's state after the event.
func (d *modelDriver) observe(out *scheduler.ModelOutput, event string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s at %v: candidate %+v changed %v", event, d.now, out.Candidate, out.CandidateChanged)
	for _, p := range out.Plans {
		fmt.Fprintf(&b, "; plan %d on GPU %d granted %v exec %v-%v of %v", p.ID, p.GPU, p.GrantedAt, p.ExecAt, p.FinishAt, p.Requests)
	}
	for _, r := range out.Returns {
		fmt.Fprintf(&b, "; return %+v", r)
	}
	for _, dr := range out.Drops {
		fmt.Fprintf(&b, "; drop %d (%v)", dr.Request.ID, dr.Reason)
	}
	fmt.Fprintf(&b, "; %s", d.state())
	return b.String()
}

// state renders what the core shows between calls, including what
// LargestBatch answers, which reads the whole queue.
func (d *modelDriver) state() string {
	c := d.core
	s := fmt.Sprintf("queued %d, wake %v, candidate %+v, largest", c.Queued(), c.WakeAt(), c.Candidate())
	for skip := range 3 {
		s += fmt.Sprintf(" %d", c.LargestBatch(d.now, scheduler.Past, skip))
	}
	return s
}

// randomRankConfig is a rank loop under any policy a RankCore runs, with
// random sizes, delays, lead and schedule-ahead, starting with its GPUs
// online or offline.
func randomRankConfig(seed uint64) scheduler.RankConfig {
	r := rand.New(rand.NewPCG(seed, 0x72616e6b))
	cfg := scheduler.RankConfig{
		Models:        1 + r.IntN(5),
		GPUs:          1 + r.IntN(6),
		Policy:        []scheduler.Policy{scheduler.PolicySymphony, scheduler.PolicyWorkConserving, scheduler.PolicyClockwork}[r.IntN(3)],
		Delays:        scheduler.Delays{Ctrl: randDur(r, 0, time.Millisecond), DataPerRequest: randDur(r, 0, 100*time.Microsecond)},
		Lead:          randDur(r, 0, 500*time.Microsecond),
		ScheduleAhead: randDur(r, 0, 5*time.Millisecond),
		StartOffline:  r.IntN(4) == 0,
	}
	if r.IntN(2) == 0 {
		for range cfg.Models {
			cfg.ModelDelays = append(cfg.ModelDelays, scheduler.Delays{Ctrl: randDur(r, 0, time.Millisecond), DataPerRequest: randDur(r, 0, time.Millisecond)})
		}
	}
	return cfg
}

// rankDriver feeds one RankCore random events: candidates (now and then a
// stale one), ticks, early grants, returns of its outstanding grants, GPUs
// coming, going and correcting their free times, detached models and lead
// changes.
type rankDriver struct {
	core        *scheduler.RankCore
	cfg         scheduler.RankConfig
	now         scheduler.Time
	version     []uint64
	outstanding []scheduler.Grant
}

func newRankDriver(t *testing.T, cfg scheduler.RankConfig) *rankDriver {
	t.Helper()
	core, err := scheduler.NewRankCore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &rankDriver{core: core, cfg: cfg, version: make([]uint64, cfg.Models)}
}

// clone copies the driver with a clone of its core.
func (d *rankDriver) clone() *rankDriver {
	c := *d
	c.core = d.core.Clone()
	c.version = append([]uint64(nil), d.version...)
	c.outstanding = append([]scheduler.Grant(nil), d.outstanding...)
	return &c
}

// candidate is a random candidate of model m under a new version (or, now
// and then, a stale one).
func (d *rankDriver) candidate(r *rand.Rand, m int) scheduler.Candidate {
	d.version[m]++
	v := d.version[m]
	if r.IntN(8) == 0 && v > 2 {
		v -= 2
	}
	if r.IntN(5) == 0 {
		return scheduler.Candidate{Version: v}
	}
	exec := d.now.Add(randDur(r, -5*time.Millisecond, 20*time.Millisecond))
	invalid := exec.Add(randDur(r, 0, 10*time.Millisecond))
	return scheduler.Candidate{BatchSize: 1 + r.IntN(8), ExecAt: exec, InvalidAfter: invalid, Deadline: invalid.Add(5 * time.Millisecond), Version: v}
}

// feed gives the core one event drawn from r and returns what it was and
// what the core decided.
func (d *rankDriver) feed(r *rand.Rand) string {
	d.now = d.now.Add(randDur(r, 0, 3*time.Millisecond))
	m := r.IntN(d.cfg.Models)
	g := scheduler.GPUID(r.IntN(d.cfg.GPUs))
	switch op := r.IntN(20); {
	case op < 7:
		c := d.candidate(r, m)
		d.core.Update(scheduler.ModelID(m), c)
		return fmt.Sprintf("update %d %+v", m, c)
	case op < 11:
		if w := d.core.WakeAt(); r.IntN(2) == 0 && w != scheduler.Never {
			d.now = scheduler.MaxTime(d.now, w)
		}
		grants := d.core.Tick(d.now)
		d.outstanding = append(d.outstanding, grants...)
		return fmt.Sprintf("tick: %+v", grants)
	case op < 13:
		grant, ok := d.core.GrantEarly(d.now, scheduler.ModelID(m))
		if ok {
			d.outstanding = append(d.outstanding, grant)
		}
		return fmt.Sprintf("grant early %d: %+v %v", m, grant, ok)
	case op < 16:
		if len(d.outstanding) == 0 {
			return "nothing to return"
		}
		i := r.IntN(len(d.outstanding))
		grant := d.outstanding[i]
		d.outstanding = append(d.outstanding[:i], d.outstanding[i+1:]...)
		ret := scheduler.GPUReturn{Model: grant.Model, GPU: grant.GPU, FreeAt: d.now.Add(randDur(r, 0, 10*time.Millisecond)), Used: r.IntN(3) > 0,
			Candidate: d.candidate(r, int(grant.Model))}
		d.core.Return(ret)
		return fmt.Sprintf("return %+v", ret)
	case op == 16:
		at := d.now.Add(randDur(r, 0, 5*time.Millisecond))
		d.core.EnableGPU(g, at)
		return fmt.Sprintf("enable %d at %v", g, at)
	case op == 17:
		d.core.DisableGPU(g)
		return fmt.Sprintf("disable %d", g)
	case op == 18:
		at := d.now.Add(randDur(r, 0, 5*time.Millisecond))
		d.core.CorrectFreeAt(g, at)
		return fmt.Sprintf("correct %d to %v", g, at)
	default:
		for _, o := range d.outstanding {
			if int(o.Model) == m {
				lead := randDur(r, 0, time.Millisecond)
				d.core.SetLead(lead)
				return fmt.Sprintf("lead %v", lead)
			}
		}
		d.core.DetachModel(scheduler.ModelID(m))
		return fmt.Sprintf("detach %d", m)
	}
}

// state renders what the core shows between calls.
func (d *rankDriver) state() string {
	c := d.core
	s := fmt.Sprintf("at %v: wake %v, %d free, %d online, next grants", d.now, c.WakeAt(), c.FreeGPUs(), c.OnlineGPUs())
	for m := range d.cfg.Models {
		g, at := c.NextGrant(scheduler.ModelID(m))
		s += fmt.Sprintf(" %+v@%v", g, at)
	}
	return s
}

// cloneSubject is a kind of core under the clone checks: how to build a
// driver for it, clone one, feed it event k of a stream, and render its
// state.
type cloneSubject[D any] struct {
	fresh func() D
	clone func(D) D
	// feed gives the driver event k of stream and returns what renders
	// the event, what the core decided and its state afterwards; the check
	// calls it only after feeding another core, so that state shared with
	// that core would show.
	feed  func(d D, stream, k int) func() string
	state func(D) string
}

// checkClones runs Clone's contract on one seed and reports whether the
// clone fed other events ended in another state than the original's.
func checkClones[D any](t *testing.T, seed uint64, s cloneSubject[D]) (diverged bool) {
	t.Helper()
	orig, twin, otherTwin := s.fresh(), s.fresh(), s.fresh()
	for k := range cloneSteps {
		a, b := s.feed(orig, 0, k), s.feed(twin, 0, k)
		if a, b := a(), b(); a != b {
			t.Fatalf("seed %d step %d: two cores fed the same events differ:\n%s\n%s", seed, k, a, b)
		}
		s.feed(otherTwin, 0, k)()
	}
	same, other := s.clone(orig), s.clone(orig)
	if s.state(orig) != s.state(same) {
		t.Fatalf("seed %d: clone shows %s; the original %s", seed, s.state(same), s.state(orig))
	}
	for k := cloneSteps; k < 2*cloneSteps; k++ {
		// The diverging clone is fed after the original, before what the
		// original decided is read.
		readO, readX := s.feed(orig, 0, k), s.feed(other, 1, k)
		a, x := readO(), readX()
		if y := s.feed(otherTwin, 1, k)(); x != y {
			t.Fatalf("seed %d step %d: a clone fed other events decided\n%s\nwhere an un-cloned core with the same history decided\n%s", seed, k, x, y)
		}
		if b := s.feed(twin, 0, k)(); a != b {
			t.Fatalf("seed %d step %d: with a clone fed other events, the original decided\n%s\nwhere its un-cloned twin decided\n%s", seed, k, a, b)
		}
		if c := s.feed(same, 0, k)(); c != a {
			t.Fatalf("seed %d step %d: a clone fed the original's events decided\n%s\nwhere the original decided\n%s", seed, k, c, a)
		}
	}
	return s.state(other) != s.state(orig)
}

// wantDiverged fails the test if too few diverging clones left the
// original's state: the checks would then prove little.
func wantDiverged(t *testing.T, diverged int) {
	if diverged < cloneSeeds*3/4 {
		t.Fatalf("the diverging clone ended in the original's state in %d of %d seeds", cloneSeeds-diverged, cloneSeeds)
	}
}

func TestModelCoreCloneIsIndependent(t *testing.T) {
	diverged := 0
	for seed := uint64(0); seed < cloneSeeds; seed++ {
		cfg := randomModelConfig(seed)
		if checkClones(t, seed, cloneSubject[*modelDriver]{
			fresh: func() *modelDriver { return newModelDriver(t, cfg) },
			clone: (*modelDriver).clone,
			feed: func(d *modelDriver, stream, k int) func() string {
				out, event := d.feed(eventRNG(seed, stream, k))
				return func() string { return d.observe(out, event) }
			},
			state: (*modelDriver).state,
		}) {
			diverged++
		}
	}
	wantDiverged(t, diverged)
}

func TestRankCoreCloneIsIndependent(t *testing.T) {
	diverged := 0
	for seed := uint64(0); seed < cloneSeeds; seed++ {
		cfg := randomRankConfig(seed)
		if checkClones(t, seed, cloneSubject[*rankDriver]{
			fresh: func() *rankDriver { return newRankDriver(t, cfg) },
			clone: (*rankDriver).clone,
			feed: func(d *rankDriver, stream, k int) func() string {
				event := d.feed(eventRNG(seed, stream, k))
				return func() string { return event + "; " + d.state() }
			},
			state: (*rankDriver).state,
		}) {
			diverged++
		}
	}
	wantDiverged(t, diverged)
}

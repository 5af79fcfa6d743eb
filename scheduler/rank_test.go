package scheduler

import (
	"slices"
	"strings"
	"testing"
)

func newRank(t testing.TB, cfg RankConfig) *RankCore {
	t.Helper()
	r, err := NewRankCore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// tick calls Tick and copies the grants, which the core owns.
func tick(r *RankCore, now Time) []Grant { return slices.Clone(r.Tick(now)) }

func wantGrants(t *testing.T, step string, got []Grant, want ...Grant) {
	t.Helper()
	if len(want) == 0 {
		want = []Grant{}
	}
	if got == nil {
		got = []Grant{}
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: grants %+v, want %+v", step, got, want)
	}
}

func TestRankConfigValidate(t *testing.T) {
	bad := map[string]RankConfig{
		"no models":      {Models: 0, GPUs: 1},
		"no GPUs":        {Models: 1, GPUs: 0},
		"nexus":          {Models: 1, GPUs: 1, Policy: PolicyNexus},
		"unknown policy": {Models: 1, GPUs: 1, Policy: PolicyNexus + 1},
		"negative ahead": {Models: 1, GPUs: 1, Policy: PolicyClockwork, ScheduleAhead: -1},
		"negative delay": {Models: 1, GPUs: 1, Delays: Delays{Ctrl: -1}},
	}
	for name, cfg := range bad {
		if _, err := NewRankCore(cfg); err == nil {
			t.Errorf("%s: NewRankCore accepted %+v", name, cfg)
		}
	}
}

func TestRankWakeAtNeverWhenIdle(t *testing.T) {
	r := newRank(t, RankConfig{Models: 2, GPUs: 2})
	if r.WakeAt() != Never || r.FreeGPUs() != 2 {
		t.Fatalf("new core: WakeAt %v, %d free GPUs", r.WakeAt(), r.FreeGPUs())
	}
	r.Update(0, Candidate{Version: 1}) // empty candidate
	if r.WakeAt() != Never {
		t.Errorf("empty candidate: WakeAt %v", r.WakeAt())
	}
	wantGrants(t, "idle tick", tick(r, at(ms)))
	// A candidate that is withdrawn disarms its timer.
	r.Update(1, Candidate{BatchSize: 1, ExecAt: at(5 * ms), InvalidAfter: at(9 * ms), Version: 1})
	r.Update(1, Candidate{Version: 2})
	if r.WakeAt() != Never {
		t.Errorf("withdrawn candidate: WakeAt %v", r.WakeAt())
	}
}

// A GPU that is free before the candidate's ExecAt is granted when the
// candidate's timer fires, at ExecAt − dispatch(bs).
func TestRankGrantsFreeGPUAtTimer(t *testing.T) {
	d := Delays{Ctrl: ms, DataPerRequest: ms / 2}
	r := newRank(t, RankConfig{Models: 1, GPUs: 2, Delays: d})
	r.Update(0, Candidate{BatchSize: 2, ExecAt: at(10 * ms), InvalidAfter: at(12 * ms), Deadline: at(19 * ms), Version: 1})
	// dispatch(2) = 1 + 2·0.5 = 2ms: the timer is at 8ms.
	if r.WakeAt() != at(8*ms) {
		t.Fatalf("WakeAt %v, want 8ms", r.WakeAt())
	}
	wantGrants(t, "before timer", tick(r, at(8*ms)-1))
	wantGrants(t, "at timer", tick(r, at(8*ms)), Grant{Model: 0, GPU: 0, FreeAt: Past, GPUs: 2})
	if r.FreeGPUs() != 1 || r.WakeAt() != Never {
		t.Errorf("after grant: %d free, WakeAt %v", r.FreeGPUs(), r.WakeAt())
	}
}

// With no GPU free by ExecAt, the candidate waits; the earliest GPU goes to
// it at freeAt − dispatch(bs).
func TestRankCandidateWaitsForGPU(t *testing.T) {
	d := Delays{Ctrl: ms, DataPerRequest: ms / 2}
	r := newRank(t, RankConfig{Models: 2, GPUs: 1, Delays: d})
	// Occupy the only GPU: model 0's batch runs until 20ms.
	r.Update(0, Candidate{BatchSize: 1, ExecAt: at(2 * ms), InvalidAfter: at(4 * ms), Version: 1})
	wantGrants(t, "model 0", tick(r, r.WakeAt()), Grant{Model: 0, GPU: 0, FreeAt: Past, GPUs: 1})
	r.Update(1, Candidate{BatchSize: 2, ExecAt: at(5 * ms), InvalidAfter: at(25 * ms), Deadline: at(33 * ms), Version: 1})
	// Model 1's timer is at 5 − 2 = 3ms but no GPU is free: it becomes
	// ready and, with no GPU to watch, the core sleeps.
	wantGrants(t, "timer, no GPU", tick(r, at(3*ms)))
	if r.WakeAt() != Never {
		t.Errorf("ready without free GPU: WakeAt %v", r.WakeAt())
	}
	r.Return(GPUReturn{Model: 0, GPU: 0, FreeAt: at(20 * ms), Used: true, Candidate: Candidate{Version: 2}})
	// The GPU frees at 20ms after the candidate's ExecAt: it is handed
	// over dispatch(2) = 2ms before, at 18ms.
	if r.WakeAt() != at(18*ms) {
		t.Fatalf("WakeAt %v, want 18ms", r.WakeAt())
	}
	wantGrants(t, "early", tick(r, at(18*ms)-1))
	wantGrants(t, "gpu timer", tick(r, at(18*ms)), Grant{Model: 1, GPU: 0, FreeAt: at(20 * ms), GPUs: 1})
}

// busyRank returns a one-GPU core whose GPU is busy until 20ms, with models
// 1..3 ready (their timers fired at 8ms, zero delays).
func busyRank(t *testing.T, pol Policy, cands map[ModelID]Candidate) *RankCore {
	t.Helper()
	r := newRank(t, RankConfig{Models: 4, GPUs: 1, Policy: pol})
	r.Update(0, Candidate{BatchSize: 1, ExecAt: 0, InvalidAfter: at(ms), Deadline: at(6 * ms), Version: 1})
	if g := tick(r, 0); len(g) != 1 {
		t.Fatalf("occupying grant: %+v", g)
	}
	r.Return(GPUReturn{Model: 0, GPU: 0, FreeAt: at(20 * ms), Used: true, Candidate: Candidate{Version: 2}})
	for m, c := range cands {
		r.Update(m, c)
	}
	return r
}

func TestRankEarliestExecAtWins(t *testing.T) {
	cands := map[ModelID]Candidate{
		1: {BatchSize: 1, ExecAt: at(8 * ms), InvalidAfter: at(22 * ms), Deadline: at(30 * ms), Version: 1},
		2: {BatchSize: 1, ExecAt: at(6 * ms), InvalidAfter: at(32 * ms), Deadline: at(40 * ms), Version: 1},
		3: {BatchSize: 1, ExecAt: at(7 * ms), InvalidAfter: at(21 * ms), Deadline: at(25 * ms), Version: 1},
	}
	r := busyRank(t, PolicySymphony, cands)
	wantGrants(t, "timers", tick(r, at(8*ms)))
	if r.WakeAt() != at(20*ms) {
		t.Fatalf("WakeAt %v, want the GPU's free time 20ms", r.WakeAt())
	}
	wantGrants(t, "symphony", tick(r, at(20*ms)), Grant{Model: 2, GPU: 0, FreeAt: at(20 * ms), GPUs: 1})

	// A candidate the GPU cannot serve in time (InvalidAfter 19ms < 20ms)
	// loses to one it can, despite its earlier ExecAt.
	c2 := cands[2]
	c2.InvalidAfter = at(19 * ms)
	cands[2] = c2
	r = busyRank(t, PolicySymphony, cands)
	tick(r, at(8*ms))
	wantGrants(t, "invalid loses", tick(r, at(20*ms)), Grant{Model: 3, GPU: 0, FreeAt: at(20 * ms), GPUs: 1})
}

func TestRankClockworkEarliestDeadlineWins(t *testing.T) {
	cands := map[ModelID]Candidate{
		1: {BatchSize: 1, ExecAt: at(8 * ms), InvalidAfter: at(22 * ms), Deadline: at(30 * ms), Version: 1},
		2: {BatchSize: 1, ExecAt: at(6 * ms), InvalidAfter: at(32 * ms), Deadline: at(40 * ms), Version: 1},
		3: {BatchSize: 1, ExecAt: at(7 * ms), InvalidAfter: at(21 * ms), Deadline: at(25 * ms), Version: 1},
	}
	r := busyRank(t, PolicyClockwork, cands)
	wantGrants(t, "timers", tick(r, at(8*ms)))
	// Clockwork commits DefaultScheduleAhead = 5ms before the GPU frees.
	if r.WakeAt() != at(15*ms) {
		t.Fatalf("WakeAt %v, want 20ms − 5ms", r.WakeAt())
	}
	wantGrants(t, "clockwork", tick(r, at(15*ms)), Grant{Model: 3, GPU: 0, FreeAt: at(20 * ms), GPUs: 1})
}

// Clockwork never grants at the model timer, even with a GPU free: the
// grant waits for the GPU timer, ScheduleAhead before the GPU frees (at
// once for an idle GPU).
func TestRankClockworkScheduleAhead(t *testing.T) {
	r := newRank(t, RankConfig{Models: 1, GPUs: 1, Policy: PolicyClockwork, ScheduleAhead: 3 * ms})
	r.Update(0, Candidate{BatchSize: 1, ExecAt: at(4 * ms), InvalidAfter: at(9 * ms), Version: 1})
	wantGrants(t, "timer", tick(r, at(4*ms)), Grant{Model: 0, GPU: 0, FreeAt: Past, GPUs: 1})
	r.Return(GPUReturn{Model: 0, GPU: 0, FreeAt: at(30 * ms), Used: true,
		Candidate: Candidate{BatchSize: 1, ExecAt: at(5 * ms), InvalidAfter: at(40 * ms), Version: 2}})
	wantGrants(t, "ready", tick(r, at(5*ms)))
	if r.WakeAt() != at(27*ms) {
		t.Errorf("WakeAt %v, want 30ms − 3ms", r.WakeAt())
	}
}

func TestRankOneGrantPerModel(t *testing.T) {
	r := newRank(t, RankConfig{Models: 1, GPUs: 2})
	r.Update(0, Candidate{BatchSize: 1, ExecAt: 0, InvalidAfter: at(10 * ms), Version: 1})
	wantGrants(t, "first", tick(r, 0), Grant{Model: 0, GPU: 0, FreeAt: Past, GPUs: 2})
	// While the grant is outstanding, updates are recorded, not acted on,
	// even though GPU 1 is free.
	r.Update(0, Candidate{BatchSize: 3, ExecAt: 0, InvalidAfter: at(10 * ms), Version: 2})
	if r.WakeAt() != Never {
		t.Errorf("granted model armed: WakeAt %v", r.WakeAt())
	}
	wantGrants(t, "outstanding", tick(r, at(ms)))
	// The return re-arms the model with its latest candidate.
	r.Return(GPUReturn{Model: 0, GPU: 0, FreeAt: at(9 * ms), Used: true,
		Candidate: Candidate{BatchSize: 2, ExecAt: at(ms), InvalidAfter: at(10 * ms), Version: 3}})
	// GPU 1 (free since forever) is free before ExecAt: granted at once.
	wantGrants(t, "after return", tick(r, at(ms)), Grant{Model: 0, GPU: 1, FreeAt: Past, GPUs: 2})
}

func TestRankIgnoresStaleVersions(t *testing.T) {
	r := newRank(t, RankConfig{Models: 1, GPUs: 1})
	r.Update(0, Candidate{BatchSize: 1, ExecAt: at(10 * ms), InvalidAfter: at(20 * ms), Version: 5})
	r.Update(0, Candidate{BatchSize: 1, ExecAt: at(ms), InvalidAfter: at(20 * ms), Version: 4})
	if r.WakeAt() != at(10*ms) {
		t.Errorf("stale update applied: WakeAt %v, want 10ms", r.WakeAt())
	}
	wantGrants(t, "stale time", tick(r, at(ms)))
	wantGrants(t, "timer", tick(r, at(10*ms)), Grant{Model: 0, GPU: 0, FreeAt: Past, GPUs: 1})
	// An update sent while the grant was outstanding (version 7) is newer
	// than the candidate the return carries (version 6): the update wins.
	r.Update(0, Candidate{BatchSize: 1, ExecAt: at(30 * ms), InvalidAfter: at(40 * ms), Version: 7})
	r.Return(GPUReturn{Model: 0, GPU: 0, FreeAt: at(15 * ms), Used: true,
		Candidate: Candidate{BatchSize: 1, ExecAt: at(11 * ms), InvalidAfter: at(40 * ms), Version: 6}})
	if r.WakeAt() != at(30*ms) {
		t.Errorf("stale return candidate applied: WakeAt %v, want 30ms", r.WakeAt())
	}
}

func TestRankReturnOfFreeGPUPanics(t *testing.T) {
	r := newRank(t, RankConfig{Models: 1, GPUs: 1})
	defer func() {
		if p := recover(); p == nil || !strings.Contains(p.(string), "never granted") {
			t.Errorf("recovered %v, want a never-granted panic", p)
		}
	}()
	r.Return(GPUReturn{Model: 0, GPU: 0, FreeAt: at(ms)})
}

// Of two free GPUs the earlier-free one is granted, and several timers due
// at one tick are served in timer order.
func TestRankManyModelsManyGPUs(t *testing.T) {
	r := newRank(t, RankConfig{Models: 3, GPUs: 3})
	for m := ModelID(0); m < 3; m++ {
		r.Update(m, Candidate{BatchSize: 1, ExecAt: at(ms), InvalidAfter: at(50 * ms), Version: 1})
	}
	g := tick(r, at(ms))
	wantGrants(t, "three at once", g,
		Grant{Model: 0, GPU: 0, FreeAt: Past, GPUs: 3}, Grant{Model: 1, GPU: 1, FreeAt: Past, GPUs: 3}, Grant{Model: 2, GPU: 2, FreeAt: Past, GPUs: 3})
	r.Return(GPUReturn{Model: 0, GPU: 0, FreeAt: at(9 * ms), Used: true, Candidate: Candidate{Version: 2}})
	r.Return(GPUReturn{Model: 1, GPU: 1, FreeAt: at(7 * ms), Used: true, Candidate: Candidate{Version: 2}})
	r.Return(GPUReturn{Model: 2, GPU: 2, FreeAt: at(8 * ms), Used: true, Candidate: Candidate{Version: 2}})
	r.Update(2, Candidate{BatchSize: 1, ExecAt: at(10 * ms), InvalidAfter: at(50 * ms), Version: 3})
	// All GPUs free by ExecAt: the timer takes the earliest-free, GPU 1.
	wantGrants(t, "earliest GPU", tick(r, at(10*ms)), Grant{Model: 2, GPU: 1, FreeAt: at(7 * ms), GPUs: 3})
	if r.FreeGPUs() != 2 {
		t.Errorf("%d free GPUs, want 2", r.FreeGPUs())
	}
}

// GPUs of a backend come and go: offline GPUs are never granted, a GPU
// taken offline while granted does not come back on Return, and a
// correction moves a free GPU's free time.
func TestRankGPUsComeAndGo(t *testing.T) {
	r := newRank(t, RankConfig{Models: 1, GPUs: 2, StartOffline: true})
	if r.OnlineGPUs() != 0 || r.FreeGPUs() != 0 {
		t.Fatalf("start offline: %d online, %d free", r.OnlineGPUs(), r.FreeGPUs())
	}
	r.Update(0, Candidate{BatchSize: 1, ExecAt: at(10 * ms), InvalidAfter: at(12 * ms), Deadline: at(19 * ms), Version: 1})
	wantGrants(t, "no GPU online", tick(r, at(10*ms)))

	r.EnableGPU(1, at(11*ms))
	if r.WakeAt() != at(11*ms) {
		t.Fatalf("WakeAt %v, want the enabled GPU's free time 11ms", r.WakeAt())
	}
	r.CorrectFreeAt(1, at(10*ms+ms/2))
	wantGrants(t, "after correction", tick(r, at(10*ms+ms/2)), Grant{Model: 0, GPU: 1, FreeAt: at(10*ms + ms/2), GPUs: 1})

	// Disabled while granted: the Return does not bring it back.
	r.DisableGPU(1)
	r.Return(GPUReturn{Model: 0, GPU: 1, FreeAt: at(20 * ms), Used: true, Candidate: Candidate{Version: 2}})
	if r.FreeGPUs() != 0 || r.OnlineGPUs() != 0 {
		t.Fatalf("after disable and return: %d free, %d online", r.FreeGPUs(), r.OnlineGPUs())
	}
	// A correction of an offline GPU is ignored; enabling brings it back.
	r.CorrectFreeAt(1, at(5*ms))
	r.EnableGPU(1, Past)
	if r.FreeGPUs() != 1 || r.OnlineGPUs() != 1 {
		t.Fatalf("after enable: %d free, %d online", r.FreeGPUs(), r.OnlineGPUs())
	}
	r.Update(0, Candidate{BatchSize: 1, ExecAt: at(30 * ms), InvalidAfter: at(32 * ms), Deadline: at(39 * ms), Version: 3})
	wantGrants(t, "re-enabled", tick(r, at(30*ms)), Grant{Model: 0, GPU: 1, FreeAt: Past, GPUs: 1})
	// A correction of a granted GPU waits for its Return, and a used
	// Return keeps the later of the two.
	r.CorrectFreeAt(1, at(35*ms))
	r.Return(GPUReturn{Model: 0, GPU: 1, FreeAt: at(40 * ms), Used: true, Candidate: Candidate{Version: 4}})
	if r.gpus[1].freeAt != at(40*ms) {
		t.Fatalf("freeAt %v, want the Return's later 40ms", r.gpus[1].freeAt)
	}
	// ... and applies if the grant comes back unused: the grant was made
	// for a free time the GPU no longer has.
	r.Update(0, Candidate{BatchSize: 1, ExecAt: at(40 * ms), InvalidAfter: at(42 * ms), Deadline: at(49 * ms), Version: 5})
	wantGrants(t, "granted again", tick(r, at(40*ms)), Grant{Model: 0, GPU: 1, FreeAt: at(40 * ms), GPUs: 1})
	r.CorrectFreeAt(1, at(44*ms))
	r.Return(GPUReturn{Model: 0, GPU: 1, FreeAt: at(40 * ms), Candidate: Candidate{Version: 6}})
	if r.gpus[1].freeAt != at(44*ms) {
		t.Fatalf("freeAt %v after an unused return, want the correction's 44ms", r.gpus[1].freeAt)
	}
	// A later grant's return is not corrected by an old correction.
	r.Update(0, Candidate{BatchSize: 1, ExecAt: at(44 * ms), InvalidAfter: at(46 * ms), Deadline: at(53 * ms), Version: 7})
	wantGrants(t, "granted a third time", tick(r, at(44*ms)), Grant{Model: 0, GPU: 1, FreeAt: at(44 * ms), GPUs: 1})
	r.Return(GPUReturn{Model: 0, GPU: 1, FreeAt: at(47 * ms), Candidate: Candidate{Version: 8}})
	if r.gpus[1].freeAt != at(47*ms) {
		t.Fatalf("freeAt %v, want the Return's 47ms, not the spent correction's 44ms", r.gpus[1].freeAt)
	}
	// A report that came between a plan and its Return, saying the GPU
	// frees later still, is not lost to the Return's older estimate.
	r.Update(0, Candidate{BatchSize: 1, ExecAt: at(47 * ms), InvalidAfter: at(49 * ms), Deadline: at(56 * ms), Version: 9})
	wantGrants(t, "granted a fourth time", tick(r, at(47*ms)), Grant{Model: 0, GPU: 1, FreeAt: at(47 * ms), GPUs: 1})
	r.CorrectFreeAt(1, at(60*ms))
	r.Return(GPUReturn{Model: 0, GPU: 1, FreeAt: at(52 * ms), Used: true, Candidate: Candidate{Version: 10}})
	if r.gpus[1].freeAt != at(60*ms) {
		t.Fatalf("freeAt %v, want the correction's later 60ms", r.gpus[1].freeAt)
	}
}

// A detached model is never granted, whether its timer was armed or it was
// ready and waiting; a newer update attaches it again. Detaching a model
// with a grant outstanding is a caller's bug.
func TestRankDetachModel(t *testing.T) {
	r := newRank(t, RankConfig{Models: 2, GPUs: 1})
	r.Update(0, Candidate{BatchSize: 1, ExecAt: at(5 * ms), InvalidAfter: at(9 * ms), Version: 1})
	r.DetachModel(0)
	if r.WakeAt() != Never {
		t.Errorf("armed model detached: WakeAt %v, want Never", r.WakeAt())
	}
	wantGrants(t, "after detach", tick(r, at(5*ms)))
	// Ready and waiting for the busy GPU, then detached.
	r.Update(1, Candidate{BatchSize: 1, ExecAt: 0, InvalidAfter: at(ms), Version: 1})
	wantGrants(t, "occupy", tick(r, 0), Grant{Model: 1, GPU: 0, FreeAt: Past, GPUs: 1})
	func() {
		defer func() {
			if recover() == nil {
				t.Error("detaching a granted model did not panic")
			}
		}()
		r.DetachModel(1)
	}()
	r.Return(GPUReturn{Model: 1, GPU: 0, FreeAt: at(20 * ms), Used: true, Candidate: Candidate{Version: 2}})
	r.Update(0, Candidate{BatchSize: 1, ExecAt: at(6 * ms), InvalidAfter: at(30 * ms), Version: 2})
	wantGrants(t, "ready, GPU busy", tick(r, at(6*ms)))
	r.DetachModel(0)
	wantGrants(t, "GPU frees", tick(r, at(20*ms)))
	// A stale update is still ignored; a newer one attaches the model.
	r.Update(0, Candidate{BatchSize: 1, ExecAt: at(21 * ms), InvalidAfter: at(30 * ms), Version: 1})
	wantGrants(t, "stale", tick(r, at(21*ms)))
	r.Update(0, Candidate{BatchSize: 1, ExecAt: at(21 * ms), InvalidAfter: at(30 * ms), Version: 3})
	wantGrants(t, "attached again", tick(r, at(21*ms)), Grant{Model: 0, GPU: 0, FreeAt: at(20 * ms), GPUs: 1})
}

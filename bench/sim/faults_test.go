package sim

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/scheduler"
)

const sec = time.Second

func loadWorkload(t *testing.T, path string) *workload.Workload {
	t.Helper()
	w, err := workload.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// scenario is testdata/faults/NAME.yaml; with faults given, its cluster
// and load under those faults instead of its own.
func scenario(t *testing.T, name string, faults ...workload.Fault) *workload.Workload {
	t.Helper()
	w := loadWorkload(t, "../../testdata/faults/"+name+".yaml")
	if len(faults) > 0 {
		w.Faults = faults
	}
	return w
}

// play runs w through the cluster model and checks what holds of every
// fault run: each request of the window is counted once, as good, dropped
// or failed (never late: the frontend ends every request by its deadline),
// in exactly one phase, and the bad ones by reason.
func play(t *testing.T, w *workload.Workload) (*cluster, *report.Report) {
	t.Helper()
	cl, err := newCluster(w)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.run(Options{}); err != nil {
		t.Fatal(err)
	}
	if err := cl.acct.check(); err != nil {
		t.Fatal(err)
	}
	rep := cl.acct.build()
	var offered, good, dropped, failed uint64
	for _, m := range rep.Models {
		if m.Offered != m.Good+m.Late+m.Dropped+m.Failed {
			t.Errorf("%s: offered %d ≠ good %d + late %d + dropped %d + failed %d", m.Name, m.Offered, m.Good, m.Late, m.Dropped, m.Failed)
		}
		offered, good, dropped, failed = offered+m.Offered, good+m.Good, dropped+m.Dropped, failed+m.Failed
	}
	if rep.Offered != offered || rep.Good != good || rep.Dropped != dropped || rep.Failed != failed || rep.Late != 0 {
		t.Errorf("totals %d/%d/%d/%d/%d ≠ model sums %d/%d/%d/%d, or late answers", rep.Offered, rep.Good, rep.Dropped, rep.Failed, rep.Late, offered, good, dropped, failed)
	}
	if rep.Faults == nil {
		t.Fatal("no fault report")
	}
	var phased uint64
	for _, p := range rep.Faults.Phases {
		phased += p.Offered
		var bad uint64
		for _, n := range p.Reasons {
			bad += n
		}
		if p.Late != 0 || p.Offered != p.Good+p.Dropped+p.Failed || bad != p.Offered-p.Good {
			t.Errorf("phase %q: offered %d, good %d, late %d, dropped %d, failed %d, by reason %v", p.Label, p.Offered, p.Good, p.Late, p.Dropped, p.Failed, p.Reasons)
		}
	}
	if phased != rep.Offered {
		t.Errorf("phases hold %d requests, the window %d", phased, rep.Offered)
	}
	return cl, rep
}

// phaseAt is the phase that holds arrivals at t.
func phaseAt(t *testing.T, rep *report.Report, at time.Duration) report.Phase {
	t.Helper()
	for _, p := range rep.Faults.Phases {
		if at.Seconds() >= p.FromSeconds && at.Seconds() < p.ToSeconds {
			return p
		}
	}
	t.Fatalf("no phase holds %v", at)
	return report.Phase{}
}

// onlyReasons fails unless every bad request of p has one of reasons.
func onlyReasons(t *testing.T, p report.Phase, reasons ...string) {
	t.Helper()
	for r, n := range p.Reasons {
		if !strings.Contains(strings.Join(reasons, "|"), r) {
			t.Errorf("phase %q: %d requests %q, want only %v", p.Label, n, r, reasons)
		}
	}
}

// waitingAtFault checks the phase before a fault at at: the requests that
// were waiting when it hit ended with reason, some did, and no other went
// bad.
func waitingAtFault(t *testing.T, rep *report.Report, at time.Duration, reason string) {
	t.Helper()
	before := phaseAt(t, rep, at-sec)
	if before.Reasons[reason] == 0 {
		t.Errorf("before the fault: %v, want requests waiting when it hit to end as %q", before.Reasons, reason)
	}
	onlyReasons(t, before, reason)
}

// changes are the rotation changes of GPUs [first, first+n) after the
// start of the run.
func changes(cl *cluster, first, n int) []rotationChange {
	var out []rotationChange
	for _, c := range cl.rotation {
		if c.At > 0 && int(c.GPU) >= first && int(c.GPU) < first+n {
			out = append(out, c)
		}
	}
	return out
}

// halfCluster is w without faults on one backend's GPUs: what the cluster
// can do while a backend of two is out.
func halfCluster(t *testing.T, w *workload.Workload) *report.Report {
	t.Helper()
	h := *w
	h.Faults = nil
	_, each := w.Cluster.Backends()
	h.Cluster = workload.Cluster{GPUs: each, BackendCount: 1}
	return run(t, &h)
}

// arrivals counts w's arrivals in [from, to).
func arrivals(w *workload.Workload, from, to time.Duration) uint64 {
	gen := workload.NewGenerator(w, w.Warmup+w.Duration)
	var n uint64
	for {
		_, at, ok := gen.Peek()
		if !ok || time.Duration(at) >= to {
			return n
		}
		gen.Pop()
		if time.Duration(at) >= from {
			n++
		}
	}
}

// firstRedial is when a client whose session of more than the backoff's
// maximum ended at lost first dials at or after up: it dials after each
// step of its backoff.
func firstRedial(lost, up time.Duration) time.Duration {
	t := lost + redial.Delay(0, nil)
	for i := 1; t < up; i++ {
		t += redial.Delay(i, nil)
	}
	return t
}

// TestClusterModelMatchesInstantGPUs runs fault-free workloads through the
// model of the cluster's processes with an empty scenario: with no fault,
// every GPU runs its plans as planned, so the report must be the instant
// simulator's, byte for byte (but for the live name of pruning).
func TestClusterModelMatchesInstantGPUs(t *testing.T) {
	for _, c := range []struct {
		file   string
		policy scheduler.Policy
	}{
		{"demo", scheduler.PolicySymphony},
		{"demo", scheduler.PolicyWorkConserving},
		{"demo", scheduler.PolicyClockwork},
		{"table4-resnet50", scheduler.PolicySymphony},
		{"large-inputs", scheduler.PolicySymphony},
	} {
		w := loadWorkload(t, "../../testdata/workloads/"+c.file+".yaml")
		w.Policy = c.policy
		w.Duration = min(w.Duration, 4*sec)
		want, err := Run(w, Options{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := runCluster(w, Options{})
		if err != nil {
			t.Fatal(err)
		}
		a, _ := json.MarshalIndent(want, "", " ")
		b, _ := json.MarshalIndent(got, "", " ")
		if sa, sb := strings.ReplaceAll(string(a), `"pruned"`, `"overload"`), string(b); sa != sb {
			la, lb := strings.Split(sa, "\n"), strings.Split(sb, "\n")
			for i := range min(len(la), len(lb)) {
				if la[i] != lb[i] {
					t.Errorf("%s, %s: line %d: instant %s, cluster model %s", c.file, c.policy, i+1, la[i], lb[i])
					break
				}
			}
		}
	}
}

func TestFaultRunIsDeterministic(t *testing.T) {
	w := scenario(t, "scheduler-restart")
	var out [2][]byte
	for i := range out {
		rep, err := Run(w, Options{})
		if err != nil {
			t.Fatal(err)
		}
		out[i], _ = json.Marshal(rep)
	}
	if string(out[0]) != string(out[1]) {
		t.Error("two runs of one fault scenario differ")
	}
}

// TestBackendStall: backend-0 of two stops for 6s at half the cluster's
// goodput. The Watcher finds it silent within StallAfter, a heartbeat
// period and a tick; the other backend carries the load meanwhile as well
// as half the cluster can; the first heartbeat after the stall brings the
// GPUs back, and the bad rate is back to its level at once.
func TestBackendStall(t *testing.T) {
	w := scenario(t, "stall-backend")
	f := w.Faults[0]
	cl, rep := play(t, w)
	out := changes(cl, 0, 4)
	if len(out) != 8 {
		t.Fatalf("backend-0's GPUs changed rotation %d times, want out once and back once each: %+v", len(out), out)
	}
	latest := f.At + cl.stallAfter + heartbeat + watchPeriod
	for _, c := range out[:4] {
		if c.Online || c.Why != "backend silent" || time.Duration(c.At) <= f.At || time.Duration(c.At) > latest {
			t.Errorf("GPU %d: %+v, want out for silence in (%v, %v]", c.GPU, c, f.At, latest)
		}
	}
	for _, c := range out[4:] {
		if !c.Online || time.Duration(c.At) != f.End() {
			t.Errorf("GPU %d: %+v, want back at the stall's end %v", c.GPU, c, f.End())
		}
	}
	if other := changes(cl, 4, 4); len(other) > 0 {
		t.Errorf("backend-1's GPUs left rotation: %+v", other)
	}
	stall := phaseAt(t, rep, f.At)
	half := halfCluster(t, w)
	if stall.BadRate > 0.5+0.02 || stall.BadRate > half.BadRate+0.02 {
		t.Errorf("bad rate in the stall %.2f%%, want at most the stalled half's share (50%%) and at most half the cluster's %.2f%%, plus 2 points",
			100*stall.BadRate, 100*half.BadRate)
	}
	if stall.Reasons[reasonBackendStalled] == 0 || stall.Reasons[reasonBackendLost] > 0 {
		t.Errorf("stall phase reasons %v, want %q and no %q", stall.Reasons, reasonBackendStalled, reasonBackendLost)
	}
	if ev := rep.Faults.Faults[0]; !ev.Recovered || ev.RecoverySeconds > 1 {
		t.Errorf("recovery %+v, want within 1s of the stall's end", ev)
	}
	if after := phaseAt(t, rep, f.End()); after.BadRate > rep.Faults.RecoveryThreshold {
		t.Errorf("after the stall: bad rate %.2f%% over the threshold %.2f%%", 100*after.BadRate, 100*rep.Faults.RecoveryThreshold)
	}
}

// TestBackendKill: a backend of two dies for good. The requests of the
// plans it held fail as "backend lost", its GPUs leave rotation at once and
// for good, and the cluster serves as a cluster of half the GPUs does.
func TestBackendKill(t *testing.T) {
	w := scenario(t, "kill-backend")
	f := w.Faults[0]
	cl, rep := play(t, w)
	out := changes(cl, 4, 4)
	if len(out) != 4 {
		t.Fatalf("backend-1's GPUs: %+v, want each out once", out)
	}
	for _, c := range out {
		if c.Online || time.Duration(c.At) != f.At || c.Why != "backend gone" {
			t.Errorf("GPU %d: %+v, want out at %v, its backend gone", c.GPU, c, f.At)
		}
	}
	if rep.DropReasons[reasonBackendLost] == 0 || rep.Failed != rep.DropReasons[reasonBackendLost] {
		t.Errorf("failed %d, by reason %v: want only backend-lost failures, some", rep.Failed, rep.DropReasons)
	}
	after := phaseAt(t, rep, f.At)
	onlyReasons(t, after, reasonDeadline, "overload", reasonExpired)
	half := halfCluster(t, w)
	if g := after.GoodputRPS; g < 0.97*half.GoodputRPS || g > 1.03*half.GoodputRPS {
		t.Errorf("goodput after the kill %.1f req/s, a cluster of half the GPUs %.1f: want within 3%%", g, half.GoodputRPS)
	}
}

// TestRollingRestart: each backend in turn drains and is replaced. A
// draining backend's plans run to the end, so no request fails, and the
// other backend carries the load while it drains.
func TestRollingRestart(t *testing.T) {
	w := scenario(t, "rolling-restart")
	cl, rep := play(t, w)
	if rep.Failed != 0 {
		t.Errorf("%d requests failed: %v", rep.Failed, rep.DropReasons)
	}
	for _, p := range rep.Faults.Phases {
		if p.BadRate > 0.01 {
			t.Errorf("phase %q: bad rate %.2f%%", p.Label, 100*p.BadRate)
		}
	}
	for i, f := range w.Faults {
		out := changes(cl, 4*i, 4)
		if len(out) != 8 {
			t.Fatalf("backend-%d's GPUs: %+v, want out once and back once each", i, out)
		}
		for _, c := range out[:4] {
			if c.Online || time.Duration(c.At) != f.At {
				t.Errorf("GPU %d: %+v, want out at %v", c.GPU, c, f.At)
			}
		}
		for _, c := range out[4:] {
			// Back once the plans it held have run: within an SLO.
			if !c.Online || time.Duration(c.At) < f.At || time.Duration(c.At) > f.At+cl.maxSLO {
				t.Errorf("GPU %d: %+v, want back within %v of %v", c.GPU, c, cl.maxSLO, f.At)
			}
		}
	}
}

// TestBackendCut: backend-0's scheduler connection drops. Its unfinished
// plans fail as "backend lost"; it is back after the first backoff step.
func TestBackendCut(t *testing.T) {
	cut := workload.Fault{At: 4 * sec, Action: workload.FaultCut, Target: workload.FaultTarget{Kind: workload.TargetBackend}}
	w := scenario(t, "stall-backend", cut)
	cl, rep := play(t, w)
	out := changes(cl, 0, 4)
	if len(out) != 8 {
		t.Fatalf("backend-0's GPUs: %+v, want out once and back once each", out)
	}
	back := firstRedial(cut.At, cut.At)
	for _, c := range out {
		want := cut.At
		if c.Online {
			want = back
		}
		if time.Duration(c.At) != want {
			t.Errorf("GPU %d: %+v, want at %v", c.GPU, c, want)
		}
	}
	if rep.Failed != rep.DropReasons[reasonBackendLost] {
		t.Errorf("failures %v: want only backend lost", rep.DropReasons)
	}
	if rep.BadRate > 0.01 {
		t.Errorf("bad rate %.2f%%", 100*rep.BadRate)
	}
}

// TestSchedulerKill: the scheduler crashes and a new one starts 500ms
// later. Its queued requests are lost and end at their deadlines as
// "scheduler lost"; arrivals fail at once until the frontend is back,
// at its first redial after the restart, and the backends with it.
func TestSchedulerKill(t *testing.T) {
	kill := workload.Fault{At: 4 * sec, Action: workload.FaultKill, Target: workload.FaultTarget{Kind: workload.TargetScheduler}, For: 500 * time.Millisecond, Restarts: true}
	w := scenario(t, "scheduler-restart", kill)
	cl, rep := play(t, w)
	waitingAtFault(t, rep, kill.At, reasonSchedulerLost)
	down := phaseAt(t, rep, kill.At)
	if down.Failed != down.Offered || down.Reasons[reasonNotConnected] != down.Offered {
		t.Errorf("while no scheduler runs: %+v, want every arrival failed as not connected", down)
	}
	back := firstRedial(kill.At, kill.End())
	after := phaseAt(t, rep, kill.End())
	if n := arrivals(w, kill.End(), back); after.Reasons[reasonNotConnected] != n {
		t.Errorf("after the restart: %d not connected, want the %d arrivals before the frontend's redial at %v", after.Reasons[reasonNotConnected], n, back)
	}
	onlyReasons(t, after, reasonNotConnected)
	for _, c := range changes(cl, 0, 8) {
		if want := map[bool]time.Duration{false: kill.At, true: back}[c.Online]; time.Duration(c.At) != want {
			t.Errorf("GPU %d: %+v, want at %v", c.GPU, c, want)
		}
	}
	if ev := rep.Faults.Faults[0]; !ev.Recovered || ev.RecoverySeconds > (back-kill.End()+report.TimelineBucketWidth).Seconds() {
		t.Errorf("recovery %+v, want by the redial at %v", ev, back)
	}
}

// TestSchedulerRestart: SIGTERM, and a new scheduler 500ms after the old
// one closed. Its queued requests end as shutdown drops, the plans in
// flight are answered, and no request fails but those that arrive while
// no scheduler takes them.
func TestSchedulerRestart(t *testing.T) {
	restart := workload.Fault{At: 4 * sec, Action: workload.FaultRestart, Target: workload.FaultTarget{Kind: workload.TargetScheduler}, For: 500 * time.Millisecond, Restarts: true}
	w := scenario(t, "scheduler-restart", restart)
	cl, rep := play(t, w)
	waitingAtFault(t, rep, restart.At, "shutdown")
	if rep.Failed != rep.DropReasons[reasonNotConnected] {
		t.Errorf("failures %v: want only arrivals while no scheduler took them", rep.DropReasons)
	}
	out := changes(cl, 0, 8)
	closed := time.Duration(out[0].At)
	if out[0].Online || closed < restart.At || closed > restart.At+cl.maxSLO {
		t.Errorf("first change %+v: want the scheduler closed once its plans in flight finished, within %v", out[0], cl.maxSLO)
	}
	back := firstRedial(closed, closed+restart.For)
	for _, c := range out[8:] {
		if !c.Online || time.Duration(c.At) != back {
			t.Errorf("GPU %d: %+v, want back at the backends' redial %v", c.GPU, c, back)
		}
	}
}

// TestSchedulerStall: the scheduler stops for 300ms. Backends run what
// they hold; tasks wait; afterwards its Watcher, having heard every report
// and heartbeat of the stall, takes no GPU out, and nothing fails.
func TestSchedulerStall(t *testing.T) {
	stall := workload.Fault{At: 4 * sec, Action: workload.FaultStall, Target: workload.FaultTarget{Kind: workload.TargetScheduler}, For: 300 * time.Millisecond}
	w := scenario(t, "stall-backend", stall)
	cl, rep := play(t, w)
	if c := changes(cl, 0, 8); len(c) > 0 {
		t.Errorf("GPUs changed rotation: %+v", c)
	}
	if rep.Failed != 0 {
		t.Errorf("failures %v", rep.DropReasons)
	}
	p := phaseAt(t, rep, stall.At)
	onlyReasons(t, p, reasonExpired, reasonDeadline, "overload")
	// A request whose deadline passes in the stall cannot be answered.
	if n := arrivals(w, stall.At, stall.End()-cl.maxSLO); p.Offered-p.Good < n {
		t.Errorf("stall: %d bad, want at least the %d arrivals whose deadline passed in it", p.Offered-p.Good, n)
	}
	if ev := rep.Faults.Faults[0]; !ev.Recovered || ev.RecoverySeconds > 1 {
		t.Errorf("recovery %+v, want within 1s", ev)
	}
}

// TestFrontendCut: the frontend's scheduler connection drops. Its queued
// requests end as "scheduler lost"; arrivals fail at once until it
// reconnects, one backoff step later.
func TestFrontendCut(t *testing.T) {
	cut := workload.Fault{At: 4 * sec, Action: workload.FaultCut, Target: workload.FaultTarget{Kind: workload.TargetFrontend}}
	w := scenario(t, "frontend-cut", cut)
	_, rep := play(t, w)
	waitingAtFault(t, rep, cut.At, reasonSchedulerLost)
	after := phaseAt(t, rep, cut.At)
	if n := arrivals(w, cut.At, firstRedial(cut.At, cut.At)); after.Reasons[reasonNotConnected] != n {
		t.Errorf("after the cut: %d not connected, want the %d arrivals before the redial", after.Reasons[reasonNotConnected], n)
	}
	onlyReasons(t, after, reasonNotConnected)
}

// TestFrontendKill: the frontend dies and a new one starts 1s later: its
// pending requests and the arrivals meanwhile fail as "closed"; the new one
// connects at once.
func TestFrontendKill(t *testing.T) {
	kill := workload.Fault{At: 4 * sec, Action: workload.FaultKill, Target: workload.FaultTarget{Kind: workload.TargetFrontend}, For: sec, Restarts: true}
	w := scenario(t, "frontend-cut", kill)
	cl, rep := play(t, w)
	waitingAtFault(t, rep, kill.At, reasonClosed)
	down := phaseAt(t, rep, kill.At)
	if down.Reasons[reasonClosed] != down.Offered {
		t.Errorf("while it is down: %+v, want every arrival closed", down)
	}
	after := phaseAt(t, rep, kill.End())
	if after.BadRate > 0.01 {
		t.Errorf("after the restart: %+v", after)
	}
	if c := changes(cl, 0, 8); len(c) > 0 {
		t.Errorf("GPUs changed rotation: %+v", c)
	}
}

// TestFrontendStall: the frontend's connections freeze for 500ms, longer
// than any SLO. Every request ends by its deadline, those that arrived in
// the stall as expired; nothing fails.
func TestFrontendStall(t *testing.T) {
	stall := workload.Fault{At: 4 * sec, Action: workload.FaultStall, Target: workload.FaultTarget{Kind: workload.TargetFrontend}, For: 500 * time.Millisecond}
	w := scenario(t, "frontend-cut", stall)
	cl, rep := play(t, w)
	if rep.Failed != 0 {
		t.Errorf("failures %v", rep.DropReasons)
	}
	p := phaseAt(t, rep, stall.At)
	// Those sent at its end with little time left may be dropped.
	onlyReasons(t, p, reasonExpired, reasonDeadline, "overload")
	if n := arrivals(w, stall.At, stall.End()-cl.maxSLO); p.Reasons[reasonExpired] < n {
		t.Errorf("stall: %d expired, want at least the %d arrivals whose deadline passed in it", p.Reasons[reasonExpired], n)
	}
	if ev := rep.Faults.Faults[0]; !ev.Recovered || ev.RecoverySeconds > 0.1 {
		t.Errorf("recovery %+v, want at once", ev)
	}
}

// TestFaultsNeedALiveCounterpart: nexus and the epoch job exist only in
// the simulator, so they have no processes to fault.
func TestFaultsNeedALiveCounterpart(t *testing.T) {
	for _, tweak := range []func(*workload.Workload){
		func(w *workload.Workload) { w.Policy = scheduler.PolicyNexus },
		func(w *workload.Workload) { w.Epoch = &workload.Epoch{Interval: sec, Parts: 1} },
	} {
		w := scenario(t, "stall-backend")
		tweak(w)
		if _, err := Run(w, Options{}); err == nil || !strings.Contains(err.Error(), "faults") {
			t.Errorf("error %v, want one about faults", err)
		}
	}
}

// TestClusterOracle: the rules the cluster model adds to the accounting's
// oracle fail the run when broken.
func TestClusterOracle(t *testing.T) {
	w := scenario(t, "stall-backend")
	for _, c := range []struct {
		name string
		do   func(cl *cluster)
		want string
	}{
		{"left twice", func(cl *cluster) {
			cl.leave(0)
			cl.leave(0)
		}, "left the scheduler twice"},
		{"ended late", func(cl *cluster) {
			cl.now = cl.reqs[0].deadline.Add(1)
			cl.endAt(0, report.OutcomeFailed, reasonBackendLost)
		}, "after its deadline"},
	} {
		cl, err := newCluster(w)
		if err != nil {
			t.Fatal(err)
		}
		cl.fe.stallUntil = scheduler.Time(sec) // keep request 0 at the frontend
		cl.arrive(0)
		c.do(cl)
		if err := cl.acct.err; err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: oracle error %v, want one mentioning %q", c.name, err, c.want)
		}
	}
	// A request that never ends fails the final check.
	cl, _ := newCluster(w)
	cl.fe.stallUntil = scheduler.Time(sec)
	cl.arrive(0)
	if err := cl.acct.check(); err == nil || !strings.Contains(err.Error(), "1 requests issued but 0 ended") {
		t.Errorf("a pending request: %v", err)
	}
}

// TestRandomScenarios plays random fault scenarios, faults overlapping,
// on every target and with every policy: whatever happens, the oracle's
// rules hold (every request ends exactly once, by its deadline; no GPU
// runs two batches at once; no plan starts before its inputs can arrive).
func TestRandomScenarios(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	actions := []workload.FaultAction{workload.FaultKill, workload.FaultStall, workload.FaultDrain, workload.FaultRestart, workload.FaultCut}
	policies := []scheduler.Policy{scheduler.PolicySymphony, scheduler.PolicyWorkConserving, scheduler.PolicyClockwork}
	for i := range 40 {
		w := scenario(t, "stall-backend").Scaled(0.5 + 1.5*rng.Float64())
		w.Seed = uint64(i)
		w.Warmup, w.Duration = 500*time.Millisecond, 2500*time.Millisecond
		w.Policy = policies[i%len(policies)]
		w.Faults = nil
		for range 1 + rng.IntN(5) {
			f := workload.Fault{At: time.Duration(rng.Int64N(int64(w.Warmup + w.Duration))), Action: actions[rng.IntN(len(actions))]}
			switch k := rng.IntN(4); {
			case k < 2:
				f.Target = workload.FaultTarget{Kind: workload.TargetBackend, Index: k}
			case k == 2:
				f.Target = workload.FaultTarget{Kind: workload.TargetScheduler}
			default:
				f.Target = workload.FaultTarget{Kind: workload.TargetFrontend}
			}
			if f.Action == workload.FaultCut && f.Target.Kind == workload.TargetScheduler {
				f.Action = workload.FaultKill
			}
			if f.Action != workload.FaultCut && (f.Action == workload.FaultStall || rng.IntN(2) == 0) {
				f.For = time.Duration(1 + rng.Int64N(int64(time.Second)))
				f.Restarts = f.Action != workload.FaultStall
			}
			if f.Action == workload.FaultRestart {
				f.Restarts = true
			}
			w.Faults = append(w.Faults, f)
		}
		slices.SortStableFunc(w.Faults, func(a, b workload.Fault) int { return int(a.At - b.At) })
		t.Run(fmt.Sprintf("%d", i), func(t *testing.T) {
			t.Logf("%s at %.0f req/s, faults %v", w.Policy, w.TotalRate(), w.Faults)
			play(t, w)
		})
	}
}

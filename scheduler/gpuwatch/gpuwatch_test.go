package gpuwatch

import (
	"slices"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/scheduler"
)

const ms = scheduler.Time(time.Millisecond)

func newWatcher(t *testing.T, gpus int) *Watcher {
	t.Helper()
	w, err := New(Default(gpus))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// ran reports a plan that ran on g from started to finished, having been
// planned to take dur.
func ran(g scheduler.GPUID, id scheduler.PlanID, dur time.Duration, started, finished scheduler.Time) Report {
	return Report{GPU: g, Plan: id, Ran: dur, Started: started, Finished: finished}
}

func TestLatenessPropagatesAlongBackToBackPlans(t *testing.T) {
	w := newWatcher(t, 1)
	w.Attach(0, 1, []scheduler.GPUID{0})
	// Three plans back to back: 10-20, 20-30, 30-40 ms.
	for i := range 3 {
		got := w.Sent(0, scheduler.PlanID(i+1), 10*ms+scheduler.Time(i)*10*ms, 10*time.Millisecond)
		if want := 20*ms + scheduler.Time(i)*10*ms; got != want {
			t.Fatalf("plan %d: free at %v, want %v (nothing known yet: as planned)", i+1, got, want)
		}
	}
	// The first starts 3ms late: the two behind it start late too. A
	// late start is not the GPU's slip (it ran as long as planned).
	free, ok, _ := w.Finished(23*ms, ran(0, 1, 10*time.Millisecond, 13*ms, 23*ms))
	if !ok || w.Slip(0) != 0 {
		t.Fatalf("ok %v slip %v: a late start is not slip", ok, w.Slip(0))
	}
	if want := 43 * ms; free != want {
		t.Errorf("free at %v, want %v: 3ms late for the plans behind", free, want)
	}
	// The second overruns by 1ms: that is slip, and the plan behind it
	// is expected to overrun by the GPU's slip too.
	free, _, _ = w.Finished(34*ms, ran(0, 2, 10*time.Millisecond, 23*ms, 34*ms))
	slip := w.Slip(0)
	if slip <= 0 {
		t.Fatalf("slip %v after an overrun", slip)
	}
	if want := 44*ms + scheduler.Time(slip); free != want {
		t.Errorf("free at %v, want %v", free, want)
	}
}

func TestAGapAbsorbsLateness(t *testing.T) {
	w := newWatcher(t, 1)
	w.Attach(0, 1, []scheduler.GPUID{0})
	w.Sent(0, 1, 0, 10*time.Millisecond)
	w.Sent(0, 2, 20*ms, 10*time.Millisecond) // 10ms of idle before it
	free, _, _ := w.Finished(14*ms, ran(0, 1, 10*time.Millisecond, 4*ms, 14*ms))
	if want := 30*ms + scheduler.Time(w.Slip(0)); free != want {
		t.Errorf("free at %v, want %v: the 4ms lateness fits in the gap", free, want)
	}
}

func TestSkippedPlanFreesTheGPUEarly(t *testing.T) {
	w := newWatcher(t, 1)
	w.Attach(0, 1, []scheduler.GPUID{0})
	w.Sent(0, 1, 10*ms, 10*time.Millisecond)
	// The backend gave the plan up at 12ms (too late for its deadline):
	// the GPU is free from then, and an unrun plan says nothing of slip.
	free, ok, _ := w.Finished(12*ms, Report{GPU: 0, Plan: 1, Started: 12 * ms, Finished: 12 * ms})
	if !ok || free != 12*ms || w.Slip(0) != 0 {
		t.Errorf("free at %v ok %v slip %v, want 12ms, true, 0", free, ok, w.Slip(0))
	}
}

func TestPlanRefusedAtOnceLeavesTheOthers(t *testing.T) {
	w := newWatcher(t, 1)
	w.Attach(0, 1, []scheduler.GPUID{0})
	w.Sent(0, 1, 10*ms, 10*time.Millisecond)
	w.Sent(0, 2, 20*ms, 10*time.Millisecond)
	w.Sent(0, 3, 30*ms, 10*time.Millisecond)
	// Plan 3 never reached the GPU's queue: 1 and 2 still run.
	free, ok, _ := w.Finished(11*ms, Report{GPU: 0, Plan: 3, Finished: scheduler.Past})
	if !ok || free != 30*ms || w.Outstanding(0) != 2 {
		t.Errorf("free at %v ok %v outstanding %d, want 30ms, true, 2", free, ok, w.Outstanding(0))
	}
}

func TestSlowGPUConvergesToItsSlip(t *testing.T) {
	w := newWatcher(t, 2)
	w.Attach(0, 1, []scheduler.GPUID{0, 1})
	// GPU 1 takes 12ms for every 10ms batch; GPU 0 is exact.
	var t0, t1 scheduler.Time
	for i := range 100 {
		id := scheduler.PlanID(i + 1)
		w.Sent(0, id, t0, 10*time.Millisecond)
		w.Sent(1, id, t1, 10*time.Millisecond)
		w.Finished(t0+10*ms, ran(0, id, 10*time.Millisecond, t0, t0+10*ms))
		w.Finished(t1+12*ms, ran(1, id, 10*time.Millisecond, t1, t1+12*ms))
		t0, t1 = t0+10*ms, t1+12*ms
	}
	if s := w.Slip(0); s != 0 {
		t.Errorf("exact GPU has slip %v", s)
	}
	if s := w.Slip(1); s < 1900*time.Microsecond || s > 2*time.Millisecond {
		t.Errorf("slow GPU's slip %v, want close to 2ms", s)
	}
	// A plan on each from the same moment: the slow GPU frees later.
	now := max(t0, t1)
	f0 := w.Sent(0, 1000, now, 10*time.Millisecond)
	f1 := w.Sent(1, 1000, now, 10*time.Millisecond)
	if f1 <= f0 {
		t.Errorf("slow GPU frees at %v, exact one at %v", f1, f0)
	}
}

func TestOverduePlanStallsItsGPUUntilItReports(t *testing.T) {
	w := newWatcher(t, 2)
	w.Attach(0, 7, []scheduler.GPUID{0, 1})
	w.Sent(0, 1, 10*ms, 10*time.Millisecond)
	w.Sent(0, 2, 20*ms, 10*time.Millisecond)
	// The backend keeps answering (heartbeats), but GPU 0 hangs.
	for now := 10 * ms; now <= 150*ms; now += 10 * ms {
		w.Heard(now, 7)
		if got := w.Tick(now); len(got) > 0 && now < 120*ms {
			t.Fatalf("stall %+v at %v, before 20ms + StallAfter", got, now)
		}
	}
	if !w.Stalled(0) || w.Stalled(1) {
		t.Fatalf("stalled: GPU 0 %v, GPU 1 %v; want only GPU 0", w.Stalled(0), w.Stalled(1))
	}
	// Exactly when: the first plan's expected finish plus StallAfter.
	w2 := newWatcher(t, 1)
	w2.Attach(0, 1, []scheduler.GPUID{0})
	w2.Sent(0, 1, 10*ms, 10*time.Millisecond)
	w2.Sent(0, 2, 20*ms, 10*time.Millisecond)
	w2.Heard(119*ms, 1)
	if at := w2.WakeAt(); at != 120*ms {
		t.Fatalf("WakeAt %v, want 120ms", at)
	}
	if got := w2.Tick(119 * ms); len(got) != 0 {
		t.Fatalf("stalled early: %+v", got)
	}
	got := w2.Tick(120 * ms)
	if len(got) != 1 || got[0].GPU != 0 || got[0].Why != WhyOverdue || got[0].Since != 20*ms ||
		!slices.Equal(got[0].Retired, []scheduler.PlanID{1, 2}) {
		t.Fatalf("stalls %+v, want GPU 0 overdue since 20ms retiring plans 1 and 2", got)
	}
	if w2.Outstanding(0) != 0 {
		t.Errorf("retired plans still outstanding")
	}
	// A heartbeat does not bring a hung GPU back; its own report does.
	if back := w2.Heard(130*ms, 1); len(back) != 0 || !w2.Stalled(0) {
		t.Fatalf("heartbeat brought back %v", back)
	}
	free, ok, rec := w2.Finished(140*ms, ran(0, 1, 10*time.Millisecond, 10*ms, 139*ms))
	if !ok || !rec || w2.Stalled(0) || free != 139*ms {
		t.Errorf("report of a retired plan: free %v ok %v recovered %v stalled %v; want 139ms, back in rotation", free, ok, rec, w2.Stalled(0))
	}
}

func TestSilentBackendStallsEveryGPUUntilHeard(t *testing.T) {
	w := newWatcher(t, 4)
	w.Attach(0, 1, []scheduler.GPUID{0, 1})
	w.Attach(0, 2, []scheduler.GPUID{2, 3})
	w.Sent(1, 1, 5*ms, 10*time.Millisecond)
	w.Heard(50*ms, 2)
	got := w.Tick(100 * ms)
	if len(got) != 2 || got[0].GPU != 0 || got[1].GPU != 1 || got[0].Why != WhySilent || got[0].Since != 0 {
		t.Fatalf("stalls %+v, want GPUs 0 and 1, silent since 0", got)
	}
	if !slices.Equal(got[1].Retired, []scheduler.PlanID{1}) {
		t.Errorf("GPU 1 retired %v, want plan 1", got[1].Retired)
	}
	if w.Stalled(2) || w.Stalled(3) {
		t.Error("the other backend's GPUs stalled")
	}
	if at := w.WakeAt(); at != 150*ms {
		t.Errorf("WakeAt %v, want 150ms (backend 2's silence limit)", at)
	}
	back := w.Heard(200*ms, 1)
	if !slices.Equal(back, []scheduler.GPUID{0, 1}) || w.Stalled(0) || w.Stalled(1) {
		t.Errorf("heard again: back %v", back)
	}
	if f := w.FreeAt(1); f != scheduler.Past {
		t.Errorf("recovered GPU free at %v, want free now (Past)", f)
	}
}

func TestDetachForgetsTheBackend(t *testing.T) {
	w := newWatcher(t, 2)
	w.Attach(0, 1, []scheduler.GPUID{0, 1})
	w.Sent(0, 1, 0, time.Millisecond)
	w.Detach(1)
	if w.WakeAt() != scheduler.Never || w.Outstanding(0) != 0 {
		t.Errorf("detached backend still watched: WakeAt %v", w.WakeAt())
	}
	if _, ok, _ := w.Finished(ms, ran(0, 1, time.Millisecond, 0, ms)); ok {
		t.Error("report on a detached GPU counted")
	}
	if got := w.Tick(scheduler.Time(time.Hour)); len(got) != 0 {
		t.Errorf("detached GPUs stalled: %+v", got)
	}
	// Its GPU IDs can serve a new backend.
	w.Attach(0, 2, []scheduler.GPUID{0, 1})
	if f := w.Sent(0, 5, 3*ms, time.Millisecond); f != 4*ms {
		t.Errorf("new backend's GPU free at %v, want 4ms", f)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, c := range []Config{{GPUs: 0, StallAfter: time.Second}, {GPUs: 1}, {GPUs: 1, StallAfter: time.Second, SlipWeight: 2}} {
		if _, err := New(c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// A report of a later plan leaves an earlier unreported one outstanding:
// it falls overdue and is retired, not silently forgotten (the service
// still holds its requests).
func TestOutOfOrderReportKeepsTheEarlierPlan(t *testing.T) {
	w := newWatcher(t, 1)
	w.Attach(0, 1, []scheduler.GPUID{0})
	w.Sent(0, 1, 0, 10*time.Millisecond)
	w.Sent(0, 2, 10*ms, 10*time.Millisecond)
	w.Finished(20*ms, ran(0, 2, 10*time.Millisecond, 10*ms, 20*ms))
	if w.Outstanding(0) != 1 {
		t.Fatalf("%d outstanding, want plan 1 still", w.Outstanding(0))
	}
	for now := 20 * ms; now < 200*ms; now += 10 * ms {
		w.Heard(now, 1)
		if got := w.Tick(now); len(got) > 0 {
			if !slices.Equal(got[0].Retired, []scheduler.PlanID{1}) {
				t.Fatalf("retired %v, want plan 1", got[0].Retired)
			}
			return
		}
	}
	t.Fatal("the unreported plan never fell overdue")
}

// After its own process was paused, the Watcher takes no backend for
// silent and no plan for overdue before StallAfter has passed again.
func TestResumeAfterOwnPause(t *testing.T) {
	w := newWatcher(t, 2)
	w.Attach(0, 1, []scheduler.GPUID{0})
	w.Attach(0, 2, []scheduler.GPUID{1})
	w.Sent(0, 1, 0, 10*time.Millisecond)
	// Paused from 5ms to 1s: everything is long overdue.
	w.Resume(scheduler.Time(time.Second))
	if got := w.Tick(scheduler.Time(time.Second) + 99*ms); len(got) != 0 {
		t.Fatalf("stalls %+v within StallAfter of the resume", got)
	}
	if got := w.Tick(scheduler.Time(time.Second) + 100*ms); len(got) != 2 {
		t.Errorf("stalls %+v StallAfter after the resume, want both GPUs (nothing heard since)", got)
	}
}

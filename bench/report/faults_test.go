package report

import (
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/scheduler/serving"
)

func stall(at, d time.Duration) workload.Fault {
	return workload.Fault{At: at, Action: workload.FaultStall, Target: workload.FaultTarget{Kind: workload.TargetBackend}, For: d}
}

// feed adds n requests per 10ms from from to to, one in every badEvery bad
// (none if badEvery is 0), to a fresh tally per goroutine, merged.
func feed(t *FaultTally, from, to time.Duration, perTick, badEvery int, reason string) {
	k := 0
	for at := from; at < to; at += 10 * time.Millisecond {
		for range perTick {
			k++
			if badEvery > 0 && k%badEvery == 0 {
				t.Add(at, OutcomeDropped, reason)
			} else {
				t.Add(at, OutcomeGood, "")
			}
		}
	}
}

func TestFaultTallyPhasesAndRecovery(t *testing.T) {
	s := time.Second
	faults := []workload.Fault{stall(3*s, 2*s)}
	// A run of 8s, window 1s-8s: 1% bad before the stall, half bad during
	// it, 30% bad for 300ms after it, then 1% again.
	a := NewFaultTally(&workload.Workload{Faults: faults}, s, 8*s, 8*s)
	b := NewFaultTally(&workload.Workload{Faults: faults}, s, 8*s, 8*s)
	feed(a, 0, 3*s, 10, 100, "expired")
	feed(b, 3*s, 5*s, 10, 2, "backend stalled")
	feed(a, 5*s, 5*s+300*time.Millisecond, 10, 3, "expired")
	feed(b, 5*s+300*time.Millisecond, 8*s, 10, 100, "expired")
	a.Merge(b)
	r := a.Report()
	if len(r.Phases) != 3 {
		t.Fatalf("%d phases, want before, during and after the stall: %+v", len(r.Phases), r.Phases)
	}
	before, during, after := r.Phases[0], r.Phases[1], r.Phases[2]
	if before.FromSeconds != 1 || before.ToSeconds != 3 || before.Label != "before the faults" || before.Offered != 2000 {
		t.Errorf("before: %+v", before)
	}
	if during.Label != "3s stall backend-0 for 2s" || during.BadRate != 0.5 || during.Reasons["backend stalled"] != 1000 || during.GoodputRPS != 500 {
		t.Errorf("during: %+v", during)
	}
	if after.Label != "after 3s stall backend-0 for 2s" || after.ToSeconds != 8 {
		t.Errorf("after: %+v", after)
	}
	if r.RecoveryThreshold != 0.02 {
		t.Errorf("threshold %v, want the 1%% before plus a point", r.RecoveryThreshold)
	}
	ev := r.Faults[0]
	if !ev.Recovered || ev.RecoverySeconds < 0.29 || ev.RecoverySeconds > 0.31 || ev.EndSeconds != 5 {
		t.Errorf("recovery %+v, want recovered 0.3s after 5s", ev)
	}
	if len(r.Timeline) != 80 || r.Timeline[40].Bad != 50 || r.Timeline[40].StartSeconds != 4 {
		t.Errorf("timeline: %d buckets, bucket 40 %+v", len(r.Timeline), r.Timeline[40])
	}
	var text strings.Builder
	if err := WriteTable(&text, &Report{Faults: r}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"fault phases", "backend stalled 1000", "3s stall backend-0 for 2s: 0.3s after 5.00s"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, text.String())
		}
	}
}

// A cluster that never gets back to its old bad rate (a backend killed for
// good) is reported as not recovered, with all the time there was.
func TestFaultTallyNoRecovery(t *testing.T) {
	s := time.Second
	kill := workload.Fault{At: 2 * s, Action: workload.FaultKill, Target: workload.FaultTarget{Kind: workload.TargetBackend}}
	ta := NewFaultTally(&workload.Workload{Faults: []workload.Fault{kill}}, 0, 4*s, 4*s)
	feed(ta, 0, 2*s, 10, 0, "")
	feed(ta, 2*s, 4*s, 10, 3, "overload")
	r := ta.Report()
	if ev := r.Faults[0]; ev.Recovered || ev.RecoverySeconds != 2 {
		t.Errorf("%+v: want not recovered in the 2s left", ev)
	}
	if len(r.Phases) != 2 || r.Phases[1].Label != "after 2s kill backend-0" {
		t.Errorf("phases %+v", r.Phases)
	}
	if NewFaultTally(&workload.Workload{}, 0, s, s).Report() != nil {
		t.Error("a run without faults has a fault report")
	}
}

// Requests that arrive within an SLO of the next fault may be its victims:
// they do not count against the recovery from the fault before.
func TestRecoveryWindowStopsAnSLOBeforeTheNextFault(t *testing.T) {
	s := time.Second
	w := &workload.Workload{
		Models: []workload.Model{{Model: serving.Model{SLO: 300 * time.Millisecond}}},
		// The stall ends at 3.5s, half a second before the kill.
		Faults: []workload.Fault{stall(s, 2500*time.Millisecond), {At: 4 * s, Action: workload.FaultKill, Target: workload.FaultTarget{Kind: workload.TargetScheduler}}},
	}
	ta := NewFaultTally(w, 0, 6*s, 6*s)
	feed(ta, 0, 3700*time.Millisecond, 10, 0, "")
	// Every request of the 300ms before the kill is its victim.
	feed(ta, 3700*time.Millisecond, 6*s, 10, 1, "scheduler lost")
	ev := ta.Report().Faults[0]
	if !ev.Recovered || ev.RecoverySeconds != 0 {
		t.Errorf("%+v: want recovered at once, the kill's victims left out", ev)
	}
}

package cluster

import (
	"testing"
	"time"

	"github.com/symphony-serving/symphony/frontend"
)

// A request whose batch hangs past its deadline ends at its deadline, as
// expired, not a second later; the result that comes after is counted as
// a duplicate, never as a second end.
func TestRequestEndsAtItsDeadline(t *testing.T) {
	c, g := gatedCluster(t, 0)
	f := c.Frontends[0]
	l := newLedger(t, c.cfg.Models)
	deadline := time.Now().Add(300 * time.Millisecond)
	call := l.issueBy(f, "slow", deadline)
	<-g.started // its batch runs, and hangs
	<-call.Done()
	if reason, ok := frontend.IsDrop(call.Err); !ok || reason != frontend.DropExpired {
		t.Fatalf("ended with %v, want an expired drop", call.Err)
	}
	// Timers run late under the race detector on a loaded machine; the
	// old safety net waited a whole second past the deadline.
	if late := call.Timing.Ended.Sub(deadline); late < 0 || late > 250*time.Millisecond {
		t.Errorf("ended %v after its deadline, want at it", late)
	}
	g.open()
	st := f.Stats()
	waitFor(t, func() bool { return st.Duplicates.Load() == 1 })
	// The late result changed neither the call nor the client's counts:
	// one request, dropped.
	l.check(t)
	if st.Expired.Load() != 0 {
		t.Errorf("%d requests counted as expired with a result; the one request had none by its deadline", st.Expired.Load())
	}
}

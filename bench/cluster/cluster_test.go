package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/backend"
	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/scheduler/service"
	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/inproc"
	"github.com/symphony-serving/symphony/transport/tcp"
	"github.com/symphony-serving/symphony/transport/wire"
)

func testConfig(n transport.Network, addr string, backends, gpus int) Config {
	return Config{
		Network: n, Addr: addr, DataAddr: addr,
		Models: []service.Model{
			// SLOs far above the batch latencies, and a work-conserving
			// policy that runs a request as soon as a GPU is free: these
			// tests check the runtime's behaviour, not the policy's, and
			// must hold on a loaded 2-core CI machine under the race
			// detector, where goroutines can be held up for 100ms and more.
			{Name: "fast", Profile: profile.MustLinear(200*time.Microsecond, time.Millisecond, 32), SLO: 3 * time.Second},
			{Name: "slow", Profile: profile.MustLinear(500*time.Microsecond, 3*time.Millisecond, 32), SLO: 4 * time.Second},
		},
		Policy:   scheduler.PolicyWorkConserving,
		Delays:   scheduler.Delays{Ctrl: 200 * time.Microsecond, DataPerRequest: 20 * time.Microsecond, Result: 300 * time.Microsecond},
		Backends: backends, GPUsPerBackend: gpus, Frontends: 1,
		// The race detector and parallel test binaries delay timers and
		// goroutines by many milliseconds on a 2-core CI machine.
		WakeupSlack: 20 * time.Millisecond,
	}
}

func startCluster(t *testing.T, cfg Config) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func input(i int) []byte { return []byte(fmt.Sprintf("request-%d-payload", i)) }

// serveAlternating offers n requests to f, alternately for "fast" (model
// 0) and "slow" (model 1), and checks that each succeeds with the emulated
// GPU's output for its input as the model saw it: modelInput(input), or
// the input itself if modelInput is nil.
func serveAlternating(t *testing.T, f *frontend.Client, n int, modelInput func([]byte) []byte) []*frontend.Call {
	t.Helper()
	var calls []*frontend.Call
	for i := 0; i < n; i++ {
		calls = append(calls, f.Go(context.Background(), []string{"fast", "slow"}[i%2], input(i)))
	}
	for i, call := range calls {
		<-call.Done()
		if call.Err != nil {
			t.Fatalf("request %d: %v", i, call.Err)
		}
		in := input(i)
		if modelInput != nil {
			in = modelInput(in)
		}
		if want := backend.EmulatedOutput(uint32(i%2), in); !bytes.Equal(call.Output, want) {
			t.Fatalf("request %d: output %x, want %x", i, call.Output, want)
		}
	}
	return calls
}

func TestEndToEndResultsAreTheRequests(t *testing.T) {
	for _, tc := range []struct {
		name string
		net  func() transport.Network
		addr string
	}{
		{"inproc", func() transport.Network { return inproc.New() }, ""},
		{"tcp", func() transport.Network { return tcp.New(tcp.Default()) }, "127.0.0.1:0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCluster(t, testConfig(tc.net(), tc.addr, 2, 2))
			f := c.Frontends[0]
			for i, call := range serveAlternating(t, f, 200, nil) {
				slo := []time.Duration{3 * time.Second, 4 * time.Second}[i%2]
				if call.Timing.BatchSize < 1 || call.Timing.Finished.Before(call.Timing.Started) {
					t.Fatalf("request %d: timing %+v", i, call.Timing)
				}
				if lat := call.Timing.Ended.Sub(call.Timing.Submitted); lat > slo+time.Second {
					t.Errorf("request %d took %v, SLO %v", i, lat, slo)
				}
			}
			if st := f.Stats(); st.Answered.Load() != 200 || st.Duplicates.Load() != 0 {
				t.Errorf("stats: answered %d, duplicates %d", st.Answered.Load(), st.Duplicates.Load())
			}
		})
	}
}

func TestUnknownModelAndBadDeadline(t *testing.T) {
	c := startCluster(t, testConfig(inproc.New(), "", 1, 1))
	f := c.Frontends[0]
	if _, err := f.Infer(context.Background(), "nope", []byte("x")); !errors.Is(err, frontend.ErrUnknownModel) {
		t.Errorf("unknown model: %v", err)
	}
	if _, err := f.Infer(context.Background(), "fast", []byte("x"), frontend.WithDeadline(time.Now().Add(-time.Millisecond))); !errors.Is(err, frontend.ErrBadDeadline) {
		t.Errorf("past deadline: %v", err)
	}
	// A deadline later than the SLO is cut to the SLO: the request still runs.
	if _, err := f.Infer(context.Background(), "fast", []byte("x"), frontend.WithDeadline(time.Now().Add(time.Hour))); err != nil {
		t.Errorf("long deadline: %v", err)
	}
}

func TestCancelEndsQueuedRequest(t *testing.T) {
	c := startCluster(t, testConfig(inproc.New(), "", 1, 1))
	f := c.Frontends[0]
	ctx, cancel := context.WithCancel(context.Background())
	call := f.Go(ctx, "slow", []byte("x"))
	cancel()
	<-call.Done()
	// The request may have run before the cancel reached it; if not, it
	// ends as a cancel drop. Either way it ends exactly once.
	if call.Err != nil {
		if r, ok := frontend.IsDrop(call.Err); !ok || r != frontend.DropCanceled {
			t.Errorf("canceled request: %v", call.Err)
		}
	}
}

// An input larger than the protocol carries ends its request with the
// typed frontend.ErrBadInput, one of the outcomes an app can tell apart.
func TestOversizedInputEndsAsBadInput(t *testing.T) {
	cfg := testConfig(inproc.New(), "", 1, 1)
	c := startCluster(t, cfg)
	f := c.Frontends[0]
	l := newLedger(t, cfg.Models)
	in := make([]byte, wire.MaxInputSize+1)
	call := f.Go(context.Background(), "fast", in)
	l.watch(f, "fast", in, clientCall{call}, time.Time{})
	o := l.check(t)
	if !errors.Is(call.Err, frontend.ErrBadInput) || o.failed != 1 {
		t.Errorf("ended with %v (%d failed), want ErrBadInput", call.Err, o.failed)
	}
}

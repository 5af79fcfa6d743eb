package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/backend"
	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/transport/inproc"
)

// The ledger's checks can fail. Each case hands a fresh ledger hand-made
// Calls (fakeEnd) that end as a broken frontend might end them, or
// makes calls on a client behind the ledger's back, and the ledger must
// report exactly the problems listed; the honest case, every kind of end
// done right, must report none.
func TestLedgerReportsWrongEnds(t *testing.T) {
	models := testConfig(nil, "", 0, 0).Models // "fast" is model 0, "slow" 1
	fc := frontend.Default()
	fc.SchedulerAddr, fc.Network = "nowhere", inproc.New()
	unconnected, err := frontend.New(fc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unconnected.Close() })
	// ends makes a call that ends with out and err.
	ends := func(_ string, out []byte, err error) watched {
		return newFakeEnd(func() ([]byte, error) { return out, err })
	}
	// own hands l a call for model that ends with the right output for
	// its own input.
	own := func(l *ledger, model string) {
		in := l.nextInput(model)
		l.watch(nil, model, in, ends(model, backend.EmulatedOutput(l.models[model].id, in), nil), time.Time{})
	}
	// fails hands l a call for model that ends with err.
	fails := func(l *ledger, model string, err error) {
		l.watch(nil, model, l.nextInput(model), ends(model, nil, err), time.Time{})
	}
	for _, tc := range []struct {
		name string
		make func(l *ledger)
		want []string // the problems, in order, by a part of each
	}{
		{"honest", func(l *ledger) {
			own(l, "fast")
			own(l, "slow")
			fails(l, "fast", &frontend.DropError{Model: "fast", Reason: frontend.DropExpired})
			fails(l, "slow", &frontend.BackendError{Model: "slow", Backend: "b", Cause: "backend lost: connection closed"})
			fails(l, "fast", frontend.ErrSchedulerLost)
			fails(l, "slow", frontend.ErrClosed)
			fails(l, "other", fmt.Errorf("%w %q", frontend.ErrUnknownModel, "other"))
			l.issue(unconnected, "fast") // ends at once, ErrNotConnected, counted as Failed
		}, nil},
		{"outputs swapped between two requests", func(l *ledger) {
			a, b := l.nextInput("fast"), l.nextInput("fast")
			l.watch(nil, "fast", a, ends("fast", backend.EmulatedOutput(0, b), nil), time.Time{})
			l.watch(nil, "fast", b, ends("fast", backend.EmulatedOutput(0, a), nil), time.Time{})
		}, []string{"answered with request 1's output", "answered with request 0's output"}},
		{"another model's output for the same input", func(l *ledger) {
			in := l.nextInput("fast")
			l.watch(nil, "fast", in, ends("fast", backend.EmulatedOutput(1, in), nil), time.Time{})
		}, []string{"answered with no request's output"}},
		{"never ends", func(l *ledger) {
			block := make(chan struct{})
			t.Cleanup(func() { close(block) })
			l.margin = 10 * time.Millisecond
			call := newFakeEnd(func() ([]byte, error) {
				<-block
				return nil, frontend.ErrClosed
			})
			l.watch(nil, "fast", l.nextInput("fast"), call, time.Now().Add(10*time.Millisecond))
			own(l, "fast") // the wait for the lost one does not cost the next one its end
		}, []string{"did not end within 10ms of its deadline"}},
		{"answered after its deadline", func(l *ledger) {
			in := l.nextInput("slow")
			l.watch(nil, "slow", in, ends("slow", backend.EmulatedOutput(1, in), nil), time.Now().Add(-time.Millisecond))
		}, []string{"after its deadline"}},
		{"an error with an output", func(l *ledger) {
			in := l.nextInput("fast")
			l.watch(nil, "fast", in, ends("fast", backend.EmulatedOutput(0, in), frontend.ErrClosed), time.Time{})
		}, []string{"both an error"}},
		{"untyped error", func(l *ledger) { fails(l, "fast", errors.New("something broke")) },
			[]string{"none of the frontend's outcomes"}},
		{"drop for an unknown reason", func(l *ledger) {
			fails(l, "fast", &frontend.DropError{Model: "fast", Reason: "bored"})
		}, []string{"unknown reason"}},
		{"backend failure of an unknown cause", func(l *ledger) {
			fails(l, "fast", &frontend.BackendError{Model: "fast", Cause: "EndCode(42)"})
		}, []string{"unknown cause"}},
		{"a served model called unknown", func(l *ledger) {
			fails(l, "fast", fmt.Errorf("%w %q", frontend.ErrUnknownModel, "fast"))
		}, []string{"does not serve"}},
		{"another request's drop", func(l *ledger) {
			fails(l, "fast", &frontend.DropError{Model: "slow", Reason: frontend.DropDeadline})
		}, []string{`a drop of a request for "slow"`}},
		{"a call the ledger did not see", func(l *ledger) {
			l.issue(unconnected, "fast")
			unconnected.Go(context.Background(), "fast", []byte("behind the ledger's back"))
		}, []string{"Submitted (requests issued) 2; the ledger counted 1", "Failed 2; the ledger counted 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger(t, models)
			tc.make(l)
			got := l.problems()
			for i, p := range got {
				if i >= len(tc.want) || !strings.Contains(p, tc.want[i]) {
					t.Errorf("unexpected problem %d: %s", i, p)
				}
			}
			for i := len(got); i < len(tc.want); i++ {
				t.Errorf("problem %d not reported: %s", i, tc.want[i])
			}
		})
	}
}

// stale answers each batch with the previous batch of the same size's
// outputs: as a backend that mixed up its result buffers would, it
// delivers one request's result to another.
type stale struct {
	*backend.Emulated
	mu   sync.Mutex
	last map[int][][]byte // by batch size
}

func (e *stale) Execute(ctx context.Context, gpu int, model uint32, in [][]byte) ([][]byte, error) {
	outs, err := e.Emulated.Execute(ctx, gpu, model, in)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	prev, ok := e.last[len(in)]
	e.last[len(in)] = outs
	if !ok {
		return outs, nil
	}
	return prev, nil
}

// The same, end to end: a cluster whose backend hands each request the
// result of the one before it. The frontend delivers those results as
// answers, and only the ledger's check of each output against its own
// request's input catches them.
func TestLedgerCatchesResultsOfOtherRequests(t *testing.T) {
	cfg := testConfig(inproc.New(), "", 1, 1)
	cfg.Executor = func() backend.Executor { return &stale{Emulated: backend.NewEmulated(), last: map[int][][]byte{}} }
	c := startCluster(t, cfg)
	f := c.Frontends[0]
	l := newLedger(t, cfg.Models)
	for range 3 {
		// One at a time: each runs in a batch of its own.
		call := l.issue(f, "fast")
		if <-call.Done(); call.Err != nil {
			t.Fatalf("request failed: %v", call.Err)
		}
	}
	want := []string{"request 1 (fast, ", "answered with request 0's output", "request 2 (fast, ", "answered with request 1's output"}
	got := l.problems()
	if len(got) != 2 {
		t.Fatalf("problems %q; want request 1 and 2 reported", got)
	}
	for i, p := range got {
		if !strings.HasPrefix(p, want[2*i]) || !strings.Contains(p, want[2*i+1]) {
			t.Errorf("problem %q; want it to say %q ... %q", p, want[2*i], want[2*i+1])
		}
	}
}

// fakeEnd is a request that ends as fn says, on its own goroutine, timed
// from its start as a frontend.Call is.
type fakeEnd struct {
	done chan struct{}
	t    frontend.Timing
	out  []byte
	err  error
}

func newFakeEnd(fn func() ([]byte, error)) *fakeEnd {
	e := &fakeEnd{done: make(chan struct{}), t: frontend.Timing{Submitted: time.Now()}}
	go func() {
		e.out, e.err = fn()
		e.t.Ended = time.Now()
		close(e.done)
	}()
	return e
}

func (e *fakeEnd) Done() <-chan struct{} { return e.done }

func (e *fakeEnd) ended() (frontend.Timing, []byte, error) { return e.t, e.out, e.err }

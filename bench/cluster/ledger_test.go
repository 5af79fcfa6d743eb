package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/backend"
	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/scheduler/service"
	"github.com/symphony-serving/symphony/transport/wire"
)

// ledger keeps the books of a fault test, apart from the code under test:
// a fault test asserts that every request ends exactly once and with its
// own result, and it cannot take the frontend's word for that.
//
// The test issues its requests through the ledger (issue, issueBy, or
// load, which offers requests from a few goroutines until a channel
// closes). Each gets an input no other request has, so its only right
// answer is the emulated GPU's output for that input and its model: a
// result delivered to another request is caught. A watcher goroutine per
// request waits on its Call's Done channel and counts the end itself, by
// outcome, as it happens; a request that has not ended by its deadline
// plus a margin is reported, and the wait for it given up, so a lost
// request fails the test instead of hanging it. check then judges every
// end (see problems) and holds each client's counters to the ledger's
// own counts.
//
// A ledger's books cover every call made on a client from the ledger's
// first request on it until check: a test must make no other calls on that
// client in between, or the counters cannot agree.
type ledger struct {
	models map[string]ledgerModel
	// causes are the BackendError causes a frontend can report: the
	// names of the wire end codes that mean a failure on a backend.
	causes []string
	// nonce makes this ledger's inputs unlike any other ledger's, so that
	// a result that reaches another test's, or another phase's, request
	// is caught too.
	nonce uint64
	seq   atomic.Uint64 // numbers the inputs
	// margin is how long after its deadline a request may take to end
	// before the ledger reports it lost: timers and goroutines run late on
	// a loaded machine under the race detector.
	margin time.Duration

	loaders  sync.WaitGroup
	watchers sync.WaitGroup // one per request, until it ends or passes its bound

	mu       sync.Mutex
	requests []*request
	owner    map[string]int // a right answer, to the request it belongs to
	clients  map[*frontend.Client]*clientBooks
	count    outcomes // the ends the watchers have seen so far
	sealed   bool     // check has begun: no more requests
	late     int      // requests issued after check, never judged
}

// ledgerModel is what the ledger knows of a served model.
type ledgerModel struct {
	id  uint32 // its index in the cluster's configuration: the wire model ID
	slo time.Duration
}

// request is one request as the ledger saw it.
type request struct {
	n      int              // its place in issue order
	client *frontend.Client // nil for a call made by hand
	model  string
	id     uint32
	input  []byte
	want   []byte // its only right answer
	// latest is the deadline the test asked for (zero: the model's SLO
	// alone), and bound the ledger's own time by which it must have ended:
	// its deadline, on the ledger's clock after the call was made, plus
	// the margin.
	latest, bound time.Time
	call          watched

	// Set by its watcher when Done closed.
	ended  bool
	output []byte
	err    error
}

// clientBooks are the ledger's counts for one client, and the client's own
// counters when the ledger first used it.
type clientBooks struct {
	issued                                 int
	base                                   statsSnapshot
	answered, dropped, failed, expiredDrop int
}

// statsSnapshot is a frontend.Stats read at one moment.
type statsSnapshot struct{ submitted, answered, dropped, failed, expired uint64 }

func snapshot(st *frontend.Stats) statsSnapshot {
	return statsSnapshot{st.Submitted.Load(), st.Answered.Load(), st.Dropped.Load(), st.Failed.Load(), st.Expired.Load()}
}

// outcomes count how a ledger's requests ended, for a test's checks of
// its scenario.
type outcomes struct {
	answered, dropped, failed int
	// kinds counts the errors by kind (errKind): "drop:expired",
	// "backend:backend lost: ...", or the text of one of the frontend's
	// sentinel errors.
	kinds map[string]int
}

// matching counts the errors whose kind contains s.
func (o outcomes) matching(s string) int {
	n := 0
	for k, c := range o.kinds {
		if strings.Contains(k, s) {
			n += c
		}
	}
	return n
}

// newLedger starts the books of a test that runs models (a cluster's
// Config.Models: a model's ID is its index there, as on the wire). A
// cleanup fails the test if it issued requests that check never judged.
func newLedger(t *testing.T, models []service.Model) *ledger {
	l := &ledger{
		models:  make(map[string]ledgerModel, len(models)),
		nonce:   rand.Uint64(),
		margin:  5 * time.Second,
		owner:   map[string]int{},
		clients: map[*frontend.Client]*clientBooks{},
		count:   outcomes{kinds: map[string]int{}},
	}
	for _, c := range []wire.EndCode{wire.EndBackendLost, wire.EndInputUnavailable, wire.EndExecutorFailed, wire.EndBackendStalled} {
		l.causes = append(l.causes, c.String())
	}
	for i, m := range models {
		l.models[m.Name] = ledgerModel{id: uint32(i), slo: m.SLO}
	}
	t.Cleanup(func() {
		l.mu.Lock()
		unchecked := !l.sealed && len(l.requests) > 0
		l.sealed = true
		n, late := len(l.requests), l.late
		l.mu.Unlock()
		switch {
		case t.Failed():
		case unchecked:
			t.Errorf("ledger: %d requests issued, never checked", n)
		case late > 0:
			t.Errorf("ledger: %d requests issued after check, never judged", late)
		}
	})
	return l
}

// issue makes one request for model on f, with a fresh input, and records
// it. Its deadline is the model's SLO from now.
func (l *ledger) issue(f *frontend.Client, model string) *frontend.Call {
	return l.issueBy(f, model, time.Time{})
}

// issueBy is issue with a deadline sooner than the SLO (zero: none).
func (l *ledger) issueBy(f *frontend.Client, model string, deadline time.Time) *frontend.Call {
	in := l.nextInput(model)
	l.mu.Lock()
	if l.clients[f] == nil {
		// Read under l.mu, so that no call this ledger makes on f is
		// counted in the base.
		l.clients[f] = &clientBooks{base: snapshot(f.Stats())}
	}
	l.mu.Unlock()
	var opts []frontend.CallOption
	if !deadline.IsZero() {
		opts = append(opts, frontend.WithDeadline(deadline))
	}
	call := f.Go(context.Background(), model, in, opts...)
	l.watch(f, model, in, clientCall{call}, deadline)
	return call
}

// nextInput is an input no other request has: the ledger's nonce and a
// number of its own.
func (l *ledger) nextInput(model string) []byte {
	return fmt.Appendf(nil, "ledger-%016x-%s-%d", l.nonce, model, l.seq.Add(1))
}

// watch records call, made on client f (nil for a Call made by hand) for
// model with input, and due by deadline (zero: the model's SLO), and hands
// it to a watcher. issue calls it; a test of the ledger itself calls
// it with hand-made Calls.
// watched is a request as the ledger sees it: a *frontend.Call (through
// clientCall), or a test's own end.
type watched interface {
	Done() <-chan struct{}
	// ended is the call's timing, output and error, once Done is closed.
	ended() (frontend.Timing, []byte, error)
}

// clientCall is a *frontend.Call as the ledger watches it.
type clientCall struct{ *frontend.Call }

func (c clientCall) ended() (frontend.Timing, []byte, error) { return c.Timing, c.Output, c.Err }

func (l *ledger) watch(f *frontend.Client, model string, in []byte, call watched, deadline time.Time) {
	m, known := l.models[model]
	r := &request{client: f, model: model, id: m.id, input: in, latest: deadline, call: call}
	if known {
		r.want = backend.EmulatedOutput(m.id, in)
	}
	// The call's own deadline is no later than this: its SLO from a
	// moment before now.
	due := time.Now().Add(m.slo)
	if !deadline.IsZero() && (deadline.Before(due) || !known) {
		due = deadline
	}
	r.bound = due.Add(l.margin)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sealed {
		l.late++ // a test's mistake, reported by the cleanup
		return
	}
	r.n = len(l.requests)
	l.requests = append(l.requests, r)
	if r.want != nil {
		l.owner[string(r.want)] = r.n
	}
	if b := l.clients[f]; b != nil {
		b.issued++
	}
	l.watchers.Add(1) // under l.mu, so never after problems sealed the books
	go l.await(r)
}

// load offers requests to f from four goroutines, each one every gap,
// for models in turn, until stop closes. check waits for them to stop.
func (l *ledger) load(f *frontend.Client, models []string, gap time.Duration, stop <-chan struct{}) {
	l.loadFrom(func() *frontend.Client { return f }, models, gap, stop)
}

// loadFrom is load on whichever client pick gives at each request, as an
// app does on a frontend that restarts: while pick gives nil (the frontend
// is down) the app issues nothing.
func (l *ledger) loadFrom(pick func() *frontend.Client, models []string, gap time.Duration, stop <-chan struct{}) {
	for g := range 4 {
		l.loaders.Add(1)
		go func() {
			defer l.loaders.Done()
			tick := time.NewTicker(gap)
			defer tick.Stop()
			for i := g; ; i++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				if f := pick(); f != nil {
					l.issue(f, models[i%len(models)])
				}
			}
		}()
	}
}

// await is r's watcher: it counts r's end when its Done closes, or gives
// up on it at its bound, leaving it unended.
func (l *ledger) await(r *request) {
	defer l.watchers.Done()
	timer := time.NewTimer(time.Until(r.bound))
	defer timer.Stop()
	select {
	case <-r.call.Done():
	case <-timer.C:
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, out, err := r.call.ended()
	r.ended, r.output, r.err = true, out, err
	l.tallyEnd(r)
}

// tallyEnd counts r's end, by the class the client must count it in.
// Called with l.mu held.
func (l *ledger) tallyEnd(r *request) {
	b := l.clients[r.client]
	if b == nil {
		b = &clientBooks{} // a hand-made call's: no client to hold to it
	}
	switch {
	case r.err == nil:
		l.count.answered++
		b.answered++
	case isDropErr(r.err):
		l.count.dropped++
		b.dropped++
		if reason, _ := frontend.IsDrop(r.err); reason == frontend.DropExpired {
			b.expiredDrop++
		}
	default:
		l.count.failed++
		b.failed++
	}
	if r.err != nil {
		l.count.kinds[errKind(r.err)]++
	}
}

// answered is how many requests the watchers have seen answered so far:
// a test's measure of progress that does not rely on the client's counters.
func (l *ledger) answered() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count.answered
}

// check waits until the load goroutines have stopped (their stop channel
// must be closed first) and every request has ended or passed its bound,
// fails t with every problem found (see problems), and returns how the
// requests ended. It seals the books: no request may be issued after it.
func (l *ledger) check(t *testing.T) outcomes {
	t.Helper()
	stopped := make(chan struct{})
	go func() {
		l.loaders.Wait()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("ledger: the load goroutines did not stop within 10s of check: close their stop channel first")
	}
	for _, p := range l.problems() {
		t.Error(p)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("ledger: %d requests: %d answered, %d dropped, %d failed: %v",
		len(l.requests), l.count.answered, l.count.dropped, l.count.failed, l.count.kinds)
	o := l.count
	o.kinds = make(map[string]int, len(l.count.kinds))
	for k, n := range l.count.kinds {
		o.kinds[k] = n
	}
	return o
}

// problems seals the books, waits for the watchers to see every request
// end or give up on it, and lists what is wrong:
//   - a request that did not end by its deadline plus the margin;
//   - an answer that is not the emulated GPU's output for the request's
//     own input and model (naming the request whose output it is, if
//     any), or that came after the request's deadline;
//   - an error that is none of the frontend's typed outcomes (a drop of a
//     known reason, a BackendError of a known cause, a sentinel error),
//     or a typed error that names another model (or calls a served model
//     unknown), or that came with an output;
//   - a Call whose Output or Err changed after its Done closed: a second
//     end written over the first;
//   - a client whose counters disagree with the ledger's books: Submitted
//     with the requests issued on it, Answered, Dropped and Failed with
//     the ends the watchers counted, and Expired more than its expired
//     drops.
func (l *ledger) problems() []string {
	l.mu.Lock()
	l.sealed = true
	l.mu.Unlock()
	l.watchers.Wait()

	l.mu.Lock()
	defer l.mu.Unlock()
	var ps []string
	for _, r := range l.requests {
		for _, p := range l.judge(r) {
			ps = append(ps, fmt.Sprintf("request %d (%s, input %q): %s", r.n, r.model, r.input, p))
		}
	}
	for f, b := range l.clients {
		st := snapshot(f.Stats())
		name := fmt.Sprintf("client %s", f.DataAddr())
		for _, c := range []struct {
			what       string
			got        uint64
			want       int
			atMostWant bool
		}{
			{"Submitted (requests issued)", st.submitted - b.base.submitted, b.issued, false},
			{"Answered", st.answered - b.base.answered, b.answered, false},
			{"Dropped", st.dropped - b.base.dropped, b.dropped, false},
			{"Failed", st.failed - b.base.failed, b.failed, false},
			{"Expired (at most the expired drops)", st.expired - b.base.expired, b.expiredDrop, true},
		} {
			if c.got != uint64(c.want) && !(c.atMostWant && c.got < uint64(c.want)) {
				ps = append(ps, fmt.Sprintf("%s counts %s %d; the ledger counted %d", name, c.what, c.got, c.want))
			}
		}
	}
	return ps
}

// judge lists what is wrong with how r ended. Called with l.mu held, after
// the watchers are done.
func (l *ledger) judge(r *request) []string {
	if !r.ended {
		return []string{fmt.Sprintf("did not end within %v of its deadline", l.margin)}
	}
	var ps []string
	if _, out, err := r.call.ended(); !bytes.Equal(out, r.output) || err != r.err {
		ps = append(ps, fmt.Sprintf("changed after it ended: output %x, err %v; then output %x, err %v", r.output, r.err, out, err))
	}
	if r.err != nil {
		if r.output != nil {
			ps = append(ps, fmt.Sprintf("ended with both an error (%v) and an output %x", r.err, r.output))
		}
		if p := l.typed(r); p != "" {
			ps = append(ps, p)
		}
		return ps
	}
	switch {
	case r.want == nil:
		ps = append(ps, "answered for a model the cluster does not serve")
	case !bytes.Equal(r.output, r.want):
		whose := "no request's"
		if n, ok := l.owner[string(r.output)]; ok {
			whose = fmt.Sprintf("request %d's", n)
		}
		ps = append(ps, fmt.Sprintf("answered with %s output %x, want %x", whose, r.output, r.want))
	}
	timing, _, _ := r.call.ended()
	deadline := timing.Submitted.Add(l.models[r.model].slo)
	if !r.latest.IsZero() && r.latest.Before(deadline) {
		deadline = r.latest
	}
	if late := timing.Ended.Sub(deadline); late > 0 {
		ps = append(ps, fmt.Sprintf("answered %v after its deadline", late))
	}
	return ps
}

// typed says what is wrong with r's error, if it is not one of the
// frontend's typed outcomes for r's model.
func (l *ledger) typed(r *request) string {
	var drop *frontend.DropError
	var be *frontend.BackendError
	switch {
	case errors.As(r.err, &drop):
		switch drop.Reason {
		case frontend.DropDeadline, frontend.DropOverload, frontend.DropShutdown, frontend.DropCanceled, frontend.DropExpired:
		default:
			return fmt.Sprintf("dropped for an unknown reason %q", drop.Reason)
		}
		if drop.Model != r.model {
			return fmt.Sprintf("ended with a drop of a request for %q: %v", drop.Model, r.err)
		}
	case errors.As(r.err, &be):
		code, _, _ := strings.Cut(be.Cause, ": ")
		known := false
		for _, c := range l.causes {
			known = known || code == c
		}
		if !known {
			return fmt.Sprintf("failed on a backend for an unknown cause %q", be.Cause)
		}
		if be.Model != r.model {
			return fmt.Sprintf("ended with the failure of a request for %q: %v", be.Model, r.err)
		}
	case errors.Is(r.err, frontend.ErrUnknownModel):
		if _, served := l.models[r.model]; served {
			return fmt.Sprintf("ended as a request for a model the cluster does not serve: %v", r.err)
		}
	default:
		for _, s := range []error{frontend.ErrNotConnected, frontend.ErrClosed,
			frontend.ErrBadDeadline, frontend.ErrBadInput, frontend.ErrRefused, frontend.ErrSchedulerLost} {
			if errors.Is(r.err, s) {
				return ""
			}
		}
		return fmt.Sprintf("ended with an error that is none of the frontend's outcomes: %v", r.err)
	}
	return ""
}

func isDropErr(err error) bool { _, ok := frontend.IsDrop(err); return ok }

// errKind names an error's kind: a drop by its reason, a backend failure
// by its cause, anything else by its text.
func errKind(err error) string {
	if r, ok := frontend.IsDrop(err); ok {
		return "drop:" + string(r)
	}
	var be *frontend.BackendError
	if errors.As(err, &be) {
		return "backend:" + be.Cause
	}
	return err.Error()
}

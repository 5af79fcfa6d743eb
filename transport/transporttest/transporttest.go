// Package transporttest is the conformance suite of transport.Network: the
// contract every network (tcp, inproc) must keep, run against each of them
// so that code tested over inproc behaves the same over TCP.
package transporttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/wire"
)

// Wait bounds every wait of the suite. Nothing should take nearly as long;
// it only keeps a broken network from hanging the test binary.
const Wait = 20 * time.Second

// Run runs the suite. newNet makes a fresh network for each subtest and
// registers its own cleanup on t.
func Run(t *testing.T, newNet func(t *testing.T) transport.Network) {
	tests := []struct {
		name string
		fn   func(*testing.T, *env)
	}{
		{"Welcome", testWelcome},
		{"Reject", testReject},
		{"VersionMismatch", testVersionMismatch},
		{"Order", testOrder},
		{"ConcurrentSend", testConcurrentSend},
		{"LargeMessage", testLargeMessage},
		{"SendCopies", testSendCopies},
		{"ReceivedKept", testReceivedKept},
		{"FramesAfterWelcome", testFramesAfterWelcome},
		{"LocalClose", testLocalClose},
		{"PeerClose", testPeerClose},
		{"CloseInOnMessage", testCloseInOnMessage},
		{"ListenerClose", testListenerClose},
		{"DialContext", testDialContext},
		{"DialNoListener", testDialNoListener},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newEnv(t, newNet(t))) })
	}
}

// env is one subtest's network, with the handlers it attached. At cleanup
// every attached handler must have had exactly one OnClose, and no handler
// may have broken the Handler contract.
type env struct {
	t   *testing.T
	net transport.Network

	mu       sync.Mutex
	recs     []*recorder
	problems []string
	checked  bool
}

func newEnv(t *testing.T, n transport.Network) *env {
	e := &env{t: t, net: n}
	t.Cleanup(e.check) // runs after the cleanups registered later: listeners closed
	return e
}

// errorf records a failure seen on a handler's goroutine, which may outlive
// the test function; check reports it.
func (e *env) errorf(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.checked {
		e.problems = append(e.problems, fmt.Sprintf(format, args...))
	}
}

func (e *env) check() {
	e.mu.Lock()
	recs := e.recs
	e.mu.Unlock()
	for _, r := range recs {
		select {
		case <-r.closed:
		case <-time.After(Wait):
			e.errorf("%s: no OnClose", r.name)
		}
	}
	e.mu.Lock()
	e.checked = true
	problems := e.problems
	e.mu.Unlock()
	for _, p := range problems {
		e.t.Error(p)
	}
}

// recorder is a Handler that checks the contract: OnMessage calls never
// overlap, none follows OnClose, and OnClose comes once.
type recorder struct {
	env    *env
	name   string
	onMsg  func(c transport.Conn, m wire.Message)
	active atomic.Int32
	closed chan struct{}

	mu     sync.Mutex
	closes int
	err    error // OnClose's error, set before closed is closed
}

// handler returns a recorder that check will wait on once attach is called.
func (e *env) handler(name string, onMsg func(transport.Conn, wire.Message)) *recorder {
	return &recorder{env: e, name: name, onMsg: onMsg, closed: make(chan struct{})}
}

func (r *recorder) attach() {
	r.env.mu.Lock()
	r.env.recs = append(r.env.recs, r)
	r.env.mu.Unlock()
}

func (r *recorder) OnMessage(c transport.Conn, m wire.Message) {
	if r.active.Add(1) != 1 {
		r.env.errorf("%s: concurrent OnMessage", r.name)
	}
	defer r.active.Add(-1)
	r.mu.Lock()
	closes := r.closes
	r.mu.Unlock()
	if closes > 0 {
		r.env.errorf("%s: OnMessage after OnClose", r.name)
	}
	if r.onMsg != nil {
		r.onMsg(c, m)
	}
}

func (r *recorder) OnClose(c transport.Conn, err error) {
	if r.active.Load() != 0 {
		r.env.errorf("%s: OnClose during OnMessage", r.name)
	}
	if err == nil {
		r.env.errorf("%s: OnClose with a nil error", r.name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closes++
	if r.closes > 1 {
		r.env.errorf("%s: OnClose %d times", r.name, r.closes)
		return
	}
	r.err = err
	close(r.closed)
}

// closeErr waits for OnClose and returns its error.
func (r *recorder) closeErr(t *testing.T) error {
	t.Helper()
	wait(t, r.closed, r.name+" OnClose")
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(Wait):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// accepted is a connection the listener accepted, with its handler.
type accepted struct {
	c transport.Conn
	r *recorder
}

// listen listens with an acceptor that welcomes everyone with a recorder
// running onMsg and reports each accepted connection.
func (e *env) listen(onMsg func(transport.Conn, wire.Message)) (transport.Listener, <-chan accepted) {
	conns := make(chan accepted, 16)
	return e.listenWith(func(c transport.Conn, _ *wire.Hello) (*wire.Welcome, transport.Handler, error) {
		r := e.handler("server", onMsg)
		r.attach()
		conns <- accepted{c, r}
		return &wire.Welcome{Version: wire.Version, ID: 1}, r, nil
	}), conns
}

func (e *env) listenWith(a transport.Acceptor) transport.Listener {
	e.t.Helper()
	ln, err := e.net.Listen("127.0.0.1:0", a)
	if err != nil {
		e.t.Fatalf("Listen: %v", err)
	}
	e.t.Cleanup(func() { _ = ln.Close() })
	return ln
}

func hello() *wire.Hello {
	return &wire.Hello{Version: wire.Version, Role: wire.RoleBackend, Name: "b1", DataAddr: "data", GPUs: 2}
}

// dial dials addr with a recorder running onMsg; the connection is closed
// at cleanup.
func (e *env) dial(addr string, onMsg func(transport.Conn, wire.Message)) (transport.Conn, *recorder, *wire.Welcome) {
	e.t.Helper()
	r := e.handler("client", onMsg)
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	c, w, err := e.net.Dial(ctx, addr, hello(), r)
	if err != nil {
		e.t.Fatalf("Dial: %v", err)
	}
	r.attach()
	e.t.Cleanup(func() { c.Close(errors.New("test over")) })
	return c, r, w
}

func next(t *testing.T, conns <-chan accepted) accepted {
	t.Helper()
	return receive(t, conns)
}

func submit(id uint64) *wire.Submit {
	return &wire.Submit{Tasks: []wire.Task{{ID: id, Model: 1, Deadline: 1, Input: wire.InputRef{Length: 8}}}}
}

func taskID(m wire.Message) uint64 {
	if s, ok := m.(*wire.Submit); ok && len(s.Tasks) == 1 {
		return s.Tasks[0].ID
	}
	return ^uint64(0)
}

// sequence checks that a connection receives Submits 0..n-1 in order and
// closes done after the last.
func (e *env) sequence(name string, n uint64, done chan struct{}) func(transport.Conn, wire.Message) {
	var want uint64
	return func(_ transport.Conn, m wire.Message) {
		if id := taskID(m); id != want {
			e.errorf("%s: got task %d, want %d", name, id, want)
			want = id
		}
		if want++; want == n {
			close(done)
		}
	}
}

func testWelcome(t *testing.T, e *env) {
	want := &wire.Welcome{Version: wire.Version, ID: 7,
		Models:    []wire.ModelSpec{{ID: 1, Name: "resnet", SLO: time.Second, Latency: []time.Duration{time.Millisecond}}},
		Frontends: []wire.FrontendUp{{ID: 3, DataAddr: "fe:1"}}}
	var got *wire.Hello
	ln := e.listenWith(func(c transport.Conn, h *wire.Hello) (*wire.Welcome, transport.Handler, error) {
		got = h
		if c.RemoteAddr() == "" {
			e.errorf("accepted conn has no RemoteAddr")
		}
		r := e.handler("server", nil)
		r.attach()
		return want, r, nil
	})
	c, _, w := e.dial(ln.Addr(), nil)
	if w.ID != want.ID || len(w.Models) != 1 || w.Models[0].Name != "resnet" || w.Models[0].SLO != time.Second ||
		len(w.Frontends) != 1 || w.Frontends[0].DataAddr != "fe:1" {
		t.Errorf("welcome = %+v, want %+v", w, want)
	}
	if h := hello(); got == nil || *got != *h {
		t.Errorf("acceptor got hello %+v, want %+v", got, h)
	}
	if c.RemoteAddr() == "" {
		t.Error("dialed conn has no RemoteAddr")
	}
}

func testReject(t *testing.T, e *env) {
	ln := e.listenWith(func(transport.Conn, *wire.Hello) (*wire.Welcome, transport.Handler, error) {
		return nil, nil, errors.New("no capacity")
	})
	r := e.handler("client", func(transport.Conn, wire.Message) { e.errorf("rejected dialer got a message") })
	c, w, err := e.net.Dial(context.Background(), ln.Addr(), hello(), r)
	var rej *transport.RejectedError
	if !errors.As(err, &rej) || rej.Reason != "no capacity" || c != nil || w != nil {
		t.Fatalf("Dial = %v, %v, %v; want a RejectedError \"no capacity\"", c, w, err)
	}
}

func testVersionMismatch(t *testing.T, e *env) {
	var called atomic.Bool
	ln := e.listenWith(func(transport.Conn, *wire.Hello) (*wire.Welcome, transport.Handler, error) {
		called.Store(true)
		return nil, nil, nil
	})
	h := hello()
	h.Version = wire.Version + 1
	_, _, err := e.net.Dial(context.Background(), ln.Addr(), h, e.handler("client", nil))
	var rej *transport.RejectedError
	want := fmt.Sprintf("protocol version %d, want %d", wire.Version+1, wire.Version)
	if !errors.As(err, &rej) || rej.Reason != want {
		t.Fatalf("Dial error = %v, want a RejectedError %q", err, want)
	}
	if called.Load() {
		t.Error("the acceptor ran for a dialer of another version")
	}
}

// testOrder sends 10k messages each way at once.
func testOrder(t *testing.T, e *env) {
	const n = 10000
	srvDone, cliDone := make(chan struct{}), make(chan struct{})
	ln, conns := e.listen(e.sequence("server", n, srvDone))
	c, _, _ := e.dial(ln.Addr(), e.sequence("client", n, cliDone))
	sc := next(t, conns).c
	go func() {
		for i := range uint64(n) {
			if err := sc.Send(submit(i)); err != nil {
				e.errorf("server Send: %v", err)
				return
			}
		}
	}()
	for i := range uint64(n) {
		if err := c.Send(submit(i)); err != nil {
			t.Fatalf("Send: %v", err)
		}
	}
	wait(t, srvDone, "the server's messages")
	wait(t, cliDone, "the client's messages")
}

// testConcurrentSend sends from many goroutines on one connection: all
// arrive, each sender's in its order.
func testConcurrentSend(t *testing.T, e *env) {
	const senders, each = 16, 500
	done := make(chan struct{})
	next := make(map[uint64]uint64)
	total := 0
	ln, _ := e.listen(func(_ transport.Conn, m wire.Message) {
		id := taskID(m)
		g, i := id>>32, id&(1<<32-1)
		if i != next[g] {
			e.errorf("sender %d: got %d, want %d", g, i, next[g])
		}
		next[g] = i + 1
		if total++; total == senders*each {
			close(done)
		}
	})
	c, _, _ := e.dial(ln.Addr(), nil)
	var wg sync.WaitGroup
	for g := range uint64(senders) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range uint64(each) {
				if err := c.Send(submit(g<<32 | i)); err != nil {
					e.errorf("Send: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	wait(t, done, "every message")
}

// testLargeMessage carries 150 KB replies both ways.
func testLargeMessage(t *testing.T, e *env) {
	data := make([]byte, 150<<10)
	for i := range data {
		data[i] = byte(i * 7)
	}
	check := func(name string, done chan struct{}) func(transport.Conn, wire.Message) {
		return func(_ transport.Conn, m wire.Message) {
			if r, ok := m.(*wire.ReadReply); !ok || r.Seq != 9 || len(r.Data) != 1 || !bytes.Equal(r.Data[0], data) {
				e.errorf("%s: wrong reply", name)
			}
			close(done)
		}
	}
	srvDone, cliDone := make(chan struct{}), make(chan struct{})
	ln, conns := e.listen(check("server", srvDone))
	c, _, _ := e.dial(ln.Addr(), check("client", cliDone))
	reply := &wire.ReadReply{Seq: 9, Data: [][]byte{data}}
	if err := c.Send(reply); err != nil {
		t.Fatal(err)
	}
	if err := next(t, conns).c.Send(reply); err != nil {
		t.Fatal(err)
	}
	wait(t, srvDone, "the server's reply")
	wait(t, cliDone, "the client's reply")
}

// testFramesAfterWelcome sends from the acceptor itself and from a
// goroutine it starts: every message follows the Welcome, none is lost.
func testFramesAfterWelcome(t *testing.T, e *env) {
	const n = 200
	ln := e.listenWith(func(c transport.Conn, _ *wire.Hello) (*wire.Welcome, transport.Handler, error) {
		for i := range uint64(3) {
			if err := c.Send(submit(i)); err != nil {
				e.errorf("Send in acceptor: %v", err)
			}
		}
		go func() {
			for i := uint64(3); i < n; i++ {
				if err := c.Send(submit(i)); err != nil {
					e.errorf("Send after acceptor: %v", err)
					return
				}
			}
		}()
		r := e.handler("server", nil)
		r.attach()
		return &wire.Welcome{Version: wire.Version}, r, nil
	})
	done := make(chan struct{})
	e.dial(ln.Addr(), e.sequence("client", n, done))
	wait(t, done, "the messages after the welcome")
}

// testLocalClose closes the dialer's side: what it sent first arrives,
// both handlers get one OnClose, and both sides' Send fails after.
func testLocalClose(t *testing.T, e *env) {
	const n = 100
	got := make(chan struct{})
	ln, conns := e.listen(e.sequence("server", n, got))
	c, r, _ := e.dial(ln.Addr(), nil)
	s := next(t, conns)
	for i := range uint64(n) {
		if err := c.Send(submit(i)); err != nil {
			t.Fatal(err)
		}
	}
	reason := errors.New("done here")
	c.Close(reason)
	c.Close(errors.New("again")) // harmless
	if err := r.closeErr(t); !errors.Is(err, reason) {
		t.Errorf("client OnClose error = %v, want %v", err, reason)
	}
	wait(t, got, "the messages sent before Close")
	if err := s.r.closeErr(t); err == nil {
		t.Error("server OnClose without an error")
	}
	if err := c.Send(submit(0)); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("client Send after close = %v, want ErrClosed", err)
	}
	if err := s.c.Send(submit(0)); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("server Send after close = %v, want ErrClosed", err)
	}
}

// testPeerClose closes the listener's side: the dialer hears io.EOF.
func testPeerClose(t *testing.T, e *env) {
	ln, conns := e.listen(nil)
	c, r, _ := e.dial(ln.Addr(), nil)
	s := next(t, conns)
	s.c.Close(errors.New("go away"))
	if err := r.closeErr(t); !errors.Is(err, io.EOF) {
		t.Errorf("client OnClose error = %v, want io.EOF", err)
	}
	if err := s.r.closeErr(t); err == nil || err.Error() != "go away" {
		t.Errorf("server OnClose error = %v, want go away", err)
	}
	if err := c.Send(submit(0)); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("client Send after peer close = %v, want ErrClosed", err)
	}
}

// testCloseInOnMessage closes from a handler: no message is delivered
// after Close returned.
func testCloseInOnMessage(t *testing.T, e *env) {
	var calls atomic.Int32
	ln, conns := e.listen(func(c transport.Conn, _ wire.Message) {
		if calls.Add(1) == 1 {
			c.Close(errors.New("enough"))
		}
	})
	c, r, _ := e.dial(ln.Addr(), nil)
	for i := range uint64(100) {
		if err := c.Send(submit(i)); err != nil {
			break // the server may have closed already
		}
	}
	s := next(t, conns)
	s.r.closeErr(t)
	r.closeErr(t)
	if n := calls.Load(); n != 1 {
		t.Errorf("%d OnMessage calls, want 1: none after Close", n)
	}
}

// testListenerClose closes every accepted connection with the listener.
func testListenerClose(t *testing.T, e *env) {
	ln, conns := e.listen(nil)
	_, r1, _ := e.dial(ln.Addr(), nil)
	_, r2, _ := e.dial(ln.Addr(), nil)
	s1, s2 := next(t, conns), next(t, conns)
	if err := ln.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, r := range []*recorder{s1.r, s2.r, r1, r2} {
		r.closeErr(t)
	}
	if err := s1.c.Send(submit(0)); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Send on a closed listener's conn = %v, want ErrClosed", err)
	}
	if _, _, err := e.net.Dial(context.Background(), ln.Addr(), hello(), nil); err == nil {
		t.Error("Dial to a closed listener succeeded")
	}
}

// testDialContext gives up on a slow acceptor when ctx expires; the
// accepted side still ends with one OnClose.
func testDialContext(t *testing.T, e *env) {
	release := make(chan struct{})
	srv := e.handler("server", nil)
	ln := e.listenWith(func(transport.Conn, *wire.Hello) (*wire.Welcome, transport.Handler, error) {
		<-release
		srv.attach()
		return nil, srv, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := e.net.Dial(ctx, ln.Addr(), hello(), e.handler("client", nil))
	close(release)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial error = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Dial took %v after its context expired", d)
	}
	srv.closeErr(t)
}

func testDialNoListener(t *testing.T, e *env) {
	ln, err := e.net.Listen("127.0.0.1:0", func(transport.Conn, *wire.Hello) (*wire.Welcome, transport.Handler, error) {
		return nil, nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr()
	_ = ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	_, _, err = e.net.Dial(ctx, addr, hello(), nil)
	var rej *transport.RejectedError
	if err == nil || errors.As(err, &rej) {
		t.Fatalf("Dial to nothing = %v, want a connection error", err)
	}
}

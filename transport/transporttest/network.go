package transporttest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/internal/addrbook"
	"github.com/symphony-serving/symphony/transport/wire"
)

// Network is a transport.Network for tests that play one side of a
// connection themselves: a test hands the code under test a Network, the
// code Listens on it (a scheduler, an input server), and the test
// Connects Peers to that listener, sends the messages a frontend or a
// backend would, and reads what the code sends back. There are no sockets,
// no frames on a wire, and no goroutine of the test's own to wait on:
//
//   - Peer.Send returns once the listener's handler has handled the
//     message, so what a test checks after it sees the message's effect;
//   - Peer.Next returns the next message the code sent, waiting on a
//     channel (bounded by Wait), never polling.
//
// It keeps the transport contract (it passes the conformance suite, Run),
// so code that behaves here behaves on tcp and inproc: handlers run one
// at a time per connection, on a goroutine of the connection's, OnClose
// once after the last OnMessage; messages are copied through the codec
// (wire.Clone) on Send, so a sender may reuse its message and a receiver
// keep it, and a message the codec refuses fails Send. Dial works as on
// the other networks, so the code under test may also dial out.
type Network struct {
	book *addrbook.Book[*end]
}

var _ transport.Network = (*Network)(nil)

// NewNetwork returns an empty network.
func NewNetwork() *Network { return &Network{book: addrbook.New[*end]("fake")} }

// Listen registers addr; an empty one or one ending in ":0" gets a fresh
// "fake://N" address.
func (n *Network) Listen(addr string, accept transport.Acceptor) (transport.Listener, error) {
	return n.book.Listen(addr, accept)
}

// Listening returns the addresses listened on now, in no order: how a test
// finds the address of a listener the code under test opened on ":0".
func (n *Network) Listening() []string { return n.book.Addresses() }

// Peer is a connection a test drives by hand: the dialer's side of a
// connection to a listener of the Network.
type Peer struct {
	e *end
}

// Connect dials addr as a dialer that says hello, and returns the Peer and
// the listener's Welcome, or a *transport.RejectedError with the
// acceptor's reason. Messages the acceptor sent follow the Welcome.
func (n *Network) Connect(addr string, hello *wire.Hello) (*Peer, *wire.Welcome, error) {
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	d, w, err := n.dial(ctx, addr, hello, nil)
	if err != nil {
		return nil, nil, err
	}
	return &Peer{e: d}, w, nil
}

// Dial connects to the listener at addr; h gets the listener's messages,
// on a goroutine of the connection's.
func (n *Network) Dial(ctx context.Context, addr string, hello *wire.Hello, h transport.Handler) (transport.Conn, *wire.Welcome, error) {
	if h == nil {
		h = transport.HandlerFuncs{}
	}
	d, w, err := n.dial(ctx, addr, hello, h)
	if err != nil {
		return nil, nil, err
	}
	return d, w, nil
}

// dial runs the handshake: the acceptor runs on a goroutine of its own,
// so that ctx can cut a slow one short. h nil makes a Peer's end.
func (n *Network) dial(ctx context.Context, addr string, hello *wire.Hello, h transport.Handler) (*end, *wire.Welcome, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	hello, err := clone(hello)
	if err != nil {
		return nil, nil, err
	}
	l, id, err := n.book.Lookup(addr)
	if err != nil {
		return nil, nil, err
	}
	d := newEnd(addr, nil)
	a := newEnd(fmt.Sprintf("fake-dialer-%d", id), l)
	d.peer, a.peer = a, d
	if err := l.Add(a); err != nil {
		return nil, nil, err
	}

	type answer struct {
		w   *wire.Welcome
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		w, err := a.handshake(hello)
		answered <- answer{w, err}
	}()
	var ans answer
	select {
	case ans = <-answered:
	case <-ctx.Done():
		ans.err = ctx.Err()
	}
	if ans.err != nil {
		d.Close(ans.err)
		d.start(nil)
		return nil, nil, ans.err
	}
	d.start(h)
	return d, ans.w, nil
}

// handshake answers a dialer's hello on the accepted end a, as the tcp
// and inproc listeners do.
func (a *end) handshake(hello *wire.Hello) (*wire.Welcome, error) {
	w, h, rej := a.ln.Answer(a, hello)
	if rej == nil {
		var err error
		if w, err = clone(w); err == nil {
			a.start(h)
			return w, nil
		}
		rej = &wire.Reject{Reason: err.Error()}
	}
	a.Close(&transport.RejectedError{Reason: rej.Reason})
	a.start(nil)
	return nil, &transport.RejectedError{Reason: rej.Reason}
}

func clone[M wire.Message](m M) (M, error) {
	var zero M
	if size := len(wire.Marshal(m)) + 1; size > wire.DefaultMaxFrame {
		return zero, fmt.Errorf("transporttest: %v frame of %d bytes over the %d limit", m.Kind(), size, wire.DefaultMaxFrame)
	}
	c, err := wire.Clone(m)
	if err != nil {
		return zero, err
	}
	return c.(M), nil
}

// item is one queued message; done, if set, is closed once it has been
// handled (or will never be).
type item struct {
	m    wire.Message
	done chan struct{}
}

// end is one side of a connection: its incoming queue, delivered in order
// to its handler by its own goroutine, or read by a test through a Peer.
type end struct {
	ln     *addrbook.Listener[*end] // the listener that accepted it; nil if dialed
	remote string
	peer   *end

	mu      sync.Mutex
	queue   []item
	kick    chan struct{} // signalled when queue grows or the end changes
	held    bool          // not started: keep what arrives
	ended   bool          // the peer is done sending: deliver the queue, then end
	stopped bool          // Close was called here: deliver nothing more
	closing bool
	reason  error
	h       transport.Handler // nil for a Peer's end
	manual  bool              // a Peer's end: the test takes the queue
	done    chan struct{}     // closed once the end has finished
	handled chan struct{}     // closed once OnClose (if any) has returned
}

func newEnd(remote string, ln *addrbook.Listener[*end]) *end {
	return &end{ln: ln, remote: remote, kick: make(chan struct{}, 1), held: true,
		done: make(chan struct{}), handled: make(chan struct{})}
}

func (e *end) signal() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// start ends the hold: h's goroutine delivers the queue, or, with h nil,
// a Peer takes it (or, if the end closed, it just finishes).
func (e *end) start(h transport.Handler) {
	e.mu.Lock()
	e.held, e.h, e.manual = false, h, h == nil
	e.mu.Unlock()
	if h != nil {
		go e.deliver()
		return
	}
	e.signal()
	e.mu.Lock()
	finished := e.finishedLocked()
	e.mu.Unlock()
	if finished {
		e.finish()
	}
}

// finishedLocked reports whether a Peer's end has nothing more to give.
func (e *end) finishedLocked() bool {
	return !e.held && (e.stopped || (e.ended && len(e.queue) == 0))
}

func (e *end) RemoteAddr() string { return e.remote }

// Send copies m into the peer's queue.
func (e *end) Send(m wire.Message) error {
	_, err := e.send(m, nil)
	return err
}

// send queues a copy of m at the peer, with done to close once handled.
func (e *end) send(m wire.Message, done chan struct{}) (*end, error) {
	if m == nil {
		return nil, errors.New("transporttest: send of a nil message")
	}
	e.mu.Lock()
	closing := e.closing
	e.mu.Unlock()
	if closing {
		return nil, transport.ErrClosed
	}
	cp, err := clone(m)
	if err != nil {
		return nil, err
	}
	p := e.peer
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended || p.stopped {
		return nil, transport.ErrClosed
	}
	p.queue = append(p.queue, item{cp, done})
	p.signal()
	return p, nil
}

// Close stops delivery here at once; the peer still gets what this end
// sent before, then its end.
func (e *end) Close(reason error) {
	if reason == nil {
		reason = transport.ErrClosed
	}
	e.mu.Lock()
	if e.closing {
		e.mu.Unlock()
		return
	}
	e.closing, e.reason, e.stopped = true, reason, true
	e.signal()
	finished := e.manual
	e.mu.Unlock()
	e.peer.hangUp()
	if finished {
		e.finish()
	}
}

// hangUp tells e that its peer will send nothing more.
func (e *end) hangUp() {
	e.mu.Lock()
	e.ended = true
	e.signal()
	finished := e.manual && len(e.queue) == 0
	e.mu.Unlock()
	if finished {
		e.finish()
	}
}

// next takes the next message for this end, waiting for one until
// timeout (nil: forever) fires; ok is false once the end has finished.
func (e *end) next(timeout <-chan time.Time) (it item, ok, timedOut bool) {
	for {
		e.mu.Lock()
		if !e.held && !e.stopped && len(e.queue) > 0 {
			it = e.queue[0]
			e.queue[0] = item{}
			e.queue = e.queue[1:]
			drained := e.manual && e.finishedLocked()
			e.mu.Unlock()
			if drained {
				e.finish()
			}
			return it, true, false
		}
		over := !e.held && (e.stopped || e.ended)
		manual := e.manual
		e.mu.Unlock()
		if over {
			if manual {
				e.finish()
			}
			return item{}, false, false
		}
		select {
		case <-e.kick:
		case <-timeout:
			return item{}, false, true
		}
	}
}

// deliver runs a handler's end: the queue in order, then OnClose.
func (e *end) deliver() {
	for {
		it, ok, _ := e.next(nil)
		if !ok {
			break
		}
		e.h.OnMessage(e, it.m)
		if it.done != nil {
			close(it.done)
		}
	}
	e.finish()
}

// finish closes the end (for the peer's end of the connection too) and,
// for a handler's end, calls OnClose.
func (e *end) finish() {
	e.mu.Lock()
	select {
	case <-e.done:
		e.mu.Unlock()
		return
	default:
	}
	if !e.closing {
		e.closing, e.reason = true, io.EOF // the peer closed
	}
	e.stopped = true
	// What was queued and never handled will not be: release its senders.
	for _, it := range e.queue {
		if it.done != nil {
			close(it.done)
		}
	}
	e.queue = nil
	reason, h := e.reason, e.h
	close(e.done)
	e.mu.Unlock()
	e.peer.hangUp()
	if e.ln != nil {
		e.ln.Remove(e)
	}
	if h != nil {
		h.OnClose(e, reason)
	}
	close(e.handled)
}

// Send delivers m to the listener's handler and returns once OnMessage
// has returned, so that the test may check its effect; it fails with
// transport.ErrClosed once either side closed. Sends from several
// goroutines are handled one at a time, as a real connection's are.
func (p *Peer) Send(m wire.Message) error {
	done := make(chan struct{})
	a, err := p.e.send(m, done)
	if err != nil {
		return err
	}
	select {
	case <-done:
	case <-a.done:
	}
	return nil
}

// Next returns the next message the listener's side sent, waiting up to
// Wait (call it from one goroutine at a time); it fails with the reason the listener's side gave if the
// connection closed first (which a real network would not carry: it is
// there for the test's messages).
func (p *Peer) Next() (wire.Message, error) {
	it, ok, timedOut := p.e.next(time.After(Wait))
	switch {
	case timedOut:
		return nil, fmt.Errorf("transporttest: nothing received from %s within %v", p.e.remote, Wait)
	case !ok:
		return nil, fmt.Errorf("transporttest: connection to %s closed: %w", p.e.remote, p.Err())
	}
	return it.m, nil
}

// Pending returns the messages received and not yet taken, without
// waiting, and takes them.
func (p *Peer) Pending() []wire.Message {
	p.e.mu.Lock()
	out := make([]wire.Message, 0, len(p.e.queue))
	for _, it := range p.e.queue {
		out = append(out, it.m)
	}
	p.e.queue = nil
	drained := p.e.manual && p.e.finishedLocked()
	p.e.mu.Unlock()
	if drained {
		p.e.finish()
	}
	return out
}

// Close closes the connection from the test's side: the listener's
// handler gets what was sent before, then OnClose with io.EOF. It returns
// once that OnClose has returned, so that the test may check its effect.
func (p *Peer) Close() {
	p.e.Close(errors.New("transporttest: peer closed"))
	select {
	case <-p.e.peer.handled:
	case <-time.After(Wait): // a handler stuck in OnClose: the test's checks will tell
	}
}

// Closed is closed once the connection has ended, from either side, and
// Next has returned everything received before.
func (p *Peer) Closed() <-chan struct{} { return p.e.done }

// Err is why the connection closed: the reason the listener's side gave
// to Close, io.EOF if it ended otherwise, or nil while it is open.
func (p *Peer) Err() error {
	pe := p.e.peer
	pe.mu.Lock()
	defer pe.mu.Unlock()
	if !pe.closing {
		return nil
	}
	return pe.reason
}

// Expect returns p's next message, which must be an M: it fails tb if the
// connection closed, nothing came within Wait, or another kind came.
func Expect[M wire.Message](tb testing.TB, p *Peer) M {
	tb.Helper()
	m, err := p.Next()
	if err != nil {
		tb.Fatal(err)
	}
	got, ok := m.(M)
	if !ok {
		var want M
		tb.Fatalf("got %v %+v, want %v", m.Kind(), m, want.Kind())
	}
	return got
}

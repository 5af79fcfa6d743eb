// Package inproc is a transport.Network inside one process, for tests and
// the single-process demo. It keeps the TCP network's contract and its
// codec: every message is framed with wire.AppendFrame and parsed back with
// wire.ParseHeader and wire.Decode on the receiving side, so a message that
// would not survive the wire does not survive here either.
//
// A connection is two ends joined by two pipes, one per direction; each
// end's own goroutine delivers its incoming pipe in order, then calls
// OnClose. Closing one end closes the other once it has delivered what was
// sent to it.
package inproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/internal/addrbook"
	"github.com/symphony-serving/symphony/transport/wire"
)

// Network is a registry of listening addresses. Networks are independent:
// no state is global, so tests can run many side by side.
type Network struct {
	book *addrbook.Book[*end]
}

var _ transport.Network = (*Network)(nil)

// New returns an empty Network.
func New() *Network { return &Network{book: addrbook.New[*end]("inproc")} }

// Listen registers addr, any string. An empty address or one ending in
// ":0" gets a fresh "inproc://N" address, like port 0 on TCP. Closing the
// listener closes every connection it accepted.
func (n *Network) Listen(addr string, accept transport.Acceptor) (transport.Listener, error) {
	return n.book.Listen(addr, accept)
}

// Dial connects to the listener at addr and runs the handshake within ctx.
// As on TCP, h hears nothing before Dial has decided to succeed, and nothing
// at all if it fails.
func (n *Network) Dial(ctx context.Context, addr string, hello *wire.Hello, h transport.Handler) (transport.Conn, *wire.Welcome, error) {
	if h == nil {
		h = transport.HandlerFuncs{}
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	l, id, err := n.book.Lookup(addr)
	if err != nil {
		return nil, nil, err
	}
	up, down := newPipe(false), newPipe(true) // down is held until the Welcome
	d := &end{remote: addr, in: down, out: up, done: make(chan struct{}),
		answer: make(chan wire.Message, 1), ready: make(chan struct{})}
	a := &end{ln: l, remote: fmt.Sprintf("inproc-dialer-%d", id), in: up, out: down, done: make(chan struct{})}
	if err := l.Add(a); err != nil {
		return nil, nil, err
	}
	go a.read()
	go d.read()
	if err := d.Send(hello); err != nil {
		close(d.ready)
		d.Close(err)
		return nil, nil, fmt.Errorf("inproc: dial %s: %w", addr, err)
	}

	var answer wire.Message
	select {
	case answer = <-d.answer:
	case <-d.done:
	case <-ctx.Done():
	}
	var w *wire.Welcome
	switch m := answer.(type) {
	case *wire.Welcome:
		w = m
		d.mu.Lock()
		if d.closing {
			err = fmt.Errorf("inproc: dial %s: connection closed after the welcome: %w", addr, d.reason)
		} else {
			d.h = h
		}
		d.mu.Unlock()
	case *wire.Reject:
		err = &transport.RejectedError{Reason: m.Reason}
	default:
		if err = ctx.Err(); err == nil {
			err = fmt.Errorf("inproc: dial %s: connection closed during the handshake", addr)
		}
	}
	close(d.ready)
	if err != nil {
		d.Close(err)
		return nil, nil, err
	}
	return d, w, nil
}

// pipe carries encoded frames one way.
type pipe struct {
	mu     sync.Mutex
	cond   sync.Cond
	frames []byte // encoded frames, in order
	held   bool   // queued frames wait for the handshake's answer
	closed bool   // the sending end is done: deliver what is queued, then end
	stop   bool   // the receiving end is done
}

func newPipe(held bool) *pipe {
	p := &pipe{held: held}
	p.cond.L = &p.mu
	return p
}

// send frames m at the tail.
func (p *pipe) send(m wire.Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return transport.ErrClosed
	}
	start := len(p.frames)
	p.frames = wire.AppendFrame(p.frames, m)
	if size := len(p.frames) - start - 4; size > wire.DefaultMaxFrame {
		p.frames = p.frames[:start]
		return fmt.Errorf("inproc: %v frame of %d bytes over the %d limit", m.Kind(), size, wire.DefaultMaxFrame)
	}
	p.cond.Signal()
	return nil
}

// release ends the hold, first putting m (the handshake's answer) ahead of
// what was queued, or in its place if last (a Reject).
func (p *pipe) release(m wire.Message, last bool) {
	p.mu.Lock()
	if !p.closed {
		if last {
			p.frames, p.closed = wire.AppendFrame(nil, m), true
		} else {
			p.frames = append(wire.AppendFrame(nil, m), p.frames...)
		}
		p.held = false
	}
	p.cond.Signal()
	p.mu.Unlock()
}

// close ends the sending side; what is queued is still delivered unless it
// was held (the handshake was never answered).
func (p *pipe) close() {
	p.mu.Lock()
	if p.held {
		p.frames, p.held = nil, false
	}
	p.closed = true
	p.cond.Signal()
	p.mu.Unlock()
}

// halt ends the receiving side: nothing more is delivered.
func (p *pipe) halt() {
	p.mu.Lock()
	p.stop = true
	p.cond.Signal()
	p.mu.Unlock()
}

// take waits for frames and returns them, swapping in buf for reuse, or
// returns false when the pipe has ended.
func (p *pipe) take(buf []byte) ([]byte, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.stop && (p.held || len(p.frames) == 0) && !p.closed {
		p.cond.Wait()
	}
	if p.stop || p.held || len(p.frames) == 0 {
		return nil, false
	}
	out := p.frames
	p.frames = buf[:0]
	return out, true
}

// end is one side of a connection.
type end struct {
	ln      *addrbook.Listener[*end] // the listener that accepted it; nil if dialed
	remote  string
	in, out *pipe
	stopped atomic.Bool // Close was called: deliver nothing more

	// Read side: touched only by read.
	established bool
	recv        transport.Handler

	mu      sync.Mutex
	closing bool
	reason  error
	h       transport.Handler

	answer chan wire.Message // dialer: the Welcome or Reject, for Dial
	ready  chan struct{}     // dialer: closed once Dial has decided
	done   chan struct{}     // closed when the end has finished
}

func (e *end) RemoteAddr() string { return e.remote }

// Send queues m for the peer's reader.
func (e *end) Send(m wire.Message) error {
	if m == nil {
		return errors.New("inproc: send of a nil message")
	}
	return e.out.send(m)
}

// Close stops delivery to this end at once; the peer still gets what this
// end sent before, then its OnClose.
func (e *end) Close(reason error) {
	if reason == nil {
		reason = transport.ErrClosed
	}
	e.mu.Lock()
	if e.closing {
		e.mu.Unlock()
		return
	}
	e.closing, e.reason = true, reason
	e.mu.Unlock()
	e.stopped.Store(true)
	e.out.close()
	e.in.halt()
}

// read delivers the incoming pipe in order, then finishes the end.
func (e *end) read() {
	defer e.finish()
	var spare []byte
	for {
		buf, ok := e.in.take(spare)
		if !ok {
			return
		}
		for rest := buf; len(rest) > 0; {
			if e.stopped.Load() {
				return
			}
			kind, n, err := wire.ParseHeader(rest, wire.DefaultMaxFrame)
			var m wire.Message
			if err == nil {
				m, err = wire.Decode(kind, rest[wire.HeaderSize:wire.HeaderSize+n])
			}
			if err == nil {
				err = e.expect(kind)
			}
			if err != nil { // a codec bug: what TCP would close for
				e.Close(fmt.Errorf("inproc: %w", err))
				return
			}
			rest = rest[wire.HeaderSize+n:]
			if !e.deliver(m) {
				return
			}
		}
		spare = buf
	}
}

// expect checks a message's kind against the connection's state.
func (e *end) expect(k wire.Kind) error {
	switch {
	case !e.established && e.ln != nil && k != wire.KindHello:
		return fmt.Errorf("first frame is %v, want Hello", k)
	case !e.established && e.ln == nil && k != wire.KindWelcome && k != wire.KindReject:
		return fmt.Errorf("handshake answer is %v, want Welcome or Reject", k)
	case e.established && (k == wire.KindHello || k == wire.KindWelcome || k == wire.KindReject):
		return fmt.Errorf("%v after the handshake", k)
	}
	return nil
}

// deliver handles one message and reports whether to read on.
func (e *end) deliver(m wire.Message) bool {
	if e.established {
		e.recv.OnMessage(e, m)
		return true
	}
	if e.ln != nil {
		return e.handshake(m.(*wire.Hello))
	}
	e.answer <- m
	<-e.ready
	e.mu.Lock()
	e.recv = e.h
	e.mu.Unlock()
	e.established = e.recv != nil
	return e.established
}

// handshake answers the dialer's Hello as the TCP listener does.
func (e *end) handshake(hello *wire.Hello) bool {
	w, h, rej := e.ln.Answer(e, hello)
	if rej != nil {
		e.out.release(rej, true)
		e.Close(&transport.RejectedError{Reason: rej.Reason})
		return false
	}
	e.mu.Lock()
	e.h, e.recv, e.established = h, h, true
	e.mu.Unlock()
	e.out.release(w, false)
	return true
}

// finish runs once read has returned: it ends both pipes, so the peer
// finishes too, and calls OnClose after the last OnMessage.
func (e *end) finish() {
	e.mu.Lock()
	if !e.closing {
		e.closing, e.reason = true, io.EOF // the peer closed
	}
	reason, h := e.reason, e.h
	e.mu.Unlock()
	e.stopped.Store(true)
	e.out.close()
	e.in.halt()
	if e.ln != nil {
		e.ln.Remove(e)
	}
	close(e.done)
	if h != nil {
		h.OnClose(e, reason)
	}
}

package cluster

import (
	"context"
	"errors"
	"sync"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/wire"
)

// errCut is the reason a cut connection closes with.
var errCut = errors.New("fault: connection cut")

// procNet is one in-process process's network, as fault scenarios see it:
// it wraps every connection the process dials or accepts, so that the
// scenario can freeze the process (every connection holds what it would
// send and what it would receive, as SIGSTOP looks from the outside: the
// peers' messages pile up, nothing comes out, and at SIGCONT it all goes
// at once), cut its connection to the scheduler (it reconnects), or kill
// it (every connection closes at once).
type procNet struct {
	inner transport.Network

	mu     sync.Mutex
	frozen bool
	thaw   chan struct{} // closed when a freeze ends
	conns  map[*procConn]struct{}
	lns    []transport.Listener
	// sched is the process's connection to the scheduler (a backend's or
	// frontend's), nil while it has none.
	sched *procConn
}

func newProcNet(inner transport.Network) *procNet {
	return &procNet{inner: inner, conns: map[*procConn]struct{}{}}
}

// procConn is one connection of the process.
type procConn struct {
	p     *procNet
	inner transport.Conn
	held  []wire.Message // sends held while frozen, in order
}

// Send passes m on, or holds a copy of it while the process is frozen: a
// sender may reuse m's slices once Send returns, as a real connection,
// which encodes m at once, lets it. It sends under the process's lock, so
// that a thaw's flush of held messages cannot be overtaken by a new one.
func (c *procConn) Send(m wire.Message) error {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	if c.p.frozen {
		cp, err := wire.Clone(m)
		if err != nil {
			return err
		}
		c.held = append(c.held, cp)
		return nil
	}
	return c.inner.Send(m)
}

func (c *procConn) Close(reason error) { c.inner.Close(reason) }
func (c *procConn) RemoteAddr() string { return c.inner.RemoteAddr() }

// procHandler delivers a connection's messages to the process, waiting
// while it is frozen.
type procHandler struct {
	c *procConn
	h transport.Handler
}

func (h procHandler) OnMessage(_ transport.Conn, m wire.Message) {
	h.c.p.waitThaw()
	h.h.OnMessage(h.c, m)
}

func (h procHandler) OnClose(_ transport.Conn, err error) {
	h.c.p.waitThaw()
	p := h.c.p
	p.mu.Lock()
	delete(p.conns, h.c)
	if p.sched == h.c {
		p.sched = nil
	}
	p.mu.Unlock()
	h.h.OnClose(h.c, err)
}

// waitThaw returns once the process is not frozen.
func (p *procNet) waitThaw() {
	p.mu.Lock()
	frozen, thaw := p.frozen, p.thaw
	p.mu.Unlock()
	if frozen {
		<-thaw
	}
}

// wrap makes c one of the process's connections, delivering to h.
func (p *procNet) wrap(c transport.Conn) *procConn {
	pc := &procConn{p: p, inner: c}
	p.mu.Lock()
	p.conns[pc] = struct{}{}
	p.mu.Unlock()
	return pc
}

// Dial dials through the inner network; a backend's or frontend's dial of
// the scheduler becomes the process's scheduler connection.
func (p *procNet) Dial(ctx context.Context, addr string, hello *wire.Hello, h transport.Handler) (transport.Conn, *wire.Welcome, error) {
	ph := &procHandler{h: h}
	// The handler may run before Dial returns: give it its connection
	// first, through the hook the inner Dial calls back.
	var pc *procConn
	var once sync.Once
	wrapOnce := func(c transport.Conn) *procConn {
		once.Do(func() { pc = p.wrap(c); ph.c = pc })
		return pc
	}
	c, w, err := p.inner.Dial(ctx, addr, hello, transport.HandlerFuncs{
		Message: func(c transport.Conn, m wire.Message) { wrapOnce(c); ph.OnMessage(c, m) },
		Closed:  func(c transport.Conn, err error) { wrapOnce(c); ph.OnClose(c, err) },
	})
	if err != nil {
		return nil, w, err
	}
	conn := wrapOnce(c)
	if hello.Role == wire.RoleBackend || hello.Role == wire.RoleFrontend {
		p.mu.Lock()
		p.sched = conn
		p.mu.Unlock()
	}
	return conn, w, nil
}

// Listen listens through the inner network; accepted connections are the
// process's.
func (p *procNet) Listen(addr string, accept transport.Acceptor) (transport.Listener, error) {
	ln, err := p.inner.Listen(addr, func(c transport.Conn, h *wire.Hello) (*wire.Welcome, transport.Handler, error) {
		pc := p.wrap(c)
		w, hd, err := accept(pc, h)
		if err != nil || hd == nil {
			p.mu.Lock()
			delete(p.conns, pc)
			p.mu.Unlock()
			return w, hd, err
		}
		return w, procHandler{c: pc, h: hd}, nil
	})
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.lns = append(p.lns, ln)
	p.mu.Unlock()
	return ln, nil
}

// Freeze stops the process's traffic both ways until Thaw.
func (p *procNet) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.frozen {
		p.frozen, p.thaw = true, make(chan struct{})
	}
}

// Thaw sends what each connection held, in order, and lets the messages
// waiting for the process through.
func (p *procNet) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.frozen {
		return
	}
	for c := range p.conns {
		for _, m := range c.held {
			_ = c.inner.Send(m) // a connection closed meanwhile drops them, as a real one would
		}
		c.held = nil
	}
	p.frozen = false
	close(p.thaw)
}

// CutScheduler closes the process's connection to the scheduler; the
// process reconnects as after any lost connection. It reports whether
// there was one.
func (p *procNet) CutScheduler() bool {
	p.mu.Lock()
	c := p.sched
	p.mu.Unlock()
	if c == nil {
		return false
	}
	c.inner.Close(errCut)
	return true
}

// Kill closes every listener and connection of the process at once: its
// peers see it vanish, and nothing it sends any more leaves.
func (p *procNet) Kill() {
	p.mu.Lock()
	lns, conns := p.lns, make([]*procConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.lns = nil
	p.mu.Unlock()
	for _, ln := range lns {
		_ = ln.Close()
	}
	for _, c := range conns {
		c.inner.Close(errors.New("fault: process killed"))
	}
}

// Package tcp is the transport.Network of real deployments: length-prefixed
// wire frames over TCP, served by cloudwego/netpoll.
//
// Reading runs in netpoll's OnRequest, which netpoll never runs twice at once
// for one connection; handlers are called there, so one connection's messages
// arrive in order without a queue. Each frame's header is checked with
// wire.ParseHeader before its body is awaited, so a hostile length costs
// nothing. Sending appends encoded frames to a per-connection queue that one
// flusher at a time (run on an ants pool) writes out: Send never waits for
// the peer, and frames queued while a write is in progress leave together in
// one syscall.
//
// A connection that breaks the protocol (bad frame, unknown kind, no Hello in
// time) is closed with a warning naming the peer and the reason; nothing
// else is affected.
package tcp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cloudwego/netpoll"
	"github.com/panjf2000/ants/v2"
	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/ratelog"
	"github.com/symphony-serving/symphony/transport/wire"
)

// Options configure a Network. New gives zero fields their Default value.
type Options struct {
	// Limits are the frame, queue and timeout limits of every connection
	// (transport.Limits).
	transport.Limits
	// Pool runs the work that must neither block netpoll's poller nor the
	// caller: flushing send queues and OnClose calls. Nil makes a private
	// unbounded pool that Network.Close releases. A shared pool must be
	// unbounded or nonblocking, or Send could wait for a free worker.
	Pool *ants.Pool
	// Log receives per-connection warnings (protocol errors, timeouts) and
	// debug events. The zero Logger is silent. Warnings are rate-limited
	// (transport/ratelog): a flood of bad dialers logs WarnBurst lines a
	// second, and Network.SuppressedLogs counts the rest.
	Log zerolog.Logger
	// WarnBurst is how many warnings a second pass the rate limit (0:
	// ratelog.DefaultBurst).
	WarnBurst uint32
}

// Default returns the production settings: transport.DefaultLimits, and
// a silent log.
func Default() Options {
	return Options{Limits: transport.DefaultLimits(), Log: zerolog.Nop()}
}

// Validate reports settings a Network cannot work with.
func (o Options) Validate() error {
	if err := o.Limits.Validate(); err != nil {
		return fmt.Errorf("tcp: %w", err)
	}
	return nil
}

// Network is a transport.Network over TCP. It holds no global state: every
// Network has its own options and pool.
type Network struct {
	opts    Options
	pool    *ants.Pool
	ownPool bool
	chunks  sync.Pool // *[]byte send-queue chunks, shared by the connections
	// warn is opts.Log rate-limited, for the per-connection warnings.
	warn       zerolog.Logger
	suppressed atomic.Uint64
}

// SuppressedLogs is the number of per-connection warnings held back by the
// log's rate limit.
func (n *Network) SuppressedLogs() uint64 { return n.suppressed.Load() }

var _ transport.Network = (*Network)(nil)

// New returns a Network with opts, whose zero fields take their Default
// values. It panics if the result fails Validate: options are program
// configuration, to be validated where they are read.
func New(opts Options) *Network {
	opts.Limits = opts.Limits.WithDefaults()
	if err := opts.Validate(); err != nil {
		panic(err)
	}
	n := &Network{opts: opts, pool: opts.Pool}
	burst := opts.WarnBurst
	if burst == 0 {
		burst = ratelog.DefaultBurst
	}
	n.warn = opts.Log.Sample(ratelog.NewSampler(burst, time.Second, &n.suppressed))
	if n.pool == nil {
		p, err := ants.NewPool(0) // unbounded: never makes Send wait
		if err != nil {
			panic(err)
		}
		n.pool, n.ownPool = p, true
	}
	return n
}

// Close releases the Network's private pool, if it made one. Connections and
// listeners are closed by their own Close; work they submit afterwards runs
// on plain goroutines.
func (n *Network) Close() {
	if n.ownPool {
		n.pool.Release()
	}
}

// run runs f on the pool, or on its own goroutine if the pool refuses.
func (n *Network) run(f func()) {
	if n.pool.Submit(f) != nil {
		go f()
	}
}

// chunk returns an empty send-queue chunk.
func (n *Network) chunk() []byte {
	if p, ok := n.chunks.Get().(*[]byte); ok {
		return (*p)[:0]
	}
	return make([]byte, 0, 4<<10)
}

// recycle returns a written chunk to the pool.
func (n *Network) recycle(b []byte) {
	if cap(b) <= maxPooled {
		b = b[:0]
		n.chunks.Put(&b)
	}
}

var errListenerClosed = errors.New("tcp: listener closed")

// Listen listens on addr ("host:port"; port 0 picks one) and runs accept
// for every dialer's Hello.
func (n *Network) Listen(addr string, accept transport.Acceptor) (transport.Listener, error) {
	ln, err := netpoll.CreateListener("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tcp: listen %s: %w", addr, err)
	}
	l := &listener{net: n, accept: accept, addr: ln.Addr().String(),
		served: make(chan struct{}), conns: make(map[*conn]struct{})}
	l.evl, err = netpoll.NewEventLoop(l.onRequest, netpoll.WithOnPrepare(l.onPrepare))
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("tcp: listen %s: %w", addr, err)
	}
	go func() {
		defer close(l.served)
		if err := l.evl.Serve(ln); err != nil {
			n.opts.Log.Warn().Str("addr", l.addr).Err(err).Msg("listener stopped")
		}
	}()
	return l, nil
}

type listener struct {
	net    *Network
	accept transport.Acceptor
	addr   string
	evl    netpoll.EventLoop
	served chan struct{} // closed when Serve returned

	mu     sync.Mutex
	conns  map[*conn]struct{}
	closed bool
}

type connKey struct{}

func (l *listener) Addr() string { return l.addr }

// Close stops accepting and closes every accepted connection; each one's
// handler gets OnClose once its queued frames are sent.
func (l *listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	conns := make([]*conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	// Close ours first, with a reason, before netpoll's Shutdown closes
	// idle ones without one.
	for _, c := range conns {
		c.Close(errListenerClosed)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel() // do not wait for busy connections: they are closing already
	for {
		_ = l.evl.Shutdown(done)
		// Shutdown does nothing if Serve has not registered yet; then
		// try again once it has.
		select {
		case <-l.served:
			return nil
		case <-time.After(time.Millisecond):
		}
	}
}

// onPrepare sets up an accepted connection before netpoll reads from it.
func (l *listener) onPrepare(nc netpoll.Connection) context.Context {
	c := l.net.newConn(nc, l)
	l.mu.Lock()
	closed := l.closed
	if !closed {
		l.conns[c] = struct{}{}
	}
	l.mu.Unlock()
	if closed {
		c.Close(errListenerClosed)
	} else {
		c.startHandshakeTimer()
	}
	return context.WithValue(context.Background(), connKey{}, c)
}

func (l *listener) onRequest(ctx context.Context, _ netpoll.Connection) error {
	if c, ok := ctx.Value(connKey{}).(*conn); ok {
		c.onRequest()
	}
	return nil
}

func (l *listener) remove(c *conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

// Dial connects to addr, sends hello and waits, within ctx, for the Welcome
// (returned with the connection) or the Reject (a *transport.RejectedError).
// h receives the connection's later messages, the first of them only once
// Dial has decided to succeed; if Dial fails, h is never called.
func (n *Network) Dial(ctx context.Context, addr string, hello *wire.Hello, h transport.Handler) (transport.Conn, *wire.Welcome, error) {
	if h == nil {
		h = transport.HandlerFuncs{}
	}
	timeout := n.opts.DialTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if timeout <= 0 {
		return nil, nil, context.DeadlineExceeded
	}
	nc, err := netpoll.DialConnection("tcp", addr, timeout)
	if err != nil {
		if errors.Is(err, netpoll.ErrConnClosed) {
			// netpoll reports a refused connect as "closed by peer",
			// which reads as if there had been a connection.
			return nil, nil, fmt.Errorf("tcp: dial %s: connection refused (nothing listening there?): %w", addr, err)
		}
		return nil, nil, fmt.Errorf("tcp: dial %s: %w", addr, err)
	}
	c := n.newConn(nc, nil)
	c.answer = make(chan wire.Message, 1)
	c.ready = make(chan struct{})
	if err := nc.SetOnRequest(func(context.Context, netpoll.Connection) error { c.onRequest(); return nil }); err != nil {
		c.Close(err)
		return nil, nil, fmt.Errorf("tcp: dial %s: %w", addr, err)
	}
	if err := c.Send(hello); err != nil {
		c.Close(err)
		close(c.ready)
		return nil, nil, fmt.Errorf("tcp: dial %s: %w", addr, err)
	}

	var answer wire.Message
	select {
	case answer = <-c.answer:
	case <-c.done:
	case <-ctx.Done():
	}
	var w *wire.Welcome
	switch m := answer.(type) {
	case *wire.Welcome:
		w = m
		c.mu.Lock()
		if c.closing {
			err = fmt.Errorf("tcp: dial %s: connection closed after the welcome: %w", addr, c.reason)
		} else {
			c.h = h
		}
		c.mu.Unlock()
	case *wire.Reject:
		err = &transport.RejectedError{Reason: m.Reason}
	default:
		if err = ctx.Err(); err == nil {
			err = fmt.Errorf("tcp: dial %s: connection closed during the handshake: %w", addr, c.closeReason())
		}
	}
	close(c.ready) // lets the reader deliver to h, or discard
	if err != nil {
		c.Close(err)
		return nil, nil, err
	}
	return c, w, nil
}

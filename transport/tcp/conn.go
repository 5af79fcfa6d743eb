package tcp

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cloudwego/netpoll"
	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/wire"
)

// maxHello bounds the first frame of an accepted connection, before the
// dialer is known. A Hello takes well under 1 KiB; the bound keeps a
// stranger from making the server buffer and decode MaxFrame bytes (or a
// deeply nested value hidden in a Hello's extension fields).
const maxHello = 64 << 10

// The send queue is a list of chunks: frames are appended to the last chunk
// until it holds chunkSize bytes, then a new one starts. Chunks come from the
// Network's pool and go back once written, so a busy connection does not
// regrow (copy and clear) its buffer for every batch of large frames, and an
// idle one holds no buffer at all. Chunks grown past maxPooled by a huge
// frame are left to the GC.
const (
	chunkSize = 256 << 10
	maxPooled = 1 << 20
)

var errHandshakeTimeout = errors.New("tcp: no hello before the handshake timeout")

// conn is one connection, dialed or accepted.
type conn struct {
	net    *Network
	nc     netpoll.Connection
	ln     *listener // the listener that accepted it; nil if dialed
	remote string
	log    zerolog.Logger
	// warn is log rate-limited (Network.warn), for the warnings.
	warn zerolog.Logger

	// Read side: touched only by onRequest, which netpoll serializes.
	established bool              // the handshake is over
	recv        transport.Handler // h, as the reader sees it

	stopped atomic.Bool // closing: the reader drops what arrives

	mu        sync.Mutex
	out       [][]byte // chunks of frames queued for the flusher
	queued    int      // bytes in out
	held      bool     // accepted and not yet answered: queue, do not send
	flushing  bool     // a flusher is running
	closing   bool     // Close was called or the connection ended
	reason    error
	h         transport.Handler // set once the handshake succeeded
	helloSeen bool
	timer     *time.Timer // handshake deadline of an accepted connection

	answer    chan wire.Message // dialer: the Welcome or Reject, for Dial
	ready     chan struct{}     // dialer: closed once Dial has decided
	done      chan struct{}     // closed when the connection has ended
	closeOnce sync.Once
}

func (n *Network) newConn(nc netpoll.Connection, ln *listener) *conn {
	c := &conn{net: n, nc: nc, ln: ln, held: ln != nil, done: make(chan struct{})}
	if a := nc.RemoteAddr(); a != nil {
		c.remote = a.String()
	}
	c.log = n.opts.Log.With().Str("remote", c.remote).Logger()
	c.warn = n.warn.With().Str("remote", c.remote).Logger()
	_ = nc.SetWriteTimeout(n.opts.WriteTimeout)
	_ = nc.AddCloseCallback(c.onClosed)
	return c
}

func (c *conn) RemoteAddr() string { return c.remote }

// Send queues m and returns at once; a flusher writes it. Frames over
// MaxFrame are refused (the peer would cut the connection on them).
func (c *conn) Send(m wire.Message) error {
	if m == nil {
		return errors.New("tcp: send of a nil message")
	}
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return transport.ErrClosed
	}
	last := len(c.out) - 1
	if last < 0 || len(c.out[last]) >= chunkSize {
		c.out = append(c.out, c.net.chunk())
		last++
	}
	chunk := c.out[last]
	start := len(chunk)
	chunk = wire.AppendFrame(chunk, m)
	if size := len(chunk) - start - 4; size > c.net.opts.MaxFrame {
		c.out[last] = chunk[:start]
		c.mu.Unlock()
		return fmt.Errorf("tcp: %v frame of %d bytes over the %d limit", m.Kind(), size, c.net.opts.MaxFrame)
	}
	c.out[last] = chunk
	c.queued += len(chunk) - start
	if c.queued > c.net.opts.MaxQueue {
		c.mu.Unlock()
		err := fmt.Errorf("tcp: over %d bytes queued: peer too slow", c.net.opts.MaxQueue)
		c.warn.Warn().Err(err).Msg("closing connection")
		c.shut(err, false)
		return err
	}
	c.kickLocked()
	c.mu.Unlock()
	return nil
}

// kickLocked starts a flusher if frames wait and none runs.
func (c *conn) kickLocked() {
	if !c.flushing && !c.held && c.queued > 0 {
		c.flushing = true
		c.net.run(c.flush)
	}
}

// flush writes the queue until it is empty. Only one flusher runs at a
// time, so frames leave in queue order; what Sends add during a write
// leaves with the next batch. It closes the connection once a closing
// connection's queue is drained.
func (c *conn) flush() {
	var batch [][]byte
	for {
		c.mu.Lock()
		if c.queued == 0 {
			c.flushing = false
			closing := c.closing
			c.mu.Unlock()
			if closing {
				_ = c.nc.Close()
			}
			return
		}
		batch, c.out = c.out, batch[:0]
		c.queued = 0
		c.mu.Unlock()
		for i, b := range batch {
			// Write copies b into netpoll's buffer under netpoll's flush
			// lock (safe against a concurrent close), so b is free after.
			if _, err := c.nc.Write(b); err != nil {
				c.mu.Lock()
				c.flushing = false
				closing := c.closing
				c.mu.Unlock()
				switch {
				case closing:
					// A Close was waiting for this drain, which will not
					// finish (a peer that stopped reading timed the write
					// out): close now, or nothing ever would.
					_ = c.nc.Close()
				case c.nc.IsActive():
					// A connection the peer closed is no news (netpoll is
					// already ending it); a timeout or an error is.
					c.warn.Warn().Err(err).Msg("closing connection: write failed")
					c.shut(fmt.Errorf("tcp: write: %w", err), false)
				}
				return
			}
			c.net.recycle(b)
			batch[i] = nil
		}
	}
}

// Close sends what is already queued (each write bounded by WriteTimeout),
// then closes. Messages arriving meanwhile are dropped, and so is the queue
// of a connection accepted but not yet answered (its acceptor has not
// returned): it was never established, and its peer expects a Welcome
// first.
func (c *conn) Close(reason error) {
	if reason == nil {
		reason = transport.ErrClosed
	}
	c.shut(reason, true)
}

// shut closes the connection for reason, after draining the queue if drain
// (and a flusher is running), or at once.
func (c *conn) shut(reason error, drain bool) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	c.closing, c.reason = true, reason
	c.stopped.Store(true)
	if !drain || c.held {
		c.out, c.queued = nil, 0
	}
	now := !drain || !c.flushing
	c.mu.Unlock()
	c.log.Debug().Err(reason).Msg("closing connection")
	if now {
		_ = c.nc.Close()
	}
}

func (c *conn) closeReason() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

// onClosed is netpoll's close callback. netpoll runs it once the reader has
// returned, so OnClose follows the last OnMessage; it goes to the pool
// because this may run on the poller or inside the caller's Close.
func (c *conn) onClosed(netpoll.Connection) error {
	c.closeOnce.Do(func() {
		c.stopped.Store(true)
		c.mu.Lock()
		if !c.closing {
			c.closing, c.reason = true, io.EOF // the peer closed
		}
		reason, h := c.reason, c.h
		c.out, c.queued = nil, 0
		if c.timer != nil {
			c.timer.Stop()
		}
		c.mu.Unlock()
		if c.ln != nil {
			c.ln.remove(c)
		}
		close(c.done)
		if h != nil {
			c.net.run(func() { h.OnClose(c, reason) })
		}
	})
	return nil
}

// startHandshakeTimer closes an accepted connection that has not delivered
// a valid Hello in time.
func (c *conn) startHandshakeTimer() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return
	}
	c.timer = time.AfterFunc(c.net.opts.HandshakeTimeout, func() {
		c.mu.Lock()
		late := !c.helloSeen
		c.mu.Unlock()
		if late {
			c.warn.Warn().Str("timeout", c.net.opts.HandshakeTimeout.String()).Msg("closing connection: no hello in time")
			c.shut(errHandshakeTimeout, false)
		}
	})
}

// onRequest reads every frame netpoll has buffered. It peeks at the header
// and checks it before waiting for the body, so a hostile length is refused
// before anything is allocated for it. netpoll calls it for one connection
// at a time, which keeps each connection's messages in order.
func (c *conn) onRequest() {
	r := c.nc.Reader()
	for r.Len() > 0 {
		if c.stopped.Load() {
			discard(r)
			return
		}
		limit := c.net.opts.MaxFrame
		if c.ln != nil && !c.established {
			limit = min(limit, maxHello)
		}
		hdr, err := r.Peek(wire.HeaderSize)
		if err != nil {
			c.readFailed(r, err)
			return
		}
		kind, n, err := wire.ParseHeader(hdr, limit)
		if err == nil {
			err = c.expect(kind)
		}
		if err != nil {
			c.protocolError(r, err)
			return
		}
		frame, err := r.Next(wire.HeaderSize + n)
		if err != nil {
			c.readFailed(r, err)
			return
		}
		// Decode copies what it keeps, so the buffer can go back now.
		m, err := wire.Decode(kind, frame[wire.HeaderSize:])
		_ = r.Release()
		if err != nil {
			c.protocolError(r, err)
			return
		}
		if !c.deliver(m) {
			discard(r)
			return
		}
	}
}

// expect checks a frame's kind against the connection's state before its
// body is read.
func (c *conn) expect(k wire.Kind) error {
	switch {
	case !c.established && c.ln != nil && k != wire.KindHello:
		return fmt.Errorf("tcp: first frame is %v, want Hello", k)
	case !c.established && c.ln == nil && k != wire.KindWelcome && k != wire.KindReject:
		return fmt.Errorf("tcp: handshake answer is %v, want Welcome or Reject", k)
	case c.established && (k == wire.KindHello || k == wire.KindWelcome || k == wire.KindReject):
		return fmt.Errorf("tcp: %v after the handshake", k)
	}
	return nil
}

// deliver handles one decoded message and reports whether to read on.
func (c *conn) deliver(m wire.Message) bool {
	if c.established {
		c.recv.OnMessage(c, m)
		return true
	}
	if c.ln != nil {
		return c.handshake(m.(*wire.Hello))
	}
	// Dialer: hand the answer to Dial and wait for its decision, so that h
	// sees nothing before Dial returns and nothing that follows the
	// Welcome is lost.
	c.answer <- m
	<-c.ready
	c.mu.Lock()
	c.recv = c.h
	c.mu.Unlock()
	c.established = c.recv != nil
	return c.established
}

// handshake answers an accepted connection's Hello.
func (c *conn) handshake(hello *wire.Hello) bool {
	c.mu.Lock()
	c.helloSeen = true
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
	if hello.Version != wire.Version {
		reason := fmt.Sprintf("protocol version %d, want %d", hello.Version, wire.Version)
		c.warn.Warn().Str("name", hello.Name).Str("reason", reason).Msg("rejecting dialer")
		c.reject(reason)
		return false
	}
	w, h, err := c.ln.accept(c, hello)
	if err != nil {
		c.log.Debug().Str("name", hello.Name).Err(err).Msg("rejecting dialer")
		c.reject(err.Error())
		return false
	}
	if w == nil {
		w = &wire.Welcome{Version: wire.Version}
	}
	if h == nil {
		h = transport.HandlerFuncs{}
	}
	welcome := wire.AppendFrame(c.net.chunk(), w)
	c.mu.Lock()
	// h gets OnClose even if the connection closed during accept: the
	// acceptor may have registered c.
	c.h, c.recv, c.established = h, h, true
	if !c.closing {
		// The Welcome goes before whatever the acceptor already sent.
		c.out = append([][]byte{welcome}, c.out...)
		c.queued += len(welcome)
		c.held = false
		c.kickLocked()
	}
	c.mu.Unlock()
	return true
}

// reject sends a Reject in place of anything queued, then closes.
func (c *conn) reject(reason string) {
	if len(reason) > wire.MaxReason {
		reason = reason[:wire.MaxReason]
	}
	c.mu.Lock()
	if !c.closing {
		reject := wire.AppendFrame(nil, &wire.Reject{Reason: reason})
		c.out, c.queued = [][]byte{reject}, len(reject)
		c.held = false
		c.kickLocked()
	}
	c.mu.Unlock()
	c.shut(&transport.RejectedError{Reason: reason}, true)
}

// protocolError closes the connection over a peer's bad frame.
func (c *conn) protocolError(r netpoll.Reader, err error) {
	c.warn.Warn().Err(err).Msg("closing connection: protocol error")
	discard(r)
	c.shut(err, false)
}

// readFailed closes the connection after a failed read: the connection is
// closing already, or the peer closed it in the middle of a frame.
func (c *conn) readFailed(r netpoll.Reader, err error) {
	if n := r.Len(); n > 0 && !c.stopped.Load() {
		c.warn.Warn().Int("bytes", n).Err(err).Msg("closing connection: peer closed mid-frame")
		err = fmt.Errorf("tcp: connection closed mid-frame: %w", io.ErrUnexpectedEOF)
	}
	discard(r)
	c.shut(err, false)
}

// discard drops the buffered input: netpoll calls onRequest again as long
// as any is left.
func discard(r netpoll.Reader) {
	_ = r.Skip(r.Len())
	_ = r.Release()
}

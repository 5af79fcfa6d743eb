package tlsnet

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/wire"
)

// maxHello bounds the first frame of an accepted connection, before the
// dialer is known: a Hello takes well under 1 KiB.
const maxHello = 64 << 10

// The send queue is a list of chunks, as in transport/tcp: frames are
// appended to the last chunk until it holds chunkSize bytes, then a new
// one starts; chunks come from the Network's pool and go back once
// written. Chunks grown past maxPooled by a huge frame are left to the GC,
// and so is a read buffer grown past it.
const (
	chunkSize  = 256 << 10
	maxPooled  = 1 << 20
	readBuffer = 64 << 10
)

// linger bounds how long a closing connection, its queue sent and its
// stream ended, waits for the peer to close its side before it closes the
// socket anyway (a peer that neither reads nor closes).
const linger = 2 * time.Second

var errHandshakeTimeout = errors.New("tlsnet: no hello before the handshake timeout")

// conn is one connection, dialed or accepted.
type conn struct {
	net    *Network
	raw    net.Conn // the TCP connection under tc
	tc     *tls.Conn
	ln     *listener // the listener that accepted it; nil if dialed
	remote string
	log    zerolog.Logger
	// warn is log rate-limited (Network.warn), for the warnings.
	warn zerolog.Logger

	// Read side: touched only by the reader goroutine.
	br          *bufio.Reader
	body        []byte            // a frame body's buffer, reused
	established bool              // the handshake is over
	recv        transport.Handler // h, as the reader sees it

	stopped atomic.Bool // closing: the reader drops what arrives

	mu       sync.Mutex
	out      [][]byte // chunks of frames queued for the flusher
	queued   int      // bytes in out
	held     bool     // accepted and not yet answered: queue, do not send
	flushing bool     // a flusher is running
	closing  bool     // Close was called or the connection ended
	ended    bool     // the socket is closed (finish ran)
	reason   error
	h        transport.Handler // set once the handshake succeeded

	answer chan wire.Message // dialer: the Welcome or Reject, for Dial
	ready  chan struct{}     // dialer: closed once Dial has decided
	done   chan struct{}     // closed when the connection has ended
}

func (n *Network) newConn(raw net.Conn, tc *tls.Conn, ln *listener) *conn {
	c := &conn{net: n, raw: raw, tc: tc, ln: ln, held: ln != nil, done: make(chan struct{}),
		br: bufio.NewReaderSize(tc, readBuffer)}
	c.remote = raw.RemoteAddr().String()
	c.log = n.opts.Log.With().Str("remote", c.remote).Logger()
	c.warn = n.warn.With().Str("remote", c.remote).Logger()
	return c
}

func (c *conn) RemoteAddr() string { return c.remote }

// Send queues m and returns at once; a flusher writes it. Frames over
// MaxFrame are refused (the peer would cut the connection on them).
func (c *conn) Send(m wire.Message) error {
	if m == nil {
		return errors.New("tlsnet: send of a nil message")
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
		return fmt.Errorf("tlsnet: %v frame of %d bytes over the %d limit", m.Kind(), size, c.net.opts.MaxFrame)
	}
	c.out[last] = chunk
	c.queued += len(chunk) - start
	if c.queued > c.net.opts.MaxQueue {
		c.mu.Unlock()
		err := fmt.Errorf("tlsnet: over %d bytes queued: peer too slow", c.net.opts.MaxQueue)
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
		go c.flush()
	}
}

// flush writes the queue until it is empty. Only one flusher runs at a
// time, so frames leave in queue order; what Sends add during a write
// leaves with the next batch. It ends the stream once a closing
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
				c.end()
			}
			return
		}
		batch, c.out = c.out, batch[:0]
		c.queued = 0
		c.mu.Unlock()
		for i, b := range batch {
			_ = c.raw.SetWriteDeadline(time.Now().Add(c.net.opts.WriteTimeout))
			// tls.Conn.Write seals b into records before it returns, so
			// b is free after.
			if _, err := c.tc.Write(b); err != nil {
				c.mu.Lock()
				c.flushing = false
				closing, ended := c.closing, c.ended
				c.mu.Unlock()
				switch {
				case closing:
					// A Close was waiting for this drain, which will not
					// finish (a peer that stopped reading timed the write
					// out), or the connection is gone: close now.
					_ = c.raw.Close()
				case !ended:
					c.warn.Warn().Err(err).Msg("closing connection: write failed")
					c.shut(fmt.Errorf("tlsnet: write: %w", err), false)
				}
				return
			}
			c.net.recycle(b)
			batch[i] = nil
		}
	}
}

// Close sends what is already queued (each write bounded by WriteTimeout),
// then closes. Messages arriving meanwhile are dropped.
func (c *conn) Close(reason error) {
	if reason == nil {
		reason = transport.ErrClosed
	}
	c.shut(reason, true)
}

// shut closes the connection for reason: after draining the queue if
// drain, or at once.
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
	flushing := c.flushing
	c.mu.Unlock()
	c.log.Debug().Err(reason).Msg("closing connection")
	switch {
	case !drain:
		_ = c.raw.Close()
	case !flushing:
		// end may wait (close_notify's write): not in the caller's Close.
		go c.end()
	}
	// A running flusher ends the stream once the queue is drained.
}

// end ends a closing connection's stream once its queue is sent: TLS's
// close_notify, then a TCP half-close, so that the peer reads every frame
// sent before Close and then the end. The reader reads on (and drops)
// until the peer closes too, for at most linger, and closes the socket:
// closing it with the peer's data unread would reset the connection, and a
// reset can destroy frames the peer has not read yet.
func (c *conn) end() {
	_ = c.raw.SetWriteDeadline(time.Now().Add(linger))
	_ = c.tc.CloseWrite()
	if tcp, ok := c.raw.(*net.TCPConn); ok {
		_ = tcp.CloseWrite()
	}
	_ = c.raw.SetReadDeadline(time.Now().Add(linger))
}

func (c *conn) closeReason() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

// finish ends the connection once its reader has returned, so that
// OnClose follows the last OnMessage; err is why the reader stopped (the
// peer closed, unless the connection was closing already).
func (c *conn) finish(err error) {
	c.stopped.Store(true)
	c.mu.Lock()
	if !c.closing {
		c.closing, c.reason = true, err
	}
	c.ended = true
	reason, h := c.reason, c.h
	c.out, c.queued = nil, 0
	c.mu.Unlock()
	_ = c.raw.Close()
	if c.ln != nil {
		c.ln.remove(c)
	}
	close(c.done)
	if h != nil {
		h.OnClose(c, reason)
	}
}

// read is the connection's reader goroutine: it reads frames until the
// connection ends, then finishes it. It reads each frame's header and
// checks it before reading the body, so a hostile length is refused before
// anything is allocated for it.
func (c *conn) read() {
	c.finish(c.readFrames())
}

// readFrames reads and delivers frames; it returns why it stopped.
func (c *conn) readFrames() error {
	for {
		if c.stopped.Load() {
			return c.drain()
		}
		limit := c.net.opts.MaxFrame
		if c.ln != nil && !c.established {
			limit = min(limit, maxHello)
		}
		hdr, err := c.br.Peek(wire.HeaderSize)
		if err != nil {
			return c.readFailed(err, len(hdr) > 0)
		}
		kind, n, err := wire.ParseHeader(hdr, limit)
		if err == nil {
			err = c.expect(kind)
		}
		if err != nil {
			return c.protocolError(err)
		}
		_, _ = c.br.Discard(wire.HeaderSize)
		body := c.buffer(n)
		if _, err := io.ReadFull(c.br, body); err != nil {
			return c.readFailed(err, true)
		}
		// Decode copies what it keeps, so the buffer is free again after.
		m, err := wire.Decode(kind, body)
		if err != nil {
			return c.protocolError(err)
		}
		if c.stopped.Load() {
			continue // closing: dropped
		}
		if !c.deliver(m) {
			return c.drain()
		}
	}
}

// buffer returns a buffer of n bytes for a frame body: the connection's
// own, grown up to maxPooled, or for a larger frame one of its own.
func (c *conn) buffer(n int) []byte {
	if n > maxPooled {
		return make([]byte, n)
	}
	if cap(c.body) < n {
		c.body = make([]byte, n, max(n, 4<<10))
	}
	return c.body[:n]
}

// drain reads and drops what arrives until the connection ends: the peer
// closes, Close's linger runs out, or the socket is closed.
func (c *conn) drain() error {
	_, err := io.Copy(io.Discard, c.br)
	if err == nil {
		err = io.EOF
	}
	return err
}

// expect checks a frame's kind against the connection's state before its
// body is read.
func (c *conn) expect(k wire.Kind) error {
	switch {
	case !c.established && c.ln != nil && k != wire.KindHello:
		return fmt.Errorf("tlsnet: first frame is %v, want Hello", k)
	case !c.established && c.ln == nil && k != wire.KindWelcome && k != wire.KindReject:
		return fmt.Errorf("tlsnet: handshake answer is %v, want Welcome or Reject", k)
	case c.established && (k == wire.KindHello || k == wire.KindWelcome || k == wire.KindReject):
		return fmt.Errorf("tlsnet: %v after the handshake", k)
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
	if !c.closing {
		// The Hello came in time: no read deadline from now on (a
		// closing connection keeps its linger).
		_ = c.raw.SetReadDeadline(time.Time{})
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
func (c *conn) protocolError(err error) error {
	c.warn.Warn().Err(err).Msg("closing connection: protocol error")
	c.shut(err, false)
	return err
}

// readFailed closes the connection after a failed read (mid: in the middle
// of a frame) and returns why: the connection is closing already, the
// peer closed it, it sent no Hello in time, or the socket failed.
func (c *conn) readFailed(err error, mid bool) error {
	if c.stopped.Load() {
		return err // closing: the reason is already set
	}
	var ne net.Error
	switch {
	case c.ln != nil && !c.established && errors.As(err, &ne) && ne.Timeout():
		c.warn.Warn().Str("timeout", c.net.opts.HandshakeTimeout.String()).Msg("closing connection: no hello in time")
		err = errHandshakeTimeout
	case mid && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)):
		c.warn.Warn().Err(err).Msg("closing connection: peer closed mid-frame")
		err = fmt.Errorf("tlsnet: connection closed mid-frame: %w", io.ErrUnexpectedEOF)
	case errors.Is(err, io.EOF), isRemoteAlert(err):
		// The peer closed, or refused this side's certificate (Dial
		// says so): no news here.
	default:
		err = fmt.Errorf("tlsnet: read: %w", err)
	}
	c.shut(err, false)
	return err
}

// refuse counts and logs an accepted connection whose TLS handshake
// failed.
func (n *Network) refuse(remote string, err error, timeout time.Duration) {
	n.refused.Add(1)
	n.warn.Warn().Msg("TLS handshake refused: remote " + remote + ": " + refusal(err, timeout))
}

// refusal says in a few words why a TLS handshake failed.
func refusal(err error, timeout time.Duration) string {
	var (
		ne      net.Error
		rec     tls.RecordHeaderError
		unknown x509.UnknownAuthorityError
		invalid x509.CertificateInvalidError
	)
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Sprintf("no TLS handshake within %v", timeout)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the dialer closed the connection during the TLS handshake"
	case errors.As(err, &rec):
		return "not TLS (a dialer without --tls-ca/--tls-cert/--tls-key?): " + strings.TrimPrefix(rec.Error(), "tls: ")
	case errors.As(err, &unknown):
		return strings.TrimPrefix(unknown.Error(), "x509: ")
	case errors.As(err, &invalid):
		return strings.TrimPrefix(invalid.Error(), "x509: ")
	case isRemoteAlert(err):
		return "the dialer refused this listener's certificate: " + err.Error()
	}
	return strings.TrimPrefix(err.Error(), "tls: ")
}

// isRemoteAlert reports whether err is a TLS alert from the peer.
func isRemoteAlert(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error"
}

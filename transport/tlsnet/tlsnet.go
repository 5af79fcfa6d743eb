// Package tlsnet is the transport.Network of deployments that authenticate
// their peers: the length-prefixed wire frames of transport/tcp over TCP
// and TLS 1.3 with mutual authentication (standard library net and
// crypto/tls; netpoll cannot do TLS).
//
// Every process presents one certificate, signed by the cluster's CA, both
// as a server (to those that dial it) and as a client (to those it dials).
// A listener requires and verifies the dialer's certificate
// (tls.RequireAndVerifyClientCert) and a dialer verifies the listener's
// against the dialed host name, or Options.ServerName. A peer without a
// certificate from the CA (none, another CA's, an expired one, or no TLS
// at all) never reaches the wire handshake: the listener logs one
// rate-limited warning naming its address and the reason, and counts it
// (Network.Refused). What the certificate proves is membership in the
// cluster, not a role: any certificate from the CA may dial as a
// scheduler's frontend or backend.
//
// Above TLS it keeps transport/tcp's semantics. The accepted side must
// finish the TLS handshake and deliver a valid Hello within
// HandshakeTimeout. Each connection has one reader goroutine, which checks
// a frame's header with wire.ParseHeader before it reads the body (a
// hostile length costs nothing) and calls the handler, so that one
// connection's messages arrive in order. Send appends encoded frames to a
// per-connection queue that one flusher goroutine at a time writes out:
// Send never waits for the peer, frames queued during a write leave
// together in the next, a peer that lets MaxQueue bytes pile up is cut
// off, and a write stalled for WriteTimeout closes the connection. Close
// sends what is queued, then ends the stream with TLS's close_notify and
// a TCP half-close, and reads until the peer closes too (at most linger),
// so that nothing sent before Close is lost to a reset.
package tlsnet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/ratelog"
	"github.com/symphony-serving/symphony/transport/wire"
)

// Options configure a Network. New gives zero fields but the credentials
// their Default value.
type Options struct {
	// Certificate is this process's certificate (with its chain, if any)
	// and private key, presented to dialers and to listeners alike: it
	// must allow both server and client authentication.
	Certificate tls.Certificate
	// CA is the authorities a peer's certificate must chain to (the
	// cluster's CA).
	CA *x509.CertPool
	// ServerName, if set, is the name a dialer checks the listener's
	// certificate against, in place of the dialed host: for clusters
	// whose addresses are not in the certificates (pod IPs), whose
	// certificates all carry a common name instead.
	ServerName string

	// Limits are the frame, queue and timeout limits of every connection
	// (transport.Limits); HandshakeTimeout and DialTimeout cover the TLS
	// handshake too.
	transport.Limits
	// Log receives per-connection warnings (refused TLS handshakes,
	// protocol errors, timeouts) and debug events. The zero Logger is
	// silent. Warnings are rate-limited (transport/ratelog): a flood of
	// bad dialers logs WarnBurst lines a second, and
	// Network.SuppressedLogs counts the rest.
	Log zerolog.Logger
	// WarnBurst is how many warnings a second pass the rate limit (0:
	// ratelog.DefaultBurst).
	WarnBurst uint32
}

// Default returns the production settings, without credentials:
// transport.DefaultLimits, as transport/tcp, and a silent log.
func Default() Options {
	return Options{Limits: transport.DefaultLimits(), Log: zerolog.Nop()}
}

// Validate reports settings a Network cannot work with.
func (o Options) Validate() error {
	switch {
	case len(o.Certificate.Certificate) == 0 || o.Certificate.PrivateKey == nil:
		return errors.New("tlsnet: no certificate and key")
	case o.CA == nil:
		return errors.New("tlsnet: no CA to verify peers with")
	}
	if err := o.Limits.Validate(); err != nil {
		return fmt.Errorf("tlsnet: %w", err)
	}
	return nil
}

// LoadCredentials reads the CA certificate(s), and this process's
// certificate and key, from PEM files: Options.CA and
// Options.Certificate. It checks that the certificate is one the CA
// signed, for a clear error at the start rather than refusals later.
func LoadCredentials(caFile, certFile, keyFile string) (tls.Certificate, *x509.CertPool, error) {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("tlsnet: CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return tls.Certificate{}, nil, fmt.Errorf("tlsnet: CA: no PEM certificate in %s", caFile)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("tlsnet: certificate %s, key %s: %w", certFile, keyFile, err)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return tls.Certificate{}, nil, fmt.Errorf("tlsnet: certificate %s: %w", certFile, err)
		}
	}
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			return tls.Certificate{}, nil, fmt.Errorf("tlsnet: certificate %s does not verify against the CA %s for %s: %w", certFile, caFile, usageName(usage), err)
		}
	}
	return cert, pool, nil
}

func usageName(u x509.ExtKeyUsage) string {
	if u == x509.ExtKeyUsageServerAuth {
		return "server authentication"
	}
	return "client authentication"
}

// Network is a transport.Network over TCP and mutual TLS. It holds no
// global state: every Network has its own options and counters.
type Network struct {
	opts   Options
	server *tls.Config // for accepted connections
	client *tls.Config // for dialed ones, ServerName set per dial
	chunks sync.Pool   // *[]byte send-queue chunks, shared by the connections
	// warn is opts.Log rate-limited, for the per-connection warnings.
	warn       zerolog.Logger
	suppressed atomic.Uint64
	refused    atomic.Uint64
}

var _ transport.Network = (*Network)(nil)

// New returns a Network with opts, whose zero fields take their Default
// values. It panics if the result fails Validate: options are program
// configuration, to be validated where they are read.
func New(opts Options) *Network {
	opts.Limits = opts.Limits.WithDefaults()
	if err := opts.Validate(); err != nil {
		panic(err)
	}
	n := &Network{opts: opts}
	n.server = &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{opts.Certificate},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    opts.CA,
	}
	cert := opts.Certificate
	n.client = &tls.Config{
		MinVersion: tls.VersionTLS13,
		// Always present the certificate, even to a listener that names
		// other CAs (crypto/tls would send none): its refusal then says
		// which CA signed what, not just that there was no certificate.
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil },
		RootCAs:              opts.CA,
	}
	burst := opts.WarnBurst
	if burst == 0 {
		burst = ratelog.DefaultBurst
	}
	n.warn = opts.Log.Sample(ratelog.NewSampler(burst, time.Second, &n.suppressed))
	return n
}

// SuppressedLogs is the number of per-connection warnings held back by the
// log's rate limit.
func (n *Network) SuppressedLogs() uint64 { return n.suppressed.Load() }

// Refused is the number of accepted connections whose TLS handshake
// failed: no client certificate, one the CA did not sign or that has
// expired, a dialer that refused this process's certificate, a dialer
// that does not speak TLS, or no handshake within HandshakeTimeout.
func (n *Network) Refused() uint64 { return n.refused.Load() }

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

var errListenerClosed = errors.New("tlsnet: listener closed")

// Listen listens on addr ("host:port"; port 0 picks one) and runs accept
// for every dialer that presents a valid certificate and a Hello.
func (n *Network) Listen(addr string, accept transport.Acceptor) (transport.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tlsnet: listen %s: %w", addr, err)
	}
	l := &listener{net: n, ln: ln, accept: accept, addr: ln.Addr().String(), served: make(chan struct{}),
		pending: make(map[net.Conn]struct{}), conns: make(map[*conn]struct{})}
	go l.serve()
	return l, nil
}

type listener struct {
	net    *Network
	ln     net.Listener
	accept transport.Acceptor
	addr   string
	served chan struct{} // closed when the accept loop returned

	mu      sync.Mutex
	pending map[net.Conn]struct{} // in the TLS handshake
	conns   map[*conn]struct{}
	closed  bool
}

func (l *listener) Addr() string { return l.addr }

// serve accepts connections until the listener closes.
func (l *listener) serve() {
	defer close(l.served)
	var backoff time.Duration
	for {
		raw, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors, say: wait a little, as net/http
			// does, rather than spin or stop serving.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			l.net.warn.Warn().Str("addr", l.addr).Err(err).Dur("retry_in", backoff).Msg("accept failed")
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		l.mu.Lock()
		closed := l.closed
		if !closed {
			l.pending[raw] = struct{}{}
		}
		l.mu.Unlock()
		if closed {
			_ = raw.Close()
			continue
		}
		go l.serveConn(raw)
	}
}

// serveConn runs an accepted connection's TLS handshake, then its reader.
// The handshake and the Hello after it share HandshakeTimeout.
func (l *listener) serveConn(raw net.Conn) {
	n := l.net
	remote := raw.RemoteAddr().String()
	deadline := time.Now().Add(n.opts.HandshakeTimeout)
	_ = raw.SetDeadline(deadline)
	tc := tls.Server(raw, n.server)
	err := tc.Handshake()
	l.mu.Lock()
	delete(l.pending, raw)
	closed := l.closed
	var c *conn
	if err == nil && !closed {
		_ = raw.SetWriteDeadline(time.Time{})
		c = n.newConn(raw, tc, l)
		l.conns[c] = struct{}{}
	}
	l.mu.Unlock()
	switch {
	case err != nil:
		if !closed {
			n.refuse(remote, err, n.opts.HandshakeTimeout)
			rejectPlaintext(raw, err)
		}
		_ = raw.Close()
	case closed:
		_ = raw.Close()
	default:
		c.read()
	}
}

// plaintextReason is the Reject a plaintext Symphony dialer gets.
const plaintextReason = "this listener requires mutual TLS: give the dialing process --tls-ca, --tls-cert and --tls-key (docs/operations.md, \"Authentication: mTLS\")"

// rejectPlaintext answers a dialer whose handshake failed because it
// sent a plaintext Hello (a process started without --tls-*) with a
// plaintext Reject, as net/http answers HTTP sent to an HTTPS server, so
// that its log says why rather than "connection closed". Anything else
// gets nothing.
func rejectPlaintext(raw net.Conn, err error) {
	var rec tls.RecordHeaderError
	if !errors.As(err, &rec) || rec.Conn == nil {
		return
	}
	if k, _, err := wire.ParseHeader(rec.RecordHeader[:], maxHello); err != nil || k != wire.KindHello {
		return
	}
	if _, err := raw.Write(wire.AppendFrame(nil, &wire.Reject{Reason: plaintextReason})); err != nil {
		return
	}
	// End the stream, and read the rest of the Hello until the dialer
	// closes (within the handshake's deadline): a close with its bytes
	// unread would reset the connection, and the reset could destroy the
	// Reject before the dialer reads it.
	if tcp, ok := raw.(*net.TCPConn); ok {
		_ = tcp.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(raw, maxHello))
}

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
	for raw := range l.pending {
		_ = raw.Close()
	}
	l.mu.Unlock()
	err := l.ln.Close()
	for _, c := range conns {
		c.Close(errListenerClosed)
	}
	<-l.served
	return err
}

func (l *listener) remove(c *conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

// Dial connects to addr, runs the TLS handshake, sends hello and waits,
// within ctx, for the Welcome (returned with the connection) or the Reject
// (a *transport.RejectedError). h receives the connection's later
// messages, the first of them only once Dial has decided to succeed; if
// Dial fails, h is never called. A listener that refuses this Network's
// certificate fails Dial with an error that says so.
func (n *Network) Dial(ctx context.Context, addr string, hello *wire.Hello, h transport.Handler) (transport.Conn, *wire.Welcome, error) {
	if h == nil {
		h = transport.HandlerFuncs{}
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, n.opts.DialTimeout)
	defer cancel()
	var d net.Dialer
	raw, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, fmt.Errorf("tlsnet: dial %s: %w", addr, err)
	}
	cfg := n.client.Clone()
	cfg.ServerName = n.opts.ServerName
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	tc := tls.Client(raw, cfg)
	if err := tc.HandshakeContext(dctx); err != nil {
		_ = raw.Close()
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, fmt.Errorf("tlsnet: dial %s: TLS handshake: %w", addr, err)
	}
	c := n.newConn(raw, tc, nil)
	c.answer = make(chan wire.Message, 1)
	c.ready = make(chan struct{})
	go c.read()
	if err := c.Send(hello); err != nil {
		if errors.Is(err, transport.ErrClosed) {
			// The listener's refusal can beat the Hello.
			err = c.closedInHandshake(addr)
		} else {
			err = fmt.Errorf("tlsnet: dial %s: %w", addr, err)
		}
		c.Close(err)
		close(c.ready)
		return nil, nil, err
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
			err = fmt.Errorf("tlsnet: dial %s: connection closed after the welcome: %w", addr, c.reason)
		} else {
			c.h = h
		}
		c.mu.Unlock()
	case *wire.Reject:
		err = &transport.RejectedError{Reason: m.Reason}
	default:
		if err = ctx.Err(); err == nil {
			err = c.closedInHandshake(addr)
		}
	}
	close(c.ready) // lets the reader deliver to h, or discard
	if err != nil {
		c.Close(err)
		return nil, nil, err
	}
	return c, w, nil
}

// closedInHandshake is Dial's error for a connection that closed before
// the listener's answer.
func (c *conn) closedInHandshake(addr string) error {
	reason := c.closeReason()
	if isRemoteAlert(reason) {
		// In TLS 1.3 the listener checks the dialer's certificate after
		// the dialer's handshake is done: its refusal arrives as an alert
		// in place of the Welcome.
		return fmt.Errorf("tlsnet: dial %s: the listener refused this dialer's certificate: %w", addr, reason)
	}
	return fmt.Errorf("tlsnet: dial %s: connection closed during the handshake: %w", addr, reason)
}

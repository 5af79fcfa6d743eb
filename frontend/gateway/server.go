package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Stats counts what the gateway's caps and timeouts did, for metrics. All
// fields are updated atomically and may be read at any time.
type Stats struct {
	// OpenConns is the connections open now (those a Listener admitted).
	OpenConns atomic.Int64
	// RejectedConns counts connections answered 503 and closed at once
	// because MaxConnections were open.
	RejectedConns atomic.Uint64
	// InFlight is the inference requests handed to the frontend now.
	InFlight atomic.Int64
	// RejectedRequests counts inference requests answered 503 because
	// MaxInFlight were in flight.
	RejectedRequests atomic.Uint64
	// Unauthenticated counts requests refused 401 (UNAUTHENTICATED) for
	// want of an accepted bearer token (Config.Tokens).
	Unauthenticated atomic.Uint64
}

// rejectWait bounds how long a connection turned away at the cap is kept
// to drain what its client sends after the 503: closing a socket with
// unread bytes resets it, and a reset can destroy the 503 before the client
// reads it. net/http waits as long for the same reason.
const rejectWait = 500 * time.Millisecond

// maxRejecting bounds the connections being turned away at once, each a
// goroutine for up to rejectWait; past it a connection is closed without
// the 503, so that a flood cannot trade open connections for goroutines.
const maxRejecting = 256

// Server returns an http.Server that serves h with the Config's timeouts
// and header limit. h is the gateway, or a mux that mounts it beside other
// endpoints such as /metrics. Serve it on Listener(ln) to cap connections.
//
// The server's WriteTimeout runs from the end of a request's header, so it
// is ReadTimeout plus Config.WriteTimeout: the body's time, then the
// inference and the answer's; an inference request restarts it at
// Config.WriteTimeout once its body is read. net/http logs (a panicking
// handler, a failed accept) go to Config.Log as warnings, at most one
// every ten seconds since a client can cause them at will.
func (g *Gateway) Server(h http.Handler) *http.Server {
	c := g.cfg
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		ReadTimeout:       c.ReadTimeout,
		WriteTimeout:      c.ReadTimeout + c.WriteTimeout,
		IdleTimeout:       c.IdleTimeout,
		MaxHeaderBytes:    c.MaxHeaderBytes,
		ErrorLog:          log.New(logWriter{g.httpLog}, "", 0),
	}
}

// logWriter turns net/http's log lines into warnings.
type logWriter struct{ log zerolog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Warn().Msg(string(trimNewline(p)))
	return len(p), nil
}

func trimNewline(p []byte) []byte {
	if n := len(p); n > 0 && p[n-1] == '\n' {
		return p[:n-1]
	}
	return p
}

// Listener wraps ln so that at most Config.MaxConnections connections are
// open at once. Past the cap a connection is accepted, answered with a
// minimal 503 carrying Retry-After and the reason "drop: gateway busy",
// and closed, so that clients and load balancers see an answer they can
// act on rather than a connection left waiting in the kernel's backlog.
// The open and rejected connections are counted in Stats.
func (g *Gateway) Listener(ln net.Listener) net.Listener {
	return &capListener{Listener: ln, g: g, busy: busyResponse(g.cfg)}
}

// busyResponse is the whole HTTP response to a connection past the cap.
func busyResponse(c Config) []byte {
	body, _ := json.Marshal(errorBody{
		Error:  fmt.Sprintf("the gateway has its %d connections open; retry later", c.MaxConnections),
		Reason: ReasonDropPrefix + string(DropBusy),
	})
	resp := "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
	if c.RetryAfter > 0 {
		resp += "Retry-After: " + retryAfter(c.RetryAfter) + "\r\n"
	}
	resp += "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	return append([]byte(resp), body...)
}

// retryAfter is d as a Retry-After value, whole seconds rounded up.
func retryAfter(d time.Duration) string {
	return strconv.Itoa(int(math.Ceil(d.Seconds())))
}

// capListener is the listener Listener and GRPCListener return.
type capListener struct {
	net.Listener
	g         *Gateway
	busy      []byte // the answer to a connection past the cap; nil: none, close it at once
	rejecting atomic.Int64
}

func (l *capListener) Accept() (net.Conn, error) {
	st := &l.g.stats
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if open := st.OpenConns.Add(1); open <= int64(l.g.cfg.MaxConnections) {
			return &countedConn{Conn: c, open: &st.OpenConns}, nil
		}
		st.OpenConns.Add(-1)
		st.RejectedConns.Add(1)
		l.g.capLog.Warn().Int("max_connections", l.g.cfg.MaxConnections).Uint64("rejected_total", st.RejectedConns.Load()).
			Msg("gateway at its connection cap: answering new connections 503, closing new gRPC ones (logged at most every 10s)")
		if l.busy == nil { // GRPCListener: nothing to answer before a preface
			c.Close()
			continue
		}
		if l.rejecting.Add(1) > maxRejecting {
			l.rejecting.Add(-1)
			c.Close()
			continue
		}
		go l.reject(c)
	}
}

// reject answers c with the busy response and closes it, within
// rejectWait. It waits for the request's header first: a client that gets
// an answer before it has sent its request (Go's http.Transport among
// them) takes it for a broken connection, not a 503. Then it reads what
// the client still sends (see rejectWait).
func (l *capListener) reject(c net.Conn) {
	defer l.rejecting.Add(-1)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(rejectWait))
	var head [4 << 10]byte
	for n := 0; n < len(head) && !bytes.Contains(head[:n], []byte("\r\n\r\n")); {
		k, err := c.Read(head[n:])
		if n += k; err != nil {
			break // silent or gone: answer anyway, to whoever is there
		}
	}
	if _, err := c.Write(l.busy); err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 256<<10)) // net/http's own bound on a body it discards
}

// countedConn gives its slot back once, when it is first closed.
type countedConn struct {
	net.Conn
	open *atomic.Int64
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.open.Add(-1) })
	return err
}

// CloseWrite lets net/http half-close the connection, as it does to a
// *net.TCPConn, before it closes one whose request it refused.
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

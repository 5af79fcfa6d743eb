// Package transport carries wire messages between Symphony's processes.
//
// A Network listens and dials. Every connection starts with a handshake: the
// dialer sends wire.Hello, the listener checks the protocol version and asks
// its Acceptor, then answers wire.Welcome or wire.Reject (and closes). After
// that both sides Send messages and receive them through a Handler.
//
// Three networks implement it: transport/tcp (netpoll, length-prefixed
// frames) and transport/tlsnet (the same frames over mutual TLS 1.3) for
// real deployments, and transport/inproc for tests and the single-process
// demo, which still encodes and decodes every message so that the codec is
// always exercised.
package transport

import (
	"context"
	"errors"

	"github.com/symphony-serving/symphony/transport/wire"
)

// ErrClosed is returned by Send on a closed connection.
var ErrClosed = errors.New("transport: connection closed")

// Conn is one established connection.
type Conn interface {
	// Send queues m to be sent. It is safe for concurrent use and does not
	// wait for the peer. Messages sent from one goroutine arrive in order.
	// After the connection closed it returns ErrClosed.
	//
	// Send is done with m when it returns: it encodes m (or copies it)
	// before returning and never reads m, or a slice or value m refers
	// to, afterwards. The caller may change or reuse all of it at once,
	// and the peer still receives m as it was at the call. This is what
	// lets a sender hand over memory it does not own for long: the input
	// server sends inputs straight out of its store and releases them
	// right after Send (frontend/inputserver.go), and a backend reuses
	// its batch buffers. A Conn that holds messages back (a test double,
	// a fault injector's frozen connection) must keep deep copies.
	Send(m wire.Message) error
	// Close closes the connection with a reason (logged, and passed to the
	// handler's OnClose). Closing twice is harmless.
	Close(reason error)
	// RemoteAddr is the peer's address, for logs.
	RemoteAddr() string
}

// Handler receives one connection's messages. OnMessage calls for one
// connection run one at a time and in order; calls for different
// connections may overlap. OnClose runs exactly once, after the last
// OnMessage, whoever closed the connection and why.
type Handler interface {
	// OnMessage handles m, which belongs to the handler from then on: the
	// network builds a fresh message for every delivery (decoding copies
	// every byte slice out of its read buffers) and never reads or writes
	// m, or anything m refers to, after the call. A handler may therefore
	// keep m or its slices past the call (queue it, hand it to another
	// goroutine, keep a reply's input bytes for a batch) without copying;
	// a network that reused its buffers under a kept message would change
	// a request's input after it was checked.
	OnMessage(c Conn, m wire.Message)
	OnClose(c Conn, err error)
}

// Acceptor decides on a dialer. It gets the connection and the dialer's
// Hello (whose Version already matched) and returns the Welcome to send and
// the handler for the connection's messages, or an error, which is sent as
// the Reject reason before the connection closes. It may keep c and Send on
// it; those messages follow the Welcome.
type Acceptor func(c Conn, hello *wire.Hello) (*wire.Welcome, Handler, error)

// Listener is a listening address.
type Listener interface {
	// Addr is the address dialers use (with the real port if 0 was asked).
	Addr() string
	// Close stops accepting and closes every accepted connection.
	Close() error
}

// Network listens and dials.
type Network interface {
	Listen(addr string, accept Acceptor) (Listener, error)
	// Dial connects to addr, sends hello and waits for the answer. On
	// Welcome it returns the connection, whose later messages go to h; on
	// Reject it returns a *RejectedError. ctx bounds the whole handshake.
	Dial(ctx context.Context, addr string, hello *wire.Hello, h Handler) (Conn, *wire.Welcome, error)
}

// RejectedError is a handshake the listener refused.
type RejectedError struct{ Reason string }

func (e *RejectedError) Error() string { return "transport: rejected: " + e.Reason }

// HandlerFuncs adapts two functions to a Handler.
type HandlerFuncs struct {
	Message func(c Conn, m wire.Message)
	Closed  func(c Conn, err error)
}

// OnMessage calls Message if set.
func (h HandlerFuncs) OnMessage(c Conn, m wire.Message) {
	if h.Message != nil {
		h.Message(c, m)
	}
}

// OnClose calls Closed if set.
func (h HandlerFuncs) OnClose(c Conn, err error) {
	if h.Closed != nil {
		h.Closed(c, err)
	}
}

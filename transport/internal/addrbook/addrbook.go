// Package addrbook is the address book of the in-memory networks
// (transport/inproc and transporttest.Network): which listener an address
// names, and which connections each listener accepted, so that closing a
// listener closes them, as a TCP listener's Close does. Both networks keep
// the same rules for addresses (an empty one or one ending in ":0" gets a
// fresh "scheme://N", like port 0 on TCP) and for closing, so they keep
// them in one place.
package addrbook

import (
	"fmt"
	"strings"
	"sync"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/wire"
)

// Conn is what a listener must be able to do with the connections it
// accepted: close them.
type Conn interface {
	comparable
	Close(reason error)
}

// Book maps a network's addresses to its listeners. Books are
// independent: no state is global, so tests can run many side by side.
type Book[C Conn] struct {
	name string // the network's, for errors and fresh addresses
	// ErrClosed is the reason a closed listener's connections close with,
	// and what a dial to a closed listener wraps.
	ErrClosed error

	mu        sync.Mutex
	listeners map[string]*Listener[C]
	seq       uint64
}

// New returns an empty book for the network called name ("inproc").
func New[C Conn](name string) *Book[C] {
	return &Book[C]{name: name, ErrClosed: fmt.Errorf("%s: listener closed", name), listeners: map[string]*Listener[C]{}}
}

// Listen registers addr, any string, for accept. An empty address or one
// ending in ":0" gets a fresh "name://N" address.
func (b *Book[C]) Listen(addr string, accept transport.Acceptor) (*Listener[C], error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if addr == "" || strings.HasSuffix(addr, ":0") {
		for addr == "" || strings.HasSuffix(addr, ":0") || b.listeners[addr] != nil {
			b.seq++
			addr = fmt.Sprintf("%s://%d", b.name, b.seq)
		}
	}
	if b.listeners[addr] != nil {
		return nil, fmt.Errorf("%s: listen %s: address in use", b.name, addr)
	}
	l := &Listener[C]{book: b, addr: addr, Accept: accept, conns: map[C]struct{}{}}
	b.listeners[addr] = l
	return l, nil
}

// Lookup returns the listener at addr, or an error naming the address if
// there is none, and a number no other Lookup of this book returns, to
// name the dialer by.
func (b *Book[C]) Lookup(addr string) (*Listener[C], uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	l := b.listeners[addr]
	if l == nil {
		return nil, 0, fmt.Errorf("%s: dial %s: no listener", b.name, addr)
	}
	return l, b.seq, nil
}

// Addresses returns the addresses listened on now, in no order.
func (b *Book[C]) Addresses() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, 0, len(b.listeners))
	for a := range b.listeners {
		out = append(out, a)
	}
	return out
}

// Listener is one listening address and the connections it accepted.
type Listener[C Conn] struct {
	book *Book[C]
	addr string
	// Accept decides on dialers.
	Accept transport.Acceptor

	mu     sync.Mutex
	conns  map[C]struct{}
	closed bool
}

// Addr is the address dialers use.
func (l *Listener[C]) Addr() string { return l.addr }

// Add records c as accepted, so that Close closes it; after Close it
// fails, wrapping the book's ErrClosed.
func (l *Listener[C]) Add(c C) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("%s: dial %s: %w", l.book.name, l.addr, l.book.ErrClosed)
	}
	l.conns[c] = struct{}{}
	return nil
}

// Remove forgets c, once it has closed.
func (l *Listener[C]) Remove(c C) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

// Close unregisters the address and closes every accepted connection
// with ErrClosed.
func (l *Listener[C]) Close() error {
	b := l.book
	b.mu.Lock()
	if b.listeners[l.addr] == l {
		delete(b.listeners, l.addr)
	}
	b.mu.Unlock()
	l.mu.Lock()
	l.closed = true
	conns := make([]C, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		c.Close(b.ErrClosed)
	}
	return nil
}

// Answer decides on a dialer's hello, accepted as c, as every network
// does: a dialer of another protocol version is refused before the
// Acceptor sees it, and a nil Welcome or Handler from the Acceptor means
// the defaults. A refused dialer gets the Reject to send (its reason cut
// to wire.MaxReason) instead.
func (l *Listener[C]) Answer(c transport.Conn, hello *wire.Hello) (*wire.Welcome, transport.Handler, *wire.Reject) {
	if hello.Version != wire.Version {
		return nil, nil, &wire.Reject{Reason: fmt.Sprintf("protocol version %d, want %d", hello.Version, wire.Version)}
	}
	w, h, err := l.Accept(c, hello)
	if err != nil {
		reason := err.Error()
		return nil, nil, &wire.Reject{Reason: reason[:min(len(reason), wire.MaxReason)]}
	}
	if w == nil {
		w = &wire.Welcome{Version: wire.Version}
	}
	if h == nil {
		h = transport.HandlerFuncs{}
	}
	return w, h, nil
}

package transport

import (
	"fmt"
	"math"
	"time"

	"github.com/symphony-serving/symphony/transport/wire"
)

// Limits bound a stream Network's connections: the frame and queue sizes
// and the timeouts that keep a hostile or stuck peer from holding memory
// or connections. transport/tcp and transport/tlsnet embed them in their
// Options, so that both read, default and check them the same way.
type Limits struct {
	// MaxFrame is the largest frame (kind byte and body) a connection
	// accepts or sends. A peer announcing a larger one is cut off before
	// anything is allocated for it.
	MaxFrame int
	// HandshakeTimeout is how long an accepted connection has to deliver a
	// valid Hello (a TLS transport's handshake included), so that idle or
	// trickling dialers cannot pin connections.
	HandshakeTimeout time.Duration
	// DialTimeout bounds Dial's connect (and TLS handshake); the context
	// bounds the whole handshake as well.
	DialTimeout time.Duration
	// WriteTimeout is how long a write may wait on a peer that does not
	// read before the connection is closed, so a stuck peer holds neither
	// its queue nor a draining Close forever.
	WriteTimeout time.Duration
	// MaxQueue is how many bytes may wait unsent on one connection. A Send
	// beyond it closes the connection: a peer that falls behind costs
	// bounded memory.
	MaxQueue int
}

// DefaultLimits are the production limits: frames up to
// wire.DefaultMaxFrame, 5 s to handshake and to connect, 30 s of write
// stall, and two maximal frames of send queue.
func DefaultLimits() Limits {
	return Limits{
		MaxFrame:         wire.DefaultMaxFrame,
		HandshakeTimeout: 5 * time.Second,
		DialTimeout:      5 * time.Second,
		WriteTimeout:     30 * time.Second,
		MaxQueue:         2 * wire.DefaultMaxFrame,
	}
}

// WithDefaults gives l's zero fields their DefaultLimits value; a zero
// MaxQueue holds at least one frame of l's MaxFrame.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.MaxFrame == 0 {
		l.MaxFrame = d.MaxFrame
	}
	if l.HandshakeTimeout == 0 {
		l.HandshakeTimeout = d.HandshakeTimeout
	}
	if l.DialTimeout == 0 {
		l.DialTimeout = d.DialTimeout
	}
	if l.WriteTimeout == 0 {
		l.WriteTimeout = d.WriteTimeout
	}
	if l.MaxQueue == 0 {
		l.MaxQueue = max(d.MaxQueue, l.MaxFrame+wire.HeaderSize)
	}
	return l
}

// Validate reports limits a Network cannot work with.
func (l Limits) Validate() error {
	switch {
	case l.MaxFrame < 1 || l.MaxFrame > math.MaxUint32:
		return fmt.Errorf("MaxFrame %d not in 1..%d", l.MaxFrame, uint32(math.MaxUint32))
	case l.HandshakeTimeout <= 0:
		return fmt.Errorf("HandshakeTimeout %v not positive", l.HandshakeTimeout)
	case l.DialTimeout <= 0:
		return fmt.Errorf("DialTimeout %v not positive", l.DialTimeout)
	case l.WriteTimeout <= 0:
		return fmt.Errorf("WriteTimeout %v not positive", l.WriteTimeout)
	case l.MaxQueue < l.MaxFrame+wire.HeaderSize:
		return fmt.Errorf("MaxQueue %d cannot hold a frame of MaxFrame %d", l.MaxQueue, l.MaxFrame)
	}
	return nil
}

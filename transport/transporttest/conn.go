package transporttest

import (
	"sync"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/wire"
)

// RecordingConn is a transport.Conn without a network: it keeps copies of
// what is sent on it, so that a test can drive code that answers over a
// connection (an RDMA exporter, say) and hand the answers on itself.
type RecordingConn struct {
	// Remote is what RemoteAddr reports.
	Remote string

	mu   sync.Mutex
	sent []wire.Message
}

var _ transport.Conn = (*RecordingConn)(nil)

// Send keeps a wire.Clone of m, made through the codec as a real
// connection encodes it: the caller may reuse m once Send returns (the
// transport.Conn contract), and a message that would not survive the wire
// fails here, as the peer would refuse it.
func (c *RecordingConn) Send(m wire.Message) error {
	cp, err := wire.Clone(m)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent = append(c.sent, cp)
	return nil
}

// Close does nothing: there is no peer to tell.
func (c *RecordingConn) Close(error) {}

// RemoteAddr returns Remote.
func (c *RecordingConn) RemoteAddr() string { return c.Remote }

// Take returns what was sent since the last Take, and forgets it.
func (c *RecordingConn) Take() []wire.Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.sent
	c.sent = nil
	return out
}

package transporttest

import (
	"errors"
	"testing"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/wire"
)

// The fake network keeps the contract it stands in for.
func TestNetworkConformance(t *testing.T) {
	Run(t, func(*testing.T) transport.Network { return NewNetwork() })
}

// A Peer is what the service tests build on: its Send returns once the
// listener's handler has handled the message, what the acceptor sent
// follows the Welcome, its Close returns after the listener's OnClose,
// and it learns why the listener's side closed.
func TestPeer(t *testing.T) {
	n := NewNetwork()
	handled := 0
	closed := make(chan struct{}, 2) // an OnClose per connection
	ln, err := n.Listen("sched:0", func(c transport.Conn, h *wire.Hello) (*wire.Welcome, transport.Handler, error) {
		if h.Name == "stranger" {
			return nil, nil, errors.New("who are you")
		}
		if err := c.Send(&wire.LeaveOK{}); err != nil {
			t.Errorf("Send in the acceptor: %v", err)
		}
		return &wire.Welcome{Version: wire.Version, ID: 5}, transport.HandlerFuncs{
			Message: func(c transport.Conn, m wire.Message) {
				handled++ // the Peer's Send waits for this
				if _, ok := m.(*wire.Leaving); ok {
					c.Close(errors.New("bye"))
				}
			},
			Closed: func(transport.Conn, error) { closed <- struct{}{} },
		}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Listening(); len(got) != 1 || got[0] != ln.Addr() {
		t.Errorf("Listening = %v, want [%s]", got, ln.Addr())
	}
	stranger := hello()
	stranger.Name = "stranger"
	var rej *transport.RejectedError
	if _, _, err := n.Connect(ln.Addr(), stranger); !errors.As(err, &rej) || rej.Reason != "who are you" {
		t.Errorf("Connect of a stranger = %v, want refused", err)
	}

	p, w, err := n.Connect(ln.Addr(), hello())
	if err != nil || w.ID != 5 {
		t.Fatalf("Connect = %+v, %v", w, err)
	}
	Expect[*wire.LeaveOK](t, p)
	for i := 1; i <= 3; i++ {
		if err := p.Send(&wire.Heartbeat{}); err != nil {
			t.Fatal(err)
		}
		if handled != i {
			t.Fatalf("Send returned with %d of %d messages handled", handled, i)
		}
	}
	if len(p.Pending()) != 0 || p.Err() != nil {
		t.Errorf("pending %v, closed with %v; want nothing", p.Pending(), p.Err())
	}
	if err := p.Send(&wire.Leaving{}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Next(); err == nil || p.Err() == nil || p.Err().Error() != "bye" {
		t.Errorf("Next after the listener closed: %v (reason %v), want closed with bye", err, p.Err())
	}
	wait(t, p.Closed(), "the peer's end")
	wait(t, closed, "the listener's OnClose")
	if err := p.Send(&wire.Heartbeat{}); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Send after close = %v, want ErrClosed", err)
	}

	// Closed from the Peer's side: Close returns after OnClose.
	p, _, err = n.Connect(ln.Addr(), hello())
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	select {
	case <-closed:
	default:
		t.Error("Close returned before the listener's OnClose")
	}
}

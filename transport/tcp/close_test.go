package tcp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/wire"
)

// A Close that drains the send queue towards a peer that stopped reading
// must still end the connection once the drain's write times out: the
// handler hears OnClose and the connection is gone.
// (It used to stay open for good: the timed-out flusher left closing the
// socket to a Close that was waiting for it.)
func TestCloseEndsWhenTheDrainTimesOut(t *testing.T) {
	n := New(Options{Limits: transport.Limits{WriteTimeout: 500 * time.Millisecond}})
	t.Cleanup(n.Close)
	accepted := make(chan transport.Conn, 1)
	closedWith := make(chan error, 1)
	ln, err := n.Listen("127.0.0.1:0", func(c transport.Conn, _ *wire.Hello) (*wire.Welcome, transport.Handler, error) {
		accepted <- c
		return &wire.Welcome{Version: wire.Version}, transport.HandlerFuncs{
			Closed: func(_ transport.Conn, err error) { closedWith <- err },
		}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	peer, err := net.Dial("tcp", ln.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	_ = peer.(*net.TCPConn).SetReadBuffer(4 << 10)
	if _, err := peer.Write(wire.AppendFrame(nil, &wire.Hello{Version: wire.Version, Role: wire.RoleFrontend, Name: "stuck", DataAddr: "x"})); err != nil {
		t.Fatal(err)
	}
	c := <-accepted
	// 16 MiB: far more than the socket buffers hold, within MaxQueue. The
	// peer never reads, so the flusher is stuck in a write.
	big := &wire.Results{Results: []wire.Result{{ID: 1, Output: make([]byte, 4<<20)}}}
	for range 4 {
		if err := c.Send(big); err != nil {
			t.Fatal(err)
		}
	}
	reason := errors.New("server closing")
	c.Close(reason)
	select {
	case err := <-closedWith:
		// Close's reason, or the write timeout if that came first (a
		// slow machine can take the whole timeout to reach Close).
		if !errors.Is(err, reason) && !strings.Contains(fmt.Sprint(err), "timeout") {
			t.Errorf("OnClose said %v, want Close's reason %v", err, reason)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the connection never ended after a Close whose drain timed out")
	}
	if err := c.Send(big); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Send after the close: %v, want ErrClosed", err)
	}
}

// Messages sent before a Close reach the peer even while the peer is still
// sending to us (a frontend that keeps submitting while its scheduler
// stops, with its shutdown drops in flight). The peer here is a plain
// socket that writes as fast as it can.
func TestCloseDeliversWhatWasSentWhilePeerStillSends(t *testing.T) {
	const ends = 2000
	lost := 0
	for run := range 20 {
		n := New(Options{})
		accepted := make(chan transport.Conn, 1)
		ln, err := n.Listen("127.0.0.1:0", func(c transport.Conn, _ *wire.Hello) (*wire.Welcome, transport.Handler, error) {
			accepted <- c
			return &wire.Welcome{Version: wire.Version}, transport.HandlerFuncs{}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		peer, err := net.Dial("tcp", ln.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := peer.Write(wire.AppendFrame(nil, &wire.Hello{Version: wire.Version, Role: wire.RoleFrontend, Name: "f", DataAddr: "x"})); err != nil {
			t.Fatal(err)
		}
		server := <-accepted
		// The Welcome first: a connection closed before it is answered
		// was never established, and drops what was queued (the acceptor
		// hands c over before its Welcome is written).
		r := bufio.NewReader(peer)
		if kind := readFrame(t, r); kind != wire.KindWelcome {
			t.Fatalf("run %d: first frame %v, want the Welcome", run, kind)
		}
		go func() { // a busy frontend: Submits without pause
			var burst []byte
			for range 256 {
				burst = wire.AppendFrame(burst, &wire.Submit{Tasks: []wire.Task{{ID: 1, Deadline: 1, Input: wire.InputRef{Length: 1}}}})
			}
			for {
				if _, err := peer.Write(burst); err != nil {
					return
				}
			}
		}()
		for i := range ends {
			if err := server.Send(&wire.Ended{Ends: []wire.End{{ID: uint64(i), Code: wire.EndDropShutdown}}}); err != nil {
				t.Fatal(err)
			}
		}
		server.Close(errors.New("shutting down"))
		got := 0
		for {
			hdr, err := r.Peek(wire.HeaderSize)
			if err != nil {
				break
			}
			kind, size, err := wire.ParseHeader(hdr, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			frame := make([]byte, wire.HeaderSize+size)
			if _, err := io.ReadFull(r, frame); err != nil {
				break
			}
			if kind == wire.KindEnded {
				got++
			}
		}
		_ = peer.Close()
		_ = ln.Close()
		n.Close()
		if got != ends {
			lost++
			t.Errorf("run %d: the peer read %d of the %d messages sent before Close", run, got, ends)
		}
	}
	if lost > 0 {
		t.Logf("%d of 20 closes lost messages", lost)
	}
}

// readFrame reads one frame from r and returns its kind.
func readFrame(t *testing.T, r *bufio.Reader) wire.Kind {
	t.Helper()
	hdr, err := r.Peek(wire.HeaderSize)
	if err != nil {
		t.Fatal(err)
	}
	kind, size, err := wire.ParseHeader(hdr, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(r, make([]byte, wire.HeaderSize+size)); err != nil {
		t.Fatal(err)
	}
	return kind
}

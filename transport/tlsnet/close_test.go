package tlsnet

import (
	"bufio"
	"crypto/tls"
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

// peerDial opens a TLS connection of the test cluster to addr and sends
// a Hello over it: the dialer's side, played by hand.
func peerDial(t *testing.T, addr string, setup func(*net.TCPConn)) *tls.Conn {
	t.Helper()
	o := testOptions(t)
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(raw.(*net.TCPConn))
	}
	c := tls.Client(raw, &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{o.Certificate}, RootCAs: o.CA, ServerName: "127.0.0.1"})
	if _, err := c.Write(wire.AppendFrame(nil, &wire.Hello{Version: wire.Version, Role: wire.RoleFrontend, Name: "peer", DataAddr: "x"})); err != nil {
		t.Fatal(err)
	}
	return c
}

// A Close that drains the send queue towards a peer that stopped reading
// must still end the connection once the drain's write times out: the
// handler hears OnClose and the connection is gone.
func TestCloseEndsWhenTheDrainTimesOut(t *testing.T) {
	o := testOptions(t)
	o.WriteTimeout = 500 * time.Millisecond
	n := New(o)
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
	peer := peerDial(t, ln.Addr(), func(c *net.TCPConn) { _ = c.SetReadBuffer(4 << 10) })
	defer peer.Close()
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
		// Close's reason, or the write timeout if that came first.
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
// stops, with its shutdown drops in flight): closing a socket with unread
// input resets it, and a reset can destroy what the peer has not read.
func TestCloseDeliversWhatWasSentWhilePeerStillSends(t *testing.T) {
	const ends, runs = 2000, 10
	for run := range runs {
		n := New(testOptions(t))
		accepted := make(chan transport.Conn, 1)
		ln, err := n.Listen("127.0.0.1:0", func(c transport.Conn, _ *wire.Hello) (*wire.Welcome, transport.Handler, error) {
			accepted <- c
			return &wire.Welcome{Version: wire.Version}, transport.HandlerFuncs{}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		peer := peerDial(t, ln.Addr(), nil)
		server := <-accepted
		// The Welcome first: a Close while the acceptor still runs drops
		// what was queued, as it drops the Welcome.
		r := bufio.NewReader(peer)
		if m := readFrame(t, r); m != wire.KindWelcome {
			t.Fatalf("first frame %v, want the Welcome", m)
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
			if _, err := io.ReadFull(r, make([]byte, wire.HeaderSize+size)); err != nil {
				break
			}
			if kind == wire.KindEnded {
				got++
			}
		}
		_ = peer.Close()
		_ = ln.Close()
		if got != ends {
			t.Errorf("run %d: the peer read %d of the %d messages sent before Close", run, got, ends)
		}
	}
}

// readFrame reads one frame and returns its kind.
func readFrame(t *testing.T, r *bufio.Reader) wire.Kind {
	t.Helper()
	hdr := make([]byte, wire.HeaderSize)
	if _, err := io.ReadFull(r, hdr); err != nil {
		t.Fatal(err)
	}
	kind, size, err := wire.ParseHeader(hdr, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(r, make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	return kind
}

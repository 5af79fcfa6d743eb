package tlsnet

import (
	"context"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/wire"
)

// benchPair connects a client to a server over loopback. The server runs
// onMsg; the client's messages go to got.
func benchPair(b *testing.B, onMsg func(transport.Conn, wire.Message)) (client transport.Conn, got chan wire.Message) {
	n := New(testOptions(b))
	ln, err := n.Listen("127.0.0.1:0", func(transport.Conn, *wire.Hello) (*wire.Welcome, transport.Handler, error) {
		return nil, transport.HandlerFuncs{Message: onMsg}, nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ln.Close() })
	got = make(chan wire.Message, 1024)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := n.Dial(ctx, ln.Addr(), &wire.Hello{Version: wire.Version, Role: wire.RoleFrontend},
		transport.HandlerFuncs{Message: func(_ transport.Conn, m wire.Message) { got <- m }})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close(nil) })
	return c, got
}

func echo(c transport.Conn, m wire.Message) { _ = c.Send(m) }

// BenchmarkRoundTripSmall measures one Submit of one task, echoed back.
func BenchmarkRoundTripSmall(b *testing.B) {
	c, got := benchPair(b, echo)
	m := &wire.Submit{Tasks: []wire.Task{{ID: 1, Model: 2, Deadline: time.Now().UnixNano(), Input: wire.InputRef{Length: 1024}}}}
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Send(m); err != nil {
			b.Fatal(err)
		}
		<-got
	}
}

// stream sends b.N copies of m, keeping at most window in flight (Send
// never blocks: a producer must pace itself, or MaxQueue cuts it off), and
// returns the messages per second the server received.
func stream(b *testing.B, m wire.Message, window int) float64 {
	credit := make(chan struct{}, window)
	done := make(chan struct{})
	want, n := b.N, 0
	c, _ := benchPair(b, func(transport.Conn, wire.Message) {
		<-credit
		if n++; n == want {
			close(done)
		}
	})
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range want {
		credit <- struct{}{}
		if err := c.Send(m); err != nil {
			b.Fatal(err)
		}
	}
	<-done
	return float64(want) / time.Since(start).Seconds()
}

// BenchmarkThroughputSmall streams one-task Submits one way.
func BenchmarkThroughputSmall(b *testing.B) {
	m := &wire.Submit{Tasks: []wire.Task{{ID: 1, Model: 2, Deadline: 3, Input: wire.InputRef{Length: 1024}}}}
	b.ReportMetric(stream(b, m, 1024), "msgs/s")
}

// BenchmarkThroughput150KB streams ReadReplies carrying one 150 KB input.
func BenchmarkThroughput150KB(b *testing.B) {
	data := make([]byte, 150<<10)
	b.SetBytes(int64(len(data)))
	b.ReportMetric(stream(b, &wire.ReadReply{Seq: 1, Data: [][]byte{data}}, 32), "msgs/s")
}

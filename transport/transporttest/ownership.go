package transporttest

import (
	"bytes"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/wire"
)

// Ownership: who may touch a message's memory, and when (the Send and
// OnMessage contracts on transport.Conn and transport.Handler).

// Pattern returns size bytes that differ for every (i, size): what a test
// sends as message i, to tell each message's bytes from every other's.
func Pattern(i, size int) []byte {
	b := make([]byte, size)
	for j := range b {
		b[j] = byte(i*31 + j*7 + 1)
	}
	return b
}

// scribble overwrites b, as a sender reusing its buffer would.
func scribble(b []byte) {
	for j := range b {
		b[j] = 0xee
	}
}

// ownershipMessages is how many messages the ownership tests send: enough
// that a network reusing a read buffer would reuse it under a kept one.
const ownershipMessages = 200

// size is message i's payload size, from a few bytes to 96 KiB, so that
// some messages share a read buffer and others span several.
func size(i int) int { return 1 + (i*7919)%(96<<10) }

// testSendCopies changes every message right after its Send returns: the
// buffer, the slice of buffers and the tasks, all reused for the next
// message. The peer must receive each message as it was at the call.
func testSendCopies(t *testing.T, e *env) {
	got := make(chan wire.Message, ownershipMessages)
	ln, _ := e.listen(func(_ transport.Conn, m wire.Message) { got <- m })
	c, _, _ := e.dial(ln.Addr(), nil)
	buf := make([]byte, 96<<10)
	data := make([][]byte, 2)
	tasks := make([]wire.Task, 2)
	for i := range ownershipMessages {
		var m wire.Message
		if i%2 == 0 {
			b := buf[:size(i)]
			copy(b, Pattern(i, len(b)))
			data[0], data[1] = b, b[:1]
			m = &wire.ReadReply{Seq: uint64(i), Data: data}
		} else {
			tasks[0] = wire.Task{ID: uint64(i), Model: 1, Deadline: 1, Input: wire.InputRef{Region: 1, Key: uint64(i), Length: 8}}
			tasks[1] = tasks[0]
			tasks[1].ID++
			m = &wire.Submit{Tasks: tasks}
		}
		if err := c.Send(m); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
		scribble(buf)
		data[0], data[1] = nil, buf
		tasks[0], tasks[1] = wire.Task{ID: 1 << 40}, wire.Task{ID: 1 << 41}
	}
	for i := range ownershipMessages {
		m := receive(t, got)
		if err := sentAsCalled(i, m); err != "" {
			t.Fatalf("message %d changed after Send returned: %s", i, err)
		}
	}
}

// sentAsCalled checks that m is message i of testSendCopies as it was
// when sent, and says how it differs if not.
func sentAsCalled(i int, m wire.Message) string {
	if i%2 == 0 {
		r, ok := m.(*wire.ReadReply)
		switch {
		case !ok || r.Seq != uint64(i) || len(r.Data) != 2:
			return "not the ReadReply sent"
		case !bytes.Equal(r.Data[0], Pattern(i, size(i))) || !bytes.Equal(r.Data[1], Pattern(i, 1)):
			return "its bytes are not those of the call"
		}
		return ""
	}
	s, ok := m.(*wire.Submit)
	if !ok || len(s.Tasks) != 2 || s.Tasks[0].ID != uint64(i) || s.Tasks[1].ID != uint64(i)+1 || s.Tasks[0].Input.Key != uint64(i) {
		return "its tasks are not those of the call"
	}
	return ""
}

// testReceivedKept keeps every message the handler is given, and checks
// them only once all have arrived: none may have been changed by the
// delivery of the later ones. A reader that decoded into a buffer it
// reuses fails it, and under the race detector one that only reuses it
// racily fails it too.
func testReceivedKept(t *testing.T, e *env) {
	kept := make(chan *wire.ReadReply, ownershipMessages)
	ln, _ := e.listen(func(_ transport.Conn, m wire.Message) {
		if r, ok := m.(*wire.ReadReply); ok {
			kept <- r // kept by the test after OnMessage returns
		}
	})
	c, _, _ := e.dial(ln.Addr(), nil)
	for i := range ownershipMessages {
		if err := c.Send(&wire.ReadReply{Seq: uint64(i), Data: [][]byte{Pattern(i, size(i))}}); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
	}
	all := make([]*wire.ReadReply, 0, ownershipMessages)
	for range ownershipMessages {
		all = append(all, receive(t, kept))
	}
	for i, r := range all {
		if r.Seq != uint64(i) || len(r.Data) != 1 || !bytes.Equal(r.Data[0], Pattern(i, size(i))) {
			t.Fatalf("message %d changed after its OnMessage returned (seq %d)", i, r.Seq)
		}
	}
}

// receive returns the next value from ch, waiting up to Wait.
func receive[M any](t *testing.T, ch <-chan M) M {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(Wait):
		t.Fatalf("nothing received within %v", Wait)
		var zero M
		return zero
	}
}

package transporttest

import (
	"bytes"
	"testing"

	"github.com/symphony-serving/symphony/transport/wire"
)

// A RecordingConn keeps the Send contract: what it recorded is the message
// as it was at the call, whatever the caller did with it afterwards.
func TestRecordingConnKeepsCopies(t *testing.T) {
	c := &RecordingConn{Remote: "peer"}
	buf := Pattern(1, 64)
	m := &wire.ReadReply{Seq: 3, Data: [][]byte{buf}}
	if err := c.Send(m); err != nil {
		t.Fatal(err)
	}
	scribble(buf)
	m.Seq = 4
	got := c.Take()
	if len(got) != 1 {
		t.Fatalf("recorded %d messages, want 1", len(got))
	}
	if r, ok := got[0].(*wire.ReadReply); !ok || r.Seq != 3 || !bytes.Equal(r.Data[0], Pattern(1, 64)) {
		t.Errorf("recorded %+v: changed with the sender's message", got[0])
	}
	if len(c.Take()) != 0 {
		t.Error("Take returned the messages twice")
	}
}

package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/transport/tcp"
	"github.com/symphony-serving/symphony/transport/wire"
)

// Garbage, truncated frames and 1 GiB length prefixes sent to every
// listener of a running cluster (the scheduler's, and the frontend's data
// address) close those connections only: the cluster keeps serving.
func TestHostileBytesAtEveryListener(t *testing.T) {
	c := startCluster(t, testConfig(tcp.New(tcp.Default()), "127.0.0.1:0", 1, 2))
	f := c.Frontends[0]
	hello := wire.AppendFrame(nil, &wire.Hello{Version: wire.Version, Role: wire.RolePuller, Name: "x"})
	gib := make([]byte, wire.HeaderSize)
	binary.BigEndian.PutUint32(gib, 1<<30)
	gib[4] = byte(wire.KindSubmit)
	badBody := append([]byte(nil), hello...)
	badBody = append(badBody, 0, 0, 0, 3, byte(wire.KindSubmit), 0xc1, 0xc1)
	attacks := map[string][]byte{
		"garbage":           bytes.Repeat([]byte("\xde\xad\xbe\xef not a frame "), 64),
		"truncated hello":   hello[:len(hello)-3],
		"1 GiB length":      gib,
		"1 GiB after hello": append(append([]byte(nil), hello...), gib...),
		"undecodable body":  badBody,
		"wrong version":     wire.AppendFrame(nil, &wire.Hello{Version: wire.Version + 1, Role: wire.RoleFrontend, Name: "x", DataAddr: "y"}),
	}
	for _, addr := range []string{c.Scheduler.Addr(), f.DataAddr()} {
		for name, b := range attacks {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatalf("%s: %v", addr, err)
			}
			if _, err := conn.Write(b); err != nil {
				t.Fatalf("%s %s: write: %v", addr, name, err)
			}
			if name == "truncated hello" {
				_ = conn.(*net.TCPConn).CloseWrite()
			}
			// The server must close the connection (after a Reject, for a
			// wrong version), not hang or crash.
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.Copy(io.Discard, conn); err != nil {
				t.Errorf("%s %s: connection not closed by the server: %v", addr, name, err)
			}
			conn.Close()
		}
	}
	// Still serving, end to end.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < 10; i++ {
		if _, err := f.Infer(ctx, "fast", input(i)); err != nil {
			t.Fatalf("after the attacks: %v", err)
		}
	}
}

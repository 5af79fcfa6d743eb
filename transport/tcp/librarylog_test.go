package tcp

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestLibraryLogLinesBecomeRecords(t *testing.T) {
	var fallback, out bytes.Buffer
	l := &LibraryLog{Fallback: &fallback}
	in := "2026/11/27 22:58:35 NETPOLL: readall(fd=15)=4 before close: connection reset by peer\n"
	if n, err := l.Write([]byte(in)); n != len(in) || err != nil || fallback.String() != in {
		t.Fatalf("before a logger: Write = %d, %v, fallback %q; want the line as it came", n, err, fallback.String())
	}
	l.SetLogger(zerolog.New(&out))
	if n, err := l.Write([]byte(in)); n != len(in) || err != nil {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(in))
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d records for one line: %q", len(lines), out.String())
	}
	var rec struct{ Level, Library, Message string }
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatalf("record %q: %v", lines[0], err)
	}
	if rec.Level != "warn" || rec.Library != "netpoll" || rec.Message != "NETPOLL: readall(fd=15)=4 before close: connection reset by peer" {
		t.Errorf("record %+v", rec)
	}
}

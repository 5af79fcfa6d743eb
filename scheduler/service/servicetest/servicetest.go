// Package servicetest plays frontends and backends against a scheduler
// service by hand, over a transporttest.Network: a test connects them to
// the scheduler's address, sends the wire messages a frontend or backend
// would (Submit, BackendReady, GPUFree, Heartbeat, Leaving) and reads what
// the scheduler sends back (Welcome, Plan, Ended, LeaveOK, Retire), in
// order, on the connection's queue. Nothing here starts a goroutine or
// sleeps: a Send returns once the scheduler has handled the message, and
// every read waits on a channel, bounded by transporttest.Wait.
//
// It speaks only the wire protocol, not the service's Go API, so that the
// service's own tests (package service) can use it as well as tests of
// what runs the service.
package servicetest

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/transporttest"
	"github.com/symphony-serving/symphony/transport/wire"
)

// Frontend is a frontend's connection to the scheduler, played by a test.
type Frontend struct {
	*transporttest.Peer
	Name    string
	Welcome *wire.Welcome
	// ID is the frontend ID the scheduler gave it (Welcome.ID), which its
	// tasks carry in plans.
	ID uint32
}

// Backend is a backend's connection to the scheduler, played by a test.
type Backend struct {
	*transporttest.Peer
	Name    string
	Welcome *wire.Welcome
	// FirstGPU is the cluster-wide ID of its first GPU (Welcome.ID); its
	// GPUs are FirstGPU..FirstGPU+GPUs-1.
	FirstGPU uint32
	GPUs     int
}

// FrontendHello is the Hello of a frontend called name.
func FrontendHello(name string) *wire.Hello {
	return &wire.Hello{Version: wire.Version, Role: wire.RoleFrontend, Name: name, DataAddr: name + ":data"}
}

// BackendHello is the Hello of a backend called name with gpus GPUs.
func BackendHello(name string, gpus int) *wire.Hello {
	return &wire.Hello{Version: wire.Version, Role: wire.RoleBackend, Name: name, GPUs: uint32(gpus)}
}

// ConnectFrontend connects a frontend called name to the scheduler at
// addr; it fails tb if the scheduler refuses it.
func ConnectFrontend(tb testing.TB, n *transporttest.Network, addr, name string) *Frontend {
	tb.Helper()
	p, w := connect(tb, n, addr, FrontendHello(name))
	return &Frontend{Peer: p, Name: name, Welcome: w, ID: w.ID}
}

// ConnectBackend connects a backend called name with gpus GPUs to the
// scheduler at addr; it fails tb if the scheduler refuses it. Its GPUs
// are not granted before Ready.
func ConnectBackend(tb testing.TB, n *transporttest.Network, addr, name string, gpus int) *Backend {
	tb.Helper()
	p, w := connect(tb, n, addr, BackendHello(name, gpus))
	return &Backend{Peer: p, Name: name, Welcome: w, FirstGPU: w.ID, GPUs: gpus}
}

func connect(tb testing.TB, n *transporttest.Network, addr string, h *wire.Hello) (*transporttest.Peer, *wire.Welcome) {
	tb.Helper()
	p, w, err := n.Connect(addr, h)
	if err != nil {
		tb.Fatalf("%s %q: %v", h.Role, h.Name, err)
	}
	tb.Cleanup(p.Close)
	return p, w
}

// Refusal connects with hello and returns the scheduler's reason for
// refusing it; it fails tb if the scheduler welcomes it instead.
func Refusal(tb testing.TB, n *transporttest.Network, addr string, hello *wire.Hello) string {
	tb.Helper()
	p, _, err := n.Connect(addr, hello)
	var rej *transport.RejectedError
	if err == nil {
		p.Close()
		tb.Fatalf("%s %q welcomed, want refused", hello.Role, hello.Name)
	}
	if !errors.As(err, &rej) {
		tb.Fatalf("%s %q: %v, want a refusal", hello.Role, hello.Name, err)
	}
	return rej.Reason
}

// send sends m, failing tb if the connection is closed.
func send(tb testing.TB, p *transporttest.Peer, m wire.Message) {
	tb.Helper()
	if err := p.Send(m); err != nil {
		tb.Fatalf("send %v: %v", m.Kind(), err)
	}
}

// Task is a task of model with input key id (in region 1, 8 bytes) and a
// deadline in d from now, on the wall clock the scheduler uses.
func Task(id uint64, model uint32, d time.Duration) wire.Task {
	return wire.Task{ID: id, Model: model, Deadline: time.Now().Add(d).UnixNano(),
		Input: wire.InputRef{Region: 1, Offset: id * 8, Length: 8, Key: id}}
}

// Submit sends tasks in one Submit; it returns once the scheduler has
// queued them (or ended them).
func (f *Frontend) Submit(tb testing.TB, tasks ...wire.Task) {
	tb.Helper()
	send(tb, f.Peer, &wire.Submit{Tasks: tasks})
}

// Ends reads Ended messages until they have brought n ends, and returns
// them by task ID; a task ended twice, or any other message, fails tb.
func (f *Frontend) Ends(tb testing.TB, n int) map[uint64]wire.End {
	tb.Helper()
	out := make(map[uint64]wire.End, n)
	for len(out) < n {
		for _, e := range transporttest.Expect[*wire.Ended](tb, f.Peer).Ends {
			if prev, dup := out[e.ID]; dup {
				tb.Fatalf("task %d ended twice: %+v and %+v", e.ID, prev, e)
			}
			out[e.ID] = e
		}
	}
	if len(out) > n {
		tb.Fatalf("%d tasks ended, want %d: %+v", len(out), n, out)
	}
	return out
}

// Ready tells the scheduler the backend's models are loaded: its GPUs may
// be granted from now on.
func (b *Backend) Ready(tb testing.TB) {
	tb.Helper()
	send(tb, b.Peer, &wire.BackendReady{GPUs: uint32(b.GPUs)})
}

// Heartbeat tells the scheduler the backend is alive.
func (b *Backend) Heartbeat(tb testing.TB) {
	tb.Helper()
	send(tb, b.Peer, &wire.Heartbeat{})
}

// Leave says Leaving: the backend drains.
func (b *Backend) Leave(tb testing.TB) {
	tb.Helper()
	send(tb, b.Peer, &wire.Leaving{})
}

// Next returns the backend's next message other than FrontendUp and
// FrontendDown, which come whenever frontends join and leave.
func (b *Backend) Next(tb testing.TB) wire.Message {
	tb.Helper()
	for {
		m, err := b.Peer.Next()
		if err != nil {
			tb.Fatal(err)
		}
		switch m.(type) {
		case *wire.FrontendUp, *wire.FrontendDown:
			continue
		}
		return m
	}
}

// Plan returns the backend's next message, which must be a Plan (after
// any FrontendUp and FrontendDown).
func (b *Backend) Plan(tb testing.TB) *wire.Plan {
	tb.Helper()
	return Expect[*wire.Plan](tb, b)
}

// Expect returns the backend's next message other than FrontendUp and
// FrontendDown, which must be an M.
func Expect[M wire.Message](tb testing.TB, b *Backend) M {
	tb.Helper()
	m := b.Next(tb)
	got, ok := m.(M)
	if !ok {
		var want M
		tb.Fatalf("backend %s got %v %+v, want %v", b.Name, m.Kind(), m, want.Kind())
	}
	return got
}

// Ran reports that p ran, with all its tasks, from start to finish
// (Unix ns); the results themselves would go to the frontends.
func (b *Backend) Ran(tb testing.TB, p *wire.Plan, start, finish int64) {
	tb.Helper()
	send(tb, b.Peer, &wire.GPUFree{GPU: p.GPU, Plan: p.ID, StartedAt: start, FinishedAt: finish, Ran: uint32(len(p.Tasks))})
}

// Log is a zerolog destination that a test waits on: give the service
// zerolog.New(log) and Await the line an event of interest writes, the
// only sign of some of the service's internal steps.
type Log struct {
	mu    sync.Mutex
	lines []string
	kick  chan struct{}
}

// NewLog returns an empty Log.
func NewLog() *Log { return &Log{kick: make(chan struct{}, 1)} }

// Write keeps one log line.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.lines = append(l.lines, string(bytes.TrimSpace(p)))
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
	return len(p), nil
}

// Await waits for a line containing text, written since the last line an
// Await returned, and returns it (call it from one goroutine at a time).
func (l *Log) Await(tb testing.TB, text string) string {
	tb.Helper()
	timeout := time.After(transporttest.Wait)
	for seen := 0; ; {
		l.mu.Lock()
		for ; seen < len(l.lines); seen++ {
			if strings.Contains(l.lines[seen], text) {
				line := l.lines[seen]
				l.lines = l.lines[seen+1:]
				l.mu.Unlock()
				return line
			}
		}
		l.mu.Unlock()
		select {
		case <-l.kick:
		case <-timeout:
			tb.Fatalf("no log line with %q within %v", text, transporttest.Wait)
		}
	}
}

// String returns every line kept, for a failure's message.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

package inproc

import (
	"testing"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/transporttest"
	"github.com/symphony-serving/symphony/transport/wire"
)

func TestConformance(t *testing.T) {
	transporttest.Run(t, func(*testing.T) transport.Network { return New() })
}

func TestAddresses(t *testing.T) {
	n := New()
	accept := func(transport.Conn, *wire.Hello) (*wire.Welcome, transport.Handler, error) { return nil, nil, nil }
	a, err := n.Listen("", accept)
	if err != nil {
		t.Fatal(err)
	}
	b, err := n.Listen(":0", accept)
	if err != nil {
		t.Fatal(err)
	}
	if a.Addr() == b.Addr() {
		t.Errorf("two automatic addresses are both %q", a.Addr())
	}
	if _, err := n.Listen("inproc://sched", accept); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Listen("inproc://sched", accept); err == nil {
		t.Error("listened twice on one address")
	}
	if _, err := New().Listen("inproc://sched", accept); err != nil {
		t.Errorf("networks share addresses: %v", err)
	}
}

package tcp

import (
	"testing"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/transporttest"
)

func TestConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T) transport.Network {
		n := New(Options{})
		t.Cleanup(n.Close)
		return n
	})
}

func TestOptions(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default: %v", err)
	}
	bad := Default()
	bad.MaxQueue = bad.MaxFrame
	if bad.Validate() == nil {
		t.Error("a queue smaller than a frame validated")
	}
	bad = Default()
	bad.HandshakeTimeout = -1
	if bad.Validate() == nil {
		t.Error("a negative handshake timeout validated")
	}
}

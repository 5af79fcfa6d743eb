package wire_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/symphony-serving/symphony/transport/wire"
)

// Bad model-control bodies give errors that name the message and field.
func TestControlDecodeErrors(t *testing.T) {
	states := func(n int, state uint8) []byte {
		var buf bytes.Buffer
		e := msgpack.NewEncoder(&buf)
		_ = e.EncodeArrayLen(1)
		_ = e.EncodeArrayLen(n)
		for i := 0; i < n; i++ {
			_ = e.EncodeArrayLen(3)
			_ = e.EncodeUint32(uint32(i))
			_ = e.EncodeUint8(state)
			_ = e.EncodeString("")
		}
		return buf.Bytes()
	}
	long := strings.Repeat("x", wire.MaxReason+1)
	for _, tc := range []struct {
		name string
		kind wire.Kind
		body []byte
		err  string
	}{
		{"op 0", wire.KindControl, wire.Marshal(&wire.Control{Seq: 1}), "invalid Control message: op: unknown 0"},
		{"op past the end", wire.KindControl, wire.Marshal(&wire.Control{Op: 9}), "op: unknown 9"},
		{"short control", wire.KindControl, []byte{0x92, 0x01, 0x01}, "2 fields, want 3"},
		{"long error", wire.KindControlDone, wire.Marshal(&wire.ControlDone{Error: long}), "limit 1024"},
		{"state 0", wire.KindModelStates, states(1, 0), "states[0].state: unknown 0"},
		{"state past the end", wire.KindModelStates, states(2, 5), "states[0].state: unknown 5"},
		{"too many states", wire.KindModelStates, states(wire.MaxModels+1, 1), "limit 4096"},
		{"welcome state 0", wire.KindWelcome, wire.Marshal(&wire.Welcome{States: []wire.ModelStatus{{Model: 1}}}), "invalid Welcome message: states[0].state"},
	} {
		if _, err := wire.Decode(tc.kind, tc.body); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
		}
	}
}

// A Welcome from a listener that predates model control (five fields)
// decodes with no States: every model READY.
func TestWelcomeWithoutStates(t *testing.T) {
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	_ = e.EncodeArrayLen(5)
	_ = e.EncodeUint32(wire.Version)
	_ = e.EncodeUint32(3)
	_ = e.EncodeArrayLen(0)
	_ = e.EncodeArrayLen(0)
	_ = e.EncodeUint32(wire.FeatureRDMA)
	m, err := wire.Decode(wire.KindWelcome, buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if w := m.(*wire.Welcome); w.Features != wire.FeatureRDMA || w.States != nil {
		t.Fatalf("five-field Welcome decoded as %+v, want RDMA and no states", w)
	}
}

func TestModelStateNames(t *testing.T) {
	for s, want := range map[wire.ModelState]string{wire.ModelReady: "READY", wire.ModelUnavailable: "UNAVAILABLE",
		wire.ModelLoading: "LOADING", wire.ModelUnloading: "UNLOADING", 0: "ModelState(0)"} {
		if s.String() != want {
			t.Errorf("%d.String() = %q, want %q", s, s, want)
		}
	}
	if wire.ModelUnavailable.Loaded() || !wire.ModelUnloading.Loaded() {
		t.Error("Loaded: only UNAVAILABLE models hold no session")
	}
}

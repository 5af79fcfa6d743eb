package wire_test

import (
	"math"
	"reflect"
	"testing"

	"github.com/symphony-serving/symphony/transport/wire"
)

// FuzzDecode decodes arbitrary bodies of arbitrary kinds. Decode must not
// panic; what it accepts must survive AppendFrame and Decode unchanged.
func FuzzDecode(f *testing.F) {
	for _, m := range samples() {
		f.Add(byte(m.Kind()), wire.Marshal(m))
	}
	for _, fields := range []int{4, 6, 8, 9} { // ModelSpecs of every version
		f.Add(byte(wire.KindWelcome), oldWelcome(fields, 1<<30, 1<<20))
	}
	f.Add(byte(wire.KindWelcome), oldWelcome(8, -1, 0))
	f.Add(byte(0), []byte{})
	f.Add(byte(wire.KindSubmit), []byte{0x91, 0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, kind byte, body []byte) {
		m, err := wire.Decode(wire.Kind(kind), body)
		if err != nil {
			return
		}
		if m.Kind() != wire.Kind(kind) {
			t.Fatalf("decoded a %v from a %v frame", m.Kind(), wire.Kind(kind))
		}
		frame := wire.AppendFrame(nil, m)
		k, n, err := wire.ParseHeader(frame, math.MaxUint32)
		if err != nil || k != m.Kind() || n != len(frame)-wire.HeaderSize {
			t.Fatalf("re-encoded header: %v, %d, %v", k, n, err)
		}
		again, err := wire.Decode(k, frame[wire.HeaderSize:])
		if err != nil {
			t.Fatalf("re-encoded %+v does not decode: %v", m, err)
		}
		if !reflect.DeepEqual(m, again) {
			t.Fatalf("round trip changed %+v into %+v", m, again)
		}
	})
}

// FuzzFrames reads a byte stream as a connection does: header, then body,
// until a frame is refused or the bytes run out. Nothing may panic.
func FuzzFrames(f *testing.F) {
	const max = 512
	var all []byte
	for _, m := range samples() {
		frame := wire.AppendFrame(nil, m)
		all = append(all, frame...)
		f.Add(frame)
		f.Add(frame[:len(frame)/2])
	}
	f.Add(all)
	f.Add([]byte{0x40, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, stream []byte) {
		for len(stream) >= wire.HeaderSize {
			k, n, err := wire.ParseHeader(stream, max)
			if err != nil {
				return
			}
			if n >= max {
				t.Fatalf("ParseHeader allowed a body of %d bytes under a limit of %d", n, max)
			}
			if len(stream) < wire.HeaderSize+n {
				return // truncated: a connection would wait for more
			}
			if m, err := wire.Decode(k, stream[wire.HeaderSize:wire.HeaderSize+n]); err == nil && m.Kind() != k {
				t.Fatalf("a %v frame decoded as %v", k, m.Kind())
			}
			stream = stream[wire.HeaderSize+n:]
		}
	})
}

package rdma

import (
	"errors"
	"strings"
	"testing"

	"github.com/symphony-serving/symphony/transport/wire"
)

func TestSlotHeader(t *testing.T) {
	const seal = 0x1234_5678_9abc_def1
	ref := wire.InputRef{Region: 2, Offset: 64 + HeaderSize, Length: 1000, Key: 42}
	h := make([]byte, HeaderSize)
	for _, st := range []SlotState{SlotPending, SlotReady, SlotPreprocessed, SlotFailed} {
		PutHeader(h, seal, ref.Key, ref.Length, st)
		if got, err := CheckHeader(h, seal, ref); err != nil || got != st {
			t.Errorf("%v: read back %v, %v", st, got, err)
		}
	}
	PutHeader(h, seal, ref.Key, ref.Length, SlotReady)
	for _, tc := range []struct {
		name string
		h    func() []byte
		seal uint64
		ref  wire.InputRef
		want string
	}{
		{"another key", func() []byte { return h }, seal, wire.InputRef{Key: 43, Length: 1000}, "holds input 42"},
		{"another length", func() []byte { return h }, seal, wire.InputRef{Key: 42, Length: 999}, "holds 1000 bytes, not 999"},
		{"another store's seal", func() []byte { return h }, seal + 1, ref, "not sealed by this store"},
		{"released", func() []byte { c := append([]byte(nil), h...); ClearHeader(c); return c }, seal, ref, "released"},
		{"a flipped bit", func() []byte { c := append([]byte(nil), h...); c[9] ^= 1; return c }, seal, ref, "not sealed"},
		{"user bytes", func() []byte { return []byte("an input that is not a header") }, seal, ref, "holds input"},
		{"short", func() []byte { return h[:10] }, seal, ref, "10 header bytes"},
	} {
		_, err := CheckHeader(tc.h(), tc.seal, tc.ref)
		var se *SlotError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if SlotSize(0) != 24 || SlotSize(1) != 32 || SlotSize(8) != 32 || SlotSize(9) != 40 {
		t.Errorf("slot sizes %d %d %d %d", SlotSize(0), SlotSize(1), SlotSize(8), SlotSize(9))
	}
}

// The remote address and length of a READ, and every way a ref can point
// outside its region.
func TestReadSpan(t *testing.T) {
	rg := wire.RDMARegion{ID: 3, Addr: 0x7f00_0000_0000, Length: 4096, RKey: 9}
	addr, n, err := readSpan(rg, wire.InputRef{Region: 3, Offset: 100, Length: 50})
	if err != nil || addr != rg.Addr+100-HeaderSize || n != 50+HeaderSize {
		t.Fatalf("span = %#x %d %v", addr, n, err)
	}
	if _, n, err := readSpan(rg, wire.InputRef{Region: 3, Offset: 4096, Length: 0}); err != nil || n != HeaderSize {
		t.Fatalf("empty input at the end: %d %v", n, err)
	}
	for _, ref := range []wire.InputRef{
		{Region: 4, Offset: 100, Length: 1},               // another region
		{Region: 3, Offset: 10, Length: 1},                // no room for the header
		{Region: 3, Offset: 4000, Length: 97},             // past the end
		{Region: 3, Offset: 1 << 63, Length: 1},           // far past it
		{Region: 3, Offset: 1<<64 - 1, Length: 1<<32 - 1}, // wraps
	} {
		if _, _, err := readSpan(rg, ref); err == nil {
			t.Errorf("%+v accepted", ref)
		}
	}
}

func TestPickGID(t *testing.T) {
	linkLocal := [16]byte{0: 0xfe, 1: 0x80, 15: 1}
	v4 := [16]byte{10: 0xff, 11: 0xff, 12: 192, 13: 168, 15: 7}
	for _, tc := range []struct {
		gids  [][16]byte
		types []string
		want  int
	}{
		{[][16]byte{linkLocal, v4}, []string{"RoCE v2", "RoCE v2"}, 1},
		{[][16]byte{linkLocal, v4}, []string{"IB/RoCE v1", "IB/RoCE v1"}, 0},
		{[][16]byte{{}, linkLocal}, []string{"", "RoCE v2"}, 1},
		{[][16]byte{linkLocal, v4, v4}, []string{"RoCE v2", "IB/RoCE v1", "RoCE v2"}, 2},
		{[][16]byte{{}, {}}, nil, -1},
	} {
		if got := pickGID(tc.gids, tc.types); got != tc.want {
			t.Errorf("pickGID(%v) = %d, want %d", tc.types, got, tc.want)
		}
	}
}

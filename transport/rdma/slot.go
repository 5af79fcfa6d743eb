package rdma

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/symphony-serving/symphony/transport/wire"
)

// A frontend store that backends READ holds each input in a slot: a
// HeaderSize-byte header, then the input's bytes at InputRef.Offset. Slots
// start on SlotAlign boundaries, so the header's three little-endian words
// are aligned:
//
//	word 0  key    the request's key (InputRef.Key)
//	word 1  meta   length (bits 0-31) | state (bits 32-39) | slotMagic (bits 40-63)
//	word 2  check  a function of the store's seal, key and meta
//
// A backend READs header and input in one READ and accepts the bytes only
// if the header names its key and length, is in a readable state and
// carries the check that only the seal (sent to backends in RDMAAccept,
// never to the store's callers) produces. A released slot's header is
// zeroed (SlotFree) before its space can be reused; see the package
// documentation for why that, the reuse delay and the acceptance window
// keep a READ from returning another request's bytes.
const (
	HeaderSize = 24
	SlotAlign  = 8
	slotMagic  = 0x53594d // "SYM"
)

// SlotState is where a slot's input is in its life.
type SlotState uint8

const (
	// SlotFree: nothing lives here (zeroed header, a released input).
	SlotFree SlotState = iota
	// SlotPending: reserved; preprocessing is still writing the input.
	SlotPending
	// SlotReady: written in full before its task was sent anywhere.
	SlotReady
	// SlotPreprocessed: written by preprocessing after its task was sent;
	// a backend must READ it once more after seeing this state.
	SlotPreprocessed
	// SlotFailed: preprocessing failed; there is no input.
	SlotFailed
	slotStateEnd
)

var slotStateNames = [...]string{"free", "pending", "ready", "preprocessed", "failed"}

func (s SlotState) String() string {
	if s < slotStateEnd {
		return slotStateNames[s]
	}
	return fmt.Sprintf("SlotState(%d)", uint8(s))
}

// SlotSize is the bytes a slot of an n-byte input takes.
func SlotSize(n int) int { return (HeaderSize + n + SlotAlign - 1) / SlotAlign * SlotAlign }

func slotCheck(seal, key, meta uint64) uint64 {
	return seal ^ key*0x9e3779b97f4a7c15 ^ bits.RotateLeft64(meta, 29)
}

// PutHeader writes a slot header into h (at least HeaderSize bytes).
func PutHeader(h []byte, seal, key uint64, length uint32, st SlotState) {
	meta := uint64(length) | uint64(st)<<32 | slotMagic<<40
	binary.LittleEndian.PutUint64(h[0:], key)
	binary.LittleEndian.PutUint64(h[8:], meta)
	binary.LittleEndian.PutUint64(h[16:], slotCheck(seal, key, meta))
}

// ClearHeader zeroes a slot header: the slot holds nothing.
func ClearHeader(h []byte) { clear(h[:HeaderSize]) }

// SlotError says why a slot's header does not hold the input a READ was
// for. A backend then asks the frontend over TCP, which answers for sure.
type SlotError struct {
	Key    uint64
	Reason string
}

func (e *SlotError) Error() string {
	return fmt.Sprintf("rdma: slot of input %d: %s", e.Key, e.Reason)
}

// CheckHeader checks the header h of the slot ref names, as read: it
// returns the slot's state if the header is ref's (key, length and check),
// or a *SlotError.
func CheckHeader(h []byte, seal uint64, ref wire.InputRef) (SlotState, error) {
	if len(h) < HeaderSize {
		return 0, &SlotError{ref.Key, fmt.Sprintf("%d header bytes", len(h))}
	}
	key := binary.LittleEndian.Uint64(h[0:])
	meta := binary.LittleEndian.Uint64(h[8:])
	check := binary.LittleEndian.Uint64(h[16:])
	st := SlotState(meta >> 32)
	switch {
	case key == 0 && meta == 0 && check == 0:
		return SlotFree, &SlotError{ref.Key, "released"}
	case key != ref.Key:
		return 0, &SlotError{ref.Key, fmt.Sprintf("holds input %d", key)}
	case meta>>40 != slotMagic || check != slotCheck(seal, key, meta):
		return 0, &SlotError{ref.Key, "header not sealed by this store"}
	case uint32(meta) != ref.Length:
		return 0, &SlotError{ref.Key, fmt.Sprintf("holds %d bytes, not %d", uint32(meta), ref.Length)}
	case st == SlotFree || st >= slotStateEnd:
		return 0, &SlotError{ref.Key, fmt.Sprintf("bad state %v", st)}
	}
	return st, nil
}

// readSpan is the READ of the slot ref names in region r: its remote
// address and length (header and input), or an error if the slot does not
// lie inside the region.
func readSpan(r wire.RDMARegion, ref wire.InputRef) (addr uint64, n uint32, err error) {
	switch {
	case ref.Region != r.ID:
		return 0, 0, fmt.Errorf("rdma: input in region %d, not %d", ref.Region, r.ID)
	case ref.Offset < HeaderSize:
		return 0, 0, fmt.Errorf("rdma: input at offset %d leaves no room for its slot header", ref.Offset)
	case ref.Offset > r.Length || uint64(ref.Length) > r.Length-ref.Offset:
		return 0, 0, fmt.Errorf("rdma: input of %d bytes at offset %d outside region %d of %d bytes", ref.Length, ref.Offset, r.ID, r.Length)
	case uint64(ref.Length) > 1<<32-1-HeaderSize:
		return 0, 0, fmt.Errorf("rdma: input of %d bytes too long for one READ", ref.Length)
	}
	return r.Addr + ref.Offset - HeaderSize, HeaderSize + ref.Length, nil
}

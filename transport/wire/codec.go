package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// HeaderSize is the size of a frame header: a 4-byte big-endian length of
// what follows it (the kind byte and the body), then the kind byte.
const HeaderSize = 5

// DefaultMaxFrame is the largest frame a connection accepts by default. A
// batch of 64 inputs of 1 MiB each fits; a hostile 1 GiB length does not.
const DefaultMaxFrame = 96 << 20

// ErrFrameTooLarge is returned for a frame longer than the connection's
// limit. The connection must be closed: what follows cannot be parsed.
var ErrFrameTooLarge = errors.New("wire: frame too large")

// ParseHeader reads a frame header and returns the message kind and the
// body's length. It rejects empty frames and frames over max before anything
// is allocated for them.
func ParseHeader(h []byte, max int) (Kind, int, error) {
	if len(h) < HeaderSize {
		return 0, 0, fmt.Errorf("wire: short frame header (%d bytes)", len(h))
	}
	n := binary.BigEndian.Uint32(h)
	if n == 0 {
		return 0, 0, errors.New("wire: empty frame")
	}
	if uint64(n) > uint64(max) {
		return 0, 0, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, max)
	}
	k := Kind(h[4])
	if !k.Known() {
		return 0, 0, fmt.Errorf("wire: unknown message kind %d", h[4])
	}
	return k, int(n) - 1, nil
}

// AppendFrame appends m as one frame (header and body) to dst.
func AppendFrame(dst []byte, m Message) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, byte(m.Kind()))
	w := bytes.NewBuffer(dst)
	e := msgpack.GetEncoder()
	e.Reset(w)
	// Encoding into a bytes.Buffer cannot fail.
	_ = m.encode(e)
	msgpack.PutEncoder(e)
	dst = w.Bytes()
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// Decode decodes and validates the body of a frame of kind k. It never
// panics on hostile input: every error names the message and the field.
func Decode(k Kind, body []byte) (Message, error) {
	m := k.new()
	if m == nil {
		return nil, fmt.Errorf("wire: unknown message kind %d", k)
	}
	r := bytes.NewReader(body)
	d := &decoder{r: r, d: msgpack.NewDecoder(r)}
	m.decode(d)
	if d.err == nil && r.Len() != 0 {
		d.err = fmt.Errorf("%d trailing bytes", r.Len())
	}
	if d.err != nil {
		return nil, fmt.Errorf("wire: bad %v message: %w", k, d.err)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("wire: invalid %v message: %w", k, err)
	}
	return m, nil
}

// Marshal returns m's body alone, without the frame header.
func Marshal(m Message) []byte { return AppendFrame(nil, m)[HeaderSize:] }

// Clone returns a deep copy of m, encoded and decoded as a connection
// carries it, so that it shares no memory with m. A transport.Conn that
// holds messages back instead of encoding them at once (a test double, a
// frozen connection of a fault scenario) keeps clones: its caller may
// reuse m once Send returns. An m that would not survive the wire fails
// here as the peer would refuse it.
func Clone(m Message) (Message, error) { return Decode(m.Kind(), Marshal(m)) }

// decoder reads msgpack values with a sticky error, and checks every
// declared length against the bytes left, so that a hostile length cannot
// make it allocate more than the frame holds.
type decoder struct {
	r   *bytes.Reader
	d   *msgpack.Decoder
	err error
}

func (d *decoder) fail(field string, err error) {
	if d.err == nil {
		d.err = fmt.Errorf("%s: %w", field, err)
	}
}

// fields reads a struct's array header: n fields are expected; older peers
// may send fewer (not allowed here) and newer ones more (skipped by rest).
func (d *decoder) fields(name string, want int) int {
	if d.err != nil {
		return 0
	}
	n, err := d.d.DecodeArrayLen()
	if err != nil {
		d.fail(name, err)
		return 0
	}
	if n < want {
		d.fail(name, fmt.Errorf("%d fields, want %d", n, want))
		return 0
	}
	if n > d.r.Len() {
		d.fail(name, fmt.Errorf("%d fields in %d bytes", n, d.r.Len()))
		return 0
	}
	return n
}

// rest skips the fields a newer peer added after the first want.
func (d *decoder) rest(name string, n, want int) {
	for i := want; i < n && d.err == nil; i++ {
		if err := d.skip(0); err != nil {
			d.fail(name, err)
		}
	}
}

// maxDepth bounds the nesting of skipped values.
const maxDepth = 32

// skip skips one value. msgpack's Skip recurses once per nesting level
// without a bound, so a few MB of nested one-element arrays would overflow
// the goroutine stack: a fatal error, not a recoverable panic.
func (d *decoder) skip(depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("nested deeper than %d", maxDepth)
	}
	c, err := d.d.PeekCode()
	if err != nil {
		return err
	}
	var n int
	switch {
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		n, err = d.d.DecodeArrayLen()
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		n, err = d.d.DecodeMapLen()
		n *= 2
	default:
		return d.d.Skip()
	}
	if err != nil {
		return err
	}
	if n > d.r.Len() {
		return fmt.Errorf("%d elements in %d bytes", n, d.r.Len())
	}
	for i := 0; i < n; i++ {
		if err := d.skip(depth + 1); err != nil {
			return err
		}
	}
	return nil
}

// list reads an array header whose elements each take at least one byte.
func (d *decoder) list(field string) int {
	if d.err != nil {
		return 0
	}
	n, err := d.d.DecodeArrayLen()
	if err != nil {
		d.fail(field, err)
		return 0
	}
	if n < 0 {
		return 0 // nil array
	}
	if n > d.r.Len() {
		d.fail(field, fmt.Errorf("%d elements in %d bytes", n, d.r.Len()))
		return 0
	}
	return n
}

func (d *decoder) u64(field string) uint64 {
	if d.err != nil {
		return 0
	}
	v, err := d.d.DecodeUint64()
	if err != nil {
		d.fail(field, err)
	}
	return v
}

func (d *decoder) i64(field string) int64 {
	if d.err != nil {
		return 0
	}
	v, err := d.d.DecodeInt64()
	if err != nil {
		d.fail(field, err)
	}
	return v
}

func (d *decoder) u32(field string) uint32 {
	v := d.u64(field)
	if v > 1<<32-1 {
		d.fail(field, fmt.Errorf("%d overflows 32 bits", v))
		return 0
	}
	return uint32(v)
}

func (d *decoder) u8(field string) uint8 {
	v := d.u64(field)
	if v > 255 {
		d.fail(field, fmt.Errorf("%d overflows 8 bits", v))
		return 0
	}
	return uint8(v)
}

func (d *decoder) str(field string, max int) string {
	if d.err != nil {
		return ""
	}
	// Check the declared length before reading (and allocating) it.
	n, err := d.d.DecodeBytesLen()
	if err != nil {
		d.fail(field, err)
		return ""
	}
	if n > max {
		d.fail(field, fmt.Errorf("%d bytes, limit %d", n, max))
		return ""
	}
	if n <= 0 {
		return ""
	}
	b := make([]byte, n)
	if err := d.d.ReadFull(b); err != nil {
		d.fail(field, err)
		return ""
	}
	return string(b)
}

// bytes reads a byte string, checking its declared length against the
// bytes left first: msgpack's DecodeBytes allocates the declared length
// before reading, 4 GiB for a 9-byte body.
func (d *decoder) bytes(field string) []byte {
	if d.err != nil {
		return nil
	}
	n, err := d.d.DecodeBytesLen()
	if err != nil {
		d.fail(field, err)
		return nil
	}
	if n < 0 {
		return nil
	}
	if n > d.r.Len() {
		d.fail(field, fmt.Errorf("%d bytes, %d left", n, d.r.Len()))
		return nil
	}
	b := make([]byte, n)
	if err := d.d.ReadFull(b); err != nil {
		d.fail(field, err)
		return nil
	}
	return b
}

package tensor

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// Number is the Go types a Tensor converts to and from: each is one KServe
// datatype (bool is BOOL, float32 FP32, and so on). FP16 and BF16 have no
// Go type; build their Data by hand.
type Number interface {
	bool | int8 | int16 | int32 | int64 | uint8 | uint16 | uint32 | uint64 | float32 | float64
}

// DatatypeOf is the KServe datatype of T's values.
func DatatypeOf[T Number]() string {
	var z T
	switch any(z).(type) {
	case bool:
		return "BOOL"
	case int8:
		return "INT8"
	case int16:
		return "INT16"
	case int32:
		return "INT32"
	case int64:
		return "INT64"
	case uint8:
		return "UINT8"
	case uint16:
		return "UINT16"
	case uint32:
		return "UINT32"
	case uint64:
		return "UINT64"
	case float32:
		return "FP32"
	}
	return "FP64" // float64, Number's last type
}

// Of is a tensor of the given name and shape holding values, of T's
// datatype. It does not check that shape holds len(values) elements;
// Pack does, against the model's spec.
func Of[T Number](name string, shape []int64, values []T) Tensor {
	dt := DatatypeOf[T]()
	size, _ := ElemSize(dt)
	data := make([]byte, 0, size*len(values))
	for _, v := range values {
		data = appendValue(data, v)
	}
	return Tensor{Name: name, Datatype: dt, Shape: slices.Clone(shape), Data: data}
}

// Values decodes a tensor's data as T's; the tensor's datatype must be T's
// and its bytes a whole number of elements.
func Values[T Number](t Tensor) ([]T, error) {
	dt := DatatypeOf[T]()
	if t.Datatype != dt {
		return nil, fmt.Errorf("tensor %q is %s, not %s", t.Name, t.Datatype, dt)
	}
	size, _ := ElemSize(dt)
	if len(t.Data)%size != 0 {
		return nil, fmt.Errorf("tensor %q: %d bytes are not a whole number of %d-byte %s elements", t.Name, len(t.Data), size, dt)
	}
	out := make([]T, len(t.Data)/size)
	for i := range out {
		v, ok := readValue[T](t.Data[i*size:])
		if !ok {
			return nil, fmt.Errorf("tensor %q: BOOL element %d is %d, neither 0 nor 1", t.Name, i, t.Data[i])
		}
		out[i] = v
	}
	return out, nil
}

// FP32 decodes an FP32 tensor's values.
func (t Tensor) FP32() ([]float32, error) { return Values[float32](t) }

// INT64 decodes an INT64 tensor's values.
func (t Tensor) INT64() ([]int64, error) { return Values[int64](t) }

// appendValue appends v's little-endian bytes.
func appendValue[T Number](dst []byte, v T) []byte {
	le := binary.LittleEndian
	switch x := any(v).(type) {
	case bool:
		if x {
			return append(dst, 1)
		}
		return append(dst, 0)
	case int8:
		return append(dst, byte(x))
	case uint8:
		return append(dst, x)
	case int16:
		return le.AppendUint16(dst, uint16(x))
	case uint16:
		return le.AppendUint16(dst, x)
	case int32:
		return le.AppendUint32(dst, uint32(x))
	case uint32:
		return le.AppendUint32(dst, x)
	case float32:
		return le.AppendUint32(dst, math.Float32bits(x))
	case int64:
		return le.AppendUint64(dst, uint64(x))
	case uint64:
		return le.AppendUint64(dst, x)
	case float64:
		return le.AppendUint64(dst, math.Float64bits(x))
	}
	return dst
}

// readValue reads one T from b's first bytes; ok is false for a BOOL byte
// other than 0 or 1.
func readValue[T Number](b []byte) (v T, ok bool) {
	le := binary.LittleEndian
	var r any
	switch any(v).(type) {
	case bool:
		if b[0] > 1 {
			return v, false
		}
		r = b[0] == 1
	case int8:
		r = int8(b[0])
	case uint8:
		r = b[0]
	case int16:
		r = int16(le.Uint16(b))
	case uint16:
		r = le.Uint16(b)
	case int32:
		r = int32(le.Uint32(b))
	case uint32:
		r = le.Uint32(b)
	case float32:
		r = math.Float32frombits(le.Uint32(b))
	case int64:
		r = int64(le.Uint64(b))
	case uint64:
		r = le.Uint64(b)
	case float64:
		r = math.Float64frombits(le.Uint64(b))
	}
	return r.(T), true
}

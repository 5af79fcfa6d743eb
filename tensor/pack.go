package tensor

import (
	"errors"
	"fmt"
	"slices"
)

// Tensor is one named tensor of a request or a result: Data is its raw
// bytes, little-endian and row-major, as the KServe binary tensor data
// extension lays them out (BOOL as one 0/1 byte an element).
type Tensor struct {
	Name     string
	Datatype string
	Shape    []int64
	Data     []byte
}

// The classes of mistake Pack and Split report. Each error wraps one of
// them (errors.Is) and names the tensor and what was wrong with it.
var (
	// ErrMissing: the model has an input the request did not give.
	ErrMissing = errors.New("missing tensor")
	// ErrUnknown: the request gave a tensor the model does not have, or
	// gave one twice.
	ErrUnknown = errors.New("unknown tensor")
	// ErrDatatype: a tensor's datatype is not the model's.
	ErrDatatype = errors.New("wrong datatype")
	// ErrShape: a tensor's shape is not the model's (with or without a
	// leading batch dimension of 1).
	ErrShape = errors.New("wrong shape")
	// ErrSize: a tensor's bytes are not what its shape and datatype need,
	// or a result's bytes are not what the model's outputs need.
	ErrSize = errors.New("wrong byte count")
)

// Pack checks inputs against a model's input specs and returns the
// request's bytes: each input's bytes in spec order. Each input's shape
// must be its spec's, or its spec's with a leading batch dimension of 1
// (KServe clients send the batch dimension a model's metadata lists);
// batched says which, and inputs must agree on it. With a single input
// the result is that input's Data itself, not a copy.
func Pack(specs []Spec, inputs []Tensor) (data []byte, batched bool, err error) {
	if len(specs) == 0 {
		return nil, false, errors.New("the model declares no input tensors")
	}
	order := make([]int, len(specs)) // order[i]: the input that fills specs[i], -1 for none
	for i := range order {
		order[i] = -1
	}
	for j := range inputs {
		in := &inputs[j]
		i := slices.IndexFunc(specs, func(s Spec) bool { return s.Name == in.Name })
		switch {
		case i < 0:
			return nil, false, fmt.Errorf("%w %q: the model's inputs are %q", ErrUnknown, in.Name, Names(specs))
		case order[i] >= 0:
			return nil, false, fmt.Errorf("%w: input %q appears twice", ErrUnknown, in.Name)
		}
		order[i] = j
	}
	total := 0
	for i, s := range specs {
		j := order[i]
		if j < 0 {
			return nil, false, fmt.Errorf("%w: input %q (%s %v) not given", ErrMissing, s.Name, s.Datatype, s.Shape)
		}
		b, err := check(s, &inputs[j])
		if err != nil {
			return nil, false, fmt.Errorf("input %w", err)
		}
		if i > 0 && b != batched {
			return nil, false, fmt.Errorf("%w: input %q has a leading batch dimension and input %q does not; give it on all inputs or none",
				ErrShape, specs[pick(b, i, 0)].Name, specs[pick(b, 0, i)].Name)
		}
		batched = b
		total += len(inputs[j].Data)
	}
	if len(specs) == 1 {
		return inputs[order[0]].Data, batched, nil
	}
	data = make([]byte, 0, total)
	for _, j := range order {
		data = append(data, inputs[j].Data...)
	}
	return data, batched, nil
}

func pick(c bool, a, b int) int {
	if c {
		return a
	}
	return b
}

// check checks one tensor against its spec, reporting whether its shape
// had the leading batch dimension.
func check(s Spec, t *Tensor) (batched bool, err error) {
	if t.Datatype != s.Datatype {
		return false, fmt.Errorf("%q: %w %s; the model takes %s", s.Name, ErrDatatype, t.Datatype, s.Datatype)
	}
	switch {
	case slices.Equal(t.Shape, s.Shape):
	case len(t.Shape) == len(s.Shape)+1 && t.Shape[0] == 1 && slices.Equal(t.Shape[1:], s.Shape):
		batched = true
	case len(t.Shape) == len(s.Shape)+1 && t.Shape[0] > 1 && slices.Equal(t.Shape[1:], s.Shape):
		return false, fmt.Errorf("%q: %w %v: a batch of %d, but a request is one sample (batch of 1)", s.Name, ErrShape, t.Shape, t.Shape[0])
	default:
		return false, fmt.Errorf("%q: %w %v; the model takes %v (or %v)", s.Name, ErrShape, t.Shape, s.Shape, append([]int64{1}, s.Shape...))
	}
	if int64(len(t.Data)) != s.Bytes() {
		return false, fmt.Errorf("%q: %w: %d bytes; %v of %s is %d", s.Name, ErrSize, len(t.Data), s.Shape, s.Datatype, s.Bytes())
	}
	return batched, nil
}

// Split cuts a result's bytes into the model's named outputs, in spec
// order, each of its spec's shape (with a leading batch dimension of 1 if
// batched). The tensors' Data are subslices of data, not copies.
func Split(specs []Spec, data []byte, batched bool) ([]Tensor, error) {
	if want := TotalBytes(specs); int64(len(data)) != want {
		return nil, fmt.Errorf("result: %w: %d bytes; the model's outputs %q take %d", ErrSize, len(data), Names(specs), want)
	}
	out := make([]Tensor, len(specs))
	off := int64(0)
	for i, s := range specs {
		shape := slices.Clone(s.Shape)
		if batched {
			shape = append([]int64{1}, shape...)
		}
		n := s.Bytes()
		out[i] = Tensor{Name: s.Name, Datatype: s.Datatype, Shape: shape, Data: data[off : off+n : off+n]}
		off += n
	}
	return out, nil
}

// Package tensor is the typed view of a request's bytes that every
// component shares: a model's named input and output tensors (Spec), their
// KServe v2 datatypes, and the one rule that turns named tensors into a
// request's opaque bytes and a result's bytes back into named tensors.
//
// Symphony moves each request as one byte slice. For a model whose tensors
// are known, that slice is each input's per-sample bytes (little-endian,
// row-major) concatenated in the model's input order, and a result is each
// output's per-sample bytes concatenated in output order. Pack and Split
// are that layout; the Go client and the KServe gateway both call them, so
// the layout and its checks are written once.
//
// The package imports nothing else of Symphony, so that the serving
// configuration, the wire protocol, the backends and the frontends can all
// name its types.
package tensor

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Limits on a model's tensors. They bound what a peer or a model file can
// make a reader allocate, far above any real model's signature.
const (
	// MaxTensors is the most inputs, or outputs, a model may have.
	MaxTensors = 256
	// MaxDims is the most dimensions a tensor may have (ONNX Runtime's own
	// kernels stop well short of it).
	MaxDims = 32
	// MaxName is the longest tensor name, in bytes.
	MaxName = 256
	// MaxSampleBytes bounds one sample of one tensor, and the sum over a
	// model's inputs or outputs: the largest request input the transport
	// carries (wire.MaxInputSize).
	MaxSampleBytes = 64 << 20
)

// The KServe v2 datatypes a Spec may have: those of fixed element size.
// BYTES, whose elements vary in size, has no per-sample byte count and so
// no place in Symphony's fixed layout.
var datatypes = map[string]int{
	"BOOL": 1, "UINT8": 1, "INT8": 1,
	"UINT16": 2, "INT16": 2, "FP16": 2, "BF16": 2,
	"UINT32": 4, "INT32": 4, "FP32": 4,
	"UINT64": 8, "INT64": 8, "FP64": 8,
}

// ElemSize is the byte size of one element of a KServe datatype; ok is
// false for BYTES and for names the protocol does not define.
func ElemSize(datatype string) (size int, ok bool) {
	size, ok = datatypes[datatype]
	return size, ok
}

// Spec is one named tensor of a model, as one request sees it: Shape is a
// single sample's, without the batch dimension Symphony adds when it
// batches requests, and every dimension is fixed.
type Spec struct {
	Name     string
	Datatype string // a KServe v2 datatype of fixed size (ElemSize)
	Shape    []int64
}

// String is the spec as a message names it: x FP32 [1 8 8].
func (s Spec) String() string { return fmt.Sprintf("%s %s %v", s.Name, s.Datatype, s.Shape) }

// Elements is the number of elements of one sample.
func (s Spec) Elements() int64 {
	n := int64(1)
	for _, d := range s.Shape {
		n *= d
	}
	return n
}

// Bytes is the byte size of one sample. It is meaningful for a spec that
// Validate accepted, which bounds it.
func (s Spec) Bytes() int64 {
	size, _ := ElemSize(s.Datatype)
	return s.Elements() * int64(size)
}

// Equal reports whether two specs say the same.
func (s Spec) Equal(o Spec) bool {
	return s.Name == o.Name && s.Datatype == o.Datatype && slices.Equal(s.Shape, o.Shape)
}

// Validate checks one spec: a name, a fixed-size datatype, fixed positive
// dimensions and a sample within MaxSampleBytes.
func (s Spec) Validate() error {
	switch {
	case s.Name == "":
		return errors.New("a tensor has no name")
	case len(s.Name) > MaxName:
		return fmt.Errorf("tensor name %.32q... is over %d bytes", s.Name, MaxName)
	case len(s.Shape) > MaxDims:
		return fmt.Errorf("tensor %q has %d dimensions, over %d", s.Name, len(s.Shape), MaxDims)
	}
	size, ok := ElemSize(s.Datatype)
	if !ok {
		if s.Datatype == "BYTES" {
			return fmt.Errorf("tensor %q is BYTES, whose elements vary in size; Symphony serves tensors of fixed-size elements", s.Name)
		}
		return fmt.Errorf("tensor %q has unknown datatype %q (want one of %s)", s.Name, s.Datatype, strings.Join(Datatypes(), ", "))
	}
	n := int64(size)
	for _, d := range s.Shape {
		if d <= 0 {
			return fmt.Errorf("tensor %q: shape %v has a dimension that is not fixed and positive; only the batch dimension may be dynamic", s.Name, s.Shape)
		}
		if d > MaxSampleBytes/n {
			return fmt.Errorf("tensor %q: shape %v of %s is over %d bytes a sample", s.Name, s.Shape, s.Datatype, MaxSampleBytes)
		}
		n *= d
	}
	return nil
}

// Datatypes lists the datatypes a Spec may have, sorted.
func Datatypes() []string {
	out := make([]string, 0, len(datatypes))
	for dt := range datatypes {
		out = append(out, dt)
	}
	slices.Sort(out)
	return out
}

// ValidateSpecs checks a model's inputs or outputs (what names them: "input"
// or "output"): each spec, distinct names, at most MaxTensors, and a total
// sample within MaxSampleBytes.
func ValidateSpecs(what string, specs []Spec) error {
	if len(specs) > MaxTensors {
		return fmt.Errorf("%d %ss, over %d", len(specs), what, MaxTensors)
	}
	total := int64(0)
	for i, s := range specs {
		if err := s.Validate(); err != nil {
			return fmt.Errorf("%s %d: %w", what, i, err)
		}
		for _, o := range specs[:i] {
			if o.Name == s.Name {
				return fmt.Errorf("%s %q appears twice", what, s.Name)
			}
		}
		if total += s.Bytes(); total > MaxSampleBytes {
			return fmt.Errorf("the %ss take over %d bytes a sample", what, MaxSampleBytes)
		}
	}
	return nil
}

// TotalBytes is the byte size of one sample of every spec together: a
// request's input size for a model's inputs, a result's for its outputs.
func TotalBytes(specs []Spec) int64 {
	n := int64(0)
	for _, s := range specs {
		n += s.Bytes()
	}
	return n
}

// Names lists specs' names, in order: the session's input or output names
// for a runtime, and ["x" "y"] in a message (%q).
func Names(specs []Spec) []string {
	n := make([]string, len(specs))
	for i, s := range specs {
		n[i] = s.Name
	}
	return n
}

// Clone returns a deep copy of specs (nil for none), so that a holder's
// copy cannot change under another's.
func Clone(specs []Spec) []Spec {
	if len(specs) == 0 {
		return nil
	}
	out := make([]Spec, len(specs))
	for i, s := range specs {
		out[i] = Spec{Name: s.Name, Datatype: s.Datatype, Shape: slices.Clone(s.Shape)}
	}
	return out
}

// EqualSpecs reports whether two lists say the same, in the same order.
func EqualSpecs(a, b []Spec) bool {
	return slices.EqualFunc(a, b, Spec.Equal)
}

// Package onnxmodel reads the signature of an ONNX model file, its graph's
// named inputs and outputs with their element types and shapes, in pure Go:
// the scheduler learns a repository model's tensors from its model.onnx
// without ONNX Runtime (and without cgo), and announces them to the
// frontends, which check requests against them.
//
// It decodes onnx.proto's ModelProto with protowire just far enough: the
// graph (ModelProto field 7), its inputs (GraphProto 11) and outputs (12),
// and the names of its initializers (5) and sparse initializers (15),
// which older files also list as inputs. Everything else, weights
// included, is skipped without being interpreted.
package onnxmodel

import (
	"errors"
	"fmt"
	"io"
	"os"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/symphony-serving/symphony/tensor"
)

// onnx.proto's field numbers this package reads.
const (
	modelGraph = 7 // ModelProto.graph

	graphInitializer       = 5  // GraphProto.initializer, TensorProto
	graphInput             = 11 // GraphProto.input, ValueInfoProto
	graphOutput            = 12 // GraphProto.output, ValueInfoProto
	graphSparseInitializer = 15 // GraphProto.sparse_initializer, SparseTensorProto

	tensorName         = 8 // TensorProto.name
	sparseTensorValues = 1 // SparseTensorProto.values, TensorProto

	valueName = 1 // ValueInfoProto.name
	valueType = 2 // ValueInfoProto.type, TypeProto

	typeTensor = 1 // TypeProto.tensor_type, TypeProto.Tensor

	tensorTypeElem  = 1 // TypeProto.Tensor.elem_type
	tensorTypeShape = 2 // TypeProto.Tensor.shape, TensorShapeProto

	shapeDim = 1 // TensorShapeProto.dim, Dimension

	dimValue = 1 // Dimension.dim_value
	dimParam = 2 // Dimension.dim_param
)

// Limits on what a file may make the reader hold.
const (
	// MaxFileSize is the largest file ReadFile reads: protobuf's own limit
	// on a message.
	MaxFileSize = 2 << 30
	// MaxValues bounds a graph's listed inputs and outputs together. Files
	// of IR version 3 and before list every initializer as an input too,
	// so it is far above tensor.MaxTensors.
	MaxValues = 1 << 16
	// MaxNameLen bounds an input's or output's name.
	MaxNameLen = 4096
)

// Value is one graph input or output as the file declares it.
type Value struct {
	Name string
	// Tensor is false for a sequence, map, optional or sparse value, which
	// have no element type or shape here.
	Tensor bool
	// ElemType is the ONNX TensorProto.DataType code (1 for FLOAT), 0 if
	// the file gives none.
	ElemType int32
	// Shape has a dimension's dim_value, or -1 for a symbolic (dim_param)
	// or unknown one; it is nil when the file gives no shape (unknown
	// rank), and empty for a scalar.
	Shape []int64
}

// Signature is a model's graph inputs, initializers excluded, and outputs,
// in the file's order.
type Signature struct {
	Inputs, Outputs []Value
}

// ReadFile reads the signature of the ONNX model file at path; its errors
// start with the path.
func ReadFile(path string) (*Signature, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s: over %d bytes, larger than any protobuf message", path, MaxFileSize)
	}
	sig, err := Read(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return sig, nil
}

// Read decodes a model file's signature. A file that is not a ModelProto
// with a graph is refused with an error that starts "not an ONNX model"
// and says where its bytes went wrong.
func Read(data []byte) (*Signature, error) {
	sig, err := read(data)
	if err != nil {
		return nil, fmt.Errorf("not an ONNX model: %w", err)
	}
	return sig, nil
}

func read(data []byte) (*Signature, error) {
	if len(data) == 0 {
		return nil, errors.New("empty file")
	}
	var g graph
	found := false
	err := fields(data, "model", func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != modelGraph {
			return nil
		}
		if typ != protowire.BytesType {
			return fmt.Errorf("model: graph (field %d) has wire type %d, not a message", num, typ)
		}
		found = true
		return g.read(v)
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, errors.New("model: no graph (ModelProto field 7)")
	}
	sig := &Signature{Outputs: g.outputs}
	for _, in := range g.inputs {
		if !g.inits[in.Name] {
			sig.Inputs = append(sig.Inputs, in)
		}
	}
	return sig, nil
}

// graph is what read keeps of a GraphProto.
type graph struct {
	inputs, outputs []Value
	inits           map[string]bool
}

func (g *graph) read(data []byte) error {
	return fields(data, "graph", func(num protowire.Number, typ protowire.Type, v []byte) error {
		var what string
		switch num {
		case graphInput:
			what = "input"
		case graphOutput:
			what = "output"
		case graphInitializer, graphSparseInitializer:
			what = "initializer"
		default:
			return nil
		}
		if typ != protowire.BytesType {
			return fmt.Errorf("graph: %s (field %d) has wire type %d, not a message", what, num, typ)
		}
		if what == "initializer" {
			name, err := initializerName(v, num == graphSparseInitializer)
			if err != nil {
				return fmt.Errorf("graph: initializer: %w", err)
			}
			if g.inits == nil {
				g.inits = map[string]bool{}
			}
			g.inits[name] = true
			return nil
		}
		if len(g.inputs)+len(g.outputs) >= MaxValues {
			return fmt.Errorf("graph: over %d inputs and outputs", MaxValues)
		}
		list := &g.inputs
		if num == graphOutput {
			list = &g.outputs
		}
		val, err := readValue(v)
		if err != nil {
			return fmt.Errorf("graph: %s %d: %w", what, len(*list), err)
		}
		*list = append(*list, val)
		return nil
	})
}

// initializerName is a TensorProto's name, or a SparseTensorProto's (its
// values tensor's).
func initializerName(data []byte, sparse bool) (string, error) {
	if sparse {
		var name string
		err := fields(data, "sparse initializer", func(num protowire.Number, typ protowire.Type, v []byte) error {
			if num != sparseTensorValues {
				return nil
			}
			if typ != protowire.BytesType {
				return fmt.Errorf("values has wire type %d, not a message", typ)
			}
			var err error
			name, err = initializerName(v, false)
			return err
		})
		return name, err
	}
	var name string
	err := fields(data, "tensor", func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != tensorName {
			return nil
		}
		if typ != protowire.BytesType {
			return fmt.Errorf("name has wire type %d, not a string", typ)
		}
		name = string(v)
		return nil
	})
	return name, err
}

// readValue decodes a ValueInfoProto.
func readValue(data []byte) (Value, error) {
	var val Value
	err := fields(data, "value", func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch num {
		case valueName:
			if typ != protowire.BytesType {
				return fmt.Errorf("name has wire type %d, not a string", typ)
			}
			if len(v) > MaxNameLen {
				return fmt.Errorf("name of %d bytes, over %d", len(v), MaxNameLen)
			}
			val.Name = string(v)
		case valueType:
			if typ != protowire.BytesType {
				return fmt.Errorf("type has wire type %d, not a message", typ)
			}
			return readType(v, &val)
		}
		return nil
	})
	if err != nil && val.Name != "" {
		err = fmt.Errorf("%q: %w", val.Name, err)
	}
	return val, err
}

// readType decodes a TypeProto into val: a tensor's element type and
// shape, or Tensor false for any other kind of value.
func readType(data []byte, val *Value) error {
	return fields(data, "type", func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != typeTensor {
			return nil
		}
		if typ != protowire.BytesType {
			return fmt.Errorf("tensor_type has wire type %d, not a message", typ)
		}
		val.Tensor = true
		return fields(v, "tensor type", func(num protowire.Number, typ protowire.Type, v []byte) error {
			switch num {
			case tensorTypeElem:
				if typ != protowire.VarintType {
					return fmt.Errorf("elem_type has wire type %d, not a varint", typ)
				}
				n, _ := protowire.ConsumeVarint(v)
				if int64(n) < 0 || n > 1<<31-1 {
					return fmt.Errorf("elem_type %d out of range", int64(n))
				}
				val.ElemType = int32(n)
			case tensorTypeShape:
				if typ != protowire.BytesType {
					return fmt.Errorf("shape has wire type %d, not a message", typ)
				}
				val.Shape = []int64{}
				return readShape(v, val)
			}
			return nil
		})
	})
}

// readShape decodes a TensorShapeProto's dimensions onto val.Shape.
func readShape(data []byte, val *Value) error {
	return fields(data, "shape", func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != shapeDim {
			return nil
		}
		if typ != protowire.BytesType {
			return fmt.Errorf("dim has wire type %d, not a message", typ)
		}
		if len(val.Shape) >= tensor.MaxDims {
			return fmt.Errorf("over %d dimensions", tensor.MaxDims)
		}
		d := int64(-1)
		err := fields(v, "dim", func(num protowire.Number, typ protowire.Type, v []byte) error {
			switch num {
			case dimValue:
				if typ != protowire.VarintType {
					return fmt.Errorf("dim_value has wire type %d, not a varint", typ)
				}
				n, _ := protowire.ConsumeVarint(v)
				if int64(n) < 0 {
					return fmt.Errorf("dim_value %d is negative", int64(n))
				}
				d = int64(n)
			case dimParam:
				d = -1
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("dim %d: %w", len(val.Shape), err)
		}
		val.Shape = append(val.Shape, d)
		return nil
	})
}

// fields walks a message's fields, calling f with each one's number, wire
// type and value: a varint field's bytes as they are encoded, a
// length-delimited field's contents, a fixed field's bytes. Groups are
// skipped whole. what names the message for errors.
func fields(data []byte, what string, f func(protowire.Number, protowire.Type, []byte) error) error {
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return fmt.Errorf("%s: bad field tag: %w", what, protowire.ParseError(n))
		}
		data = data[n:]
		var v []byte
		switch typ {
		case protowire.BytesType:
			b, m := protowire.ConsumeBytes(data)
			if m < 0 {
				return fmt.Errorf("%s: field %d: %w", what, num, protowire.ParseError(m))
			}
			v, n = b, m
		default:
			m := protowire.ConsumeFieldValue(num, typ, data)
			if m < 0 {
				return fmt.Errorf("%s: field %d: %w", what, num, protowire.ParseError(m))
			}
			v, n = data[:m], m
		}
		if err := f(num, typ, v); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

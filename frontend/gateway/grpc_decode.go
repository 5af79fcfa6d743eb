package gateway

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/symphony-serving/symphony/frontend/gateway/inferencepb"
	"github.com/symphony-serving/symphony/tensor"
)

// rawSizeIs introduces a raw_input_contents entry's byte count in the
// message for a wrong one, as "binary_data_size is" does over HTTP.
const rawSizeIs = "raw_input_contents has"

// decodeGRPCRequest decodes and checks a ModelInferRequest for a model
// whose tensors are inputs and outputs (nil for a model of opaque bytes),
// as decodeInferRequest does an HTTP body: the same checks and layout,
// and the same messages where the mistake is the same one (a wrong
// datatype or shape, a missing or unknown tensor, an element count its
// shape contradicts), naming the gRPC fields where the protocols' fields
// differ. limit bounds a shape's element count: the largest message the
// server takes. typed reports that the response should carry typed
// contents rather than raw_output_contents: the request gave its inputs
// as typed contents, and every output it asks for has a typed form (FP16
// and BF16 have none). Every error it returns is the caller's mistake,
// worded for the caller.
func decodeGRPCRequest(r *inferencepb.ModelInferRequest, inputs, outputs []tensor.Spec, limit int64) (req *inferRequest, typed bool, err error) {
	req = &inferRequest{ID: r.GetId()}
	var opts [3]*float64 // timeout_ms, timeout, priority
	for i, name := range []string{"timeout_ms", "timeout", "priority"} {
		p, ok := r.GetParameters()[name]
		if !ok {
			continue
		}
		v, ok := paramNumber(p)
		if !ok {
			return nil, false, fmt.Errorf("parameter %s %v is not a number", name, paramValue(p))
		}
		opts[i] = &v
	}
	if req.Timeout, req.Priority, err = requestOptions(opts[0], opts[1], opts[2]); err != nil {
		return nil, false, err
	}
	tensors, raw, err := grpcInputs(r, limit)
	if err != nil {
		return nil, false, err
	}
	if err := req.setInput(tensors, nil, inputs); err != nil {
		return nil, false, err
	}
	asked := make([]wireOutput, len(r.GetOutputs()))
	for i, o := range r.GetOutputs() {
		asked[i].Name = o.GetName()
	}
	// Every output is taken as binary data, which any datatype has, and
	// outputsOf's JSON check never applies: the response's form is typed.
	if req.Outputs, err = outputsOf(asked, true, outputs); err != nil {
		return nil, false, err
	}
	typed = !raw
	for _, o := range req.Outputs {
		if dt := outputDatatype(outputs, o.Name); dt == "FP16" || dt == "BF16" {
			typed = false
		}
	}
	return req, typed, nil
}

// outputDatatype is the datatype of the output name of a model whose
// outputs are specs: UINT8 for a model of opaque bytes.
func outputDatatype(specs []tensor.Spec, name string) string {
	for _, s := range specs {
		if s.Name == name {
			return s.Datatype
		}
	}
	return "UINT8"
}

// paramNumber is a parameter's numeric value; ok is false if it is not a
// number.
func paramNumber(p *inferencepb.InferParameter) (v float64, ok bool) {
	switch c := p.GetParameterChoice().(type) {
	case *inferencepb.InferParameter_Int64Param:
		return float64(c.Int64Param), true
	case *inferencepb.InferParameter_Uint64Param:
		return float64(c.Uint64Param), true
	case *inferencepb.InferParameter_DoubleParam:
		return c.DoubleParam, true
	}
	return 0, false
}

// paramValue is a parameter's value, whatever its type, for messages.
func paramValue(p *inferencepb.InferParameter) any {
	switch c := p.GetParameterChoice().(type) {
	case *inferencepb.InferParameter_BoolParam:
		return c.BoolParam
	case *inferencepb.InferParameter_StringParam:
		return fmt.Sprintf("%q", c.StringParam)
	}
	v, _ := paramNumber(p)
	return v
}

// grpcInputs checks the request's inputs and returns each one's raw bytes:
// raw_input_contents' entries, checked against their shapes as binary
// data is over HTTP, or the typed contents laid out as they would be.
// raw reports the raw form.
func grpcInputs(r *inferencepb.ModelInferRequest, limit int64) (tensors []tensor.Tensor, raw bool, err error) {
	ins, rawIn := r.GetInputs(), r.GetRawInputContents()
	if len(ins) == 0 {
		return nil, false, errors.New("request has no inputs")
	}
	raw = len(rawIn) > 0
	if raw && len(rawIn) != len(ins) {
		return nil, false, fmt.Errorf("%d raw_input_contents for %d inputs: give one for each input, in order", len(rawIn), len(ins))
	}
	tensors = make([]tensor.Tensor, 0, len(ins))
	var seen map[string]bool // past a few inputs, rather than a scan of those before
	if len(ins) > 16 {
		seen = make(map[string]bool, len(ins))
	}
	for i, in := range ins {
		name, dt := in.GetName(), in.GetDatatype()
		if name == "" {
			return nil, false, fmt.Errorf("input %d has no name", i)
		}
		if seen != nil && seen[name] || seen == nil && slices.ContainsFunc(ins[:i], func(p *inferencepb.ModelInferRequest_InferInputTensor) bool { return p.GetName() == name }) {
			return nil, false, fmt.Errorf("input %q appears twice", name)
		}
		if seen != nil {
			seen[name] = true
		}
		size, ok := elemSize(dt)
		if !ok {
			return nil, false, fmt.Errorf("input %q: unknown datatype %q", name, dt)
		}
		shape := in.GetShape()
		if shape == nil {
			shape = []int64{} // a scalar: protobuf does not tell an empty list from none
		}
		count, err := elements(shape, limit, "message")
		if err != nil {
			return nil, false, fmt.Errorf("input %q: %v", name, err)
		}
		t := tensor.Tensor{Name: name, Datatype: dt, Shape: shape}
		switch c := in.GetContents(); {
		case raw && c != nil:
			return nil, false, fmt.Errorf("input %q has both contents and raw_input_contents", name)
		case raw:
			t.Data = rawIn[i]
			if err := checkBinary(t.Data, dt, size, count, rawSizeIs); err != nil {
				return nil, false, fmt.Errorf("input %q: %v", name, err)
			}
		case c == nil:
			return nil, false, fmt.Errorf("input %q has neither contents nor raw_input_contents", name)
		case dt == "FP16" || dt == "BF16":
			return nil, false, fmt.Errorf("input %q: %s has no typed contents; send it in raw_input_contents", name, dt)
		default:
			if t.Data, err = appendContents(c, dt, count); err != nil {
				return nil, false, fmt.Errorf("input %q: %v", name, err)
			}
		}
		tensors = append(tensors, t)
	}
	return tensors, raw, nil
}

// contentsFields are the InferTensorContents fields, by datatype: the one
// that holds each datatype's elements.
var contentsFields = map[string]string{
	"BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents", "INT32": "int_contents",
	"INT64": "int64_contents", "UINT8": "uint_contents", "UINT16": "uint_contents", "UINT32": "uint_contents",
	"UINT64": "uint64_contents", "FP32": "fp32_contents", "FP64": "fp64_contents", "BYTES": "bytes_contents",
}

// contentsLens is each field's element count, named.
func contentsLens(c *inferencepb.InferTensorContents) [8]fieldLen {
	return [8]fieldLen{
		{"bool_contents", len(c.GetBoolContents())}, {"int_contents", len(c.GetIntContents())},
		{"int64_contents", len(c.GetInt64Contents())}, {"uint_contents", len(c.GetUintContents())},
		{"uint64_contents", len(c.GetUint64Contents())}, {"fp32_contents", len(c.GetFp32Contents())},
		{"fp64_contents", len(c.GetFp64Contents())}, {"bytes_contents", len(c.GetBytesContents())},
	}
}

// fieldLen is one InferTensorContents field's element count.
type fieldLen struct {
	field string
	n     int
}

// appendContents returns the binary form of a tensor's typed contents:
// its datatype's field, which must hold count elements, each in the
// datatype's range; no other field may hold any. It allocates only once
// the count is checked, for the elements the message really holds.
func appendContents(c *inferencepb.InferTensorContents, dt string, count int64) ([]byte, error) {
	field := contentsFields[dt]
	n := 0
	for _, f := range contentsLens(c) {
		switch {
		case f.field == field:
			n = f.n
		case f.n > 0:
			return nil, fmt.Errorf("%s elements go in %s, not %s", dt, field, f.field)
		}
	}
	if int64(n) != count {
		return nil, fmt.Errorf("shape needs %d elements, data has %d", count, n)
	}
	size, _ := tensor.ElemSize(dt)
	total := n * size
	for _, v := range c.GetBytesContents() {
		total += 4 + len(v) // a length prefix and the bytes
	}
	dst := make([]byte, 0, total)
	le := binary.LittleEndian
	switch dt {
	case "BOOL":
		for _, v := range c.GetBoolContents() {
			dst = append(dst, boolByte(v))
		}
	case "INT8", "INT16", "INT32":
		lo, hi := int32(-1)<<(8*size-1), int32(1<<(8*size-1)-1)
		for i, v := range c.GetIntContents() {
			if size < 4 && (v < lo || v > hi) {
				return nil, fmt.Errorf("element %d: %d is not a valid %s", i, v, dt)
			}
			switch size {
			case 1:
				dst = append(dst, byte(v))
			case 2:
				dst = le.AppendUint16(dst, uint16(v))
			default:
				dst = le.AppendUint32(dst, uint32(v))
			}
		}
	case "UINT8", "UINT16", "UINT32":
		for i, v := range c.GetUintContents() {
			if size < 4 && v >= 1<<(8*size) {
				return nil, fmt.Errorf("element %d: %d is not a valid %s", i, v, dt)
			}
			switch size {
			case 1:
				dst = append(dst, byte(v))
			case 2:
				dst = le.AppendUint16(dst, uint16(v))
			default:
				dst = le.AppendUint32(dst, v)
			}
		}
	case "INT64":
		for _, v := range c.GetInt64Contents() {
			dst = le.AppendUint64(dst, uint64(v))
		}
	case "UINT64":
		for _, v := range c.GetUint64Contents() {
			dst = le.AppendUint64(dst, v)
		}
	case "FP32":
		for _, v := range c.GetFp32Contents() {
			dst = le.AppendUint32(dst, math.Float32bits(v))
		}
	case "FP64":
		for _, v := range c.GetFp64Contents() {
			dst = le.AppendUint64(dst, math.Float64bits(v))
		}
	case "BYTES":
		for i, v := range c.GetBytesContents() {
			if uint64(len(v)) > math.MaxUint32 {
				return nil, fmt.Errorf("element %d: longer than a BYTES element may be", i)
			}
			dst = append(le.AppendUint32(dst, uint32(len(v))), v...)
		}
	}
	return dst, nil
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// contentsOf is a tensor's typed contents: its elements in its datatype's
// field. The tensor is a model's output, of a fixed-size datatype with a
// typed form (not FP16 or BF16), and its Data whole elements.
func contentsOf(t tensor.Tensor) *inferencepb.InferTensorContents {
	le := binary.LittleEndian
	size, _ := tensor.ElemSize(t.Datatype)
	n := len(t.Data) / size
	c := &inferencepb.InferTensorContents{}
	b := t.Data
	switch t.Datatype {
	case "BOOL":
		c.BoolContents = make([]bool, n)
		for i := range n {
			c.BoolContents[i] = b[i] != 0
		}
	case "INT8", "INT16", "INT32":
		c.IntContents = make([]int32, n)
		for i := range n {
			switch size {
			case 1:
				c.IntContents[i] = int32(int8(b[i]))
			case 2:
				c.IntContents[i] = int32(int16(le.Uint16(b[2*i:])))
			default:
				c.IntContents[i] = int32(le.Uint32(b[4*i:]))
			}
		}
	case "UINT8", "UINT16", "UINT32":
		c.UintContents = make([]uint32, n)
		for i := range n {
			switch size {
			case 1:
				c.UintContents[i] = uint32(b[i])
			case 2:
				c.UintContents[i] = uint32(le.Uint16(b[2*i:]))
			default:
				c.UintContents[i] = le.Uint32(b[4*i:])
			}
		}
	case "INT64":
		c.Int64Contents = make([]int64, n)
		for i := range n {
			c.Int64Contents[i] = int64(le.Uint64(b[8*i:]))
		}
	case "UINT64":
		c.Uint64Contents = make([]uint64, n)
		for i := range n {
			c.Uint64Contents[i] = le.Uint64(b[8*i:])
		}
	case "FP32":
		c.Fp32Contents = make([]float32, n)
		for i := range n {
			c.Fp32Contents[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		}
	case "FP64":
		c.Fp64Contents = make([]float64, n)
		for i := range n {
			c.Fp64Contents[i] = math.Float64frombits(le.Uint64(b[8*i:]))
		}
	}
	return c
}

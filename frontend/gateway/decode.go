package gateway

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/symphony-serving/symphony/tensor"
)

// headerLengthHeader is the binary tensor data extension's header: the
// length of the JSON object at the start of the body; tensor bytes follow.
const headerLengthHeader = "Inference-Header-Content-Length"

// defaultOutputName names the single output tensor when the request does
// not name one.
const defaultOutputName = "output0"

// maxTimeoutMS bounds the timeout_ms parameter so that converting it to a
// time.Duration cannot overflow; about 31 years is no bound at all in
// practice.
const maxTimeoutMS = 1e12

// inferRequest is a decoded and validated inference request: what the
// handler needs to call Infer and shape the response.
type inferRequest struct {
	ID      string
	Input   []byte        // the request's bytes: its inputs' raw bytes, laid out for the model
	Outputs []outputReq   // the output tensors of the response, in order
	Batched bool          // a typed model's inputs had a leading batch dimension of 1, and so will its outputs
	Timeout time.Duration // from parameters.timeout_ms and timeout; 0 if neither is given
	// Priority is the frontend's level for parameters.priority
	// (requestOptions); 0 if not given.
	Priority uint8
}

// outputReq is one output tensor the response carries.
type outputReq struct {
	Name   string
	Binary bool // in the binary data form
}

// binary reports whether any output is in the binary form, which makes
// the response a binary one.
func (r *inferRequest) binary() bool {
	for _, o := range r.Outputs {
		if o.Binary {
			return true
		}
	}
	return false
}

// wireRequest is the JSON inference request object. Fields the gateway
// does not use are ignored, as the protocol allows.
type wireRequest struct {
	ID         string `json:"id"`
	Parameters struct {
		BinaryDataOutput bool     `json:"binary_data_output"`
		TimeoutMS        *float64 `json:"timeout_ms"`
		Timeout          *float64 `json:"timeout"`  // Triton's, in microseconds
		Priority         *float64 `json:"priority"` // Triton's: 1 the highest
	} `json:"parameters"`
	Inputs  []wireInput  `json:"inputs"`
	Outputs []wireOutput `json:"outputs"`
}

// wireOutput is one output a request asks for.
type wireOutput struct {
	Name       string `json:"name"`
	Parameters struct {
		BinaryData bool `json:"binary_data"`
	} `json:"parameters"`
}

// wireInput is one input tensor of a request. Data stays raw so that it
// can be walked with the tensor's datatype in hand, keeping 64-bit integers
// exact.
type wireInput struct {
	Name       string  `json:"name"`
	Shape      []int64 `json:"shape"`
	Datatype   string  `json:"datatype"`
	Parameters struct {
		BinaryDataSize *int64 `json:"binary_data_size"`
	} `json:"parameters"`
	Data json.RawMessage `json:"data"`
}

// elemSize is the binary size of one element of a datatype: tensor's for
// the fixed-size ones, 0 for BYTES, whose elements vary, and ok false for
// names the protocol does not define.
func elemSize(dt string) (size int, ok bool) {
	if dt == "BYTES" {
		return 0, true
	}
	return tensor.ElemSize(dt)
}

// decodeInferRequest decodes an inference request body. headerLen is the
// Inference-Header-Content-Length header's value, "" when absent. inputs
// and outputs are the model's tensors, nil for a model of opaque bytes.
// Every error it returns is the client's mistake, worded for the client.
func decodeInferRequest(body []byte, headerLen string, inputs, outputs []tensor.Spec) (*inferRequest, error) {
	head, bin, hasBin := body, []byte(nil), headerLen != ""
	if hasBin {
		n, err := strconv.ParseInt(strings.TrimSpace(headerLen), 10, 64)
		switch {
		case err != nil:
			return nil, fmt.Errorf("%s %q is not a byte count", headerLengthHeader, headerLen)
		case n < 0:
			return nil, fmt.Errorf("%s %d is negative", headerLengthHeader, n)
		case n > int64(len(body)):
			return nil, fmt.Errorf("%s %d is longer than the %d-byte body", headerLengthHeader, n, len(body))
		}
		head, bin = body[:n], body[n:]
	}
	var w wireRequest
	err := json.Unmarshal(head, &w)
	if err != nil {
		return nil, fmt.Errorf("malformed inference request JSON: %v", err)
	}
	req := &inferRequest{ID: w.ID}
	if req.Timeout, req.Priority, err = requestOptions(w.Parameters.TimeoutMS, w.Parameters.Timeout, w.Parameters.Priority); err != nil {
		return nil, err
	}
	tensors, allBinary, err := decodeInputs(w.Inputs, bin, hasBin, int64(len(body)))
	if err != nil {
		return nil, err
	}
	var whole []byte
	if allBinary {
		whole = bin // the inputs' bytes, in request order, without a copy
	}
	if err := req.setInput(tensors, whole, inputs); err != nil {
		return nil, err
	}
	if req.Outputs, err = outputsOf(w.Outputs, w.Parameters.BinaryDataOutput, outputs); err != nil {
		return nil, err
	}
	return req, nil
}

// setInput sets the request's bytes from its decoded input tensors, as
// both protocols lay them out: for a typed model (inputs not nil), packed
// in the model's input order (tensor.Pack), which also sets Batched; for
// a model of opaque bytes, each tensor's bytes in request order: whole if
// not nil (the request's own contiguous copy of them), a single tensor's
// Data, or a concatenation.
func (r *inferRequest) setInput(tensors []tensor.Tensor, whole []byte, inputs []tensor.Spec) (err error) {
	switch {
	case inputs != nil:
		r.Input, r.Batched, err = tensor.Pack(inputs, tensors)
		return err
	case whole != nil:
		r.Input = whole
	case len(tensors) == 1:
		r.Input = tensors[0].Data
	default:
		n := 0
		for _, t := range tensors {
			n += len(t.Data)
		}
		r.Input = make([]byte, 0, n)
		for _, t := range tensors {
			r.Input = append(r.Input, t.Data...)
		}
	}
	return nil
}

// outputsOf is the outputs the response carries: those the request names,
// or the model's all; binaryAll is parameters.binary_data_output. A model
// of opaque bytes has one output, "output0" unless the request names it
// otherwise.
func outputsOf(asked []wireOutput, binaryAll bool, specs []tensor.Spec) ([]outputReq, error) {
	if specs == nil {
		switch len(asked) {
		case 0:
			return []outputReq{{Name: defaultOutputName, Binary: binaryAll}}, nil
		case 1:
			name := asked[0].Name
			if name == "" {
				name = defaultOutputName
			}
			return []outputReq{{Name: name, Binary: binaryAll || asked[0].Parameters.BinaryData}}, nil
		}
		return nil, fmt.Errorf("%d outputs requested; this model has exactly one", len(asked))
	}
	if len(asked) == 0 {
		out := make([]outputReq, len(specs))
		for i, s := range specs {
			out[i] = outputReq{Name: s.Name, Binary: binaryAll}
		}
		return out, checkJSONOutputs(out, specs)
	}
	out := make([]outputReq, 0, len(asked))
	for _, a := range asked {
		if !slices.ContainsFunc(specs, func(s tensor.Spec) bool { return s.Name == a.Name }) {
			return nil, fmt.Errorf("output %q: %v: the model's outputs are %q", a.Name, tensor.ErrUnknown, tensor.Names(specs))
		}
		if slices.ContainsFunc(out, func(o outputReq) bool { return o.Name == a.Name }) {
			return nil, fmt.Errorf("output %q requested twice", a.Name)
		}
		out = append(out, outputReq{Name: a.Name, Binary: binaryAll || a.Parameters.BinaryData})
	}
	return out, checkJSONOutputs(out, specs)
}

// checkJSONOutputs refuses, before the request runs, a JSON output of a
// datatype that has no JSON form.
func checkJSONOutputs(out []outputReq, specs []tensor.Spec) error {
	for _, o := range out {
		i := slices.IndexFunc(specs, func(s tensor.Spec) bool { return s.Name == o.Name })
		if dt := specs[i].Datatype; !o.Binary && (dt == "FP16" || dt == "BF16") {
			return fmt.Errorf("output %q is %s, which has no JSON form; ask for it as binary data (parameters.binary_data)", o.Name, dt)
		}
	}
	return nil
}

// decodeInputs validates the inputs and returns each one's raw bytes. bin
// is the body after the JSON header, which binary inputs consume in order;
// limit is the body's length, which no element count can exceed since every
// element takes at least one byte in either encoding. allBinary reports
// that every input was binary, so that bin is their bytes in order.
func decodeInputs(inputs []wireInput, bin []byte, hasBin bool, limit int64) (tensors []tensor.Tensor, allBinary bool, err error) {
	if len(inputs) == 0 {
		return nil, false, errors.New("request has no inputs")
	}
	allBinary = true
	tensors = make([]tensor.Tensor, 0, len(inputs))
	seen := make(map[string]bool, len(inputs))
	off := int64(0)
	for i := range inputs {
		in := &inputs[i]
		if in.Name == "" {
			return nil, false, fmt.Errorf("input %d has no name", i)
		}
		if seen[in.Name] {
			return nil, false, fmt.Errorf("input %q appears twice", in.Name)
		}
		seen[in.Name] = true
		size, ok := elemSize(in.Datatype)
		if !ok {
			return nil, false, fmt.Errorf("input %q: unknown datatype %q", in.Name, in.Datatype)
		}
		count, err := elements(in.Shape, limit, "body")
		if err != nil {
			return nil, false, fmt.Errorf("input %q: %v", in.Name, err)
		}
		t := tensor.Tensor{Name: in.Name, Datatype: in.Datatype, Shape: in.Shape}
		hasData := len(in.Data) > 0 && string(in.Data) != "null"
		if bs := in.Parameters.BinaryDataSize; bs != nil {
			switch n := *bs; {
			case !hasBin:
				return nil, false, fmt.Errorf("input %q has binary_data_size but the request has no %s header", in.Name, headerLengthHeader)
			case hasData:
				return nil, false, fmt.Errorf("input %q has both data and binary_data_size", in.Name)
			case n < 0:
				return nil, false, fmt.Errorf("input %q: binary_data_size %d is negative", in.Name, n)
			case n > int64(len(bin))-off:
				return nil, false, fmt.Errorf("input %q: binary data truncated: binary_data_size %d runs past the body (%d bytes left)", in.Name, n, int64(len(bin))-off)
			}
			t.Data = bin[off : off+*bs : off+*bs]
			off += *bs
			if err := checkBinary(t.Data, in.Datatype, size, count, "binary_data_size is"); err != nil {
				return nil, false, fmt.Errorf("input %q: %v", in.Name, err)
			}
			tensors = append(tensors, t)
			continue
		}
		allBinary = false
		if !hasData {
			return nil, false, fmt.Errorf("input %q has neither data nor binary_data_size", in.Name)
		}
		if in.Datatype == "FP16" || in.Datatype == "BF16" {
			return nil, false, fmt.Errorf("input %q: %s has no JSON form; send it as binary data", in.Name, in.Datatype)
		}
		if t.Data, err = appendJSONTensor([]byte{}, in.Data, in.Datatype, count); err != nil {
			return nil, false, fmt.Errorf("input %q: %v", in.Name, err)
		}
		tensors = append(tensors, t)
	}
	if rest := int64(len(bin)) - off; rest != 0 {
		return nil, false, fmt.Errorf("%d bytes after the JSON header belong to no input", rest)
	}
	return tensors, allBinary, nil
}

// elements is the element count of a shape. A count above limit is
// rejected before it can overflow: no message of limit bytes (what names
// it: the HTTP body, the gRPC message) could hold it.
func elements(shape []int64, limit int64, what string) (int64, error) {
	if shape == nil {
		return 0, errors.New("missing shape")
	}
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("shape %v has a negative dimension", shape)
		}
		if d == 0 {
			return 0, nil
		}
	}
	n := int64(1)
	for _, d := range shape {
		if d > limit/n {
			return 0, fmt.Errorf("shape %v has more elements than the %d-byte %s can hold", shape, limit, what)
		}
		n *= d
	}
	return n, nil
}

// checkBinary checks one binary tensor against its shape: its exact size
// for fixed-size datatypes, its length prefixes for BYTES, and 0/1 bytes
// for BOOL, so that a backend never sees a tensor its shape contradicts.
// sizeIs introduces the byte count in the message for a wrong size: the
// field that gave it ("binary_data_size is").
func checkBinary(b []byte, dt string, size int, count int64, sizeIs string) error {
	if dt == "BYTES" {
		n := int64(0)
		for ; len(b) > 0; n++ {
			if len(b) < 4 {
				return fmt.Errorf("BYTES element %d: truncated length prefix", n)
			}
			l := binary.LittleEndian.Uint32(b)
			if uint64(l) > uint64(len(b)-4) {
				return fmt.Errorf("BYTES element %d: length %d runs past the tensor", n, l)
			}
			b = b[4+int(l):]
		}
		if n != count {
			return fmt.Errorf("shape needs %d elements, binary data has %d", count, n)
		}
		return nil
	}
	if want := count * int64(size); int64(len(b)) != want {
		return fmt.Errorf("%d elements of %s need %d bytes, %s %d", count, dt, want, sizeIs, len(b))
	}
	if dt == "BOOL" {
		for i, v := range b {
			if v > 1 {
				return fmt.Errorf("BOOL element %d is %d, neither 0 nor 1", i, v)
			}
		}
	}
	return nil
}

// appendJSONTensor appends the binary form of JSON tensor data, flat or
// nested, to dst. It walks tokens rather than unmarshalling into []any so
// that INT64 and UINT64 values keep every digit.
func appendJSONTensor(dst, data []byte, dt string, count int64) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n := int64(0)
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("malformed data: %v", err)
		}
		if d, ok := tok.(json.Delim); ok {
			if d != '[' && d != ']' {
				return nil, errors.New("data holds an object; want numbers, booleans or strings in arrays")
			}
			continue
		}
		if n == count {
			return nil, fmt.Errorf("data has more than the %d elements its shape allows", count)
		}
		if dst, err = appendElem(dst, tok, dt); err != nil {
			return nil, fmt.Errorf("element %d: %v", n, err)
		}
		n++
	}
	if n != count {
		return nil, fmt.Errorf("shape needs %d elements, data has %d", count, n)
	}
	return dst, nil
}

// nonFinite are the floating-point values JSON has no number for, as the
// gateway writes and reads them: strings, as Python's json and most KServe
// servers spell them.
var nonFinite = map[string]float64{"NaN": math.NaN(), "Infinity": math.Inf(1), "-Infinity": math.Inf(-1)}

// appendElem appends one JSON element in dt's little-endian binary form.
func appendElem(dst []byte, tok json.Token, dt string) ([]byte, error) {
	le := binary.LittleEndian
	switch dt {
	case "BOOL":
		b, ok := tok.(bool)
		if !ok {
			return nil, fmt.Errorf("%v is not a BOOL (want true or false)", tok)
		}
		if b {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case "BYTES":
		s, ok := tok.(string)
		if !ok || uint64(len(s)) > math.MaxUint32 {
			return nil, fmt.Errorf("%v is not a BYTES element (want a string)", tok)
		}
		return append(le.AppendUint32(dst, uint32(len(s))), s...), nil
	}
	if str, ok := tok.(string); ok && (dt == "FP32" || dt == "FP64") {
		v, ok := nonFinite[str]
		if !ok {
			return nil, fmt.Errorf("%q is not a number (the strings an FP element may be are NaN, Infinity and -Infinity)", str)
		}
		if dt == "FP32" {
			return le.AppendUint32(dst, math.Float32bits(float32(v))), nil
		}
		return le.AppendUint64(dst, math.Float64bits(v)), nil
	}
	num, ok := tok.(json.Number)
	if !ok {
		return nil, fmt.Errorf("%v is not a number", tok)
	}
	size, _ := elemSize(dt)
	var bits uint64
	var err error
	switch dt {
	case "INT8", "INT16", "INT32", "INT64":
		var v int64
		v, err = strconv.ParseInt(string(num), 10, 8*size)
		bits = uint64(v) // two's complement; the low size bytes are the value
	case "UINT8", "UINT16", "UINT32", "UINT64":
		bits, err = strconv.ParseUint(string(num), 10, 8*size)
	case "FP32":
		var v float64
		v, err = strconv.ParseFloat(string(num), 32)
		bits = uint64(math.Float32bits(float32(v)))
	case "FP64":
		var v float64
		v, err = strconv.ParseFloat(string(num), 64)
		bits = math.Float64bits(v)
	default:
		err = errors.New("no JSON form")
	}
	if err != nil {
		return nil, fmt.Errorf("%s is not a valid %s", num, dt)
	}
	switch size {
	case 1:
		return append(dst, byte(bits)), nil
	case 2:
		return le.AppendUint16(dst, uint16(bits)), nil
	case 4:
		return le.AppendUint32(dst, uint32(bits)), nil
	}
	return le.AppendUint64(dst, bits), nil
}

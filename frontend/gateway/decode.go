package gateway

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
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
	ID           string
	Input        []byte        // the inputs' raw bytes, concatenated in request order
	OutputName   string        // name of the one output tensor in the response
	BinaryOutput bool          // answer in the binary data form
	Timeout      time.Duration // from parameters.timeout_ms; 0 if not given
}

// wireRequest is the JSON inference request object. Fields the gateway
// does not use are ignored, as the protocol allows.
type wireRequest struct {
	ID         string `json:"id"`
	Parameters struct {
		BinaryDataOutput bool     `json:"binary_data_output"`
		TimeoutMS        *float64 `json:"timeout_ms"`
	} `json:"parameters"`
	Inputs  []wireInput `json:"inputs"`
	Outputs []struct {
		Name       string `json:"name"`
		Parameters struct {
			BinaryData bool `json:"binary_data"`
		} `json:"parameters"`
	} `json:"outputs"`
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

// elemSize is the binary size of one element of a datatype: 0 for BYTES,
// whose elements vary, and ok false for names the protocol does not define.
func elemSize(dt string) (size int, ok bool) {
	switch dt {
	case "BOOL", "UINT8", "INT8":
		return 1, true
	case "UINT16", "INT16", "FP16", "BF16":
		return 2, true
	case "UINT32", "INT32", "FP32":
		return 4, true
	case "UINT64", "INT64", "FP64":
		return 8, true
	case "BYTES":
		return 0, true
	}
	return 0, false
}

// decodeInferRequest decodes an inference request body. headerLen is the
// Inference-Header-Content-Length header's value, "" when absent. Every
// error it returns is the client's mistake, worded for the client.
func decodeInferRequest(body []byte, headerLen string) (*inferRequest, error) {
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
	if err := json.Unmarshal(head, &w); err != nil {
		return nil, fmt.Errorf("malformed inference request JSON: %v", err)
	}
	req := &inferRequest{ID: w.ID, OutputName: defaultOutputName, BinaryOutput: w.Parameters.BinaryDataOutput}
	if t := w.Parameters.TimeoutMS; t != nil {
		if !(*t > 0) || *t > maxTimeoutMS {
			return nil, fmt.Errorf("parameter timeout_ms %v is not a positive number of milliseconds", *t)
		}
		req.Timeout = time.Duration(math.Ceil(*t * float64(time.Millisecond)))
	}
	switch len(w.Outputs) {
	case 0:
	case 1:
		if w.Outputs[0].Name != "" {
			req.OutputName = w.Outputs[0].Name
		}
		req.BinaryOutput = req.BinaryOutput || w.Outputs[0].Parameters.BinaryData
	default:
		return nil, fmt.Errorf("%d outputs requested; a Symphony model has exactly one", len(w.Outputs))
	}
	input, err := concatInputs(w.Inputs, bin, hasBin, int64(len(body)))
	if err != nil {
		return nil, err
	}
	req.Input = input
	return req, nil
}

// concatInputs validates the inputs and concatenates their raw bytes. bin
// is the body after the JSON header, which binary inputs consume in order;
// limit is the body's length, which no element count can exceed since every
// element takes at least one byte in either encoding.
func concatInputs(inputs []wireInput, bin []byte, hasBin bool, limit int64) ([]byte, error) {
	if len(inputs) == 0 {
		return nil, errors.New("request has no inputs")
	}
	allBinary := true
	for i := range inputs {
		allBinary = allBinary && inputs[i].Parameters.BinaryDataSize != nil
	}
	var out []byte
	seen := make(map[string]bool, len(inputs))
	off := int64(0)
	for i := range inputs {
		in := &inputs[i]
		if in.Name == "" {
			return nil, fmt.Errorf("input %d has no name", i)
		}
		if seen[in.Name] {
			return nil, fmt.Errorf("input %q appears twice", in.Name)
		}
		seen[in.Name] = true
		size, ok := elemSize(in.Datatype)
		if !ok {
			return nil, fmt.Errorf("input %q: unknown datatype %q", in.Name, in.Datatype)
		}
		count, err := elements(in.Shape, limit)
		if err != nil {
			return nil, fmt.Errorf("input %q: %v", in.Name, err)
		}
		hasData := len(in.Data) > 0 && string(in.Data) != "null"
		if bs := in.Parameters.BinaryDataSize; bs != nil {
			switch n := *bs; {
			case !hasBin:
				return nil, fmt.Errorf("input %q has binary_data_size but the request has no %s header", in.Name, headerLengthHeader)
			case hasData:
				return nil, fmt.Errorf("input %q has both data and binary_data_size", in.Name)
			case n < 0:
				return nil, fmt.Errorf("input %q: binary_data_size %d is negative", in.Name, n)
			case n > int64(len(bin))-off:
				return nil, fmt.Errorf("input %q: binary_data_size %d runs past the body (%d bytes left)", in.Name, n, int64(len(bin))-off)
			}
			seg := bin[off : off+*bs]
			off += *bs
			if err := checkBinary(seg, in.Datatype, size, count); err != nil {
				return nil, fmt.Errorf("input %q: %v", in.Name, err)
			}
			if !allBinary {
				out = append(out, seg...)
			}
			continue
		}
		if !hasData {
			return nil, fmt.Errorf("input %q has neither data nor binary_data_size", in.Name)
		}
		if in.Datatype == "FP16" || in.Datatype == "BF16" {
			return nil, fmt.Errorf("input %q: %s has no JSON form; send it as binary data", in.Name, in.Datatype)
		}
		if out, err = appendJSONTensor(out, in.Data, in.Datatype, count); err != nil {
			return nil, fmt.Errorf("input %q: %v", in.Name, err)
		}
	}
	if rest := int64(len(bin)) - off; rest != 0 {
		return nil, fmt.Errorf("%d bytes after the JSON header belong to no input", rest)
	}
	if allBinary {
		return bin, nil
	}
	if out == nil {
		out = []byte{}
	}
	return out, nil
}

// elements is the element count of a shape. A count above limit is
// rejected before it can overflow: no body of limit bytes could hold it.
func elements(shape []int64, limit int64) (int64, error) {
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
			return 0, fmt.Errorf("shape %v has more elements than the %d-byte body can hold", shape, limit)
		}
		n *= d
	}
	return n, nil
}

// checkBinary checks one binary tensor against its shape: its exact size
// for fixed-size datatypes, its length prefixes for BYTES, and 0/1 bytes
// for BOOL, so that a backend never sees a tensor its shape contradicts.
func checkBinary(b []byte, dt string, size int, count int64) error {
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
		return fmt.Errorf("%d elements of %s need %d bytes, binary_data_size is %d", count, dt, want, len(b))
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

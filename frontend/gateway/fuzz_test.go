package gateway

import (
	"bytes"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/symphony-serving/symphony/tensor"
)

// typedModels are the tensor signatures FuzzDecodeInferRequest decodes
// for: none (opaque bytes), the committed CNN's, and one of two inputs
// and two outputs.
var typedModels = [][2][]tensor.Spec{
	{nil, nil},
	{cnnInputs, cnnOutputs},
	{{{Name: "ids", Datatype: "INT64", Shape: []int64{4}}, {Name: "mask", Datatype: "BOOL", Shape: []int64{4}}},
		{{Name: "logits", Datatype: "FP16", Shape: []int64{2}}, {Name: "best", Datatype: "INT32", Shape: []int64{}}}},
}

// FuzzDecodeInferRequest feeds the request decoder arbitrary bodies and
// Inference-Header-Content-Length values, for a model of opaque bytes and
// for typed ones: it must never panic, and what it accepts must be
// bounded by what was sent, and for a typed model be exactly its inputs'
// bytes.
func FuzzDecodeInferRequest(f *testing.F) {
	for _, s := range []string{
		`{"id":"a","inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","data":[[1,2],[3,4]]}]}`,
		`{"inputs":[{"name":"x","shape":[],"datatype":"BYTES","data":"hi"}],"outputs":[{"name":"o","parameters":{"binary_data":true}}]}`,
		`{"parameters":{"timeout_ms":5,"binary_data_output":true},"inputs":[{"name":"b","shape":[3],"datatype":"BOOL","data":[true,false,true]}]}`,
		`{"inputs":[{"name":"i","shape":[1],"datatype":"INT64","data":[-9223372036854775808]},{"name":"u","shape":[1],"datatype":"UINT64","data":[18446744073709551615]}]}`,
		`{"inputs":[{"name":"x","shape":[9223372036854775807,2],"datatype":"UINT8","data":[]}]}`,
	} {
		f.Add([]byte(s), "", uint8(0))
	}
	cnnJSON := `{"inputs":[{"name":"x","shape":[1,1,8,8],"datatype":"FP32","data":[` + strings.Repeat("0.5,", 63) + `"NaN"]}],"outputs":[{"name":"y"}]}`
	f.Add([]byte(cnnJSON), "", uint8(1))
	cnnBin := `{"inputs":[{"name":"x","shape":[1,8,8],"datatype":"FP32","parameters":{"binary_data_size":256}}],"parameters":{"binary_data_output":true}}`
	f.Add([]byte(cnnBin+strings.Repeat("\x00\x00\x80\x3f", 64)), strconv.Itoa(len(cnnBin)), uint8(1))
	f.Add([]byte(cnnBin+strings.Repeat("\x00", 100)), strconv.Itoa(len(cnnBin)), uint8(1))
	two := `{"inputs":[{"name":"mask","shape":[4],"datatype":"BOOL","data":[true,false,true,true]},{"name":"ids","shape":[1,4],"datatype":"INT64","parameters":{"binary_data_size":32}}],"outputs":[{"name":"logits","parameters":{"binary_data":true}},{"name":"best"}]}`
	f.Add([]byte(two+strings.Repeat("\x01\x00\x00\x00\x00\x00\x00\x00", 4)), strconv.Itoa(len(two)), uint8(2))
	for _, s := range []struct{ head, tail string }{
		{`{"inputs":[{"name":"x","shape":[2],"datatype":"INT16","parameters":{"binary_data_size":4}}]}`, "\x01\x00\xff\xff"},
		{`{"inputs":[{"name":"s","shape":[1],"datatype":"BYTES","parameters":{"binary_data_size":6}},{"name":"j","shape":[1],"datatype":"UINT8","data":[3]}]}`, "\x02\x00\x00\x00hi"},
		{`{"inputs":[{"name":"h","shape":[1],"datatype":"FP16","parameters":{"binary_data_size":2}}]}`, "\x00\x3c"},
	} {
		f.Add([]byte(s.head+s.tail), strconv.Itoa(len(s.head)), uint8(0))
	}
	f.Add([]byte(`{}`), "-1", uint8(0))
	f.Add([]byte(`{}`), "99999999999", uint8(1))
	f.Fuzz(func(t *testing.T, body []byte, headerLen string, model uint8) {
		sig := typedModels[int(model)%len(typedModels)]
		req, err := decodeInferRequest(body, headerLen, sig[0], sig[1])
		if err != nil {
			if req != nil {
				t.Fatal("a request and an error")
			}
			return
		}
		// JSON costs at least one byte an element and a binary element
		// at most eight, or four plus its bytes for BYTES.
		if req.Input == nil || len(req.Input) > 8*len(body) {
			t.Fatalf("%d input bytes from a %d-byte body", len(req.Input), len(body))
		}
		if sig[0] != nil && int64(len(req.Input)) != tensor.TotalBytes(sig[0]) {
			t.Fatalf("%d input bytes for inputs of %d", len(req.Input), tensor.TotalBytes(sig[0]))
		}
		if req.Timeout < 0 || len(req.Outputs) == 0 {
			t.Fatalf("timeout %v, outputs %v", req.Timeout, req.Outputs)
		}
		for _, o := range req.Outputs {
			if o.Name == "" {
				t.Fatalf("outputs %v", req.Outputs)
			}
		}
	})
}

// FuzzReadGrowing reads arbitrary bodies in arbitrary pieces against
// arbitrary announced lengths and limits: every byte comes back, and the
// buffer stays within twice what arrived (plus the initial capacity),
// whatever was announced.
func FuzzReadGrowing(f *testing.F) {
	f.Add([]byte("{}"), int64(2), uint8(0), int64(64<<20))
	f.Add([]byte("{"), int64(64<<20), uint8(1), int64(64<<20))
	f.Add(bytes.Repeat([]byte("x"), initialBodyCap+1), int64(-1), uint8(7), int64(1<<20))
	f.Add([]byte{}, int64(0), uint8(3), int64(1))
	f.Add([]byte("abc"), int64(1), uint8(0), int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, data []byte, announced int64, piece uint8, limit int64) {
		if limit <= 0 {
			limit = 1
		}
		if announced < 0 {
			announced = -1
		}
		got, err := readGrowing(&pieces{data: data, n: int(piece)%64 + 1}, announced, limit)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("got %d of %d bytes: %v", len(got), len(data), err)
		}
		if bound := 2*len(data) + initialBodyCap + 1; cap(got) > bound {
			t.Fatalf("a buffer of %d for %d bytes", cap(got), len(data))
		}
	})
}

// pieces yields data n bytes at a time.
type pieces struct {
	data []byte
	n    int
}

func (p *pieces) Read(b []byte) (int, error) {
	if len(p.data) == 0 {
		return 0, io.EOF
	}
	k := copy(b[:min(len(b), p.n)], p.data)
	p.data = p.data[k:]
	return k, nil
}

// FuzzResponseError feeds the client side's reader of error answers
// arbitrary bodies: it always returns an error, and never panics.
func FuzzResponseError(f *testing.F) {
	for _, s := range []string{
		`{"error":"frontend: request for \"m\" dropped: overload","reason":"drop: overload"}`,
		`{"error":"x","reason":"backend: input unavailable"}`,
		`{"error":"x","reason":"backend"}`,
		`{"error":"x","reason":"not connected"}`,
		`{"error":"x","reason":"timeout"}`,
		`{"error":"x"}`,
		`{"reason":7}`,
		`<html>bad gateway</html>`,
		``,
	} {
		f.Add(503, []byte(s))
	}
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if ResponseError("m", status, body) == nil {
			t.Fatal("nil error")
		}
	})
}

// FuzzResponseBatch feeds the client side's reader of a response's batch
// parameters arbitrary JSON: a batch it reports is a plausible one.
func FuzzResponseBatch(f *testing.F) {
	f.Add([]byte(`{"model_name":"m","parameters":{"batch_finished_ns":2000,"batch_size":4,"batch_started_ns":1000},"outputs":[]}`))
	f.Add([]byte(`{"parameters":{"batch_size":-1,"batch_started_ns":1}}`))
	f.Add([]byte(`{"parameters":{"batch_size":9223372036854775807,"batch_started_ns":1,"batch_finished_ns":1}}`))
	f.Add([]byte(`{"parameters":7}`))
	f.Fuzz(func(t *testing.T, head []byte) {
		b, ok := ResponseBatch(head)
		if ok && (b.Size <= 0 || b.Finished.Before(b.Started) || b.Started.UnixNano() <= 0) {
			t.Fatalf("implausible batch %+v", b)
		}
	})
}

package gateway

import (
	"strconv"
	"testing"
)

// FuzzDecodeInferRequest feeds the request decoder arbitrary bodies and
// Inference-Header-Content-Length values: it must never panic, and what
// it accepts must be bounded by what was sent.
func FuzzDecodeInferRequest(f *testing.F) {
	for _, s := range []string{
		`{"id":"a","inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","data":[[1,2],[3,4]]}]}`,
		`{"inputs":[{"name":"x","shape":[],"datatype":"BYTES","data":"hi"}],"outputs":[{"name":"o","parameters":{"binary_data":true}}]}`,
		`{"parameters":{"timeout_ms":5,"binary_data_output":true},"inputs":[{"name":"b","shape":[3],"datatype":"BOOL","data":[true,false,true]}]}`,
		`{"inputs":[{"name":"i","shape":[1],"datatype":"INT64","data":[-9223372036854775808]},{"name":"u","shape":[1],"datatype":"UINT64","data":[18446744073709551615]}]}`,
		`{"inputs":[{"name":"x","shape":[9223372036854775807,2],"datatype":"UINT8","data":[]}]}`,
	} {
		f.Add([]byte(s), "")
	}
	for _, s := range []struct{ head, tail string }{
		{`{"inputs":[{"name":"x","shape":[2],"datatype":"INT16","parameters":{"binary_data_size":4}}]}`, "\x01\x00\xff\xff"},
		{`{"inputs":[{"name":"s","shape":[1],"datatype":"BYTES","parameters":{"binary_data_size":6}},{"name":"j","shape":[1],"datatype":"UINT8","data":[3]}]}`, "\x02\x00\x00\x00hi"},
		{`{"inputs":[{"name":"h","shape":[1],"datatype":"FP16","parameters":{"binary_data_size":2}}]}`, "\x00\x3c"},
	} {
		f.Add([]byte(s.head+s.tail), strconv.Itoa(len(s.head)))
	}
	f.Add([]byte(`{}`), "-1")
	f.Add([]byte(`{}`), "99999999999")
	f.Fuzz(func(t *testing.T, body []byte, headerLen string) {
		req, err := decodeInferRequest(body, headerLen)
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
		if req.Timeout < 0 || req.OutputName == "" {
			t.Fatalf("timeout %v, output name %q", req.Timeout, req.OutputName)
		}
	})
}

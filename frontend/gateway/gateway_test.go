package gateway

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/symphony-serving/symphony/frontend"
)

// fakeInferer records what Infer received and answers with infer, or by
// echoing the input.
type fakeInferer struct {
	models map[string]ModelInfo
	ready  bool
	infer  func(ctx context.Context, model string, input []byte) ([]byte, error)

	mu       sync.Mutex
	calls    int
	input    []byte
	model    string
	dl       time.Time
	hasDL    bool
	called   time.Time
	schedule time.Time // the deadline argument
	priority uint8     // PriorityFrom the call's context
}

func (f *fakeInferer) Infer(ctx context.Context, model string, input []byte, deadline time.Time) ([]byte, error) {
	f.mu.Lock()
	f.calls++
	f.input, f.model = append([]byte(nil), input...), model
	f.dl, f.hasDL = ctx.Deadline()
	f.called, f.schedule = time.Now(), deadline
	f.priority = PriorityFrom(ctx)
	f.mu.Unlock()
	if f.infer != nil {
		return f.infer(ctx, model, input)
	}
	return input, nil
}

func (f *fakeInferer) Model(name string) (ModelInfo, bool) {
	info, ok := f.models[name]
	return info, ok
}

func (f *fakeInferer) Ready() bool { return f.ready }

func newFake() *fakeInferer {
	return &fakeInferer{ready: true, models: map[string]ModelInfo{
		"resnet": {Name: "resnet", SLO: 100 * time.Millisecond, Ready: true},
		"cold":   {Name: "cold", SLO: 50 * time.Millisecond},
	}}
}

func newGateway(t *testing.T, f *fakeInferer, mod func(*Config)) *Gateway {
	t.Helper()
	cfg := Default()
	if mod != nil {
		mod(&cfg)
	}
	g, err := New(f, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func do(g http.Handler, method, path string, body []byte, hdr map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, bytes.NewReader(body))
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	g.ServeHTTP(w, r)
	return w
}

// errorOf returns the error message of a JSON error body, failing the test
// if the body is not one.
func errorOf(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var e struct {
		Error *string `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error == nil {
		t.Fatalf("status %d body %q is not an error object (%v)", w.Code, w.Body, err)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("error Content-Type %q", ct)
	}
	return *e.Error
}

// binBody lays out a binary-extension body: the JSON header, then tails.
func binBody(head string, tails ...[]byte) ([]byte, map[string]string) {
	body := []byte(head)
	for _, t := range tails {
		body = append(body, t...)
	}
	return body, map[string]string{headerLengthHeader: strconv.Itoa(len(head))}
}

func TestConfig(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default does not validate: %v", err)
	}
	bad := []Config{{}, {MaxBodyBytes: -1}}
	for _, mod := range []func(*Config){
		func(c *Config) { c.RetryAfter = -time.Second },
		func(c *Config) { c.MaxHeaderBytes = 0 },
		func(c *Config) { c.ReadHeaderTimeout = 0 },
		func(c *Config) { c.ReadTimeout = 0 },
		func(c *Config) { c.WriteTimeout = 0 },
		func(c *Config) { c.IdleTimeout = -time.Second },
		func(c *Config) { c.ReadHeaderTimeout = c.ReadTimeout + 1 },
		func(c *Config) { c.MaxConnections = 0 },
		func(c *Config) { c.MaxInFlight = -1 },
	} {
		c := Default()
		mod(&c)
		bad = append(bad, c)
	}
	for _, c := range bad {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v validates", c)
		}
		if _, err := New(newFake(), c); err == nil {
			t.Errorf("New accepts %+v", c)
		}
	}
	if _, err := New(nil, Default()); err == nil {
		t.Error("New accepts a nil Inferer")
	}
}

func TestHealthAndMetadata(t *testing.T) {
	f := newFake()
	g := newGateway(t, f, nil)
	tests := []struct {
		name, method, path string
		ready              bool
		code               int
		want               string // substring of the body
	}{
		{"live", "GET", "/v2/health/live", true, 200, `"live":true`},
		{"live while disconnected", "GET", "/v2/health/live", false, 200, `"live":true`},
		{"live HEAD", "HEAD", "/v2/health/live", true, 200, ``},
		{"ready", "GET", "/v2/health/ready", true, 200, `"ready":true`},
		{"not ready", "GET", "/v2/health/ready", false, 503, `"ready":false`},
		{"server metadata", "GET", "/v2", true, 200, `"extensions":["binary_tensor_data"]`},
		{"model ready", "GET", "/v2/models/resnet/ready", true, 200, `"ready":true`},
		{"model not ready", "GET", "/v2/models/cold/ready", true, 503, `"ready":false`},
		{"model ready unknown", "GET", "/v2/models/nope/ready", true, 404, `unknown model \"nope\"`},
		{"versioned model ready", "GET", "/v2/models/resnet/versions/3/ready", true, 200, `"ready":true`},
		{"metadata", "GET", "/v2/models/resnet", true, 200, `"platform":"symphony"`},
		{"metadata slo", "GET", "/v2/models/resnet", true, 200, `"slo_ms":100`},
		{"metadata inputs", "GET", "/v2/models/resnet", true, 200, `"inputs":[{"name":"input0","datatype":"UINT8","shape":[-1]}]`},
		{"metadata outputs", "GET", "/v2/models/cold", true, 200, `"outputs":[{"name":"output0","datatype":"UINT8","shape":[-1]}]`},
		{"versioned metadata", "GET", "/v2/models/resnet/versions/1", true, 200, `"name":"resnet"`},
		{"metadata unknown", "GET", "/v2/models/nope", true, 404, `unknown model`},
		{"unknown path", "GET", "/v3/models", true, 404, `no endpoint GET /v3/models`},
		{"wrong method", "POST", "/v2/health/live", true, 405, `wants GET`},
		{"infer by GET", "GET", "/v2/models/resnet/infer", true, 405, `wants POST`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f.ready = tc.ready
			w := do(g, tc.method, tc.path, nil, nil)
			if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.want) {
				t.Fatalf("%s %s: %d %s; want %d containing %s", tc.method, tc.path, w.Code, w.Body, tc.code, tc.want)
			}
			if w.Code >= 400 && w.Code != 503 { // 503 is a readiness answer, not an error
				errorOf(t, w)
			}
			if w.Code == 405 && w.Header().Get("Allow") == "" {
				t.Error("405 without Allow")
			}
		})
	}
}

// le builds little-endian bytes from values of fixed-size types.
func le(vs ...any) []byte {
	var b bytes.Buffer
	for _, v := range vs {
		if err := binary.Write(&b, binary.LittleEndian, v); err != nil {
			panic(err)
		}
	}
	return b.Bytes()
}

// str is a BYTES element in binary form.
func str(s string) []byte { return append(le(uint32(len(s))), s...) }

func TestInferJSONEncodesEveryDatatype(t *testing.T) {
	tests := []struct {
		name, inputs string
		want         []byte
	}{
		{"BOOL", `{"name":"a","shape":[3],"datatype":"BOOL","data":[true,false,true]}`, []byte{1, 0, 1}},
		{"UINT8", `{"name":"a","shape":[2],"datatype":"UINT8","data":[0,255]}`, []byte{0, 255}},
		{"UINT16", `{"name":"a","shape":[1],"datatype":"UINT16","data":[65535]}`, le(uint16(65535))},
		{"UINT32", `{"name":"a","shape":[1],"datatype":"UINT32","data":[4000000000]}`, le(uint32(4000000000))},
		{"UINT64 max", `{"name":"a","shape":[1],"datatype":"UINT64","data":[18446744073709551615]}`, le(uint64(math.MaxUint64))},
		{"INT8", `{"name":"a","shape":[2],"datatype":"INT8","data":[-128,127]}`, le(int8(-128), int8(127))},
		{"INT16", `{"name":"a","shape":[1],"datatype":"INT16","data":[-2]}`, le(int16(-2))},
		{"INT32", `{"name":"a","shape":[1],"datatype":"INT32","data":[-70000]}`, le(int32(-70000))},
		{"INT64 exact", `{"name":"a","shape":[1],"datatype":"INT64","data":[9007199254740993]}`, le(int64(9007199254740993))},
		{"FP32", `{"name":"a","shape":[2],"datatype":"FP32","data":[1.5,-2e3]}`, le(float32(1.5), float32(-2000))},
		{"FP64", `{"name":"a","shape":[1],"datatype":"FP64","data":[0.1]}`, le(0.1)},
		{"BYTES", `{"name":"a","shape":[2],"datatype":"BYTES","data":["hi",""]}`, append(str("hi"), str("")...)},
		{"nested", `{"name":"a","shape":[2,2],"datatype":"UINT8","data":[[1,2],[3,4]]}`, []byte{1, 2, 3, 4}},
		{"scalar", `{"name":"a","shape":[],"datatype":"INT16","data":7}`, le(int16(7))},
		{"empty", `{"name":"a","shape":[0,5],"datatype":"FP32","data":[]}`, []byte{}},
		{"two inputs in order", `{"name":"a","shape":[1],"datatype":"UINT8","data":[9]},{"name":"b","shape":[1],"datatype":"INT16","data":[1]}`, []byte{9, 1, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			w := do(newGateway(t, f, nil), "POST", "/v2/models/resnet/infer", []byte(`{"id":"r1","inputs":[`+tc.inputs+`]}`), nil)
			if w.Code != 200 {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			if !bytes.Equal(f.input, tc.want) || f.model != "resnet" {
				t.Fatalf("Infer got %q %v, want %v", f.model, f.input, tc.want)
			}
			var resp struct {
				ModelName string `json:"model_name"`
				ID        string `json:"id"`
				Outputs   []struct {
					Name, Datatype string
					Shape          []int
					Data           []int
				} `json:"outputs"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
				t.Fatalf("response %s: %v", w.Body, err)
			}
			if resp.ModelName != "resnet" || resp.ID != "r1" || len(resp.Outputs) != 1 {
				t.Fatalf("response %s", w.Body)
			}
			o := resp.Outputs[0]
			if o.Name != "output0" || o.Datatype != "UINT8" || len(o.Shape) != 1 || o.Shape[0] != len(tc.want) {
				t.Fatalf("output %+v", o)
			}
			got := make([]byte, 0, len(tc.want))
			for _, n := range o.Data {
				got = append(got, byte(n))
			}
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("response data %v, want %v", got, tc.want)
			}
		})
	}
}

// splitBinary checks a binary-extension response and returns its JSON
// header and its binary tail.
func splitBinary(t *testing.T, w *httptest.ResponseRecorder) (head map[string]any, tail []byte) {
	t.Helper()
	n, err := strconv.Atoi(w.Header().Get(headerLengthHeader))
	if err != nil || n > w.Body.Len() {
		t.Fatalf("bad %s %q for a %d-byte body", headerLengthHeader, w.Header().Get(headerLengthHeader), w.Body.Len())
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/octet-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	b := w.Body.Bytes()
	if err := json.Unmarshal(b[:n], &head); err != nil {
		t.Fatalf("header %q: %v", b[:n], err)
	}
	return head, b[n:]
}

func TestInferBinary(t *testing.T) {
	img := le(float32(1), float32(2), float32(3), float32(4))
	tests := []struct {
		name       string
		head       string
		tails      [][]byte
		want       []byte
		binaryOut  bool
		outputName string
	}{
		{"binary in, JSON out",
			`{"inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","parameters":{"binary_data_size":16}}]}`,
			[][]byte{img}, img, false, "output0"},
		{"binary in and out by output parameter",
			`{"inputs":[{"name":"x","shape":[4],"datatype":"FP32","parameters":{"binary_data_size":16}}],"outputs":[{"name":"probs","parameters":{"binary_data":true}}]}`,
			[][]byte{img}, img, true, "probs"},
		{"binary out by request parameter",
			`{"parameters":{"binary_data_output":true},"inputs":[{"name":"x","shape":[1],"datatype":"UINT8","data":[7]}]}`,
			nil, []byte{7}, true, "output0"},
		{"mixed binary and JSON inputs keep request order",
			`{"inputs":[{"name":"a","shape":[1],"datatype":"UINT8","data":[5]},{"name":"b","shape":[2],"datatype":"INT16","parameters":{"binary_data_size":4}},{"name":"c","shape":[1],"datatype":"BYTES","parameters":{"binary_data_size":7}}]}`,
			[][]byte{le(int16(1), int16(-1)), str("abc")}, append(append([]byte{5}, le(int16(1), int16(-1))...), str("abc")...), false, "output0"},
		{"binary FP16 and BOOL",
			`{"inputs":[{"name":"h","shape":[2],"datatype":"FP16","parameters":{"binary_data_size":4}},{"name":"b","shape":[2],"datatype":"BOOL","parameters":{"binary_data_size":2}}]}`,
			[][]byte{{0, 0x3c, 0, 0xc0}, {1, 0}}, []byte{0, 0x3c, 0, 0xc0, 1, 0}, false, "output0"},
		{"empty binary tensor",
			`{"inputs":[{"name":"e","shape":[0],"datatype":"INT64","parameters":{"binary_data_size":0}}],"outputs":[{"name":"o","parameters":{"binary_data":true}}]}`,
			nil, []byte{}, true, "o"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			body, hdr := binBody(tc.head, tc.tails...)
			if strings.Contains(tc.name, "request parameter") {
				hdr = nil // a JSON-only request may still ask for binary output
			}
			w := do(newGateway(t, f, nil), "POST", "/v2/models/resnet/versions/2/infer", body, hdr)
			if w.Code != 200 {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			if !bytes.Equal(f.input, tc.want) {
				t.Fatalf("Infer got %v, want %v", f.input, tc.want)
			}
			if !tc.binaryOut {
				if w.Header().Get(headerLengthHeader) != "" || !strings.Contains(w.Body.String(), `"model_version":"2"`) {
					t.Fatalf("JSON response %s with headers %v", w.Body, w.Header())
				}
				return
			}
			head, tail := splitBinary(t, w)
			if !bytes.Equal(tail, tc.want) {
				t.Fatalf("binary output %v, want %v", tail, tc.want)
			}
			out := head["outputs"].([]any)[0].(map[string]any)
			size := out["parameters"].(map[string]any)["binary_data_size"].(float64)
			if out["name"] != tc.outputName || int(size) != len(tc.want) || out["data"] != nil || head["model_version"] != "2" {
				t.Fatalf("binary header %v", head)
			}
			if cl := w.Header().Get("Content-Length"); cl != strconv.Itoa(w.Body.Len()) {
				t.Errorf("Content-Length %s for %d bytes", cl, w.Body.Len())
			}
		})
	}
}

func TestInferBadRequests(t *testing.T) {
	one := func(in string) string { return `{"inputs":[` + in + `]}` }
	tests := []struct {
		name string
		body []byte
		hdr  map[string]string
		want string // substring of the error message
	}{
		{"empty body", nil, nil, "malformed inference request JSON"},
		{"truncated JSON", []byte(`{"inputs":[{"name":"a","shape":[1],`), nil, "malformed"},
		{"trailing garbage", []byte(`{"inputs":[]} x`), nil, "malformed"},
		{"not an object", []byte(`[1,2]`), nil, "malformed"},
		{"id not a string", []byte(`{"id":5,"inputs":[]}`), nil, "malformed"},
		{"no inputs", []byte(`{"inputs":[]}`), nil, "no inputs"},
		{"no name", []byte(one(`{"shape":[1],"datatype":"UINT8","data":[1]}`)), nil, "input 0 has no name"},
		{"duplicate name", []byte(`{"inputs":[{"name":"a","shape":[1],"datatype":"UINT8","data":[1]},{"name":"a","shape":[1],"datatype":"UINT8","data":[1]}]}`), nil, `input "a" appears twice`},
		{"unknown datatype", []byte(one(`{"name":"a","shape":[1],"datatype":"FP8","data":[1]}`)), nil, `unknown datatype "FP8"`},
		{"missing shape", []byte(one(`{"name":"a","datatype":"UINT8","data":[1]}`)), nil, "missing shape"},
		{"negative dimension", []byte(one(`{"name":"a","shape":[-1],"datatype":"UINT8","data":[1]}`)), nil, "negative dimension"},
		{"overflowing shape", []byte(one(`{"name":"a","shape":[4611686018427387904,4611686018427387904],"datatype":"UINT8","data":[1]}`)), nil, "more elements than"},
		{"shape wants more", []byte(one(`{"name":"a","shape":[2,2],"datatype":"UINT8","data":[1,2,3]}`)), nil, "shape needs 4 elements, data has 3"},
		{"shape wants fewer", []byte(one(`{"name":"a","shape":[2],"datatype":"UINT8","data":[1,2,3]}`)), nil, "more than the 2 elements"},
		{"no data", []byte(one(`{"name":"a","shape":[1],"datatype":"UINT8"}`)), nil, "neither data nor binary_data_size"},
		{"null data", []byte(one(`{"name":"a","shape":[1],"datatype":"UINT8","data":null}`)), nil, "neither data"},
		{"object in data", []byte(one(`{"name":"a","shape":[1],"datatype":"UINT8","data":[{"x":1}]}`)), nil, "object"},
		{"UINT8 out of range", []byte(one(`{"name":"a","shape":[1],"datatype":"UINT8","data":[256]}`)), nil, "256 is not a valid UINT8"},
		{"negative unsigned", []byte(one(`{"name":"a","shape":[1],"datatype":"UINT32","data":[-1]}`)), nil, "not a valid UINT32"},
		{"fraction as INT32", []byte(one(`{"name":"a","shape":[1],"datatype":"INT32","data":[1.5]}`)), nil, "1.5 is not a valid INT32"},
		{"FP32 overflow", []byte(one(`{"name":"a","shape":[1],"datatype":"FP32","data":[1e39]}`)), nil, "not a valid FP32"},
		{"string as FP32", []byte(one(`{"name":"a","shape":[1],"datatype":"FP32","data":["1"]}`)), nil, "is not a number"},
		{"number as BOOL", []byte(one(`{"name":"a","shape":[1],"datatype":"BOOL","data":[1]}`)), nil, "not a BOOL"},
		{"number as BYTES", []byte(one(`{"name":"a","shape":[1],"datatype":"BYTES","data":[1]}`)), nil, "not a BYTES element"},
		{"FP16 as JSON", []byte(one(`{"name":"a","shape":[1],"datatype":"FP16","data":[1]}`)), nil, "FP16 has no JSON form"},
		{"two outputs", []byte(`{"inputs":[{"name":"a","shape":[1],"datatype":"UINT8","data":[1]}],"outputs":[{"name":"x"},{"name":"y"}]}`), nil, "2 outputs requested"},
		{"zero timeout_ms", []byte(`{"parameters":{"timeout_ms":0},"inputs":[{"name":"a","shape":[1],"datatype":"UINT8","data":[1]}]}`), nil, "timeout_ms"},
		{"huge timeout_ms", []byte(`{"parameters":{"timeout_ms":1e300},"inputs":[{"name":"a","shape":[1],"datatype":"UINT8","data":[1]}]}`), nil, "timeout_ms"},
		{"string timeout_ms", []byte(`{"parameters":{"timeout_ms":"5"},"inputs":[{"name":"a","shape":[1],"datatype":"UINT8","data":[1]}]}`), nil, "malformed"},
		{"zero timeout", []byte(`{"parameters":{"timeout":0},"inputs":[{"name":"a","shape":[1],"datatype":"UINT8","data":[1]}]}`), nil, "parameter timeout 0 is not a positive whole number of microseconds"},
		{"fractional timeout", []byte(`{"parameters":{"timeout":1.5},"inputs":[{"name":"a","shape":[1],"datatype":"UINT8","data":[1]}]}`), nil, "parameter timeout 1.5"},
		{"priority past the levels", []byte(`{"parameters":{"priority":256},"inputs":[{"name":"a","shape":[1],"datatype":"UINT8","data":[1]}]}`), nil, "parameter priority 256 is not a whole number from 0 (the default) to 255"},
		{"negative priority", []byte(`{"parameters":{"priority":-1},"inputs":[{"name":"a","shape":[1],"datatype":"UINT8","data":[1]}]}`), nil, "parameter priority -1"},
		{"fractional priority", []byte(`{"parameters":{"priority":0.5},"inputs":[{"name":"a","shape":[1],"datatype":"UINT8","data":[1]}]}`), nil, "parameter priority 0.5"},
		{"bad timeout header", []byte(one(`{"name":"a","shape":[1],"datatype":"UINT8","data":[1]}`)), map[string]string{TimeoutHeader: "soon"}, TimeoutHeader},
		{"negative timeout header", []byte(one(`{"name":"a","shape":[1],"datatype":"UINT8","data":[1]}`)), map[string]string{TimeoutHeader: "-1s"}, TimeoutHeader},
		{"header length not a number", []byte(`{}`), map[string]string{headerLengthHeader: "ten"}, "is not a byte count"},
		{"negative header length", []byte(`{}`), map[string]string{headerLengthHeader: "-5"}, "is negative"},
		{"header length past the body", []byte(`{"inputs":[]}`), map[string]string{headerLengthHeader: "14"}, "longer than the 13-byte body"},
		{"huge header length", []byte(`{}`), map[string]string{headerLengthHeader: "99999999999999999999"}, "is not a byte count"},
		{"header length cuts the JSON", []byte(`{"inputs":[]}`), map[string]string{headerLengthHeader: "5"}, "malformed"},
	}
	bin := func(in string, tails ...[]byte) ([]byte, map[string]string) { return binBody(one(in), tails...) }
	for _, c := range []struct {
		name, in string
		tails    [][]byte
		want     string
	}{
		{"negative binary size", `{"name":"a","shape":[1],"datatype":"UINT8","parameters":{"binary_data_size":-1}}`, nil, "binary_data_size -1 is negative"},
		{"binary size past the body", `{"name":"a","shape":[4],"datatype":"UINT8","parameters":{"binary_data_size":4}}`, [][]byte{{1, 2}}, "runs past the body (2 bytes left)"},
		{"unused trailing bytes", `{"name":"a","shape":[1],"datatype":"UINT8","parameters":{"binary_data_size":1}}`, [][]byte{{1, 2, 3}}, "2 bytes after the JSON header belong to no input"},
		{"binary size against shape", `{"name":"a","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":4}}`, [][]byte{{1, 2, 3, 4}}, "2 elements of FP32 need 8 bytes"},
		{"data and binary", `{"name":"a","shape":[1],"datatype":"UINT8","data":[1],"parameters":{"binary_data_size":1}}`, [][]byte{{1}}, "both data and binary_data_size"},
		{"BYTES truncated prefix", `{"name":"a","shape":[1],"datatype":"BYTES","parameters":{"binary_data_size":3}}`, [][]byte{{1, 0, 0}}, "truncated length prefix"},
		{"BYTES length past tensor", `{"name":"a","shape":[1],"datatype":"BYTES","parameters":{"binary_data_size":5}}`, [][]byte{{9, 0, 0, 0, 'x'}}, "runs past the tensor"},
		{"BYTES count", `{"name":"a","shape":[2],"datatype":"BYTES","parameters":{"binary_data_size":5}}`, [][]byte{str("x")}, "binary data has 1"},
		{"BOOL not 0 or 1", `{"name":"a","shape":[2],"datatype":"BOOL","parameters":{"binary_data_size":2}}`, [][]byte{{1, 2}}, "BOOL element 1 is 2"},
		{"binary size string", `{"name":"a","shape":[1],"datatype":"UINT8","parameters":{"binary_data_size":"1"}}`, [][]byte{{1}}, "malformed"},
		{"stray binary bytes for JSON inputs", `{"name":"a","shape":[1],"datatype":"UINT8","data":[1]}`, [][]byte{{7}}, "1 bytes after the JSON header"},
	} {
		body, hdr := bin(c.in, c.tails...)
		tests = append(tests, struct {
			name string
			body []byte
			hdr  map[string]string
			want string
		}{c.name, body, hdr, c.want})
	}
	tests = append(tests, struct {
		name string
		body []byte
		hdr  map[string]string
		want string
	}{"binary size without the header", []byte(one(`{"name":"a","shape":[1],"datatype":"UINT8","parameters":{"binary_data_size":1}}`)), nil, "has no Inference-Header-Content-Length header"})

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			w := do(newGateway(t, f, nil), "POST", "/v2/models/resnet/infer", tc.body, tc.hdr)
			if w.Code != http.StatusBadRequest {
				t.Fatalf("status %d (%s), want 400", w.Code, w.Body)
			}
			if msg := errorOf(t, w); !strings.Contains(msg, tc.want) {
				t.Fatalf("error %q does not mention %q", msg, tc.want)
			}
			if f.calls != 0 {
				t.Fatal("Infer called for a bad request")
			}
		})
	}
}

func TestInferBodyTooLarge(t *testing.T) {
	f := newFake()
	g := newGateway(t, f, func(c *Config) { c.MaxBodyBytes = 64 })
	big := []byte(`{"inputs":[{"name":"a","shape":[40],"datatype":"UINT8","data":[` + strings.Repeat("1,", 39) + `1]}]}`)
	for _, known := range []bool{true, false} {
		var body io.Reader = bytes.NewReader(big)
		if !known {
			body = io.MultiReader(body) // hides the length: the reader must stop it
		}
		r := httptest.NewRequest("POST", "/v2/models/resnet/infer", body)
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(errorOf(t, w), "larger than 64 bytes") {
			t.Fatalf("length known %v: %d %s", known, w.Code, w.Body)
		}
	}
	if f.calls != 0 {
		t.Fatal("Infer called for an oversized body")
	}
}

// reqBody is a valid one-input JSON request.
var reqBody = []byte(`{"id":"q","inputs":[{"name":"a","shape":[1],"datatype":"UINT8","data":[1]}]}`)

// TestInferErrorMapping: each error Infer can end with gets its status,
// Retry-After, message and reason, and ResponseError turns the answer
// back into an error a report classifies as it would the original.
func TestInferErrorMapping(t *testing.T) {
	waitCtx := func(err error) func(context.Context, string, []byte) ([]byte, error) {
		return func(ctx context.Context, _ string, _ []byte) ([]byte, error) {
			<-ctx.Done()
			return nil, err
		}
	}
	fail := func(err error) func(context.Context, string, []byte) ([]byte, error) {
		return func(context.Context, string, []byte) ([]byte, error) { return nil, err }
	}
	drop := func(r frontend.DropReason) error { return &frontend.DropError{Model: "resnet", Reason: r} }
	short := map[string]string{TimeoutHeader: "20ms"} // resnet's SLO is 100ms
	long := map[string]string{TimeoutHeader: "1s"}
	tests := []struct {
		name    string
		infer   func(context.Context, string, []byte) ([]byte, error)
		hdr     map[string]string
		code    int
		retry   string
		message string // substring of the error
		reason  string
	}{
		{"unknown model", fail(frontend.ErrUnknownModel), nil, 404, "", "unknown model", ReasonUnknownModel},
		{"wrapped unknown model", fail(fmt.Errorf("lookup: %w", frontend.ErrUnknownModel)), nil, 404, "", "unknown model", ReasonUnknownModel},
		{"not connected", fail(frontend.ErrNotConnected), nil, 503, "1", "not connected", ReasonNotConnected},
		{"scheduler lost", fail(frontend.ErrSchedulerLost), nil, 503, "1", "lost the scheduler connection", ReasonSchedulerLost},
		{"closed", fail(frontend.ErrClosed), nil, 503, "", "client closed", ReasonClosed},
		{"bad deadline", fail(frontend.ErrBadDeadline), nil, 400, "", "bad deadline", ReasonBadDeadline},
		{"backend", fail(&frontend.BackendError{Model: "resnet", Backend: "gpu3", Cause: "executor failed: out of memory"}), nil, 502, "", "executor failed", "backend: executor failed"},
		{"backend without a cause", fail(&frontend.BackendError{Model: "resnet"}), nil, 502, "", "failed on its backend", ReasonBackend},
		{"deadline drop", fail(drop(frontend.DropDeadline)), nil, 503, "1", "dropped: deadline", "drop: deadline"},
		{"deadline drop, timeout over the SLO", fail(drop(frontend.DropDeadline)), long, 503, "1", "dropped: deadline", "drop: deadline"},
		{"deadline drop of a timeout under the SLO", fail(drop(frontend.DropDeadline)), short, 504, "", "timeout of 20ms could not be met", "drop: deadline"},
		{"overload drop", fail(drop(frontend.DropOverload)), nil, 503, "1", "dropped: overload", "drop: overload"},
		{"overload drop of a timeout under the SLO", fail(drop(frontend.DropOverload)), short, 503, "1", "dropped: overload", "drop: overload"},
		{"shutdown drop", fail(drop(frontend.DropShutdown)), nil, 503, "1", "dropped: shutdown", "drop: shutdown"},
		{"expired: no answer by the deadline", fail(drop(frontend.DropExpired)), nil, 504, "", "dropped: expired", "drop: expired"},
		{"expired without a timeout names the SLO", fail(drop(frontend.DropExpired)), nil, 504, "", "no answer within the model's SLO", "drop: expired"},
		{"unknown drop reason", fail(drop("eaten")), nil, 503, "", "eaten", "drop: eaten"},
		{"canceled by own timeout", waitCtx(drop(frontend.DropCanceled)), map[string]string{TimeoutHeader: "1ms"}, 504, "", "timed out after 1ms", "drop: canceled"},
		{"context error on own timeout", waitCtx(context.DeadlineExceeded), map[string]string{TimeoutHeader: "1ms"}, 504, "", "timed out", ReasonTimeout},
		{"canceled with context alive", fail(drop(frontend.DropCanceled)), nil, 503, "", "canceled", "drop: canceled"},
		{"refused by the scheduler", fail(fmt.Errorf("%w for %q: clock ahead?", frontend.ErrRefused, "resnet")), nil, 500, "", "clock ahead?", ReasonRefused},
		{"anything else", fail(errors.New("secret internals")), nil, 500, "", "internal error", ReasonInternal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			f.infer = tc.infer
			w := do(newGateway(t, f, nil), "POST", "/v2/models/resnet/infer", reqBody, tc.hdr)
			if w.Code != tc.code {
				t.Fatalf("status %d (%s), want %d", w.Code, w.Body, tc.code)
			}
			if got := w.Header().Get("Retry-After"); got != tc.retry {
				t.Errorf("Retry-After %q, want %q", got, tc.retry)
			}
			if msg := errorOf(t, w); !strings.Contains(msg, tc.message) || strings.Contains(msg, "secret") {
				t.Errorf("error %q, want it to mention %q", msg, tc.message)
			}
			if got := reasonOf(t, w); got != tc.reason {
				t.Errorf("reason %q, want %q", got, tc.reason)
			}
			_, orig := tc.infer(expired(), "resnet", nil)
			back := ResponseError("resnet", w.Code, w.Body.Bytes())
			if a, b := outcome(orig), outcome(back); a != b {
				t.Errorf("ResponseError gives %v (%s), the gateway was given %v (%s)", back, b, orig, a)
			}
		})
	}
}

// expired is a context whose deadline has passed.
func expired() context.Context {
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	cancel()
	return ctx
}

// outcome names an Infer error as the load generator's reports do: the
// drop reason, or the failure's class and, for a backend, its cause's kind.
func outcome(err error) string {
	var be *frontend.BackendError
	if r, ok := frontend.IsDrop(err); ok {
		return "drop " + string(r)
	}
	if errors.As(err, &be) {
		kind, _, _ := strings.Cut(be.Cause, ":")
		return "backend " + kind
	}
	for _, e := range []error{frontend.ErrUnknownModel, frontend.ErrNotConnected, frontend.ErrSchedulerLost, frontend.ErrClosed,
		frontend.ErrBadDeadline, frontend.ErrRefused, context.DeadlineExceeded} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return "other"
}

// reasonOf returns the reason of a JSON error body.
func reasonOf(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var e struct {
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
		t.Fatalf("body %q: %v", w.Body, err)
	}
	return e.Reason
}

func TestRetryAfterRoundsUpAndCanBeOff(t *testing.T) {
	for _, c := range []struct {
		after time.Duration
		want  string
	}{{1500 * time.Millisecond, "2"}, {0, ""}} {
		f := newFake()
		f.infer = func(context.Context, string, []byte) ([]byte, error) {
			return nil, &frontend.DropError{Reason: frontend.DropOverload}
		}
		w := do(newGateway(t, f, func(cfg *Config) { cfg.RetryAfter = c.after }), "POST", "/v2/models/resnet/infer", reqBody, nil)
		if got := w.Header().Get("Retry-After"); w.Code != 503 || got != c.want {
			t.Errorf("RetryAfter %v: %d Retry-After %q, want %q", c.after, w.Code, got, c.want)
		}
	}
}

// TestCallerGoneWritesNothing: a request whose caller left ends without a
// response, whether the client reports a canceled drop or a context error.
func TestCallerGoneWritesNothing(t *testing.T) {
	for _, err := range []error{&frontend.DropError{Reason: frontend.DropCanceled}, context.Canceled} {
		f := newFake()
		f.infer = func(ctx context.Context, _ string, _ []byte) ([]byte, error) {
			<-ctx.Done()
			return nil, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r := httptest.NewRequest("POST", "/v2/models/resnet/infer", bytes.NewReader(reqBody)).WithContext(ctx)
		w := httptest.NewRecorder()
		newGateway(t, f, nil).ServeHTTP(w, r)
		if w.Body.Len() != 0 || w.Header().Get("Content-Type") != "" {
			t.Fatalf("%v: wrote %d %q", err, w.Code, w.Body)
		}
	}
}

func TestTimeouts(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		hdr     string
		want    time.Duration // 0: no deadline
		version string
	}{
		{"none", `{"inputs":[{"name":"a","shape":[1],"datatype":"UINT8","data":[1]}]}`, "", 0, ""},
		{"header", `{"inputs":[{"name":"a","shape":[1],"datatype":"UINT8","data":[1]}]}`, "20ms", 20 * time.Millisecond, ""},
		{"parameter", `{"parameters":{"timeout_ms":30},"inputs":[{"name":"a","shape":[1],"datatype":"UINT8","data":[1]}]}`, "", 30 * time.Millisecond, ""},
		{"fractional parameter", `{"parameters":{"timeout_ms":0.5},"inputs":[{"name":"a","shape":[1],"datatype":"UINT8","data":[1]}]}`, "", 500 * time.Microsecond, ""},
		{"shorter header wins", `{"parameters":{"timeout_ms":3000},"inputs":[{"name":"a","shape":[1],"datatype":"UINT8","data":[1]}]}`, "40ms", 40 * time.Millisecond, ""},
		{"shorter parameter wins", `{"parameters":{"timeout_ms":25},"inputs":[{"name":"a","shape":[1],"datatype":"UINT8","data":[1]}]}`, "1h", 25 * time.Millisecond, ""},
		{"Triton's timeout, in microseconds", `{"parameters":{"timeout":35000},"inputs":[{"name":"a","shape":[1],"datatype":"UINT8","data":[1]}]}`, "", 35 * time.Millisecond, ""},
		{"the shortest of both parameters", `{"parameters":{"timeout_ms":50,"timeout":45000},"inputs":[{"name":"a","shape":[1],"datatype":"UINT8","data":[1]}]}`, "", 45 * time.Millisecond, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			hdr := map[string]string{}
			if tc.hdr != "" {
				hdr[TimeoutHeader] = tc.hdr
			}
			start := time.Now()
			w := do(newGateway(t, f, nil), "POST", "/v2/models/resnet/infer", []byte(tc.body), hdr)
			if w.Code != 200 {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			// The frontend schedules by the SLO or the timeout, whichever
			// is shorter, less the HTTP budget (at most half of it).
			eff := f.models["resnet"].SLO
			if tc.want > 0 && tc.want < eff {
				eff = tc.want
			}
			eff -= min(Default().HTTPBudget, eff/2)
			if f.schedule.Before(start.Add(eff)) || f.schedule.After(f.called.Add(eff)) {
				t.Errorf("scheduled by %v, want %v after a moment in [%v, %v]", f.schedule, eff, start, f.called)
			}
			if tc.want == 0 {
				if f.hasDL {
					t.Fatalf("deadline %v set without a timeout", f.dl)
				}
				return
			}
			// The deadline is set between start and the call.
			if !f.hasDL || f.dl.Before(start.Add(tc.want)) || f.dl.After(f.called.Add(tc.want)) {
				t.Fatalf("deadline %v, want %v after a moment in [%v, %v]", f.dl, tc.want, start, f.called)
			}
		})
	}
}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestLogging(t *testing.T) {
	var debug, info syncBuffer
	f := newFake()
	gd := newGateway(t, f, func(c *Config) { c.Log = zerolog.New(&debug).Level(zerolog.DebugLevel) })
	gi := newGateway(t, f, func(c *Config) { c.Log = zerolog.New(&info).Level(zerolog.InfoLevel) })
	for _, g := range []*Gateway{gd, gi} {
		do(g, "POST", "/v2/models/resnet/infer", reqBody, nil)
		do(g, "POST", "/v2/models/resnet/infer", []byte(`{`), nil)
	}
	for _, want := range []string{`"model":"resnet"`, `"id":"q"`, `"status":200`, `"bytes_in":1`, `"status":400`, `"bad_request":"malformed`} {
		if !strings.Contains(debug.String(), want) {
			t.Errorf("debug log lacks %s:\n%s", want, debug.String())
		}
	}
	if info.String() != "" {
		t.Errorf("info-level gateway logged per-request lines:\n%s", info.String())
	}
	f.infer = func(context.Context, string, []byte) ([]byte, error) { return nil, errors.New("boom") }
	do(gi, "POST", "/v2/models/resnet/infer", reqBody, nil)
	if s := info.String(); !strings.Contains(s, `"level":"error"`) || !strings.Contains(s, "boom") {
		t.Errorf("a 500 is not logged as an error with its cause:\n%s", s)
	}
}

// lineSink hands each log line to a channel, so that a test can wait for a
// request to end on a server's goroutine.
type lineSink chan string

func (l lineSink) Write(p []byte) (int, error) { l <- string(p); return len(p), nil }

// TestOverHTTP runs the gateway behind a real server: a request round
// trips, and a client that disconnects cancels its request.
func TestOverHTTP(t *testing.T) {
	f := newFake()
	started := make(chan struct{})
	f.infer = func(ctx context.Context, _ string, in []byte) ([]byte, error) {
		if in[0] == 1 {
			return []byte{42}, nil
		}
		close(started)
		<-ctx.Done()
		return nil, &frontend.DropError{Model: "resnet", Reason: frontend.DropCanceled}
	}
	logs := make(lineSink, 4)
	srv := httptest.NewServer(newGateway(t, f, func(c *Config) { c.Log = zerolog.New(logs).Level(zerolog.DebugLevel) }))
	defer srv.Close()

	resp, err := http.Post(srv.URL+"/v2/models/resnet/infer", "application/json", bytes.NewReader(reqBody))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"data":[42]`) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	<-logs

	ctx, cancel := context.WithCancel(context.Background())
	hang := bytes.Replace(reqBody, []byte(`"data":[1]`), []byte(`"data":[2]`), 1)
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v2/models/resnet/infer", bytes.NewReader(hang))
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-started
	cancel()
	if err := <-done; err == nil {
		t.Fatal("canceled request got a response")
	}
	if line := <-logs; !strings.Contains(line, `"status":499`) {
		t.Fatalf("disconnect logged as %s", line)
	}
}

// timedFake also reports the batch each request ran in.
type timedFake struct {
	*fakeInferer
	batch Batch
}

func (f timedFake) InferTimed(ctx context.Context, model string, input []byte, deadline time.Time) ([]byte, Batch, error) {
	out, err := f.Infer(ctx, model, input, deadline)
	return out, f.batch, err
}

func TestTimedInfererReportsTheBatch(t *testing.T) {
	started := time.Unix(100, 5)
	f := timedFake{newFake(), Batch{Size: 7, Started: started, Finished: started.Add(3 * time.Millisecond)}}
	g, err := New(f, Default())
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"inputs":[{"name":"x","datatype":"UINT8","shape":[2],"data":[1,2]}]}`)
	rec := do(g, http.MethodPost, "/v2/models/resnet/infer", body, nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var resp struct {
		Parameters map[string]int64 `json:"parameters"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{ParamBatchSize: 7, ParamBatchStarted: started.UnixNano(), ParamBatchFinished: started.Add(3 * time.Millisecond).UnixNano()}
	for k, v := range want {
		if resp.Parameters[k] != v {
			t.Errorf("parameter %s = %d, want %d (%s)", k, resp.Parameters[k], v, rec.Body)
		}
	}
	if b, ok := ResponseBatch(rec.Body.Bytes()); !ok || b.Size != f.batch.Size || !b.Started.Equal(f.batch.Started) || !b.Finished.Equal(f.batch.Finished) {
		t.Errorf("ResponseBatch reads %+v %v, want %+v", b, ok, f.batch)
	}
	// A plain Inferer adds no parameters.
	rec = do(newGateway(t, newFake(), nil), http.MethodPost, "/v2/models/resnet/infer", body, nil)
	if bytes.Contains(rec.Body.Bytes(), []byte(ParamBatchSize)) {
		t.Errorf("batch parameters without a TimedInferer: %s", rec.Body)
	}
}

// Observe sees every inference request once, with its status; a model the
// frontend does not serve is reported as "", whatever the path said.
func TestObserveSeesEveryInference(t *testing.T) {
	type seen struct {
		model  string
		status int
	}
	var got []seen
	f := newFake()
	f.infer = func(_ context.Context, model string, input []byte) ([]byte, error) {
		if model != "resnet" {
			return nil, fmt.Errorf("%w %q", frontend.ErrUnknownModel, model)
		}
		return input, nil
	}
	g := newGateway(t, f, func(c *Config) {
		c.MaxBodyBytes = 200
		c.Observe = func(model string, status int, took time.Duration) {
			if took < 0 {
				t.Errorf("negative duration %v", took)
			}
			got = append(got, seen{model, status})
		}
	})
	body := []byte(`{"inputs":[{"name":"x","datatype":"BYTES","shape":[1],"data":["hi"]}]}`)
	do(g, http.MethodPost, "/v2/models/resnet/infer", body, nil)
	do(g, http.MethodPost, "/v2/models/resnet/infer", []byte(`{`), nil)
	do(g, http.MethodPost, "/v2/models/some-random-path-1234/infer", body, nil)
	do(g, http.MethodPost, "/v2/models/resnet/infer", bytes.Repeat([]byte(" "), 300), nil)
	do(g, http.MethodGet, "/v2/models/resnet/ready", nil, nil) // not an inference
	do(g, http.MethodGet, "/v2/models/resnet/infer", nil, nil) // 405 before the handler
	want := []seen{{"resnet", http.StatusOK}, {"resnet", http.StatusBadRequest}, {"", http.StatusNotFound},
		{"resnet", http.StatusRequestEntityTooLarge}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("observed %v; want %v", got, want)
	}
}

// The frontend schedules a request by its SLO, or its own timeout if
// shorter, less the HTTP budget, which never takes more than half.
func TestSchedulingDeadlineKeepsTheHTTPBudget(t *testing.T) {
	at := time.Unix(1000, 0)
	ms := time.Millisecond
	for _, tc := range []struct {
		budget, slo, timeout, want time.Duration // want: after at; 0 for no deadline
	}{
		{2 * ms, 100 * ms, 0, 98 * ms},
		{2 * ms, 100 * ms, 20 * ms, 18 * ms},
		{2 * ms, 100 * ms, time.Second, 98 * ms},
		{2 * ms, 100 * ms, ms, ms / 2},
		{2 * ms, 3 * ms, 0, 3*ms - 3*ms/2},
		{0, 100 * ms, 0, 100 * ms},
		{2 * ms, 0, 20 * ms, 0},
	} {
		g := newGateway(t, newFake(), func(c *Config) { c.HTTPBudget = tc.budget })
		got := g.deadline(at, tc.slo, tc.timeout)
		if (tc.want == 0) != got.IsZero() || (tc.want != 0 && got.Sub(at) != tc.want) {
			t.Errorf("budget %v, SLO %v, timeout %v: deadline %v after, want %v", tc.budget, tc.slo, tc.timeout, got.Sub(at), tc.want)
		}
	}
}

// The priority parameter is Triton's (1 the highest, 0 the default) and
// reaches the Inferer as a level where higher ranks first.
func TestPriorityParameter(t *testing.T) {
	for _, tc := range []struct {
		param string
		want  uint8
	}{{"", 0}, {`"priority":0,`, 0}, {`"priority":1,`, 255}, {`"priority":2,`, 254}, {`"priority":255,`, 1}} {
		f := newFake()
		body := `{"parameters":{` + tc.param + `"binary_data_output":false},"inputs":[{"name":"a","shape":[1],"datatype":"UINT8","data":[1]}]}`
		if w := do(newGateway(t, f, nil), "POST", "/v2/models/resnet/infer", []byte(body), nil); w.Code != 200 {
			t.Fatalf("%s: status %d: %s", tc.param, w.Code, w.Body)
		}
		if f.priority != tc.want {
			t.Errorf("%q: level %d, want %d", tc.param, f.priority, tc.want)
		}
	}
}

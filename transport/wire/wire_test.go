package wire_test

import (
	"bytes"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/symphony-serving/symphony/tensor"
	"github.com/symphony-serving/symphony/transport/wire"
)

// samples returns a valid message of every kind, with every field set.
// Slices are non-nil where decoding makes them non-nil, so that a decoded
// sample is deeply equal to the original.
func samples() []wire.Message {
	in := wire.InputRef{Region: 1, Offset: 1 << 40, Length: 4096, Key: 77}
	return []wire.Message{
		&wire.Hello{Version: wire.Version, Role: wire.RoleBackend, Name: "backend-1", DataAddr: "10.0.0.1:7000", GPUs: 8},
		&wire.Welcome{Version: wire.Version, ID: 3,
			Models: []wire.ModelSpec{{ID: 1, Name: "resnet50", SLO: 50 * time.Millisecond,
				Latency: []time.Duration{5 * time.Millisecond, 7 * time.Millisecond}, StaticMemory: 98 << 20, DynamicMemory: 1 << 30},
				{ID: 2, Name: "cnn", SLO: 20 * time.Millisecond, Latency: []time.Duration{time.Millisecond},
					Inputs:  []tensor.Spec{{Name: "x", Datatype: "FP32", Shape: []int64{1, 8, 8}}, {Name: "k", Datatype: "INT64", Shape: []int64{}}},
					Outputs: []tensor.Spec{{Name: "y", Datatype: "FP32", Shape: []int64{3}}}}},
			Frontends: []wire.FrontendUp{{ID: 2, DataAddr: "10.0.0.2:7001"}}, Features: wire.FeatureRDMA,
			States: []wire.ModelStatus{{Model: 1, State: wire.ModelUnavailable, Reason: "not loaded yet"}}},
		&wire.Reject{Reason: "protocol version 2, want 1"},
		&wire.Submit{Tasks: []wire.Task{{ID: 1, Model: 1, Deadline: -5, Input: in}, {ID: 1<<64 - 1, Model: 2, Deadline: 1 << 62, Input: in}, {ID: 3, Model: 2, Deadline: 7, Input: in, Priority: 200}}},
		&wire.Ended{Ends: []wire.End{{ID: 9, Code: wire.EndDropDeadline, Detail: "late"}, {ID: 10, Code: wire.EndBadRequest}}},
		&wire.BackendReady{GPUs: 4},
		&wire.Plan{ID: 5, GPU: 6, Model: 7, ExecAt: 1e18, Deadline: 2e18,
			Tasks: []wire.PlanTask{{ID: 1, Frontend: 2, Input: in, FinishBy: 3e18}}},
		&wire.GPUFree{GPU: 1, Plan: 2, StartedAt: 3, FinishedAt: 4, Failed: 1, Ran: 5, Dropped: 2},
		&wire.FrontendUp{ID: 1, DataAddr: "fe:1"},
		&wire.FrontendDown{ID: 1},
		&wire.Read{Seq: 3, Ops: []wire.InputRef{in, {}}},
		&wire.ReadReply{Seq: 3, Data: [][]byte{[]byte("input"), nil, {}}, Missing: []uint32{1}},
		&wire.Results{Results: []wire.Result{{ID: 1, Output: []byte{1, 2, 3}, BatchSize: 4, StartedAt: 5, FinishedAt: 6},
			{ID: 2, Code: wire.EndExecutorFailed, Detail: "oom"}}},
		&wire.RDMAConnect{Endpoint: ep},
		&wire.RDMAAccept{ForQPN: 0x1234, Endpoint: ep, Seal: 0xfeedface, ReuseDelay: 50 * time.Millisecond,
			Regions: []wire.RDMARegion{{ID: 0, Addr: 0x7f00_0000_0000, Length: 8 << 20, RKey: 0xabc}, {ID: 3, Addr: 1, Length: 1, RKey: 1}}},
		&wire.RDMARefuse{ForQPN: 0x1234, Reason: "frontend built without RDMA support"},
		&wire.RDMARegions{Regions: []wire.RDMARegion{{ID: 4, Addr: 0x7f00_1000_0000, Length: 8 << 20, RKey: 0xdef}}},
		&wire.Heartbeat{},
		&wire.Leaving{},
		&wire.LeaveOK{},
		&wire.Retire{Plans: []uint64{7, 1 << 60}},
		&wire.Control{Seq: 9, Op: wire.OpUnload, Model: 3},
		&wire.ControlDone{Seq: 9, Memory: 12 << 20, Error: "model.onnx: no such file"},
		&wire.ModelStates{States: []wire.ModelStatus{{Model: 0, State: wire.ModelLoading}, {Model: 3, State: wire.ModelReady, Reason: "x"}}},
	}
}

// ep is a RoCE endpoint: no LID, an IPv4-mapped GID.
var ep = wire.RDMAEndpoint{QPN: 0xabcdef, PSN: 0x123456, GID: [16]byte{10: 0xff, 11: 0xff, 12: 10, 15: 1}, MTU: 3, ReadDepth: 16}

func TestSamplesCoverEveryKind(t *testing.T) {
	seen := make(map[wire.Kind]bool)
	for _, m := range samples() {
		if err := m.Validate(); err != nil {
			t.Errorf("%v sample invalid: %v", m.Kind(), err)
		}
		seen[m.Kind()] = true
	}
	for _, k := range wire.Kinds() {
		if !seen[k] {
			t.Errorf("no sample of %v", k)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for _, m := range samples() {
		t.Run(m.Kind().String(), func(t *testing.T) {
			frame := wire.AppendFrame([]byte("prefix"), m)[len("prefix"):]
			k, n, err := wire.ParseHeader(frame, wire.DefaultMaxFrame)
			if err != nil || k != m.Kind() || n != len(frame)-wire.HeaderSize {
				t.Fatalf("ParseHeader = %v, %d, %v; want %v, %d", k, n, err, m.Kind(), len(frame)-wire.HeaderSize)
			}
			if body := wire.Marshal(m); !bytes.Equal(body, frame[wire.HeaderSize:]) {
				t.Errorf("Marshal differs from the frame's body")
			}
			got, err := wire.Decode(k, frame[wire.HeaderSize:])
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, m) {
				t.Errorf("decoded %+v, want %+v", got, m)
			}
		})
	}
}

func TestParseHeader(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    []byte
		max  int
		err  string
	}{
		{"short", []byte{0, 0, 0, 1}, 10, "short frame header"},
		{"empty", []byte{0, 0, 0, 0, 1}, 10, "empty frame"},
		{"too large", []byte{0x40, 0, 0, 0, 1}, wire.DefaultMaxFrame, "frame too large"},
		{"over max", []byte{0, 0, 0, 11, 1}, 10, "frame too large"},
		{"kind 0", []byte{0, 0, 0, 1, 0}, 10, "unknown message kind 0"},
		{"kind past the end", []byte{0, 0, 0, 1, 200}, 10, "unknown message kind 200"},
	} {
		if _, _, err := wire.ParseHeader(tc.h, tc.max); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
		}
	}
	if k, n, err := wire.ParseHeader([]byte{0, 0, 0, 10, byte(wire.KindSubmit)}, 10); err != nil || k != wire.KindSubmit || n != 9 {
		t.Errorf("a frame of exactly max: %v, %d, %v", k, n, err)
	}
}

// TestDecodeErrors checks that bad bodies give errors naming the message.
func TestDecodeErrors(t *testing.T) {
	long := strings.Repeat("x", wire.MaxName+1)
	for _, tc := range []struct {
		name string
		m    wire.Message
		body []byte
		err  string
	}{
		{"empty body", &wire.Hello{}, nil, "bad Hello message"},
		{"too few fields", &wire.Hello{}, []byte{0x91, 0x01}, "1 fields, want 5"},
		{"trailing bytes", &wire.FrontendDown{}, []byte{0x91, 0x01, 0x01}, "1 trailing bytes"},
		{"overflow", &wire.Hello{}, wire.Marshal(&wire.BackendReady{})[:0], "bad Hello"},
		{"long name", &wire.Hello{}, wire.Marshal(&wire.Hello{Version: 1, Role: wire.RoleFrontend, Name: long}), "limit 256"},
		{"invalid", &wire.Plan{}, wire.Marshal(&wire.Plan{}), "invalid Plan message"},
		{"bad role", &wire.Hello{}, wire.Marshal(&wire.Hello{Version: 1}), "role: unknown 0"},
	} {
		if _, err := wire.Decode(tc.m.Kind(), tc.body); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
		}
	}
	if _, err := wire.Decode(wire.Kind(0), nil); err == nil {
		t.Error("decoded kind 0")
	}
}

// TestNewerPeerFields checks that fields a newer peer appends are skipped.
func TestNewerPeerFields(t *testing.T) {
	body := wire.Marshal(&wire.FrontendDown{ID: 4})
	body[0]++                                        // one more field...
	body = append(body, 0x92, 0xa1, 'x', 0x81, 1, 2) // ...holding ["x", {1: 2}]
	m, err := wire.Decode(wire.KindFrontendDown, body)
	if err != nil || m.(*wire.FrontendDown).ID != 4 {
		t.Fatalf("Decode = %+v, %v", m, err)
	}
}

// A Welcome from a listener that predates Features (four fields) decodes
// with no features, so a backend does not send such a frontend RDMA
// messages it would take as a protocol error.
func TestWelcomeFromOlderListener(t *testing.T) {
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	_ = e.EncodeArrayLen(4)
	_ = e.EncodeUint32(wire.Version)
	_ = e.EncodeUint32(3)
	_ = e.EncodeArrayLen(0)
	_ = e.EncodeArrayLen(0)
	m, err := wire.Decode(wire.KindWelcome, buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if w := m.(*wire.Welcome); w.ID != 3 || w.Features != 0 {
		t.Fatalf("older Welcome decoded as %+v, want ID 3 and no features", w)
	}
}

// A Welcome from a scheduler that predates tensors (ModelSpec of four
// fields) decodes with none; a peer that predates them skips the two
// trailing fields, as TestNewerPeerFields checks for any message.
func TestModelSpecFromOlderScheduler(t *testing.T) {
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	_ = e.EncodeArrayLen(5)
	_ = e.EncodeUint32(wire.Version)
	_ = e.EncodeUint32(3)
	_ = e.EncodeArrayLen(1)
	_ = e.EncodeArrayLen(4)
	_ = e.EncodeUint32(7)
	_ = e.EncodeString("m")
	_ = e.EncodeInt64(int64(time.Second))
	_ = e.EncodeArrayLen(1)
	_ = e.EncodeInt64(int64(time.Millisecond))
	_ = e.EncodeArrayLen(0)
	_ = e.EncodeUint32(0)
	m, err := wire.Decode(wire.KindWelcome, buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if s := m.(*wire.Welcome).Models[0]; s.ID != 7 || s.Inputs != nil || s.Outputs != nil {
		t.Fatalf("older ModelSpec decoded as %+v", s)
	}
}

// oldWelcome is a Welcome of one ModelSpec of fields fields (4: before
// tensors; 6: before memory; 8: today's; any other count: fields of a
// newer scheduler after those, nil), written by hand as a scheduler of
// that version would.
func oldWelcome(fields int, static, dynamic int64) []byte {
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	_ = e.EncodeArrayLen(6)
	_ = e.EncodeUint32(wire.Version)
	_ = e.EncodeUint32(3)
	_ = e.EncodeArrayLen(1)
	_ = e.EncodeArrayLen(fields)
	_ = e.EncodeUint32(7)
	_ = e.EncodeString("m")
	_ = e.EncodeInt64(int64(time.Second))
	_ = e.EncodeArrayLen(1)
	_ = e.EncodeInt64(int64(time.Millisecond))
	if fields >= 6 {
		_ = e.EncodeArrayLen(1)
		_ = e.EncodeArrayLen(3)
		_ = e.EncodeString("x")
		_ = e.EncodeString("FP32")
		_ = e.EncodeArrayLen(1)
		_ = e.EncodeInt64(2)
		_ = e.EncodeArrayLen(1)
		_ = e.EncodeArrayLen(3)
		_ = e.EncodeString("y")
		_ = e.EncodeString("FP32")
		_ = e.EncodeArrayLen(0)
	}
	written := min(fields, 4)
	if fields >= 6 {
		written = 6
	}
	if fields >= 8 {
		_ = e.EncodeInt64(static)
		_ = e.EncodeInt64(dynamic)
		written = 8
	}
	for i := written; i < fields; i++ {
		_ = e.EncodeNil()
	}
	_ = e.EncodeArrayLen(0)
	_ = e.EncodeUint32(0)
	_ = e.EncodeArrayLen(0)
	return buf.Bytes()
}

// A ModelSpec's memory is optional and trailing: from a scheduler that
// predates it (six fields), or tensors too (four), it reads as 0,
// unknown; a newer scheduler's further fields are skipped; what is sent
// comes back.
func TestModelSpecMemory(t *testing.T) {
	for _, tc := range []struct {
		fields           int
		static, dynamic  int64
		wantTensors      bool
		wantStat, wantDy int64
	}{
		{4, 0, 0, false, 0, 0},
		{5, 0, 0, false, 0, 0},
		{6, 0, 0, true, 0, 0},
		{7, 0, 0, true, 0, 0},
		{8, 4 << 30, 2 << 30, true, 4 << 30, 2 << 30},
		{8, 0, 0, true, 0, 0},
		{10, 1, 0, true, 1, 0},
	} {
		m, err := wire.Decode(wire.KindWelcome, oldWelcome(tc.fields, tc.static, tc.dynamic))
		if err != nil {
			t.Errorf("%d fields: %v", tc.fields, err)
			continue
		}
		s := m.(*wire.Welcome).Models[0]
		if s.ID != 7 || (s.Inputs != nil) != tc.wantTensors || s.StaticMemory != tc.wantStat || s.DynamicMemory != tc.wantDy {
			t.Errorf("%d fields decoded as %+v, want tensors %v, memory %d + %d", tc.fields, s, tc.wantTensors, tc.wantStat, tc.wantDy)
		}
	}
	// The strict decoder refuses a negative size, naming the field.
	for _, tc := range []struct {
		static, dynamic int64
		want            string
	}{
		{-1, 0, "invalid Welcome message: models[0].static_memory: -1 bytes negative"},
		{0, -1 << 40, "invalid Welcome message: models[0].dynamic_memory: -1099511627776 bytes negative"},
	} {
		if _, err := wire.Decode(wire.KindWelcome, oldWelcome(8, tc.static, tc.dynamic)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("memory %d + %d: %v, want %q", tc.static, tc.dynamic, err, tc.want)
		}
		s := wire.ModelSpec{ID: 1, Name: "m", SLO: time.Second, Latency: []time.Duration{time.Millisecond}, StaticMemory: tc.static, DynamicMemory: tc.dynamic}
		if _, err := wire.Decode(wire.KindWelcome, wire.Marshal(&wire.Welcome{Models: []wire.ModelSpec{s}})); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("marshalled memory %d + %d: %v, want %q", tc.static, tc.dynamic, err, tc.want)
		}
	}
	// Not an integer.
	body := bytes.Replace(oldWelcome(8, 5, 6), []byte{0xd3, 0, 0, 0, 0, 0, 0, 0, 5}, []byte{0xa1, 'x'}, 1)
	if _, err := wire.Decode(wire.KindWelcome, body); err == nil || !strings.Contains(err.Error(), "models[].static_memory") {
		t.Errorf("a string for static memory: %v", err)
	}
}

// Tensor specs a peer sends are validated and bounded.
func TestModelSpecTensorsRefused(t *testing.T) {
	base := wire.ModelSpec{ID: 1, Name: "m", SLO: time.Second, Latency: []time.Duration{time.Millisecond},
		Inputs: []tensor.Spec{{Name: "x", Datatype: "FP32", Shape: []int64{2}}}, Outputs: []tensor.Spec{{Name: "y", Datatype: "FP32", Shape: []int64{1}}}}
	for _, tc := range []struct {
		name string
		mod  func(*wire.ModelSpec)
		want string
	}{
		{"no outputs", func(s *wire.ModelSpec) { s.Outputs = nil }, "both or neither"},
		{"dynamic", func(s *wire.ModelSpec) { s.Inputs[0].Shape = []int64{-1} }, "only the batch dimension may be dynamic"},
		{"BYTES", func(s *wire.ModelSpec) { s.Outputs[0].Datatype = "BYTES" }, "BYTES"},
		{"too many", func(s *wire.ModelSpec) {
			s.Inputs = make([]tensor.Spec, tensor.MaxTensors+1)
		}, "257 elements, limit 256"},
		{"too many dims", func(s *wire.ModelSpec) { s.Inputs[0].Shape = make([]int64, tensor.MaxDims+1) }, "33 elements, limit 32"},
	} {
		s := base
		s.Inputs, s.Outputs = tensor.Clone(base.Inputs), tensor.Clone(base.Outputs)
		tc.mod(&s)
		body := wire.Marshal(&wire.Welcome{Version: wire.Version, Models: []wire.ModelSpec{s}})
		if _, err := wire.Decode(wire.KindWelcome, body); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// allocs returns the bytes f allocates.
func allocs(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestHugeDeclaredLengths checks that small frames declaring billions of
// elements are refused without allocating for them. (A huge string length
// still costs msgpack's first 1 MiB read chunk, and its conversion to a
// string, before it fails: bounded, hence the 4 MiB allowance.)
func TestHugeDeclaredLengths(t *testing.T) {
	arr32 := []byte{0xdd, 0xff, 0xff, 0xff, 0xf0} // an array of 4 294 967 280
	for _, tc := range []struct {
		kind wire.Kind
		body []byte
	}{
		{wire.KindSubmit, append([]byte{0x91}, arr32...)},
		{wire.KindPlan, append([]byte{0x96, 1, 1, 1, 1, 1}, arr32...)},
		{wire.KindEnded, append([]byte{0x91}, arr32...)},
		{wire.KindRead, append([]byte{0x92, 1}, arr32...)},
		{wire.KindReadReply, append([]byte{0x93, 1}, arr32...)},
		{wire.KindResults, append([]byte{0x91}, arr32...)},
		{wire.KindWelcome, append([]byte{0x94, 1, 1}, arr32...)},
		{wire.KindSubmit, append([]byte{0xdd, 0xff, 0xff, 0xff, 0xf0}, 0x90)}, // the message's own array
		{wire.KindHello, []byte{0x95, 1, 1, 0xdb, 0xff, 0xff, 0xff, 0xf0}},    // a 4 GiB string
	} {
		var err error
		if n := allocs(func() { _, err = wire.Decode(tc.kind, tc.body) }); n > 64<<10 {
			t.Errorf("%v %x: allocated %d bytes", tc.kind, tc.body, n)
		}
		if err == nil {
			t.Errorf("%v %x: decoded", tc.kind, tc.body)
		}
	}
}

// TestHugeBinLength checks a 4 GiB byte-string length in a 9-byte body.
//
// It fails against codec.go as it stands: decoder.bytes calls msgpack's
// DecodeBytes, which allocates the declared length (make([]byte, 0, n) in
// msgpack's readN) before reading, so one ReadReply or Results frame from
// an established peer costs 4 GiB. See the fix in the transport report.
func TestHugeBinLength(t *testing.T) {
	body := []byte{0x93, 1, 0x91, 0xc6, 0xff, 0xff, 0xff, 0xf0, 0x90}
	var err error
	if n := allocs(func() { _, err = wire.Decode(wire.KindReadReply, body) }); n > 1<<20 {
		t.Errorf("allocated %d MiB", n>>20)
	}
	if err == nil {
		t.Error("decoded")
	}
}

// TestDeepNesting checks that a deeply nested value in a skipped field is
// refused.
//
// It fails against codec.go as it stands: decoder.rest skips with msgpack's
// Skip, which recurses once per level without a bound, so a frame of a few
// MB (well under DefaultMaxFrame) holding nested one-element arrays
// overflows the goroutine stack: a fatal error that kills the process, not
// a recoverable panic. See the fix in the transport report.
func TestDeepNesting(t *testing.T) {
	body := append([]byte{0x96, 1, 1, 0xa0, 0xa0, 0}, bytes.Repeat([]byte{0x91}, 100_000)...)
	body = append(body, 0xc0)
	if _, err := wire.Decode(wire.KindHello, body); err == nil {
		t.Error("decoded a Hello with 100 000 levels of nesting")
	}
}

// TestRDMADecodeErrors checks that bad RDMA messages are refused with the
// field named.
func TestRDMADecodeErrors(t *testing.T) {
	withEP := func(f func(e *wire.RDMAEndpoint)) *wire.RDMAConnect {
		e := ep
		f(&e)
		return &wire.RDMAConnect{Endpoint: e}
	}
	accept := func(f func(a *wire.RDMAAccept)) *wire.RDMAAccept {
		a := &wire.RDMAAccept{Endpoint: ep, ReuseDelay: time.Millisecond, Regions: []wire.RDMARegion{{ID: 1, Addr: 1, Length: 1}}}
		f(a)
		return a
	}
	for _, tc := range []struct {
		name string
		m    wire.Message
		err  string
	}{
		{"qpn over 24 bits", withEP(func(e *wire.RDMAEndpoint) { e.QPN = 1 << 24 }), "endpoint.qpn: 16777216 over 24 bits"},
		{"psn over 24 bits", withEP(func(e *wire.RDMAEndpoint) { e.PSN = 1 << 30 }), "endpoint.psn"},
		{"mtu 0", withEP(func(e *wire.RDMAEndpoint) { e.MTU = 0 }), "endpoint.mtu: 0 not an ibv_mtu"},
		{"mtu 6", withEP(func(e *wire.RDMAEndpoint) { e.MTU = 6 }), "endpoint.mtu: 6"},
		{"no read depth", withEP(func(e *wire.RDMAEndpoint) { e.ReadDepth = 0 }), "endpoint.read_depth: zero"},
		{"no address", withEP(func(e *wire.RDMAEndpoint) { e.GID = [16]byte{} }), "neither a LID nor a GID"},
		{"no reuse delay", accept(func(a *wire.RDMAAccept) { a.ReuseDelay = 0 }), "reuse_delay"},
		{"long reuse delay", accept(func(a *wire.RDMAAccept) { a.ReuseDelay = time.Hour }), "reuse_delay: 1h0m0s"},
		{"empty region", accept(func(a *wire.RDMAAccept) { a.Regions[0].Length = 0 }), "regions[0].length: zero"},
		{"region wraps", accept(func(a *wire.RDMAAccept) { a.Regions[0].Addr = 1<<64 - 4; a.Regions[0].Length = 8 }), "regions[0]: addr"},
		{"no regions", &wire.RDMARegions{}, "regions: empty"},
	} {
		if _, err := wire.Decode(tc.m.Kind(), wire.Marshal(tc.m)); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
		}
	}
	// A GID of the wrong length, and a LID over 16 bits, written by hand.
	body := wire.Marshal(&wire.RDMAConnect{Endpoint: ep})
	short := bytes.Replace(body, append([]byte{0xc4, 16}, ep.GID[:]...), append([]byte{0xc4, 4}, ep.GID[:4]...), 1)
	if _, err := wire.Decode(wire.KindRDMAConnect, short); err == nil || !strings.Contains(err.Error(), "endpoint.gid: 4 bytes, want 16") {
		t.Errorf("short gid: %v", err)
	}
	// (EncodeUint16 writes 0xcd and two bytes, after the PSN's 0xce and four.)
	bigLID := bytes.Replace(body, []byte{0xce, 0x00, 0x12, 0x34, 0x56, 0xcd, 0, 0}, []byte{0xce, 0x00, 0x12, 0x34, 0x56, 0xce, 0, 1, 0, 0}, 1)
	if _, err := wire.Decode(wire.KindRDMAConnect, bigLID); err == nil || !strings.Contains(err.Error(), "endpoint.lid: 65536 overflows 16 bits") {
		t.Errorf("lid over 16 bits: %v", err)
	}
	// A region count far beyond the bytes, refused before allocating.
	huge := []byte{0x91, 0xdd, 0xff, 0xff, 0xff, 0xf0}
	var err error
	if n := allocs(func() { _, err = wire.Decode(wire.KindRDMARegions, huge) }); n > 64<<10 || err == nil {
		t.Errorf("huge region count: %v after %d bytes", err, n)
	}
}

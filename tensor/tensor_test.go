package tensor

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

// cnn is the committed test CNN's signature (testdata/models/cnn).
var (
	cnnIn  = []Spec{{Name: "x", Datatype: "FP32", Shape: []int64{1, 8, 8}}}
	twoIn  = []Spec{{Name: "a", Datatype: "FP32", Shape: []int64{2}}, {Name: "b", Datatype: "INT64", Shape: []int64{}}}
	twoOut = []Spec{{Name: "y", Datatype: "FP32", Shape: []int64{3}}, {Name: "k", Datatype: "INT64", Shape: []int64{1}}}
)

// Inputs pack in spec order whatever their order in the request, with or
// without a leading batch dimension of 1; outputs split back by name.
func TestPackSplit(t *testing.T) {
	a, b := Of("a", []int64{2}, []float32{1.5, -2}), Of("b", nil, []int64{-7})
	b.Shape = []int64{}
	data, batched, err := Pack(twoIn, []Tensor{b, a})
	if err != nil || batched {
		t.Fatalf("Pack = %v, %v", batched, err)
	}
	if want := append(slices.Clone(a.Data), b.Data...); !slices.Equal(data, want) {
		t.Fatalf("packed %x, want %x", data, want)
	}
	a.Shape, b.Shape = []int64{1, 2}, []int64{1}
	if _, batched, err = Pack(twoIn, []Tensor{a, b}); err != nil || !batched {
		t.Fatalf("batched Pack = %v, %v", batched, err)
	}
	y, k := Of("y", []int64{3}, []float32{1, float32(math.Inf(-1)), 3}), Of("k", []int64{1}, []int64{math.MinInt64})
	out, err := Split(twoOut, append(slices.Clone(y.Data), k.Data...), true)
	if err != nil {
		t.Fatal(err)
	}
	if out[0].Name != "y" || !slices.Equal(out[0].Shape, []int64{1, 3}) || out[1].Name != "k" {
		t.Fatalf("split %+v", out)
	}
	if v, err := out[0].FP32(); err != nil || v[1] != float32(math.Inf(-1)) {
		t.Fatalf("y = %v, %v", v, err)
	}
	if v, err := out[1].INT64(); err != nil || v[0] != math.MinInt64 {
		t.Fatalf("k = %v, %v", v, err)
	}
	if _, err := out[1].FP32(); err == nil || !strings.Contains(err.Error(), "INT64, not FP32") {
		t.Fatalf("INT64 read as FP32: %v", err)
	}
}

// A single input is passed through without a copy.
func TestPackSingleNoCopy(t *testing.T) {
	x := Of("x", []int64{1, 8, 8}, make([]float32, 64))
	data, _, err := Pack(cnnIn, []Tensor{x})
	if err != nil || &data[0] != &x.Data[0] {
		t.Fatalf("Pack copied or failed: %v", err)
	}
}

// Each kind of mistake is its own error, naming the tensor and the problem.
func TestPackErrors(t *testing.T) {
	good := Of("x", []int64{1, 8, 8}, make([]float32, 64))
	with := func(f func(*Tensor)) []Tensor { x := good; x.Shape = slices.Clone(x.Shape); f(&x); return []Tensor{x} }
	for _, tc := range []struct {
		name   string
		specs  []Spec
		inputs []Tensor
		is     error
		want   string
	}{
		{"missing", twoIn, []Tensor{Of("a", []int64{2}, []float32{1, 2})}, ErrMissing, `"b"`},
		{"unknown", cnnIn, []Tensor{good, Of("z", nil, []float32{1})}, ErrUnknown, `"z"`},
		{"twice", cnnIn, []Tensor{good, good}, ErrUnknown, `"x" appears twice`},
		{"datatype", cnnIn, []Tensor{Of("x", []int64{1, 8, 8}, make([]float64, 64))}, ErrDatatype, `"x": wrong datatype FP64; the model takes FP32`},
		{"shape", cnnIn, with(func(x *Tensor) { x.Shape = []int64{8, 8} }), ErrShape, `"x": wrong shape [8 8]`},
		{"batch of 2", cnnIn, with(func(x *Tensor) { x.Shape = []int64{2, 1, 8, 8} }), ErrShape, "a batch of 2"},
		{"bytes", cnnIn, with(func(x *Tensor) { x.Data = x.Data[:255] }), ErrSize, `"x": wrong byte count: 255 bytes`},
		{"batch disagreement", twoIn, []Tensor{Of("a", []int64{1, 2}, []float32{1, 2}), Of("b", []int64{}, []int64{1})}, ErrShape, "leading batch dimension"},
	} {
		_, _, err := Pack(tc.specs, tc.inputs)
		if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %v naming %s", tc.name, err, tc.is, tc.want)
		}
	}
	if _, err := Split(twoOut, make([]byte, 19), false); !errors.Is(err, ErrSize) {
		t.Errorf("short result: %v", err)
	}
}

// Specs are refused for what a fixed layout cannot hold.
func TestValidateSpecs(t *testing.T) {
	for _, tc := range []struct {
		specs []Spec
		want  string
	}{
		{[]Spec{{Name: "s", Datatype: "BYTES"}}, "BYTES, whose elements vary"},
		{[]Spec{{Name: "x", Datatype: "FP8"}}, `unknown datatype "FP8"`},
		{[]Spec{{Name: "x", Datatype: "FP32", Shape: []int64{-1, 3}}}, "only the batch dimension may be dynamic"},
		{[]Spec{{Name: "x", Datatype: "FP32", Shape: []int64{1 << 40, 1 << 40}}}, "over 67108864 bytes"},
		{[]Spec{{Name: "x", Datatype: "FP32"}, {Name: "x", Datatype: "FP32"}}, `"x" appears twice`},
		{[]Spec{{Datatype: "FP32"}}, "no name"},
	} {
		if err := ValidateSpecs("input", tc.specs); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.specs, err, tc.want)
		}
	}
	if err := ValidateSpecs("input", append(cnnIn, twoOut...)); err != nil {
		t.Error(err)
	}
}

// Every Number type round-trips through its datatype.
func TestValuesRoundTrip(t *testing.T) {
	check := func(dt string, ok bool) {
		t.Helper()
		if !ok {
			t.Errorf("%s did not round-trip", dt)
		}
	}
	check("BOOL", roundTrip(t, []bool{true, false}))
	check("INT8", roundTrip(t, []int8{-128, 127}))
	check("INT16", roundTrip(t, []int16{-32768, 1}))
	check("INT32", roundTrip(t, []int32{math.MinInt32, 5}))
	check("UINT8", roundTrip(t, []uint8{0, 255}))
	check("UINT16", roundTrip(t, []uint16{65535}))
	check("UINT32", roundTrip(t, []uint32{math.MaxUint32}))
	check("UINT64", roundTrip(t, []uint64{math.MaxUint64}))
	check("FP64", roundTrip(t, []float64{math.Pi}))
	if _, err := Values[bool](Tensor{Name: "b", Datatype: "BOOL", Data: []byte{2}}); err == nil {
		t.Error("BOOL 2 accepted")
	}
	if _, err := Values[int32](Tensor{Name: "i", Datatype: "INT32", Data: []byte{1, 2, 3}}); err == nil {
		t.Error("3 bytes of INT32 accepted")
	}
}

func roundTrip[T Number](t *testing.T, v []T) bool {
	x := Of("t", []int64{int64(len(v))}, v)
	size, _ := ElemSize(x.Datatype)
	got, err := Values[T](x)
	return err == nil && slices.Equal(got, v) && len(x.Data) == size*len(v)
}

// ONNX codes map to KServe datatypes and back.
func TestONNX(t *testing.T) {
	for code := int32(0); code < 30; code++ {
		dt, err := FromONNX(code)
		if err != nil {
			continue
		}
		if back, ok := ONNXCode(dt); !ok || back != code {
			t.Errorf("%d → %s → %d", code, dt, back)
		}
	}
	if dt, _ := FromONNX(1); dt != "FP32" {
		t.Errorf("FLOAT is %s", dt)
	}
	if _, err := FromONNX(14); err == nil || !strings.Contains(err.Error(), "COMPLEX64") {
		t.Errorf("COMPLEX64: %v", err)
	}
}

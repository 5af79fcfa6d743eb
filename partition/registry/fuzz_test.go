package registry

import (
	"reflect"
	"testing"
)

// fuzzDecoder checks one decoder on arbitrary bytes: it must not panic,
// and what it accepts must be valid and survive Encode and Decode
// unchanged.
func fuzzDecoder[T record](f *testing.F, seeds ...T) {
	for _, s := range seeds {
		b, err := Encode(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"name":"a","name":"a"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := Decode[T](b)
		if err != nil {
			return
		}
		if err := v.Validate(); err != nil {
			t.Fatalf("accepted an invalid %+v: %v", v, err)
		}
		again, err := Encode(v)
		if err != nil {
			t.Fatalf("accepted %+v does not encode: %v", v, err)
		}
		w, err := Decode[T](again)
		if err != nil {
			t.Fatalf("re-encoded %s does not decode: %v", again, err)
		}
		if !reflect.DeepEqual(v, w) {
			t.Fatalf("round trip changed %+v into %+v", v, w)
		}
	})
}

func FuzzDecodeScheduler(f *testing.F) { fuzzDecoder(f, sampleScheduler()) }
func FuzzDecodeBackend(f *testing.F)   { fuzzDecoder(f, sampleBackend()) }
func FuzzDecodeFrontend(f *testing.F)  { fuzzDecoder(f, sampleFrontend()) }
func FuzzDecodeModel(f *testing.F)     { fuzzDecoder(f, sampleModel()) }
func FuzzDecodeAssignment(f *testing.F) {
	fuzzDecoder(f, sampleAssignment())
}
func FuzzDecodeRoutes(f *testing.F) { fuzzDecoder(f, sampleRoutes()) }
func FuzzDecodeReport(f *testing.F) { fuzzDecoder(f, sampleReport()) }
func FuzzDecodeEpoch(f *testing.F)  { fuzzDecoder(f, sampleEpoch()) }

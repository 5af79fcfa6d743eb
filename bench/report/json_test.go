package report

import (
	"bytes"
	"testing"
)

// TestEncodeJSON pins the one JSON layout every --json output uses: two-space
// indent, no HTML escaping, a trailing newline.
func TestEncodeJSON(t *testing.T) {
	var b bytes.Buffer
	v := struct {
		Reason string   `json:"reason"`
		Rates  []int    `json:"rates"`
		Empty  []string `json:"empty"`
	}{Reason: "GPU idle 12.0% > 10.0% & <3", Rates: []int{1, 2}}
	if err := EncodeJSON(&b, v); err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"reason\": \"GPU idle 12.0% > 10.0% & <3\",\n  \"rates\": [\n    1,\n    2\n  ],\n  \"empty\": null\n}\n"
	if got := b.String(); got != want {
		t.Errorf("EncodeJSON wrote\n%q\nwant\n%q", got, want)
	}
}

// TestEncodeJSONError passes an encoding error on: a value JSON cannot hold
// is an error, not a half-written output passed off as whole.
func TestEncodeJSONError(t *testing.T) {
	var b bytes.Buffer
	if err := EncodeJSON(&b, map[string]any{"f": func() {}}); err == nil {
		t.Errorf("EncodeJSON of a func: no error, wrote %q", b.String())
	}
}

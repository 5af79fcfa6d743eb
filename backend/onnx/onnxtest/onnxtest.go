// Package onnxtest is for tests that run models with ONNX Runtime: it
// skips them where the runtime's library is missing, and fails them
// instead where CI requires the runtime (SYMPHONY_REQUIRE_ONNXRUNTIME).
package onnxtest

import (
	"os"
	"testing"

	"github.com/symphony-serving/symphony/backend/onnx"
)

// NeedRuntime skips t, or fails it where the runtime is required, unless
// ONNX Runtime's library can be found (onnx.DefaultLibrary).
func NeedRuntime(t testing.TB) {
	t.Helper()
	if onnx.DefaultLibrary() != "" {
		return
	}
	if os.Getenv("SYMPHONY_REQUIRE_ONNXRUNTIME") != "" {
		t.Fatal("no ONNX Runtime library (make onnxruntime)")
	}
	t.Skip("no ONNX Runtime library: make onnxruntime")
}

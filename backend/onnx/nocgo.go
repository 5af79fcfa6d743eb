//go:build !cgo

package onnx

import (
	"context"

	"github.com/symphony-serving/symphony/backend"
	"github.com/symphony-serving/symphony/transport/wire"
)

// Executor is not in a build without cgo: New says so.
type Executor struct{}

// New fails in a build without cgo: ONNX Runtime is a C library.
func New(Config) (*Executor, error) { return nil, ErrNotBuilt }

// Load fails: there is no executor in this build.
func (*Executor) Load([]wire.ModelSpec) error { return ErrNotBuilt }

// LoadModel fails: there is no executor in this build.
func (*Executor) LoadModel(wire.ModelSpec) (backend.MemoryUsage, error) {
	return backend.MemoryUsage{}, ErrNotBuilt
}

// UnloadModel fails: there is no executor in this build.
func (*Executor) UnloadModel(uint32) error { return ErrNotBuilt }

// Execute fails: there is no executor in this build.
func (*Executor) Execute(context.Context, int, uint32, [][]byte) ([][]byte, error) {
	return nil, ErrNotBuilt
}

// SampleBytes knows no model: there is no executor in this build.
func (*Executor) SampleBytes(uint32) (int, int, bool) { return 0, 0, false }

// Timing is empty: there is no executor in this build.
func (*Executor) Timing() map[string]Timing { return nil }

// Close does nothing.
func (*Executor) Close() error { return nil }

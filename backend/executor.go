package backend

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/symphony-serving/symphony/transport/wire"
)

// Executor runs batches on a backend's GPUs. The backend calls Load once
// per scheduler session, before it reports its GPUs ready, and Execute for
// one batch at a time per GPU (calls for different GPUs may overlap).
// LoadModel and UnloadModel come when the scheduler loads or unloads one
// model while the cluster runs (model control), one at a time, in the
// scheduler's order, and may overlap Execute calls of other models.
type Executor interface {
	// Load makes every model available on every GPU, replacing what an
	// earlier Load or LoadModel made available.
	Load(models []wire.ModelSpec) error
	// LoadModel makes one more model available, and says what memory
	// that took, for the scheduler's logs and the operator. Loading a
	// model that is loaded already succeeds and changes nothing.
	LoadModel(model wire.ModelSpec) (MemoryUsage, error)
	// UnloadModel releases one model, once any batch of it that is
	// running has finished; Execute fails for it afterwards. Unloading a
	// model that is not loaded succeeds.
	UnloadModel(model uint32) error
	// Execute runs one batch of model on GPU gpu (0-based, this backend's
	// own numbering) and returns one output per input, in order.
	Execute(ctx context.Context, gpu int, model uint32, inputs [][]byte) ([][]byte, error)
}

// MemoryUsage is the memory a model's load took.
type MemoryUsage struct {
	// Bytes is host memory for a CPU executor, device memory for a GPU
	// one; 0 where the executor cannot tell.
	Bytes uint64
}

// Emulated is an Executor without GPUs, as in the paper's evaluation: a
// batch of b takes the model's profiled latency ℓ(b), and each output is a
// small deterministic digest of its input (8 bytes of FNV-1a, then the
// model ID), so that callers can check they got their own result back.
type Emulated struct {
	mu     sync.RWMutex
	models map[uint32]wire.ModelSpec
}

// NewEmulated returns an emulated executor.
func NewEmulated() *Emulated { return &Emulated{models: map[uint32]wire.ModelSpec{}} }

// Load records the models' profiles.
func (e *Emulated) Load(models []wire.ModelSpec) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.models = make(map[uint32]wire.ModelSpec, len(models))
	for _, m := range models {
		e.models[m.ID] = m
	}
	return nil
}

// LoadModel records one model's profile. It takes no memory: the
// emulated executor holds nothing per model but its profile.
func (e *Emulated) LoadModel(m wire.ModelSpec) (MemoryUsage, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.models[m.ID] = m
	return MemoryUsage{}, nil
}

// UnloadModel forgets one model's profile; a batch of it already running
// keeps the profile it read.
func (e *Emulated) UnloadModel(id uint32) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.models, id)
	return nil
}

// Execute waits ℓ(len(inputs)) from the call, then returns the digests.
func (e *Emulated) Execute(ctx context.Context, _ int, model uint32, inputs [][]byte) ([][]byte, error) {
	start := time.Now()
	e.mu.RLock()
	m, ok := e.models[model]
	e.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("emulated executor: model %d not loaded", model)
	}
	if len(inputs) == 0 || len(inputs) > len(m.Latency) {
		return nil, fmt.Errorf("emulated executor: batch of %d for %s, profile covers 1..%d", len(inputs), m.Name, len(m.Latency))
	}
	outs := make([][]byte, len(inputs))
	for i, in := range inputs {
		outs[i] = EmulatedOutput(model, in)
	}
	if !waitUntil(ctx, start.Add(m.Latency[len(inputs)-1])) {
		return nil, ctx.Err()
	}
	return outs, nil
}

// EmulatedOutput is the output Emulated gives for input: what a test
// compares a result against.
func EmulatedOutput(model uint32, input []byte) []byte {
	h := fnv.New64a()
	h.Write(input)
	out := make([]byte, 12)
	binary.LittleEndian.PutUint64(out, h.Sum64())
	binary.LittleEndian.PutUint32(out[8:], model)
	return out
}

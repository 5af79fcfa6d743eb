package backend

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/symphony-serving/symphony/partition/strictyaml"
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
//
// With a GPU memory capacity (NewEmulatedWithMemory), it also checks
// loads against it as a real GPU would refuse them, from the models'
// declared sizes (wire.ModelSpec's StaticMemory and DynamicMemory): every
// model is loaded on every GPU, and a GPU holding a set of models needs
// the sum of their static memory plus the largest of their dynamic memory,
// the epoch job's Eq. 6. A model of unknown memory (0) is never refused.
type Emulated struct {
	mu     sync.RWMutex
	models map[uint32]wire.ModelSpec
	// capacity is each GPU's memory in bytes, 0 for no limit.
	capacity int64
}

// NewEmulated returns an emulated executor with no memory limit.
func NewEmulated() *Emulated { return NewEmulatedWithMemory(0) }

// NewEmulatedWithMemory returns an emulated executor whose GPUs have
// capacity bytes of memory each (0 or less: no limit): Load and LoadModel
// fail when the models loaded would not fit.
func NewEmulatedWithMemory(capacity int64) *Emulated {
	return &Emulated{models: map[uint32]wire.ModelSpec{}, capacity: max(capacity, 0)}
}

// Capacity is each GPU's memory in bytes, 0 for no limit.
func (e *Emulated) Capacity() int64 { return e.capacity }

// gpuMemory is what a GPU holding models needs: the sum of their static
// memory and the largest of their dynamic memory (partition's Eq. 6).
type gpuMemory struct{ static, dynamic int64 }

func (g gpuMemory) total() int64 { return g.static + g.dynamic }

// with is g once m is loaded too.
func (g gpuMemory) with(m wire.ModelSpec) gpuMemory {
	return gpuMemory{g.static + max(m.StaticMemory, 0), max(g.dynamic, m.DynamicMemory)}
}

// modelMemory is a model's declared memory, static and dynamic (the wire
// refuses negative sizes; a caller's count as 0).
func modelMemory(m wire.ModelSpec) int64 { return max(m.StaticMemory, 0) + max(m.DynamicMemory, 0) }

// fit adds m to in use, or says why it does not fit in the capacity.
// Called with e.mu held.
func (e *Emulated) fit(inUse gpuMemory, m wire.ModelSpec) (gpuMemory, error) {
	next := inUse.with(m)
	if e.capacity <= 0 || modelMemory(m) == 0 || next.total() <= e.capacity {
		return next, nil
	}
	over, capacity := strictyaml.FormatSize(next.total()), strictyaml.FormatSize(e.capacity)
	if over == capacity { // a few bytes over: show them
		over, capacity = fmt.Sprintf("%d bytes", next.total()), fmt.Sprintf("%d bytes", e.capacity)
	}
	return inUse, fmt.Errorf("emulated executor: model %q needs %s of GPU memory (static %s + dynamic %s), "+
		"but %s is in use (static %s + largest dynamic %s): with it a GPU would hold %s, over its capacity of %s",
		m.Name, strictyaml.FormatSize(modelMemory(m)), strictyaml.FormatSize(m.StaticMemory), strictyaml.FormatSize(m.DynamicMemory),
		strictyaml.FormatSize(inUse.total()), strictyaml.FormatSize(inUse.static), strictyaml.FormatSize(inUse.dynamic), over, capacity)
}

// inUse is the memory of the models loaded. Called with e.mu held.
func (e *Emulated) inUse() gpuMemory {
	var g gpuMemory
	for _, m := range e.models {
		g = g.with(m)
	}
	return g
}

// Load records the models' profiles, replacing those loaded; it fails,
// changing nothing, if the models do not fit in the capacity together.
func (e *Emulated) Load(models []wire.ModelSpec) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	set := make(map[uint32]wire.ModelSpec, len(models))
	for _, m := range models {
		set[m.ID] = m // of a repeated ID, the last stays
	}
	var g gpuMemory
	counted := make(map[uint32]bool, len(set))
	for _, m := range models {
		if counted[m.ID] {
			continue
		}
		counted[m.ID] = true
		var err error
		if g, err = e.fit(g, set[m.ID]); err != nil {
			return err
		}
	}
	e.models = set
	return nil
}

// LoadModel records one model's profile, and returns its declared memory
// (static + dynamic, 0 where unknown): what it holds on each GPU. It fails
// if the model does not fit in the capacity beside those loaded. A model
// loaded already changes nothing.
func (e *Emulated) LoadModel(m wire.ModelSpec) (MemoryUsage, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if old, ok := e.models[m.ID]; ok {
		return MemoryUsage{Bytes: uint64(modelMemory(old))}, nil
	}
	if _, err := e.fit(e.inUse(), m); err != nil {
		return MemoryUsage{}, err
	}
	e.models[m.ID] = m
	return MemoryUsage{Bytes: uint64(modelMemory(m))}, nil
}

// UnloadModel forgets one model's profile, which frees its memory; a
// batch of it already running keeps the profile it read.
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

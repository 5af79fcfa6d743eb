package backend

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/transport/wire"
)

// memSpec is a model of id with static and dynamic bytes of GPU memory.
func memSpec(id uint32, static, dynamic int64) wire.ModelSpec {
	return wire.ModelSpec{ID: id, Name: string(rune('a' + id)), SLO: time.Second, Latency: []time.Duration{time.Microsecond},
		StaticMemory: static, DynamicMemory: dynamic}
}

const gib = 1 << 30

// LoadModel takes models while they fit, a GPU needing their static
// memory plus the largest dynamic memory; a refusal names the model, what
// it needs, what is in use and the capacity, and changes nothing.
func TestEmulatedMemoryCapacity(t *testing.T) {
	e := NewEmulatedWithMemory(10 * gib)
	for _, tc := range []struct {
		spec wire.ModelSpec
		want uint64
	}{
		{memSpec(0, 4*gib, 2*gib), 6 * gib}, // 6GiB in use
		{memSpec(1, 3*gib, 1*gib), 4 * gib}, // 7 static + 2 dynamic: 9GiB
		{memSpec(2, 0, 0), 0},               // unknown: never refused
	} {
		mem, err := e.LoadModel(tc.spec)
		if err != nil || mem.Bytes != tc.want {
			t.Fatalf("load %s: %+v, %v; want %d bytes", tc.spec.Name, mem, err, tc.want)
		}
	}
	_, err := e.LoadModel(memSpec(3, 512<<20, 3*gib))
	for _, want := range []string{`model "d"`, "needs 3.5GiB of GPU memory (static 512MiB + dynamic 3GiB)",
		"9GiB is in use (static 7GiB + largest dynamic 2GiB)", "would hold 10.5GiB", "capacity of 10GiB"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("over capacity: %v, want %q", err, want)
		}
	}
	if _, err := e.Execute(context.Background(), 0, 3, [][]byte{nil}); err == nil {
		t.Error("a refused model runs")
	}
	// 1GiB more static memory fits exactly; then nothing more does, but a
	// model of unknown memory still loads.
	if _, err := e.LoadModel(memSpec(4, gib, 0)); err != nil {
		t.Fatalf("a model that fits exactly: %v", err)
	}
	if _, err := e.LoadModel(memSpec(5, 1, 0)); err == nil {
		t.Error("a byte over the capacity loaded")
	}
	if _, err := e.LoadModel(memSpec(6, 0, 0)); err != nil {
		t.Errorf("a model of unknown memory on a full GPU: %v", err)
	}
	// A model that alone exceeds the capacity.
	if _, err := NewEmulatedWithMemory(gib).LoadModel(memSpec(0, gib, 1)); err == nil || !strings.Contains(err.Error(), "0B is in use (static 0B + largest dynamic 0B): with it a GPU would hold 1073741825 bytes, over its capacity of 1073741824 bytes") {
		t.Errorf("a model larger than the GPU: %v", err)
	}
}

// Reloading a loaded model changes nothing (its first spec stays, and
// its memory is not counted twice); unloading frees its memory.
func TestEmulatedMemoryReloadUnload(t *testing.T) {
	e := NewEmulatedWithMemory(8 * gib)
	if _, err := e.LoadModel(memSpec(0, 5*gib, gib)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if mem, err := e.LoadModel(memSpec(0, 5*gib, gib)); err != nil || mem.Bytes != 6*gib {
			t.Fatalf("reload: %+v, %v; want success, 6GiB", mem, err)
		}
	}
	// A reload with another spec is still no change: not refused.
	if mem, err := e.LoadModel(memSpec(0, 7*gib, 7*gib)); err != nil || mem.Bytes != 6*gib {
		t.Fatalf("reload with other sizes: %+v, %v; want the loaded one's 6GiB", mem, err)
	}
	if _, err := e.LoadModel(memSpec(1, 3*gib, 0)); err == nil {
		t.Fatal("5+3 static + 1 dynamic over 8GiB loaded")
	}
	if err := e.UnloadModel(0); err != nil {
		t.Fatal(err)
	}
	if err := e.UnloadModel(0); err != nil {
		t.Fatalf("second unload: %v", err)
	}
	if mem, err := e.LoadModel(memSpec(1, 3*gib, 0)); err != nil || mem.Bytes != 3*gib {
		t.Fatalf("load after the unload freed memory: %+v, %v", mem, err)
	}
}

// Load replaces the set, checking the whole set: what was loaded before
// does not count, and a set that does not fit is refused, leaving the
// models loaded before in place.
func TestEmulatedMemoryLoadReplaces(t *testing.T) {
	e := NewEmulatedWithMemory(8 * gib)
	if err := e.Load([]wire.ModelSpec{memSpec(0, 6*gib, gib)}); err != nil {
		t.Fatal(err)
	}
	// 7GiB loaded; the new set needs 3+3 static + 2 dynamic = 8GiB.
	if err := e.Load([]wire.ModelSpec{memSpec(1, 3*gib, 2*gib), memSpec(2, 3*gib, gib), memSpec(3, 0, 0)}); err != nil {
		t.Fatalf("a set that fits once it replaces the old: %v", err)
	}
	if _, err := e.Execute(context.Background(), 0, 0, [][]byte{nil}); err == nil {
		t.Error("a model of the replaced set still runs")
	}
	err := e.Load([]wire.ModelSpec{memSpec(1, 3*gib, 2*gib), memSpec(2, 3*gib, gib), memSpec(4, gib, 0)})
	if err == nil || !strings.Contains(err.Error(), `model "e"`) || !strings.Contains(err.Error(), "8GiB is in use") {
		t.Fatalf("a set over the capacity: %v, want e refused with 8GiB in use", err)
	}
	for _, id := range []uint32{1, 2, 3} {
		if _, err := e.Execute(context.Background(), 0, id, [][]byte{nil}); err != nil {
			t.Errorf("model %d after a refused Load: %v", id, err)
		}
	}
	// A repeated model counts once.
	if err := e.Load([]wire.ModelSpec{memSpec(1, 5*gib, 0), memSpec(1, 5*gib, 0)}); err != nil {
		t.Errorf("a model listed twice: %v", err)
	}
	if err := e.Load(nil); err != nil {
		t.Fatal(err)
	}
	if mem, err := e.LoadModel(memSpec(5, 8*gib, 0)); err != nil || mem.Bytes != 8*gib {
		t.Errorf("after an empty Load, the whole GPU: %+v, %v", mem, err)
	}
}

// With no capacity (NewEmulated, or 0), nothing is refused, as before.
func TestEmulatedMemoryUnlimited(t *testing.T) {
	for _, e := range []*Emulated{NewEmulated(), NewEmulatedWithMemory(0), NewEmulatedWithMemory(-1)} {
		if e.Capacity() != 0 {
			t.Errorf("capacity %d, want 0", e.Capacity())
		}
		if err := e.Load([]wire.ModelSpec{memSpec(0, 1<<50, 1<<50)}); err != nil {
			t.Error(err)
		}
		if mem, err := e.LoadModel(memSpec(1, 1<<50, 0)); err != nil || mem.Bytes != 1<<50 {
			t.Errorf("LoadModel: %+v, %v", mem, err)
		}
	}
}

//go:build cgo

package onnx

import (
	"context"
	"strings"
	"testing"

	"github.com/symphony-serving/symphony/transport/wire"
)

// One model loads and unloads while another keeps its session: a load
// reports the memory it measured, a second load of the same model changes
// nothing, an unloaded model's batches fail as not loaded, and a bad
// model's load fails naming it.
func TestLoadModelUnloadModel(t *testing.T) {
	e := newExecutor(t, Config{IntraOpThreads: 1})
	if err := e.Load([]wire.ModelSpec{{ID: 1, Name: "mlp"}}); err != nil {
		t.Fatal(err)
	}
	mem, err := e.LoadModel(wire.ModelSpec{ID: 2, Name: "cnn"})
	if err != nil {
		t.Fatal(err)
	}
	if mem.Bytes == 0 {
		t.Errorf("loading cnn took %d bytes, want a positive measurement", mem.Bytes)
	}
	t.Logf("cnn's load grew the resident set by %d bytes", mem.Bytes)
	if again, err := e.LoadModel(wire.ModelSpec{ID: 2, Name: "cnn"}); err != nil || again != mem {
		t.Errorf("second load: %+v, %v; want the first's %+v", again, err, mem)
	}
	in, _, ok := e.SampleBytes(2)
	if !ok {
		t.Fatal("cnn not loaded")
	}
	if _, err := e.Execute(context.Background(), 0, 2, [][]byte{sampleInput(1, in/4)}); err != nil {
		t.Fatalf("a batch of the loaded model: %v", err)
	}
	if err := e.UnloadModel(2); err != nil {
		t.Fatal(err)
	}
	if err := e.UnloadModel(2); err != nil {
		t.Errorf("unloading an unloaded model: %v", err)
	}
	if _, err := e.Execute(context.Background(), 0, 2, [][]byte{sampleInput(1, in/4)}); err == nil || !strings.Contains(err.Error(), "not loaded") {
		t.Errorf("a batch after the unload: %v, want not loaded", err)
	}
	mlpIn, _, _ := e.SampleBytes(1)
	if _, err := e.Execute(context.Background(), 0, 1, [][]byte{sampleInput(1, mlpIn/4)}); err != nil {
		t.Errorf("the other model after the unload: %v", err)
	}
	if _, err := e.LoadModel(wire.ModelSpec{ID: 3, Name: "resnet"}); err == nil || !strings.Contains(err.Error(), "resnet") {
		t.Errorf("loading a model the repository lacks: %v", err)
	}
}

// An unload waits for the batches running on the model, never destroys a
// session under one: batches and an unload race, and each batch either
// runs or fails as not loaded (run under -race).
func TestUnloadDuringBatches(t *testing.T) {
	e := newExecutor(t, Config{IntraOpThreads: 1})
	if _, err := e.LoadModel(wire.ModelSpec{ID: 2, Name: "cnn"}); err != nil {
		t.Fatal(err)
	}
	in, _, _ := e.SampleBytes(2)
	errs := make(chan error, 8)
	for i := 0; i < cap(errs); i++ {
		go func() {
			_, err := e.Execute(context.Background(), 0, 2, [][]byte{sampleInput(i, in/4), sampleInput(i+1, in/4)})
			errs <- err
		}()
	}
	if err := e.UnloadModel(2); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < cap(errs); i++ {
		if err := <-errs; err != nil && !strings.Contains(err.Error(), "not loaded") {
			t.Errorf("batch during the unload: %v", err)
		}
	}
}

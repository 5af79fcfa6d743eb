//go:build cgo

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/backend/onnx"
	"github.com/symphony-serving/symphony/backend/onnx/onnxtest"
	"github.com/symphony-serving/symphony/bench/modelgen"
	"github.com/symphony-serving/symphony/tensor"
	"github.com/symphony-serving/symphony/transport/wire"
)

// cnnSampleShape is the shape of one request's input tensor for the
// committed CNN: one single-channel 8×8 image, without the batch dimension
// (the scheduler makes the batches).
var cnnSampleShape = []int{1, 8, 8}

// TestThreeProcessONNXAnswers runs the committed CNN on a cluster of three
// OS processes (a scheduler, a backend with the ONNX executor and a
// frontend with the KServe v2 gateway) and sends it requests from two
// independent HTTP clients at once, each with its own random images. Every
// answer must be ONNX Runtime's own output for that image, run in this
// process on a batch of one, to within 1e-5, and some batch must have held
// requests of both clients: each answer is the right one whatever else
// shared its batch.
//
// Which requests share a batch is made certain, not left to timing: the
// scheduler runs Symphony's delayed grants on a profile whose largest batch
// is the number of requests sent, so it holds a batch until all of them
// are queued (or until about 1.5 s after the first, far more than they take
// to arrive), then sends one batch of all of them.
func TestThreeProcessONNXAnswers(t *testing.T) {
	onnxtest.NeedRuntime(t)
	if testing.Short() {
		t.Skip("builds the binary and runs a cluster of processes")
	}
	const (
		clients   = 2
		perClient = 40
		total     = clients * perClient
	)
	lib, err := filepath.Abs(onnx.DefaultLibrary())
	if err != nil {
		t.Fatal(err)
	}
	bin := buildSymphony(t)
	repo := cnnRepository(t, fmt.Sprintf("slo: 1500ms\nmax_batch: %d\nprofile: {alpha: 100us, beta: 100us, max_batch: %d}\n", total, total))

	ps := newProcSet(t, bin)
	start := ps.start
	sched := start("scheduler", "scheduler", "--model-repo", repo, "--policy", "symphony", "--addr", "127.0.0.1:0")
	addr := sched.waitLine(t, regexp.MustCompile(`^scheduler listening on (\S+) \(1 models`), 15*time.Second)[1]
	back := start("backend", "backend", "--executor", "onnx", "--model-repo", repo, "--onnxruntime-lib", lib,
		"--intra-op-threads", "1", "--scheduler", addr, "--name", "b1")
	front := start("frontend", "frontend", "--scheduler", addr, "--http-addr", "127.0.0.1:0", "--name", "f1")
	back.waitLine(t, regexp.MustCompile(`^backend b1 registered 1 GPUs with `), 15*time.Second)
	gw := front.waitLine(t, regexp.MustCompile(`^frontend f1: KServe v2 gateway on (http://\S+),`), 15*time.Second)[1]
	waitHTTPReady(t, &http.Client{Timeout: 5 * time.Second}, gw, "/v2/health/ready", "/v2/models/cnn/ready")

	// The oracle: ONNX Runtime in this process, on the same model file.
	ex, err := onnx.New(onnx.Config{Library: lib, Repository: repo, IntraOpThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ex.Close() })
	if err := ex.Load([]wire.ModelSpec{{ID: 1, Name: "cnn"}}); err != nil {
		t.Fatal(err)
	}
	cnn := modelgen.Committed()["cnn/1/model.onnx"]
	in, out := cnn.Sizes()

	seed := uint64(time.Now().UnixNano())
	t.Logf("inputs drawn with seed %d", seed)
	type answer struct {
		x     []float32
		got   []float32
		batch batchOf
		err   error
	}
	var answers [clients][perClient]answer
	var wg sync.WaitGroup
	for c := range clients {
		// Each client is independent: its own connections, its own inputs.
		hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: perClient}}
		t.Cleanup(hc.CloseIdleConnections)
		rng := rand.New(rand.NewPCG(seed, uint64(c)))
		for i := range perClient {
			x := make([]float32, in)
			for j := range x {
				x[j] = float32(rng.NormFloat64())
			}
			answers[c][i].x = x
			wg.Go(func() {
				a := &answers[c][i]
				a.got, a.batch, a.err = inferCNN(hc, gw, fmt.Sprintf("client%d-%d", c, i), x)
			})
		}
	}
	wg.Wait()

	clientsOf := map[batchOf]map[int]bool{}
	answered := map[batchOf]int{}
	for c := range clients {
		for i, a := range answers[c] {
			if a.err != nil {
				t.Errorf("client %d request %d: %v", c, i, a.err)
				continue
			}
			want := runAlone(t, ex, a.x)
			if ref, err := cnn.Forward(a.x); err != nil || !within(ref, want, 1e-5) {
				t.Fatalf("ONNX Runtime's %v and the plain-Go model's %v (%v) differ: the oracle is wrong", want, ref, err)
			}
			if len(want) != out || !within(a.got, want, 1e-5) {
				t.Errorf("client %d request %d: answer %v, ONNX Runtime alone says %v", c, i, a.got, want)
			}
			if clientsOf[a.batch] == nil {
				clientsOf[a.batch] = map[int]bool{}
			}
			clientsOf[a.batch][c] = true
			answered[a.batch]++
		}
	}
	if t.Failed() {
		return
	}
	mixed := 0
	for b, cs := range clientsOf {
		// Every request of a batch was the test's, so the batch's size is
		// the number of answers that name it.
		if answered[b] != b.size {
			t.Errorf("batch %+v: %d answers name it", b, answered[b])
		}
		if len(cs) == clients {
			mixed++
		}
	}
	if mixed == 0 {
		t.Errorf("no batch held requests of both clients (%d batches): the answers were not checked across clients in a batch", len(clientsOf))
	}
	t.Logf("%d requests answered in %d batches, %d with both clients' requests", total, len(clientsOf), mixed)

	// Each process stops cleanly on SIGTERM, newest first.
	ps.stopAll(10 * time.Second)
}

// cnnRepository writes a model repository holding the committed CNN's
// model.onnx with the given config.yaml, and returns its path.
func cnnRepository(t *testing.T, config string) string {
	t.Helper()
	repo := t.TempDir()
	model, err := os.ReadFile("../../testdata/models/cnn/1/model.onnx")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(repo, "cnn", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "cnn", "1", "model.onnx"), model, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "cnn", "config.yaml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return repo
}

// runAlone is ONNX Runtime's output for one image, run as a batch of one.
func runAlone(t *testing.T, ex *onnx.Executor, x []float32) []float32 {
	t.Helper()
	outs, err := ex.Execute(context.Background(), 0, 1, [][]byte{tensor.Of("x", nil, x).Data})
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 1 {
		t.Fatalf("ONNX Runtime: %d outputs for a batch of one", len(outs))
	}
	y, err := tensor.Tensor{Name: "y", Datatype: "FP32", Data: outs[0]}.FP32()
	if err != nil {
		t.Fatal(err)
	}
	return y
}

// batchOf is a batch as the gateway's response parameters name it: its
// size and its run's start and finish (Unix ns).
type batchOf struct {
	size              int
	started, finished int64
}

// inferCNN sends one image as a KServe v2 JSON request, an FP32 tensor of
// the CNN's sample shape, and returns the first output's values and the
// batch that ran it.
func inferCNN(hc *http.Client, gw, id string, x []float32) ([]float32, batchOf, error) {
	data := make([]json.RawMessage, len(x))
	for i, v := range x {
		// The shortest form that reads back as the same float32.
		data[i] = strconv.AppendFloat(nil, float64(v), 'g', -1, 32)
	}
	body, err := json.Marshal(map[string]any{
		"id":     id,
		"inputs": []any{map[string]any{"name": "x", "datatype": "FP32", "shape": cnnSampleShape, "data": data}},
	})
	if err != nil {
		return nil, batchOf{}, err
	}
	resp, err := hc.Post(gw+"/v2/models/cnn/infer", "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, batchOf{}, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, batchOf{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, batchOf{}, fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	var r struct {
		ID         string `json:"id"`
		Parameters struct {
			Size     int   `json:"batch_size"`
			Started  int64 `json:"batch_started_ns"`
			Finished int64 `json:"batch_finished_ns"`
		} `json:"parameters"`
		Outputs []responseTensor `json:"outputs"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, batchOf{}, fmt.Errorf("response %s: %v", b, err)
	}
	if r.ID != id || len(r.Outputs) == 0 {
		return nil, batchOf{}, fmt.Errorf("response for id %q with %d outputs, want id %q and an output: %s", r.ID, len(r.Outputs), id, b)
	}
	p := r.Parameters
	if p.Size < 1 || p.Started <= 0 || p.Finished < p.Started {
		return nil, batchOf{}, fmt.Errorf("response names no batch (parameters %+v): %s", p, b)
	}
	got, err := r.Outputs[0].float32s()
	return got, batchOf{p.Size, p.Started, p.Finished}, err
}

// responseTensor is an output tensor of a JSON inference response.
type responseTensor struct {
	Name     string          `json:"name"`
	Datatype string          `json:"datatype"`
	Shape    []int           `json:"shape"`
	Data     json.RawMessage `json:"data"`
}

// float32s reads the model's output tensor: the committed CNN's "y", FP32,
// three class scores for a request without a batch dimension.
func (rt responseTensor) float32s() ([]float32, error) {
	if rt.Name != "y" || rt.Datatype != "FP32" || !slices.Equal(rt.Shape, []int{3}) {
		return nil, fmt.Errorf("output %q %s %v, want y FP32 [3]", rt.Name, rt.Datatype, rt.Shape)
	}
	var v []float32
	if err := json.Unmarshal(rt.Data, &v); err != nil {
		return nil, fmt.Errorf("output %q: FP32 data: %v", rt.Name, err)
	}
	return v, nil
}

// within reports whether got and want have the same length and every
// value of got is within tol of want's.
func within(got, want []float32, tol float64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if math.Abs(float64(got[i])-float64(want[i])) > tol {
			return false
		}
	}
	return true
}

package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/symphony-serving/symphony/backend"
	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/frontend/gateway"
	"github.com/symphony-serving/symphony/frontend/gateway/inferencepb"
	"github.com/symphony-serving/symphony/frontend/gateway/kserveclient"
	"github.com/symphony-serving/symphony/frontend/gatewayserver"
	"github.com/symphony-serving/symphony/transport/inproc"
)

// bothGateways serves f's KServe v2 gateway over HTTP and gRPC on loopback
// ports, as `symphony frontend` does, and returns the HTTP base URL and a
// gRPC client.
func bothGateways(t *testing.T, f *frontend.Client) (string, inferencepb.GRPCInferenceServiceClient) {
	t.Helper()
	srv, err := gatewayserver.Start(f, gatewayserver.Config{HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", Gateway: gateway.Default(), Metrics: true, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	conn, err := grpc.NewClient(srv.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return "http://" + srv.HTTPAddr, inferencepb.NewGRPCInferenceServiceClient(conn)
}

// postJSON posts body to the gateway and returns the answer's status and
// body.
func postJSON(t *testing.T, url string, body []byte, hdr map[string]string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// rawRequest is a gRPC request of one raw [n] UINT8 input.
func rawRequest(model string, in []byte) *inferencepb.ModelInferRequest {
	return &inferencepb.ModelInferRequest{ModelName: model, Id: "r",
		Inputs:           []*inferencepb.ModelInferRequest_InferInputTensor{{Name: "input0", Datatype: "UINT8", Shape: []int64{int64(len(in))}}},
		RawInputContents: [][]byte{in}}
}

// grpcFailure is a gRPC error answer: its code, message and reason.
func grpcFailure(t *testing.T, err error) (codes.Code, string, string) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || err == nil {
		t.Fatalf("%v is not an error answer", err)
	}
	reason := ""
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			reason = info.Reason
		}
	}
	return st.Code(), st.Message(), reason
}

// A frontend of a real in-process cluster (the scheduler, a backend of
// emulated GPUs) serves its gateway over HTTP and gRPC at once: a Go gRPC
// client gets the same outputs as an HTTP client for the same inputs (the
// emulated GPUs' own, in batches the answers name), typed contents as
// JSON data; an unknown model, an unloaded one and raw contents of the
// wrong length get the gRPC code of the HTTP status with the same message
// (the raw length naming the gRPC field); the repository RPCs load and
// unload a model on the scheduler.
func TestGRPCGatewayMatchesHTTP(t *testing.T) {
	cfg := testConfig(inproc.New(), "", 1, 2)
	cfg.Unloaded = []string{"slow"}
	c := startCluster(t, cfg)
	base, gc := bothGateways(t, c.Frontends[0])
	hc, err := kserveclient.New(base, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// The same inputs over both, at once, on the emulated GPUs.
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan string, 2*n)
	for i := range n {
		wg.Go(func() {
			in := input(i)
			want := backend.EmulatedOutput(0, in) // fast is model 0
			hOut, hb, herr := hc.Infer(ctx, "fast", in)
			resp, gerr := gc.ModelInfer(ctx, rawRequest("fast", in))
			if herr != nil || gerr != nil {
				errs <- "request " + strconv.Itoa(i) + ": HTTP " + errString(herr) + ", gRPC " + errString(gerr)
				return
			}
			gb, ok := gateway.GRPCResponseBatch(resp.Parameters)
			if !bytes.Equal(hOut, want) || len(resp.RawOutputContents) != 1 || !bytes.Equal(resp.RawOutputContents[0], want) ||
				resp.Outputs[0].Name != "output0" || resp.Outputs[0].Datatype != "UINT8" || resp.Id != "r" {
				errs <- "request " + strconv.Itoa(i) + ": outputs differ: " + resp.String()
			}
			if !ok || gb.Size < 1 || hb.Size < 1 || gb.Finished.Before(gb.Started) {
				errs <- "request " + strconv.Itoa(i) + ": batches " + strconv.Itoa(gb.Size) + " over gRPC, " + strconv.Itoa(hb.Size) + " over HTTP"
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}

	// Typed contents, as JSON data is.
	code, body := postJSON(t, base+"/v2/models/fast/infer", []byte(`{"inputs":[{"name":"x","shape":[4],"datatype":"UINT8","data":[1,2,3,4]}]}`), nil)
	var h struct {
		Outputs []struct {
			Data []uint32 `json:"data"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(body, &h); err != nil || code != http.StatusOK || len(h.Outputs) != 1 {
		t.Fatalf("HTTP %d %s (%v)", code, body, err)
	}
	resp, err := gc.ModelInfer(ctx, &inferencepb.ModelInferRequest{ModelName: "fast", Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{
		{Name: "x", Datatype: "UINT8", Shape: []int64{4}, Contents: &inferencepb.InferTensorContents{UintContents: []uint32{1, 2, 3, 4}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Outputs[0].GetContents().GetUintContents(); len(resp.RawOutputContents) != 0 || !slices.Equal(got, h.Outputs[0].Data) {
		t.Errorf("typed answer %v, HTTP's %v", resp, h.Outputs[0].Data)
	}

	// The errors.
	shortHead := `{"inputs":[{"name":"input0","shape":[4],"datatype":"UINT8","parameters":{"binary_data_size":3}}]}`
	for _, tc := range []struct {
		name    string
		model   string
		body    []byte
		hdr     map[string]string
		req     *inferencepb.ModelInferRequest
		code    codes.Code
		grpcMsg string // "" for HTTP's
	}{
		{"unknown model", "nope", []byte(`{"inputs":[{"name":"x","shape":[1],"datatype":"UINT8","data":[1]}]}`), nil, rawRequest("nope", []byte{1}), codes.NotFound, ""},
		{"model not loaded", "slow", []byte(`{"inputs":[{"name":"x","shape":[1],"datatype":"UINT8","data":[1]}]}`), nil, rawRequest("slow", []byte{1}), codes.Unavailable, ""},
		{"raw contents of the wrong length", "fast",
			append([]byte(shortHead), 1, 2, 3), map[string]string{"Inference-Header-Content-Length": strconv.Itoa(len(shortHead))},
			&inferencepb.ModelInferRequest{ModelName: "fast", Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{{Name: "input0", Datatype: "UINT8", Shape: []int64{4}}}, RawInputContents: [][]byte{{1, 2, 3}}},
			codes.InvalidArgument, `input "input0": 4 elements of UINT8 need 4 bytes, raw_input_contents has 3`},
		{"wrong datatype", "fast", []byte(`{"inputs":[{"name":"x","shape":[1],"datatype":"FP8","data":[1]}]}`), nil,
			&inferencepb.ModelInferRequest{ModelName: "fast", Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP8", Shape: []int64{1}}}, RawInputContents: [][]byte{{1}}},
			codes.InvalidArgument, ""},
	} {
		hcode, hbody := postJSON(t, base+"/v2/models/"+tc.model+"/infer", tc.body, tc.hdr)
		msg, reason, ok := gateway.ParseErrorBody(hbody)
		if !ok {
			t.Fatalf("%s: HTTP %d %s", tc.name, hcode, hbody)
		}
		_, err := gc.ModelInfer(ctx, tc.req)
		code, gmsg, greason := grpcFailure(t, err)
		want := msg
		if tc.grpcMsg != "" {
			want = tc.grpcMsg
		}
		if code != tc.code || gmsg != want || greason != reason {
			t.Errorf("%s: gRPC %v %q (%s); HTTP %d %q (%s)", tc.name, code, gmsg, greason, hcode, msg, reason)
		}
	}

	// The model's readiness and metadata, and the repository extension.
	var header metadata.MD
	if _, err := gc.ModelMetadata(ctx, &inferencepb.ModelMetadataRequest{Name: "fast"}, grpc.Header(&header)); err != nil || header.Get(gateway.SLOMetadata)[0] != "3000" {
		t.Errorf("metadata: %v, header %v", err, header)
	}
	if r, err := gc.ModelReady(ctx, &inferencepb.ModelReadyRequest{Name: "slow"}); err != nil || r.Ready {
		t.Errorf("slow ready before its load: %v %v", r, err)
	}
	lctx, cancel := context.WithTimeout(ctx, loadWithin)
	defer cancel()
	if _, err := gc.RepositoryModelLoad(lctx, &inferencepb.RepositoryModelLoadRequest{ModelName: "slow"}); err != nil {
		t.Fatal(err)
	}
	if r, err := gc.ModelInfer(ctx, rawRequest("slow", input(1))); err != nil || !bytes.Equal(r.RawOutputContents[0], backend.EmulatedOutput(1, input(1))) {
		t.Fatalf("slow after its load: %v", err)
	}
	idx, err := gc.RepositoryIndex(ctx, &inferencepb.RepositoryIndexRequest{Ready: true})
	if err != nil || len(idx.Models) != 2 {
		t.Errorf("ready models %v (%v), want fast and slow", idx, err)
	}
	if _, err := gc.RepositoryModelUnload(ctx, &inferencepb.RepositoryModelUnloadRequest{ModelName: "slow"}); err != nil {
		t.Fatal(err)
	}
	if _, err := gc.ModelInfer(ctx, rawRequest("slow", input(2))); status.Code(err) != codes.Unavailable {
		t.Errorf("slow after its unload: %v", err)
	}
	// A deadline the cluster cannot meet is the caller's: DEADLINE_EXCEEDED.
	dctx, cancel := context.WithTimeout(ctx, time.Microsecond)
	defer cancel()
	if _, err := gc.ModelInfer(dctx, rawRequest("fast", input(3))); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("a request past its deadline: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/symphony-serving/symphony/frontend"
)

// fakeRepo is a fakeInferer with a repository: models load and unload at
// once, unless fail says otherwise for a model.
type fakeRepo struct {
	*fakeInferer
	index []RepositoryModel
	fail  map[string]error
	ops   []string
}

func (f *fakeRepo) RepositoryIndex() []RepositoryModel { return f.index }

func (f *fakeRepo) LoadModel(ctx context.Context, name string) error {
	return f.op(ctx, "load", name)
}

func (f *fakeRepo) UnloadModel(ctx context.Context, name string) error {
	return f.op(ctx, "unload", name)
}

func (f *fakeRepo) op(ctx context.Context, op, name string) error {
	f.ops = append(f.ops, op+" "+name)
	if err := f.fail[name]; err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			<-ctx.Done()
			return ctx.Err()
		}
		return err
	}
	return nil
}

func newRepoGateway(t *testing.T) (*Gateway, *fakeRepo) {
	t.Helper()
	return repoGateway()
}

// repoGateway is a gateway on a fakeRepo; Default always validates.
func repoGateway() (*Gateway, *fakeRepo) {
	f := &fakeRepo{fakeInferer: newFake(), index: []RepositoryModel{
		{Name: "cold", State: "UNAVAILABLE", Reason: "unloaded"}, {Name: "resnet", State: "READY"},
	}, fail: map[string]error{
		"nope":   fmt.Errorf("%w %q", frontend.ErrUnknownModel, "nope"),
		"broken": fmt.Errorf("%w: load %q: model broken: load failed: b1: no model.onnx", frontend.ErrControl, "broken"),
		"slow":   context.DeadlineExceeded,
		"alone":  frontend.ErrNotConnected,
	}}
	g, err := New(f, Default())
	if err != nil {
		panic(err)
	}
	return g, f
}

// The index lists every model with its state, or only the READY ones
// when asked; the server metadata names the extension.
func TestRepositoryIndex(t *testing.T) {
	g, _ := newRepoGateway(t)
	for _, tc := range []struct {
		body string
		want []string
	}{
		{"", []string{"cold:UNAVAILABLE:unloaded", "resnet:READY:"}},
		{`{}`, []string{"cold:UNAVAILABLE:unloaded", "resnet:READY:"}},
		{`{"ready": true}`, []string{"resnet:READY:"}},
	} {
		w := do(g, http.MethodPost, "/v2/repository/index", []byte(tc.body), nil)
		var got []RepositoryModel
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &got) != nil {
			t.Fatalf("index %q: %d %s", tc.body, w.Code, w.Body)
		}
		var names []string
		for _, m := range got {
			names = append(names, m.Name+":"+m.State+":"+m.Reason)
		}
		if fmt.Sprint(names) != fmt.Sprint(tc.want) {
			t.Errorf("index %q: %v, want %v", tc.body, names, tc.want)
		}
	}
	if w := do(g, http.MethodPost, "/v2/repository/index", []byte(`{"ready": 1}`), nil); w.Code != http.StatusBadRequest {
		t.Errorf("index with a bad body: %d %s", w.Code, w.Body)
	}
	if w := do(g, http.MethodGet, "/v2/repository/index", nil, nil); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET index: %d", w.Code)
	}
	if w := do(g, http.MethodGet, "/v2", nil, nil); !strings.Contains(w.Body.String(), `"model_repository"`) {
		t.Errorf("server metadata %s does not list model_repository", w.Body)
	}
	plain := newGateway(t, newFake(), nil)
	if w := do(plain, http.MethodPost, "/v2/repository/index", nil, nil); w.Code != http.StatusNotImplemented {
		t.Errorf("index without a repository: %d", w.Code)
	}
	if w := do(plain, http.MethodGet, "/v2", nil, nil); strings.Contains(w.Body.String(), "model_repository") {
		t.Errorf("server metadata %s lists model_repository without a repository", w.Body)
	}
}

// Loads and unloads answer 200 with an empty body, or an error object
// whose status says what went wrong and whose message names the model.
func TestRepositoryLoadUnload(t *testing.T) {
	g, f := newRepoGateway(t)
	for _, tc := range []struct {
		path   string
		hdr    map[string]string
		status int
		reason string
		msg    string
	}{
		{"/v2/repository/models/cold/load", nil, http.StatusOK, "", ""},
		{"/v2/repository/models/cold/unload", nil, http.StatusOK, "", ""},
		{"/v2/repository/models/nope/load", nil, http.StatusNotFound, ReasonUnknownModel, `unknown model "nope"`},
		{"/v2/repository/models/broken/load", nil, http.StatusBadRequest, ReasonControl, "b1: no model.onnx"},
		{"/v2/repository/models/alone/unload", nil, http.StatusServiceUnavailable, ReasonNotConnected, "not connected"},
		{"/v2/repository/models/slow/load", map[string]string{TimeoutHeader: "1ms"}, http.StatusGatewayTimeout, ReasonTimeout, `load of "slow" not done in 1ms`},
		{"/v2/repository/models/cold/load", map[string]string{TimeoutHeader: "soon"}, http.StatusBadRequest, ReasonBadRequest, "not a positive Go duration"},
	} {
		w := do(g, http.MethodPost, tc.path, nil, tc.hdr)
		if w.Code != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.path, w.Code, w.Body, tc.status)
			continue
		}
		if tc.status == http.StatusOK {
			if w.Body.Len() != 0 {
				t.Errorf("%s: body %q, want empty", tc.path, w.Body)
			}
			continue
		}
		if msg := errorOf(t, w); !strings.Contains(msg, tc.msg) || reasonOf(t, w) != tc.reason {
			t.Errorf("%s: error %q reason %q, want %q and %q", tc.path, msg, reasonOf(t, w), tc.msg, tc.reason)
		}
	}
	if want := "[load cold unload cold load nope load broken unload alone load slow]"; fmt.Sprint(f.ops) != want {
		t.Errorf("ops %v, want %s", f.ops, want)
	}
}

// An inference for a model that is not loaded is 503, naming the model,
// and a Go client reads the typed error back.
func TestInferNotLoaded(t *testing.T) {
	f := newFake()
	f.infer = func(context.Context, string, []byte) ([]byte, error) {
		return nil, fmt.Errorf("%w: model cold is not loaded (UNAVAILABLE)", frontend.ErrModelNotLoaded)
	}
	g := newGateway(t, f, nil)
	w := do(g, http.MethodPost, "/v2/models/cold/infer", []byte(`{"inputs":[{"name":"x","shape":[1],"datatype":"UINT8","data":[1]}]}`), nil)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "" {
		t.Fatalf("infer of an unloaded model: %d (Retry-After %q), want 503 without", w.Code, w.Header().Get("Retry-After"))
	}
	if msg := errorOf(t, w); !strings.Contains(msg, "model cold is not loaded") {
		t.Errorf("error %q does not name the model", msg)
	}
	if err := ResponseError("cold", w.Code, w.Body.Bytes()); !errors.Is(err, frontend.ErrModelNotLoaded) {
		t.Errorf("ResponseError = %v, want ErrModelNotLoaded", err)
	}
}

// FuzzRepositoryIndex feeds the index endpoint arbitrary bodies: each is
// answered 200 or 400, never a panic.
func FuzzRepositoryIndex(f *testing.F) {
	for _, s := range []string{"", "{}", `{"ready":true}`, `{"ready":false,"x":[1]}`, `{"ready":`, "null", "[]"} {
		f.Add([]byte(s))
	}
	g, _ := repoGateway()
	f.Fuzz(func(t *testing.T, body []byte) {
		w := do(g, http.MethodPost, "/v2/repository/index", body, nil)
		if w.Code != http.StatusOK && w.Code != http.StatusBadRequest {
			t.Fatalf("body %q: status %d", body, w.Code)
		}
	})
}

package gateway

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/symphony-serving/symphony/frontend/gateway/inferencepb"
	"github.com/symphony-serving/symphony/tensor"
)

// With tokens set, a request without an accepted bearer token is refused
// 401 over HTTP and UNAUTHENTICATED over gRPC, and counted; the health
// endpoints need none; an accepted token runs the request.
func TestBearerTokens(t *testing.T) {
	toks, err := NewTokens("s3cret", "other-token")
	if err != nil {
		t.Fatal(err)
	}
	f := newFake()
	g := newGateway(t, f, func(c *Config) { c.Tokens = toks })
	body := []byte(`{"inputs":[{"name":"a","shape":[1],"datatype":"UINT8","data":[1]}]}`)
	for _, tc := range []struct {
		method, path, auth string
		want               int
		says               string
	}{
		{"POST", "/v2/models/resnet/infer", "", 401, "no bearer token"},
		{"POST", "/v2/models/resnet/infer", "Bearer wrong", 401, "not one this gateway accepts"},
		{"POST", "/v2/models/resnet/infer", "Basic czNjcmV0", 401, "no bearer token"},
		{"GET", "/v2/models/resnet", "", 401, "no bearer token"},
		{"POST", "/v2/repository/index", "", 401, "no bearer token"},
		{"POST", "/v2/models/resnet/infer", "Bearer s3cret", 200, ""},
		{"POST", "/v2/models/resnet/infer", "bearer other-token", 200, ""},
		{"GET", "/v2/health/ready", "", 200, ""},
		{"GET", "/v2/health/live", "", 200, ""},
		{"GET", "/livez", "", 200, ""},
		{"GET", "/readyz", "", 200, ""},
		{"GET", "/v2/models/resnet/ready", "", 200, ""},
	} {
		hdr := map[string]string{}
		if tc.auth != "" {
			hdr["Authorization"] = tc.auth
		}
		var b []byte
		if tc.method == "POST" {
			b = body
		}
		w := do(g, tc.method, tc.path, b, hdr)
		if w.Code != tc.want || !strings.Contains(w.Body.String(), tc.says) {
			t.Errorf("%s %s (%q): %d %s; want %d saying %q", tc.method, tc.path, tc.auth, w.Code, w.Body, tc.want, tc.says)
		}
		if tc.want == http.StatusUnauthorized && (w.Header().Get("WWW-Authenticate") == "" || !strings.Contains(w.Body.String(), `"reason":"unauthenticated"`)) {
			t.Errorf("%s %s: 401 without WWW-Authenticate or its reason: %v %s", tc.method, tc.path, w.Header(), w.Body)
		}
	}
	if n := g.Stats().Unauthenticated.Load(); n != 5 {
		t.Errorf("%d requests counted unauthenticated over HTTP, want 5", n)
	}

	c := serveGRPC(t, g)
	req := rawInputs("resnet", tensor.Tensor{Name: "a", Datatype: "UINT8", Shape: []int64{1}, Data: []byte{1}})
	if _, err := c.ModelInfer(context.Background(), req); status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "no bearer token") {
		t.Errorf("gRPC without a token: %v", err)
	}
	bad := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer nope")
	if _, err := c.ModelInfer(bad, req); status.Code(err) != codes.Unauthenticated {
		t.Errorf("gRPC with a wrong token: %v", err)
	}
	good := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer s3cret")
	if _, err := c.ModelInfer(good, req); err != nil {
		t.Errorf("gRPC with the token: %v", err)
	}
	if _, err := c.ServerLive(context.Background(), &inferencepb.ServerLiveRequest{}); err != nil {
		t.Errorf("ServerLive needs no token: %v", err)
	}
	if _, err := c.ModelMetadata(context.Background(), &inferencepb.ModelMetadataRequest{Name: "resnet"}, grpc.WaitForReady(false)); status.Code(err) != codes.Unauthenticated {
		t.Errorf("ModelMetadata without a token: %v", err)
	}
	if n := g.Stats().Unauthenticated.Load(); n != 8 {
		t.Errorf("%d requests counted unauthenticated in all, want 8", n)
	}
}

// A token file holds one token a line, with comments and blank lines;
// an empty one, or a token with white space, is refused.
func TestReadTokens(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	toks, err := ReadTokens(write("ok", "# the gateway's tokens\n\nalpha\n  beta  \n"))
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]bool{"Bearer alpha": true, "Bearer beta": true, "Bearer gamma": false, "Bearer alph": false} {
		if (toks.check(tok) == nil) != want {
			t.Errorf("%q accepted %v, want %v", tok, !want, want)
		}
	}
	for name, text := range map[string]string{"empty": "# none\n\n", "space": "a b\n"} {
		if _, err := ReadTokens(write(name, text)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := ReadTokens(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "token file") {
		t.Errorf("missing file: %v", err)
	}
}

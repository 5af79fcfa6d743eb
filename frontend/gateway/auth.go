package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// Tokens are the bearer tokens a gateway accepts (Config.Tokens): a
// request must carry one in its Authorization header ("Bearer TOKEN"), or
// its gRPC metadata's authorization key, or it is answered 401
// (UNAUTHENTICATED over gRPC). The health endpoints (/livez, /readyz,
// /v2/health/*, /v2/models/<m>/ready, gRPC ServerLive, ServerReady and
// ModelReady) need none, so
// that probes and load balancers need no secret; the metrics are served
// beside the gateway, not by it, and need none either.
//
// Only the tokens' SHA-256 digests are kept, and they are compared in
// constant time, so that neither a token's length nor its bytes leak
// through timing. An empty Tokens (nil) accepts every request.
type Tokens struct{ digests [][sha256.Size]byte }

// NewTokens returns the tokens given, which must be non-empty and free of
// white space (as an Authorization header carries them).
func NewTokens(tokens ...string) (*Tokens, error) {
	t := &Tokens{}
	for i, tok := range tokens {
		if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
			return nil, fmt.Errorf("gateway: token %d is empty or holds white space", i+1)
		}
		t.digests = append(t.digests, sha256.Sum256([]byte(tok)))
	}
	if len(t.digests) == 0 {
		return nil, errors.New("gateway: no tokens given")
	}
	return t, nil
}

// maxTokenFile bounds a token file: a few hundred tokens at most.
const maxTokenFile = 1 << 20

// ReadTokens reads a token file (ReadTokenList) into Tokens. It exists so
// that tokens come from a mounted secret rather than a flag that ps shows.
func ReadTokens(path string) (*Tokens, error) {
	toks, err := ReadTokenList(path)
	if err != nil {
		return nil, err
	}
	t, err := NewTokens(toks...)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return t, nil
}

// ReadTokenList reads a token file: one token a line, blank lines and lines
// starting with # skipped; at least one token. A client sends one of them
// (symphony bench --token-file), the gateway accepts any (ReadTokens).
func ReadTokenList(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gateway: token file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return nil, fmt.Errorf("gateway: token file %s: %w", path, err)
	}
	if len(data) > maxTokenFile {
		return nil, fmt.Errorf("gateway: token file %s: larger than %d bytes", path, maxTokenFile)
	}
	var toks []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxTokenFile)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.ContainsAny(line, " \t") {
			return nil, fmt.Errorf("gateway: token file %s: a token holds white space", path)
		}
		toks = append(toks, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("gateway: token file %s: %w", path, err)
	}
	if len(toks) == 0 {
		return nil, fmt.Errorf("gateway: token file %s holds no token", path)
	}
	return toks, nil
}

// errNoToken and errBadToken are why a request was refused, for its 401.
var (
	errNoToken  = errors.New(`no bearer token: send "Authorization: Bearer TOKEN"`)
	errBadToken = errors.New("the bearer token is not one this gateway accepts")
)

// check reports why the Authorization value header does not carry an
// accepted token, or nil if it does (or t accepts every request).
func (t *Tokens) check(header string) error {
	if t == nil {
		return nil
	}
	scheme, tok, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return errNoToken
	}
	d := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	match := 0
	for i := range t.digests {
		match |= subtle.ConstantTimeCompare(d[:], t.digests[i][:])
	}
	if match != 1 {
		return errBadToken
	}
	return nil
}

// ReasonUnauthenticated is the reason of a 401: no accepted bearer token.
const ReasonUnauthenticated = "unauthenticated"

// ErrUnauthenticated is the error a client gets back for a 401 or
// UNAUTHENTICATED answer (ResponseError, GRPCError): the gateway wants a
// bearer token it accepts.
var ErrUnauthenticated = errors.New("gateway: unauthenticated")

// openPath reports whether an HTTP endpoint needs no token: health, for
// probes (the model-ready endpoints included, as gRPC's ModelReady).
func openPath(p string) bool {
	return p == "/livez" || p == "/readyz" || strings.HasPrefix(p, "/v2/health/") ||
		strings.HasPrefix(p, "/v2/models/") && strings.HasSuffix(p, "/ready")
}

// authHTTP answers 401 for a request to a guarded endpoint without an
// accepted token, and reports whether it did.
func (g *Gateway) authHTTP(w http.ResponseWriter, r *http.Request) bool {
	if g.cfg.Tokens == nil || openPath(r.URL.Path) {
		return false
	}
	err := g.cfg.Tokens.check(r.Header.Get("Authorization"))
	if err == nil {
		return false
	}
	g.stats.Unauthenticated.Add(1)
	w.Header().Set("WWW-Authenticate", `Bearer realm="symphony"`)
	writeError(w, http.StatusUnauthorized, ReasonUnauthenticated, err.Error())
	return true
}

// openRPCs are the gRPC methods that need no token: health.
var openRPCs = map[string]bool{
	"/inference.GRPCInferenceService/ServerLive":  true,
	"/inference.GRPCInferenceService/ServerReady": true,
	"/inference.GRPCInferenceService/ModelReady":  true,
}

// authGRPC is the gRPC server's unary interceptor for Config.Tokens.
func (g *Gateway) authGRPC(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if g.cfg.Tokens == nil || openRPCs[info.FullMethod] {
		return handler(ctx, req)
	}
	md, _ := metadata.FromIncomingContext(ctx)
	var header string
	if v := md.Get("authorization"); len(v) > 0 {
		header = v[0]
	}
	if err := g.cfg.Tokens.check(header); err != nil {
		g.stats.Unauthenticated.Add(1)
		return nil, g.grpcError(&failure{status: http.StatusUnauthorized, reason: ReasonUnauthenticated, msg: err.Error()})
	}
	return handler(ctx, req)
}

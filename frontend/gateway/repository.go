package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/symphony-serving/symphony/frontend"
)

// The model repository extension (KServe v2 / Triton):
//
//	POST /v2/repository/index                 -> [{"name", "version", "state", "reason"}]
//	POST /v2/repository/models/{model}/load   -> 200, empty body, once the model is READY
//	POST /v2/repository/models/{model}/unload -> 200, empty body, once it is UNAVAILABLE
//
// An index request may give {"ready": true} to list only READY models.
// Failures are error objects as elsewhere: 404 for an unknown model, 400
// for a load or unload the scheduler refused or failed (its reason in
// "error", as Triton answers), 503 without a scheduler, 504 when the
// operation outlasts its timeout (X-Symphony-Timeout, else ControlWait).

// ControlWait is how long a load or unload request waits for the model to
// get there when it gives no X-Symphony-Timeout.
const ControlWait = time.Minute

// Repository is what the repository endpoints need of the frontend: an
// Inferer that also implements it serves them, others answer them 501.
type Repository interface {
	// RepositoryIndex lists every model, loaded or not.
	RepositoryIndex() []RepositoryModel
	// LoadModel and UnloadModel return once the model is READY, or
	// UNAVAILABLE, or with one of the frontend package's errors
	// (frontend.ErrUnknownModel, frontend.ErrControl, ...).
	LoadModel(ctx context.Context, name string) error
	UnloadModel(ctx context.Context, name string) error
}

// RepositoryModel is one model of the repository index.
type RepositoryModel struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	// State is READY, UNAVAILABLE, LOADING or UNLOADING.
	State  string `json:"state"`
	Reason string `json:"reason"`
}

// errNoRepo is the message of a repository request to a gateway whose
// Inferer has no Repository.
const errNoRepo = "this gateway's frontend cannot load or unload models"

func (g *Gateway) repository(w http.ResponseWriter) (Repository, bool) {
	repo, ok := g.inf.(Repository)
	if !ok {
		writeError(w, http.StatusNotImplemented, ReasonNoRepo, errNoRepo)
	}
	return repo, ok
}

// index is the repository's index, or only its READY models.
func index(repo Repository, onlyReady bool) []RepositoryModel {
	out := []RepositoryModel{}
	for _, m := range repo.RepositoryIndex() {
		if !onlyReady || m.State == string(frontend.StateReady) {
			out = append(out, m)
		}
	}
	return out
}

func (g *Gateway) repositoryIndex(w http.ResponseWriter, r *http.Request) {
	repo, ok := g.repository(w)
	if !ok {
		return
	}
	var req struct {
		Ready bool `json:"ready"`
	}
	body, code, reason, err := readBody(w, r, 64<<10)
	if err != nil {
		writeError(w, code, reason, err.Error())
		return
	}
	if len(body) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			writeError(w, http.StatusBadRequest, ReasonBadRequest, fmt.Sprintf("index request: %v", err))
			return
		}
	}
	writeJSON(w, http.StatusOK, index(repo, req.Ready))
}

func (g *Gateway) repositoryLoad(w http.ResponseWriter, r *http.Request) {
	g.control(w, r, "load", func(repo Repository, ctx context.Context, name string) error { return repo.LoadModel(ctx, name) })
}

func (g *Gateway) repositoryUnload(w http.ResponseWriter, r *http.Request) {
	g.control(w, r, "unload", func(repo Repository, ctx context.Context, name string) error { return repo.UnloadModel(ctx, name) })
}

// control runs a load or unload, bounded by the request's timeout, and
// answers 200 with an empty body once it is done.
func (g *Gateway) control(w http.ResponseWriter, r *http.Request, op string, do func(Repository, context.Context, string) error) {
	repo, ok := g.repository(w)
	if !ok {
		return
	}
	name := r.PathValue("model")
	wait, err := headerTimeout(TimeoutHeader, r.Header.Get(TimeoutHeader))
	if err != nil {
		writeError(w, http.StatusBadRequest, ReasonBadRequest, err.Error())
		return
	}
	if wait == 0 {
		wait = ControlWait
	}
	// The body (Triton's optional parameters) is read and ignored.
	if _, code, reason, err := readBody(w, r, 64<<10); err != nil {
		writeError(w, code, reason, err.Error())
		return
	}
	// The answer comes when the model is there, which may be long after
	// the server's write timeout.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + g.cfg.WriteTimeout))
	f := g.runControl(r.Context(), repo, op, name, wait, do)
	switch {
	case f == nil:
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
	case f.status == statusClientGone:
		// The caller left; nothing to write.
	default:
		writeError(w, f.status, f.reason, f.msg)
	}
}

// runControl runs a load or unload (op) of the model name within wait,
// logs it, and says how it failed; nil if it did not.
func (g *Gateway) runControl(ctx context.Context, repo Repository, op, name string, wait time.Duration, do func(Repository, context.Context, string) error) *failure {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	start := time.Now()
	err := do(repo, ctx, name)
	g.cfg.Log.Info().Str("model", name).Str("op", op).Dur("took", time.Since(start)).Err(err).Msg("model control")
	if err == nil {
		return nil
	}
	// The status and reason are inference's (classify), without its
	// Retry-After hints: an operator's op is not retried blindly.
	code, _, reason := classify(ctx, err, false)
	msg := err.Error()
	if code == http.StatusGatewayTimeout {
		msg = fmt.Sprintf("%s of %q not done in %v: %v", op, name, wait, err)
	}
	return &failure{status: code, reason: reason, msg: msg, err: err}
}

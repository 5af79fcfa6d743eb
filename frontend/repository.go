package frontend

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/symphony-serving/symphony/transport/wire"
)

// Model control: the scheduler's models are each READY (taking requests)
// or not, and a frontend can load and unload them (the gateway's
// repository endpoints do, as Triton's explicit model control). The
// scheduler tells every frontend each change, so ModelInfo.State follows
// it; the scheduler stays the judge of each request, so a request sent as
// a model unloads ends with ErrModelNotLoaded, never hangs.

// ModelState is a model's state in the scheduler, named as Triton's
// repository index names them.
type ModelState string

const (
	StateReady       ModelState = "READY"       // loaded: requests run
	StateUnavailable ModelState = "UNAVAILABLE" // not loaded: requests end with ErrModelNotLoaded
	StateLoading     ModelState = "LOADING"     // being loaded: requests end with ErrModelNotLoaded
	StateUnloading   ModelState = "UNLOADING"   // draining: requests queued run, new ones end with ErrModelNotLoaded
)

// ErrModelNotLoaded: the model is served but not loaded now (unloaded,
// or on its way in or out), so the request was refused at once.
var ErrModelNotLoaded = errors.New("frontend: model not loaded")

// ErrControl: the scheduler refused or failed a load or unload; the
// error's text says why (a backend's load error, a model busy loading).
var ErrControl = errors.New("frontend: model control failed")

// control is the client's state for model control: its Controls awaiting
// answers, by Seq.
type control struct {
	mu      sync.Mutex
	seq     uint64
	waiting map[uint64]ctlWait
}

type ctlWait struct {
	sess *session
	done chan string
}

// LoadModel loads the named model on the cluster and returns once it is
// READY, or with the scheduler's reason it is not (ErrControl), or when
// ctx ends. Loading a loaded model succeeds at once.
func (c *Client) LoadModel(ctx context.Context, name string) error {
	return c.controlModel(ctx, wire.OpLoad, name)
}

// UnloadModel unloads the named model and returns once it is UNAVAILABLE:
// the scheduler refuses new requests for it at once, and lets those it
// had taken end as usual first, so that none is lost. The requests this
// client made before the call reach the scheduler before the unload, so
// they are among those. Unloading an unloaded model succeeds at once.
func (c *Client) UnloadModel(ctx context.Context, name string) error {
	return c.controlModel(ctx, wire.OpUnload, name)
}

// RepositoryIndex lists every model the schedulers serve, loaded or not,
// by name (as Models does).
func (c *Client) RepositoryIndex() []ModelInfo {
	ms := c.Models()
	slices.SortFunc(ms, func(a, b ModelInfo) int { return strings.Compare(a.Name, b.Name) })
	return ms
}

func (c *Client) controlModel(ctx context.Context, op wire.ControlOp, name string) error {
	// The control goes to the scheduler the model's requests go to, with
	// the model's ID there.
	c.mu.Lock()
	var sess *session
	var m modelEntry
	known := false
	if l := c.resolve(name); l != nil {
		sess = l.sess
		m, known = l.models[name]
	}
	c.mu.Unlock()
	switch {
	case !known:
		return fmt.Errorf("%w %q", ErrUnknownModel, name)
	case sess == nil:
		return ErrNotConnected
	}
	done := make(chan string, 1)
	c.ctl.mu.Lock()
	c.ctl.seq++
	seq := c.ctl.seq
	if c.ctl.waiting == nil {
		c.ctl.waiting = map[uint64]ctlWait{}
	}
	c.ctl.waiting[seq] = ctlWait{sess: sess, done: done}
	c.ctl.mu.Unlock()
	defer func() {
		c.ctl.mu.Lock()
		delete(c.ctl.waiting, seq)
		c.ctl.mu.Unlock()
	}()
	// The requests made before the call go out first, and the scheduler
	// reads a connection's messages in order: it sees requests and op in
	// the order this client made them (an unload finds them taken).
	sess.submit.Flush()
	if err := sess.conn.Send(&wire.Control{Seq: seq, Op: op, Model: m.id}); err != nil {
		return ErrNotConnected
	}
	select {
	case msg, ok := <-done:
		switch {
		case !ok:
			return fmt.Errorf("%w while the %s of %q was under way", ErrSchedulerLost, op, name)
		case msg != "":
			return fmt.Errorf("%w: %s %q: %s", ErrControl, op, name, msg)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("frontend: %s %q: %w", op, name, ctx.Err())
	}
}

// controlDone hands the scheduler's answer to the Control that awaits it.
func (c *Client) controlDone(m *wire.ControlDone) {
	c.ctl.mu.Lock()
	w, ok := c.ctl.waiting[m.Seq]
	delete(c.ctl.waiting, m.Seq)
	c.ctl.mu.Unlock()
	if ok {
		w.done <- m.Error
	}
}

// controlsLost ends the Controls sent on a session that closed: their
// outcome is unknown to this client.
func (c *Client) controlsLost(s *session) {
	c.ctl.mu.Lock()
	defer c.ctl.mu.Unlock()
	for seq, w := range c.ctl.waiting {
		if w.sess == s {
			delete(c.ctl.waiting, seq)
			close(w.done)
		}
	}
}

// setStates records a scheduler's model states in models, that
// scheduler's (model IDs are per scheduler). Called with c.mu held.
func setStates(models map[string]modelEntry, states []wire.ModelStatus) {
	for _, st := range states {
		for name, e := range models {
			if e.id == st.Model {
				e.info.State, e.info.Reason = ModelState(st.State.String()), st.Reason
				models[name] = e
				break
			}
		}
	}
}

package service

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/transport/wire"
)

// Model control: every model the scheduler knows is READY (it takes
// requests), UNAVAILABLE (requests end at once as "not loaded"), or on its
// way between the two, LOADING or UNLOADING. A frontend asks for a load
// or an unload with a wire.Control; the scheduler answers it with a
// wire.ControlDone once the model has got there or the op failed, and
// tells every frontend each change with wire.ModelStates.
//
// Load: the scheduler sends a Control to every backend, which opens the
// model's session, and the model is READY once all of them have answered
// (UNAVAILABLE, with their errors as the reason, if any failed; those
// that loaded it unload it again). A backend that joins meanwhile loads it
// with its other models, as its Welcome tells it.
//
// Unload, without losing a request: the model is UNLOADING at once, so
// new requests end as "not loaded", but the requests it already accepted
// are counted (modelCtl.pending) until each has ended: dropped, or planned
// and its plan reported by its backend (or failed, if the backend was
// lost). Those still queued are planned as usual: the backends still hold
// the model. Once the count is zero, nothing of the model is queued or
// running anywhere, and the backends are told to unload it; when they have
// answered, it is UNAVAILABLE.
//
// All of it runs under Service.mu, on the goroutines of the messages that
// drive it; LoadTimeout bounds how long an op waits for the backends.

// DefaultLoadTimeout is Config.LoadTimeout's default: long enough for a
// large model's session on a busy host, short enough that a hung backend
// does not leave a model LOADING for good.
const DefaultLoadTimeout = 60 * time.Second

// modelCtl is one model's control state.
type modelCtl struct {
	state  wire.ModelState
	reason string
	// pending counts the requests accepted for the model that have not
	// ended: queued, or in a plan not yet reported.
	pending int
	// seq is the Seq of the op the backends were sent (0: none under
	// way); waiting are the backends yet to answer it, since it began.
	seq     uint64
	since   scheduler.Time
	waiting map[*backendConn]struct{}
	// failed are the backends' errors for the load under way; memory the
	// bytes those that loaded it reported.
	failed []string
	memory uint64
	// waiters are answered when the op ends: a frontend's Control, or a
	// LoadModel or UnloadModel call; each gets "" or the op's error.
	waiters []func(err string)
}

// initControl sets every model's first state: READY, or UNAVAILABLE for
// those Config.Unloaded names.
func (s *Service) initControl() error {
	s.ctl = make([]modelCtl, len(s.cfg.Models))
	for i := range s.ctl {
		s.ctl[i].state = wire.ModelReady
	}
	for _, name := range s.cfg.Unloaded {
		i := s.modelIndex(name)
		if i < 0 {
			return fmt.Errorf("service: unloaded model %q is not among the models served", name)
		}
		s.ctl[i].state = wire.ModelUnavailable
	}
	return nil
}

func (s *Service) modelIndex(name string) int {
	for i := range s.cfg.Models {
		if s.cfg.Models[i].Name == name {
			return i
		}
	}
	return -1
}

// ModelName is the name of the model with ID id ("" if none): the IDs are
// the indexes of Config.Models, as in ModelStates and Welcome.
func (s *Service) ModelName(id int) string {
	if id < 0 || id >= len(s.cfg.Models) {
		return ""
	}
	return s.cfg.Models[id].Name
}

// ModelStates returns every model's state, in model ID order.
func (s *Service) ModelStates() []wire.ModelStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]wire.ModelStatus, len(s.ctl))
	for i := range s.ctl {
		out[i] = s.status(i)
	}
	return out
}

func (s *Service) status(i int) wire.ModelStatus {
	return wire.ModelStatus{Model: uint32(i), State: s.ctl[i].state, Reason: s.ctl[i].reason}
}

// notReady lists the models that are not READY, for a Welcome. Called
// with s.mu held.
func (s *Service) notReady() []wire.ModelStatus {
	var out []wire.ModelStatus
	for i := range s.ctl {
		if s.ctl[i].state != wire.ModelReady {
			out = append(out, s.status(i))
		}
	}
	return out
}

// notLoaded is the detail of a request refused because its model is in
// state st.
func (s *Service) notLoaded(model int, st wire.ModelState) string {
	return fmt.Sprintf("model %s is not loaded (%s)", s.cfg.Models[model].Name, st)
}

// settle books n requests of model as ended; an UNLOADING model whose
// last request ended goes on to its backends. Called with s.mu held.
func (s *Service) settle(model scheduler.ModelID, n int) {
	if n == 0 || int(model) >= len(s.ctl) {
		return
	}
	c := &s.ctl[model]
	c.pending -= n
	if c.pending < 0 {
		s.warn.Error().Str("model", s.cfg.Models[model].Name).Int("pending", c.pending).Msg("more requests ended than were accepted")
		c.pending = 0
	}
	s.maybeUnload(int(model))
}

// control handles a frontend's Control. Called with s.mu held.
func (s *Service) control(f *frontendConn, m *wire.Control) {
	answer := func(err string) {
		if e := f.conn.Send(&wire.ControlDone{Seq: m.Seq, Error: err}); e != nil {
			s.log.Debug().Err(e).Msg("ControlDone not sent: the frontend's connection closed")
		}
	}
	if int(m.Model) >= len(s.ctl) {
		answer(fmt.Sprintf("unknown model %d", m.Model))
		return
	}
	s.startOp(int(m.Model), m.Op, f.name, answer)
}

// startOp starts op on model i for by (a frontend's name, or "api"), and
// has answer called once with "" or the op's error: at once if the model
// is there already or busy the other way, else when the op ends. Called
// with s.mu held.
func (s *Service) startOp(i int, op wire.ControlOp, by string, answer func(err string)) {
	if s.closed {
		answer("scheduler shutting down")
		return
	}
	c := &s.ctl[i]
	name := s.cfg.Models[i].Name
	want, busy := wire.ModelReady, wire.ModelUnloading
	if op == wire.OpUnload {
		want, busy = wire.ModelUnavailable, wire.ModelLoading
	}
	switch c.state {
	case want:
		answer("") // already there: a no-op success
		return
	case busy:
		answer(fmt.Sprintf("model %s is %s: %s it once that is done", name, c.state, op))
		return
	}
	c.waiters = append(c.waiters, answer)
	if c.state == wire.ModelLoading || c.state == wire.ModelUnloading {
		return // the same op is under way: answered with it
	}
	s.log.Info().Str("model", name).Stringer("op", op).Str("by", by).Msg("model control")
	if op == wire.OpLoad {
		c.state, c.reason, c.failed, c.memory = wire.ModelLoading, "", nil, 0
		s.broadcast(i)
		s.toBackends(i, wire.OpLoad)
		if len(c.waiting) == 0 {
			s.opDone(i)
		}
		return
	}
	c.state, c.reason = wire.ModelUnloading, ""
	s.broadcast(i)
	s.maybeUnload(i)
}

// LoadModel loads the model called name on every backend of this
// scheduler, as a frontend's load does, and returns once it is READY, or
// with why not. It is how a part's scheduler gains a model while it runs
// (the live epoch controller's moves, partition/live): the model's
// requests are taken from the moment it is READY. Loading a READY model
// succeeds at once.
func (s *Service) LoadModel(ctx context.Context, name string) error {
	return s.modelOp(ctx, name, wire.OpLoad)
}

// UnloadModel unloads the model called name without losing a request: new
// requests for it end as "not loaded" at once, the ones it accepted run
// to their end, then its backends let it go. It returns once it is
// UNAVAILABLE. It is how a part's scheduler gives a model up once its
// requests go to another part.
func (s *Service) UnloadModel(ctx context.Context, name string) error {
	return s.modelOp(ctx, name, wire.OpUnload)
}

func (s *Service) modelOp(ctx context.Context, name string, op wire.ControlOp) error {
	i := s.modelIndex(name)
	if i < 0 {
		return fmt.Errorf("service: %s %q: no such model among the %d served", op, name, len(s.cfg.Models))
	}
	done := make(chan string, 1)
	s.mu.Lock()
	s.startOp(i, op, "api", func(err string) { done <- err })
	s.mu.Unlock()
	select {
	case err := <-done:
		if err != "" {
			return fmt.Errorf("service: %s %s: %s", op, name, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("service: %s %s: %w (the op goes on)", op, name, ctx.Err())
	}
}

// maybeUnload tells the backends to unload an UNLOADING model once none
// of its requests is left. Called with s.mu held.
func (s *Service) maybeUnload(i int) {
	c := &s.ctl[i]
	if c.state != wire.ModelUnloading || c.pending > 0 || c.seq != 0 {
		return
	}
	s.toBackends(i, wire.OpUnload)
	if len(c.waiting) == 0 {
		s.opDone(i)
	}
}

// toBackends sends op for model i to every backend, and waits for their
// answers. Called with s.mu held.
func (s *Service) toBackends(i int, op wire.ControlOp) {
	c := &s.ctl[i]
	s.nextCtl++
	c.seq, c.since, c.waiting = s.nextCtl, s.sched.Now(), map[*backendConn]struct{}{}
	for b := range s.backends {
		if b.gone {
			continue
		}
		if err := b.conn.Send(&wire.Control{Seq: c.seq, Op: op, Model: uint32(i)}); err != nil {
			continue // it is leaving: backendGone follows
		}
		c.waiting[b] = struct{}{}
	}
}

// backendControlDone takes a backend's answer to a Control.
func (s *Service) backendControlDone(b *backendConn, m *wire.ControlDone) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.ctlOf(m.Seq)
	if i < 0 {
		return // an op that timed out, or a failed load's cleanup
	}
	c := &s.ctl[i]
	if _, ok := c.waiting[b]; !ok {
		return
	}
	delete(c.waiting, b)
	if m.Error != "" {
		c.failed = append(c.failed, b.name+": "+m.Error)
	} else {
		c.memory += m.Memory
	}
	if len(c.waiting) == 0 {
		s.opDone(i)
	}
}

// ctlOf is the model whose op under way has Seq seq, -1 for none: a scan,
// as ops are rare and few. Called with s.mu held.
func (s *Service) ctlOf(seq uint64) int {
	if seq == 0 {
		return -1
	}
	for i := range s.ctl {
		if s.ctl[i].seq == seq {
			return i
		}
	}
	return -1
}

// backendLeft stops waiting for b's answers. Called with s.mu held.
func (s *Service) backendLeft(b *backendConn) {
	for i := range s.ctl {
		c := &s.ctl[i]
		if _, ok := c.waiting[b]; !ok {
			continue
		}
		delete(c.waiting, b)
		if len(c.waiting) == 0 {
			s.opDone(i)
		}
	}
}

// ctlTimeouts fails the ops that have waited for their backends longer
// than the load timeout. Called with s.mu held.
func (s *Service) ctlTimeouts(now scheduler.Time) {
	for i := range s.ctl {
		c := &s.ctl[i]
		if c.seq == 0 || now.Sub(c.since) < s.cfg.LoadTimeout {
			continue
		}
		for b := range c.waiting {
			c.failed = append(c.failed, fmt.Sprintf("%s: no answer in %v", b.name, s.cfg.LoadTimeout))
		}
		c.waiting = nil
		s.opDone(i)
	}
}

// opDone ends model i's op once every backend has answered: the model is
// READY after a load that every backend made, UNAVAILABLE otherwise, and
// the frontends that asked hear how it went. Called with s.mu held.
func (s *Service) opDone(i int) {
	c := &s.ctl[i]
	c.seq, c.waiting = 0, nil
	name := s.cfg.Models[i].Name
	var answer string
	switch {
	case c.state == wire.ModelLoading && len(c.failed) == 0:
		c.state, c.reason = wire.ModelReady, ""
		s.log.Info().Str("model", name).Uint64("memory_bytes", c.memory).Msg("model loaded")
	case c.state == wire.ModelLoading:
		c.state = wire.ModelUnavailable
		c.reason = "load failed: " + strings.Join(c.failed, "; ")
		answer = fmt.Sprintf("model %s: %s", name, c.reason)
		s.log.Warn().Str("model", name).Str("reason", c.reason).Msg("model load failed")
		// Those that loaded it (or may yet) let it go again; their
		// answers are to no op and are ignored.
		s.nextCtl++
		for b := range s.backends {
			_ = b.conn.Send(&wire.Control{Seq: s.nextCtl, Op: wire.OpUnload, Model: uint32(i)})
		}
	default: // unloading
		c.state, c.reason = wire.ModelUnavailable, "unloaded"
		if len(c.failed) > 0 {
			c.reason += " (" + strings.Join(c.failed, "; ") + ")"
		}
		s.log.Info().Str("model", name).Msg("model unloaded")
	}
	c.failed = nil
	// The new state reaches every frontend before the answer reaches
	// the one that asked: a Load that returns finds the model READY.
	s.broadcast(i)
	for _, w := range c.waiters {
		w(answer)
	}
	c.waiters = nil
}

// broadcast tells every frontend model i's state. Called with s.mu held.
func (s *Service) broadcast(i int) {
	m := &wire.ModelStates{States: []wire.ModelStatus{s.status(i)}}
	for _, f := range s.frontends {
		_ = f.conn.Send(m)
	}
}

package backend

import (
	"context"
	"errors"
	"fmt"

	"github.com/symphony-serving/symphony/transport/wire"
)

// errDraining settles a registration that a Drain cut short.
var errDraining = errors.New("the agent is draining")

// MoveTo moves the agent to the scheduler at addr, make-before-break for
// every request: it tells the current scheduler that it is leaving (no new
// plans), waits until that scheduler has answered (or is gone) and every
// plan it sent has finished with its results and GPU reports sent, closes
// that connection, and registers the GPUs with the scheduler at addr,
// which loads that scheduler's models in place of the old ones. It returns
// once registered there.
//
// Moving to the scheduler the agent is with already changes nothing (it
// waits for the registration if that is still under way); a parked agent
// just registers. If ctx ends first, MoveTo says so, and the move goes on
// in the background: the agent leaves, and keeps trying to register with
// addr, until another move or a Drain. Moves, Park's included, run one at
// a time, in turn: the later one starts once the earlier has returned (or,
// if its ctx ended during the leave, has left its scheduler). MoveTo fails
// once the agent drains or is closed.
func (a *Agent) MoveTo(ctx context.Context, addr string) error {
	if addr == "" {
		return errors.New("backend: moving to an empty scheduler address: use Park")
	}
	return a.move(ctx, addr)
}

// Park leaves the current scheduler as MoveTo does, and registers with
// none: the agent keeps running, its GPUs idle, in the control plane's
// free pool until a MoveTo. It returns once the old scheduler's plans have
// all finished and its connection is closed; Ready reports parked from
// then on. Parking a parked agent changes nothing.
func (a *Agent) Park(ctx context.Context) error {
	return a.move(ctx, "")
}

// move leaves the current scheduler for the one at to ("" to park). It
// holds a.moves until it returns, or, if ctx ends while the agent still
// leaves, until the move's goroutine has switched to to.
func (a *Agent) move(ctx context.Context, to string) error {
	what := "moving to the scheduler at " + to
	if to == "" {
		what = "parking"
	}
	select {
	case a.moves <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("backend: %s: waiting for the move under way: %w", what, ctx.Err())
	}
	a.mu.Lock()
	var refuse error
	switch {
	case a.life.Err() != nil:
		refuse = errors.New("the agent is closed")
	case a.draining:
		refuse = errDraining
	}
	from, reg := a.schedAddrLocked(), a.reg
	if refuse != nil || from == to {
		a.mu.Unlock()
		defer func() { <-a.moves }()
		if refuse != nil {
			return fmt.Errorf("backend: %s: %w", what, refuse)
		}
		return a.awaitRegistered(ctx, reg)
	}
	// Under a.mu, as a session registers: sess is either nil (and no
	// session of from registers any more) or one that reported ready
	// before the Leaving that leaveAndSwitch sends.
	a.leaving, a.next = true, to
	sess := a.session
	a.mu.Unlock()
	a.log.Info().Str("from", from).Str("to", to).Msg("moving: leaving the scheduler")
	type switched struct {
		reg *registration
		err error
	}
	done := make(chan switched)    // the goroutine hands a.moves back here
	abandon := make(chan struct{}) // or, once ctx has ended, releases it itself
	go func() {
		reg, err := a.leaveAndSwitch(sess, from, to)
		select {
		case done <- switched{reg, err}:
		case <-abandon:
			<-a.moves
		}
	}()
	select {
	case s := <-done:
		defer func() { <-a.moves }()
		if s.err != nil {
			return fmt.Errorf("backend: %s: %w", what, s.err)
		}
		return a.awaitRegistered(ctx, s.reg)
	case <-ctx.Done():
		close(abandon)
		return fmt.Errorf("backend: %s: still leaving the scheduler at %s, the move goes on: %w", what, from, ctx.Err())
	}
}

// leaveAndSwitch leaves sess (the session with the scheduler at from, nil
// if none is registered) gracefully, then points the dial loop at to and
// returns the new registration (nil when parking). It gives up only if
// the agent closes.
func (a *Agent) leaveAndSwitch(sess *schedSession, from, to string) (*registration, error) {
	closed := errors.New("the agent closed while leaving its scheduler")
	if sess != nil && !sess.dead.Load() && sess.conn.Send(&wire.Leaving{}) == nil {
		select {
		case <-sess.leaveOK:
		case <-sess.closed:
			// The scheduler is gone: the plans held still run, and
			// their results still reach their frontends.
		case <-a.life.Done():
			return nil, closed
		}
	}
	if a.awaitIdle(a.life) != nil {
		return nil, closed
	}
	// Every result is queued; hand them to their data connections
	// before the next scheduler's frontends replace those connections.
	a.pull.flush()
	a.mu.Lock()
	if a.reg != nil {
		a.reg.finish(fmt.Errorf("superseded by a move to %q", to))
	}
	a.reg, a.session, a.leaving, a.next = nil, nil, false, ""
	if to != "" {
		a.reg = newRegistration(to)
		if a.draining {
			a.reg.finish(errDraining)
		}
	}
	reg := a.reg
	if a.cancelDial != nil {
		if to == "" {
			a.cancelDial(errors.New("backend parking"))
		} else {
			a.cancelDial(fmt.Errorf("backend moving to %s", to))
		}
	}
	a.mu.Unlock()
	if sess != nil {
		// The dial loop closes the old connection before it dials to.
		select {
		case <-sess.closed:
		case <-a.life.Done():
			return nil, closed
		}
	}
	if to == "" {
		a.log.Info().Str("from", from).Str("to", to).Msg("parked: registered with no scheduler")
	} else {
		a.log.Info().Str("from", from).Str("to", to).Msg("moved: registering with the new scheduler")
	}
	return reg, nil
}

// awaitRegistered waits until reg has registered (nil reg: parked,
// nothing to wait for), or ctx ends, or the agent closes.
func (a *Agent) awaitRegistered(ctx context.Context, reg *registration) error {
	if reg == nil {
		return nil
	}
	select {
	case <-reg.done:
		if reg.err != nil {
			return fmt.Errorf("backend: registering with the scheduler at %s: %w", reg.addr, reg.err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("backend: registering with the scheduler at %s (still trying): %w", reg.addr, ctx.Err())
	case <-a.life.Done():
		return fmt.Errorf("backend: registering with the scheduler at %s: the agent is closed", reg.addr)
	}
}

package frontend

import (
	"context"
	"fmt"

	"github.com/symphony-serving/symphony/transport"
)

// Routing: a partitioned control plane splits the models into parts, each
// with its own scheduler, and a routing table tells frontends which
// scheduler takes each model's requests. One client follows the table:
// it keeps a session to every scheduler a model goes to, each dialed and
// redialed on its own, while its input store and data listener stay one
// (backends of every scheduler read inputs and send results there).
//
// A table changes when the controller moves a model to another part or a
// standby scheduler takes a part over. A model's requests switch to its
// new scheduler only once the session there has connected, so that a
// move never fails requests while the old scheduler still serves; and a
// session no model goes to any more closes only once the requests sent
// on it have ended, since its scheduler is still serving them.

// Routes is a routing table: the scheduler address of each model.
type Routes struct {
	// Revision numbers the tables, from 1, growing with each new one; a
	// client reports the latest it has applied (AppliedRevision), for the
	// controller to know when every frontend follows a table.
	Revision int64
	// Models maps a model name to its scheduler's address (host:port). A
	// model missing from it, or given an empty address, keeps its current
	// route: a table may be partial while a part has no active scheduler.
	Models map[string]string
}

// link is the client's tie to one scheduler address: the sessions it
// dials there, one after another, and the models that scheduler serves.
// Its fields are under Client.mu.
type link struct {
	addr string
	// sess is the live session, nil while disconnected.
	sess *session
	// models are the scheduler's models, from the last Welcome, with their
	// states kept current; they stay while disconnected.
	models map[string]modelEntry
	// welcomed is set once a session has connected.
	welcomed bool
	// pending counts the pending calls sent on its sessions.
	pending int
	// used marks the links models go to, while settle runs.
	used bool
	// retiring: no model goes here any more; the link stops once pending
	// is 0. retired: it has stopped, or is stopping.
	retiring, retired bool
	// stop ends its dialing loop (and closes its session).
	stop context.CancelFunc
}

// route is where a model's requests go, once a routing table named it.
type route struct {
	// cur is where they go now; nil: nowhere yet (the model had no route
	// before its table, and its scheduler has not connected).
	cur *link
	// want is where the latest table sends them: cur, or a link whose
	// session has not connected yet, which they switch to when it does.
	want *link
}

// SetRoutes adopts a routing table, unless the client holds one of the
// same or a later Revision already (tables may arrive out of order). Each
// model in it goes to its address from when the session there has
// connected, and to its previous one until then; models missing from it
// keep their routes. Sessions no model goes to any more close once their
// requests have ended.
func (c *Client) SetRoutes(r Routes) {
	c.mu.Lock()
	if c.closed || r.Revision <= c.table.Revision {
		held := c.table.Revision
		c.mu.Unlock()
		c.log.Debug().Int64("revision", r.Revision).Int64("held", held).Msg("routing table ignored: not newer than the one held")
		return
	}
	models := make(map[string]string, len(r.Models))
	for name, addr := range r.Models {
		if addr != "" {
			models[name] = addr
		}
	}
	c.table = Routes{Revision: r.Revision, Models: models}
	if c.routes == nil {
		c.routes = make(map[string]*route, len(models))
	}
	for name, rt := range c.routes {
		if _, ok := models[name]; !ok {
			// Missing: it stays where it is, and a switch an earlier
			// table asked for is off.
			rt.want = rt.cur
			if rt.cur == nil {
				delete(c.routes, name)
			}
		}
	}
	for name, addr := range models {
		l := c.links[addr]
		if l == nil {
			l = c.startLink(addr)
		}
		rt := c.routes[name]
		if rt == nil {
			rt = &route{cur: c.def} // where it went without a route
			c.routes[name] = rt
		}
		rt.want = l
	}
	stops, notify := c.settle()
	c.mu.Unlock()
	c.log.Info().Int64("revision", r.Revision).Int("models", len(models)).Msg("routing table adopted")
	c.afterSettle(stops, notify)
}

// AppliedRevision is the latest routing table Revision the client follows
// in full: every model of that table goes to the table's address over a
// session that has connected, so every request sent from now on goes by
// it. 0 until a table is applied.
func (c *Client) AppliedRevision() int64 { return c.applied.Load() }

// OnRoutesApplied has f called with AppliedRevision each time it grows
// from now on, so that the client can acknowledge tables to the
// controller. Calls run one at a time, in growing order, on the goroutine
// that applied the table (SetRoutes' caller or a session's), never under
// the client's locks, so f may call the client; a revision applied while
// f runs for an earlier one is reported after it, and revisions applied
// in quick succession may be reported once, by the latest.
func (c *Client) OnRoutesApplied(f func(rev int64)) { c.onApplied.Store(&f) }

// startLink starts dialing addr. Called with c.mu held, not closed.
func (c *Client) startLink(addr string) *link {
	ctx, stop := context.WithCancel(c.loopCtx)
	l := &link{addr: addr, stop: stop}
	c.links[addr] = l
	c.loops.Add(1)
	go func() {
		defer c.loops.Done()
		transport.KeepDialing(ctx, c.cfg.Backoff, c.log.With().Str("scheduler", addr).Logger(), func(ctx context.Context) error {
			return c.dialScheduler(ctx, l)
		})
	}()
	return l
}

// resolve is the link a model's requests go to now: its route's, or the
// default one; nil for none. Called with c.mu held.
func (c *Client) resolve(model string) *link {
	if rt, ok := c.routes[model]; ok {
		return rt.cur
	}
	return c.def
}

// lookup is where a request for model goes now: the live session and the
// model as that session's Welcome described it (its ID is the session's),
// or why it cannot go. Called with c.mu held.
func (c *Client) lookup(model string) (*session, modelEntry, error) {
	l := c.resolve(model)
	if l == nil {
		// No route: an unknown model, unless nothing has connected to
		// tell (or a table routes it to a scheduler not connected yet).
		if _, routed := c.routes[model]; routed || !c.anyConnected() {
			return nil, modelEntry{}, ErrNotConnected
		}
		return nil, modelEntry{}, fmt.Errorf("%w %q", ErrUnknownModel, model)
	}
	if l.sess == nil {
		return nil, modelEntry{}, ErrNotConnected
	}
	m, ok := l.models[model]
	if !ok {
		return nil, modelEntry{}, fmt.Errorf("%w %q", ErrUnknownModel, model)
	}
	return l.sess, m, nil
}

// settle brings the routes up to date: models switch to the links their
// table wants once those have connected, links no model goes to retire
// (those with calls pending once the calls end), and the table is applied
// once every model of it has switched. It returns the dialing loops to
// stop and whether a revision was applied, for afterSettle. Called with
// c.mu held.
func (c *Client) settle() (stops []context.CancelFunc, notify bool) {
	for _, rt := range c.routes {
		if rt.want != rt.cur && rt.want.sess != nil {
			rt.cur = rt.want
		}
	}
	for _, l := range c.links {
		l.used = false
	}
	if d := c.def; d != nil {
		// Before any table every model goes by default; after, the
		// default scheduler stays while a model it serves (or, unheard
		// yet, may serve) has no route.
		d.used = c.table.Revision == 0 || !d.welcomed
		for name := range d.models {
			if d.used {
				break
			}
			_, routed := c.routes[name]
			d.used = !routed
		}
	}
	for _, rt := range c.routes {
		if rt.cur != nil {
			rt.cur.used = true
		}
		rt.want.used = true
	}
	for _, l := range c.links {
		l.retiring = !l.used
		if l.retiring && l.pending == 0 {
			stops = append(stops, c.retire(l))
		}
	}
	if t := c.table; t.Revision > c.applied.Load() {
		for name, addr := range t.Models {
			if rt := c.routes[name]; rt == nil || rt.cur == nil || rt.cur.addr != addr {
				return stops, false
			}
		}
		c.applied.Store(t.Revision)
		notify = true
	}
	return stops, notify
}

// retire takes l out of use, for good: no model goes to it and no call
// waits on it. It returns the function that stops its dialing loop, to
// call without c.mu. Called with c.mu held.
func (c *Client) retire(l *link) context.CancelFunc {
	if c.links[l.addr] == l {
		delete(c.links, l.addr)
	}
	if c.def == l {
		c.def = nil
	}
	l.retiring, l.retired = false, true
	c.log.Info().Str("scheduler", l.addr).Msg("no model goes to this scheduler any more: closing its session")
	return l.stop
}

// afterSettle does what settle left for after c.mu: it stops retired
// links and reports an applied revision.
func (c *Client) afterSettle(stops []context.CancelFunc, notify bool) {
	for _, stop := range stops {
		stop()
	}
	if notify {
		c.log.Info().Int64("revision", c.applied.Load()).Msg("routing table applied")
		c.notifyApplied()
	}
}

// notifyApplied reports AppliedRevision to OnRoutesApplied's function
// until it has seen the latest, one call at a time: a goroutine that
// finds another reporting leaves the latest to it.
func (c *Client) notifyApplied() {
	c.mu.Lock()
	if c.notifying {
		c.mu.Unlock()
		return
	}
	c.notifying = true
	for {
		rev, f := c.applied.Load(), c.onApplied.Load()
		if f == nil || rev <= c.notified {
			c.notifying = false
			c.mu.Unlock()
			return
		}
		c.notified = rev
		c.mu.Unlock()
		(*f)(rev)
		c.mu.Lock()
	}
}

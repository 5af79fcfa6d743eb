package registry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// ErrNotLeader is the error of a write fenced by a term that is no longer
// the part's leader: the scheduler was deposed (its lease ended) or
// resigned.
var ErrNotLeader = errors.New("registry: not the part's leader")

// Election is the prefix of part's scheduler election keys,
// P elections/<part>/: one key per candidate, under the candidate's
// lease, whose value is the candidate's Scheduler record as a standby.
// The candidate whose key has the least create revision leads, and that
// revision is its term.
func (k Keys) Election(part int) string {
	return k.prefix + "elections/" + strconv.Itoa(part) + "/"
}

// Leadership is a scheduler elected active for its part. It ends when its
// lease does (Done) or on Resign; the scheduler then stops acting for the
// part: etcd lets a deposed scheduler's term-fenced writes fail, but only
// the scheduler itself can stop planning.
type Leadership struct {
	r      *Registry
	rec    Scheduler // as active, Revision = term
	reg    *Registration[Scheduler]
	key    string // the election key
	cancel context.CancelFunc
	done   chan struct{}

	resignOnce sync.Once
	resignErr  error
}

// Term is the election's leader revision: the create revision of the
// scheduler's election key. It grows with every takeover of the part and
// is the Revision of its record as active.
func (l *Leadership) Term() int64 { return l.rec.Revision }

// Lease is the lease the scheduler's record and election key live under:
// what it puts under it (its part's Report) goes when it does.
func (l *Leadership) Lease() clientv3.LeaseID { return l.reg.Lease() }

// Scheduler is the scheduler's record as active.
func (l *Leadership) Scheduler() Scheduler { return l.rec }

// Done is closed when the leadership is lost: the lease ended (etcd
// expired it, or the client lost etcd for about the TTL), the election
// key was deleted, or Resign. It may close after a standby has already
// been elected, since etcd expires the lease on its own clock.
func (l *Leadership) Done() <-chan struct{} { return l.done }

// Resign hands the part over at once: it removes the part's scheduler
// from the routing table (if the entry is still its own, and it still
// leads), then revokes its lease, which deletes both its election key and
// its record, so a waiting standby is elected without waiting for the TTL.
// The process is then unregistered; it calls Campaign again to stand
// again. Resign after the leadership was lost only cleans up.
func (l *Leadership) Resign(ctx context.Context) error {
	l.resignOnce.Do(func() {
		var lost bool
		select {
		case <-l.done:
			lost = true // the lease is gone or going: nothing to revoke
		default:
		}
		err := l.r.setRoute(ctx, l.rec.Part, l.key, l.rec.Revision, l.rec.Address, false)
		if errors.Is(err, ErrNotLeader) {
			err, lost = nil, true
		}
		l.cancel()
		if cerr := l.reg.Close(ctx); err == nil && !lost {
			err = cerr
		}
		<-l.done
		l.resignErr = err
	})
	return l.resignErr
}

// Campaign stands scheduler s for election as its part's active scheduler
// and returns once it is elected, or with an error when ctx ends or its
// lease is lost first (it then leaves no record behind).
//
// While it waits, s is registered as a standby (RegisterScheduler, the
// registry's TTL) and its election key is put under the same lease
// through a concurrency.Session, so a dead process leaves both the record
// and the election one TTL later. Once elected it updates its record to
// active with Revision = the term, and sets the part's entry of the
// routing table to s.Address (a write that reads again on a conflict and
// is fenced by the term), so frontends following WatchRoutes switch to it.
// The returned leadership outlives ctx; the lease is kept alive until
// Resign or its loss.
//
// The registry's Etcd must be a *clientv3.Client (concurrency needs one).
func (r *Registry) Campaign(ctx context.Context, s Scheduler) (*Leadership, error) {
	client, ok := r.etcd.(*clientv3.Client)
	if !ok {
		return nil, fmt.Errorf("registry: elections need a *clientv3.Client, not %T", r.etcd)
	}
	s.Role, s.Revision = RoleStandby, 0
	val, err := Encode(s)
	if err != nil {
		return nil, err
	}

	// lctx carries the keep-alives: it ends with ctx until elected, then
	// only on Resign.
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	detach := context.AfterFunc(ctx, cancel)
	reg, err := r.RegisterScheduler(lctx, s)
	if err != nil {
		detach()
		cancel()
		return nil, err
	}
	fail := func(err error) (*Leadership, error) {
		detach()
		cancel()
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.TTL)
		defer ccancel()
		_ = reg.Close(cctx)
		if errors.Is(reg.Err(), ErrLeaseLost) && ctx.Err() == nil {
			return nil, ErrLeaseLost
		}
		return nil, err
	}
	sess, err := concurrency.NewSession(client,
		concurrency.WithTTL(int(r.cfg.TTL/time.Second)),
		concurrency.WithLease(reg.Lease()),
		concurrency.WithContext(lctx))
	if err != nil {
		return fail(fmt.Errorf("registry: election session: %w", err))
	}
	prefix := r.keys.Election(s.Part)
	// NewElection adds the '/' that ends prefix.
	el := concurrency.NewElection(sess, prefix[:len(prefix)-1])

	// Stop waiting if the lease is lost: the key would be gone.
	cctx, ccancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-reg.Done():
			ccancel()
		case <-cctx.Done():
		}
	}()
	err = el.Campaign(cctx, string(val))
	ccancel()
	if err != nil {
		return fail(fmt.Errorf("registry: campaign for part %d: %w", s.Part, err))
	}

	s.Role, s.Revision = RoleActive, el.Rev()
	if err := reg.Update(ctx, s); err != nil {
		return fail(err)
	}
	if err := r.setRoute(ctx, s.Part, el.Key(), s.Revision, s.Address, true); err != nil {
		return fail(err)
	}
	detach()
	if lctx.Err() != nil { // ctx ended just before detach
		return fail(ctx.Err())
	}

	l := &Leadership{r: r, rec: s, reg: reg, key: el.Key(), cancel: cancel, done: make(chan struct{})}
	go l.watch(lctx)
	return l, nil
}

// watch closes l.done when the lease is lost, the election key is
// deleted, or lctx ends (Resign).
func (l *Leadership) watch(lctx context.Context) {
	defer close(l.done)
	wctx, cancel := context.WithCancel(lctx)
	defer cancel()
	// From the term on, so a deletion before the watch starts is seen.
	events := l.r.etcd.Watch(wctx, l.key, clientv3.WithRev(l.rec.Revision))
	for {
		select {
		case <-l.reg.Done():
			return
		case <-lctx.Done():
			return
		case wr, ok := <-events:
			if !ok {
				events = nil // the watch failed: the lease alone decides
				continue
			}
			if wr.Canceled {
				events = nil
				continue
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					return
				}
			}
		}
	}
}

// setRoute sets (active) or removes (!active, only if it is still addr)
// part's scheduler in the routing table, reading it again on a conflict.
// Each write also compares the election key's create revision with term,
// so a deposed leader's write fails with ErrNotLeader instead of pointing
// the part back at it.
func (r *Registry) setRoute(ctx context.Context, part int, electionKey string, term int64, addr string, active bool) error {
	for {
		t, rev, err := r.Routes(ctx)
		if err != nil {
			return err
		}
		cur, has := t.Schedulers[part]
		switch {
		case active && has && cur == addr, !active && (!has || cur != addr):
			return nil
		case active:
			if t.Schedulers == nil {
				t.Schedulers = map[int]string{}
			}
			t.Schedulers[part] = addr
		default:
			delete(t.Schedulers, part)
		}
		err = r.putRoutesFenced(ctx, t, rev, electionKey, term)
		if !errors.Is(err, ErrConflict) {
			return err
		}
	}
}

// putRoutesFenced is PutRoutes that also requires electionKey to exist
// with create revision term.
func (r *Registry) putRoutesFenced(ctx context.Context, t Routes, expected int64, electionKey string, term int64) error {
	val, err := Encode(t)
	if err != nil {
		return err
	}
	key := r.keys.Routes()
	resp, err := r.etcd.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", expected),
			clientv3.Compare(clientv3.CreateRevision(electionKey), "=", term)).
		Then(clientv3.OpPut(key, string(val))).
		Else(clientv3.OpGet(key, clientv3.WithKeysOnly()), clientv3.OpGet(electionKey, clientv3.WithKeysOnly())).
		Commit()
	if err != nil {
		return fmt.Errorf("registry: put %q: %w", key, err)
	}
	if resp.Succeeded {
		return nil
	}
	if kvs := resp.Responses[1].GetResponseRange().GetKvs(); len(kvs) == 0 || kvs[0].CreateRevision != term {
		return fmt.Errorf("%w: term %d of %q is over", ErrNotLeader, term, electionKey)
	}
	var actual int64
	if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
		actual = kvs[0].ModRevision
	}
	return &ConflictError{Key: key, Expected: expected, Actual: actual}
}

// Leader reads part's elected scheduler: its record as active, Revision
// its term; ok is false when no candidate stands.
func (r *Registry) Leader(ctx context.Context, part int) (s Scheduler, ok bool, err error) {
	prefix := r.keys.Election(part)
	resp, err := r.etcd.Get(ctx, prefix, clientv3.WithFirstCreate()...)
	if err != nil {
		return Scheduler{}, false, fmt.Errorf("registry: get %q: %w", prefix, err)
	}
	if len(resp.Kvs) == 0 {
		return Scheduler{}, false, nil
	}
	kv := resp.Kvs[0]
	s, err = decodeAt[Scheduler](string(kv.Key), kv.Value)
	if err != nil {
		return Scheduler{}, false, err
	}
	s.Role, s.Revision = RoleActive, kv.CreateRevision
	return s, true, nil
}

// Observe delivers part's leaders, each once and in term order (a
// leader's record as active, Revision its term): first the current one,
// if any, then each one elected later. A period with no leader is not
// delivered, nor a leader whose record does not decode. The channel
// closes when ctx ends or reading etcd fails; the caller observes again.
func (r *Registry) Observe(ctx context.Context, part int) <-chan Scheduler {
	out := make(chan Scheduler)
	go func() {
		defer close(out)
		prefix := r.keys.Election(part)
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		defer cancel()
		var events clientv3.WatchChan
		var last int64 // the last term seen
		for {
			resp, err := r.etcd.Get(ctx, prefix, clientv3.WithFirstCreate()...)
			if err != nil {
				return
			}
			if events == nil {
				events = r.etcd.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
			}
			if len(resp.Kvs) > 0 && resp.Kvs[0].CreateRevision > last {
				kv := resp.Kvs[0]
				last = kv.CreateRevision
				if s, err := decodeAt[Scheduler](string(kv.Key), kv.Value); err == nil {
					s.Role, s.Revision = RoleActive, kv.CreateRevision
					select {
					case out <- s:
					case <-ctx.Done():
						return
					}
				}
			}
			// Any change under the prefix may change the leader: read again.
			wr, ok := <-events
			if !ok || wr.Err() != nil {
				return
			}
		}
	}()
	return out
}

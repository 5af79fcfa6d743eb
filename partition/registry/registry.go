package registry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Etcd is the part of an etcd client the registry uses; *clientv3.Client
// has it, and a test may wrap one to inject faults.
type Etcd interface {
	clientv3.KV
	clientv3.Lease
	clientv3.Watcher
}

// Config configures a Registry.
type Config struct {
	// Prefix is the key prefix (DefaultPrefix); it starts and ends with '/'.
	Prefix string
	// TTL is how long a process's record outlives its last keep-alive:
	// the time for a dead process to leave the registry. Whole seconds,
	// at least one (etcd may raise a short TTL to its own minimum).
	TTL time.Duration
}

// Default returns the default configuration: DefaultPrefix and a 10s TTL.
func Default() Config {
	return Config{Prefix: DefaultPrefix, TTL: 10 * time.Second}
}

// Validate reports the first thing wrong with c.
func (c Config) Validate() error {
	if _, err := NewKeys(c.Prefix); err != nil {
		return err
	}
	if c.TTL < time.Second || c.TTL%time.Second != 0 {
		return fmt.Errorf("registry: TTL %v is not a whole number of seconds, at least 1s", c.TTL)
	}
	return nil
}

// Registry reads and writes the cluster state in etcd. It holds no state
// of its own beyond its configuration: every method may be called from any
// goroutine.
type Registry struct {
	etcd Etcd
	cfg  Config
	keys Keys
}

// New returns a registry over e, which the caller keeps and closes.
func New(e Etcd, cfg Config) (*Registry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	keys, _ := NewKeys(cfg.Prefix)
	return &Registry{etcd: e, cfg: cfg, keys: keys}, nil
}

// Keys returns the registry's key layout.
func (r *Registry) Keys() Keys { return r.keys }

// ErrConflict is the error of a revision-checked write that lost: the key
// changed since the revision the writer read. errors.Is matches it for a
// *ConflictError.
var ErrConflict = errors.New("registry: conflicting write")

// ErrLeaseLost is a Registration's Err when its lease ended without Close:
// etcd expired or revoked it, or the client lost etcd for longer than the
// TTL. The record is gone; the process registers again.
var ErrLeaseLost = errors.New("registry: lease lost")

// ConflictError is a revision-checked write that lost.
type ConflictError struct {
	Key string
	// Expected is the mod revision the writer read; Actual the key's mod
	// revision when its write was refused (0: the key does not exist).
	Expected, Actual int64
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("registry: conflicting write of %q: expected mod revision %d, found %d", e.Key, e.Expected, e.Actual)
}

func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// leased are the records a process registers under a lease.
type leased interface {
	Scheduler | Backend | Frontend
	Validate() error
}

func keyOf[T leased](k Keys, v T) string {
	switch v := any(v).(type) {
	case Scheduler:
		return k.Scheduler(v.Part, v.Name)
	case Backend:
		return k.Backend(v.Name)
	case Frontend:
		return k.Frontend(v.Name)
	}
	panic("unreachable")
}

// Registration is one process's record, kept alive under its own lease
// until Close, the end of the context it was registered with, or the loss
// of the lease.
type Registration[T leased] struct {
	r      *Registry
	key    string
	lease  clientv3.LeaseID
	cancel context.CancelFunc
	done   chan struct{}
	err    error // set before done closes

	closeOnce sync.Once
}

// RegisterScheduler, RegisterBackend and RegisterFrontend are Register
// for each process record.
func (r *Registry) RegisterScheduler(ctx context.Context, s Scheduler) (*Registration[Scheduler], error) {
	return Register(ctx, r, s)
}

func (r *Registry) RegisterBackend(ctx context.Context, b Backend) (*Registration[Backend], error) {
	return Register(ctx, r, b)
}

func (r *Registry) RegisterFrontend(ctx context.Context, f Frontend) (*Registration[Frontend], error) {
	return Register(ctx, r, f)
}

// Register grants a lease of the registry's TTL, puts v under it at its
// key, and keeps the lease alive from a goroutine until ctx ends, Close is
// called or the lease is lost. If the process dies, the keep-alives stop
// and etcd deletes the record one TTL later. An existing record at the key
// is overwritten (a restarted process takes its name back).
func Register[T leased](ctx context.Context, r *Registry, v T) (*Registration[T], error) {
	val, err := Encode(v)
	if err != nil {
		return nil, err
	}
	grant, err := r.etcd.Grant(ctx, int64(r.cfg.TTL/time.Second))
	if err != nil {
		return nil, fmt.Errorf("registry: grant lease: %w", err)
	}
	key := keyOf(r.keys, v)
	if _, err := r.etcd.Put(ctx, key, string(val), clientv3.WithLease(grant.ID)); err != nil {
		r.revoke(grant.ID)
		return nil, fmt.Errorf("registry: put %q: %w", key, err)
	}
	kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	alive, err := r.etcd.KeepAlive(kctx, grant.ID)
	if err != nil {
		cancel()
		r.revoke(grant.ID)
		return nil, fmt.Errorf("registry: keep lease alive: %w", err)
	}
	reg := &Registration[T]{r: r, key: key, lease: grant.ID, cancel: cancel, done: make(chan struct{})}
	go func() {
		for range alive { // drained, or the client blocks its keep-alives
		}
		if kctx.Err() == nil {
			reg.err = ErrLeaseLost
		} else {
			reg.err = context.Canceled
		}
		close(reg.done)
	}()
	go func() {
		select {
		case <-ctx.Done():
			cancel()
		case <-reg.done:
		}
	}()
	return reg, nil
}

func (r *Registry) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _ = r.etcd.Revoke(ctx, id)
}

// Key is the record's key.
func (g *Registration[T]) Key() string { return g.key }

// Lease is the record's lease.
func (g *Registration[T]) Lease() clientv3.LeaseID { return g.lease }

// Done is closed when the keep-alives stop; Err then says why.
func (g *Registration[T]) Done() <-chan struct{} { return g.done }

// Err is nil while the lease is kept alive; then ErrLeaseLost, or
// context.Canceled after Close or the end of the registration's context.
func (g *Registration[T]) Err() error {
	select {
	case <-g.done:
		return g.err
	default:
		return nil
	}
}

// Update replaces the record under the same lease (a backend's loaded
// models, a scheduler's role). v must have the same key; the write fails
// with ErrLeaseLost once the lease is gone rather than put a record that
// would never expire.
func (g *Registration[T]) Update(ctx context.Context, v T) error {
	if k := keyOf(g.r.keys, v); k != g.key {
		return fmt.Errorf("registry: update of %q with a record for %q", g.key, k)
	}
	val, err := Encode(v)
	if err != nil {
		return err
	}
	if g.Err() != nil {
		return ErrLeaseLost
	}
	if _, err := g.r.etcd.Put(ctx, g.key, string(val), clientv3.WithLease(g.lease)); err != nil {
		return fmt.Errorf("registry: update %q: %w", g.key, err)
	}
	return nil
}

// Close stops the keep-alives and revokes the lease, which deletes the
// record at once (a graceful exit; a crash leaves it to the TTL).
func (g *Registration[T]) Close(ctx context.Context) error {
	var err error
	g.closeOnce.Do(func() {
		g.cancel()
		<-g.done
		if _, rerr := g.r.etcd.Revoke(ctx, g.lease); rerr != nil {
			err = fmt.Errorf("registry: revoke lease of %q: %w", g.key, rerr)
		}
	})
	return err
}

// Entry is a record read from etcd with its key and mod revision.
type Entry[T record] struct {
	Key         string
	Value       T
	ModRevision int64
}

// List reads every record under prefix at one revision, in key order,
// and returns them with that revision. A record that does not decode
// fails the whole read with a *DecodeError naming its key.
func List[T record](ctx context.Context, r *Registry, prefix string) ([]Entry[T], int64, error) {
	resp, err := r.etcd.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, fmt.Errorf("registry: list %q: %w", prefix, err)
	}
	out := make([]Entry[T], 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		v, err := decodeAt[T](string(kv.Key), kv.Value)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, Entry[T]{Key: string(kv.Key), Value: v, ModRevision: kv.ModRevision})
	}
	return out, resp.Header.Revision, nil
}

// Schedulers, Backends, Frontends and Models list each kind of record.
func (r *Registry) Schedulers(ctx context.Context) ([]Entry[Scheduler], int64, error) {
	return List[Scheduler](ctx, r, r.keys.Schedulers())
}

func (r *Registry) Backends(ctx context.Context) ([]Entry[Backend], int64, error) {
	return List[Backend](ctx, r, r.keys.Backends())
}

func (r *Registry) Frontends(ctx context.Context) ([]Entry[Frontend], int64, error) {
	return List[Frontend](ctx, r, r.keys.Frontends())
}

func (r *Registry) Models(ctx context.Context) ([]Entry[Model], int64, error) {
	return List[Model](ctx, r, r.keys.Models())
}

// PutModel writes model m (no lease: models outlive processes) and
// returns the revision of the write.
func (r *Registry) PutModel(ctx context.Context, m Model) (int64, error) {
	val, err := Encode(m)
	if err != nil {
		return 0, err
	}
	resp, err := r.etcd.Put(ctx, r.keys.Model(m.Name), string(val))
	if err != nil {
		return 0, fmt.Errorf("registry: put model %q: %w", m.Name, err)
	}
	return resp.Header.Revision, nil
}

// DeleteModel deletes model name's record.
func (r *Registry) DeleteModel(ctx context.Context, name string) error {
	if _, err := r.etcd.Delete(ctx, r.keys.Model(name)); err != nil {
		return fmt.Errorf("registry: delete model %q: %w", name, err)
	}
	return nil
}

// Assignment reads the part assignment and its mod revision, the one to
// pass to PutAssignment; with no assignment yet, the zero Assignment and
// revision 0.
func (r *Registry) Assignment(ctx context.Context) (Assignment, int64, error) {
	return get[Assignment](ctx, r, r.keys.Assignment())
}

// PutAssignment writes a if the assignment's mod revision is still
// expected (0: there is none yet), atomically, and returns the new mod
// revision. Of two controllers that read the same revision, one write
// wins and the other gets a *ConflictError (errors.Is ErrConflict); the
// loser reads again before deciding anything.
func (r *Registry) PutAssignment(ctx context.Context, a Assignment, expected int64) (int64, error) {
	return putIf(ctx, r, r.keys.Assignment(), a, expected)
}

// Routes reads the routing table and its mod revision, as Assignment.
func (r *Registry) Routes(ctx context.Context) (Routes, int64, error) {
	return get[Routes](ctx, r, r.keys.Routes())
}

// PutRoutes writes the routing table with a revision check, as
// PutAssignment.
func (r *Registry) PutRoutes(ctx context.Context, t Routes, expected int64) (int64, error) {
	return putIf(ctx, r, r.keys.Routes(), t, expected)
}

func get[T record](ctx context.Context, r *Registry, key string) (T, int64, error) {
	var zero T
	resp, err := r.etcd.Get(ctx, key)
	if err != nil {
		return zero, 0, fmt.Errorf("registry: get %q: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return zero, 0, nil
	}
	kv := resp.Kvs[0]
	v, err := decodeAt[T](key, kv.Value)
	if err != nil {
		return zero, 0, err
	}
	return v, kv.ModRevision, nil
}

func putIf[T record](ctx context.Context, r *Registry, key string, v T, expected int64) (int64, error) {
	val, err := Encode(v)
	if err != nil {
		return 0, err
	}
	resp, err := r.etcd.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", expected)).
		Then(clientv3.OpPut(key, string(val))).
		Else(clientv3.OpGet(key, clientv3.WithKeysOnly())).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("registry: put %q: %w", key, err)
	}
	if !resp.Succeeded {
		var actual int64
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			actual = kvs[0].ModRevision
		}
		return 0, &ConflictError{Key: key, Expected: expected, Actual: actual}
	}
	return resp.Header.Revision, nil
}

// Update is one change of a one-key record (the routing table, the
// assignment), in revision order.
type Update[T record] struct {
	// Value is the record as of Revision; Deleted reports that the key
	// was deleted (Value is then zero).
	Value    T
	Revision int64
	Deleted  bool
	// Err, when set, is either a *DecodeError (a bad record at Revision,
	// skipped; the watch goes on and the caller keeps the last good one)
	// or the error that ended the watch, the last update before the
	// channel closes. ErrCompacted means the revision to resume from is
	// gone: read the record afresh and watch from its revision + 1.
	Err error
}

// RoutesUpdate is one change of the routing table.
type RoutesUpdate = Update[Routes]

// AssignmentUpdate is one change of the assignment.
type AssignmentUpdate = Update[Assignment]

// ErrCompacted ends a watch whose start revision etcd has compacted away.
var ErrCompacted = errors.New("registry: watch revision compacted")

// WatchRoutes delivers the routing table's changes in revision order, each
// once, on the returned channel, until ctx ends (the channel then closes)
// or the watch fails (an update with Err, then the channel closes).
//
// With from > 0 the first update is the first change at revision from or
// later, so that a watcher which saw revision n resumes with from = n+1
// and misses nothing. With from == 0 the first update is the table as it
// is now (unless there is none), then every later change.
func (r *Registry) WatchRoutes(ctx context.Context, from int64) <-chan RoutesUpdate {
	return watchKey[Routes](ctx, r, r.keys.Routes(), from)
}

// WatchAssignment delivers the assignment's changes as WatchRoutes does
// the routing table's: schedulers follow it to load and unload models,
// backends to change parts.
func (r *Registry) WatchAssignment(ctx context.Context, from int64) <-chan AssignmentUpdate {
	return watchKey[Assignment](ctx, r, r.keys.Assignment(), from)
}

func watchKey[T record](ctx context.Context, r *Registry, key string, from int64) <-chan Update[T] {
	out := make(chan Update[T], 16)
	go func() {
		defer close(out)
		send := func(u Update[T]) bool {
			select {
			case out <- u:
				return true
			case <-ctx.Done():
				return false
			}
		}
		if from <= 0 {
			resp, err := r.etcd.Get(ctx, key)
			if err != nil {
				if ctx.Err() == nil {
					send(Update[T]{Err: fmt.Errorf("registry: get %q: %w", key, err)})
				}
				return
			}
			from = resp.Header.Revision + 1
			if len(resp.Kvs) > 0 {
				kv := resp.Kvs[0]
				u := Update[T]{Revision: kv.ModRevision}
				u.Value, u.Err = decodeAt[T](key, kv.Value)
				if !send(u) {
					return
				}
			}
		}
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		defer cancel()
		last := from - 1
		for wr := range r.etcd.Watch(wctx, key, clientv3.WithRev(from)) {
			if wr.CompactRevision != 0 {
				send(Update[T]{Err: fmt.Errorf("%w: resume from %d, compacted through %d", ErrCompacted, from, wr.CompactRevision)})
				return
			}
			if err := wr.Err(); err != nil {
				if ctx.Err() == nil {
					send(Update[T]{Err: fmt.Errorf("registry: watch %q: %w", key, err)})
				}
				return
			}
			for _, ev := range wr.Events {
				rev := ev.Kv.ModRevision
				if rev <= last {
					continue // never twice, never backwards
				}
				last = rev
				u := Update[T]{Revision: rev}
				if ev.Type == clientv3.EventTypeDelete {
					u.Deleted = true
				} else {
					u.Value, u.Err = decodeAt[T](key, ev.Kv.Value)
				}
				if !send(u) {
					return
				}
			}
		}
		if ctx.Err() == nil {
			send(Update[T]{Err: fmt.Errorf("registry: watch %q ended", key)})
		}
	}()
	return out
}

// PutReport puts part's report under lease (the reporting scheduler's,
// so that a dead scheduler's report goes with it).
func (r *Registry) PutReport(ctx context.Context, rep Report, lease clientv3.LeaseID) error {
	val, err := Encode(rep)
	if err != nil {
		return err
	}
	key := r.keys.Report(rep.Part)
	if _, err := r.etcd.Put(ctx, key, string(val), clientv3.WithLease(lease)); err != nil {
		return fmt.Errorf("registry: put %q: %w", key, err)
	}
	return nil
}

// Reports reads every part's report.
func (r *Registry) Reports(ctx context.Context) ([]Entry[Report], int64, error) {
	return List[Report](ctx, r, r.keys.Reports())
}

// Epoch reads the controller's last epoch record (zero and revision 0 if
// none).
func (r *Registry) Epoch(ctx context.Context) (Epoch, int64, error) {
	return get[Epoch](ctx, r, r.keys.Epoch())
}

// PutEpoch writes the controller's last epoch record.
func (r *Registry) PutEpoch(ctx context.Context, e Epoch) error {
	val, err := Encode(e)
	if err != nil {
		return err
	}
	if _, err := r.etcd.Put(ctx, r.keys.Epoch(), string(val)); err != nil {
		return fmt.Errorf("registry: put %q: %w", r.keys.Epoch(), err)
	}
	return nil
}

func decodeAt[T record](key string, b []byte) (T, error) {
	v, err := Decode[T](b)
	if err != nil {
		err.(*DecodeError).Key = key
		var zero T
		return zero, err
	}
	return v, nil
}

package registry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/symphony-serving/symphony/partition/registry"
	"github.com/symphony-serving/symphony/partition/registry/etcdtest"
)

func newRegistry(t *testing.T, c *clientv3.Client, ttl time.Duration) *registry.Registry {
	t.Helper()
	cfg := registry.Default()
	cfg.Prefix = "/test-" + t.Name() + "/"
	cfg.TTL = ttl
	r, err := registry.New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestLeaseExpiryRemovesDeadProcess registers a backend through a client
// that then dies (closed without revoking), and waits on a watch for etcd
// to delete the record when the lease runs out.
func TestLeaseExpiryRemovesDeadProcess(t *testing.T) {
	srv := etcdtest.Start(t)
	watcher := srv.Client(t)
	ctx := testContext(t)

	doomed, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r := newRegistry(t, doomed, time.Second)
	b := registry.Backend{Name: "b0", GPUs: 2, Address: "127.0.0.1:7200", Models: []string{"m"}}
	reg, err := r.RegisterBackend(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	list, rev, err := r.Backends(ctx)
	if err != nil || len(list) != 1 || list[0].Value.Name != "b0" {
		t.Fatalf("Backends = %+v, %v", list, err)
	}
	b.Models = append(b.Models, "m2")
	if err := reg.Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	events := watcher.Watch(ctx, reg.Key(), clientv3.WithRev(rev+1))
	start := time.Now()
	_ = doomed.Close() // the process dies: no more keep-alives, no revoke

	var sawUpdate bool
	for wr := range events {
		for _, ev := range wr.Events {
			switch ev.Type {
			case clientv3.EventTypePut:
				got, err := registry.DecodeBackend(ev.Kv.Value)
				if err != nil || len(got.Models) != 2 {
					t.Fatalf("update: %+v, %v", got, err)
				}
				sawUpdate = true
			case clientv3.EventTypeDelete:
				if !sawUpdate {
					t.Fatal("deleted before the update was seen")
				}
				t.Logf("record gone %v after the client died", time.Since(start))
				if d := time.Since(start); d > 10*time.Second {
					t.Fatalf("record outlived its 1s lease by %v", d)
				}
				return
			}
		}
	}
	t.Fatalf("watch ended without a delete: %v", ctx.Err())
}

// TestRegistrationCloseRemovesRecord: a graceful exit revokes the lease and
// the record goes at once; the registration reports why it stopped.
func TestRegistrationCloseRemovesRecord(t *testing.T) {
	c := etcdtest.Start(t).Client(t)
	r := newRegistry(t, c, 5*time.Second)
	ctx := testContext(t)
	s := registry.Scheduler{Name: "s0", Part: 1, Role: registry.RoleStandby, Address: "127.0.0.1:7100"}
	reg, err := r.RegisterScheduler(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if want := r.Keys().Scheduler(1, "s0"); reg.Key() != want {
		t.Fatalf("key %q, want %q", reg.Key(), want)
	}
	if err := reg.Update(ctx, registry.Scheduler{Name: "s0", Part: 2, Address: "127.0.0.1:7100"}); err == nil {
		t.Fatal("updated a registration with another part's record")
	}
	if err := reg.Close(ctx); err != nil {
		t.Fatal(err)
	}
	<-reg.Done()
	if !errors.Is(reg.Err(), context.Canceled) {
		t.Fatalf("Err after Close = %v", reg.Err())
	}
	list, _, err := r.Schedulers(ctx)
	if err != nil || len(list) != 0 {
		t.Fatalf("after Close: %+v, %v", list, err)
	}
	if err := reg.Update(ctx, s); !errors.Is(err, registry.ErrLeaseLost) {
		t.Fatalf("Update after Close = %v", err)
	}
}

// TestRegistrationLeaseLost: a lease revoked behind the process's back
// (as when etcd expires it during a partition) ends the registration with
// ErrLeaseLost.
func TestRegistrationLeaseLost(t *testing.T) {
	c := etcdtest.Start(t).Client(t)
	r := newRegistry(t, c, 5*time.Second)
	ctx := testContext(t)
	reg, err := r.RegisterFrontend(ctx, registry.Frontend{Name: "f0", DataAddress: "127.0.0.1:7300"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Revoke(ctx, reg.Lease()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reg.Done():
	case <-ctx.Done():
		t.Fatal("the registration did not notice its lease was gone")
	}
	if !errors.Is(reg.Err(), registry.ErrLeaseLost) {
		t.Fatalf("Err = %v, want ErrLeaseLost", reg.Err())
	}
}

// TestAssignmentStaleWriterLoses: two controllers read the same revision;
// the first write lands, the second gets ErrConflict, and after reading
// again it wins.
func TestAssignmentStaleWriterLoses(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := testContext(t)
	ra, rb := newRegistry(t, srv.Client(t), time.Second), newRegistry(t, srv.Client(t), time.Second)

	a, rev, err := ra.Assignment(ctx)
	if err != nil || rev != 0 || a.Models != nil {
		t.Fatalf("empty registry: %+v, %d, %v", a, rev, err)
	}
	first := registry.Assignment{Epoch: 1, Parts: 2, Models: map[string]int{"m": 0}}
	revA, err := ra.PutAssignment(ctx, first, 0)
	if err != nil {
		t.Fatal(err)
	}
	// B read before A wrote: nothing there.
	_, err = rb.PutAssignment(ctx, registry.Assignment{Epoch: 1, Parts: 2, Models: map[string]int{"m": 1}}, 0)
	var ce *registry.ConflictError
	if !errors.Is(err, registry.ErrConflict) || !errors.As(err, &ce) || ce.Actual != revA || ce.Expected != 0 {
		t.Fatalf("stale create: %v", err)
	}
	got, rev, err := rb.Assignment(ctx)
	if err != nil || rev != revA || got.Models["m"] != 0 {
		t.Fatalf("after A's write: %+v, %d, %v", got, rev, err)
	}
	// Both now hold revA; A moves on, B's write on revA loses again.
	second := registry.Assignment{Epoch: 2, Parts: 2, Models: map[string]int{"m": 1}}
	revA2, err := ra.PutAssignment(ctx, second, revA)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rb.PutAssignment(ctx, registry.Assignment{Epoch: 2, Parts: 2}, revA); !errors.Is(err, registry.ErrConflict) {
		t.Fatalf("stale update: %v", err)
	}
	if _, err := rb.PutAssignment(ctx, registry.Assignment{Epoch: 3, Parts: 2}, revA2); err != nil {
		t.Fatalf("fresh update: %v", err)
	}
	if _, err := ra.PutAssignment(ctx, registry.Assignment{Epoch: 3, Parts: 0}, revA2); err == nil || errors.Is(err, registry.ErrConflict) {
		t.Fatalf("an invalid assignment: %v", err)
	}
}

// TestWatchRoutesOrderAndResume writes a sequence of tables, watches them
// arrive in order, then resumes from the middle and from the start, and
// sees a bad value reported and skipped.
func TestWatchRoutesOrderAndResume(t *testing.T) {
	c := etcdtest.Start(t).Client(t)
	r := newRegistry(t, c, time.Second)
	ctx := testContext(t)

	live := r.WatchRoutes(ctx, 0) // nothing yet: only changes
	var revs []int64
	var rev int64
	for epoch := uint64(1); epoch <= 5; epoch++ {
		tbl := registry.Routes{Epoch: epoch, Models: map[string]int{"m": int(epoch % 2)}, Schedulers: map[int]string{0: "127.0.0.1:7100", 1: "127.0.0.1:7101"}}
		var err error
		if rev, err = r.PutRoutes(ctx, tbl, rev); err != nil {
			t.Fatal(err)
		}
		revs = append(revs, rev)
	}
	if _, err := c.Put(ctx, r.Keys().Routes(), `{"epoch":6,"bogus":1}`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(ctx, r.Keys().Routes()); err != nil {
		t.Fatal(err)
	}

	next := func(ch <-chan registry.RoutesUpdate) registry.RoutesUpdate {
		t.Helper()
		select {
		case u, ok := <-ch:
			if !ok {
				t.Fatal("watch closed")
			}
			return u
		case <-ctx.Done():
			t.Fatal("no update")
		}
		panic("unreachable")
	}
	for i, want := range revs {
		u := next(live)
		if u.Err != nil || u.Revision != want || u.Value.Epoch != uint64(i+1) {
			t.Fatalf("update %d: %+v, want revision %d epoch %d", i, u, want, i+1)
		}
	}
	var de *registry.DecodeError
	if u := next(live); !errors.As(u.Err, &de) || u.Revision <= revs[4] {
		t.Fatalf("bad table: %+v", u)
	}
	if u := next(live); !u.Deleted || u.Err != nil {
		t.Fatalf("delete: %+v", u)
	}

	// A watcher that saw revs[2] resumes at revs[2]+1 and misses nothing.
	resumed := r.WatchRoutes(ctx, revs[2]+1)
	for i := 3; i < 5; i++ {
		if u := next(resumed); u.Revision != revs[i] || u.Value.Epoch != uint64(i+1) {
			t.Fatalf("resumed update: %+v, want revision %d", u, revs[i])
		}
	}

	// Compacted history: the watch says so and ends.
	if _, err := c.Compact(ctx, revs[4]); err != nil {
		t.Fatal(err)
	}
	old := r.WatchRoutes(ctx, revs[0])
	if u := next(old); !errors.Is(u.Err, registry.ErrCompacted) {
		t.Fatalf("watch from a compacted revision: %+v", u)
	}
	if _, ok := <-old; ok {
		t.Fatal("a compacted watch stays open")
	}
}

// TestWatchRoutesStartsWithCurrent: from 0 with a table present, the
// first update is the current table.
func TestWatchRoutesStartsWithCurrent(t *testing.T) {
	c := etcdtest.Start(t).Client(t)
	r := newRegistry(t, c, time.Second)
	ctx := testContext(t)
	rev, err := r.PutRoutes(ctx, registry.Routes{Epoch: 9, Models: map[string]int{"m": 0}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	u := <-r.WatchRoutes(ctx, 0)
	if u.Err != nil || u.Revision != rev || u.Value.Epoch != 9 {
		t.Fatalf("first update %+v, want the table at %d", u, rev)
	}
	if _, err := r.PutModel(ctx, registry.Model{Name: "m", SLO: time.Second}); err != nil {
		t.Fatal(err)
	}
	ms, _, err := r.Models(ctx)
	if err != nil || len(ms) != 1 || ms[0].Value.SLO != time.Second {
		t.Fatalf("Models = %+v, %v", ms, err)
	}
	if _, err := c.Put(ctx, r.Keys().Model("bad"), "{}"); err != nil {
		t.Fatal(err)
	}
	var de *registry.DecodeError
	if _, _, err := r.Models(ctx); !errors.As(err, &de) || de.Key != r.Keys().Model("bad") {
		t.Fatalf("a bad model record: %v", err)
	}
}

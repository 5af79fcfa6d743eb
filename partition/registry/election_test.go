package registry_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/symphony-serving/symphony/partition/registry"
	"github.com/symphony-serving/symphony/partition/registry/etcdtest"
)

type campaignResult struct {
	l   *registry.Leadership
	err error
}

// campaign runs r.Campaign for s in a goroutine and waits, on a watch
// from the registry's current revision, until s is registered as a
// standby and its election key is put: it is then waiting its turn.
func campaign(ctx context.Context, t *testing.T, c *clientv3.Client, r *registry.Registry, s registry.Scheduler) <-chan campaignResult {
	t.Helper()
	keys := r.Keys()
	resp, err := c.Get(ctx, keys.Prefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := c.Watch(wctx, keys.Prefix(), clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))

	out := make(chan campaignResult, 1)
	go func() {
		l, err := r.Campaign(ctx, s)
		out <- campaignResult{l, err}
	}()
	var standby, candidate bool
	for !standby || !candidate {
		wr, ok := <-events
		if !ok || wr.Err() != nil {
			t.Fatalf("watch ended before %s stood: %v", s.Name, wr.Err())
		}
		for _, ev := range wr.Events {
			if ev.Type != clientv3.EventTypePut {
				continue
			}
			key := string(ev.Kv.Key)
			switch {
			case key == keys.Scheduler(s.Part, s.Name):
				rec, err := registry.DecodeScheduler(ev.Kv.Value)
				if err != nil || rec.Role != registry.RoleStandby {
					t.Fatalf("%s's first record: %+v, %v", s.Name, rec, err)
				}
				standby = true
			case strings.HasPrefix(key, keys.Election(s.Part)):
				if rec, err := registry.DecodeScheduler(ev.Kv.Value); err == nil && rec.Name == s.Name {
					candidate = true
				}
			}
		}
	}
	return out
}

func elected(ctx context.Context, t *testing.T, ch <-chan campaignResult) *registry.Leadership {
	t.Helper()
	select {
	case res := <-ch:
		if res.err != nil {
			t.Fatalf("Campaign: %v", res.err)
		}
		return res.l
	case <-ctx.Done():
		t.Fatal("not elected before the test's deadline")
	}
	return nil
}

// roles reads part's scheduler records as name → record.
func roles(ctx context.Context, t *testing.T, r *registry.Registry) map[string]registry.Scheduler {
	t.Helper()
	list, _, err := r.Schedulers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]registry.Scheduler{}
	for _, e := range list {
		m[e.Value.Name] = e.Value
	}
	return m
}

// waitRoute reads route updates until part's scheduler is addr.
func waitRoute(ctx context.Context, t *testing.T, updates <-chan registry.RoutesUpdate, part int, addr string) registry.RoutesUpdate {
	t.Helper()
	for {
		select {
		case u, ok := <-updates:
			if !ok || u.Err != nil {
				t.Fatalf("routes watch ended: %v", u.Err)
			}
			if u.Value.Schedulers[part] == addr {
				return u
			}
		case <-ctx.Done():
			t.Fatalf("part %d never routed to %s", part, addr)
		}
	}
}

// TestElectionFailoverOnKill elects one of two schedulers of a part, kills
// the leader's client without resigning, and times the standby's takeover
// from the kill to its routes write, with a 1s TTL.
func TestElectionFailoverOnKill(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := testContext(t)
	obs := srv.Client(t)
	rObs := newRegistry(t, obs, time.Second)
	doomed, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = doomed.Close() })
	rA := newRegistry(t, doomed, time.Second)
	cB := srv.Client(t)
	rB := newRegistry(t, cB, time.Second)

	// A routing table from before the election keeps its models.
	if _, err := rObs.PutRoutes(ctx, registry.Routes{Epoch: 3, Models: map[string]int{"m": 0}}, 0); err != nil {
		t.Fatal(err)
	}
	leaders := rObs.Observe(ctx, 0)

	a := registry.Scheduler{Name: "a", Part: 0, Address: "127.0.0.1:7100"}
	la, err := rA.Campaign(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if la.Term() <= 0 || la.Scheduler().Role != registry.RoleActive {
		t.Fatalf("a's leadership: term %d, %+v", la.Term(), la.Scheduler())
	}
	if got := <-leaders; got.Name != "a" || got.Revision != la.Term() || got.Role != registry.RoleActive {
		t.Fatalf("Observe: %+v, want a at term %d", got, la.Term())
	}

	chB := campaign(ctx, t, cB, rB, registry.Scheduler{Name: "b", Part: 0, Address: "127.0.0.1:7101"})
	select {
	case res := <-chB:
		t.Fatalf("b elected while a leads: %+v", res)
	default:
	}
	rec := roles(ctx, t, rObs)
	if rec["a"].Role != registry.RoleActive || rec["a"].Revision != la.Term() || rec["b"].Role != registry.RoleStandby || len(rec) != 2 {
		t.Fatalf("records: %+v", rec)
	}
	routes, rev, err := rObs.Routes(ctx)
	if err != nil || routes.Schedulers[0] != a.Address || routes.Models["m"] != 0 || routes.Epoch != 3 {
		t.Fatalf("routes: %+v, %v", routes, err)
	}
	if l, ok, err := rObs.Leader(ctx, 0); err != nil || !ok || l.Name != "a" || l.Revision != la.Term() {
		t.Fatalf("Leader = %+v, %v, %v", l, ok, err)
	}

	updates := rObs.WatchRoutes(ctx, rev+1)
	start := time.Now()
	_ = doomed.Close() // a dies: no keep-alives, no resign
	select {
	case <-la.Done():
	case <-ctx.Done():
		t.Fatal("a's leadership did not end with its client")
	}
	u := waitRoute(ctx, t, updates, 0, "127.0.0.1:7101")
	takeover := time.Since(start)
	t.Logf("takeover %v after the leader's client closed (TTL 1s)", takeover)
	if takeover > 2*time.Second {
		t.Errorf("takeover took %v, over 2s with a 1s TTL", takeover)
	}
	if u.Value.Models["m"] != 0 || u.Value.Epoch != 3 {
		t.Errorf("routes lost their models: %+v", u.Value)
	}

	lb := elected(ctx, t, chB)
	if lb.Term() <= la.Term() {
		t.Errorf("b's term %d is not after a's %d", lb.Term(), la.Term())
	}
	if got := <-leaders; got.Name != "b" || got.Revision != lb.Term() {
		t.Errorf("Observe: %+v, want b at term %d", got, lb.Term())
	}
	// a's record shared the lease of its election key: gone with it.
	rec = roles(ctx, t, rObs)
	if len(rec) != 1 || rec["b"].Role != registry.RoleActive || rec["b"].Revision != lb.Term() {
		t.Errorf("records after the takeover: %+v", rec)
	}
	if err := lb.Resign(ctx); err != nil {
		t.Error(err)
	}
}

// TestElectionResignHandsOver resigns the leader (the TTL is long) and
// checks that the standby is elected at once, and that the deposed
// leader's leadership has ended.
func TestElectionResignHandsOver(t *testing.T) {
	const ttl = 10 * time.Second
	srv := etcdtest.Start(t)
	ctx := testContext(t)
	cA, cB := srv.Client(t), srv.Client(t)
	rA, rB := newRegistry(t, cA, ttl), newRegistry(t, cB, ttl)

	la, err := rA.Campaign(ctx, registry.Scheduler{Name: "a", Part: 2, Address: "127.0.0.1:7100"})
	if err != nil {
		t.Fatal(err)
	}
	chB := campaign(ctx, t, cB, rB, registry.Scheduler{Name: "b", Part: 2, Address: "127.0.0.1:7101"})
	_, rev, err := rA.Routes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	updates := rA.WatchRoutes(ctx, rev+1)

	start := time.Now()
	if err := la.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	u := waitRoute(ctx, t, updates, 2, "127.0.0.1:7101")
	d := time.Since(start)
	t.Logf("hand-over %v after Resign (TTL %v)", d, ttl)
	if d > ttl/4 {
		t.Errorf("hand-over took %v: Resign waited for the TTL", d)
	}
	lb := elected(ctx, t, chB)
	if lb.Term() <= la.Term() || u.Value.Schedulers[2] != "127.0.0.1:7101" {
		t.Errorf("terms a %d, b %d; routes %+v", la.Term(), lb.Term(), u.Value)
	}
	select {
	case <-la.Done():
	default:
		t.Error("a's leadership is not done after Resign")
	}
	rec := roles(ctx, t, rA)
	if len(rec) != 1 || rec["b"].Role != registry.RoleActive {
		t.Errorf("records: %+v", rec)
	}
	// A second Resign is a no-op.
	if err := la.Resign(ctx); err != nil {
		t.Error(err)
	}
	if err := lb.Resign(ctx); err != nil {
		t.Error(err)
	}
	routes, _, err := rA.Routes(ctx)
	if _, ok := routes.Schedulers[2]; ok || err != nil {
		t.Errorf("part 2 still routed after its last scheduler resigned: %+v, %v", routes, err)
	}
}

// TestElectionPartsIndependent elects a scheduler in each of parts 1, 10
// and 0 at once (no key prefix of one part covers another's), and checks
// that a hand-over in one part leaves the others' leaders and routes.
func TestElectionPartsIndependent(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := testContext(t)
	c := srv.Client(t)
	r := newRegistry(t, c, 5*time.Second)

	parts := []int{1, 10, 0}
	ls := map[int]*registry.Leadership{}
	for _, p := range parts {
		l, err := r.Campaign(ctx, registry.Scheduler{Name: "s", Part: p, Address: "127.0.0.1:" + strconv.Itoa(7100+p)})
		if err != nil {
			t.Fatalf("part %d: %v", p, err)
		}
		ls[p] = l
	}
	routes, _, err := r.Routes(ctx)
	if err != nil || len(routes.Schedulers) != 3 {
		t.Fatalf("routes %+v, %v", routes, err)
	}
	chB := campaign(ctx, t, c, r, registry.Scheduler{Name: "b", Part: 1, Address: "127.0.0.1:7201"})
	if err := ls[1].Resign(ctx); err != nil {
		t.Fatal(err)
	}
	lb := elected(ctx, t, chB)
	for _, p := range []int{0, 10} {
		l, ok, err := r.Leader(ctx, p)
		if err != nil || !ok || l.Name != "s" || l.Revision != ls[p].Term() {
			t.Errorf("part %d: Leader = %+v, %v, %v", p, l, ok, err)
		}
		select {
		case <-ls[p].Done():
			t.Errorf("part %d lost its leader", p)
		default:
		}
	}
	routes, _, err = r.Routes(ctx)
	want := map[int]string{0: "127.0.0.1:7100", 1: "127.0.0.1:7201", 10: "127.0.0.1:7110"}
	if err != nil || len(routes.Schedulers) != 3 {
		t.Fatalf("routes %+v, %v", routes, err)
	}
	for p, addr := range want {
		if routes.Schedulers[p] != addr {
			t.Errorf("routes: part %d → %q, want %q", p, routes.Schedulers[p], addr)
		}
	}
	for _, l := range []*registry.Leadership{lb, ls[0], ls[10]} {
		if err := l.Resign(ctx); err != nil {
			t.Error(err)
		}
	}
}

// TestCampaignCanceledLeavesNothing ends a waiting candidate's context:
// Campaign returns the context's error and its standby record goes.
func TestCampaignCanceledLeavesNothing(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := testContext(t)
	c := srv.Client(t)
	r := newRegistry(t, c, 10*time.Second)
	la, err := r.Campaign(ctx, registry.Scheduler{Name: "a", Part: 0, Address: "127.0.0.1:7100"})
	if err != nil {
		t.Fatal(err)
	}
	bctx, cancel := context.WithCancel(ctx)
	ch := campaign(bctx, t, c, r, registry.Scheduler{Name: "b", Part: 0, Address: "127.0.0.1:7101"})
	cancel()
	select {
	case res := <-ch:
		if !errors.Is(res.err, context.Canceled) {
			t.Fatalf("Campaign = %v, want context.Canceled", res.err)
		}
	case <-ctx.Done():
		t.Fatal("Campaign did not return after its context ended")
	}
	rec := roles(ctx, t, r)
	if len(rec) != 1 || rec["a"].Role != registry.RoleActive {
		t.Errorf("records: %+v", rec)
	}
	resp, err := c.Get(ctx, r.Keys().Election(0), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 1 {
		t.Errorf("election keys: %v, %v", resp, err)
	}
	if err := la.Resign(ctx); err != nil {
		t.Error(err)
	}
}

// TestDeposedLeaderWriteFenced revokes the leader's lease behind its back
// (as etcd does when a partitioned scheduler's lease expires): its
// leadership ends, and its Resign, which would remove its route, is
// refused by the term fence and changes nothing.
func TestDeposedLeaderWriteFenced(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := testContext(t)
	c, obs := srv.Client(t), srv.Client(t)
	r := newRegistry(t, c, 10*time.Second)
	la, err := r.Campaign(ctx, registry.Scheduler{Name: "a", Part: 0, Address: "127.0.0.1:7100"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := obs.Get(ctx, r.Keys().Election(0), clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("election keys: %v, %v", resp, err)
	}
	_, rev, err := r.Routes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-la.Done():
	case <-ctx.Done():
		t.Fatal("leadership did not end with its lease")
	}
	if err := la.Resign(ctx); err != nil {
		t.Fatalf("Resign of a deposed leader: %v", err)
	}
	routes, rev2, err := r.Routes(ctx)
	if err != nil || rev2 != rev || routes.Schedulers[0] != "127.0.0.1:7100" {
		t.Errorf("routes after a deposed leader's Resign: %+v at %d (was %d), %v", routes, rev2, rev, err)
	}
}

package registry_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/partition/registry"
	"github.com/symphony-serving/symphony/partition/registry/etcdtest"
)

// The bases of docs/scale.md's estimate of what one etcd cluster carries:
// the registry's writes and its routes watch against the embedded etcd of
// the tests (one member, its data in the test's temporary directory, on
// loopback). An external cluster adds a network round trip and the
// replication to a quorum to each figure.

func benchRegistry(b *testing.B) *registry.Registry {
	b.Helper()
	srv := etcdtest.Start(b)
	cfg := registry.Default()
	cfg.Prefix = "/bench/"
	cfg.TTL = 10 * time.Second
	r, err := registry.New(srv.Client(b), cfg)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// benchRoutes is a routing table of models models over parts parts.
func benchRoutes(epoch uint64, models, parts int) registry.Routes {
	t := registry.Routes{Epoch: epoch, Models: make(map[string]int, models), Schedulers: make(map[int]string, parts)}
	for m := range models {
		t.Models[fmt.Sprintf("model-%04d", m)] = int((uint64(m) + epoch) % uint64(parts))
	}
	for p := range parts {
		t.Schedulers[p] = fmt.Sprintf("10.0.%d.%d:7100", p/250, p%250)
	}
	return t
}

func benchContext(b *testing.B) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	b.Cleanup(cancel)
	return ctx
}

// BenchmarkPutRoutes2000Models is one epoch's routes write: 2,000 models
// over 20 parts, revision-checked against the last write.
func BenchmarkPutRoutes2000Models(b *testing.B) {
	r := benchRegistry(b)
	ctx := benchContext(b)
	val, err := registry.Encode(benchRoutes(1, 2000, 20))
	if err != nil {
		b.Fatal(err)
	}
	var rev int64
	epoch := uint64(0)
	b.ReportAllocs()
	for b.Loop() {
		epoch++
		if rev, err = r.PutRoutes(ctx, benchRoutes(epoch, 2000, 20), rev); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(val)), "bytes/table")
}

// BenchmarkRegisterBackend is a backend's registration: a lease grant, the
// record's put under it and the start of its keep-alives. The lease is
// revoked outside the timed part.
func BenchmarkRegisterBackend(b *testing.B) {
	r := benchRegistry(b)
	ctx := benchContext(b)
	models := make([]string, 10)
	for i := range models {
		models[i] = fmt.Sprintf("model-%04d", i)
	}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		be := registry.Backend{Name: fmt.Sprintf("b%d", i%64), GPUs: 8, Address: "10.0.0.1:7200", Models: models}
		i++
		reg, err := r.RegisterBackend(ctx, be)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := reg.Close(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkWatchRoutesDelivery is the time from the start of a routes
// write (2,000 models, 20 parts) to its delivery, decoded, on a
// WatchRoutes channel of the same process: write, commit, watch event,
// decode. ns/op is the whole cycle; deliver-ns the write's start to the
// update's arrival.
func BenchmarkWatchRoutesDelivery(b *testing.B) {
	r := benchRegistry(b)
	ctx := benchContext(b)
	updates := r.WatchRoutes(ctx, 1)
	var rev int64
	var err error
	var total time.Duration
	epoch := uint64(0)
	b.ReportAllocs()
	for b.Loop() {
		epoch++
		t := benchRoutes(epoch, 2000, 20)
		start := time.Now()
		if rev, err = r.PutRoutes(ctx, t, rev); err != nil {
			b.Fatal(err)
		}
		for u := range updates {
			if u.Err != nil {
				b.Fatal(u.Err)
			}
			if u.Revision == rev {
				break
			}
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "deliver-ns")
}

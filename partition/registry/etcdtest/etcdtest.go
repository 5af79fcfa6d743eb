// Package etcdtest runs an etcd server inside the test process
// (go.etcd.io/etcd/server/v3/embed): a single member on loopback ports the
// kernel picks, with its data in a temporary directory, stopped when the
// test ends. Tests of the registry, and later of the controller and the
// in-process cluster, use it; no production binary links it.
package etcdtest

import (
	"net/url"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Server is a running embedded etcd.
type Server struct {
	etcd *embed.Etcd
	// Endpoint is the client URL's host:port.
	Endpoint string
}

// Start starts a server for t and stops it in t's cleanup. Its Raft ticks
// are 10ms (election 100ms), so that etcd's least lease TTL is one second
// and a lease test waits about that long, not the default two.
func Start(t testing.TB) *Server {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "etcdtest"
	cfg.Dir = t.TempDir()
	local := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls = []url.URL{local}
	cfg.AdvertiseClientUrls = []url.URL{local}
	cfg.ListenPeerUrls = []url.URL{local}
	cfg.AdvertisePeerUrls = []url.URL{local}
	cfg.InitialCluster = cfg.Name + "=" + local.String()
	cfg.TickMs, cfg.ElectionMs = 10, 100
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("etcdtest: start: %v", err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("etcdtest: the server was not ready within 30s")
	}
	return &Server{etcd: e, Endpoint: e.Clients[0].Addr().String()}
}

// Client returns a new client of s, closed in t's cleanup.
func (s *Server) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{s.Endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("etcdtest: client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

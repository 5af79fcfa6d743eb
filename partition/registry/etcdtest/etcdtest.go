// Package etcdtest runs an etcd server inside the test process for a test
// (etcdembed): a single member on loopback ports the kernel picks, with
// its data in the test's temporary directory, stopped when the test ends.
// Tests of the registry, of the live control plane and of the in-process
// cluster use it.
package etcdtest

import (
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/symphony-serving/symphony/partition/registry/etcdembed"
)

// Server is a running embedded etcd.
type Server struct {
	*etcdembed.Server
}

// Start starts a server for t and stops it in t's cleanup. Its Raft ticks
// are 10ms (etcdembed.DefaultTick), so that etcd's least lease TTL is one
// second and a lease test waits about that long, not the default two.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := etcdembed.Start(etcdembed.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	t.Cleanup(s.Close)
	return &Server{s}
}

// Client returns a new client of s, closed in t's cleanup.
func (s *Server) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	c, err := s.Server.Client()
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Package etcdembed runs an etcd server inside the calling process
// (go.etcd.io/etcd/server/v3/embed): one member on loopback ports the
// kernel picks, its data in a directory of the caller's. It is the etcd of
// `symphony-bench demo --controller` and of the tests (etcdtest), so that
// neither needs an etcd installed; production points the processes at an
// external etcd cluster instead, and the `symphony` binary does not link
// it.
package etcdembed

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Config configures an embedded server.
type Config struct {
	// Dir holds its data (required; a fresh temporary directory suits).
	Dir string
	// Tick is Raft's heartbeat tick (DefaultTick if 0): etcd's least lease
	// TTL is about 50 ticks, so 10ms ticks allow the one-second TTLs that
	// make a dead scheduler's takeover take about a second.
	Tick time.Duration
	// ReadyTimeout bounds the wait for the server to serve (30s if 0).
	ReadyTimeout time.Duration
	// ClientAddr is where clients reach it (host:port); empty means
	// 127.0.0.1 on a port the kernel picks.
	ClientAddr string
}

// DefaultTick is Config.Tick's default.
const DefaultTick = 10 * time.Millisecond

// Server is a running embedded etcd.
type Server struct {
	etcd *embed.Etcd
	// Endpoint is the client URL's host:port.
	Endpoint string
}

// Start starts a server and waits until it serves.
func Start(cfg Config) (*Server, error) {
	if cfg.Dir == "" {
		return nil, errors.New("etcdembed: no data directory")
	}
	if cfg.Tick <= 0 {
		cfg.Tick = DefaultTick
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 30 * time.Second
	}
	ec := embed.NewConfig()
	ec.Name = "symphony-embedded"
	ec.Dir = cfg.Dir
	local := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	client := local
	if cfg.ClientAddr != "" {
		client.Host = cfg.ClientAddr
	}
	ec.ListenClientUrls = []url.URL{client}
	ec.AdvertiseClientUrls = []url.URL{client}
	ec.ListenPeerUrls = []url.URL{local}
	ec.AdvertisePeerUrls = []url.URL{local}
	ec.InitialCluster = ec.Name + "=" + local.String()
	ec.TickMs = uint(cfg.Tick / time.Millisecond)
	ec.ElectionMs = 10 * ec.TickMs
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("etcdembed: start: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(cfg.ReadyTimeout):
		e.Close()
		return nil, fmt.Errorf("etcdembed: not ready within %v", cfg.ReadyTimeout)
	}
	return &Server{etcd: e, Endpoint: e.Clients[0].Addr().String()}, nil
}

// Client returns a new client of s; the caller closes it.
func (s *Server) Client() (*clientv3.Client, error) {
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{s.Endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcdembed: client: %w", err)
	}
	return c, nil
}

// Close stops the server.
func (s *Server) Close() { s.etcd.Close() }

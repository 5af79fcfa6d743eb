package main

// The processes' side of the live control plane (partition/live): the
// flags that join a process to the registry in etcd, the connection, the
// names processes register under, and how a scheduler tells whether it is
// its part's active scheduler or a standby.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/symphony-serving/symphony/cmd/internal/cli"
	"github.com/symphony-serving/symphony/cmd/internal/daemon"
	"github.com/symphony-serving/symphony/partition/registry"
	"github.com/symphony-serving/symphony/scheduler/service/shutdown"
)

// etcdConnectTimeout bounds a process's first exchange with etcd: a wrong
// endpoint fails the start, naming it, rather than leave the process
// waiting unregistered (an orchestrator restarts it with backoff).
const etcdConnectTimeout = 10 * time.Second

// etcdFlags are the flags of a process that joins the live control plane:
// --etcd turns it on; without it the process runs as before.
type etcdFlags struct {
	endpoints string
	prefix    string
	ttl       time.Duration
}

// addEtcdFlags adds --etcd and --registry-prefix to fs, and --registry-ttl
// for a process that registers under a lease (withTTL).
func addEtcdFlags(fs *flag.FlagSet, withTTL bool) *etcdFlags {
	f := &etcdFlags{ttl: registry.Default().TTL}
	fs.StringVar(&f.endpoints, "etcd", "", "join the live control plane through the registry in this etcd: `ENDPOINTS`, comma-separated host:port or URLs (docs/operations.md, \"The live control plane on etcd\"); default: off")
	fs.StringVar(&f.prefix, "registry-prefix", registry.DefaultPrefix, "with --etcd: the registry's key prefix in etcd, the same for every process of one cluster")
	if withTTL {
		fs.DurationVar(&f.ttl, "registry-ttl", f.ttl, "with --etcd: how long this process's record outlives its last keep-alive, whole seconds: a dead process leaves the registry (and a dead active scheduler its part, to a standby) this long after it stops answering")
	}
	return f
}

// on reports whether --etcd was given.
func (f *etcdFlags) on() bool { return len(splitList(f.endpoints)) > 0 }

// validate checks the flags, as usage errors.
func (f *etcdFlags) validate() error {
	cfg := registry.Config{Prefix: f.prefix, TTL: f.ttl}
	if _, err := registry.NewKeys(cfg.Prefix); err != nil {
		return cli.UsageErr("--registry-prefix: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		return cli.UsageErr("--registry-ttl %v: a whole number of seconds, at least 1s", f.ttl)
	}
	return nil
}

// connectIfOn is connect when --etcd was given; without it the registry
// is nil. The caller defers closeEtcd either way.
func (f *etcdFlags) connectIfOn(ctx context.Context) (reg *registry.Registry, closeEtcd func(), err error) {
	if !f.on() {
		return nil, func() {}, nil
	}
	c, reg, err := f.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	return reg, func() { _ = c.Close() }, nil
}

// connect dials etcd and checks that it answers, within
// etcdConnectTimeout, and returns the client (the caller closes it) and
// the registry over it.
func (f *etcdFlags) connect(ctx context.Context) (*clientv3.Client, *registry.Registry, error) {
	eps := splitList(f.endpoints)
	where := strings.Join(eps, ",")
	c, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: etcdConnectTimeout, Logger: zap.NewNop()})
	if err != nil {
		return nil, nil, fmt.Errorf("etcd at %s: %w", where, err)
	}
	reg, err := registry.New(c, registry.Config{Prefix: f.prefix, TTL: f.ttl})
	if err != nil {
		_ = c.Close()
		return nil, nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, etcdConnectTimeout)
	defer cancel()
	if _, err := c.Get(cctx, reg.Keys().Routes(), clientv3.WithCountOnly()); err != nil {
		_ = c.Close()
		if cctx.Err() != nil {
			return nil, nil, fmt.Errorf("etcd at %s (--etcd) did not answer within %v: %w", where, etcdConnectTimeout, err)
		}
		return nil, nil, fmt.Errorf("etcd at %s (--etcd): %w", where, err)
	}
	return c, reg, nil
}

// splitList splits a comma-separated flag (etcd endpoints, host names)
// into its items, spaces and empty items dropped.
func splitList(s string) []string {
	var eps []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	return eps
}

// liveName is the name a process registers under: name if given, else
// ROLE-HOST-PID, unique among the processes of a cluster and, in a
// container (whose process is always PID 1 and whose host name is the
// pod's), the same after a restart, so that a restarted backend goes back
// to the part the assignment gives its name.
func liveName(name, role string) string {
	if name != "" {
		return name
	}
	host, err := os.Hostname()
	if err != nil || host == "" || strings.ContainsAny(host, "/ \t") {
		return cli.ProcessName("", role)
	}
	return fmt.Sprintf("%s-%s-%d", role, host, os.Getpid())
}

// dialable reports whether addr is a HOST:PORT other processes can dial:
// a host that is not a wildcard, and a port in 1..65535.
func dialable(addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return false
	}
	p, err := strconv.Atoi(port)
	return err == nil && p > 0 && p < 65536
}

// setElsewhere reports whether the flag name got its value from anywhere
// but its default: the command line, the environment or the config file.
func setElsewhere(common *daemon.Flags, name string) bool {
	r := common.Resolved()
	return r != nil && r.Source(name) != daemon.FromDefault
}

// stopSignals is where a long-running command's stop signals come from:
// the process's SIGINT and SIGTERM (shutdown.Notify) when it runs as the
// program, a test's channel when a test runs several commands side by
// side in its own process. It returns the channel and the function that
// stops the delivery.
type stopSignals func(buffer int) (<-chan os.Signal, func())

// processSignals are the program's own signals.
var processSignals stopSignals = shutdown.Notify

// event is a stop that is not a signal (the process lost its place in
// the control plane), handed to shutdown.Wait as one.
type event string

func (e event) String() string { return string(e) }
func (event) Signal()          {}

// onSignals waits for a first signal from notify, or for stop to close
// (nil: never), then runs graceful and returns when it does. Each
// further signal runs the next of hurry, meant to cut the graceful stop
// short; a signal past the last of them exits at once.
func onSignals(log zerolog.Logger, notify stopSignals, stop <-chan struct{}, graceful func(), hurry ...func()) {
	sigs, unsubscribe := notify(len(hurry) + 2)
	defer unsubscribe()
	in := sigs
	if stop != nil {
		merged := make(chan os.Signal, len(hurry)+2)
		done := make(chan struct{})
		defer close(done)
		go func() {
			// stop counts as the first signal only: once the stop began,
			// its own end of the agent must not hurry it.
			stop := stop
			for {
				var s os.Signal
				select {
				case s = <-sigs:
				case <-stop:
					s = event("stop")
				case <-done:
					return
				}
				stop = nil
				select {
				case merged <- s:
				case <-done:
					return
				}
			}
		}()
		in = merged
	}
	shutdown.Wait(in, graceful, hurry, func() {
		log.Error().Msg("signal: exiting without finishing the stop")
		os.Exit(130)
	})
}

// signalContext is a context canceled by the first signal from notify;
// later signals are taken too (and ignored) until the returned function
// is called, as signal.NotifyContext's are.
func signalContext(notify stopSignals) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs, unsubscribe := notify(1)
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		cancel()
		unsubscribe()
	}
}

// schedulerRole follows who leads a part's election, so that a
// scheduler's /readyz says whether it is the part's active scheduler or a
// standby, and a standby's log says whom it stands by for.
type schedulerRole struct {
	part int
	name string
	log  zerolog.Logger

	mu       sync.Mutex
	leader   registry.Scheduler // the latest leader seen
	seen     bool
	standing bool   // RunScheduler runs: the process is a candidate or the leader
	ended    string // why it no longer stands, once it does not
}

// follow observes the part's leaders until ctx ends, observing again
// (after a second) when a watch ends with etcd unreachable.
func (r *schedulerRole) follow(ctx context.Context, reg *registry.Registry) {
	for ctx.Err() == nil {
		for s := range reg.Observe(ctx, r.part) {
			r.mu.Lock()
			r.leader, r.seen = s, true
			r.mu.Unlock()
			if s.Name != r.name {
				r.log.Info().Str("active", s.Name).Str("address", s.Address).Int64("term", s.Revision).
					Msg("standby: the part's active scheduler is another")
			}
		}
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// setStanding records whether the process stands for the part (why not,
// once it stops).
func (r *schedulerRole) setStanding(standing bool, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.standing, r.ended = standing, why
}

// ready is the readiness of a scheduler of the live control plane: it
// stands for its part, as the active scheduler or as a standby.
func (r *schedulerRole) ready() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.standing {
		return errors.New(r.ended)
	}
	return nil
}

// status is /readyz's line: the role in the part, as far as the
// election says.
func (r *schedulerRole) status() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.seen && r.leader.Name == r.name:
		return fmt.Sprintf("active for part %d (term %d)", r.part, r.leader.Revision)
	case r.seen:
		return fmt.Sprintf("standby for part %d; active: %s at %s (term %d)", r.part, r.leader.Name, r.leader.Address, r.leader.Revision)
	}
	return fmt.Sprintf("standby for part %d; no active scheduler seen yet", r.part)
}

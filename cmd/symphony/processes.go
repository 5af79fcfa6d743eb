package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/backend"
	"github.com/symphony-serving/symphony/backend/backendagent"
	"github.com/symphony-serving/symphony/backend/cpupin"
	backmetrics "github.com/symphony-serving/symphony/backend/metrics"
	"github.com/symphony-serving/symphony/backend/onnx"
	"github.com/symphony-serving/symphony/cmd/internal/cli"
	"github.com/symphony-serving/symphony/cmd/internal/daemon"
	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/frontend/frontendagent"
	"github.com/symphony-serving/symphony/frontend/gateway"
	"github.com/symphony-serving/symphony/frontend/gatewayserver"
	"github.com/symphony-serving/symphony/partition/registry"
	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/overrun"
	"github.com/symphony-serving/symphony/scheduler/service"
	schedmetrics "github.com/symphony-serving/symphony/scheduler/service/metrics"
	"github.com/symphony-serving/symphony/scheduler/service/schedagent"
	"github.com/symphony-serving/symphony/scheduler/serving"
)

// defaultServing is the serving configuration of `symphony scheduler`
// when no file is given: the bundled demo's models.
//
//go:embed default-serving.yaml
var defaultServing []byte

// servingConfig is the serving configuration of -f and --model-repo: the
// repository's models with file's settings (withRepository) when a
// repository is given, else file's (loadServing).
func servingConfig(file, repo string) (*serving.Config, error) {
	if repo != "" {
		return withRepository(file, repo)
	}
	return loadServing(file)
}

// withRepository is the serving configuration of a model repository: its
// models, with the settings (and models) of file if given, else the
// defaults.
func withRepository(file, repo string) (*serving.Config, error) {
	rc, err := serving.ParseRepository(repo)
	if err != nil || file == "" {
		return rc, err
	}
	cfg, err := serving.ParseFile(file)
	if err != nil {
		return nil, err
	}
	cfg.Models = append(cfg.Models, rc.Models...)
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w (with the models of %s)", err, repo)
	}
	return cfg, nil
}

// unloadedAtStart is the models that start unloaded under model-control
// mode mode: none, or in explicit mode the repository's models that loads
// does not name, as Triton's --model-control-mode explicit and
// --load-model do.
func unloadedAtStart(mode, repo string, loads []string) ([]string, error) {
	switch mode {
	case "none":
		if len(loads) > 0 {
			return nil, cli.UsageErr("--load-model needs --model-control-mode explicit")
		}
		return nil, nil
	case "explicit":
	default:
		return nil, cli.UsageErr("--model-control-mode %q: want none or explicit", mode)
	}
	if repo == "" {
		return nil, cli.UsageErr("--model-control-mode explicit needs --model-repo: its models are the ones loaded and unloaded")
	}
	rc, err := serving.ParseRepository(repo)
	if err != nil {
		return nil, err
	}
	load := map[string]bool{}
	for _, name := range loads {
		load[name] = true
	}
	var unloaded []string
	for _, m := range rc.Models {
		if load[m.Name] {
			delete(load, m.Name)
			continue
		}
		unloaded = append(unloaded, m.Name)
	}
	for _, name := range loads {
		if load[name] {
			return nil, cli.UsageErr("--load-model %q: not a profiled model of %s", name, repo)
		}
	}
	return unloaded, nil
}

// loadServing parses the serving configuration in the file, or the
// bundled default for "".
func loadServing(path string) (*serving.Config, error) {
	if path == "" {
		return serving.Parse(defaultServing, "default serving configuration")
	}
	return serving.ParseFile(path)
}

// runScheduler is `symphony scheduler`: the scheduler service alone,
// serving a serving configuration (scheduler/serving). With --etcd it is
// one of its part's schedulers in the live control plane
// (scheduler/service/schedagent): every model starts unloaded, and the process
// stands for its part's election; elected, it loads what the controller's
// assignment gives the part. It stops on notify's signals.
func runScheduler(args []string, stdout, stderr io.Writer, notify stopSignals) error {
	fs := flag.NewFlagSet("scheduler", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("f", "", "serving configuration to serve: models, policy, network delays, live floor and limits (docs/serving-config.md); a workload file serves too, its load ignored (default: the bundled demo's models)")
	addr := fs.String("addr", "127.0.0.1:7100", "address to listen on for frontends and backends")
	repo := fs.String("model-repo", "", "serve the profiled models of this model repository (REPO/<model>/config.yaml), besides -f's when both are given")
	policy := fs.String("policy", "", "override the file's policy: symphony, work-conserving or clockwork")
	maxGPUs := fs.Int("max-gpus", 0, "most GPUs the cluster may have (default: the file's limits.max_gpus, else 1024)")
	drain := fs.Duration("drain", 0, "on SIGTERM, how long to wait for batches already sent to backends (default: the file's limits.drain_timeout, else the longest SLO plus 500ms; negative: none); a second signal cuts it short, a third exits")
	control := fs.String("model-control-mode", "none", "none: every model starts loaded (READY); explicit: --model-repo's models start unloaded (UNAVAILABLE) except those --load-model names, and are loaded and unloaded through the frontends' POST /v2/repository/models/<m>/load and /unload (docs/model-repository.md)")
	var loads daemon.StringList
	fs.Var(&loads, "load-model", "with --model-control-mode explicit: a repository model to load at start (repeatable)")
	adviceWindow := fs.Duration("advice-window", service.DefaultAdviceWindow, "how far back the live autoscaling advice (symphony_autoscale_* metrics) looks")
	tailQuantile := fs.Float64("tail-quantile", overrun.Default().Quantile, "plan each model's deadlines for this quantile of its batches' real run time over the profile's ℓ(b), measured from the backends' reports (scheduler/overrun); 0: plan on ℓ(b) alone")
	metricsAddr := fs.String("metrics-addr", "", metricsAddrHelp)
	ef := addEtcdFlags(fs, true)
	part := fs.Int("part", -1, "with --etcd: the part this scheduler serves, 0 to the controller's --parts minus 1 (required with --etcd); several schedulers of one part elect one active, the others stand by")
	name := fs.String("name", "", "with --etcd: the scheduler's name in its part's election and in the registry (default scheduler-HOST-PID)")
	advertise := fs.String("advertise-addr", "", "with --etcd: the `HOST:PORT` frontends and backends dial for --addr, written to the routing table when elected (default: --addr's own address, which must then name a host; in Kubernetes: the pod's IP and the port)")
	tf := cli.AddTLSFlags(fs)
	common := daemon.AddFlags(fs, "log every connection and more")
	if done, err := parseProcessFlags(fs, common, args, stdout); done || err != nil {
		return err
	}
	if *tailQuantile < 0 || *tailQuantile > 1 {
		return cli.UsageErr("--tail-quantile %v not in [0, 1]", *tailQuantile)
	}
	if err := checkSchedulerLive(ef, common, *part, *addr, *advertise, *control); err != nil {
		return err
	}
	if ef.on() {
		if err := (registry.Scheduler{Name: liveName(*name, "scheduler"), Part: *part, Address: "host:1"}).Validate(); err != nil {
			return cli.UsageErr("--name: %v", err)
		}
	}
	log := common.Logger(stderr)
	network, err := tf.Network(log)
	if err != nil {
		return err
	}
	defer network.Close()
	unloaded, err := unloadedAtStart(*control, *repo, loads)
	if err != nil {
		return err
	}
	cfg, err := servingConfig(*file, *repo)
	if err != nil {
		return err
	}
	if len(cfg.Ignored) > 0 {
		log.Info().Strs("keys", cfg.Ignored).Str("file", cfg.Source).Msg("serving the models of a workload file; its load keys are for the load generator")
	}
	if *policy != "" {
		p, err := scheduler.ParsePolicy(*policy)
		if err != nil {
			return cli.UsageErr("%v", err)
		}
		cfg.Policy = p
	}
	if *maxGPUs != 0 {
		if *maxGPUs < 1 || *maxGPUs > serving.MaxGPUsLimit {
			return cli.UsageErr("--max-gpus %d out of range [1, %d]", *maxGPUs, serving.MaxGPUsLimit)
		}
		cfg.Limits.MaxGPUs = *maxGPUs
	}
	if *drain != 0 {
		cfg.Limits.DrainTimeout = *drain
	}
	if ef.on() {
		// Nothing is served before the controller gives the part its
		// models: the assignment loads them.
		unloaded = nil
		for _, m := range cfg.Models {
			unloaded = append(unloaded, m.Name)
		}
	}
	sc := service.FromServing(cfg)
	sc.Addr, sc.Network, sc.Log, sc.Unloaded = *addr, network, log, unloaded
	sc.TailQuantile = *tailQuantile
	if *adviceWindow <= 0 {
		return cli.UsageErr("--advice-window must be positive")
	}
	sc.AdviceWindow = *adviceWindow
	if *tailQuantile == 0 {
		sc.TailQuantile = -1
	}
	metricsLn, err := daemon.Listen("metrics-addr", *metricsAddr)
	if err != nil {
		return err
	}
	if metricsLn != nil {
		defer metricsLn.Close() // if the start fails before it is served
	}
	pprofSrv, err := common.ServePprof(log)
	if err != nil {
		return err
	}
	defer daemon.Shutdown(pprofSrv, time.Second)
	reg, closeEtcd, err := ef.connectIfOn(context.Background())
	if err != nil {
		return err
	}
	defer closeEtcd()
	svc, err := service.Start(sc)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "scheduler listening on %s (%d models, policy %v)\n", svc.Addr(), len(sc.Models), sc.Policy)
	ready, status := probe(svc.Ready), func() string { return "" }
	var (
		role  *schedulerRole
		plane = &liveRun{} // no agent without --etcd
	)
	if reg != nil {
		sname := liveName(*name, "scheduler")
		address := *advertise
		if address == "" {
			address = svc.Addr()
		}
		role = &schedulerRole{part: *part, name: sname, log: log.With().Str("component", "part-scheduler").Int("part", *part).Logger(), standing: true}
		ready = func(context.Context) error {
			if err := svc.Ready(); err != nil {
				return err
			}
			return role.ready()
		}
		status = role.status
		plane = startLive(func(ctx context.Context) error {
			go role.follow(ctx, reg)
			err := schedagent.Run(ctx, schedagent.Config{Registry: reg, Service: svc, Part: *part, Name: sname, Address: address, Log: log})
			why := "resigned: stopping"
			if err != nil {
				why = err.Error()
			}
			role.setStanding(false, why)
			return err
		})
		fmt.Fprintf(stdout, "scheduler %s of part %d: standing for election in etcd at %s as %s, every model unloaded until the assignment gives the part its own\n",
			sname, *part, strings.Join(splitList(ef.endpoints), ","), address)
	}
	if metricsLn != nil {
		health := daemon.Health{Live: probe(svc.Live), Ready: ready, Status: status}
		srv := daemon.Serve(metricsLn, daemon.AdminMux(health, schedmetrics.Handler(svc, network.Collectors("scheduler")...)), log)
		defer srv.Close()
		fmt.Fprintf(stdout, "metrics on http://%s/metrics\n", metricsLn.Addr())
	}
	// The first signal starts a graceful stop: with --etcd, resigning the
	// part first (a standby takes over at once), then draining. A second
	// cuts the drain short (the plans still out end as shutdown drops, and
	// the scheduler still stops cleanly); a third exits at once. Losing
	// the part's leadership stops the scheduler as a first signal would:
	// a deposed scheduler must not go on planning for the part.
	onSignals(log, notify, plane.done, func() {
		_ = plane.stop()
		svc.Close()
	}, func() {
		log.Warn().Msg("second signal: ending the plans still in flight as shutdown drops (a third exits at once)")
		svc.EndDrain()
	})
	liveErr := plane.stop()
	st := svc.Snapshot()
	log.Info().Uint64("tasks", st.Tasks).Uint64("planned", st.Planned).Uint64("dropped", st.Dropped).Uint64("failed", st.Failed).Msg("scheduler stopped")
	return liveErr
}

// checkSchedulerLive checks the scheduler's live control plane flags
// before anything starts.
func checkSchedulerLive(ef *etcdFlags, common *daemon.Flags, part int, addr, advertise, control string) error {
	if !ef.on() {
		for _, name := range []string{"part", "advertise-addr"} {
			if setElsewhere(common, name) {
				return cli.UsageErr("--%s is for the live control plane: it needs --etcd", name)
			}
		}
		return nil
	}
	if err := ef.validate(); err != nil {
		return err
	}
	switch {
	case part < 0 || part >= registry.MaxParts:
		return cli.UsageErr("--etcd needs --part N, the part this scheduler serves (0 to the controller's --parts minus 1)")
	case control != "none" || setElsewhere(common, "load-model"):
		return cli.UsageErr("--etcd: the controller's assignment loads and unloads the models; --model-control-mode explicit and --load-model do not go with it")
	case advertise != "" && !dialable(advertise):
		return cli.UsageErr("--advertise-addr %q: want HOST:PORT with a host and a non-zero port that frontends and backends can dial", advertise)
	case advertise == "":
		host, _, err := net.SplitHostPort(addr)
		if ip := net.ParseIP(host); err == nil && (host == "" || ip != nil && ip.IsUnspecified()) {
			return cli.UsageErr("--addr %s binds every interface: give --advertise-addr HOST:PORT, the address frontends and backends dial (in Kubernetes: the pod's IP and the port)", addr)
		}
	}
	return nil
}

// liveRun is a process's agent of the live control plane, running beside
// the process's own work until stopped or failed.
type liveRun struct {
	cancel context.CancelFunc
	// done is closed when the agent has returned (nil: no agent); err is
	// then what it returned.
	done chan struct{}
	err  error
}

// startLive runs f on its own goroutine under a context that stop ends.
func startLive(f func(ctx context.Context) error) *liveRun {
	ctx, cancel := context.WithCancel(context.Background())
	l := &liveRun{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		l.err = f(ctx)
	}()
	return l
}

// stop ends the agent, waits for it to return and returns its error (nil
// when it ended because of stop). A liveRun without an agent returns nil.
func (l *liveRun) stop() error {
	if l.done == nil {
		return nil
	}
	l.cancel()
	<-l.done
	return l.err
}

// running reports whether the agent is still running (false without
// one).
func (l *liveRun) running() bool {
	if l.done == nil {
		return false
	}
	select {
	case <-l.done:
		return false
	default:
		return true
	}
}

// runBackend is `symphony backend`: one GPU agent with emulated GPUs.
// With --etcd it starts parked and follows the live control plane
// (backend/backendagent): the controller's assignment gives it a part, whose
// active scheduler it registers its GPUs with. It stops on notify's
// signals.
func runBackend(args []string, stdout, stderr io.Writer, notify stopSignals) error {
	fs := flag.NewFlagSet("backend", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sched := fs.String("scheduler", "127.0.0.1:7100", "the scheduler's address (not with --etcd, where the assignment and the routing table say which scheduler)")
	gpus := fs.Int("gpus", 1, "GPUs this backend owns (emulated, or CPU slots with --executor onnx)")
	executor := fs.String("executor", "emulated", "what runs the batches: emulated (sleeps ℓ(b), answers a digest of the input) or onnx (ONNX Runtime on the CPU, models from --model-repo)")
	repo := fs.String("model-repo", "", "with --executor onnx: the model repository, REPO/<model>/<version>/model.onnx")
	ortLib := fs.String("onnxruntime-lib", "", "with --executor onnx: ONNX Runtime's libonnxruntime.so (default: $"+onnx.LibraryEnv+", else make onnxruntime's "+onnx.FetchedLibrary+")")
	intraOp := fs.Int("intra-op-threads", 0, "with --executor onnx: threads per batch (0: ONNX Runtime's default)")
	name := fs.String("name", "", "name in logs, and with --etcd in the registry and the assignment (default backend-PID; with --etcd backend-HOST-PID, unique and the same after a container restarts)")
	gpuMemory := byteLimit(0)
	fs.Var(&gpuMemory, "gpu-memory", "with --executor emulated: each GPU's memory in `BYTES` (such as 16GiB): a model load that the models' declared sizes (static + largest dynamic, as the controller's --gpu-memory packs them) would take past it fails (0: no limit)")
	var execCPUs cpuList
	fs.Var(&execCPUs, "executor-cpus", "give each GPU's batches a CPU of their own, as a list (1, or 2,3, or 4-7): GPU i's batches run on the i-th, and the backend's other threads stay off them (Linux; one per GPU; with --executor onnx, --intra-op-threads 1). Keep other processes off them too (taskset -c)")
	dp := cli.AddDataPathFlags(fs)
	tf := cli.AddTLSFlags(fs)
	metricsAddr := fs.String("metrics-addr", "", metricsAddrHelp)
	drain := fs.Duration("drain", 30*time.Second, "on SIGTERM, the longest to wait for the plans held to finish and their results to go out before exiting; a second signal cuts it short")
	ef := addEtcdFlags(fs, true)
	common := daemon.AddFlags(fs, "log more")
	if done, err := parseProcessFlags(fs, common, args, stdout); done || err != nil {
		return err
	}
	if *drain <= 0 {
		return cli.UsageErr("--drain must be positive")
	}
	if ef.on() {
		if setElsewhere(common, "scheduler") {
			return cli.UsageErr("--scheduler and --etcd do not go together: with --etcd the backend starts parked, and the controller's assignment and the routing table say which scheduler it joins")
		}
		if err := ef.validate(); err != nil {
			return err
		}
	}
	log := common.Logger(stderr)
	network, err := tf.Network(log)
	if err != nil {
		return err
	}
	defer network.Close()
	bc := backend.Default()
	bc.SchedulerAddr, bc.GPUs, bc.Log, bc.Network = *sched, *gpus, log, network
	bc.DataPath = dp.Config()
	bc.Name = cli.ProcessName(*name, "backend")
	if ef.on() {
		bc.SchedulerAddr, bc.Parked, bc.Name = "", true, liveName(*name, "backend")
		if err := (registry.Backend{Name: bc.Name, GPUs: bc.GPUs}).Validate(); err != nil {
			return cli.UsageErr("--name or --gpus: %v", err)
		}
	}
	bc.ExecutorCPUs = execCPUs.cpus
	if len(execCPUs.cpus) > 0 && len(execCPUs.cpus) != *gpus {
		return cli.UsageErr("--executor-cpus names %d CPUs for --gpus %d: give one per GPU", len(execCPUs.cpus), *gpus)
	}
	if gpuMemory < 0 {
		return cli.UsageErr("--gpu-memory must not be negative")
	}
	switch *executor {
	case "emulated":
		bc.Executor = backend.NewEmulatedWithMemory(int64(gpuMemory))
	case "onnx":
		if gpuMemory != 0 {
			return cli.UsageErr("--gpu-memory is the emulated executor's: ONNX Runtime's loads take what memory they need")
		}
		if *repo == "" {
			return cli.UsageErr("--executor onnx needs --model-repo")
		}
		if len(execCPUs.cpus) > 0 && *intraOp != 1 {
			return cli.UsageErr("--executor-cpus pins the thread that calls ONNX Runtime: give --intra-op-threads 1 (ONNX Runtime's own threads would run off the pinned CPUs)")
		}
		ex, err := onnx.New(onnx.Config{Library: *ortLib, Repository: *repo, IntraOpThreads: *intraOp})
		if err != nil {
			return err
		}
		defer ex.Close()
		bc.Executor = ex
	default:
		return cli.UsageErr("--executor %q: want emulated or onnx", *executor)
	}
	metricsLn, err := daemon.Listen("metrics-addr", *metricsAddr)
	if err != nil {
		return err
	}
	if metricsLn != nil {
		defer metricsLn.Close() // if the start fails before it is served
	}
	pprofSrv, err := common.ServePprof(log)
	if err != nil {
		return err
	}
	defer daemon.Shutdown(pprofSrv, time.Second)
	reg, closeEtcd, err := ef.connectIfOn(context.Background())
	if err != nil {
		return err
	}
	defer closeEtcd()
	a, err := backend.Start(bc)
	if err != nil {
		return err
	}
	plane := &liveRun{} // no agent without --etcd
	var stopping atomic.Bool
	ready := probe(a.Ready)
	if reg != nil {
		var address string
		if metricsLn != nil && dialable(metricsLn.Addr().String()) {
			address = metricsLn.Addr().String()
		}
		plane = startLive(func(ctx context.Context) error {
			return backendagent.Run(ctx, backendagent.Config{Registry: reg, Agent: a, Name: bc.Name, GPUs: bc.GPUs, Address: address, Log: log})
		})
		// A parked backend is ready: it is a healthy spare in the free
		// pool, and the controller places only the GPUs the parts need,
		// so gating readiness on a part would hold a StatefulSet's
		// ordered start and rollouts on the spares forever.
		ready = func(context.Context) error {
			if !plane.running() {
				return errors.New("not registered in etcd")
			}
			err := a.Ready()
			if err != nil && !stopping.Load() && a.SchedulerAddr() == "" {
				return nil
			}
			return err
		}
		fmt.Fprintf(stdout, "backend %s: %d GPUs parked, joining the live control plane through etcd at %s: the controller places them\n", bc.Name, bc.GPUs, strings.Join(splitList(ef.endpoints), ","))
	}
	if metricsLn != nil {
		// Live while the process serves; ready while registered and not
		// draining, so that a rolling restart waits for the new pod's GPUs.
		health := daemon.Health{Ready: ready}
		if reg != nil {
			health.Status = func() string {
				if addr := a.SchedulerAddr(); addr != "" {
					return "with the scheduler at " + addr
				}
				return "parked in the free pool"
			}
		}
		srv := daemon.Serve(metricsLn, daemon.AdminMux(health, backmetrics.Handler(a.Stats(), network.Collectors("backend")...)), log)
		defer srv.Close()
		fmt.Fprintf(stdout, "metrics on http://%s/metrics\n", metricsLn.Addr())
	}
	rctx, stopWaiting := context.WithCancel(context.Background())
	defer stopWaiting()
	go func() {
		if a.WaitReady(rctx) == nil {
			fmt.Fprintf(stdout, "backend %s registered %d GPUs with %s, data path %v\n", bc.Name, bc.GPUs, a.SchedulerAddr(), a.DataPath())
		}
	}()
	// The first signal drains: with --etcd, the backend leaves the
	// registry first (the controller places its GPUs no more); the
	// scheduler plans nothing more here, the plans held run and their
	// results go out, then the backend exits (a rolling restart fails no
	// request); a second closes at once, as a crash would; a third exits.
	// Losing its registration stops the backend as a first signal would,
	// with an error: the controller has taken it for dead.
	// The drain's --drain runs from the signal, not from the start.
	hurried, cancel := context.WithCancel(context.Background())
	defer cancel()
	onSignals(log, notify, plane.done, func() {
		stopping.Store(true)
		_ = plane.stop()
		dctx, dcancel := context.WithTimeout(hurried, *drain)
		defer dcancel()
		if err := a.Drain(dctx); err != nil {
			log.Warn().Err(err).Msg("drain cut short: the plans still held fail as backend lost")
		}
	}, func() {
		log.Warn().Msg("second signal: closing without finishing the plans held (a third exits at once)")
		cancel()
	})
	return plane.stop()
}

// runFrontend is `symphony frontend`: a frontend serving the KServe v2
// HTTP inference protocol, for apps in any language. With --etcd it has
// no scheduler of its own and follows the live control plane's routing
// table (frontend/frontendagent). It stops on notify's signals.
func runFrontend(args []string, stdout, stderr io.Writer, notify stopSignals) error {
	fs := flag.NewFlagSet("frontend", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sched := fs.String("scheduler", "127.0.0.1:7100", "the scheduler's address (not with --etcd, where the routing table gives each model's)")
	httpAddr := fs.String("http-addr", "127.0.0.1:8000", "address of the KServe v2 HTTP gateway")
	grpcAddr := fs.String("grpc-addr", "127.0.0.1:8001", "address of the KServe v2 gRPC endpoint (GRPCInferenceService, Triton's port); empty: none")
	dataAddr := fs.String("data-addr", "127.0.0.1:0", "address backends pull inputs from")
	advertise := fs.String("advertise-data-addr", "", "the `HOST:PORT` backends are told to dial for --data-addr, when that binds every interface or sits behind NAT (in Kubernetes: the pod's IP and the port; default: --data-addr's own address)")
	name := fs.String("name", "", "name in logs, and with --etcd in the registry (default frontend-PID; with --etcd frontend-HOST-PID)")
	dp := cli.AddDataPathFlags(fs)
	tf := cli.AddTLSFlags(fs)
	gc := addGatewayFlags(fs)
	ef := addEtcdFlags(fs, true)
	withMetrics := fs.Bool("metrics", true, "serve Prometheus metrics at /metrics on the gateway's address (which also answers /livez and /readyz)")
	tokenFile := fs.String("gateway-token-file", "", "accept only requests bearing one of the tokens in this `FILE` (one a line; \"Authorization: Bearer TOKEN\", over HTTP and gRPC; health endpoints and /metrics excepted); default: every request")
	gwCert := fs.String("gateway-tls-cert", "", "serve the gateway (HTTP and gRPC) over TLS with this certificate `FILE` (PEM), with --gateway-tls-key")
	gwKey := fs.String("gateway-tls-key", "", "the gateway certificate's key `FILE` (PEM)")
	gwClientCA := fs.String("gateway-tls-client-ca", "", "with --gateway-tls-cert: require client certificates signed by this CA `FILE` (mTLS at the gateway)")
	common := daemon.AddFlags(fs, "log more")
	if done, err := parseProcessFlags(fs, common, args, stdout); done || err != nil {
		return err
	}
	if err := gc.Validate(); err != nil {
		return cli.UsageErr("gateway flags: %v", err)
	}
	if ef.on() {
		if setElsewhere(common, "scheduler") {
			return cli.UsageErr("--scheduler and --etcd do not go together: with --etcd the routing table gives each model's scheduler")
		}
		if err := ef.validate(); err != nil {
			return err
		}
	}
	gwTLS, err := gatewayTLS(*gwCert, *gwKey, *gwClientCA)
	if err != nil {
		return err
	}
	if *tokenFile != "" {
		if gc.Tokens, err = gateway.ReadTokens(*tokenFile); err != nil {
			return cli.UsageErr("--gateway-token-file: %v", err)
		}
	}
	log := common.Logger(stderr)
	network, err := tf.Network(log)
	if err != nil {
		return err
	}
	defer network.Close()
	gc.Version = daemon.ReadBuild().Version
	fc := frontend.Default()
	fc.SchedulerAddr, fc.DataAddr, fc.Log, fc.Network = *sched, *dataAddr, log, network
	fc.AdvertiseDataAddr = *advertise
	fc.DataPath = dp.Config()
	fc.Name = cli.ProcessName(*name, "frontend")
	if ef.on() {
		fc.SchedulerAddr, fc.Name = "", liveName(*name, "frontend")
		if err := (registry.Frontend{Name: fc.Name, DataAddress: "host:1"}).Validate(); err != nil {
			return cli.UsageErr("--name: %v", err)
		}
	}
	reg, closeEtcd, err := ef.connectIfOn(context.Background())
	if err != nil {
		return err
	}
	defer closeEtcd()
	client, err := frontend.New(fc)
	if err != nil {
		return err
	}
	defer client.Close()
	pprofSrv, err := common.ServePprof(log)
	if err != nil {
		return err
	}
	defer daemon.Shutdown(pprofSrv, time.Second)
	ctx, stop := signalContext(notify)
	defer stop()
	plane := &liveRun{} // no agent without --etcd
	if reg != nil {
		plane = startLive(func(ctx context.Context) error {
			return frontendagent.Run(ctx, frontendagent.Config{Registry: reg, Client: client, Name: fc.Name, Log: log})
		})
		defer func() { _ = plane.stop() }() // if the gateway does not start
		// A frontend that lost its registration stops: the controller no
		// longer waits for it to follow the routes, so it could send a
		// moved model's requests to a part that has unloaded it.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-plane.done:
				cancel()
			case <-ctx.Done():
			}
		}()
		fmt.Fprintf(stdout, "frontend %s: following the live control plane's routing table through etcd at %s\n", fc.Name, strings.Join(splitList(ef.endpoints), ","))
	}
	warnFileLimit(gc.MaxConnections, log)
	srv, err := gatewayserver.Start(client, gatewayserver.Config{HTTPAddr: *httpAddr, GRPCAddr: *grpcAddr, Gateway: *gc, Metrics: *withMetrics,
		Collectors: network.Collectors("frontend"), TLS: gwTLS, Log: log})
	if err != nil {
		return err
	}
	grpcOn, scheme := "", "http"
	if srv.GRPC != nil {
		grpcOn = "; gRPC on " + srv.GRPCAddr
	}
	if gwTLS != nil {
		scheme, grpcOn = "https", grpcOn+" (TLS)"
	}
	if gc.Tokens == nil && !daemon.IsLoopback(srv.HTTPAddr) {
		log.Warn().Str("addr", srv.HTTPAddr).Msg("the gateway takes requests from the network without a token: give --gateway-token-file, or keep it behind an authenticating proxy")
	}
	// Announce the gateway once it can serve: connected to the scheduler.
	if client.WaitReady(ctx) == nil {
		fmt.Fprintf(stdout, "frontend %s: KServe v2 gateway on %s://%s, inputs served on %s, data path %v%s\n", fc.Name, scheme, srv.HTTPAddr, client.DataAddr(), client.DataPath(), grpcOn)
		if err := gc.CheckInference(gatewayserver.LongestInference(client)); err != nil {
			log.Warn().Err(err).Msg("--write-timeout is too short for the models served: raise it")
		}
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// The gateway finishes its requests while the frontend still follows
	// the routes; then it leaves the registry.
	err = srv.Shutdown(sctx)
	if lerr := plane.stop(); lerr != nil {
		return lerr
	}
	return err
}

// addGatewayFlags adds the KServe gateway's limits and timeouts to fs; the
// flags fill in the returned gateway.Config, which starts at its defaults
// (see gateway.Config for what each guards against).
func addGatewayFlags(fs *flag.FlagSet) *gateway.Config {
	c := gateway.Default()
	fs.Int64Var(&c.MaxBodyBytes, "max-body-bytes", c.MaxBodyBytes, "largest inference request body the gateway takes (413 past it)")
	fs.DurationVar(&c.ReadHeaderTimeout, "read-header-timeout", c.ReadHeaderTimeout, "longest a client may take to send a request's header (slowloris clients are closed after it)")
	fs.DurationVar(&c.ReadTimeout, "read-timeout", c.ReadTimeout, "longest a client may take to send a whole request, header and body (408 and closed after it)")
	fs.DurationVar(&c.WriteTimeout, "write-timeout", c.WriteTimeout, "longest from a request's body to its answer's last byte; must outlast the longest SLO (the frontend ends every request by its deadline)")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", c.IdleTimeout, "close a kept-alive connection idle this long")
	fs.IntVar(&c.MaxConnections, "max-connections", c.MaxConnections, "most connections open at once; past it a new one is answered 503 with Retry-After and closed")
	fs.IntVar(&c.MaxInFlight, "max-in-flight", c.MaxInFlight, "most inference requests in flight at once; past it a request is answered 503 with Retry-After")
	fs.DurationVar(&c.HTTPBudget, "http-budget", c.HTTPBudget, "part of each request's SLO kept for HTTP to and from the client: requests are scheduled this much short of their SLO")
	return &c
}

// warnFileLimit warns when the process may not open maxConns connections:
// past its file limit, accept fails and connections wait in the kernel's
// backlog instead of being answered 503 at the cap. (Go raises the soft
// limit to the hard one at start; this sees the result.)
func warnFileLimit(maxConns int, log zerolog.Logger) {
	const reserve = 256 // the scheduler, backends' pulls, logs, metrics
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil && rl.Cur < uint64(maxConns)+reserve {
		log.Warn().Uint64("open_files_limit", rl.Cur).Int("max_connections", maxConns).
			Msg("the open-files limit is under --max-connections plus a reserve: connections past it will wait unanswered; raise the limit (ulimit -n) or lower --max-connections")
	}
}

// metricsAddrHelp is --metrics-addr's help, the same for the scheduler and
// the backends.
const metricsAddrHelp = "serve Prometheus metrics on http://`ADDR`/metrics, and the probes /livez and /readyz (default: off)"

// processSections are the sections of a config file (--config) that the
// processes read: each reads its own and the top level.
var processSections = []string{"scheduler", "backend", "frontend", "controller"}

// parseProcessFlags parses a process's command line, then fills in what
// it left unset from SYMPHONY_* variables and the config file
// (daemon.Flags.Resolve). done: --version or --print-config was answered.
func parseProcessFlags(fs *flag.FlagSet, common *daemon.Flags, args []string, stdout io.Writer) (done bool, err error) {
	if err := parseFlags(fs, args); err != nil {
		return false, err
	}
	if fs.NArg() > 0 {
		return false, cli.UsageErr("unexpected arguments %q", fs.Args())
	}
	done, err = common.Resolve(fs, stdout, os.LookupEnv, processSections)
	if err != nil {
		return false, cli.UsageErr("%v", err)
	}
	return done, nil
}

// probe adapts a process's readiness or liveness check to a daemon.Probe.
func probe(check func() error) daemon.Probe {
	return func(context.Context) error { return check() }
}

// cpuList is --executor-cpus: the CPUs as given, and parsed.
type cpuList struct {
	text string
	cpus []int
}

func (l *cpuList) String() string { return l.text }

func (l *cpuList) Set(v string) error {
	cpus, err := cpupin.Parse(v)
	if err != nil {
		return err
	}
	l.text, l.cpus = v, cpus
	return nil
}

// gatewayTLS is the gateway's TLS configuration from its flags: nil
// without a certificate; with a client CA, client certificates it signed
// are required. TLS 1.2 is the least, for the HTTP and gRPC clients of
// every language.
func gatewayTLS(certFile, keyFile, clientCA string) (*tls.Config, error) {
	switch {
	case certFile == "" && keyFile == "" && clientCA == "":
		return nil, nil
	case certFile == "" || keyFile == "":
		return nil, cli.UsageErr("--gateway-tls-cert and --gateway-tls-key go together")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, cli.UsageErr("--gateway-tls-cert/--gateway-tls-key: %v", err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCA != "" {
		pem, err := os.ReadFile(clientCA)
		if err != nil {
			return nil, cli.UsageErr("--gateway-tls-client-ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, cli.UsageErr("--gateway-tls-client-ca %s: no PEM certificate in it", clientCA)
		}
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return c, nil
}

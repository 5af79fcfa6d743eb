package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/backend"
	backmetrics "github.com/symphony-serving/symphony/backend/metrics"
	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/frontend/gateway"
	frontmetrics "github.com/symphony-serving/symphony/frontend/metrics"
	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/service"
	schedmetrics "github.com/symphony-serving/symphony/scheduler/service/metrics"
	"github.com/symphony-serving/symphony/scheduler/service/shutdown"
	"github.com/symphony-serving/symphony/scheduler/serving"
	"github.com/symphony-serving/symphony/transport/rdma"
	"github.com/symphony-serving/symphony/transport/tcp"
)

// defaultWorkload is the bundled workload of `symphony demo` and the model
// set of `symphony scheduler` when no file is given.
//
//go:embed default-workload.yaml
var defaultWorkload []byte

// loadWorkload parses the file, or the bundled default for "".
func loadWorkload(path string) (*workload.Workload, error) {
	if path == "" {
		return workload.Parse(defaultWorkload, "default workload")
	}
	return workload.ParseFile(path)
}

// loadServing parses the serving configuration in the file, or the
// bundled default workload's for "".
func loadServing(path string) (*serving.Config, error) {
	if path == "" {
		return serving.Parse(defaultWorkload, "default workload")
	}
	return serving.ParseFile(path)
}

// signalContext is canceled on SIGINT or SIGTERM, so that processes stop
// cleanly: queued requests end with a shutdown drop, not silently.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// dataPathFlags are --data-path and --rdma-device, of every command that
// runs a backend or a frontend.
type dataPathFlags struct {
	mode   rdma.Mode
	device *string
}

func addDataPathFlags(fs *flag.FlagSet) *dataPathFlags {
	d := &dataPathFlags{}
	fs.TextVar(&d.mode, "data-path", rdma.ModeAuto, "how backends read inputs from frontends: `auto` (RDMA READs where both sides have an RDMA device and a binary built with -tags rdma, else TCP; logs which), rdma (required: no start without it) or tcp")
	d.device = fs.String("rdma-device", "", "the RDMA device to use, as ibv_devices lists it (default: the first with an active port)")
	return d
}

// config is the data path the flags ask for.
func (d *dataPathFlags) config() rdma.Config {
	c := rdma.DefaultConfig()
	c.Mode, c.Device.Name = d.mode, *d.device
	return c
}

func newNetwork(log zerolog.Logger) *tcp.Network {
	o := tcp.Default()
	o.Log = log
	return tcp.New(o)
}

// runScheduler is `symphony scheduler`: the scheduler service alone,
// serving a serving configuration (scheduler/serving).
func runScheduler(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("scheduler", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("f", "", "serving configuration to serve: models, policy, network delays, live floor and limits (docs/serving-config.md); a workload file serves too, its load ignored (default: the bundled demo's models)")
	addr := fs.String("addr", "127.0.0.1:7100", "address to listen on for frontends and backends")
	policy := fs.String("policy", "", "override the file's policy: symphony, work-conserving or clockwork")
	maxGPUs := fs.Int("max-gpus", 0, "most GPUs the cluster may have (default: the file's limits.max_gpus, else 1024)")
	drain := fs.Duration("drain", 0, "on SIGTERM, how long to wait for batches already sent to backends (default: the file's limits.drain_timeout, else the longest SLO plus 500ms; negative: none); a second signal cuts it short, a third exits")
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics on http://`ADDR`/metrics (default: off)")
	verbose := fs.Bool("v", false, "log every connection and more")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments %q", fs.Args())
	}
	log := processLogger(stderr, *verbose)
	cfg, err := loadServing(*file)
	if err != nil {
		return err
	}
	if len(cfg.Ignored) > 0 {
		log.Info().Strs("keys", cfg.Ignored).Str("file", cfg.Source).Msg("serving the models of a workload file; its load keys are for the load generator")
	}
	if *policy != "" {
		p, err := scheduler.ParsePolicy(*policy)
		if err != nil {
			return usageErr("%v", err)
		}
		cfg.Policy = p
	}
	if *maxGPUs != 0 {
		if *maxGPUs < 1 || *maxGPUs > serving.MaxGPUsLimit {
			return usageErr("--max-gpus %d out of range [1, %d]", *maxGPUs, serving.MaxGPUsLimit)
		}
		cfg.Limits.MaxGPUs = *maxGPUs
	}
	if *drain != 0 {
		cfg.Limits.DrainTimeout = *drain
	}
	sc := service.FromServing(cfg)
	sc.Addr, sc.Network, sc.Log = *addr, newNetwork(log), log
	metricsLn, err := listenMetrics(*metricsAddr)
	if err != nil {
		return err
	}
	if metricsLn != nil {
		defer metricsLn.Close() // if the start fails before it is served
	}
	svc, err := service.Start(sc)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "scheduler listening on %s (%d models, policy %v)\n", svc.Addr(), len(sc.Models), sc.Policy)
	if metricsLn != nil {
		srv := serveOn(metricsLn, metricsMux(schedmetrics.Handler(svc)), log)
		defer srv.Close()
		fmt.Fprintf(stdout, "metrics on http://%s/metrics\n", metricsLn.Addr())
	}
	// The first signal starts a graceful stop; a second cuts its drain
	// short (the plans still out end as shutdown drops, and the scheduler
	// still stops cleanly); a third exits at once.
	onSignals(log, svc.Close, func() {
		log.Warn().Msg("second signal: ending the plans still in flight as shutdown drops (a third exits at once)")
		svc.EndDrain()
	})
	st := svc.Snapshot()
	log.Info().Uint64("tasks", st.Tasks).Uint64("planned", st.Planned).Uint64("dropped", st.Dropped).Uint64("failed", st.Failed).Msg("scheduler stopped")
	return nil
}

// runBackend is `symphony backend`: one GPU agent with emulated GPUs.
func runBackend(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("backend", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sched := fs.String("scheduler", "127.0.0.1:7100", "the scheduler's address")
	gpus := fs.Int("gpus", 1, "emulated GPUs this backend owns")
	name := fs.String("name", "", "name in logs (default backend-PID)")
	dp := addDataPathFlags(fs)
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics on http://`ADDR`/metrics (default: off)")
	drain := fs.Duration("drain", 30*time.Second, "on SIGTERM, the longest to wait for the plans held to finish and their results to go out before exiting; a second signal cuts it short")
	verbose := fs.Bool("v", false, "log more")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments %q", fs.Args())
	}
	if *drain <= 0 {
		return usageErr("--drain must be positive")
	}
	log := processLogger(stderr, *verbose)
	bc := backend.Default()
	bc.SchedulerAddr, bc.GPUs, bc.Log, bc.Network = *sched, *gpus, log, newNetwork(log)
	bc.DataPath = dp.config()
	bc.Name = processName(*name, "backend")
	metricsLn, err := listenMetrics(*metricsAddr)
	if err != nil {
		return err
	}
	if metricsLn != nil {
		defer metricsLn.Close() // if the start fails before it is served
	}
	a, err := backend.Start(bc)
	if err != nil {
		return err
	}
	if metricsLn != nil {
		srv := serveOn(metricsLn, metricsMux(backmetrics.Handler(a.Stats())), log)
		defer srv.Close()
		fmt.Fprintf(stdout, "metrics on http://%s/metrics\n", metricsLn.Addr())
	}
	rctx, stopWaiting := context.WithCancel(context.Background())
	defer stopWaiting()
	go func() {
		if a.WaitReady(rctx) == nil {
			fmt.Fprintf(stdout, "backend %s registered %d GPUs with %s, data path %v\n", bc.Name, bc.GPUs, *sched, a.DataPath())
		}
	}()
	// The first signal drains: the scheduler plans nothing more here, the
	// plans held run and their results go out, then the backend exits (a
	// rolling restart fails no request); a second closes at once, as a
	// crash would; a third exits.
	dctx, cancel := context.WithTimeout(context.Background(), *drain)
	defer cancel()
	onSignals(log, func() {
		if err := a.Drain(dctx); err != nil {
			log.Warn().Err(err).Msg("drain cut short: the plans still held fail as backend lost")
		}
	}, func() {
		log.Warn().Msg("second signal: closing without finishing the plans held (a third exits at once)")
		cancel()
	})
	return nil
}

// onSignals waits for SIGINT or SIGTERM, then runs graceful and returns
// when it does. Each further signal runs the next of hurry, meant to cut
// the graceful stop short; a signal past the last of them exits at once.
func onSignals(log zerolog.Logger, graceful func(), hurry ...func()) {
	sigs, stop := shutdown.Notify(len(hurry) + 2)
	defer stop()
	shutdown.Wait(sigs, graceful, hurry, func() {
		log.Error().Msg("signal: exiting without finishing the stop")
		os.Exit(130)
	})
}

// runFrontend is `symphony frontend`: a frontend serving the KServe v2
// HTTP inference protocol, for apps in any language.
func runFrontend(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("frontend", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sched := fs.String("scheduler", "127.0.0.1:7100", "the scheduler's address")
	httpAddr := fs.String("http-addr", "127.0.0.1:8000", "address of the KServe v2 HTTP gateway")
	dataAddr := fs.String("data-addr", "127.0.0.1:0", "address backends pull inputs from")
	name := fs.String("name", "", "name in logs (default frontend-PID)")
	dp := addDataPathFlags(fs)
	gc := addGatewayFlags(fs)
	withMetrics := fs.Bool("metrics", true, "serve Prometheus metrics at /metrics on the gateway's address")
	verbose := fs.Bool("v", false, "log more")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments %q", fs.Args())
	}
	if err := gc.Validate(); err != nil {
		return usageErr("gateway flags: %v", err)
	}
	log := processLogger(stderr, *verbose)
	fc := frontend.Default()
	fc.SchedulerAddr, fc.DataAddr, fc.Log, fc.Network = *sched, *dataAddr, log, newNetwork(log)
	fc.DataPath = dp.config()
	fc.Name = processName(*name, "frontend")
	client, err := frontend.New(fc)
	if err != nil {
		return err
	}
	defer client.Close()
	ctx, stop := signalContext()
	defer stop()
	warnFileLimit(gc.MaxConnections, log)
	srv, addr, err := serveGateway(client, *httpAddr, *gc, *withMetrics, log)
	if err != nil {
		return err
	}
	// Announce the gateway once it can serve: connected to the scheduler.
	if client.WaitReady(ctx) == nil {
		fmt.Fprintf(stdout, "frontend %s: KServe v2 gateway on http://%s, inputs served on %s, data path %v\n", fc.Name, addr, client.DataAddr(), client.DataPath())
		if err := gc.CheckInference(longestInference(client)); err != nil {
			log.Warn().Err(err).Msg("--write-timeout is too short for the models served: raise it")
		}
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
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

// longestInference is the longest an inference through client can take:
// its longest model SLO, by which the frontend ends every request.
func longestInference(client *frontend.Client) time.Duration {
	var slo time.Duration
	for _, m := range client.Models() {
		slo = max(slo, m.SLO)
	}
	return slo
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

// serveGateway serves the KServe v2 gateway for client on addr with the
// settings gc (its Log and Observe are set here), behind the gateway's own
// server timeouts and connection cap, with the frontend's Prometheus
// metrics at /metrics if withMetrics.
func serveGateway(client *frontend.Client, addr string, gc gateway.Config, withMetrics bool, log zerolog.Logger) (*http.Server, string, error) {
	gc.Log = log
	var m *frontmetrics.Metrics
	if withMetrics {
		m = frontmetrics.New(client.Stats())
		gc.Observe = m.Observe
	}
	gw, err := gateway.New(gatewayClient{client}, gc)
	if err != nil {
		return nil, "", err
	}
	mux := http.NewServeMux()
	if m != nil {
		m.Gateway(gw.Stats())
		mux.Handle("/metrics", m.Handler())
	}
	mux.Handle("/", gw)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("gateway: %w", err)
	}
	return serve(gw.Listener(ln), gw.Server(mux), log), ln.Addr().String(), nil
}

// serveOn serves h on ln in the background: the metrics endpoints of the
// scheduler and backends.
func serveOn(ln net.Listener, h http.Handler, log zerolog.Logger) *http.Server {
	return serve(ln, &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, log)
}

// serve runs srv on ln in the background.
func serve(ln net.Listener, srv *http.Server, log zerolog.Logger) *http.Server {
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Str("addr", ln.Addr().String()).Msg("HTTP server stopped")
		}
	}()
	return srv
}

// listenMetrics binds --metrics-addr (nil for ""), before the process
// starts its work, so that a taken port fails the start naming the flag.
// The caller serves on it, which closes it.
func listenMetrics(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	return ln, nil
}

// metricsMux serves h at /metrics.
func metricsMux(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	return mux
}

// gatewayClient adapts a frontend client to the gateway's Inferer.
type gatewayClient struct{ c *frontend.Client }

func (g gatewayClient) Infer(ctx context.Context, model string, input []byte, deadline time.Time) ([]byte, error) {
	out, _, err := g.InferTimed(ctx, model, input, deadline)
	return out, err
}

func (g gatewayClient) InferTimed(ctx context.Context, model string, input []byte, deadline time.Time) ([]byte, gateway.Batch, error) {
	var opts []frontend.CallOption
	if !deadline.IsZero() {
		opts = append(opts, frontend.WithDeadline(deadline))
	}
	call := g.c.Go(ctx, model, input, opts...)
	<-call.Done()
	t := call.Timing
	return call.Output, gateway.Batch{Size: t.BatchSize, Started: t.Started, Finished: t.Finished}, call.Err
}

func (g gatewayClient) Model(name string) (gateway.ModelInfo, bool) {
	m, ok := g.c.Model(name)
	return gateway.ModelInfo{Name: m.Name, SLO: m.SLO, Ready: ok && g.c.Connected()}, ok
}

func (g gatewayClient) Ready() bool { return g.c.Connected() }

// processName is name, or ROLE-PID when none was given.
func processName(name, role string) string {
	if name != "" {
		return name
	}
	return fmt.Sprintf("%s-%d", role, os.Getpid())
}

// processLogger logs at info level for long-running processes (joins,
// leaves, failures), debug with -v.
func processLogger(stderr io.Writer, verbose bool) zerolog.Logger {
	level := zerolog.InfoLevel
	if verbose {
		level = zerolog.DebugLevel
	}
	return zerolog.New(zerolog.ConsoleWriter{Out: stderr, NoColor: true}).Level(level).With().Timestamp().Logger()
}

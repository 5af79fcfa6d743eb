package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/symphony-serving/symphony/bench/cluster"
	"github.com/symphony-serving/symphony/bench/loadgen"
	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/cmd/internal/cli"
	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/frontend/gateway"
	"github.com/symphony-serving/symphony/frontend/gateway/kserveclient"
	"github.com/symphony-serving/symphony/frontend/gatewayserver"
	"github.com/symphony-serving/symphony/transport/wire"
)

// processLog is the log of the cluster's processes: silent unless -v.
func (lf *loadFlags) processLog(stderr io.Writer) zerolog.Logger {
	if *lf.verbose {
		return cli.ProcessLogger(stderr, false)
	}
	return zerolog.Nop()
}

// loadFlags are the flags `demo` and `bench -f` share.
type loadFlags struct {
	file        *string
	duration    *time.Duration
	warmup      *time.Duration
	asJSON      *bool
	csvPath     *string
	plotDir     *string
	findGoodput *bool
	inputBytes  *int
	sweep       *string
	quiet       *bool
	verbose     *bool
	// seed overrides the workload's seed: its arrivals, as sim --seed
	// does, so that a live run and the simulator's meet on each seed.
	seed *uint64

	// multipliers is --sweep, parsed by workload.
	multipliers []float64
	// faults plays the workload's fault scenario against the cluster
	// under load (loadgen.Options.Faults); demo sets it.
	faults func(start time.Time) (stop func(), err error)
	// annotate, if set, adds to a single run's report before it is
	// written (demo: the backends' timing).
	annotate func(*report.Report)
	// profile, if set, is each model's ℓ(b) table as the scheduler has it
	// (loadgen.Options.Profile): the report compares the real batch times
	// with it.
	profile func(model string) []time.Duration
}

// defaultInputBytes is the input size the load generator sends for a
// model without an input_size; maxInputBytes the largest a task may carry.
const (
	defaultInputBytes = 1024
	maxInputBytes     = wire.MaxInputSize
)

func addLoadFlags(fs *flag.FlagSet, fileHelp string) *loadFlags {
	return &loadFlags{
		file:        fs.String("f", "", fileHelp),
		duration:    fs.Duration("duration", 0, "override the workload's measured window"),
		warmup:      fs.Duration("warmup", -1, "override the workload's warmup"),
		asJSON:      fs.Bool("json", false, "print the report (with --sweep: the live and simulated curves) as JSON on stdout"),
		csvPath:     fs.String("csv", "", "write the per-model report (with --sweep: the sweep's table) as CSV to `FILE`"),
		plotDir:     fs.String("plot", "", "write SVG and PNG charts into `DIR` (with --sweep: goodput, bad rate and GPU idle against offered load)"),
		findGoodput: fs.Bool("find-goodput", false, "search for the largest load multiplier at which every model's bad rate is at most 1% (each step runs in real time)"),
		inputBytes:  fs.Int("input-bytes", -1, "size of each request's input, for every model (default: each model's input_size, or 1024)"),
		sweep:       fs.String("sweep", "", "comma-separated load multipliers to run in turn (of the found goodput with --find-goodput), beside the simulator's curve for the same file: a throughput curve"),
		quiet:       fs.Bool("quiet", false, "no progress lines"),
		verbose:     fs.Bool("v", false, "log the cluster's events"),
		seed:        fs.Uint64("seed", 0, "override the workload's seed (its arrivals; `sim --seed` takes the same)"),
	}
}

func (lf *loadFlags) workload(fs *flag.FlagSet) (*workload.Workload, error) {
	if fs.NArg() > 0 {
		return nil, cli.UsageErr("unexpected arguments %q", fs.Args())
	}
	if *lf.inputBytes < -1 || *lf.inputBytes > maxInputBytes {
		return nil, cli.UsageErr("--input-bytes must be between 0 and %d", maxInputBytes)
	}
	if *lf.duration < 0 {
		return nil, cli.UsageErr("--duration must not be negative")
	}
	var err error
	if lf.multipliers, err = parseMultipliers("--sweep", *lf.sweep); err != nil {
		return nil, err
	}
	w, err := loadWorkload(*lf.file)
	if err != nil {
		return nil, err
	}
	if w.Pinned() || w.Concurrent() {
		// A live cluster is one GPU kind whose backends run a batch at a
		// time: the file's placement would be silently ignored.
		return nil, cli.UsageErr("%s pins models to gpu_types or runs batches concurrently, which only the simulator models: run it with symphony sim -f", w.Source)
	}
	if *lf.inputBytes >= 0 {
		// Every model's inputs take this size, and a cluster started from
		// w budgets their pulls for it.
		sv := w.Serving()
		live := sv.LiveDelays()
		for i := range w.Models {
			m := &w.Models[i]
			m.InputBytes = int64(*lf.inputBytes)
			if least := m.LeastLatency(live); m.SLO <= least {
				return nil, cli.UsageErr("--input-bytes %d: %s's SLO of %v is no longer than a batch of one takes with an input that size (%v): every request would be dropped", *lf.inputBytes, m.Name, m.SLO, least)
			}
		}
	}
	if *lf.duration > 0 {
		w.Duration = *lf.duration
	}
	if *lf.warmup >= 0 {
		w.Warmup = *lf.warmup
	}
	if cli.FlagSet(fs, "seed") {
		w.Seed = *lf.seed
	}
	return w, nil
}

// options are the load generator's options the flags ask for: each model's
// input size, the report's label, progress on stderr unless --quiet.
func (lf *loadFlags) options(w *workload.Workload, label string, stderr io.Writer) loadgen.Options {
	sizes := make(map[string]int, len(w.Models))
	for _, m := range w.Models {
		switch {
		case *lf.inputBytes >= 0: // given, 0 included
			sizes[m.Name] = *lf.inputBytes
		case m.InputBytes > 0:
			sizes[m.Name] = int(m.InputBytes)
		default:
			sizes[m.Name] = defaultInputBytes
		}
	}
	o := loadgen.Options{Label: label, InputBytes: func(model string) int { return sizes[model] }, Faults: lf.faults, Profile: lf.profile}
	if !*lf.quiet {
		o.Progress = stderr
	}
	return o
}

// drive runs the load (or the goodput search) and writes the report.
func (lf *loadFlags) drive(ctx context.Context, t loadgen.Target, w *workload.Workload, label string, stdout, stderr io.Writer) error {
	o := lf.options(w, label, stderr)
	var r *report.Report
	var err error
	if *lf.findGoodput {
		r, err = loadgen.FindGoodput(ctx, t, w, o)
	} else {
		r, err = loadgen.Run(ctx, t, w, o)
		if r != nil && lf.annotate != nil {
			lf.annotate(r)
		}
	}
	return lf.writeRun(r, err, stdout)
}

// writeRun writes the report of a run or a goodput search, even one
// stopped by a signal (err), which still reports what it measured, and
// returns err.
func (lf *loadFlags) writeRun(r *report.Report, err error, stdout io.Writer) error {
	if r == nil {
		return err
	}
	if werr := writeSimOutputs(stdout, []report.Report{*r}, nil, *lf.asJSON, *lf.csvPath, *lf.plotDir); werr != nil {
		return errors.Join(err, werr)
	}
	return err
}

// runDemo is `symphony demo`: a whole cluster in one process on loopback
// TCP, driven by the load generator.
func runDemo(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	lf := addLoadFlags(fs, "workload file (default: the bundled demo workload: six 1080Ti-zoo models on 8 emulated GPUs)")
	httpAddr := fs.String("http-addr", "", "also serve the KServe v2 HTTP gateway on `ADDR` (e.g. 127.0.0.1:8000)")
	grpcAddr := fs.String("grpc-addr", "", "also serve the KServe v2 gRPC endpoint on `ADDR` (e.g. 127.0.0.1:8001)")
	policy := fs.String("policy", "", "override the workload's policy: symphony, work-conserving or clockwork (the simulator's curve of --sweep runs it too)")
	controller := fs.Bool("controller", false, "run the live control plane: a scheduler per part of the workload's epoch section, cluster.gpus one-GPU backends that start parked, and the epoch controller every epoch.interval, over an embedded etcd")
	lv := liveFlags{
		ttl:          fs.Duration("ttl", cluster.DefaultLiveTTL, "with --controller: the registry's lease TTL, how long a dead scheduler's part waits for its standby (whole seconds)"),
		autoscale:    fs.Bool("autoscale", false, "with --controller: start and stop the backends as the parts want GPUs (a process actuator), up to cluster.gpus, instead of a fixed pool"),
		boot:         fs.Duration("boot-delay", 2*time.Second, "with --autoscale: how long a started backend takes to come up, as a VM or pod would"),
		warmPool:     fs.Int("warm-pool", 2, "with --autoscale: idle backends kept up beyond what the parts want"),
		scaleInDelay: fs.Duration("scale-in-delay", 30*time.Second, "with --autoscale: how long the parts must want fewer GPUs before backends stop"),
	}
	dp := cli.AddDataPathFlags(fs)
	tf := cli.AddTLSFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := tf.Validate(); err != nil {
		return err
	}
	w, err := lf.workload(fs)
	if err != nil {
		return err
	}
	if !*controller && *lv.autoscale {
		return cli.UsageErr("--autoscale needs --controller: it sizes the pool the controller's parts draw on")
	}
	if *controller {
		switch {
		case w.Epoch == nil:
			return cli.UsageErr("--controller needs a workload with an epoch section (interval, parts): the controller runs its epochs")
		case lf.multipliers != nil || *lf.findGoodput:
			return cli.UsageErr("--controller runs the workload once: --sweep and --find-goodput are for a fixed cluster")
		case len(w.Faults) > 0:
			return cli.UsageErr("--controller does not play fault scenarios yet")
		case *httpAddr != "" || *grpcAddr != "":
			return cli.UsageErr("--controller serves no gateway yet: drop --http-addr and --grpc-addr")
		case *policy != "":
			return cli.UsageErr("--controller runs the workload's policy: drop --policy")
		}
		ctx, stop := cli.SignalContext()
		defer stop()
		return runLiveDemo(ctx, w, lf, &lv, dp, tf, lf.processLog(stderr), stdout, stderr)
	}
	if *policy != "" {
		if w.Policy, err = parsePolicyFlag(*policy, true); err != nil {
			return err
		}
	}
	if (*httpAddr != "" || *grpcAddr != "") && lf.multipliers != nil {
		return cli.UsageErr("--http-addr (or --grpc-addr) and --sweep exclude each other: a sweep starts a fresh cluster for each point")
	}
	log := lf.processLog(stderr)
	ctx, stop := cli.SignalContext()
	defer stop()
	announce := !*lf.quiet
	// With a fault scenario, load goes through the cluster's Target,
	// which follows the frontend through its restarts, and each run plays
	// the scenario against the cluster it runs on.
	var current *cluster.Cluster
	target := func(c *cluster.Cluster) loadgen.Target {
		if len(w.Faults) == 0 {
			return loadgen.Client(c.Frontends[0])
		}
		return c.Target()
	}
	if len(w.Faults) > 0 {
		lf.faults = func(start time.Time) (func(), error) {
			pb, err := current.Play(start, w.Faults)
			if err != nil {
				return nil, err
			}
			return pb.Stop, nil
		}
	}
	start := func(ctx context.Context) (*cluster.Cluster, func(), error) {
		c, cc, release, err := startDemoClusterWith(ctx, w, dp, tf, log)
		if err != nil {
			return nil, nil, err
		}
		current = c
		if announce {
			fmt.Fprintf(stderr, "demo: scheduler %s, %d backends × %d GPUs, frontend inputs on %s, data path %v; budgeting ctrl %v, data %v/request + %v/MiB, result %v\n",
				c.Scheduler.Addr(), cc.Backends, cc.GPUsPerBackend, c.Frontends[0].DataAddr(), c.Frontends[0].DataPath(), cc.Delays.Ctrl, cc.Delays.DataPerRequest, cc.Delays.DataPerMiB, cc.Delays.Result)
			if tf.Enabled() {
				fmt.Fprintf(stderr, "demo: every connection is mutual TLS, with %s for every process\n", tf.Cert)
			}
			announce = false // once: every point of a sweep starts the same cluster
		}
		return c, release, nil
	}
	// The scheduler's profiles, as its frontend learned them; every
	// point of a sweep starts a cluster serving the same ones.
	lf.profile = func(model string) []time.Duration { return frontendProfile(current.Frontends[0], model) }
	label := w.Policy.String() + " (live)"
	if lf.multipliers != nil {
		return lf.runSweep(ctx, func(ctx context.Context) (loadgen.Target, func(), error) {
			c, release, err := start(ctx)
			if err != nil {
				return nil, nil, err
			}
			return target(c), release, nil
		}, w, label, nil, stdout, stderr)
	}
	c, release, err := start(ctx)
	if err != nil {
		return err
	}
	defer release()
	lf.annotate = func(r *report.Report) {
		bt := c.BackendTiming()
		r.Backends = &bt
	}
	client := c.Frontends[0]
	if *httpAddr != "" || *grpcAddr != "" {
		srv, err := gatewayserver.Start(client, gatewayserver.Config{HTTPAddr: *httpAddr, GRPCAddr: *grpcAddr, Gateway: gateway.Default(), Metrics: true, Log: log})
		if err != nil {
			return err
		}
		defer srv.Close()
		if !*lf.quiet && srv.HTTP != nil {
			fmt.Fprintf(stderr, "demo: KServe v2 gateway on http://%s\n", srv.HTTPAddr)
		}
		if !*lf.quiet && srv.GRPC != nil {
			fmt.Fprintf(stderr, "demo: KServe v2 gRPC endpoint on %s\n", srv.GRPCAddr)
		}
	}
	return lf.drive(ctx, target(c), w, label, stdout, stderr)
}

// startDemoCluster starts the cluster of `symphony demo` for w on loopback
// TCP, within 30 seconds, and returns it, its configuration and the
// function that stops it.
func startDemoCluster(ctx context.Context, w *workload.Workload, dp *cli.DataPathFlags, log zerolog.Logger) (*cluster.Cluster, cluster.Config, func(), error) {
	return startDemoClusterWith(ctx, w, dp, &cli.TLSFlags{Insecure: true}, log)
}

// startDemoClusterWith is startDemoCluster on the network tf asks for:
// mutual TLS with its files, or plaintext.
func startDemoClusterWith(ctx context.Context, w *workload.Workload, dp *cli.DataPathFlags, tf *cli.TLSFlags, log zerolog.Logger) (*cluster.Cluster, cluster.Config, func(), error) {
	network, err := tf.Network(log)
	if err != nil {
		return nil, cluster.Config{}, nil, err
	}
	cc, err := cluster.FromWorkload(w, network, "127.0.0.1:0")
	if err != nil {
		network.Close()
		return nil, cc, nil, err
	}
	cc.Log = log
	cc.DataPath, cc.RDMADevice = dp.Mode(), dp.Device()
	cc.Faults = len(w.Faults) > 0
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	c, err := cluster.Start(sctx, cc)
	cancel()
	if err != nil {
		if c != nil {
			c.Close()
		}
		network.Close()
		if ctx.Err() != nil {
			return nil, cc, nil, fmt.Errorf("cluster start: %w", ctx.Err())
		}
		return nil, cc, nil, err
	}
	return c, cc, func() { c.Close(); network.Close() }, nil
}

// runBenchLoad is `symphony bench -f W --scheduler ADDR`: the load of a
// workload file against a running cluster, through an embedded frontend or
// a frontend's KServe v2 gateway, over HTTP or gRPC.
func runBenchLoad(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	lf := addLoadFlags(fs, "workload file (required)")
	sched := fs.String("scheduler", "", "the running scheduler's address (an embedded frontend connects to it)")
	gatewayURL := fs.String("gateway", "", "instead of --scheduler, send requests to a frontend's KServe v2 gateway at `URL`")
	grpcAddr := fs.String("grpc", "", "instead of --scheduler, send requests to a frontend's KServe v2 gRPC endpoint at `ADDR` (host:port)")
	grpcConns := fs.Int("grpc-conns", 1, "with --grpc, the client connections to spread the requests over (each carries many calls at once)")
	tokenFile := fs.String("token-file", "", "with --gateway or --grpc: send the first token in this `FILE` as a bearer token (a gateway started with --gateway-token-file asks for one)")
	dp := cli.AddDataPathFlags(fs)
	tf := cli.AddTLSFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *lf.file == "" {
		return cli.UsageErr("-f WORKLOAD is required")
	}
	if n := countSet(*sched, *gatewayURL, *grpcAddr); n != 1 {
		return cli.UsageErr("give exactly one of --scheduler ADDR, --gateway URL and --grpc ADDR")
	}
	if *grpcConns < 1 || *grpcConns > 64 {
		return cli.UsageErr("--grpc-conns %d: want 1 to 64", *grpcConns)
	}
	var token string
	if *tokenFile != "" {
		if *sched != "" {
			return cli.UsageErr("--token-file is for --gateway or --grpc: the scheduler takes no token")
		}
		t, err := firstToken(*tokenFile)
		if err != nil {
			return cli.UsageErr("--token-file: %v", err)
		}
		token = t
	}
	w, err := lf.workload(fs)
	if err != nil {
		return err
	}
	if len(w.Faults) > 0 {
		return cli.UsageErr("%s has a fault scenario (faults:), which bench cannot play against a cluster it did not start: play it with symphony demo -f, or symphony sim -f", w.Source)
	}
	log := lf.processLog(stderr)
	ctx, stop := cli.SignalContext()
	defer stop()
	if *gatewayURL != "" {
		c, err := kserveclient.New(*gatewayURL, nil)
		if err != nil {
			return cli.UsageErr("--gateway %q: want an http:// URL", *gatewayURL)
		}
		if token != "" {
			c = c.WithBearerToken(token)
		}
		t, err := loadgen.NewGatewayTarget(ctx, c, w)
		if err != nil {
			return err
		}
		return lf.benchRunning(ctx, t, w, "gateway", stdout, stderr)
	}
	if *grpcAddr != "" {
		conns := make([]grpc.ClientConnInterface, *grpcConns)
		for i := range conns {
			opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
			if token != "" {
				opts = append(opts, grpc.WithPerRPCCredentials(bearerToken(token)))
			}
			c, err := grpc.NewClient(*grpcAddr, opts...)
			if err != nil {
				return cli.UsageErr("--grpc %q: %v", *grpcAddr, err)
			}
			defer c.Close()
			conns[i] = c
		}
		t, err := loadgen.NewGRPCTarget(ctx, *grpcAddr, conns, w)
		if err != nil {
			return err
		}
		return lf.benchRunning(ctx, t, w, "gRPC", stdout, stderr)
	}
	network, err := tf.Network(log)
	if err != nil {
		return err
	}
	defer network.Close()
	fc := frontend.Default()
	fc.SchedulerAddr, fc.Name, fc.Network, fc.Log = *sched, "bench", network, log
	fc.DataPath = dp.Config()
	client, err := frontend.New(fc)
	if err != nil {
		return err
	}
	defer client.Close()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = client.WaitReady(wctx)
	cancel()
	if err != nil {
		return fmt.Errorf("no scheduler answered at %s within 10s (is it running, is that its --addr, and if it runs mutual TLS, did bench get --tls-ca/--tls-cert/--tls-key?): %w", *sched, err)
	}
	for _, m := range w.Models {
		info, ok := client.Model(m.Name)
		if !ok {
			return fmt.Errorf("the scheduler at %s does not serve model %q of %s", *sched, m.Name, w.Source)
		}
		if info.SLO != m.SLO {
			// The report judges requests by the file's SLO, the scheduler
			// by its own: the figures would mean nothing.
			return fmt.Errorf("model %q: %s gives an SLO of %v, but the scheduler at %s serves it with %v; bench the workload the scheduler was started with (symphony scheduler -f)", m.Name, w.Source, m.SLO, *sched, info.SLO)
		}
	}
	lf.profile = func(model string) []time.Duration { return frontendProfile(client, model) }
	return lf.benchRunning(ctx, loadgen.Client(client), w, "live", stdout, stderr)
}

// countSet is how many of the values are set (not "").
func countSet(vs ...string) int {
	n := 0
	for _, v := range vs {
		if v != "" {
			n++
		}
	}
	return n
}

// frontendProfile is the ℓ(b) table the scheduler announced for model to
// the frontend c, nil if c does not know the model.
func frontendProfile(c *frontend.Client, model string) []time.Duration {
	info, _ := c.Model(model)
	return info.Latency
}

// benchRunning drives a running cluster through t (via: "live" for an
// embedded frontend, "gateway", "gRPC"): one run, or with --sweep a sweep in which
// every point uses t, each starting once the previous point's requests
// have all ended.
func (lf *loadFlags) benchRunning(ctx context.Context, t loadgen.Target, w *workload.Workload, via string, stdout, stderr io.Writer) error {
	if lf.multipliers == nil {
		return lf.drive(ctx, t, w, w.Policy.String()+" ("+via+")", stdout, stderr)
	}
	// A frontend is not told the scheduler's policy: the live curve is
	// the cluster's, whatever the file says.
	note := fmt.Sprintf("the live curve ran the running cluster's own policy (bench is not told which); the simulator's ran the file's, %s", w.Policy)
	same := func(context.Context) (loadgen.Target, func(), error) { return t, func() {}, nil }
	return lf.runSweep(ctx, same, w, "the cluster's policy ("+via+")", []string{note}, stdout, stderr)
}

// defaultWorkload is the bundled workload of `symphony demo`.
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

// firstToken is the first token of a token file, in the format the
// gateway's --gateway-token-file reads (gateway.ReadTokens).
func firstToken(path string) (string, error) {
	toks, err := gateway.ReadTokenList(path)
	if err != nil {
		return "", err
	}
	return toks[0], nil
}

// bearerToken sends a bearer token with every gRPC call, as the gateway's
// authorization metadata. It works over plaintext too: the gateway's gRPC
// endpoint may sit behind a TLS-terminating proxy.
type bearerToken string

func (t bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(t)}, nil
}

func (bearerToken) RequireTransportSecurity() bool { return false }

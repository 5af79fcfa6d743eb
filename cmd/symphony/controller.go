package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/symphony-serving/symphony/cmd/internal/cli"
	"github.com/symphony-serving/symphony/cmd/internal/daemon"
	"github.com/symphony-serving/symphony/partition"
	"github.com/symphony-serving/symphony/partition/actuate"
	"github.com/symphony-serving/symphony/partition/epoch"
	lv "github.com/symphony-serving/symphony/partition/live"
	"github.com/symphony-serving/symphony/partition/registry"
	"github.com/symphony-serving/symphony/partition/strictyaml"
)

// Defaults of the controller's epoch settings, those of a workload file's
// epoch mapping (the simulator's) where they have one.
const (
	defaultEpochPeriod    = 30 * time.Second
	defaultModelLoadTime  = time.Second
	defaultRebalanceAbove = 0.1
)

// runController is `symphony controller`: the live control plane's epoch
// controller (live.RunController) over the models of a serving
// configuration, the schedulers' own. Every epoch it reads the parts'
// reports, re-partitions the models and sizes the parts with the core the
// simulator drives (partition/epoch), and carries the decision out
// through etcd, make before break. It runs until notify's first signal.
// Run one per cluster: of two, the second's writes conflict and it exits.
func runController(args []string, stdout, stderr io.Writer, notify stopSignals) error {
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("f", "", "the serving configuration whose models the controller places: the schedulers' -f (docs/serving-config.md); -f or --model-repo is required")
	repo := fs.String("model-repo", "", "place the profiled models of this model repository, besides -f's when both are given: the schedulers' --model-repo")
	ef := addEtcdFlags(fs, false)
	parts := fs.Int("parts", 0, "the number of parts, each served by the schedulers started with --part 0 to N-1 (required)")
	period := fs.Duration("epoch", defaultEpochPeriod, "the epoch's length: each epoch measures the parts for this long, then re-partitions and resizes them")
	headroom := fs.Float64("headroom", partition.DefaultHeadroom, "the capacity each part gets above its sized need")
	engine := fs.String("engine", "heuristic", "the partitioning engine: "+strings.Join(partition.EngineNames(), ", "))
	seed := fs.Uint64("seed", 1, "seeds the partitioning engine's search")
	maxDisruption := byteLimit(-1)
	fs.Var(&maxDisruption, "max-disruption", "C_max: the most `BYTES` of model loads and unloads one re-partitioning may cost (170MiB, 2GiB, or a plain count; negative: no limit)")
	rebalance := fs.Float64("rebalance-above", defaultRebalanceAbove, "keep the assignment while the parts' rate imbalance ((max-min)/avg) stays within this")
	maxRate := fs.Float64("max-rate-per-part", 0, "R_max: the most requests/s one part may take (0: no limit)")
	gpuMemory := byteLimit(0)
	fs.Var(&gpuMemory, "gpu-memory", "S_max: a GPU's memory in `BYTES`, which a part's models must fit (0: no limit)")
	loadTime := fs.Duration("model-load-time", defaultModelLoadTime, "how long a GPU takes to load one model: the step between the waves of a move's loads")
	var rates rateList
	fs.Var(&rates, "rate", "a model's declared rate, `MODEL=REQ/S`, which the first epoch places and sizes for before anything is measured (repeatable)")
	defaultRate := fs.Float64("default-rate", 0, "the declared rate, requests/s, of every model --rate does not name (0: none; each model then needs a --rate)")
	switchTimeout := fs.Duration("switch-timeout", lv.DefaultSwitchTimeout, "the longest a move waits for its new part to load the model, and for the frontends to follow the new routes")
	var sf scaleFlags
	fs.StringVar(&sf.statefulSet, "scale-statefulset", "", "autoscale: resize the backends' StatefulSet `NAME` through its scale subresource after each epoch, to what the parts want plus --warm-pool (in-cluster Kubernetes credentials; default: off)")
	fs.StringVar(&sf.deployment, "scale-deployment", "", "autoscale as --scale-statefulset, the backends being the Deployment `NAME`")
	fs.StringVar(&sf.namespace, "scale-namespace", "", "with --scale-*: the workload's namespace (default: the controller pod's own)")
	fs.IntVar(&sf.warmPool, "warm-pool", 1, "with --scale-*: idle backends kept up beyond what the parts want, so that a part grows without waiting for a pod to start")
	fs.DurationVar(&sf.scaleInDelay, "scale-in-delay", 5*time.Minute, "with --scale-*: how long the parts must want fewer GPUs before backends are removed")
	fs.IntVar(&sf.minBackends, "min-backends", 0, "with --scale-*: the fewest backends (default: one per part)")
	fs.IntVar(&sf.maxBackends, "max-backends", 0, "with --scale-*: the most backends, the cluster's spending cap (required with --scale-*)")
	fs.IntVar(&sf.gpusPerBackend, "gpus-per-backend", 1, "with --scale-*: the GPUs each backend pod runs")
	metricsAddr := fs.String("metrics-addr", "", "serve the probes /livez and /readyz, and the Go runtime's metrics at /metrics, on http://`ADDR` (default: off); the epochs themselves are in the log and in symphony cluster status")
	common := daemon.AddFlags(fs, "log more")
	if done, err := parseProcessFlags(fs, common, args, stdout); done || err != nil {
		return err
	}
	cfg, err := controllerConfig(controllerFlags{
		file: *file, repo: *repo, etcd: ef, parts: *parts, period: *period, headroom: *headroom, engine: *engine,
		seed: *seed, maxDisruption: int64(maxDisruption), rebalance: *rebalance, maxRate: *maxRate,
		gpuMemory: int64(gpuMemory), loadTime: *loadTime, rates: rates, defaultRate: *defaultRate, switchTimeout: *switchTimeout,
	})
	if err != nil {
		return err
	}
	policy, err := sf.policy(*parts)
	if err != nil {
		return err
	}
	log := common.Logger(stderr)
	cfg.Log = log
	if policy != nil {
		if cfg.Autoscaler, err = sf.autoscaler(policy, log); err != nil {
			return err
		}
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
	ctx, stop := signalContext(notify)
	defer stop()
	etcd, reg, err := ef.connect(ctx)
	if err != nil {
		return err
	}
	defer etcd.Close()
	cfg.Registry = reg
	putModels(ctx, reg, cfg.Models, log)

	var epochs atomic.Uint64
	cfg.OnEpoch = func(r lv.EpochResult) {
		epochs.Store(r.Epoch)
		logEpoch(log, r)
	}
	if metricsLn != nil {
		health := daemon.Health{Ready: func(context.Context) error {
			if epochs.Load() == 0 {
				return fmt.Errorf("no epoch carried out yet: waiting for every part's active scheduler (%d parts) and a backend", cfg.Epoch.Parts)
			}
			return nil
		}, Status: func() string { return fmt.Sprintf("epoch %d carried out", epochs.Load()) }}
		srv := daemon.Serve(metricsLn, daemon.AdminMux(health, runtimeMetrics()), log)
		defer srv.Close()
		fmt.Fprintf(stdout, "metrics on http://%s/metrics\n", metricsLn.Addr())
	}
	fmt.Fprintf(stdout, "controller: %d models over %d parts, an epoch every %v (engine %s); etcd at %s, prefix %s\n",
		len(cfg.Models), cfg.Epoch.Parts, cfg.Period, cfg.Epoch.Engine, strings.Join(splitList(ef.endpoints), ","), ef.prefix)
	if err := lv.RunController(ctx, cfg); err != nil {
		return err
	}
	log.Info().Uint64("epochs", epochs.Load()).Msg("controller stopped")
	return nil
}

// controllerFlags are the controller's flags, as parsed.
type controllerFlags struct {
	file, repo         string
	etcd               *etcdFlags
	parts              int
	period             time.Duration
	headroom           float64
	engine             string
	seed               uint64
	maxDisruption      int64
	rebalance, maxRate float64
	gpuMemory          int64
	loadTime           time.Duration
	rates              rateList
	defaultRate        float64
	switchTimeout      time.Duration
}

// controllerConfig checks the controller's flags, reads the serving
// configuration and builds the controller's configuration, all before
// anything connects: a mistake is a usage error naming the flag (or the
// model).
func controllerConfig(f controllerFlags) (lv.ControllerConfig, error) {
	var zero lv.ControllerConfig
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case !f.etcd.on():
		return zero, cli.UsageErr("--etcd ENDPOINTS is required: the controller decides through the registry in etcd")
	case f.parts < 1 || f.parts > registry.MaxParts:
		return zero, cli.UsageErr("--parts N is required: the number of parts, 1 to %d, each served by the schedulers started with --part 0 to N-1", registry.MaxParts)
	case f.file == "" && f.repo == "":
		return zero, cli.UsageErr("-f SERVING.yaml or --model-repo is required: the schedulers' serving configuration, whose models the controller places")
	case f.period <= 0:
		return zero, cli.UsageErr("--epoch %v must be positive", f.period)
	case f.switchTimeout <= 0:
		return zero, cli.UsageErr("--switch-timeout %v must be positive", f.switchTimeout)
	case f.headroom < 0 || !finite(f.headroom):
		return zero, cli.UsageErr("--headroom %v must be a non-negative number", f.headroom)
	case f.rebalance < 0 || !finite(f.rebalance):
		return zero, cli.UsageErr("--rebalance-above %v must be a non-negative number", f.rebalance)
	case f.maxRate < 0 || !finite(f.maxRate):
		return zero, cli.UsageErr("--max-rate-per-part %v must be a non-negative number", f.maxRate)
	case f.loadTime < 0:
		return zero, cli.UsageErr("--model-load-time %v must not be negative", f.loadTime)
	case f.defaultRate < 0 || !finite(f.defaultRate):
		return zero, cli.UsageErr("--default-rate %v must be a non-negative number of requests/s", f.defaultRate)
	case f.gpuMemory < 0:
		return zero, cli.UsageErr("--gpu-memory must not be negative")
	case !slices.Contains(partition.EngineNames(), f.engine):
		return zero, cli.UsageErr("--engine %q: want one of %s", f.engine, strings.Join(partition.EngineNames(), ", "))
	}
	if err := f.etcd.validate(); err != nil {
		return zero, err
	}
	sc, err := servingConfig(f.file, f.repo)
	if err != nil {
		return zero, err
	}
	declared := map[string]float64{}
	for _, r := range f.rates {
		declared[r.model] = r.rate
	}
	cfg := lv.ControllerConfig{Period: f.period, SwitchTimeout: f.switchTimeout}
	var missing []string
	for _, m := range sc.Models {
		rate, ok := declared[m.Name]
		switch {
		case ok:
			delete(declared, m.Name)
		case f.defaultRate > 0:
			rate = f.defaultRate
		default:
			missing = append(missing, m.Name)
		}
		cfg.Models = append(cfg.Models, epoch.Model{Model: m, DeclaredRate: rate})
	}
	if len(missing) > 0 {
		return zero, cli.UsageErr("no declared rate for model(s) %s of %s: give --rate MODEL=REQ/S for each, or --default-rate REQ/S for all those --rate does not name", strings.Join(missing, ", "), sc.Source)
	}
	if len(declared) > 0 {
		var unknown []string
		for name := range declared {
			unknown = append(unknown, name)
		}
		slices.Sort(unknown)
		return zero, cli.UsageErr("--rate names model(s) %s, not among the %d models of %s", strings.Join(unknown, ", "), len(sc.Models), sc.Source)
	}
	if f.parts > len(sc.Models) {
		return zero, cli.UsageErr("--parts %d: more parts than the %d models of %s", f.parts, len(sc.Models), sc.Source)
	}
	// The epoch mapping of a workload file, as the simulator builds it;
	// the parts are sized for the delays the live schedulers budget.
	cfg.Epoch = epoch.Config{
		Parts: f.parts, Headroom: f.headroom, MaxDisruption: f.maxDisruption, RebalanceAbove: f.rebalance,
		MaxRatePerPart: f.maxRate, GPUMemory: f.gpuMemory, Engine: f.engine, Seed: f.seed,
		ModelLoadTime: f.loadTime, Network: sc.LiveDelays(), Autoscale: epoch.DefaultAutoscale(f.headroom),
	}
	if _, err := epoch.New(cfg.Epoch); err != nil {
		return zero, cli.UsageErr("%v", err)
	}
	return cfg, nil
}

// scaleFlags are the controller's autoscaling flags: a Kubernetes
// workload of backends it resizes (partition/actuate).
type scaleFlags struct {
	statefulSet, deployment, namespace string
	warmPool, minBackends, maxBackends int
	gpusPerBackend                     int
	scaleInDelay                       time.Duration
}

// policy checks the flags and returns the autoscaling policy, nil when
// no --scale-* flag asks for one.
func (f *scaleFlags) policy(parts int) (*actuate.Policy, error) {
	switch {
	case f.statefulSet == "" && f.deployment == "":
		return nil, nil
	case f.statefulSet != "" && f.deployment != "":
		return nil, cli.UsageErr("--scale-statefulset and --scale-deployment exclude each other: the backends are one workload")
	case f.maxBackends < 1:
		return nil, cli.UsageErr("--max-backends N is required with --scale-*: the most backends the controller may run, its spending cap")
	}
	least := f.minBackends
	if least == 0 {
		least = parts // a backend per part at least
	}
	if least > f.maxBackends {
		return nil, cli.UsageErr("--max-backends %d is below the %d backends the parts need at least (--min-backends, or one per part with --parts %d)", f.maxBackends, least, parts)
	}
	p, err := actuate.NewPolicy(actuate.PolicyConfig{GPUsPerBackend: f.gpusPerBackend, WarmPool: f.warmPool,
		ScaleInDelay: f.scaleInDelay, Min: least, Max: f.maxBackends})
	if err != nil {
		return nil, cli.UsageErr("%v", err)
	}
	return p, nil
}

// autoscaler builds the Kubernetes actuator over the in-cluster
// credentials (the controller runs in a pod whose service account may get
// and update the workload's scale subresource) and the autoscaler over it.
func (f *scaleFlags) autoscaler(p *actuate.Policy, log zerolog.Logger) (*actuate.Autoscaler, error) {
	rc, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("--scale-*: Kubernetes credentials: %w (the controller must run in a pod to scale a workload)", err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("--scale-*: Kubernetes client: %w", err)
	}
	kc := actuate.KubernetesConfig{Apps: cs.AppsV1(), Namespace: f.namespace, Kind: actuate.StatefulSet, Name: f.statefulSet, Log: log}
	if f.deployment != "" {
		kc.Kind, kc.Name = actuate.Deployment, f.deployment
	}
	if kc.Namespace == "" {
		if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
			kc.Namespace = strings.TrimSpace(string(b))
		}
	}
	k, err := actuate.NewKubernetes(kc)
	if err != nil {
		return nil, err
	}
	return &actuate.Autoscaler{Policy: p, Actuator: k, Log: log}, nil
}

// putModels writes each model's record (its SLO and memory), so that
// `symphony cluster status` shows them; a failure only costs that.
func putModels(ctx context.Context, reg *registry.Registry, models []epoch.Model, log zerolog.Logger) {
	for _, m := range models {
		rec := registry.Model{Name: m.Name, SLO: m.SLO, StaticMemory: m.StaticMemory, DynamicMemory: m.DynamicMemory}
		if _, err := reg.PutModel(ctx, rec); err != nil {
			log.Warn().Err(err).Str("model", m.Name).Msg("model record not written: cluster status will not show its SLO and memory")
		}
	}
}

// logEpoch logs an epoch once it is carried out, on one line: what it
// measured, what it decided and how long carrying it out took.
func logEpoch(log zerolog.Logger, r lv.EpochResult) {
	rec := &r.Decision.Record
	switched := 0
	for _, m := range r.Moves {
		if m.Switched {
			switched++
		}
	}
	ev := log.Info()
	if switched < len(r.Moves) {
		ev = log.Warn()
	}
	ev.Uint64("epoch", r.Epoch).Dur("window", r.Window).Int("gpus_before", rec.GPUsBefore).Int("gpus", rec.GPUs).
		Ints("part_gpus", rec.PartGPUs).Float64("bad_rate", rec.BadRate).Float64("idle", rec.IdleFraction).
		Int("moves", len(r.Moves)).Int("switched", switched).Str("skipped", rec.Skipped).Dur("took", r.Took).
		Msg("epoch carried out")
}

// runtimeMetrics serves the Go runtime's and the process's metrics.
func runtimeMetrics() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// byteLimit is a flag of bytes: a plain count or a size with a unit
// (strictyaml.ParseSize: 170MiB, 1.5GiB); a negative count means no
// limit.
type byteLimit int64

func (b *byteLimit) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteLimit) Set(s string) error {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "-") {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("%q: a negative limit is a plain count, such as -1", s)
		}
		*b = byteLimit(n)
		return nil
	}
	n, err := strictyaml.ParseSize(s)
	if err != nil {
		return fmt.Errorf("%q %w", s, err)
	}
	*b = byteLimit(n)
	return nil
}

// declaredRate is one --rate.
type declaredRate struct {
	model string
	rate  float64
	text  string
}

// rateList is --rate MODEL=REQ/S, once per model (daemon.Repeated).
type rateList []declaredRate

func (l *rateList) String() string { return strings.Join(l.Values(), ",") }

func (l *rateList) Set(v string) error {
	name, num, ok := strings.Cut(v, "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return fmt.Errorf("%q: want MODEL=REQ/S", v)
	}
	rate, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(num), "/s"), 64)
	if err != nil || rate < 0 || math.IsNaN(rate) || math.IsInf(rate, 0) {
		return fmt.Errorf("%q: the rate must be a non-negative number of requests/s", v)
	}
	for _, r := range *l {
		if r.model == name {
			return fmt.Errorf("model %q's rate is given twice", name)
		}
	}
	*l = append(*l, declaredRate{model: name, rate: rate, text: v})
	return nil
}

// Values is each --rate as given.
func (l *rateList) Values() []string {
	out := make([]string, len(*l))
	for i, r := range *l {
		out[i] = r.text
	}
	return out
}

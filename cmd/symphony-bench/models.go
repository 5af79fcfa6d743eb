package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/symphony-serving/symphony/bench/modelgen"
	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/cmd/internal/cli"
	"github.com/symphony-serving/symphony/partition"
	"github.com/symphony-serving/symphony/partition/strictyaml"
	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/serving"
)

// defaultModelsDir is where `make models` writes the benchmark models: a
// git-ignored folder, since they are generated (bench/modelgen) and too
// large to commit.
const defaultModelsDir = ".cache/models"

// runModels is `symphony-bench models`: the benchmark models written into
// a model repository, or with `workload` a workload file for one of them.
func runModels(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "workload" {
		return runModelsWorkload(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("models", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", defaultModelsDir, "the model repository to write into")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.UsageErr("unexpected arguments %q", fs.Args())
	}
	wrote, err := modelgen.WriteBenchmark(*out)
	if err != nil {
		return err
	}
	if len(wrote) == 0 {
		fmt.Fprintf(stdout, "%s/%s is up to date\n", *out, modelgen.BenchmarkResNet)
	}
	for _, p := range wrote {
		fmt.Fprintf(stdout, "wrote %s\n", p)
	}
	return nil
}

// runModelsWorkload is `symphony-bench models workload`: a workload file
// that offers one profiled repository model a fraction of what its
// profile says N GPUs sustain, so that a live run (symphony bench) and the
// simulator (symphony sim) load the model as hard as the profile allows,
// on any machine, without a rate written by hand for the machine that
// profiled it.
func runModelsWorkload(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("models workload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	repo := fs.String("model-repo", defaultModelsDir, "the model repository")
	name := fs.String("model", modelgen.BenchmarkResNet, "the (profiled) model to load")
	gpus := fs.Int("gpus", 1, "the GPUs serving it: the cluster's size, and the capacity's")
	load := fs.Float64("load", 0.7, "the rate as a fraction of the profile's capacity on --gpus")
	duration := fs.Duration("duration", 30*time.Second, "the measured window")
	warmup := fs.Duration("warmup", 5*time.Second, "the load before the window")
	seed := fs.Uint64("seed", 1, "the arrivals' seed")
	out := fs.String("o", "", "write the workload to `FILE` (default: stdout)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.UsageErr("unexpected arguments %q", fs.Args())
	}
	if *gpus < 1 || !(*load > 0) || math.IsInf(*load, 0) || *duration <= 0 || *warmup < 0 {
		return cli.UsageErr("--gpus and --load must be positive, --duration positive and --warmup not negative")
	}
	rm, err := serving.ReadRepoModel(*repo, *name)
	if err != nil {
		return err
	}
	if !rm.Profiled() {
		return fmt.Errorf("%s has no profile: measure it first with symphony-bench profile --model-repo %s --model %s", rm.Config, *repo, *name)
	}
	settings := serving.DefaultSettings()
	capacity, err := profileCapacity(rm.Model, *gpus, settings.LiveDelays())
	if err != nil {
		return err
	}
	text := modelWorkload(*repo, rm, *gpus, *load, capacity, *duration, *warmup, *seed)
	// The file must parse as the simulator and the load generator will
	// read it; a failure here is this command's bug, not the user's.
	if _, err := workload.Parse(text, "generated workload"); err != nil {
		return fmt.Errorf("models workload: the workload written would not parse: %w", err)
	}
	if *out == "" {
		_, err = stdout.Write(text)
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(*out, text, 0o644)
}

// profileCapacity is the largest rate n GPUs serve m at within its SLO by
// the paper's Eqs. 2-3 (partition.SizeModel, with the live scheduler's
// delays): the largest λ whose sizing needs at most n GPUs. It is found by
// bisection on SizeModel itself, so that the capacity is the sizing rule's
// and not a second copy of it.
func profileCapacity(m serving.Model, n int, delays scheduler.Delays) (float64, error) {
	fits := func(rate float64) (bool, error) {
		s, err := partition.SizeModel(serving.Demand{Model: m, Rate: rate}, delays)
		return err == nil && s.GPUs <= n, err
	}
	if ok, err := fits(1e-9); err != nil || !ok {
		if err == nil {
			err = fmt.Errorf("model %q cannot be served on %d GPUs within its SLO", m.Name, n)
		}
		return 0, err
	}
	// An upper bound: n GPUs running batches of the largest size in ℓ(1)
	// each, since ℓ(b) ≥ ℓ(1).
	lo, hi := 0.0, float64(n*m.Profile.MaxBatch())/m.Profile.Latency(1).Seconds()
	for range 60 {
		mid := (lo + hi) / 2
		ok, err := fits(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// modelWorkload is the text of the workload file: the model's serving
// settings and profile exactly as the scheduler serving the repository
// has them (the profile as its table of ℓ(b), which round-trips), on
// gpus GPUs, at load × capacity requests per second, Poisson.
func modelWorkload(repo string, rm *serving.RepoModel, gpus int, load, capacity float64, duration, warmup time.Duration, seed uint64) []byte {
	lat := make([]string, rm.Profile.MaxBatch())
	for b := range lat {
		lat[b] = rm.Profile.Latency(b + 1).String()
	}
	var extra strings.Builder
	if rm.InputBytes > 0 {
		fmt.Fprintf(&extra, "    input_size: %s\n", strictyaml.FormatSize(rm.InputBytes))
	}
	if rm.StaticMemory > 0 || rm.DynamicMemory > 0 {
		fmt.Fprintf(&extra, "    memory: {static: %s, dynamic: %s}\n", strictyaml.FormatSize(rm.StaticMemory), strictyaml.FormatSize(rm.DynamicMemory))
	}
	return fmt.Appendf(nil, `# %[1]s of the model repository %[2]s at %[3]g%% of what its profile says
# %[4]d GPU(s) sustain within its SLO (%.1[5]f req/s by Eqs. 2-3 with the live
# scheduler's delays): written by symphony-bench models workload, for
# symphony bench against a cluster serving the repository, and symphony sim.
seed: %[6]d
duration: %[7]v
warmup: %[8]v
cluster:
  gpus: %[4]d
models:
  - name: %[1]s
    profile: {batch_latency: [%[9]s]}
    slo: %[10]v
%[11]s    rate: %.3[12]f
    arrival: poisson
policy: symphony
`, rm.Name, repo, 100*load, gpus, capacity, seed, duration, warmup,
		strings.Join(lat, ", "), rm.SLO, extra.String(), load*capacity)
}

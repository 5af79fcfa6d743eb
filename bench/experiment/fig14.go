package experiment

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/symphony-serving/symphony/bench/partexp"
	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/workload"
)

// dailyWorkload is the bundled §5.6 file, read from the repository: the
// experiment is the file's own run, so that `symphony sim -f` on it and
// this experiment cannot drift apart.
const dailyWorkload = "testdata/workloads/large-cluster-daily.yaml"

func fig14Experiment() *Experiment {
	return &Experiment{
		Name:  "fig14",
		Title: "a changing workload on a 512-GPU cluster with the epoch job (" + dailyWorkload + ")",
		Paper: "Symphony paper, Figure 14 (§5.6): 24 models on 512 GPUs under a day-shaped load; the GPUs in use follow the load and " +
			"the bad rate stays low.",
		Deterministic: true,
		run:           runFig14,
	}
}

func runFig14(r *Run) error {
	path := filepath.Join(r.dataDir(), dailyWorkload)
	w, err := workload.ParseFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w (run from the repository's root, or give --data-dir)", err)
	}
	if err != nil {
		return err
	}
	if r.Quick {
		// The first 20 minutes of the day: four epochs on the rising load.
		w.Duration = 20 * time.Minute
	}
	outs, err := r.simulate([]cell{{name: dailyWorkload, w: w}})
	if err != nil {
		return err
	}
	o := outs[0]
	if o.rep == nil {
		return o.err
	}
	rep := o.rep
	r.columns(num("minute", "%.0f"), num("offered_rps", "%.1f"), num("goodput_rps", "%.1f"), num("bad_rate", "%.4f"),
		num("gpus_in_use", "%.1f"), num("busy_gpus", "%.1f"))
	var offered, gpus []float64
	var peakGPUs float64
	for _, tp := range rep.TimeSeries {
		r.row(tp.Start/60, tp.OfferedRPS, tp.GoodputRPS, tp.BadRate, tp.GPUsInUse, tp.BusyGPUs)
		offered, gpus = append(offered, tp.OfferedRPS), append(gpus, tp.GPUsInUse)
		peakGPUs = math.Max(peakGPUs, tp.GPUsInUse)
	}
	r.claim("the bad rate over the run stays within 1%", rep.BadRate <= 0.01, "%.2f%% of %d requests", 100*rep.BadRate, rep.Offered)
	c := correlation(offered, gpus)
	r.claim("the GPUs in use follow the load (correlation >= 0.9 over the run's minutes)", c >= 0.9, "correlation %.3f", c)
	r.claim(fmt.Sprintf("the cluster stays within its %d GPUs", rep.GPUs), peakGPUs <= float64(rep.GPUs), "at most %.1f in use", peakGPUs)
	r.note("%d epochs; goodput %.1f req/s over the window.", len(rep.Epochs), rep.GoodputRPS)
	if r.OutDir == "" {
		return nil
	}
	return r.plotted(report.WritePlots(r.OutDir, rep))
}

// dataDir is where the bundled files are: the working directory unless
// Options.DataDir says otherwise.
func (r *Run) dataDir() string {
	if r.DataDir != "" {
		return r.DataDir
	}
	return "."
}

// correlation is Pearson's correlation of xs and ys (NaN when either is
// constant).
func correlation(xs, ys []float64) float64 {
	mx, my := mean(xs), mean(ys)
	var sxy, sxx, syy float64
	for i := range xs {
		dx, dy := xs[i]-mx, ys[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	return sxy / math.Sqrt(sxx*syy)
}

func fig15Experiment() *Experiment {
	return &Experiment{
		Name:  "fig15",
		Title: "partitioning 800 models into 20 parts: imbalance factors by engine (Appendix A.2)",
		Paper: "Symphony paper, Figure 15 (Appendix A.2): the MILP's partitions, within a 10 s limit, are far better balanced in rate " +
			"and memory than the best of random partitions found in the same time.",
		// The random search and the MILP stop on a time limit, so their
		// figures depend on the machine.
		Deterministic: false,
		run:           runFig15,
	}
}

func runFig15(r *Run) error {
	cfg := partexp.DefaultConfig()
	if r.Quick {
		cfg.Instances, cfg.TimeLimit = 3, time.Second
		cfg.Engines = []string{"heuristic", "random"}
	}
	cfg.Progress = func(t partexp.Trial, done, total int) {
		if r.Progress != nil {
			r.Progress(done, total, fmt.Sprintf("instance %d, %s", t.Instance, t.Requested))
		}
	}
	rep, err := partexp.Run(r.ctx, cfg)
	if err != nil {
		return err
	}
	r.columns(col("engine"), num("runs", "%.0f"), num("balanced", "%.0f"), num("rate_imbalance_median", "%.5f"), num("rate_imbalance_max", "%.5f"),
		num("memory_imbalance_median", "%.5f"), num("memory_imbalance_max", "%.5f"), num("seconds_median", "%.3f"))
	by := map[string]partexp.Summary{}
	for _, s := range rep.Summaries {
		by[s.Engine] = s
		r.row(s.Engine, float64(s.Runs), float64(s.Balanced), s.RateImbalance.Median, s.RateImbalance.Max,
			s.MemoryImbalance.Median, s.MemoryImbalance.Max, s.SolveSeconds.Median)
	}
	best := "heuristic"
	if _, ok := by["milp"]; ok {
		best = "milp"
	}
	if rs, ok := by["random"]; ok {
		b := by[best]
		r.claim(fmt.Sprintf("the %s's partitions are far better balanced than random search's (10x lower median imbalance)", best),
			b.RateImbalance.Median*10 <= rs.RateImbalance.Median && b.MemoryImbalance.Median*10 <= rs.MemoryImbalance.Median,
			"rate %.5f against %.3f, memory %.5f against %.3f", b.RateImbalance.Median, rs.RateImbalance.Median, b.MemoryImbalance.Median, rs.MemoryImbalance.Median)
	}
	if r.OutDir == "" {
		return nil
	}
	if err := os.MkdirAll(r.OutDir, 0o755); err != nil {
		return err
	}
	return r.plotted(partexp.WritePlot(r.OutDir, rep))
}

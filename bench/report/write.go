package report

import (
	"cmp"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"text/tabwriter"
)

// maxTableModels bounds the per-model table of WriteTable. A zoo run can have
// hundreds of models, and a human table that scrolls off the screen hides the
// totals it is meant to show.
const maxTableModels = 40

// WriteJSON writes r as one indented JSON object: the `--json` output that
// users and CI script against (docs/workload-format.md, "Report").
//
// The output is deterministic: the same report gives the same bytes, so runs
// can be diffed and golden-tested. encoding/json sorts map keys and formats
// floats in their shortest round-tripping form. Non-finite floats (NaN from a
// 0/0 rate, ±Inf) cannot be encoded as JSON, so they are written as 0, and so
// is -0. Nil slices and maps are written as [] and {} rather than null, so a
// script can iterate "models" or "batch_size_hist" without a null check. r is
// not modified.
func WriteJSON(w io.Writer, r *Report) error {
	if r == nil {
		return fmt.Errorf("report: WriteJSON: nil report")
	}
	c := sanitizeReport(r)
	if err := EncodeJSON(w, &c); err != nil {
		return fmt.Errorf("report: WriteJSON: %w", err)
	}
	return nil
}

// csvHeader is the header row of WriteCSV, in column order.
var csvHeader = []string{
	"model", "offered", "good", "late", "dropped", "failed",
	"offered_rps", "goodput_rps", "bad_rate",
	"latency_p50", "latency_p99", "latency_p999",
	"queueing_p50", "queueing_p99",
	"mean_batch_size", "gpu_busy_fraction", "gpu_idle_fraction",
	"profile_batches", "profile_ratio_p50", "profile_ratio_p99",
}

// WriteCSV writes the `--csv` output: a header, one row per model in report
// order, then a row named "total" with the whole run's Stats. It is meant for
// spreadsheets and scripts that compare models across runs. Latencies are in
// milliseconds, rates in requests per second and fractions in [0, 1], as in
// the JSON; non-finite values are written as 0.
func WriteCSV(w io.Writer, r *Report) error {
	if r == nil {
		return fmt.Errorf("report: WriteCSV: nil report")
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return fmt.Errorf("report: WriteCSV: %w", err)
	}
	for i := range r.Models {
		m := &r.Models[i]
		if err := cw.Write(csvRow(m.Name, &m.Stats)); err != nil {
			return fmt.Errorf("report: WriteCSV: %w", err)
		}
	}
	if err := cw.Write(csvRow("total", &r.Stats)); err != nil {
		return fmt.Errorf("report: WriteCSV: %w", err)
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("report: WriteCSV: %w", err)
	}
	return nil
}

func csvRow(name string, s *Stats) []string {
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	return []string{
		name, u(s.Offered), u(s.Good), u(s.Late), u(s.Dropped), u(s.Failed),
		fmtFloat(s.OfferedRPS), fmtFloat(s.GoodputRPS), fmtFloat(s.BadRate),
		fmtFloat(s.LatencyP50), fmtFloat(s.LatencyP99), fmtFloat(s.LatencyP999),
		fmtFloat(s.QueueingP50), fmtFloat(s.QueueingP99),
		fmtFloat(s.MeanBatchSize), fmtFloat(s.GPUBusyFraction), fmtFloat(s.GPUIdleFraction),
		u(s.ProfileBatches), fmtFloat(s.ProfileRatioP50), fmtFloat(s.ProfileRatioP99),
	}
}

// fmtFloat formats f for machine-readable output: the shortest decimal that
// round-trips, never in exponent form, with non-finite values as 0.
func fmtFloat(f float64) string {
	return strconv.FormatFloat(finite(f), 'f', -1, 64)
}

// WriteTable writes the short human summary printed by every run that is not
// `--json`: a header line naming the run, the totals and the autoscaler's
// advice, a per-model table, and the goodput search when there was one.
//
// Only the maxTableModels (40) models with the highest offered rate are
// listed, busiest first, with a line saying how many are hidden; the JSON and
// CSV outputs always hold every model.
func WriteTable(w io.Writer, r *Report) error {
	if r == nil {
		return fmt.Errorf("report: WriteTable: nil report")
	}
	ew := &errWriter{w: w}
	s := &r.Stats
	ew.printf("workload %s  policy %s  GPUs %d  duration %ss  seed %d\n",
		orDash(r.Workload), orDash(r.Policy), r.GPUs, fmtNum(r.DurationSeconds, 1), r.Seed)
	if r.CostPerHour > 0 {
		ew.printf("cost     %s per hour (the cluster's GPUs at their prices)\n", fmtNum(r.CostPerHour, 4))
	}
	ew.printf("offered  %s req/s   goodput %s req/s   bad %s%%\n",
		fmtNum(s.OfferedRPS, 1), fmtNum(s.GoodputRPS, 1), fmtNum(100*s.BadRate, 2))
	ew.printf("requests %d offered, %d good, %d late, %d dropped, %d failed\n",
		s.Offered, s.Good, s.Late, s.Dropped, s.Failed)
	ew.printf("latency  p50 %s ms   p99 %s ms   p999 %s ms\n",
		fmtNum(s.LatencyP50, 2), fmtNum(s.LatencyP99, 2), fmtNum(s.LatencyP999, 2))
	ew.printf("queueing p50 %s ms   p99 %s ms\n", fmtNum(s.QueueingP50, 2), fmtNum(s.QueueingP99, 2))
	ew.printf("batch    mean %s   GPU busy %s%%   idle %s%%\n",
		fmtNum(s.MeanBatchSize, 2), fmtNum(100*s.GPUBusyFraction, 1), fmtNum(100*s.GPUIdleFraction, 1))
	if s.ProfileBatches > 0 {
		ew.printf("profile  real batch time / ℓ(b): p50 %s   p99 %s   (%d batches)\n",
			fmtNum(s.ProfileRatioP50, 3), fmtNum(s.ProfileRatioP99, 3), s.ProfileBatches)
	}
	ew.printf("autoscale %s\n", adviceString(r.Autoscale))
	if b := r.Backends; b != nil {
		ew.printf("backends batches started behind plan: p50 <= %s ms, p99 <= %s ms, p99.9 <= %s ms (%d batches); %d requests dropped as too late to run\n",
			fmtNum(b.StartLagP50ms, 3), fmtNum(b.StartLagP99ms, 3), fmtNum(b.StartLagP999ms, 3), b.Batches, b.DroppedLate)
	}

	if len(r.Models) > 0 {
		models := tableModels(r.Models)
		ew.printf("\n")
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
		// With AlignRight every cell, the last included, must end in a tab.
		nw := len("model")
		for _, m := range models {
			nw = max(nw, len(m.Name))
		}
		fmt.Fprintf(tw, "%-*s\tslo ms\toffered rps\tgoodput rps\tbad %%\tp99 ms\tmean batch\t\n", nw, "model")
		for _, m := range models {
			fmt.Fprintf(tw, "%-*s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", nw, m.Name,
				fmtNum(m.SLOms, 1), fmtNum(m.OfferedRPS, 1), fmtNum(m.GoodputRPS, 1),
				fmtNum(100*m.BadRate, 2), fmtNum(m.LatencyP99, 2), fmtNum(m.MeanBatchSize, 2))
		}
		if err := tw.Flush(); err != nil && ew.err == nil {
			ew.err = err
		}
		if hidden := len(r.Models) - len(models); hidden > 0 {
			ew.printf("(%d more models with lower offered rates not shown)\n", hidden)
		}
		writeProfileFit(ew, models)
		writePriorities(ew, s, models)
	}

	if g := r.GoodputSearch; g != nil {
		writeGoodputSearch(ew, g)
	}
	if f := r.Faults; f != nil {
		writeFaults(ew, f)
	}
	if ew.err != nil {
		return fmt.Errorf("report: WriteTable: %w", ew.err)
	}
	return nil
}

// writeProfileFit writes each model's profile adherence, when the run
// measured it: how the real batch times compared with the scheduler's ℓ(b).
func writeProfileFit(ew *errWriter, models []*ModelReport) {
	var fit []*ModelReport
	for _, m := range models {
		if m.ProfileBatches > 0 {
			fit = append(fit, m)
		}
	}
	if len(fit) == 0 {
		return
	}
	ew.printf("\nprofile adherence (each batch's real run time over the profile's ℓ(b) for its size)\n")
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	nw := len("model")
	for _, m := range fit {
		nw = max(nw, len(m.Name))
	}
	fmt.Fprintf(tw, "%-*s\tbatches\tp50\tp99\t\n", nw, "model")
	for _, m := range fit {
		fmt.Fprintf(tw, "%-*s\t%d\t%s\t%s\t\n", nw, m.Name, m.ProfileBatches, fmtNum(m.ProfileRatioP50, 3), fmtNum(m.ProfileRatioP99, 3))
	}
	if err := tw.Flush(); err != nil && ew.err == nil {
		ew.err = err
	}
}

// writePriorities writes the outcomes by priority level, when the
// workload gives levels: the run's, then each model's.
func writePriorities(ew *errWriter, total *Stats, models []*ModelReport) {
	if len(total.Priorities) == 0 {
		return
	}
	ew.printf("\nby priority level (a higher level is planned first and dropped last)\n")
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	nw := len("(all models)")
	for _, m := range models {
		nw = max(nw, len(m.Name))
	}
	fmt.Fprintf(tw, "%-*s\tlevel\toffered\tgood\tbad %%\t\n", nw, "model")
	row := func(name string, ps []PriorityStats) {
		for _, p := range ps {
			fmt.Fprintf(tw, "%-*s\t%d\t%d\t%d\t%s\t\n", nw, name, p.Level, p.Offered, p.Good, fmtNum(100*p.BadRate, 2))
		}
	}
	row("(all models)", total.Priorities)
	for _, m := range models {
		row(m.Name, m.Priorities)
	}
	if err := tw.Flush(); err != nil && ew.err == nil {
		ew.err = err
	}
}

// writeFaults writes the fault report: each phase's goodput, bad rate and
// leading reasons, then each fault's recovery.
func writeFaults(ew *errWriter, f *FaultReport) {
	ew.printf("\nfault phases (requests by arrival)\n")
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "from s\tto s\tgoodput rps\tbad %\tbad by reason\tphase\n")
	for _, p := range f.Phases {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", fmtNum(p.FromSeconds, 2), fmtNum(p.ToSeconds, 2),
			fmtNum(p.GoodputRPS, 1), fmtNum(100*p.BadRate, 2), orDash(reasonsText(p.Reasons, 3)), p.Label)
	}
	if err := tw.Flush(); err != nil && ew.err == nil {
		ew.err = err
	}
	ew.printf("recovery (until a second of requests, by arrival, is back to <= %s%% bad)\n", fmtNum(100*f.RecoveryThreshold, 2))
	for _, e := range f.Faults {
		if e.Recovered {
			ew.printf("  %s: %ss after %ss\n", e.Description, fmtNum(e.RecoverySeconds, 1), fmtNum(e.EndSeconds, 2))
		} else {
			ew.printf("  %s: not recovered in the %ss after %ss\n", e.Description, fmtNum(e.RecoverySeconds, 1), fmtNum(e.EndSeconds, 2))
		}
	}
}

// reasonsText lists the n commonest reasons with their counts, commonest
// first: "expired 120, backend stalled 80".
func reasonsText(reasons map[string]uint64, n int) string {
	keys := make([]string, 0, len(reasons))
	for k := range reasons {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if c := cmp.Compare(reasons[b], reasons[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	var s string
	for i, k := range keys {
		if i == n {
			s += ", ..."
			break
		}
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s %d", k, reasons[k])
	}
	return s
}

// tableModels returns the models WriteTable lists: all of them in report
// order, or, when there are more than maxTableModels, the busiest ones by
// offered rate, busiest first, ties broken by name so the choice is
// deterministic.
func tableModels(ms []ModelReport) []*ModelReport {
	out := make([]*ModelReport, len(ms))
	for i := range ms {
		out[i] = &ms[i]
	}
	if len(out) <= maxTableModels {
		return out
	}
	slices.SortStableFunc(out, func(a, b *ModelReport) int {
		if c := cmp.Compare(finite(b.OfferedRPS), finite(a.OfferedRPS)); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return out[:maxTableModels]
}

func adviceString(a Advice) string {
	action := a.Action
	if action == "" {
		action = "hold"
	}
	s := action
	if a.GPUs != 0 {
		// The action says the direction, whatever the sign convention of GPUs.
		n := max(a.GPUs, -a.GPUs)
		unit := "GPUs"
		if n == 1 {
			unit = "GPU"
		}
		s = fmt.Sprintf("%s %d %s", action, n, unit)
	}
	if a.Reason != "" {
		s += ": " + a.Reason
	}
	return s
}

// comparisonHeader is the header of WriteComparisonCSV, in column order.
var comparisonHeader = []string{
	"policy", "goodput_rps", "goodput_ratio", "mean_batch_size",
	"latency_p99", "bad_rate", "gpu_idle_fraction",
}

// comparisonGoodput is the goodput a comparison ranks a run by: the searched
// goodput when the run searched for it (the paper's metric), else the
// measured goodput at the offered load.
func comparisonGoodput(r *Report) float64 {
	if r.GoodputSearch != nil {
		return finite(r.GoodputSearch.GoodputRPS)
	}
	return finite(r.GoodputRPS)
}

// WriteComparison writes a side-by-side human table of several runs of the
// same workload under different policies, the shape of the paper's policy
// comparisons: policy, goodput, its ratio to the first row (the baseline),
// mean batch size, p99 latency, bad rate and GPU idle fraction. Goodput is
// GoodputSearch.GoodputRPS when the run searched for goodput (the paper's
// metric) and the measured GoodputRPS otherwise. The ratio is "-" when the
// baseline's goodput is 0.
func WriteComparison(w io.Writer, rows []Report) error {
	ew := &errWriter{w: w}
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	pw := len("policy")
	for i := range rows {
		pw = max(pw, len(orDash(rows[i].Policy)))
	}
	fmt.Fprintf(tw, "%-*s\tgoodput rps\tvs first\tmean batch\tp99 ms\tbad %%\tGPU idle %%\t\n", pw, "policy")
	for i := range rows {
		r := &rows[i]
		ratio := "-"
		if v, ok := goodputRatio(rows, i); ok {
			ratio = fmtNum(v, 3) + "x"
		}
		fmt.Fprintf(tw, "%-*s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", pw, orDash(r.Policy),
			fmtNum(comparisonGoodput(r), 1), ratio, fmtNum(r.MeanBatchSize, 2),
			fmtNum(r.LatencyP99, 2), fmtNum(100*r.BadRate, 2), fmtNum(100*r.GPUIdleFraction, 1))
	}
	if err := tw.Flush(); err != nil && ew.err == nil {
		ew.err = err
	}
	if ew.err != nil {
		return fmt.Errorf("report: WriteComparison: %w", ew.err)
	}
	return nil
}

// WriteComparisonCSV writes the same comparison as WriteComparison as CSV,
// one row per run, for scripts and spreadsheets. Latency is in milliseconds
// and fractions in [0, 1]; goodput_ratio is empty when the first row's
// goodput is 0.
func WriteComparisonCSV(w io.Writer, rows []Report) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(comparisonHeader); err != nil {
		return fmt.Errorf("report: WriteComparisonCSV: %w", err)
	}
	for i := range rows {
		r := &rows[i]
		ratio := ""
		if v, ok := goodputRatio(rows, i); ok {
			ratio = fmtFloat(v)
		}
		rec := []string{r.Policy, fmtFloat(comparisonGoodput(r)), ratio,
			fmtFloat(r.MeanBatchSize), fmtFloat(r.LatencyP99),
			fmtFloat(r.BadRate), fmtFloat(r.GPUIdleFraction)}
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("report: WriteComparisonCSV: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("report: WriteComparisonCSV: %w", err)
	}
	return nil
}

// goodputRatio is row i's goodput over the first row's, or false when the
// first row's goodput is 0 and the ratio is undefined.
func goodputRatio(rows []Report, i int) (float64, bool) {
	base := comparisonGoodput(&rows[0])
	if base <= 0 {
		return 0, false
	}
	return comparisonGoodput(&rows[i]) / base, true
}

// finite maps NaN and ±Inf to 0, and -0 to 0, so that every output format
// can hold the value and prints it the same way.
func finite(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) || f == 0 {
		return 0
	}
	return f
}

// writeGoodputSearch writes a search's steps. The sparse column, the
// models offered too few requests to be judged alone, appears only when a
// step had such models.
func writeGoodputSearch(ew *errWriter, g *GoodputSearch) {
	ew.printf("\ngoodput search (target bad rate <= %s%% for every model)\n", fmtNum(100*g.TargetBadRate, 2))
	sparse := false
	for _, st := range g.Steps {
		sparse = sparse || st.Sparse != nil
	}
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "multiplier\toffered rps\tgoodput rps\tworst bad %\tworst model\t")
	if sparse {
		fmt.Fprint(tw, "sparse bad/offered (models)\t")
	}
	fmt.Fprint(tw, "ok\t\n")
	for _, st := range g.Steps {
		ok := "no"
		if st.OK {
			ok = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t", fmtNum(st.Multiplier, 4),
			fmtNum(st.OfferedRPS, 1), fmtNum(st.GoodputRPS, 1),
			fmtNum(100*st.WorstBadRate, 2), orDash(st.WorstModel))
		if sparse {
			col := "-"
			if sp := st.Sparse; sp != nil {
				col = fmt.Sprintf("%d/%d (%d)", sp.Bad, sp.Offered, sp.Models)
			}
			fmt.Fprintf(tw, "%s\t", col)
		}
		fmt.Fprintf(tw, "%s\t\n", ok)
	}
	if err := tw.Flush(); err != nil && ew.err == nil {
		ew.err = err
	}
	if sparse {
		least := SearchOptions{TargetBadRate: g.TargetBadRate}.MeasurableRequests()
		ew.printf("sparse: the models offered under %d requests in a run, judged together: their bad requests within %s%% of their requests, or of %d\n",
			least, fmtNum(100*g.TargetBadRate, 2), least)
	}
	ew.printf("goodput %s req/s at multiplier %s\n", fmtNum(g.GoodputRPS, 1), fmtNum(g.Multiplier, 4))
}

// fmtNum formats f for humans with prec decimals, non-finite values as 0.
func fmtNum(f float64, prec int) string {
	return strconv.FormatFloat(finite(f), 'f', prec, 64)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// errWriter remembers the first write error so a long sequence of prints can
// be checked once.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, args ...any) {
	fmt.Fprintf(e, format, args...)
}

// sanitizeReport returns a copy of r fit for JSON: every float finite, every
// slice and map non-nil. Slices and maps holding floats are copied, so r is
// left as it was. A new float field in Report, Stats, ModelReport,
// GoodputSearch, SearchStep or TimePoint must be added here; the test
// TestWriteJSONNonFinite sets every float field to NaN by reflection and
// fails if one is missed.
func sanitizeReport(r *Report) Report {
	c := *r
	c.DurationSeconds = finite(c.DurationSeconds)
	c.CostPerHour = finite(c.CostPerHour)
	c.Stats = sanitizeStats(c.Stats)
	c.GPUBusy = finiteAll(r.GPUBusy)
	c.Models = make([]ModelReport, len(r.Models))
	for i, m := range r.Models {
		m.SLOms = finite(m.SLOms)
		m.Stats = sanitizeStats(m.Stats)
		c.Models[i] = m
	}
	if r.GoodputSearch != nil {
		g := *r.GoodputSearch
		g.TargetBadRate = finite(g.TargetBadRate)
		g.Multiplier = finite(g.Multiplier)
		g.GoodputRPS = finite(g.GoodputRPS)
		g.Steps = make([]SearchStep, len(r.GoodputSearch.Steps))
		for i, s := range r.GoodputSearch.Steps {
			s.Multiplier = finite(s.Multiplier)
			s.OfferedRPS = finite(s.OfferedRPS)
			s.GoodputRPS = finite(s.GoodputRPS)
			s.WorstBadRate = finite(s.WorstBadRate)
			g.Steps[i] = s
		}
		c.GoodputSearch = &g
	}
	if r.TimeSeries != nil {
		c.TimeSeries = make([]TimePoint, len(r.TimeSeries))
		for i, p := range r.TimeSeries {
			p.Start = finite(p.Start)
			p.OfferedRPS = finite(p.OfferedRPS)
			p.GoodputRPS = finite(p.GoodputRPS)
			p.BadRate = finite(p.BadRate)
			p.BusyGPUs = finite(p.BusyGPUs)
			p.GPUsInUse = finite(p.GPUsInUse)
			p.ModelGoodputRPS = finiteAll(p.ModelGoodputRPS)
			p.ModelBadRPS = finiteAll(p.ModelBadRPS)
			c.TimeSeries[i] = p
		}
	}
	if r.Epochs != nil {
		c.Epochs = make([]EpochRecord, len(r.Epochs))
		for i, e := range r.Epochs {
			e.Start = finite(e.Start)
			e.BadRate = finite(e.BadRate)
			e.IdleFraction = finite(e.IdleFraction)
			e.Need = finite(e.Need)
			e.RateImbalance = finite(e.RateImbalance)
			e.MemoryImbalance = finite(e.MemoryImbalance)
			c.Epochs[i] = e
		}
	}
	return c
}

// finiteAll returns a copy of fs with non-finite values as 0 (never nil,
// so a field without omitempty still reads [] rather than null).
func finiteAll(fs []float64) []float64 {
	out := make([]float64, len(fs))
	for i, f := range fs {
		out[i] = finite(f)
	}
	return out
}

func sanitizeStats(s Stats) Stats {
	s.OfferedRPS = finite(s.OfferedRPS)
	s.GoodputRPS = finite(s.GoodputRPS)
	s.BadRate = finite(s.BadRate)
	s.LatencyP50 = finite(s.LatencyP50)
	s.LatencyP99 = finite(s.LatencyP99)
	s.LatencyP999 = finite(s.LatencyP999)
	s.QueueingP50 = finite(s.QueueingP50)
	s.QueueingP99 = finite(s.QueueingP99)
	s.MeanBatchSize = finite(s.MeanBatchSize)
	s.GPUBusyFraction = finite(s.GPUBusyFraction)
	s.GPUIdleFraction = finite(s.GPUIdleFraction)
	s.ProfileRatioP50 = finite(s.ProfileRatioP50)
	s.ProfileRatioP99 = finite(s.ProfileRatioP99)
	if s.BatchSizeHist == nil {
		s.BatchSizeHist = map[int]uint64{}
	}
	return s
}

package lookahead

import (
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/workload"
)

// Scheduler names who decides in a replay.
type Scheduler string

const (
	SchedulerRules       Scheduler = "rules"
	SchedulerClairvoyant Scheduler = "clairvoyant"
)

// StudyConfig says what a study runs.
type StudyConfig struct {
	// Multipliers, when set, are the load multipliers to replay under both
	// schedulers; otherwise each scheduler's goodput is searched for, as
	// `symphony sim --find-goodput` does.
	Multipliers []float64
	// TargetBadRate is the goodput's bad-rate limit; 0 means 1%.
	TargetBadRate float64
	// Precision is the search's relative width; 0 means 0.5%.
	Precision float64
	Options   Options
	// Step, when set, is called after each replay.
	Step func(Step)
}

// Step is one replay of a study.
type Step struct {
	Scheduler  Scheduler `json:"scheduler"`
	Multiplier float64   `json:"multiplier"`
	OfferedRPS float64   `json:"offered_rps"`
	GoodputRPS float64   `json:"goodput_rps"`
	BadRate    float64   `json:"bad_rate"`
	MeanBatch  float64   `json:"mean_batch_size"`
	Decisions  int       `json:"decisions"`
	Overrides  Overrides `json:"overrides"`
	OK         bool      `json:"ok"`
}

// Goodput is a scheduler's goodput found by a study's search.
type Goodput struct {
	Multiplier float64 `json:"multiplier"`
	GoodputRPS float64 `json:"goodput_rps"`
}

// Report is a study of one single-model workload.
type Report struct {
	Model         string  `json:"model"`
	GPUs          int     `json:"gpus"`
	SLOms         float64 `json:"slo_ms"`
	HorizonMs     float64 `json:"horizon_ms"`
	TargetBadRate float64 `json:"target_bad_rate"`
	Steps         []Step  `json:"steps"`
	// Goodput holds each scheduler's goodput when the study searched.
	Goodput map[Scheduler]Goodput `json:"goodput,omitempty"`
}

// Study replays w under the rules and the clairvoyant scheduler, at the
// configured multipliers or searching for each one's goodput.
func Study(w *workload.Workload, cfg StudyConfig) (*Report, error) {
	search := report.SearchOptions{TargetBadRate: cfg.TargetBadRate, Precision: cfg.Precision}
	cfg.TargetBadRate = search.Target()
	cfg.Options = cfg.Options.withDefaults()
	base, err := FromWorkload(w)
	if err != nil {
		return nil, err
	}
	rep := &Report{
		Model:         base.Model,
		GPUs:          base.Setting.GPUs,
		SLOms:         float64(base.Setting.SLO.Microseconds()) / 1000,
		HorizonMs:     float64(cfg.Options.Horizon.Microseconds()) / 1000,
		TargetBadRate: cfg.TargetBadRate,
	}
	replay := func(who Scheduler, k float64) (Step, error) {
		r, err := FromWorkload(w.Scaled(k))
		if err != nil {
			return Step{}, err
		}
		var res Result
		if who == SchedulerRules {
			res, err = r.Rules()
		} else {
			res, err = r.Clairvoyant(cfg.Options)
		}
		if err != nil {
			return Step{}, fmt.Errorf("%s at %.4gx: %w", who, k, err)
		}
		// A replay's requests end served within their SLO or dropped,
		// counted as the simulator and the live cluster count theirs.
		c := report.Counts{Offered: uint64(res.Requests), Good: uint64(res.Served), Dropped: uint64(res.Requests - res.Served)}
		stats := c.Stats(r.To.Sub(r.From).Seconds())
		st := Step{
			Scheduler: who, Multiplier: k,
			OfferedRPS: stats.OfferedRPS, GoodputRPS: stats.GoodputRPS,
			BadRate: stats.BadRate, MeanBatch: res.MeanBatch(),
			Decisions: res.Decisions, Overrides: res.Overrides,
			OK: search.Passes(stats.BadRate),
		}
		rep.Steps = append(rep.Steps, st)
		if cfg.Step != nil {
			cfg.Step(st)
		}
		return st, nil
	}
	for _, who := range []Scheduler{SchedulerRules, SchedulerClairvoyant} {
		if len(cfg.Multipliers) > 0 {
			for _, k := range cfg.Multipliers {
				if _, err := replay(who, k); err != nil {
					return nil, err
				}
			}
			continue
		}
		var best Goodput
		// The search of `symphony sim --find-goodput`, on one model: its
		// bad rate is the worst model's.
		b, err := report.SearchMultiplier(func(k float64) (bool, error) {
			st, err := replay(who, k)
			if st.OK && k > best.Multiplier {
				best = Goodput{Multiplier: k, GoodputRPS: st.GoodputRPS}
			}
			return st.OK, err
		}, search.Precision, 0)
		if err != nil {
			return nil, err
		}
		if !b.Found() {
			return nil, fmt.Errorf("lookahead: %s bad rate above %g%% even at %.3gx the load", who, 100*cfg.TargetBadRate, b.Hi)
		}
		if rep.Goodput == nil {
			rep.Goodput = map[Scheduler]Goodput{}
		}
		rep.Goodput[who] = best
	}
	return rep, nil
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	return report.EncodeJSON(w, r)
}

// WriteText writes the report as a table for people.
func (r *Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "lookahead: %s on %d GPUs, SLO %.1fms; clairvoyant trials look %.0fms ahead\n\n", r.Model, r.GPUs, r.SLOms, r.HorizonMs)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scheduler\tmultiplier\toffered rps\tgoodput rps\tbad %\tmean batch\toverrides\tstart early\twait\tsmaller\tother heads\t")
	for _, s := range r.Steps {
		o := s.Overrides
		fmt.Fprintf(tw, "%s\t%.4f\t%.1f\t%.1f\t%.2f\t%.2f\t%d\t%d\t%d\t%d\t%d\t\n", s.Scheduler, s.Multiplier, s.OfferedRPS, s.GoodputRPS, 100*s.BadRate, s.MeanBatch, o.Total(), o.StartEarly, o.Wait, o.SmallerBatch, o.OtherHeads)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Goodput != nil {
		rules, clair := r.Goodput[SchedulerRules], r.Goodput[SchedulerClairvoyant]
		fmt.Fprintf(w, "\ngoodput (bad rate <= %.2f%%): rules %.1f req/s, clairvoyant %.1f req/s (%.3fx)\n",
			100*r.TargetBadRate, rules.GoodputRPS, clair.GoodputRPS, clair.GoodputRPS/rules.GoodputRPS)
	}
	_, err := fmt.Fprintln(w)
	return err
}

// WriteCSV writes one row per replay.
func (r *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"scheduler", "multiplier", "offered_rps", "goodput_rps", "bad_rate", "mean_batch_size",
		"decisions", "start_early", "wait", "smaller_batch", "other_heads"})
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 8, 64) }
	for _, s := range r.Steps {
		o := s.Overrides
		_ = cw.Write([]string{string(s.Scheduler), f(s.Multiplier), f(s.OfferedRPS), f(s.GoodputRPS), f(s.BadRate), f(s.MeanBatch),
			strconv.Itoa(s.Decisions), strconv.Itoa(o.StartEarly), strconv.Itoa(o.Wait), strconv.Itoa(o.SmallerBatch), strconv.Itoa(o.OtherHeads)})
	}
	cw.Flush()
	return cw.Error()
}

// BadRateCurves returns, per scheduler, its replays' (offered req/s, bad
// rate %) points in order of offered load, for a chart.
func (r *Report) BadRateCurves() map[string][][2]float64 {
	curves := map[string][][2]float64{}
	for _, s := range r.Steps {
		curves[string(s.Scheduler)] = append(curves[string(s.Scheduler)], [2]float64{s.OfferedRPS, 100 * s.BadRate})
	}
	for _, pts := range curves {
		slices.SortFunc(pts, func(a, b [2]float64) int {
			switch {
			case a[0] < b[0]:
				return -1
			case a[0] > b[0]:
				return 1
			}
			return 0
		})
	}
	return curves
}

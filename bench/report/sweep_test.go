package report

import (
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testComparison is a sweep stopped in its 2x point: the live curve has
// 0.5x, 1x and a partial 2x; the simulator's all four points.
func testComparison() *SweepComparison {
	s := &SweepComparison{Workload: "demo.yaml", Seed: 42, GPUs: 8, WarmupSeconds: 2, DurationSeconds: 10, Scale: 1,
		Notes: []string{"a note"}, Stopped: "sweep at 2: context canceled"}
	s.Live = Curve{Policy: "symphony (live)", PeakGoodputRPS: 1000}
	s.Sim = Curve{Policy: "symphony", PeakGoodputRPS: 1200}
	live := []struct{ m, offered, good, late, dropped, failed float64 }{
		{0.5, 500, 500, 0, 0, 0},
		{1, 1000, 900, 50, 40, 10},
		{2, 2000, 720, 128, 1024, 128},
	}
	for i, l := range live {
		r := &Report{}
		r.OfferedRPS, r.GoodputRPS = l.offered, l.good
		r.BadRate = 1 - l.good/l.offered
		r.Offered, r.Good, r.Late, r.Dropped, r.Failed = uint64(l.offered), uint64(l.good), uint64(l.late), uint64(l.dropped), uint64(l.failed)
		p := NewCurvePoint(l.m, r, s.Live.PeakGoodputRPS, true)
		p.Partial = i == 2
		s.Live.Points = append(s.Live.Points, p)
	}
	for _, m := range []float64{0.5, 1, 2, 3} {
		s.Sim.Points = append(s.Sim.Points, NewCurvePoint(m, sweepReport(1000*m, min(1000*m, 1200)), s.Sim.PeakGoodputRPS, true))
	}
	return s
}

func TestSweepRows(t *testing.T) {
	t.Parallel()
	s := testComparison()
	if i := s.BaseIndex(); i != 1 {
		t.Fatalf("base index %d, want the 1x point's (1)", i)
	}
	rows := s.Rows()
	if len(rows) != 4 {
		t.Fatalf("%d rows, want one per simulated multiplier (4)", len(rows))
	}
	r := rows[2]
	if r.Multiplier != 2 || r.Live == nil || r.Sim == nil {
		t.Fatalf("row 2: %+v", r)
	}
	if *r.GoodputVsSim != 0.6 || *r.GoodputVsBase != 0.8 {
		t.Errorf("2x: live/sim %g, vs 1x %g; want 720/1200 = 0.6 and 720/900 = 0.8", *r.GoodputVsSim, *r.GoodputVsBase)
	}
	if *r.LateShare != 0.1 || *r.DroppedShare != 0.8 || *r.FailedShare != 0.1 {
		t.Errorf("2x shares %g/%g/%g, want 0.1/0.8/0.1", *r.LateShare, *r.DroppedShare, *r.FailedShare)
	}
	if rows[0].LateShare != nil {
		t.Error("0.5x: no bad request, yet shares are defined")
	}
	if last := rows[3]; last.Live != nil || last.GoodputVsSim != nil || last.Multiplier != 3 {
		t.Errorf("3x (not reached live): %+v", last)
	}

	// Without a 1x point the first is the base.
	s.Live.Points = s.Live.Points[2:]
	if i := s.BaseIndex(); i != 0 {
		t.Errorf("base index %d without a 1x point, want 0", i)
	}
	s.Live.Points = nil
	if i := s.BaseIndex(); i != -1 {
		t.Errorf("base index %d with no live point, want -1", i)
	}
}

func TestSweepText(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	if err := testComparison().WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(out, "\n")
	header := strings.Fields(lines[2])
	want := []string{"x", "offered", "rps", "live", "goodput", "live", "bad", "late/drop/fail", "%", "live", "idle",
		"sim", "goodput", "sim", "bad", "sim", "idle", "live/sim", "vs", "1x"}
	if strings.Join(header, " ") != strings.Join(want, " ") {
		t.Errorf("header %q, want %q", header, want)
	}
	for _, w := range []string{
		"2.00*  2000.0  720.0  64.00%  10/80/10  0.0%  1200.0  40.00%  0.0%  0.600  0.800", // the partial row
		"3.00  3000.0  -  -  -  -  1200.0  60.00%",                                         // not reached live
		"* stopped part-way", "note: a note", "stopped: sweep at 2: context canceled",
		"peak goodput: live 1000.0 req/s, simulator 1200.0 req/s",
	} {
		if !strings.Contains(squeeze(out), w) {
			t.Errorf("text lacks %q:\n%s", w, out)
		}
	}
}

// squeeze collapses runs of spaces, so that checks do not depend on
// column widths.
func squeeze(s string) string {
	for strings.Contains(s, "   ") {
		s = strings.ReplaceAll(s, "   ", "  ")
	}
	return s
}

func TestSweepCSV(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	if err := testComparison().WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(strings.NewReader(b.String())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 5 {
		t.Fatalf("%d records, want a header and 4 rows", len(recs))
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	two, three := recs[3], recs[4]
	if two[col["live_dropped"]] != "1024" || two[col["live_dropped_share"]] != "0.8" || two[col["live_partial"]] != "true" || two[col["goodput_vs_base"]] != "0.8" {
		t.Errorf("2x row %v", two)
	}
	if three[col["live_goodput_rps"]] != "" || three[col["sim_goodput_rps"]] != "1200" || three[col["offered_rps"]] != "3000" {
		t.Errorf("3x row (not reached live) %v", three)
	}
	if recs[1][col["live_late_share"]] != "" {
		t.Errorf("0.5x row: a late share without bad requests: %v", recs[1])
	}
}

func TestSweepJSON(t *testing.T) {
	t.Parallel()
	s := testComparison()
	s.Sim.Points[0].MeanBatchSize = math.NaN() // written as 0, not an error
	var b strings.Builder
	if err := s.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Workload       string  `json:"workload"`
		Scale          float64 `json:"scale"`
		BaseMultiplier float64 `json:"base_multiplier"`
		Stopped        string  `json:"stopped"`
		Live, Sim      struct {
			Policy string `json:"policy"`
			Points []struct {
				Multiplier float64 `json:"multiplier"`
				Partial    bool    `json:"partial"`
				Outcomes   *struct {
					Late, Dropped, Failed uint64
					DropReasons           map[string]uint64 `json:"drop_reasons"`
				} `json:"outcomes"`
			} `json:"points"`
		}
		Comparison []map[string]float64 `json:"comparison"`
	}
	if err := json.Unmarshal([]byte(b.String()), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b.String())
	}
	if got.Workload != "demo.yaml" || got.Scale != 1 || got.BaseMultiplier != 1 || got.Stopped == "" {
		t.Errorf("header fields %+v", got)
	}
	if got.Live.Policy != "symphony (live)" || len(got.Live.Points) != 3 || !got.Live.Points[2].Partial || got.Live.Points[2].Outcomes.Dropped != 1024 {
		t.Errorf("live curve %+v", got.Live)
	}
	if len(got.Sim.Points) != 4 || got.Sim.Points[3].Outcomes == nil || got.Sim.Points[3].Outcomes.DropReasons["deadline"] != 1800 {
		t.Errorf("sim curve %+v", got.Sim)
	}
	if len(got.Comparison) != 4 || got.Comparison[2]["goodput_vs_sim"] != 0.6 || got.Comparison[2]["dropped_share"] != 0.8 {
		t.Errorf("comparison %v", got.Comparison)
	}
	if _, ok := got.Comparison[3]["goodput_vs_sim"]; ok {
		t.Errorf("3x (not reached live) has a live/sim ratio: %v", got.Comparison[3])
	}
}

func TestSweepPlots(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	paths, err := testComparison().WritePlots(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkChartFiles(t, dir, paths, "sweep_goodput", "sweep_bad_rate", "sweep_gpu_idle")
	svg, err := os.ReadFile(filepath.Join(dir, "sweep_goodput.svg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, label := range []string{"symphony (live)", "symphony (simulator)", "symphony (live), ideal", "symphony (simulator), ideal"} {
		if !strings.Contains(string(svg), label) {
			t.Errorf("goodput chart lacks the series %q", label)
		}
	}
	// No peak known: no ideal lines.
	s := testComparison()
	s.Live.PeakGoodputRPS, s.Sim.PeakGoodputRPS = 0, 0
	if _, err := s.WritePlots(dir); err != nil {
		t.Fatal(err)
	}
	if svg, _ := os.ReadFile(filepath.Join(dir, "sweep_bad_rate.svg")); strings.Contains(string(svg), "ideal") {
		t.Error("an ideal line drawn without a known peak")
	}
}

func TestIdealXs(t *testing.T) {
	t.Parallel()
	pts := []CurvePoint{{OfferedRPS: 500}, {OfferedRPS: 2000}, {OfferedRPS: 1000}}
	if got := idealXs(pts, 1500); len(got) != 4 || got[2] != 1500 || got[3] != 2000 {
		t.Errorf("idealXs with the peak inside: %v, want 500 1000 1500 2000", got)
	}
	if got := idealXs(pts, 3000); len(got) != 3 {
		t.Errorf("idealXs with the peak outside: %v, want the curve's loads only", got)
	}
}

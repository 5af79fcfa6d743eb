package report

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var (
	svgMagic = []byte("<?xml")
	pngMagic = []byte("\x89PNG\r\n\x1a\n")
)

// checkChartFiles checks that paths are exactly dir/NAME.svg and dir/NAME.png
// for each name, non-empty and in their formats.
func checkChartFiles(t *testing.T, dir string, paths []string, names ...string) {
	t.Helper()
	var want []string
	for _, n := range names {
		want = append(want, filepath.Join(dir, n+".svg"), filepath.Join(dir, n+".png"))
	}
	if !slices.Equal(paths, want) {
		t.Fatalf("paths = %v, want %v", paths, want)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		magic := pngMagic
		if strings.HasSuffix(p, ".svg") {
			magic = svgMagic
			if !bytes.Contains(b, []byte("<svg")) {
				t.Errorf("%s has no <svg element", p)
			}
		}
		if len(b) < 100 || !bytes.HasPrefix(b, magic) {
			t.Errorf("%s: %d bytes starting %q, want a file starting %q", p, len(b), b[:min(len(b), 8)], magic)
		}
	}
}

// The plot tests run in parallel: rasterizing PNGs is slow under -race.

func TestWritePlots(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "nested", "plots") // created by WritePlots
	a, err := WritePlots(dir, sampleReport())
	if err != nil {
		t.Fatal(err)
	}
	checkChartFiles(t, dir, a, "latency_cdf", "batch_size_hist", "timeline_rate", "timeline_gpus", "timeline_badrate")

	// The same report gives the same bytes.
	b, err := WritePlots(t.TempDir(), sampleReport())
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		x, _ := os.ReadFile(a[i])
		y, _ := os.ReadFile(b[i])
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two writes of the same report", filepath.Base(a[i]))
		}
	}
}

func TestWritePlotsSkipsMissingData(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	paths, err := WritePlots(dir, &Report{})
	if err != nil {
		t.Fatalf("empty report: %v", err)
	}
	if len(paths) != 0 {
		t.Errorf("empty report wrote %v", paths)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("empty report left %d files", len(ents))
	}

	// No latency histogram, one time point, an empty Histogram: only the
	// batch-size chart has data.
	r := sampleReport()
	r.Latency = &Histogram{}
	r.TimeSeries = r.TimeSeries[:1]
	paths, err = WritePlots(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	checkChartFiles(t, dir, paths, "batch_size_hist")

	if _, err := WritePlots(dir, nil); err == nil {
		t.Error("WritePlots(nil) did not fail")
	}
}

func TestWritePlotsOddData(t *testing.T) {
	t.Parallel()
	r := sampleReport()
	// One latency value, one batch size, non-finite and negative points,
	// many SLOs (no SLO lines), a single GPU count.
	var one Histogram
	one.Record(0)
	r.Latency = &one
	r.BatchSizeHist = map[int]uint64{0: 3, -1: 2, 7: 1}
	r.TimeSeries[1].OfferedRPS = math.NaN()
	r.TimeSeries[2].BadRate = math.Inf(1)
	for i := range 10 {
		r.Models = append(r.Models, ModelReport{Name: "m", SLOms: float64(i + 1)})
	}
	dir := t.TempDir()
	paths, err := WritePlots(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	checkChartFiles(t, dir, paths, "latency_cdf", "batch_size_hist", "timeline_rate", "timeline_gpus", "timeline_badrate")
}

func TestWriteComparisonPlot(t *testing.T) {
	t.Parallel()
	a := sampleReport()
	b := sampleReport()
	b.Policy = "clockwork"
	b.GoodputSearch = nil
	dir := t.TempDir()
	paths, err := WriteComparisonPlot(dir, "policies", []Report{*a, *b})
	if err != nil {
		t.Fatal(err)
	}
	checkChartFiles(t, dir, paths, "policies")

	if paths, err := WriteComparisonPlot(dir, "none", nil); err != nil || len(paths) != 0 {
		t.Errorf("no rows: paths %v, err %v", paths, err)
	}
	if _, err := WriteComparisonPlot(dir, "../escape", []Report{*a}); err == nil {
		t.Error("a name with a directory was accepted")
	}
}

func TestWriteCurvePlot(t *testing.T) {
	t.Parallel()
	series := map[string][][2]float64{
		"symphony":        {{1000, 1000}, {2000, 2000}, {3000, 2900}, {4000, 2950}},
		"work-conserving": {{1000, 1000}, {2000, 1900}, {3000, 1500}, {4000, 900}},
		"broken":          {{math.NaN(), 1}, {1, math.Inf(1)}},
	}
	dirA, dirB := t.TempDir(), t.TempDir()
	a, err := WriteCurvePlot(dirA, "flat_top", "offered (requests/s)", "goodput (requests/s)", series)
	if err != nil {
		t.Fatal(err)
	}
	checkChartFiles(t, dirA, a, "flat_top")
	// Map order must not matter: many writes, same bytes.
	for range 2 {
		b, err := WriteCurvePlot(dirB, "flat_top", "offered (requests/s)", "goodput (requests/s)", series)
		if err != nil {
			t.Fatal(err)
		}
		for i := range a {
			x, _ := os.ReadFile(a[i])
			y, _ := os.ReadFile(b[i])
			if !bytes.Equal(x, y) {
				t.Fatalf("%s differs between writes", filepath.Base(a[i]))
			}
		}
	}

	if paths, err := WriteCurvePlot(dirA, "empty", "x", "y", nil); err != nil || len(paths) != 0 {
		t.Errorf("no series: paths %v, err %v", paths, err)
	}
	if _, err := WriteCurvePlot(dirA, "", "x", "y", series); err == nil {
		t.Error("an empty name was accepted")
	}
}

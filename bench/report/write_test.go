package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// sampleReport is a small but complete report: two models with different
// SLOs, a latency histogram, a batch-size histogram, a rate schedule and a
// goodput search.
func sampleReport() *Report {
	var lat Histogram
	for i := range 2000 {
		lat.Record(time.Duration(1+i%30) * time.Millisecond)
	}
	resnet := Stats{
		Offered: 1000, Good: 980, Late: 10, Dropped: 8, Failed: 2,
		OfferedRPS: 100, GoodputRPS: 98, BadRate: 0.02,
		LatencyP50: 10.5, LatencyP99: 24.1, LatencyP999: 25.3,
		QueueingP50: 2.25, QueueingP99: 12,
		BatchSizeHist: map[int]uint64{1: 5, 4: 20, 16: 50},
		MeanBatchSize: 12.7, GPUBusyFraction: 0.6, GPUIdleFraction: 0.4,
		DropReasons: map[string]uint64{"deadline": 8},
	}
	bert := Stats{
		Offered: 500, Good: 500, OfferedRPS: 50, GoodputRPS: 50,
		LatencyP50: 30, LatencyP99: 45, LatencyP999: 49,
		QueueingP50: 5, QueueingP99: 20,
		BatchSizeHist: map[int]uint64{2: 100, 8: 40},
		MeanBatchSize: 6.1, GPUBusyFraction: 0.3, GPUIdleFraction: 0.7,
	}
	total := Stats{
		Offered: 1500, Good: 1480, Late: 10, Dropped: 8, Failed: 2,
		OfferedRPS: 150, GoodputRPS: 148, BadRate: 0.0133,
		LatencyP50: 12, LatencyP99: 44, LatencyP999: 48.5,
		QueueingP50: 3, QueueingP99: 18,
		BatchSizeHist: map[int]uint64{1: 5, 2: 100, 4: 20, 8: 40, 16: 50},
		MeanBatchSize: 10.2, GPUBusyFraction: 0.45, GPUIdleFraction: 0.55,
		DropReasons: map[string]uint64{"deadline": 8, "no_gpu": 0},
	}
	return &Report{
		Workload: "two-models", Policy: "symphony", Seed: 42, GPUs: 2, DurationSeconds: 10,
		Stats:     total,
		GPUBusy:   []float64{0.5, 0.4},
		Autoscale: Advice{Action: "remove", GPUs: 1, Reason: "idle 55% over the window"},
		Models: []ModelReport{
			{Name: "resnet50", SLOms: 25, Stats: resnet},
			{Name: "bert-base", SLOms: 50, Stats: bert},
		},
		GoodputSearch: &GoodputSearch{
			TargetBadRate: 0.01, Multiplier: 1.5, GoodputRPS: 222,
			Steps: []SearchStep{
				{Multiplier: 1, OfferedRPS: 150, GoodputRPS: 148, WorstBadRate: 0.005, WorstModel: "resnet50", OK: true},
				{Multiplier: 2, OfferedRPS: 300, GoodputRPS: 240, WorstBadRate: 0.2, WorstModel: "bert-base", OK: false},
				{Multiplier: 1.5, OfferedRPS: 225, GoodputRPS: 222, WorstBadRate: 0.009, WorstModel: "resnet50", OK: true},
			},
		},
		TimeSeries: []TimePoint{
			{Start: 0, OfferedRPS: 100, GoodputRPS: 99, BadRate: 0.01, BusyGPUs: 0.8, GPUs: 2},
			{Start: 1, OfferedRPS: 200, GoodputRPS: 190, BadRate: 0.05, BusyGPUs: 1.7, GPUs: 2},
			{Start: 2, OfferedRPS: 150, GoodputRPS: 150, BadRate: 0, BusyGPUs: 1.1, GPUs: 3,
				Advice: Advice{Action: "add", GPUs: 1, Reason: "bad rate"}},
		},
		Latency: &lat,
	}
}

// requiredFields are the fields docs/workload-format.md promises in the
// report and in each model.
var requiredFields = []string{
	"offered_rps", "goodput_rps", "bad_rate",
	"latency_p50", "latency_p99", "latency_p999",
	"queueing_p50", "queueing_p99", "batch_size_hist",
	"gpu_busy_fraction", "gpu_idle_fraction",
}

func TestWriteJSONFields(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteJSON(&buf, sampleReport()); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, buf.String())
	}
	for _, f := range append(slices.Clone(requiredFields), "autoscale", "models") {
		if _, ok := m[f]; !ok {
			t.Errorf("top level lacks %q", f)
		}
	}
	adv, ok := m["autoscale"].(map[string]any)
	if !ok || adv["action"] != "remove" || adv["gpus"] != 1.0 || adv["reason"] == "" {
		t.Errorf("autoscale = %v", m["autoscale"])
	}
	if m["goodput_rps"] != 148.0 || m["bad_rate"] != 0.0133 || m["latency_p99"] != 44.0 {
		t.Errorf("goodput_rps %v bad_rate %v latency_p99 %v", m["goodput_rps"], m["bad_rate"], m["latency_p99"])
	}
	hist, ok := m["batch_size_hist"].(map[string]any)
	if !ok || hist["16"] != 50.0 || len(hist) != 5 {
		t.Errorf("batch_size_hist = %v", m["batch_size_hist"])
	}
	models, ok := m["models"].([]any)
	if !ok || len(models) != 2 {
		t.Fatalf("models = %v", m["models"])
	}
	for i, mm := range models {
		model := mm.(map[string]any)
		for _, f := range append(slices.Clone(requiredFields), "name", "slo_ms") {
			if _, ok := model[f]; !ok {
				t.Errorf("models[%d] lacks %q", i, f)
			}
		}
	}
	if models[0].(map[string]any)["name"] != "resnet50" {
		t.Errorf("models[0] = %v, want resnet50 first (report order)", models[0])
	}
	if _, ok := m["goodput_search"].(map[string]any); !ok {
		t.Errorf("goodput_search = %v", m["goodput_search"])
	}

	// And back into a Report: the JSON is the Report, not a lossy view of it.
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	want := sampleReport()
	want.Latency = nil // not in the JSON
	if !reflect.DeepEqual(&back, want) {
		t.Errorf("round trip changed the report:\n got %+v\nwant %+v", back, *want)
	}
}

func TestWriteJSONDeterministic(t *testing.T) {
	var a, b bytes.Buffer
	if err := WriteJSON(&a, sampleReport()); err != nil {
		t.Fatal(err)
	}
	// A fresh report with maps built in another order gives the same bytes.
	r := sampleReport()
	r.BatchSizeHist = map[int]uint64{}
	for _, k := range []int{16, 8, 4, 2, 1} {
		r.BatchSizeHist[k] = sampleReport().BatchSizeHist[k]
	}
	if err := WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatalf("JSON differs between two writes of the same report:\n%s\n---\n%s", a.String(), b.String())
	}
}

func TestWriteJSONEmptyReport(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteJSON(&buf, &Report{}); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	// Scripts iterate these without a null check.
	if _, ok := m["models"].([]any); !ok {
		t.Errorf("models = %#v, want []", m["models"])
	}
	if _, ok := m["batch_size_hist"].(map[string]any); !ok {
		t.Errorf("batch_size_hist = %#v, want {}", m["batch_size_hist"])
	}
	if err := WriteJSON(&buf, nil); err == nil {
		t.Error("WriteJSON(nil) did not fail")
	}
}

// setFloats sets every float64 reachable from v (through structs, pointers,
// slices and map values) to f, and returns how many it set. It finds float
// fields added to the report types later, which sanitizeReport must cover.
func setFloats(v reflect.Value, f float64) int {
	switch v.Kind() {
	case reflect.Float64:
		if v.CanSet() {
			v.SetFloat(f)
			return 1
		}
	case reflect.Pointer:
		if !v.IsNil() {
			return setFloats(v.Elem(), f)
		}
	case reflect.Struct:
		n := 0
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				n += setFloats(v.Field(i), f)
			}
		}
		return n
	case reflect.Slice:
		n := 0
		for i := range v.Len() {
			n += setFloats(v.Index(i), f)
		}
		return n
	case reflect.Map:
		if v.Type().Elem().Kind() == reflect.Float64 {
			for _, k := range v.MapKeys() {
				v.SetMapIndex(k, reflect.ValueOf(f))
			}
			return v.Len()
		}
	}
	return 0
}

func TestWriteJSONNonFinite(t *testing.T) {
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1)} {
		t.Run(fmt.Sprint(f), func(t *testing.T) {
			r := sampleReport()
			if n := setFloats(reflect.ValueOf(r), f); n < 50 {
				t.Fatalf("set only %d floats", n)
			}
			var buf bytes.Buffer
			if err := WriteJSON(&buf, r); err != nil {
				t.Fatalf("WriteJSON with %v everywhere: %v", f, err)
			}
			if bytes.Contains(buf.Bytes(), []byte("-0")) {
				t.Errorf("output holds -0:\n%s", buf.String())
			}
			var back Report
			if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
				t.Fatal(err)
			}
			if back.GoodputRPS != 0 || back.Models[1].LatencyP99 != 0 || back.TimeSeries[2].BusyGPUs != 0 {
				t.Errorf("non-finite values not written as 0")
			}
			// The caller's report is left alone.
			if g := r.GoodputRPS; !(math.IsNaN(g) && math.IsNaN(f) || g == f) {
				t.Errorf("WriteJSON modified the report: GoodputRPS = %v", g)
			}

			var csvBuf, tab, cmpBuf bytes.Buffer
			if err := WriteCSV(&csvBuf, r); err != nil {
				t.Fatal(err)
			}
			if s := csvBuf.String(); strings.Contains(s, "NaN") || strings.Contains(s, "Inf") {
				t.Errorf("CSV holds a non-finite value:\n%s", s)
			}
			if err := WriteTable(&tab, r); err != nil {
				t.Fatal(err)
			}
			if err := WriteComparison(&cmpBuf, []Report{*r, *r}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func readCSV(t *testing.T, s string) [][]string {
	t.Helper()
	recs, err := csv.NewReader(strings.NewReader(s)).ReadAll()
	if err != nil {
		t.Fatalf("invalid CSV: %v\n%s", err, s)
	}
	return recs
}

func TestWriteCSV(t *testing.T) {
	r := sampleReport()
	r.Models[1].Name = `odd, "name"` // must be quoted, not split
	var buf bytes.Buffer
	if err := WriteCSV(&buf, r); err != nil {
		t.Fatal(err)
	}
	recs := readCSV(t, buf.String())
	wantHeader := []string{"model", "offered", "good", "late", "dropped", "failed",
		"offered_rps", "goodput_rps", "bad_rate", "latency_p50", "latency_p99", "latency_p999",
		"queueing_p50", "queueing_p99", "mean_batch_size", "gpu_busy_fraction", "gpu_idle_fraction",
		"profile_batches", "profile_ratio_p50", "profile_ratio_p99"}
	if !slices.Equal(recs[0], wantHeader) {
		t.Fatalf("header = %v, want %v", recs[0], wantHeader)
	}
	if len(recs) != 1+len(r.Models)+1 {
		t.Fatalf("%d records, want header + %d models + total", len(recs), len(r.Models))
	}
	for i, m := range r.Models {
		if recs[1+i][0] != m.Name {
			t.Errorf("row %d model = %q, want %q", 1+i, recs[1+i][0], m.Name)
		}
	}
	total := recs[len(recs)-1]
	if total[0] != "total" {
		t.Errorf("last row = %v, want total", total)
	}
	col := func(rec []string, name string) string { return rec[slices.Index(wantHeader, name)] }
	if col(total, "offered") != "1500" || col(total, "bad_rate") != "0.0133" || col(total, "latency_p999") != "48.5" {
		t.Errorf("total row = %v", total)
	}
	if col(recs[1], "queueing_p50") != "2.25" || col(recs[1], "late") != "10" {
		t.Errorf("resnet50 row = %v", recs[1])
	}

	buf.Reset()
	if err := WriteCSV(&buf, &Report{}); err != nil {
		t.Fatal(err)
	}
	if recs := readCSV(t, buf.String()); len(recs) != 2 || recs[1][0] != "total" {
		t.Errorf("empty report CSV = %v, want header and total", recs)
	}
}

func TestWriteTable(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteTable(&buf, sampleReport()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"two-models", "symphony", "seed 42", "GPUs 2",
		"resnet50", "bert-base",
		"148.0 req/s", // goodput
		"1.33%",       // bad rate
		"44.00 ms",    // p99
		"remove 1 GPU: idle 55% over the window",
		"goodput search", "222.0 req/s at multiplier 1.5000",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "not shown") {
		t.Errorf("table hides models with only 2:\n%s", out)
	}
	if err := WriteTable(&buf, &Report{}); err != nil {
		t.Errorf("empty report: %v", err)
	}
}

func TestWriteTableManyModels(t *testing.T) {
	r := &Report{Workload: "zoo"}
	for i := range 100 {
		r.Models = append(r.Models, ModelReport{
			Name:  fmt.Sprintf("model-%03d", i),
			Stats: Stats{OfferedRPS: float64(i)},
		})
	}
	var buf bytes.Buffer
	if err := WriteTable(&buf, r); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, "60 more models") {
		t.Errorf("table does not say 60 models are hidden:\n%s", out)
	}
	// The 40 busiest are model-060 .. model-099, busiest first.
	if !strings.Contains(out, "model-099") || !strings.Contains(out, "model-060") || strings.Contains(out, "model-059") {
		t.Errorf("table does not show exactly the 40 busiest models:\n%s", out)
	}
	if strings.Index(out, "model-099") > strings.Index(out, "model-060") {
		t.Errorf("busiest model not listed first:\n%s", out)
	}
}

func TestWriteComparison(t *testing.T) {
	base := sampleReport() // searched goodput 222
	wc := sampleReport()
	wc.Policy = "work-conserving"
	wc.GoodputSearch = nil // measured goodput 148
	wc.MeanBatchSize = 3.5
	rows := []Report{*base, *wc}

	var buf bytes.Buffer
	if err := WriteComparison(&buf, rows); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"symphony", "work-conserving", "222.0", "148.0", "1.000x", "0.667x", "3.50"} {
		if !strings.Contains(out, want) {
			t.Errorf("comparison lacks %q:\n%s", want, out)
		}
	}

	buf.Reset()
	if err := WriteComparisonCSV(&buf, rows); err != nil {
		t.Fatal(err)
	}
	recs := readCSV(t, buf.String())
	wantHeader := []string{"policy", "goodput_rps", "goodput_ratio", "mean_batch_size", "latency_p99", "bad_rate", "gpu_idle_fraction"}
	if !slices.Equal(recs[0], wantHeader) {
		t.Fatalf("header = %v", recs[0])
	}
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3", len(recs))
	}
	if got := recs[1][:3]; !slices.Equal(got, []string{"symphony", "222", "1"}) {
		t.Errorf("row 1 = %v", recs[1])
	}
	if recs[2][1] != "148" || !strings.HasPrefix(recs[2][2], "0.666") || recs[2][3] != "3.5" {
		t.Errorf("row 2 = %v", recs[2])
	}

	// A baseline with no goodput has no ratio.
	zero := Report{Policy: "broken"}
	buf.Reset()
	if err := WriteComparisonCSV(&buf, []Report{zero, *wc}); err != nil {
		t.Fatal(err)
	}
	if recs := readCSV(t, buf.String()); recs[2][2] != "" {
		t.Errorf("ratio to a zero baseline = %q, want empty", recs[2][2])
	}
	buf.Reset()
	if err := WriteComparison(&buf, nil); err != nil {
		t.Errorf("no rows: %v", err)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, fmt.Errorf("disk full") }

func TestWritersReportWriteErrors(t *testing.T) {
	r := sampleReport()
	for name, f := range map[string]func() error{
		"WriteJSON":          func() error { return WriteJSON(failWriter{}, r) },
		"WriteCSV":           func() error { return WriteCSV(failWriter{}, r) },
		"WriteTable":         func() error { return WriteTable(failWriter{}, r) },
		"WriteComparison":    func() error { return WriteComparison(failWriter{}, []Report{*r}) },
		"WriteComparisonCSV": func() error { return WriteComparisonCSV(failWriter{}, []Report{*r}) },
	} {
		if err := f(); err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Errorf("%s: err = %v, want the writer's error", name, err)
		}
	}
}

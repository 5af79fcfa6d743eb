package report

import (
	"maps"
	"testing"
	"time"
)

// TestCountsStats checks the per-window arithmetic on counts small enough to
// do by hand: 10 offered over 2s, 6 good, 2 late, 1 dropped, 1 failed.
func TestCountsStats(t *testing.T) {
	var c Counts
	c.Offered, c.Good, c.Late, c.Dropped, c.Failed = 10, 6, 2, 1, 1
	c.AddBatch(4, 2)
	c.AddBatch(2, 0) // a size never seen is left out of the histogram
	c.BatchWeighted = 24
	c.AddReason("deadline", 1)
	c.AddReason("failed: backend", 1)
	c.AddReason("never", 0)
	c.Latency.Record(10 * time.Millisecond)
	s := c.Stats(2)
	if s.OfferedRPS != 5 || s.GoodputRPS != 3 || s.BadRate != 0.4 {
		t.Errorf("offered %g goodput %g bad %g, want 5, 3, 0.4", s.OfferedRPS, s.GoodputRPS, s.BadRate)
	}
	if s.MeanBatchSize != 3 { // 24 / (6 good + 2 late answered)
		t.Errorf("mean batch %g, want 3", s.MeanBatchSize)
	}
	if !maps.Equal(s.BatchSizeHist, map[int]uint64{4: 2}) {
		t.Errorf("batch sizes %v, want map[4:2]", s.BatchSizeHist)
	}
	if !maps.Equal(s.DropReasons, map[string]uint64{"deadline": 1, "failed: backend": 1}) {
		t.Errorf("reasons %v", s.DropReasons)
	}
	if s.LatencyP50 < 9.9 || s.LatencyP50 > 10.1 {
		t.Errorf("p50 %gms, want 10ms within the histogram's precision", s.LatencyP50)
	}
	var none Counts
	if s := none.Stats(1); s.BadRate != 0 || s.MeanBatchSize != 0 || s.BatchSizeHist == nil || s.DropReasons != nil {
		t.Errorf("empty counts: %+v; want zero rates, an empty histogram and no reasons", s)
	}
}

func TestCountsMerge(t *testing.T) {
	a := Counts{Offered: 3, Good: 2, Dropped: 1, BatchWeighted: 4, Busy: time.Second}
	a.AddBatch(2, 1)
	a.AddReason("deadline", 1)
	a.Latency.Record(time.Millisecond)
	b := Counts{Offered: 2, Late: 1, Failed: 1, BatchWeighted: 3, Busy: 2 * time.Second}
	b.AddBatch(2, 1)
	b.AddBatch(3, 1)
	b.AddReason("failed: refused", 1)
	b.Latency.Record(time.Millisecond)
	var total Counts
	total.Merge(&a)
	total.Merge(&b)
	if total.Offered != 5 || total.Good != 2 || total.Late != 1 || total.Dropped != 1 || total.Failed != 1 ||
		total.BatchWeighted != 7 || total.Busy != 3*time.Second || total.Latency.Count() != 2 {
		t.Errorf("merged %+v", total)
	}
	if !maps.Equal(total.Batches, map[int]uint64{2: 2, 3: 1}) || !maps.Equal(total.Reasons, map[string]uint64{"deadline": 1, "failed: refused": 1}) {
		t.Errorf("merged batches %v reasons %v", total.Batches, total.Reasons)
	}
}

// TestBuild checks a two-model report on a 2-GPU cluster over a 10s window.
func TestBuild(t *testing.T) {
	m := &Measurement{Workload: "w.yaml", Policy: "symphony", Seed: 7, GPUs: 2, Seconds: 10,
		Models: []ModelCounts{
			{Name: "a", SLO: 25 * time.Millisecond, Counts: Counts{Offered: 100, Good: 90, Late: 10, Busy: 5 * time.Second}},
			{Name: "b", SLO: 50 * time.Millisecond, Counts: Counts{Offered: 100, Good: 100, Busy: 10 * time.Second}},
		},
		GPUBusy: []time.Duration{5 * time.Second, 10 * time.Second},
	}
	r := Build(m)
	if r.Workload != "w.yaml" || r.Policy != "symphony" || r.Seed != 7 || r.GPUs != 2 || r.DurationSeconds != 10 {
		t.Errorf("header %+v", r)
	}
	if len(r.Models) != 2 || r.Models[0].SLOms != 25 || r.Models[0].BadRate != 0.1 || r.Models[1].SLOms != 50 {
		t.Fatalf("models %+v", r.Models)
	}
	// 5s of 20 GPU-seconds, and 10s of 20.
	if r.Models[0].GPUBusyFraction != 0.25 || r.Models[1].GPUBusyFraction != 0.5 {
		t.Errorf("model busy %g %g, want 0.25 0.5", r.Models[0].GPUBusyFraction, r.Models[1].GPUBusyFraction)
	}
	if r.Offered != 200 || r.Good != 190 || r.BadRate != 0.05 || r.OfferedRPS != 20 || r.GoodputRPS != 19 {
		t.Errorf("total %+v", r.Stats)
	}
	if len(r.GPUBusy) != 2 || r.GPUBusy[0] != 0.5 || r.GPUBusy[1] != 1 || r.GPUBusyFraction != 0.75 || r.GPUIdleFraction != 0.25 {
		t.Errorf("GPU busy %v fraction %g idle %g, want [0.5 1], 0.75, 0.25", r.GPUBusy, r.GPUBusyFraction, r.GPUIdleFraction)
	}
	if r.Autoscale.Action == "" || r.TimeSeries != nil || r.Faults != nil {
		t.Errorf("autoscale %+v, series %v, faults %v", r.Autoscale, r.TimeSeries, r.Faults)
	}

	// Without per-GPU times (the live cluster) the models' busy time is
	// the cluster's: 15s of 20 GPU-seconds.
	m.GPUBusy = nil
	if r := Build(m); r.GPUBusy != nil || r.GPUBusyFraction != 0.75 {
		t.Errorf("live: per-GPU %v, fraction %g; want none and 0.75", r.GPUBusy, r.GPUBusyFraction)
	}
	// Clock skew can put busy time past the window: the fraction stays 1.
	m.Models[1].Busy = 30 * time.Second
	if r := Build(m); r.GPUBusyFraction != 1 || r.Models[1].GPUBusyFraction != 1 {
		t.Errorf("over-full: fractions %g, %g; want 1, 1", r.GPUBusyFraction, r.Models[1].GPUBusyFraction)
	}
}

// TestBuildSeries checks the time series: 500ms intervals, a run cut at
// 1s (End), and with an epoch job fractions of the GPUs in use.
func TestBuildSeries(t *testing.T) {
	m := &Measurement{GPUs: 4, Seconds: 1, Models: []ModelCounts{{Name: "a"}},
		Interval: 500 * time.Millisecond, End: time.Second,
		Series: []Interval{
			{Offered: 10, Good: 8, Bad: 2, Busy: time.Second},
			{Offered: 0, Busy: 0},
			{Offered: 99}, // after End: left out
		},
	}
	r := Build(m)
	if len(r.TimeSeries) != 2 {
		t.Fatalf("%d points, want 2", len(r.TimeSeries))
	}
	p := r.TimeSeries[0]
	if p.Start != 0 || p.OfferedRPS != 20 || p.GoodputRPS != 16 || p.BadRate != 0.2 || p.BusyGPUs != 2 || p.GPUs != 4 {
		t.Errorf("first point %+v", p)
	}
	if q := r.TimeSeries[1]; q.Start != 0.5 || q.BadRate != 0 {
		t.Errorf("second point %+v", q)
	}

	m.Epochs = true
	m.InUse = 2 * time.Second // 2 GPUs in use over the 1s window
	m.GPUBusy = []time.Duration{time.Second, 0, 0, 0}
	m.Series[0].InUse = time.Second // 2 GPUs in use for 500ms
	m.Series[0].ModelGood, m.Series[0].ModelBad = []uint64{8}, []uint64{2}
	m.Series[1].ModelGood, m.Series[1].ModelBad = []uint64{0}, []uint64{0}
	r = Build(m)
	// 1 GPU-second busy of 2 in use, not of 4 GPUs.
	if r.GPUBusyFraction != 0.5 {
		t.Errorf("epoch busy fraction %g, want 0.5", r.GPUBusyFraction)
	}
	p = r.TimeSeries[0]
	if p.GPUsInUse != 2 || p.GPUs != 2 || p.ModelGoodputRPS[0] != 16 || p.ModelBadRPS[0] != 4 {
		t.Errorf("epoch point %+v", p)
	}
}

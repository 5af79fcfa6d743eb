package partition

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/scheduler/serving"
)

func table4(t *testing.T, name string) serving.Demand {
	t.Helper()
	specs, err := profile.Zoo("table4")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		if s.Name == name {
			return serving.Demand{Model: serving.Model{Name: s.Name, Profile: s.Profile(), SLO: s.SLO}}
		}
	}
	t.Fatalf("no %s in the table4 zoo", name)
	return serving.Demand{}
}

// The paper's Table 4, staggered execution: ResNet50 runs batches of 16 on
// 8 GPUs for 5839 r/s; InceptionResNetV2 batches of 8 on 8 GPUs for 1083.
func TestSizeModelTable4(t *testing.T) {
	for _, c := range []struct {
		model      string
		rate       float64
		batch, gpu int
		throughput float64
	}{
		{"ResNet50", 5839, 16, 8, 5839},
		{"InceptionResNetV2", 1083, 8, 8, 1083},
	} {
		m := table4(t, c.model)
		m.Rate = c.rate
		s, err := SizeModel(m, scheduler.Delays{})
		if err != nil {
			t.Fatal(err)
		}
		if s.Batch != c.batch || s.GPUs != c.gpu || int(s.Throughput) != int(c.throughput) {
			t.Errorf("%s at %.0f r/s: b=%d N=%d (%.1f r/s), want b=%d N=%d (%.0f r/s)", c.model, c.rate, s.Batch, s.GPUs, s.Throughput, c.batch, c.gpu, c.throughput)
		}
		// One request per second more needs a ninth GPU.
		m.Rate = c.throughput + 1
		if s, err := SizeModel(m, scheduler.Delays{}); err != nil || s.GPUs != c.gpu+1 {
			t.Errorf("%s at %.0f r/s: N=%d (%v), want %d", c.model, m.Rate, s.GPUs, err, c.gpu+1)
		}
	}
}

// Delays come off the SLO, so the same rate needs smaller batches.
func TestSizeModelDelays(t *testing.T) {
	m := table4(t, "ResNet50")
	m.Rate = 5000
	ideal, err := SizeModel(m, scheduler.Delays{})
	if err != nil {
		t.Fatal(err)
	}
	d := scheduler.Delays{Ctrl: time.Millisecond, DataPerRequest: 100 * time.Microsecond, Result: time.Millisecond}
	real, err := SizeModel(m, d)
	if err != nil {
		t.Fatal(err)
	}
	if real.Batch >= ideal.Batch {
		t.Errorf("with delays b=%d, without %d: want smaller", real.Batch, ideal.Batch)
	}
}

func TestSizeModelEdges(t *testing.T) {
	m := table4(t, "ResNet50")
	if s, err := SizeModel(m, scheduler.Delays{}); err != nil || s.GPUs != 0 {
		t.Errorf("zero rate: %+v, %v; want no GPUs", s, err)
	}
	m.Rate = 100
	m.SLO = 6 * time.Millisecond // ℓ(1) = 6.125ms
	if _, err := SizeModel(m, scheduler.Delays{}); !errors.Is(err, ErrUnservable) {
		t.Errorf("SLO below ℓ(1): %v, want ErrUnservable", err)
	}
	m.SLO = 25 * time.Millisecond
	m.Rate = -1
	if _, err := SizeModel(m, scheduler.Delays{}); err == nil {
		t.Error("negative rate accepted")
	}
}

// A part holding one model alone needs what Eqs. 2-3 say; headroom adds on
// top; sharing a part adds the models' fractional needs.
func TestSizePart(t *testing.T) {
	r := table4(t, "ResNet50")
	r.Rate = 5839
	ps, err := SizePart([]serving.Demand{r}, scheduler.Delays{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ps.Batches[0] != 16 || ps.GPUs != 8 {
		t.Errorf("ResNet50 alone: b=%d N=%d (need %.3f), want 16 and 8", ps.Batches[0], ps.GPUs, ps.Need)
	}
	ps, err = SizePart([]serving.Demand{r}, scheduler.Delays{}, 0.25)
	if err != nil || ps.GPUs != 10 {
		t.Errorf("25%% headroom: N=%d (%v), want 10", ps.GPUs, err)
	}
	i := table4(t, "InceptionResNetV2")
	i.Rate = 1083
	both, err := SizePart([]serving.Demand{r, i}, scheduler.Delays{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if both.GPUs != 16 || both.Batches[1] != 8 {
		t.Errorf("both: N=%d b=%v (need %.3f), want 16 GPUs", both.GPUs, both.Batches, both.Need)
	}
	// A slow model waits long for its batch to fill, so it runs small ones.
	r.Rate = 200
	slow, err := SizePart([]serving.Demand{r}, scheduler.Delays{}, 0)
	if err != nil || slow.Batches[0] >= 16 || slow.GPUs != 1 {
		t.Errorf("200 r/s: %+v, %v; want a small batch on one GPU", slow, err)
	}
	if _, err := SizePart([]serving.Demand{r}, scheduler.Delays{}, -0.1); err == nil {
		t.Error("negative headroom accepted")
	}
	// Below one request per SLO a request never waits for a batch-mate:
	// it runs alone, λ·ℓ(1) of a GPU. With ResNet50's SLO of 25ms, 5 r/s
	// is one request every 200ms: b = 1 needs ℓ(1) = 6.1ms in the budget
	// and keeps 5 × 6.1ms = 3.1% of a GPU busy.
	r.Rate = 5
	rare, err := SizePart([]serving.Demand{r}, scheduler.Delays{}, 0)
	if err != nil || rare.Batches[0] != 1 || rare.GPUs != 1 {
		t.Fatalf("5 r/s: %+v, %v; want batches of one on one GPU", rare, err)
	}
	if want := 5 * r.Profile.Latency(1).Seconds(); math.Abs(rare.Need-want) > 1e-12 {
		t.Errorf("5 r/s: need %v, want λ·ℓ(1) = %v", rare.Need, want)
	}
}

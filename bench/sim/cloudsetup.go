package sim

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/partition/cloudscale"
	"github.com/symphony-serving/symphony/partition/forecast"
	"github.com/symphony-serving/symphony/scheduler/serving"
)

// DefaultCloudTypes are EC2-like instance types of one GPU kind (16 GiB
// V100s): a 1-GPU and a 4-GPU type at $3.06 a GPU-hour, billed by the
// second with a one-minute minimum, booting (and loading the models) in 100
// and 150 s;
// with spotPerHour > 0, a 1-GPU spot type at 70% off with EC2's 2-minute
// warning, interrupted spotPerHour times an instance-hour.
func DefaultCloudTypes(spotPerHour float64) []cloudscale.InstanceType {
	od := func(name string, gpus int, price float64, launch time.Duration) cloudscale.InstanceType {
		return cloudscale.InstanceType{Name: name, GPUs: gpus, PricePerHour: price, Launch: launch, BillingMinimum: time.Minute, BillingIncrement: time.Second, Memory: 16 << 30}
	}
	types := []cloudscale.InstanceType{od("gpu.1x", 1, 3.06, 100*time.Second), od("gpu.4x", 4, 12.24, 150*time.Second)}
	if spotPerHour > 0 {
		s := od("gpu.1x.spot", 1, 0.92, 150*time.Second)
		s.Spot, s.SpotWarning, s.InterruptionsPerHour = true, 2*time.Minute, spotPerHour
		types = append(types, s)
	}
	return types
}

// DefaultBurstPool is a Lambda-like pool: a request runs alone on CPUs
// twice as slow as the GPU's batch of one, plus 20 ms to invoke, for $2e-5
// (about 2.4 times what a busy gpu.1x costs a request of a mid-sized
// model), with 2 s cold starts and 1000 containers kept warm 10 minutes.
func DefaultBurstPool() *BurstPool {
	return &BurstPool{PricePerRequest: 2e-5, Overhead: 20 * time.Millisecond, Slowdown: 2, ColdStart: 2 * time.Second, KeepWarm: 10 * time.Minute, Concurrency: 1000}
}

// SpotTwentyPercentAnHour is the interruption rate that takes 20% of the
// spot capacity in an hour: 1 − e^(−r) = 0.2.
var SpotTwentyPercentAnHour = -math.Log(0.8)

// WorkloadSizer sizes w's models as a mix: each model's share is its mean
// rate over the run.
func WorkloadSizer(w *workload.Workload) (*cloudscale.MixSizer, error) {
	var ds []serving.Demand
	for i := range w.Models {
		ds = append(ds, serving.Demand{Model: w.Models[i].Model, Rate: w.Models[i].MeanRate(0, w.Warmup+w.Duration)})
	}
	return cloudscale.NewMixSizer(ds, w.Network)
}

// ModelMemory is what one GPU needs to hold all of w's models: their
// static memory and the largest dynamic memory (a part's memory, as the
// epoch job's placement counts it).
func ModelMemory(w *workload.Workload) int64 {
	var static, dyn int64
	for i := range w.Models {
		static += w.Models[i].StaticMemory
		dyn = max(dyn, w.Models[i].DynamicMemory)
	}
	return static + dyn
}

// PeakRate is the highest total rate w offers at any instant of its run.
func PeakRate(w *workload.Workload) float64 {
	end := w.Warmup + w.Duration
	at := []time.Duration{0}
	for i := range w.Models {
		var t time.Duration
		for _, p := range w.Models[i].Rates {
			if t += p.Duration; p.Duration > 0 && t < end {
				at = append(at, t)
			}
		}
	}
	peak := 0.0
	for _, t := range at {
		total := 0.0
		for i := range w.Models {
			total += w.Models[i].RateAt(t)
		}
		peak = max(peak, total)
	}
	return peak
}

// CloudPolicies names the policies NewCloudPolicy makes.
var CloudPolicies = []string{"static", "reactive[:TARGET]", "mark", "mark-nospill", "mark-spot"}

// CloudPolicyOptions adjust what NewCloudPolicy makes.
type CloudPolicyOptions struct {
	// Forecaster is the mark policies' (nil: Holt-Winters with a one-day
	// period, in steps of a minute).
	Forecaster forecast.Forecaster
	// Sizer sizes the models for every policy (nil: WorkloadSizer, Eqs.
	// 2-3; MeasureSizer measures it instead).
	Sizer cloudscale.Sizer
}

// NewCloudPolicy makes the named policy for w on the default instance
// types, and returns the types it launches from: static (the fleet for
// w's peak rate plus 10%, all run), reactive[:TARGET] (target tracking at
// TARGET utilisation, default 0.7, over a minute, scaling in after 5
// minutes), mark (MArk with spill-over), mark-nospill, and mark-spot (with
// spot instances that lose 20% of their capacity an hour and on-demand
// standbys). Every policy sizes w's models as their mix, with o.Sizer
// (MeasureSizer measures one) or else WorkloadSizer (Eqs. 2-3), and so
// refuses a workload CheckCloudWorkload refuses.
func NewCloudPolicy(name string, w *workload.Workload, o CloudPolicyOptions) (p cloudscale.Policy, types []cloudscale.InstanceType, err error) {
	if err := CheckCloudWorkload(w); err != nil {
		return nil, nil, err
	}
	var sz cloudscale.Sizer = o.Sizer
	if sz == nil {
		if sz, err = WorkloadSizer(w); err != nil {
			return nil, nil, err
		}
	}
	od := DefaultCloudTypes(0)
	mem := ModelMemory(w)
	if !od[0].Holds(mem) {
		return nil, nil, fmt.Errorf("sim: the models need %d bytes of GPU memory, more than the %d of the cloud's %s", mem, od[0].Memory, od[0].Name)
	}
	kind, arg, _ := strings.Cut(name, ":")
	if arg != "" && kind != "reactive" {
		return nil, nil, fmt.Errorf("sim: cloud policy %q takes no argument", name)
	}
	switch kind {
	case "static":
		return &cloudscale.Static{Types: od, Type: 0, Peak: PeakRate(w), Sizer: sz, Headroom: 0.1}, od, nil
	case "reactive":
		target := 0.7
		if arg != "" {
			if target, err = strconv.ParseFloat(arg, 64); err != nil || !(target > 0 && target <= 1) {
				return nil, nil, fmt.Errorf("sim: cloud policy %q: the target must be a utilisation in (0, 1]", name)
			}
		}
		return &cloudscale.Reactive{Types: od, Type: 0, Sizer: sz, Target: target, Window: time.Minute, Stabilization: 5 * time.Minute, TickEvery: 15 * time.Second}, od, nil
	case "mark", "mark-nospill", "mark-spot":
		f := o.Forecaster
		if f == nil {
			if f, err = forecast.NewHoltWinters(forecast.DefaultHoltWinters(1440)); err != nil {
				return nil, nil, err
			}
		}
		types := od
		if kind == "mark-spot" {
			types = DefaultCloudTypes(SpotTwentyPercentAnHour)
		}
		cfg := cloudscale.DefaultPredictive(types, sz, f)
		cfg.Spill, cfg.ModelMemory = kind != "mark-nospill", mem
		if kind == "mark-spot" {
			cfg.Standby = 0
		}
		p, err := cloudscale.NewPredictive(cfg)
		return p, types, err
	}
	return nil, nil, fmt.Errorf("sim: unknown cloud policy %q (have %s)", name, strings.Join(CloudPolicies, ", "))
}

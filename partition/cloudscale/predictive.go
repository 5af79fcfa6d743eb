package cloudscale

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/symphony-serving/symphony/partition/forecast"
)

// PredictiveConfig configures MArk's predictive autoscaling.
type PredictiveConfig struct {
	// Types are the instance types the greedy provisioning chooses among
	// (by cost per unit of need served, launch overhead included).
	Types []InstanceType
	Sizer Sizer
	// Forecaster predicts the highest rate of each step (MArk: the maximum
	// of the step's TickEvery-long samples); it observes that maximum each
	// step, so a forecaster primed with a trace's mean rates learns a
	// little more once the run begins.
	Forecaster forecast.Forecaster
	// TickEvery is the sample window (MArk's P_s, 5 s), Step the
	// forecasting and provisioning unit (P_u, 1 min) and Horizon the steps
	// forecast (P_w, 60).
	TickEvery, Step time.Duration
	Horizon         int
	// Headroom is the fraction of need planned on top of the forecast, for
	// its error; WarmPool is GPUs kept serving beyond it (Scrooge's warm
	// pool), for bursts no forecast sees.
	Headroom float64
	WarmPool float64
	// Floor is how many steps ahead the plan needs at least what the
	// measured rate needs (the highest tick rate of the last step): a load
	// the forecast did not see, such as a burst today that was not there
	// yesterday, is served by instances once it lasts, not spilled for as
	// long as it lasts. 0 plans on the forecast alone, as MArk does.
	Floor int
	// TurnOffDelay is how long an instance must be surplus to every plan
	// before it is released (MArk's cool-down, Scrooge's turn-off delay):
	// a dip shorter than it costs no relaunch.
	TurnOffDelay time.Duration
	// Spill sends arrivals above the serving GPUs' capacity to the burst
	// pool (MArk's Lambda hand-over). SpillAt scales that capacity (1: the
	// sizing's own).
	Spill   bool
	SpillAt float64
	// The SLO monitor: when fewer than MonitorTarget of the requests that
	// ended over the last MonitorWindow met their SLO, launch MonitorLaunch
	// instances of the type that boots fastest, at most once per its
	// launch delay.
	MonitorTarget float64
	MonitorWindow time.Duration
	MonitorLaunch int
	// Standby is the type launched at once for each spot instance the cloud
	// warns it will take back (an on-demand or burstable standby); -1
	// launches none and leaves the gap to the next plan and spill-over.
	Standby int
	// ModelMemory is what one GPU needs to hold the models (every GPU of
	// the rank loop may run any of them): types whose GPUs hold less are
	// never launched.
	ModelMemory int64
}

// DefaultPredictive returns MArk's settings (§4.2-4.4, §5.1): 5 s samples,
// 1 min steps, a 60-step horizon, a 3 min turn-off delay, spill-over, and
// an SLO monitor over the last 30 s at 99%; and a floor of the measured
// rate over the next 3 steps, which MArk does not have. It plans no
// headroom: as in MArk, spill-over and the monitor take what the forecast
// misses, and a sizer that measures capacity (MeasuredSizer) already holds
// the margin of the bad rate it was measured at.
func DefaultPredictive(types []InstanceType, sizer Sizer, f forecast.Forecaster) PredictiveConfig {
	return PredictiveConfig{
		Types: types, Sizer: sizer, Forecaster: f,
		TickEvery: 5 * time.Second, Step: time.Minute, Horizon: 60,
		Floor: 3, TurnOffDelay: 3 * time.Minute,
		Spill: true, SpillAt: 1,
		MonitorTarget: 0.99, MonitorWindow: 30 * time.Second, MonitorLaunch: 1,
		Standby: -1,
	}
}

// Predictive is MArk's autoscaler: every step it forecasts the highest
// rate of each of the next Horizon steps, sizes it, and runs Greedy to
// choose the instances that serve it at the least cost; surplus instances
// go after the turn-off delay. Between steps, the SLO monitor launches more
// when requests miss their SLO, spill-over hands what the serving GPUs
// cannot take to the burst pool, and every warned spot instance gets a
// standby at once.
type Predictive struct {
	cfg      PredictiveConfig
	stepMax  float64 // highest tick rate of the step under way
	nextStep time.Duration
	started  bool
	// off times instances that are surplus to the plan.
	off         turnOff
	warnedSeen  map[InstanceID]bool
	keepIDs     map[InstanceID]bool
	monitor     [][2]uint64 // (good, bad) per tick over MonitorWindow
	monitorNext time.Duration
	launch      []int
	release     []InstanceID
	unusable    []bool // per type: its GPUs cannot hold the models
}

// NewPredictive checks the configuration and builds the policy.
func NewPredictive(cfg PredictiveConfig) (*Predictive, error) {
	switch {
	case len(cfg.Types) == 0:
		return nil, errors.New("cloudscale: predictive: no instance types")
	case cfg.Sizer == nil || cfg.Forecaster == nil:
		return nil, errors.New("cloudscale: predictive: needs a sizer and a forecaster")
	case cfg.TickEvery <= 0 || cfg.Step < cfg.TickEvery || cfg.Horizon < 1:
		return nil, fmt.Errorf("cloudscale: predictive: tick %v, step %v and horizon %d must satisfy 0 < tick <= step and horizon >= 1", cfg.TickEvery, cfg.Step, cfg.Horizon)
	case cfg.Headroom < 0 || cfg.WarmPool < 0 || cfg.TurnOffDelay < 0 || cfg.Floor < 0:
		return nil, errors.New("cloudscale: predictive: negative headroom, warm pool, floor or turn-off delay")
	case cfg.Standby >= len(cfg.Types):
		return nil, fmt.Errorf("cloudscale: predictive: standby type %d is not one of the %d types", cfg.Standby, len(cfg.Types))
	case cfg.Standby >= 0 && cfg.Types[cfg.Standby].Spot:
		return nil, fmt.Errorf("cloudscale: predictive: standby type %q is a spot type", cfg.Types[cfg.Standby].Name)
	}
	if err := mixTypes("predictive", cfg.Types); err != nil {
		return nil, err
	}
	if cfg.SpillAt <= 0 {
		cfg.SpillAt = 1
	}
	unusable := make([]bool, len(cfg.Types))
	usable := 0
	for i, t := range cfg.Types {
		if unusable[i] = !t.Holds(cfg.ModelMemory); !unusable[i] && !t.Spot {
			usable++
		}
	}
	switch {
	case usable == 0:
		return nil, fmt.Errorf("cloudscale: predictive: no on-demand type's GPUs hold the models' %d bytes", cfg.ModelMemory)
	case cfg.Standby >= 0 && unusable[cfg.Standby]:
		return nil, fmt.Errorf("cloudscale: predictive: standby type %q cannot hold the models' %d bytes", cfg.Types[cfg.Standby].Name, cfg.ModelMemory)
	}
	return &Predictive{unusable: unusable, cfg: cfg, off: newTurnOff(cfg.TurnOffDelay), warnedSeen: map[InstanceID]bool{}, keepIDs: map[InstanceID]bool{}}, nil
}

func (p *Predictive) Name() string {
	n := "predictive"
	if !p.cfg.Spill {
		n += "-nospill"
	}
	return fmt.Sprintf("%s(%s)", n, p.cfg.Forecaster.Name())
}

func (p *Predictive) Tick() time.Duration { return p.cfg.TickEvery }

// Start is the cheapest fleet, by price per GPU among on-demand types, that
// serves the first rate with the headroom.
func (p *Predictive) Start(rate float64) []int {
	typ := p.cheapestOnDemand()
	need := p.cfg.Sizer.Need(rate)*(1+p.cfg.Headroom) + p.cfg.WarmPool
	out := make([]int, max(1, instancesFor(p.cfg.Types, typ, need)))
	for i := range out {
		out[i] = typ
	}
	return out
}

func (p *Predictive) cheapestOnDemand() int {
	best := -1
	for i, t := range p.cfg.Types {
		if !t.Spot && !p.unusable[i] && (best < 0 || t.PricePerGPUHour() < p.cfg.Types[best].PricePerGPUHour()) {
			best = i
		}
	}
	if best < 0 {
		best = 0
	}
	return best
}

// fastest is the type that boots soonest, the SLO monitor's.
func (p *Predictive) fastest() int {
	best := p.cheapestOnDemand()
	for i, t := range p.cfg.Types {
		if !t.Spot && !p.unusable[i] && t.Launch < p.cfg.Types[best].Launch {
			best = i
		}
	}
	return best
}

func (p *Predictive) Decide(o *Observation) Decision {
	cfg := &p.cfg
	p.launch, p.release = p.launch[:0], p.release[:0]
	if !p.started {
		p.started, p.nextStep = true, o.Now+cfg.Step
	}
	p.stepMax = max(p.stepMax, o.Rate)
	// Spot warnings: a standby at once.
	for _, in := range o.Fleet {
		if in.Warned() && !p.warnedSeen[in.ID] {
			p.warnedSeen[in.ID] = true
			if cfg.Standby >= 0 {
				p.launch = append(p.launch, cfg.Standby)
			}
		}
	}
	// The SLO monitor.
	p.monitor = appendWindow(p.monitor, [2]uint64{o.Good, o.Bad}, int(cfg.MonitorWindow/cfg.TickEvery))
	var good, bad uint64
	for _, gb := range p.monitor {
		good, bad = good+gb[0], bad+gb[1]
	}
	if cfg.MonitorLaunch > 0 && good+bad > 0 && o.Now >= p.monitorNext &&
		float64(good)/float64(good+bad) < cfg.MonitorTarget {
		typ := p.fastest()
		for range cfg.MonitorLaunch {
			p.launch = append(p.launch, typ)
		}
		p.monitorNext = o.Now + max(cfg.Types[typ].Launch, cfg.TickEvery)
		p.monitor = p.monitor[:0]
	}
	if o.Now >= p.nextStep {
		p.nextStep += cfg.Step
		p.plan(o)
	}
	d := Decision{Launch: p.launch, Release: p.release, SpillAbove: math.Inf(1)}
	if cfg.Spill {
		ready, _ := gpusOf(cfg.Types, o.Fleet, o.Now)
		d.SpillAbove = cfg.Sizer.Capacity(float64(ready)) * cfg.SpillAt
	}
	return d
}

// plan runs the forecast and Greedy at a step boundary.
func (p *Predictive) plan(o *Observation) {
	cfg := &p.cfg
	measured := p.stepMax
	cfg.Forecaster.Observe(measured)
	p.stepMax = 0
	f := cfg.Forecaster.Forecast(cfg.Horizon)
	need := make([]float64, len(f))
	for t, r := range f {
		if t < cfg.Floor {
			r = max(r, measured)
		}
		need[t] = cfg.Sizer.Need(r)*(1+cfg.Headroom) + cfg.WarmPool
	}
	// Running instances, per type, by the step they serve from; launches
	// made at this tick (standbys, the monitor's) count as running.
	nt := len(cfg.Types)
	byType := make([][]Instance, nt)
	for _, in := range o.Fleet {
		if !in.Warned() {
			byType[in.Type] = append(byType[in.Type], in)
		}
	}
	running := make([][]int, nt)
	for typ, ins := range byType {
		keepOrder(ins)
		for _, in := range ins {
			running[typ] = append(running[typ], launchSteps(max(in.ReadyAt-o.Now, 0), cfg.Step))
		}
	}
	for _, typ := range p.launch {
		running[typ] = append(running[typ], launchSteps(cfg.Types[typ].Launch, cfg.Step))
	}
	g := Greedy(GreedyInput{Need: need, Step: cfg.Step, Types: cfg.Types, Unusable: p.unusable, Running: running})
	clear(p.keepIDs)
	for typ, ins := range byType {
		for k, in := range ins {
			if k < g.Keep[typ] {
				p.keepIDs[in.ID] = true
			}
		}
	}
	for typ, n := range g.Launch {
		for range n {
			p.launch = append(p.launch, typ)
		}
	}
	for _, in := range o.Fleet {
		if in.Warned() {
			continue
		}
		if p.keepIDs[in.ID] {
			p.off.needed(in.ID)
			continue
		}
		// Surplus long enough, and past the time already paid for.
		if p.off.surplus(in.ID, o.Now) && o.Now-in.LaunchedAt >= cfg.Types[in.Type].BillingMinimum {
			p.release = append(p.release, in.ID)
			p.off.needed(in.ID)
		}
	}
}

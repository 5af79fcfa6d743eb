package provision

import (
	"fmt"
	"math"
	"time"
)

// Verify checks a provision against its application without trusting how it
// was made: it recomputes every module's rate, every configuration's
// throughput from the application's profiles, every machine's worst-case
// latency under the provision's dispatch model, and the cost. It is the
// property every planner's output must have:
//
//   - every configuration is a profiled point, and meets its module's
//     budget;
//   - every source-to-sink path's budgets, and so its worst cases, sum to at
//     most the SLO;
//   - a module's configurations are assigned exactly its rate plus its
//     dummies, and no configuration more than its machines sustain (nor
//     more dummies than its rate);
//   - only the last configuration of a module has a fractional machine
//     count;
//   - every configuration fits its hardware's memory;
//   - the stated worst cases are the recomputed ones, and the stated cost
//     is the sum of price × machines.
//
// Tolerances are a nanosecond per module for latencies and a relative 1e-6
// for rates and costs.
func Verify(app *App, p *Provision) error {
	in, err := compile(app)
	if err != nil {
		return err
	}
	if p == nil {
		return fmt.Errorf("no provision")
	}
	switch p.Options.Dispatch {
	case BatchAware, MachineThroughput, RoundRobin:
	default:
		return fmt.Errorf("provision has unknown dispatch %d", int(p.Options.Dispatch))
	}
	if len(p.Modules) != len(in.names) {
		return fmt.Errorf("provision has %d modules, the application %d", len(p.Modules), len(in.names))
	}
	const latTol = 1e-9 // seconds
	relTol := func(x float64) float64 { return 1e-6 * math.Max(1, math.Abs(x)) }
	hw := map[string]Hardware{}
	for _, h := range app.Hardware {
		hw[h.Name] = h
	}
	total := 0.0
	for m, mp := range p.Modules {
		mod := app.Modules[m]
		where := fmt.Sprintf("module %s", mod.Name)
		if mp.Name != mod.Name {
			return fmt.Errorf("%s: provision has module %q in its place", where, mp.Name)
		}
		if math.Abs(mp.Rate-in.rate[m]) > relTol(in.rate[m]) {
			return fmt.Errorf("%s: rate %g, the application gives %g", where, mp.Rate, in.rate[m])
		}
		if mp.DummyRate < 0 || !finite(mp.DummyRate) {
			return fmt.Errorf("%s: dummy rate %g", where, mp.DummyRate)
		}
		if len(mp.Configs) == 0 {
			return fmt.Errorf("%s: no configurations", where)
		}
		budget := mp.Budget.Seconds()
		var rateSum, dummySum, cost, modWorst float64
		w := 0.0
		for _, c := range mp.Configs {
			w += c.Rate
		}
		for i, c := range mp.Configs {
			cw := fmt.Sprintf("%s, configuration %d (%s b=%d e=%d)", where, i, c.Hardware, c.Batch, c.Concurrency)
			h, ok := hw[c.Hardware]
			if !ok {
				return fmt.Errorf("%s: unknown hardware", cw)
			}
			if !profiled(mod, c) {
				return fmt.Errorf("%s: latency %v is not a profiled point of the module", cw, c.Latency)
			}
			if h.Memory > 0 && mod.Memory > 0 && mod.Memory > h.Memory/int64(c.Concurrency) {
				return fmt.Errorf("%s: %d instances of %d bytes do not fit the hardware's %d bytes", cw, c.Concurrency, mod.Memory, h.Memory)
			}
			tput := float64(c.Batch) * float64(c.Concurrency) / c.Latency.Seconds()
			if c.Machines < 0 || !finite(c.Machines) || c.Rate < 0 || !finite(c.Rate) {
				return fmt.Errorf("%s: %g machines at %g req/s", cw, c.Machines, c.Rate)
			}
			full := math.Floor(c.Machines + 1e-9)
			last := i == len(mp.Configs)-1
			if !last && math.Abs(c.Machines-math.Round(c.Machines)) > 1e-9 {
				return fmt.Errorf("%s: %g machines; only the last configuration may be fractional", cw, c.Machines)
			}
			if c.DummyRate < 0 || !finite(c.DummyRate) || c.DummyRate > c.Rate+relTol(c.Rate) {
				return fmt.Errorf("%s: %g dummy req/s of %g req/s", cw, c.DummyRate, c.Rate)
			}
			part := c.Rate - full*tput
			if part < -relTol(c.Rate) || part > tput+relTol(tput) {
				return fmt.Errorf("%s: rate %g does not fit %g machines of %g req/s", cw, c.Rate, c.Machines, tput)
			}
			// The machine count says whether there is a partial machine;
			// without one, what the rate has beyond the full machines is
			// rounding. (Deciding by the rate would take a small partial
			// machine of a module with a large rate for rounding, and
			// skip its latency.)
			if c.Machines-full <= 1e-9 {
				part = 0
			} else if part <= 0 {
				return fmt.Errorf("%s: %g machines for %g req/s at %g req/s each", cw, c.Machines, c.Rate, tput)
			}
			if math.Abs(c.Machines-(full+part/tput)) > 1e-6 {
				return fmt.Errorf("%s: %g machines for %g req/s at %g req/s each", cw, c.Machines, c.Rate, tput)
			}
			if part > 0 && !last {
				return fmt.Errorf("%s: a partial machine on a configuration other than the last", cw)
			}
			d, b, e := c.Latency.Seconds(), float64(c.Batch), float64(c.Concurrency)
			worst := 0.0
			if full > 0 {
				switch p.Options.Dispatch {
				case BatchAware:
					worst = d + b/w // Theorem 1
				case MachineThroughput:
					worst = d + b/tput
				case RoundRobin:
					worst = 2 * d
				}
			}
			if part > 0 {
				collect := b / part
				if p.Options.Dispatch == RoundRobin {
					collect = e * b / part
				}
				worst = math.Max(worst, d+collect)
			}
			if worst > budget+latTol {
				return fmt.Errorf("%s: worst-case latency %v exceeds the budget %v", cw, seconds(worst), mp.Budget)
			}
			modWorst = math.Max(modWorst, worst)
			rateSum += c.Rate
			dummySum += c.DummyRate
			cost += h.PricePerHour * c.Machines
			w -= c.Rate
		}
		if math.Abs(rateSum-(mp.Rate+mp.DummyRate)) > relTol(mp.Rate) {
			return fmt.Errorf("%s: configurations take %g req/s, rate plus dummies is %g", where, rateSum, mp.Rate+mp.DummyRate)
		}
		if math.Abs(dummySum-mp.DummyRate) > relTol(mp.Rate) {
			return fmt.Errorf("%s: configurations hold %g dummy req/s, the module %g", where, dummySum, mp.DummyRate)
		}
		if math.Abs(cost-mp.CostPerHour) > relTol(cost) {
			return fmt.Errorf("%s: cost %g per hour, its configurations cost %g", where, mp.CostPerHour, cost)
		}
		if math.Abs(mp.WorstCase.Seconds()-modWorst) > latTol {
			return fmt.Errorf("%s: states a worst case of %v, its configurations have %v", where, mp.WorstCase, seconds(modWorst))
		}
		total += cost
	}
	if math.Abs(total-p.CostPerHour) > relTol(total) {
		return fmt.Errorf("provision cost %g per hour, its modules cost %g", p.CostPerHour, total)
	}
	// Paths: the longest budget path must fit (this covers every path,
	// however many there are).
	through := longestThrough(in, func(m int) float64 { return p.Modules[m].Budget.Seconds() })
	for m, l := range through {
		if l > in.slo+latTol*float64(in.pathLen[m]) {
			return fmt.Errorf("a path through module %s has budgets summing to %v, over the SLO %v", in.names[m], seconds(l), app.SLO)
		}
	}
	for _, m := range p.Modules {
		if m.WorstCase > m.Budget+time.Nanosecond {
			return fmt.Errorf("module %s: worst case %v over its budget %v", m.Name, m.WorstCase, m.Budget)
		}
	}
	return nil
}

// profiled reports whether c is one of mod's points on its hardware.
func profiled(mod Module, c ConfigProvision) bool {
	for _, pr := range mod.Profiles {
		if pr.Hardware != c.Hardware {
			continue
		}
		for _, pt := range pr.Points {
			if pt.Batch == c.Batch && pt.Concurrency == c.Concurrency && pt.Latency == c.Latency {
				return true
			}
		}
	}
	return false
}

// Package cloudscale decides, over time, which cloud instances serve a
// Symphony cluster: when to launch them, of which type, when to let them
// go, and which requests to spill to a serverless burst pool while new
// instances boot. It is the runtime half of cost-aware serving (MArk, seed
// 004; Scrooge's warm pool and turn-off delay, seed 000), where the cost
// planner (partition/provision) answers the static question.
//
// Like the scheduler's cores it is a pure state machine: a Policy takes an
// Observation (the time, the measured arrival rate, the requests that ended,
// the fleet) every tick and returns a Decision (instances to launch and to
// release, the rate above which arrivals spill). It reads no clock and
// starts no goroutine, so the simulator (bench/sim, RunCloud) drives it on
// virtual time, and a live controller can drive it on real time.
//
// Vocabulary:
//
//   - need: the GPUs (a fraction) a total request rate keeps busy, from the
//     sizing of partition.SizePart over the workload's model mix (Sizer).
//   - tick: how often a policy is asked (5 s, MArk's sample window P_s).
//   - step: the forecasting unit (1 min, MArk's P_u); forecasts look
//     Horizon steps ahead (P_w).
//   - launch overhead O_i: what an instance costs while it boots (its price
//     times its launch delay), paid before it serves anything.
//   - spill: arrivals beyond the online capacity go to the burst pool
//     (Admission), as MArk sends them to Lambda.
//
// Policies: Static (peak provisioning), Reactive (target tracking, like a
// Kubernetes HPA or SageMaker's autoscaling), Predictive (MArk: forecast,
// Greedy provisioning ahead by the launch delay, an SLO monitor,
// spill-over, and spot instances with on-demand standbys), all of which
// size one mix of models on one GPU kind, and Replanner (Scrooge: an
// application's scaling factors estimated online, a new provision when
// they drift, a warm pool and a turn-off delay), which rents each of the
// plan's hardware kinds, CPU machines for its CPU modules included, as an
// instance type that names the kind (InstanceType.Hardware, CPUs).
package cloudscale

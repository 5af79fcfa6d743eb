package report

import "github.com/symphony-serving/symphony/partition/epoch"

// EpochRecordOf is the report's record of one epoch the controller core
// decided (epoch.Record), start seconds into the run: the simulator's epoch
// job and the live controller of `demo --controller` report alike.
func EpochRecordOf(r *epoch.Record, start float64) EpochRecord {
	return EpochRecord{
		Start: start, BadRate: r.BadRate, IdleFraction: r.IdleFraction,
		GPUsBefore: r.GPUsBefore, Need: r.Need, GPUs: r.GPUs, AdviceGPUs: r.AdviceGPUs, CapacityLimited: r.CapacityLimited,
		Engine: r.Engine, RateImbalance: r.RateImbalance, MemoryImbalance: r.MemoryImbalance, Disruption: r.Disruption,
		Moves: r.Moves, Skipped: r.Skipped, PartGPUs: r.PartGPUs,
	}
}

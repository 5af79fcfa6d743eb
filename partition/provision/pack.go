package provision

import (
	"cmp"
	"math"
	"slices"
)

// Packing is a provision as instances to rent (Scrooge §3.3-3.4): every full
// machine of a configuration is an instance of its own, and the partial
// machines, each a fraction of an instance, are packed onto shared
// instances of their hardware kind, best fit. A provision's CostPerHour
// charges partial machines by their occupancy, as the papers count; a
// packing's is what the cloud bills.
type Packing struct {
	Instances []PackedInstance
	// CostPerHour is the instances' price.
	CostPerHour float64
}

// PackedInstance is one rented instance and what runs on it. Its Kind is
// GPU when any of its shares is a GPU module's, CPU when all are CPU
// modules': partial machines of one hardware kind share instances whatever
// their modules' kinds.
type PackedInstance struct {
	Hardware string
	Kind     Kind
	Shares   []PackedShare
}

// PackedShare is a configuration's use of an instance: the whole of it for
// a full machine, its occupancy for a partial one.
type PackedShare struct {
	Module   string
	Config   int // index into the module's Configs
	Fraction float64
}

// Count returns how many instances of hw the packing rents.
func (pk Packing) Count(hw string) int {
	n := 0
	for _, in := range pk.Instances {
		if in.Hardware == hw {
			n++
		}
	}
	return n
}

// packEpsilon absorbs the floating-point sum of fractions that fill an
// instance exactly.
const packEpsilon = 1e-9

// Pack turns a provision into instances: full machines one each, partial
// machines packed per hardware kind by PackFractions.
func Pack(app *App, p *Provision) Packing {
	price := map[string]float64{}
	for _, h := range app.Hardware {
		price[h.Name] = h.PricePerHour
	}
	var pk Packing
	type partial struct {
		share PackedShare
		kind  Kind
	}
	partials := map[string][]partial{}
	var order []string
	for i, mp := range p.Modules {
		kind := app.Modules[i].Kind
		for ci, c := range mp.Configs {
			full := math.Floor(c.Machines + packEpsilon)
			for range int(full) {
				pk.Instances = append(pk.Instances, PackedInstance{Hardware: c.Hardware, Kind: kind, Shares: []PackedShare{{Module: mp.Name, Config: ci, Fraction: 1}}})
			}
			if f := c.Machines - full; f > packEpsilon {
				if _, ok := partials[c.Hardware]; !ok {
					order = append(order, c.Hardware)
				}
				partials[c.Hardware] = append(partials[c.Hardware], partial{PackedShare{Module: mp.Name, Config: ci, Fraction: f}, kind})
			}
		}
	}
	for _, hw := range order {
		ps := partials[hw]
		fracs := make([]float64, len(ps))
		for i, p := range ps {
			fracs[i] = p.share.Fraction
		}
		for _, bin := range PackFractions(fracs) {
			in := PackedInstance{Hardware: hw, Kind: CPU}
			for _, i := range bin {
				in.Shares = append(in.Shares, ps[i].share)
				if ps[i].kind == GPU {
					in.Kind = GPU // a machine that runs a GPU module's batches needs its GPU
				}
			}
			pk.Instances = append(pk.Instances, in)
		}
	}
	for _, in := range pk.Instances {
		pk.CostPerHour += price[in.Hardware]
	}
	return pk
}

// exactPackLimit is the most fractions PackFractions packs exactly; beyond
// it, best fit decreasing.
const exactPackLimit = 12

// PackFractions packs items of the given sizes, each in (0, 1], into the
// fewest bins of size 1 and returns the bins as lists of item indices. Up
// to exactPackLimit items it finds the fewest bins by branch and bound
// (largest items first, a bin count from the sizes' sum up); beyond, it
// packs best fit decreasing (each item into the fullest bin it fits),
// within 11/9 of the fewest plus one.
func PackFractions(sizes []float64) [][]int {
	idx := make([]int, len(sizes))
	for i := range idx {
		idx[i] = i
	}
	// Largest first; ties by index, so that the result is deterministic.
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(sizes[b], sizes[a]) })
	best := bestFitDecreasing(sizes, idx)
	if len(sizes) > exactPackLimit {
		return best
	}
	sum := 0.0
	for _, s := range sizes {
		sum += s
	}
	for k := max(1, int(math.Ceil(sum-packEpsilon))); k < len(best); k++ {
		if bins, ok := packInto(sizes, idx, k); ok {
			return bins
		}
	}
	return best
}

func bestFitDecreasing(sizes []float64, idx []int) [][]int {
	var bins [][]int
	var load []float64
	for _, i := range idx {
		b := -1
		for j := range bins {
			if load[j]+sizes[i] <= 1+packEpsilon && (b < 0 || load[j] > load[b]) {
				b = j
			}
		}
		if b < 0 {
			bins, load = append(bins, nil), append(load, 0)
			b = len(bins) - 1
		}
		bins[b] = append(bins[b], i)
		load[b] += sizes[i]
	}
	return bins
}

// packInto tries to pack the items, largest first, into k bins.
func packInto(sizes []float64, idx []int, k int) ([][]int, bool) {
	bins := make([][]int, k)
	load := make([]float64, k)
	var place func(n int) bool
	place = func(n int) bool {
		if n == len(idx) {
			return true
		}
		i := idx[n]
		for b := range k {
			if load[b]+sizes[i] > 1+packEpsilon {
				continue
			}
			load[b] += sizes[i]
			bins[b] = append(bins[b], i)
			if place(n + 1) {
				return true
			}
			load[b] -= sizes[i]
			bins[b] = bins[b][:len(bins[b])-1]
			if load[b] < packEpsilon {
				break // the empty bins are all alike: trying another is the same
			}
		}
		return false
	}
	if !place(0) {
		return nil, false
	}
	return bins, true
}

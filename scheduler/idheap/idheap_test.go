package idheap

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// The heap must agree with a sorted slice through random pushes, pops,
// removals and key changes.
func TestHeapMatchesSortedOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 64
	key := make([]int, n)
	less := func(a, b int) bool {
		if key[a] != key[b] {
			return key[a] < key[b]
		}
		return a < b
	}
	h := New(n, less)
	in := map[int]bool{}
	for step := 0; step < 20000; step++ {
		id := rng.IntN(n)
		switch op := rng.IntN(4); {
		case op == 0 && !in[id]:
			key[id] = rng.IntN(100)
			h.Push(id)
			in[id] = true
		case op == 1 && h.Len() > 0:
			got := h.Pop()
			delete(in, got)
			for other := range in {
				if less(other, got) {
					t.Fatalf("step %d: popped %d (key %d) but %d (key %d) is smaller", step, got, key[got], other, key[other])
				}
			}
		case op == 2:
			h.Remove(id)
			delete(in, id)
		case op == 3:
			key[id] = rng.IntN(100)
			h.Fix(id)
			in[id] = true
		}
		if h.Len() != len(in) {
			t.Fatalf("step %d: heap has %d IDs, want %d", step, h.Len(), len(in))
		}
		for id := range n {
			if h.Contains(id) != in[id] {
				t.Fatalf("step %d: Contains(%d) = %v", step, id, h.Contains(id))
			}
		}
	}
	var want []int
	for id := range in {
		want = append(want, id)
	}
	slices.SortFunc(want, func(a, b int) int {
		if less(a, b) {
			return -1
		}
		return 1
	})
	for _, w := range want {
		if got := h.Pop(); got != w {
			t.Fatalf("drain: got %d, want %d", got, w)
		}
	}
}

func TestHeapAllocationFree(t *testing.T) {
	key := make([]int, 16)
	h := New(16, func(a, b int) bool { return key[a] < key[b] || key[a] == key[b] && a < b })
	for id := range 16 {
		h.Push(id)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		id := h.Pop()
		key[id] += 3
		h.Push(id)
		h.Fix(h.Top())
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per cycle, want 0", allocs)
	}
}

// AppendWhile must append exactly the IDs whose key is at most a bound,
// without allocating once its buffer has grown.
func TestAppendWhile(t *testing.T) {
	const n = 200
	h, key := randomHeap(3, n)
	bound := 0
	keep := func(id int) bool { return key[id] <= bound }
	var buf []int
	for _, b := range []int{-1, 0, 5, 100, 499, 999} {
		bound = b
		var want []int
		for id := range n {
			if key[id] <= b {
				want = append(want, id)
			}
		}
		buf = h.AppendWhile(buf[:0], keep)
		got := slices.Clone(buf)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("bound %d: appended %v, want %v", b, got, want)
		}
	}
	bound = 500
	if allocs := testing.AllocsPerRun(100, func() { buf = h.AppendWhile(buf[:0], keep) }); allocs != 0 {
		t.Fatalf("%v allocations per call, want 0", allocs)
	}
}

// CountWhile counts the IDs whose key is at most a bound, up to a limit,
// and visits few beyond the limit.
func TestCountWhile(t *testing.T) {
	const n = 200
	h, key := randomHeap(5, n)
	bound, visits := 0, 0
	keep := func(id int) bool { visits++; return key[id] <= bound }
	for _, b := range []int{-1, 0, 5, 100, 499, 999} {
		bound = b
		all := 0
		for id := range n {
			if key[id] <= b {
				all++
			}
		}
		for _, limit := range []int{0, 1, 3, 50, n} {
			visits = 0
			if got, want := h.CountWhile(keep, limit), min(all, limit); got != want {
				t.Fatalf("bound %d, limit %d: counted %d, want %d", b, limit, got, want)
			}
			if visits > 2*limit+1 {
				t.Errorf("bound %d, limit %d: %d visits", b, limit, visits)
			}
		}
	}
}

// randomHeap is a heap of n IDs with keys drawn from [0, 1000), seeded.
func randomHeap(seed uint64, n int) (*Heap[int], []int) {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	key := make([]int, n)
	h := New(n, func(a, b int) bool { return key[a] < key[b] || key[a] == key[b] && a < b })
	for id := range n {
		key[id] = rng.IntN(1000)
		h.Push(id)
	}
	return h, key
}

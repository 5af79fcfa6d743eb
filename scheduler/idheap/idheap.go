// Package idheap is a min-heap of small dense integer IDs (models, GPUs)
// whose keys live with the caller. It remembers each ID's position, so a
// caller can fix or remove an ID after its key changed in O(log n), and it
// never allocates once its slices have grown: the scheduler's hot paths and
// the simulator's event loop use it.
package idheap

import "slices"

// ID is what the heap holds: a dense, non-negative integer identifier.
type ID interface {
	~int | ~int32 | ~uint32
}

// Heap orders IDs by less, which compares the callers' current keys and must
// break ties so that the order is total (by ID, for reproducible runs).
type Heap[T ID] struct {
	ids  []T
	pos  []int // pos[id] is id's index in ids, or -1
	less func(a, b T) bool
}

// New returns an empty heap for IDs 0..n-1.
func New[T ID](n int, less func(a, b T) bool) *Heap[T] {
	h := &Heap[T]{pos: make([]int, n), less: less}
	for i := range h.pos {
		h.pos[i] = -1
	}
	return h
}

// Clone returns an independent copy of h that orders by less. The keys
// live with the caller, so a caller that copies its keys (a cloned
// scheduler core) passes a less that reads the copy's keys; sharing h's
// less would order the copy by the original's keys.
func (h *Heap[T]) Clone(less func(a, b T) bool) *Heap[T] {
	return &Heap[T]{ids: slices.Clone(h.ids), pos: slices.Clone(h.pos), less: less}
}

// Len is the number of IDs in the heap.
func (h *Heap[T]) Len() int { return len(h.ids) }

// Top returns the least ID; the heap must not be empty.
func (h *Heap[T]) Top() T { return h.ids[0] }

// Contains reports whether id is in the heap.
func (h *Heap[T]) Contains(id T) bool { return h.pos[id] >= 0 }

// AppendWhile appends to dst the IDs that keep holds for, in no particular
// order, and returns it. keep must be a bound on the heap's order (a key
// at most some value): if it holds for an ID, it holds for every ID ordered
// before it. Only those IDs and their children are visited, so it takes
// O(len(appended)) steps; it allocates only if dst must grow.
func (h *Heap[T]) AppendWhile(dst []T, keep func(T) bool) []T {
	return h.appendFrom(dst, 0, keep)
}

func (h *Heap[T]) appendFrom(dst []T, i int, keep func(T) bool) []T {
	if i >= len(h.ids) || !keep(h.ids[i]) {
		return dst
	}
	dst = append(dst, h.ids[i])
	dst = h.appendFrom(dst, 2*i+1, keep)
	return h.appendFrom(dst, 2*i+2, keep)
}

// CountWhile counts the IDs that keep holds for, up to limit, and returns
// the count: a bound on the heap's order, as AppendWhile's. It visits at
// most about limit of them and their children, and allocates nothing.
func (h *Heap[T]) CountWhile(keep func(T) bool, limit int) int {
	return h.countFrom(0, keep, limit)
}

func (h *Heap[T]) countFrom(i int, keep func(T) bool, limit int) int {
	if limit <= 0 || i >= len(h.ids) || !keep(h.ids[i]) {
		return 0
	}
	n := 1
	n += h.countFrom(2*i+1, keep, limit-n)
	return n + h.countFrom(2*i+2, keep, limit-n)
}

// Push adds id, which must not be in the heap.
func (h *Heap[T]) Push(id T) {
	h.ids = append(h.ids, id)
	h.pos[id] = len(h.ids) - 1
	h.up(len(h.ids) - 1)
}

// Pop removes and returns the least ID.
func (h *Heap[T]) Pop() T {
	id := h.ids[0]
	h.Remove(id)
	return id
}

// Remove takes id out of the heap if it is there.
func (h *Heap[T]) Remove(id T) {
	i := h.pos[id]
	if i < 0 {
		return
	}
	last := len(h.ids) - 1
	if i != last {
		h.swap(i, last)
	}
	h.ids = h.ids[:last]
	h.pos[id] = -1
	if i < last {
		h.down(i)
		h.up(i)
	}
}

// Fix restores the order after id's key changed; it pushes id if absent.
func (h *Heap[T]) Fix(id T) {
	i := h.pos[id]
	if i < 0 {
		h.Push(id)
		return
	}
	h.down(i)
	h.up(i)
}

func (h *Heap[T]) swap(i, j int) {
	h.ids[i], h.ids[j] = h.ids[j], h.ids[i]
	h.pos[h.ids[i]] = i
	h.pos[h.ids[j]] = j
}

func (h *Heap[T]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(h.ids[i], h.ids[p]) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *Heap[T]) down(i int) {
	n := len(h.ids)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && h.less(h.ids[r], h.ids[l]) {
			c = r
		}
		if !h.less(h.ids[c], h.ids[i]) {
			return
		}
		h.swap(i, c)
		i = c
	}
}

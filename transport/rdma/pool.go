package rdma

import (
	"errors"
	"fmt"
	"sort"
	"sync"
)

// ErrPoolExhausted: no free extent of the receive pool is large enough;
// the read goes over TCP instead.
var ErrPoolExhausted = errors.New("rdma: receive pool exhausted")

// BufferPool hands out pieces of one registered Arena as receive buffers
// for READs, with explicit bookkeeping: every Buffer is out from Get until
// exactly one Put, and the pool knows each one, so that a buffer still
// being written by the NIC is never handed out twice, and Close can refuse
// while any is out. First fit over a sorted free list, coalescing on Put;
// sizes are rounded up to the alignment.
//
// Lifetime of a Buffer: from Get until Put. While a READ into it is posted
// it belongs to the NIC, and Put waits for that READ's completion (or for
// its queue pair's teardown, after which the NIC no longer writes it). A
// buffer whose READ may never end (its queue pair could not be destroyed)
// is Leaked instead: out for good, and the arena can no longer be unmapped.
type BufferPool struct {
	arena *Arena
	align int

	mu     sync.Mutex
	free   []extent    // sorted by offset, never adjacent
	out    map[int]int // offset -> length of each buffer out, leaked ones too
	leaked map[int]int // offset -> length of each buffer leaked
	inUse  int
	lost   int // bytes leaked
	closed bool
}

type extent struct{ off, n int }

// Buffer is one receive buffer: Len bytes at Off in the pool's arena.
type Buffer struct{ Off, Len int }

// PoolStats are a pool's counters. InUse and Buffers count leaked buffers
// too: they are never free again.
type PoolStats struct {
	Capacity, InUse, Buffers, LargestFree int
	// Leaked buffers, of LeakedBytes, are kept out for good (see Leak).
	Leaked, LeakedBytes int
}

// NewBufferPool makes the whole arena available in pieces aligned to
// align bytes (a power of two; 64 keeps buffers on their own cache lines).
func NewBufferPool(a *Arena, align int) (*BufferPool, error) {
	if align <= 0 || align&(align-1) != 0 {
		return nil, fmt.Errorf("rdma: pool alignment %d not a power of two", align)
	}
	n := a.Len() / align * align
	if n == 0 {
		return nil, fmt.Errorf("rdma: arena of %d bytes holds no %d-byte buffer", a.Len(), align)
	}
	return &BufferPool{arena: a, align: align, free: []extent{{0, n}}, out: map[int]int{}, leaked: map[int]int{}}, nil
}

// Get takes a buffer of at least n bytes.
func (p *BufferPool) Get(n int) (Buffer, error) {
	if n <= 0 {
		n = 1
	}
	size := (n + p.align - 1) / p.align * p.align
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return Buffer{}, errors.New("rdma: receive pool closed")
	}
	for i, e := range p.free {
		if e.n < size {
			continue
		}
		if e.n == size {
			p.free = append(p.free[:i], p.free[i+1:]...)
		} else {
			p.free[i] = extent{e.off + size, e.n - size}
		}
		p.out[e.off] = size
		p.inUse += size
		return Buffer{Off: e.off, Len: size}, nil
	}
	return Buffer{}, fmt.Errorf("%w: %d bytes wanted, %d of %d in use", ErrPoolExhausted, size, p.inUse, p.capacity())
}

// Put returns a buffer. Returning one the pool did not hand out, or one
// already returned, is an error and changes nothing.
func (p *BufferPool) Put(b Buffer) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n, ok := p.out[b.Off]; !ok || n != b.Len {
		return fmt.Errorf("rdma: put of buffer %+v that is not out", b)
	}
	if _, ok := p.leaked[b.Off]; ok {
		return fmt.Errorf("rdma: put of buffer %+v, which was leaked", b)
	}
	delete(p.out, b.Off)
	p.inUse -= b.Len
	i := sort.Search(len(p.free), func(i int) bool { return p.free[i].off > b.Off })
	e := extent{b.Off, b.Len}
	// Merge with the free extents on either side.
	if i > 0 && p.free[i-1].off+p.free[i-1].n == e.off {
		i--
		e = extent{p.free[i].off, p.free[i].n + e.n}
		p.free = append(p.free[:i], p.free[i+1:]...)
	}
	if i < len(p.free) && e.off+e.n == p.free[i].off {
		e.n += p.free[i].n
		p.free = append(p.free[:i], p.free[i+1:]...)
	}
	p.free = append(p.free, extent{})
	copy(p.free[i+1:], p.free[i:])
	p.free[i] = e
	return nil
}

// Leak keeps b, which is out, out of the pool for good: a READ into it was
// given up while the NIC may still write it (its queue pair could not be
// destroyed), so no later read may have it, and the arena stays mapped
// (Close refuses). The memory is lost rather than risk a late DMA
// changing a later read's bytes after its header was checked.
func (p *BufferPool) Leak(b Buffer) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n, ok := p.out[b.Off]; !ok || n != b.Len {
		return fmt.Errorf("rdma: leak of buffer %+v that is not out", b)
	}
	if _, ok := p.leaked[b.Off]; ok {
		return fmt.Errorf("rdma: buffer %+v leaked twice", b)
	}
	p.leaked[b.Off] = b.Len
	p.lost += b.Len
	return nil
}

// Bytes is b's memory in the arena.
func (p *BufferPool) Bytes(b Buffer) []byte {
	return p.arena.Bytes()[b.Off : b.Off+b.Len : b.Off+b.Len]
}

// Addr is b's address, as the NIC addresses it.
func (p *BufferPool) Addr(b Buffer) uint64 { return p.arena.Addr() + uint64(b.Off) }

// Stats returns the pool's counters.
func (p *BufferPool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	largest := 0
	for _, e := range p.free {
		largest = max(largest, e.n)
	}
	return PoolStats{Capacity: p.capacity(), InUse: p.inUse, Buffers: len(p.out), LargestFree: largest,
		Leaked: len(p.leaked), LeakedBytes: p.lost}
}

func (p *BufferPool) capacity() int { return p.arena.Len() / p.align * p.align }

// Close refuses further Gets, so that the arena may be unmapped. It fails,
// and changes nothing, while buffers are out: their READs may still write
// them. With leaked buffers it always fails: the arena must stay mapped.
func (p *BufferPool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.leaked) > 0 {
		return fmt.Errorf("rdma: receive pool not closed: %d buffers (%d bytes) leaked to queue pairs that were not destroyed, "+
			"which may still write them; the arena stays mapped", len(p.leaked), p.lost)
	}
	if len(p.out) > 0 {
		return fmt.Errorf("rdma: receive pool not closed: %d buffers (%d bytes) out", len(p.out), p.inUse)
	}
	p.closed = true
	return nil
}

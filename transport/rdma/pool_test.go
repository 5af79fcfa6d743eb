package rdma

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

func newTestPool(t *testing.T, size, align int) *BufferPool {
	t.Helper()
	a, err := MapArena(size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Unmap() })
	p, err := NewBufferPool(a, align)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBufferPoolBookkeeping(t *testing.T) {
	p := newTestPool(t, 4096, 64)
	a, err := p.Get(100) // rounded up to 128
	if err != nil || a.Off != 0 || a.Len != 128 {
		t.Fatalf("Get(100) = %+v, %v", a, err)
	}
	b, _ := p.Get(1)
	c, _ := p.Get(64)
	if b.Off != 128 || b.Len != 64 || c.Off != 192 {
		t.Fatalf("b %+v c %+v", b, c)
	}
	if st := p.Stats(); st.InUse != 256 || st.Buffers != 3 || st.Capacity != 4096 || st.LargestFree != 4096-256 {
		t.Fatalf("stats %+v", st)
	}
	if _, err := p.Get(4096); !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("Get beyond the free space: %v", err)
	}
	// Freeing the middle leaves a hole that a small buffer fits in and a
	// large one does not.
	if err := p.Put(b); err != nil {
		t.Fatal(err)
	}
	if err := p.Put(b); err == nil {
		t.Fatal("double Put accepted")
	}
	if err := p.Put(Buffer{Off: 4000, Len: 64}); err == nil {
		t.Fatal("Put of a buffer never handed out accepted")
	}
	if err := p.Put(Buffer{Off: a.Off, Len: 64}); err == nil {
		t.Fatal("Put with the wrong length accepted")
	}
	d, _ := p.Get(64)
	if d.Off != 128 {
		t.Fatalf("first fit: %+v, want the hole at 128", d)
	}
	if err := p.Close(); err == nil {
		t.Fatal("Close with buffers out accepted")
	}
	for _, x := range []Buffer{a, c, d} {
		if err := p.Put(x); err != nil {
			t.Fatal(err)
		}
	}
	if st := p.Stats(); st.InUse != 0 || st.Buffers != 0 || st.LargestFree != 4096 {
		t.Fatalf("all back, not coalesced: %+v", st)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close with nothing out: %v", err)
	}
	if _, err := p.Get(1); err == nil {
		t.Fatal("Get after Close")
	}
	if _, err := NewBufferPool(p.arena, 48); err == nil {
		t.Fatal("alignment 48 accepted")
	}
}

// Random Gets and Puts against a model: buffers never overlap, the pool
// counts exactly what is out, every byte is writable, and all of it
// coalesces back into one extent.
func TestBufferPoolRandom(t *testing.T) {
	p := newTestPool(t, 1<<16, 64)
	rng := rand.New(rand.NewPCG(1, 2))
	out := map[int]Buffer{}
	used := make([]bool, p.capacity())
	for step := 0; step < 20000; step++ {
		if len(out) > 0 && rng.IntN(2) == 0 {
			var b Buffer
			for _, b = range out {
				break
			}
			if err := p.Put(b); err != nil {
				t.Fatal(err)
			}
			delete(out, b.Off)
			for i := b.Off; i < b.Off+b.Len; i++ {
				used[i] = false
			}
			continue
		}
		n := 1 + rng.IntN(4000)
		b, err := p.Get(n)
		if errors.Is(err, ErrPoolExhausted) {
			continue
		}
		if err != nil || b.Len < n || b.Len%64 != 0 || b.Off%64 != 0 {
			t.Fatalf("Get(%d) = %+v, %v", n, b, err)
		}
		for i := b.Off; i < b.Off+b.Len; i++ {
			if used[i] {
				t.Fatalf("step %d: %+v overlaps a buffer out", step, b)
			}
			used[i] = true
		}
		buf := p.Bytes(b)
		buf[0], buf[len(buf)-1] = 1, 1
		out[b.Off] = b
		inUse := 0
		for _, x := range out {
			inUse += x.Len
		}
		if st := p.Stats(); st.InUse != inUse || st.Buffers != len(out) {
			t.Fatalf("step %d: stats %+v, model %d bytes in %d", step, st, inUse, len(out))
		}
	}
	for _, b := range out {
		if err := p.Put(b); err != nil {
			t.Fatal(err)
		}
	}
	if st := p.Stats(); st.LargestFree != st.Capacity || st.InUse != 0 {
		t.Fatalf("after returning everything: %+v", st)
	}
}

func TestArenaLifetime(t *testing.T) {
	a, err := MapArena(100)
	if err != nil {
		t.Fatal(err)
	}
	if a.Len()%4096 != 0 || a.Addr() == 0 || len(a.Bytes()) != a.Len() {
		t.Fatalf("arena of %d bytes at %#x", a.Len(), a.Addr())
	}
	a.Bytes()[0] = 7
	if err := a.Unmap(); err != nil {
		t.Fatal(err)
	}
	if a.Bytes() != nil || a.Addr() != 0 {
		t.Fatal("unmapped arena still has memory")
	}
	if err := a.Unmap(); err == nil {
		t.Fatal("second Unmap accepted")
	}
	if _, err := MapArena(0); err == nil {
		t.Fatal("empty arena mapped")
	}
}

// A leaked buffer is never free again, is counted, cannot be Put, and
// keeps the pool (so the arena) from closing.
func TestBufferPoolLeak(t *testing.T) {
	p := newTestPool(t, 4096, 64)
	a, _ := p.Get(100)
	b, _ := p.Get(64)
	if err := p.Leak(a); err != nil {
		t.Fatal(err)
	}
	if err := p.Leak(a); err == nil {
		t.Fatal("leaked twice")
	}
	if err := p.Leak(Buffer{Off: 1024, Len: 64}); err == nil {
		t.Fatal("leaked a buffer that is not out")
	}
	if err := p.Put(a); err == nil {
		t.Fatal("put of a leaked buffer")
	}
	if err := p.Put(b); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Leaked != 1 || st.LeakedBytes != 128 || st.InUse != 128 || st.Buffers != 1 || st.LargestFree != 4096-128 {
		t.Fatalf("stats %+v", st)
	}
	var got []Buffer
	for range 10 {
		c, err := p.Get(128)
		if err != nil {
			t.Fatal(err)
		}
		if c.Off < a.Off+a.Len && a.Off < c.Off+c.Len {
			t.Fatalf("%+v overlaps the leaked %+v", c, a)
		}
		got = append(got, c)
	}
	for _, c := range got {
		if err := p.Put(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(); err == nil || !strings.Contains(err.Error(), "leaked") {
		t.Fatalf("Close with a leaked buffer: %v", err)
	}
}

package rdma

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"unsafe"
)

// Arena is memory mapped from the kernel (an anonymous mmap), outside the
// Go heap: the only memory this package lets a NIC touch. The Go garbage
// collector neither moves nor frees it, and the race detector does not
// watch it (as it cannot watch a NIC's DMA).
//
// Lifetime: an Arena lives from MapArena until Unmap, which its owner calls
// once, after every memory region registered over it is deregistered (so
// the NIC no longer reads or writes it) and after the last use of any
// slice of it by Go code; a slice used after Unmap faults. Who owns which
// Arena: each region of a frontend's input store (the store decides when a
// region is freed, the Exporter maps and unmaps it), and a backend Reader's
// receive buffers (the Reader, from NewReader to Close).
type Arena struct {
	mu sync.Mutex
	b  []byte // nil once unmapped
}

// MapArena maps size bytes (rounded up to whole pages), zeroed.
func MapArena(size int) (*Arena, error) {
	if size <= 0 {
		return nil, fmt.Errorf("rdma: arena of %d bytes", size)
	}
	page := syscall.Getpagesize()
	size = (size + page - 1) / page * page
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("rdma: mmap of %d bytes: %w", size, err)
	}
	return &Arena{b: b}, nil
}

// Bytes returns the whole arena; nil after Unmap.
func (a *Arena) Bytes() []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.b
}

// Len is the arena's size in bytes.
func (a *Arena) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.b)
}

// Addr is the arena's address, as a NIC addresses it.
func (a *Arena) Addr() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.b == nil {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(&a.b[0])))
}

// errUnmapped: the arena was unmapped.
var errUnmapped = errors.New("rdma: arena already unmapped")

// Unmap returns the memory to the kernel. See the type's lifetime rules.
func (a *Arena) Unmap() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.b == nil {
		return errUnmapped
	}
	err := syscall.Munmap(a.b)
	a.b = nil
	return err
}

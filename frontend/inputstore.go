package frontend

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/symphony-serving/symphony/transport/rdma"
	"github.com/symphony-serving/symphony/transport/wire"
)

// ErrStoreFull: the input store holds as many bytes as it may; the request
// is shed rather than queued.
var ErrStoreFull = errors.New("frontend: input store full")

// ErrStoreClosed: the store was closed; nothing more is stored.
var ErrStoreClosed = errors.New("frontend: input store closed")

// InputStore holds the inputs of queued requests in registered regions, so
// that backends can pull them with one-sided reads (region, offset, length)
// without the scheduler ever touching them. Inputs are carved out of
// fixed-size regions by a bump allocator; a region is reused once every
// input in it is released. Regions are long-lived, which is what an RDMA
// memory registration needs; an input larger than a region gets a region of
// its own, freed with it.
//
// Each input carries its request's key: a read whose key does not match
// what lives at that place (the request ended and the space was reused)
// fails rather than return another request's bytes. Over TCP the store
// checks the key itself. Over RDMA it cannot see the reads, so a store
// made for RDMA (StoreConfig.Seal set) frames each input in a slot whose
// header (transport/rdma: key, length, state, sealed) the backend checks
// after its READ, zeroes a slot's header when its space is given back,
// and reuses no space until StoreConfig.ReuseDelay after that. The
// transport/rdma package documentation gives the argument that a READ
// accepted by those checks holds its own request's bytes.
//
// Memory: each region's bytes come from StoreConfig.Regions (Go memory by
// default; mapped and registered memory from an rdma.Exporter), are held
// from the region's creation to its release (when an oversized input is
// released, or when the store is closed and the region holds no input),
// and are then handed back to the allocator, which may unmap them: no
// slice of a region may be used after its release.
type InputStore struct {
	regionSize int
	maxBytes   int64
	regionMem  RegionAllocator
	seal       uint64 // 0: inputs are not framed in slots (TCP only)
	reuseDelay time.Duration
	now        func() time.Time

	mu      sync.Mutex
	regions []*region
	free    []*region // empty, reusable regions
	cur     *region
	live    map[uint64]*input
	bytes   int64 // bytes of all regions
	closed  bool
}

// RegionAllocator provides the memory of an InputStore's regions: the seam
// through which a store that backends READ gets mapped, registered memory
// (rdma.Exporter) instead of Go memory.
type RegionAllocator interface {
	// AllocRegion returns size bytes for region id. shared is true for a
	// region that holds many inputs and lives as long as the store, false
	// for the region of one oversized input, released with it.
	AllocRegion(id uint32, size int, shared bool) []byte
	// FreeRegion releases region id's memory: the store no longer uses it,
	// and no input lives in it.
	FreeRegion(id uint32)
}

// goRegions allocates regions from the Go heap.
type goRegions struct{}

func (goRegions) AllocRegion(_ uint32, size int, _ bool) []byte { return make([]byte, size) }
func (goRegions) FreeRegion(uint32)                             {}

// StoreConfig configures an InputStore.
type StoreConfig struct {
	// RegionSize is the size of each shared region; MaxBytes bounds all
	// regions together.
	RegionSize int
	MaxBytes   int64
	// Regions allocates the regions' memory; nil for Go memory.
	Regions RegionAllocator
	// Seal, if not zero, frames each input in a slot with a header sealed
	// by it, for backends' RDMA READs (rdma.Exporter.Seal).
	Seal uint64
	// ReuseDelay keeps space given back from reuse this long: longer than
	// any READ a backend accepts (rdma.Exporter.ReuseDelay).
	ReuseDelay time.Duration
	// Now is the clock of the reuse delay (time.Now by default).
	Now func() time.Time
}

type region struct {
	id      uint32
	buf     []byte
	used    int
	live    int
	retired bool // no more allocations from it
	single  bool // holds one oversized input
	// quietAt is when the space last given back in the region may be
	// reused (ReuseDelay after it was given back).
	quietAt time.Time
}

type input struct {
	ref   wire.InputRef
	ready chan struct{} // closed when the bytes are in place; nil if they always were
	err   error         // set before ready closes, if preprocessing failed
	done  bool          // ready was called
	// released: the request ended while preprocessing still writes into
	// its bytes, or a read still sends them; the space is given back when
	// both are done.
	released bool
	pins     int // reads sending the bytes in place
}

// NewInputStore returns a store of regions of regionSize bytes of Go
// memory, holding at most maxBytes in all, read over TCP only.
func NewInputStore(regionSize int, maxBytes int64) *InputStore {
	return &InputStore{regionSize: regionSize, maxBytes: maxBytes, regionMem: goRegions{}, now: time.Now, live: make(map[uint64]*input)}
}

// NewInputStoreWith returns a store configured by c.
func NewInputStoreWith(c StoreConfig) (*InputStore, error) {
	if c.RegionSize <= 0 || c.MaxBytes < int64(c.RegionSize) || (c.Seal != 0 && c.RegionSize < rdma.SlotSize(0)) {
		return nil, fmt.Errorf("frontend: input store of regions of %d bytes, %d in all", c.RegionSize, c.MaxBytes)
	}
	if c.ReuseDelay < 0 || (c.Seal != 0 && c.ReuseDelay == 0) {
		// A sealed store is read by one-sided READs, which are only safe
		// if given-back space stays unused for longer than any READ a
		// backend accepts (the transport/rdma safety argument).
		return nil, fmt.Errorf("frontend: reuse delay %v; a store read over RDMA (a seal set) needs a positive one", c.ReuseDelay)
	}
	if c.Regions == nil {
		c.Regions = goRegions{}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return &InputStore{regionSize: c.RegionSize, maxBytes: c.MaxBytes, regionMem: c.Regions, seal: c.Seal,
		reuseDelay: c.ReuseDelay, now: c.Now, live: make(map[uint64]*input)}, nil
}

// Put stores a copy of data as the input of request key and returns where
// it lives. The copy is made under the store's lock, so that a read that
// finds the input (after the task went out over the network, which the race
// detector cannot see) is ordered after it.
func (s *InputStore) Put(key uint64, data []byte) (wire.InputRef, error) {
	ref, _, _, err := s.alloc(key, len(data), false, data)
	return ref, err
}

// Reserve reserves n bytes for the input of request key, to be filled by
// preprocessing while the request waits. Reads wait until the returned
// ready function is called (with the preprocessing error, if any); it must
// be called exactly once, after the last write to buf, even if the input
// was released meanwhile. buf belongs to the caller until ready is called,
// and must not be touched after: its space may then be reused.
func (s *InputStore) Reserve(key uint64, n int) (ref wire.InputRef, buf []byte, ready func(error), err error) {
	return s.alloc(key, n, true, nil)
}

func (s *InputStore) alloc(key uint64, n int, pending bool, data []byte) (ref wire.InputRef, buf []byte, ready func(error), err error) {
	if n > wire.MaxInputSize {
		return wire.InputRef{}, nil, nil, fmt.Errorf("%w: %d bytes, over the %d limit", ErrBadInput, n, wire.MaxInputSize)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return wire.InputRef{}, nil, nil, ErrStoreClosed
	}
	if _, dup := s.live[key]; dup {
		return wire.InputRef{}, nil, nil, fmt.Errorf("frontend: input key %d in use", key)
	}
	size, hdr := n, 0
	if s.seal != 0 {
		size, hdr = rdma.SlotSize(n), rdma.HeaderSize
	}
	r, err := s.regionFor(size)
	if err != nil {
		return wire.InputRef{}, nil, nil, err
	}
	start := r.used + hdr
	ref = wire.InputRef{Region: r.id, Offset: uint64(start), Length: uint32(n), Key: key}
	buf = r.buf[start : start+n : start+n]
	copy(buf, data)
	if s.seal != 0 {
		st := rdma.SlotReady
		if pending {
			st = rdma.SlotPending
		}
		rdma.PutHeader(r.buf[r.used:start], s.seal, key, uint32(n), st)
	}
	r.used += size
	r.live++
	in := &input{ref: ref}
	if pending {
		in.ready = make(chan struct{})
		ready = func(err error) {
			s.mu.Lock()
			in.err, in.done = err, true
			switch {
			case in.released && in.pins == 0:
				s.unref(in)
			case s.seal != 0 && !in.released:
				st := rdma.SlotPreprocessed
				if err != nil {
					st = rdma.SlotFailed
				}
				rdma.PutHeader(s.header(in), s.seal, key, uint32(n), st)
			}
			s.mu.Unlock()
			close(in.ready)
		}
	}
	s.live[key] = in
	return ref, buf, ready, nil
}

// header is in's slot header; under mu, with in's region held.
func (s *InputStore) header(in *input) []byte {
	off := in.ref.Offset - rdma.HeaderSize
	return s.regions[in.ref.Region].buf[off : off+rdma.HeaderSize]
}

func (s *InputStore) regionFor(n int) (*region, error) {
	if n > s.regionSize {
		r, err := s.newRegion(n, true)
		if err != nil {
			return nil, err
		}
		r.single, r.retired = true, true
		return r, nil
	}
	if s.cur != nil && s.cur.used+n <= len(s.cur.buf) {
		return s.cur, nil
	}
	if s.cur != nil && s.cur.live == 0 && s.quiet(s.cur) {
		s.cur.used = 0 // nothing live, nothing in quarantine: start it over
		return s.cur, nil
	}
	if s.cur != nil {
		s.retire(s.cur)
		s.cur = nil
	}
	for k := len(s.free) - 1; k >= 0; k-- {
		if r := s.free[k]; s.quiet(r) {
			s.free = append(s.free[:k], s.free[k+1:]...)
			s.cur = r
			return r, nil
		}
	}
	r, err := s.newRegion(s.regionSize, false)
	if err != nil {
		return nil, err
	}
	s.cur = r
	return r, nil
}

// quiet reports whether r's space given back may be reused now.
func (s *InputStore) quiet(r *region) bool {
	return s.reuseDelay == 0 || !s.now().Before(r.quietAt)
}

func (s *InputStore) newRegion(size int, single bool) (*region, error) {
	if s.bytes+int64(size) > s.maxBytes {
		return nil, ErrStoreFull
	}
	s.bytes += int64(size)
	// Reuse a slot of a freed oversized region so region IDs stay small.
	id := uint32(len(s.regions))
	for i, r := range s.regions {
		if r == nil {
			id = uint32(i)
			break
		}
	}
	r := &region{id: id, buf: s.regionMem.AllocRegion(id, size, !single)}
	if int(id) == len(s.regions) {
		s.regions = append(s.regions, r)
	} else {
		s.regions[id] = r
	}
	return r, nil
}

// retire stops allocations from r; it becomes reusable once empty.
func (s *InputStore) retire(r *region) {
	r.retired = true
	if r.live == 0 {
		s.recycle(r)
	}
}

func (s *InputStore) recycle(r *region) {
	if r.single || s.closed {
		s.release(r)
		return
	}
	r.used, r.retired = 0, false
	s.free = append(s.free, r)
}

// release hands r's memory back to the allocator.
func (s *InputStore) release(r *region) {
	s.regions[r.id] = nil
	s.bytes -= int64(len(r.buf))
	r.buf = nil
	s.regionMem.FreeRegion(r.id)
}

// Release frees a request's input. Reads of it fail from now on.
func (s *InputStore) Release(key uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.live[key]
	if in == nil {
		return
	}
	delete(s.live, key)
	if (in.ready != nil && !in.done) || in.pins > 0 {
		in.released = true // preprocessing still writes there, or a read sends it
		return
	}
	s.unref(in)
}

// unref gives in's space back: its slot header is zeroed and the region's
// quarantine restarts, and the region is recycled once empty.
func (s *InputStore) unref(in *input) {
	r := s.regions[in.ref.Region]
	if s.seal != 0 {
		rdma.ClearHeader(s.header(in))
	}
	if s.reuseDelay > 0 {
		r.quietAt = s.now().Add(s.reuseDelay)
	}
	r.live--
	switch {
	case r.live == 0 && (r.retired || s.closed):
		s.recycle(r)
	case r.live == 0 && r == s.cur && s.reuseDelay == 0:
		r.used = 0 // nothing live in the current region: start it over
	}
}

// Close releases every region that holds no input, and each other one
// once its last input is given back (a preprocessing still writing, a
// read still sending). Nothing can be stored or read afterwards.
func (s *InputStore) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	s.cur, s.free = nil, nil
	for _, r := range s.regions {
		if r != nil && r.live == 0 {
			s.release(r)
		}
	}
}

// errMissing: the read names no live input.
var errMissing = errors.New("input not in the store")

// lookup returns the live input a read names, or errMissing.
func (s *InputStore) lookup(ref wire.InputRef) (*input, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.live[ref.Key]
	if in == nil || in.ref != ref || s.closed {
		return nil, errMissing
	}
	return in, nil
}

// pin returns a live, ready input's bytes in place, and keeps its space
// from reuse until unpin: a read reply is encoded straight from the region,
// with no copy, as an RDMA NIC would read it.
func (s *InputStore) pin(ref wire.InputRef) (b []byte, unpin func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.live[ref.Key]
	if in == nil || in.ref != ref || s.closed {
		return nil, nil, errMissing
	}
	if in.err != nil {
		return nil, nil, in.err
	}
	in.pins++
	r := s.regions[ref.Region]
	end := ref.Offset + uint64(ref.Length)
	return r.buf[ref.Offset:end:end], func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		in.pins--
		if in.pins == 0 && in.released && (in.ready == nil || in.done) {
			s.unref(in)
		}
	}, nil
}

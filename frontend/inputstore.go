package frontend

import (
	"errors"
	"fmt"
	"sync"

	"github.com/symphony-serving/symphony/transport/wire"
)

// ErrStoreFull: the input store holds as many bytes as it may; the request
// is shed rather than queued.
var ErrStoreFull = errors.New("frontend: input store full")

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
// fails rather than return another request's bytes.
type InputStore struct {
	regionSize int
	maxBytes   int64

	mu      sync.Mutex
	regions []*region
	free    []*region // empty, reusable regions
	cur     *region
	live    map[uint64]*input
	bytes   int64 // bytes of all regions
}

type region struct {
	id      uint32
	buf     []byte
	used    int
	live    int
	retired bool // no more allocations from it
	single  bool // holds one oversized input
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

// NewInputStore returns a store of regions of regionSize bytes, holding at
// most maxBytes in all.
func NewInputStore(regionSize int, maxBytes int64) *InputStore {
	return &InputStore{regionSize: regionSize, maxBytes: maxBytes, live: make(map[uint64]*input)}
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
// was released meanwhile.
func (s *InputStore) Reserve(key uint64, n int) (ref wire.InputRef, buf []byte, ready func(error), err error) {
	return s.alloc(key, n, true, nil)
}

func (s *InputStore) alloc(key uint64, n int, pending bool, data []byte) (ref wire.InputRef, buf []byte, ready func(error), err error) {
	if n > wire.MaxInputSize {
		return wire.InputRef{}, nil, nil, fmt.Errorf("frontend: input of %d bytes over the %d limit", n, wire.MaxInputSize)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.live[key]; dup {
		return wire.InputRef{}, nil, nil, fmt.Errorf("frontend: input key %d in use", key)
	}
	r, err := s.regionFor(n)
	if err != nil {
		return wire.InputRef{}, nil, nil, err
	}
	ref = wire.InputRef{Region: r.id, Offset: uint64(r.used), Length: uint32(n), Key: key}
	buf = r.buf[r.used : r.used+n : r.used+n]
	copy(buf, data)
	r.used += n
	r.live++
	in := &input{ref: ref}
	if pending {
		in.ready = make(chan struct{})
		ready = func(err error) {
			s.mu.Lock()
			in.err, in.done = err, true
			if in.released && in.pins == 0 {
				s.unref(s.regions[in.ref.Region])
			}
			s.mu.Unlock()
			close(in.ready)
		}
	}
	s.live[key] = in
	return ref, buf, ready, nil
}

func (s *InputStore) regionFor(n int) (*region, error) {
	if n > s.regionSize {
		r, err := s.newRegion(n)
		if err != nil {
			return nil, err
		}
		r.single, r.retired = true, true
		return r, nil
	}
	if s.cur != nil && s.cur.used+n <= len(s.cur.buf) {
		return s.cur, nil
	}
	if s.cur != nil {
		s.retire(s.cur)
	}
	if k := len(s.free); k > 0 {
		s.cur = s.free[k-1]
		s.free = s.free[:k-1]
		return s.cur, nil
	}
	r, err := s.newRegion(s.regionSize)
	if err != nil {
		return nil, err
	}
	s.cur = r
	return r, nil
}

func (s *InputStore) newRegion(size int) (*region, error) {
	if s.bytes+int64(size) > s.maxBytes {
		return nil, ErrStoreFull
	}
	s.bytes += int64(size)
	// Reuse a slot of a freed oversized region so region IDs stay small.
	for i, r := range s.regions {
		if r == nil {
			nr := &region{id: uint32(i), buf: make([]byte, size)}
			s.regions[i] = nr
			return nr, nil
		}
	}
	r := &region{id: uint32(len(s.regions)), buf: make([]byte, size)}
	s.regions = append(s.regions, r)
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
	if r.single {
		s.regions[r.id] = nil
		s.bytes -= int64(len(r.buf))
		return
	}
	r.used, r.retired = 0, false
	s.free = append(s.free, r)
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
	s.unref(s.regions[in.ref.Region])
}

// unref drops one live input from r, recycling r once it is empty.
func (s *InputStore) unref(r *region) {
	r.live--
	if r.live == 0 && r.retired {
		s.recycle(r)
	} else if r.live == 0 && r == s.cur {
		r.used = 0 // nothing live in the current region: start it over
	}
}

// errMissing: the read names no live input.
var errMissing = errors.New("input not in the store")

// lookup returns the live input a read names, or errMissing.
func (s *InputStore) lookup(ref wire.InputRef) (*input, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.live[ref.Key]
	if in == nil || in.ref != ref {
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
	if in == nil || in.ref != ref {
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
			s.unref(r)
		}
	}, nil
}

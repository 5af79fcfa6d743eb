// Package rdmatest is a frontend's input store as backends READ it, without
// the frontend: one region of slots (a sealed header, then the input, as
// transport/rdma's slot.go lays them out), exported with an rdma.Exporter
// and served with transporttest.ServeInputs, so that backend tests pull
// over RDMA without importing the frontend (backend and frontend never
// import each other, tests included). It keeps the store rules a READ
// relies on that a test can reach (an input's bytes and header are written
// before its ref is handed out; a reserved input's header says pending
// until it is ready), and none it cannot: slots are never released or
// reused.
package rdmatest

import (
	"errors"
	"fmt"
	"sync"

	"github.com/symphony-serving/symphony/transport/rdma"
	"github.com/symphony-serving/symphony/transport/transporttest"
	"github.com/symphony-serving/symphony/transport/wire"
)

// Region is the region ID of a Store's inputs.
const Region = 1

// Store holds inputs in one region: registered with an Exporter for
// backends' READs, or plain Go memory read over TCP only.
type Store struct {
	exp  *rdma.Exporter // nil: TCP only
	seal uint64         // 0 without an exporter: no slot headers

	mu     sync.Mutex
	region []byte
	used   int
	inputs map[uint64]*slot
}

type slot struct {
	ref   wire.InputRef
	ready chan struct{} // nil for an input written at once; closed once ready
	done  bool
	err   error
}

var _ transporttest.InputSource = (*Store)(nil)

// NewStore returns a store of size bytes, registered with exp for RDMA
// READs, or in Go memory if exp is nil.
func NewStore(exp *rdma.Exporter, size int) *Store {
	s := &Store{exp: exp, inputs: map[uint64]*slot{}}
	if exp == nil {
		s.region = make([]byte, size)
		return s
	}
	s.seal, s.region = exp.Seal(), exp.AllocRegion(Region, size, true)
	return s
}

// Close gives the region back to the exporter.
func (s *Store) Close() {
	if s.exp != nil {
		s.exp.FreeRegion(Region)
	}
}

// Put writes data into a new slot, header last, and returns its ref.
func (s *Store) Put(key uint64, data []byte) (wire.InputRef, error) {
	ref, _, err := s.alloc(key, data, len(data), false)
	return ref, err
}

// Reserve makes a slot of n bytes for an input that preprocessing writes
// into buf after its ref was handed out: its header says pending until
// ready is called (with the preprocessing error, if any), which marks it
// preprocessed (or failed) and releases the reads waiting for it.
func (s *Store) Reserve(key uint64, n int) (ref wire.InputRef, buf []byte, ready func(error), err error) {
	ref, in, err := s.alloc(key, nil, n, true)
	if err != nil {
		return ref, nil, nil, err
	}
	ready = func(err error) {
		s.mu.Lock()
		in.done, in.err = true, err
		st := rdma.SlotPreprocessed
		if err != nil {
			st = rdma.SlotFailed
		}
		s.header(in.ref, st)
		s.mu.Unlock()
		close(in.ready)
	}
	return ref, s.region[ref.Offset : ref.Offset+uint64(n) : ref.Offset+uint64(n)], ready, nil
}

func (s *Store) alloc(key uint64, data []byte, n int, pending bool) (wire.InputRef, *slot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inputs[key] != nil {
		return wire.InputRef{}, nil, fmt.Errorf("rdmatest: key %d already stored", key)
	}
	size := n
	if s.seal != 0 {
		size = rdma.SlotSize(n)
	}
	if s.used+size > len(s.region) {
		return wire.InputRef{}, nil, errors.New("rdmatest: store full")
	}
	start := s.used
	if s.seal != 0 {
		start += rdma.HeaderSize
	}
	in := &slot{ref: wire.InputRef{Region: Region, Offset: uint64(start), Length: uint32(n), Key: key}}
	copy(s.region[start:start+n], data)
	st := rdma.SlotReady
	if pending {
		st, in.ready = rdma.SlotPending, make(chan struct{})
	}
	s.header(in.ref, st)
	s.used += size
	s.inputs[key] = in
	return in.ref, in, nil
}

// header writes ref's slot header in state st, under mu.
func (s *Store) header(ref wire.InputRef, st rdma.SlotState) {
	if s.seal != 0 {
		rdma.PutHeader(s.region[ref.Offset-rdma.HeaderSize:ref.Offset], s.seal, ref.Key, ref.Length, st)
	}
}

// Input implements transporttest.InputSource: a failed input is missing.
func (s *Store) Input(ref wire.InputRef) ([]byte, <-chan struct{}, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.inputs[ref.Key]
	if in == nil || in.ref != ref || (in.done && in.err != nil) {
		return nil, nil, false
	}
	if in.ready != nil && !in.done {
		return nil, in.ready, true
	}
	return s.region[ref.Offset : ref.Offset+uint64(ref.Length)], nil, true
}

package frontend

import (
	"bytes"
	"errors"
	"testing"

	"github.com/symphony-serving/symphony/transport/wire"
)

func TestInputStoreReusesRegionsOnlyWhenEmpty(t *testing.T) {
	s := NewInputStore(100, 300)
	a, err := s.Put(1, bytes.Repeat([]byte{1}, 60))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.Put(2, bytes.Repeat([]byte{2}, 60)) // does not fit: a second region
	if a.Region == b.Region {
		t.Fatalf("60+60 bytes in one region of 100: %+v %+v", a, b)
	}
	// Region of a retired (full) and now empty: reused by the next region
	// change, and reads of the released input fail.
	s.Release(1)
	if _, err := readInput(s, a); !errors.Is(err, errMissing) {
		t.Fatalf("read of a released input: %v", err)
	}
	c, _ := s.Put(3, bytes.Repeat([]byte{3}, 60)) // b's region is full: takes a's
	if c.Region != a.Region || c.Offset != 0 {
		t.Fatalf("want a's empty region reused from offset 0, got %+v", c)
	}
	// A stale ref (old key at the same place) does not read c's bytes.
	stale := c
	stale.Key = 1
	if _, err := readInput(s, stale); !errors.Is(err, errMissing) {
		t.Fatalf("stale key read: %v", err)
	}
	got, err := readInput(s, c)
	if err != nil || !bytes.Equal(got, bytes.Repeat([]byte{3}, 60)) {
		t.Fatalf("read c: %v %v", got, err)
	}
	// An oversized input gets a region of its own, freed with it.
	big, err := s.Put(4, make([]byte, 150))
	if err == nil {
		t.Fatalf("store of 300 bytes took 2 regions of 100 plus 150: %+v", big)
	}
	if !errors.Is(err, ErrStoreFull) {
		t.Fatalf("want ErrStoreFull, got %v", err)
	}
	s.Release(2)
	s.Release(3)
	if _, err := s.Put(4, make([]byte, 90)); err != nil {
		t.Fatalf("after releases: %v", err)
	}
}

func TestInputStorePinDelaysReuse(t *testing.T) {
	s := NewInputStore(100, 1000)
	a, _ := s.Put(1, bytes.Repeat([]byte{1}, 80))
	b, unpin, err := s.pin(a)
	if err != nil {
		t.Fatal(err)
	}
	s.Release(1) // the request ends while a reply still sends its bytes
	// The region is current and pinned: new inputs must not overwrite it.
	c, _ := s.Put(2, bytes.Repeat([]byte{2}, 80))
	if c.Region == a.Region && c.Offset < a.Offset+uint64(a.Length) {
		t.Fatalf("pinned bytes reused: %+v over %+v", c, a)
	}
	if !bytes.Equal(b, bytes.Repeat([]byte{1}, 80)) {
		t.Fatal("pinned bytes changed")
	}
	unpin()
	if _, err := readInput(s, a); !errors.Is(err, errMissing) {
		t.Fatalf("released input still readable: %v", err)
	}
}

func TestInputStorePendingWaitsForPreprocessing(t *testing.T) {
	s := NewInputStore(100, 1000)
	ref, buf, ready, err := s.Reserve(1, 4)
	if err != nil {
		t.Fatal(err)
	}
	in, err := s.lookup(ref)
	if err != nil || in.ready == nil {
		t.Fatalf("pending input: %v", err)
	}
	select {
	case <-in.ready:
		t.Fatal("ready before preprocessing finished")
	default:
	}
	copy(buf, "abcd")
	ready(nil)
	<-in.ready
	got, err := readInput(s, ref)
	if err != nil || string(got) != "abcd" {
		t.Fatalf("read %q, %v", got, err)
	}
	// Preprocessing that fails makes reads fail.
	ref2, _, ready2, _ := s.Reserve(2, 4)
	ready2(errors.New("bad image"))
	if _, err := readInput(s, ref2); err == nil {
		t.Fatal("read of a failed preprocessing succeeded")
	}
	// Released while preprocessing still writes: the space stays taken
	// until ready is called.
	ref3, buf3, ready3, _ := s.Reserve(3, 4)
	s.Release(3)
	copy(buf3, "late")
	ready3(nil)
	if _, err := readInput(s, ref3); !errors.Is(err, errMissing) {
		t.Fatalf("released pending input readable: %v", err)
	}
}

// readInput reads an input as the input server does: pinned, copied out.
func readInput(s *InputStore, ref wire.InputRef) ([]byte, error) {
	b, unpin, err := s.pin(ref)
	if err != nil {
		return nil, err
	}
	defer unpin()
	return bytes.Clone(b), nil
}

// An input larger than the protocol carries is the caller's fault, a typed
// ErrBadInput, not an error the app cannot tell from the cluster's.
func TestOversizedInputIsBadInput(t *testing.T) {
	s := NewInputStore(1<<20, 1<<30)
	if _, err := s.Put(1, make([]byte, wire.MaxInputSize+1)); !errors.Is(err, ErrBadInput) {
		t.Errorf("Put of %d bytes: %v, want ErrBadInput", wire.MaxInputSize+1, err)
	}
}

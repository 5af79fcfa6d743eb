package rdma

import (
	"sync"
	"syscall"
)

// health is whether a device still delivers completions. Once its
// completion channel or a completion queue fails, completions stop for
// good, and a READ would wait for one forever: fail records why, closes
// dead, and calls every queue pair's onFail, once, so that their sessions
// break and their reads go over TCP; a queue pair made afterwards is
// refused. It is pure Go, shared by the verbs fabric (whose poller fails
// it) and the emulated one (MemNetwork.FailDevice), so that the default
// build tests what the verbs poller relies on.
type health struct {
	mu       sync.Mutex
	err      error // set once
	dead     chan struct{}
	next     uint64
	watchers map[uint64]func(error)
}

func newHealth() *health {
	return &health{dead: make(chan struct{}), watchers: map[uint64]func(error){}}
}

// Err is the failure, or nil while completions flow.
func (h *health) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// Dead is closed once the device has failed.
func (h *health) Dead() <-chan struct{} { return h.dead }

// watch adds a queue pair: onFail (which may be nil) is called once if the
// device fails before remove. It refuses, with the failure, once the
// device has failed.
func (h *health) watch(onFail func(error)) (remove func(), err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return nil, h.err
	}
	if onFail == nil {
		return func() {}, nil
	}
	h.next++
	id := h.next
	h.watchers[id] = onFail
	return func() {
		h.mu.Lock()
		delete(h.watchers, id)
		h.mu.Unlock()
	}, nil
}

// fail records the device's failure and tells every watcher, on the
// caller's goroutine, outside the lock. Only the first failure counts: it
// returns false for later ones.
func (h *health) fail(err error) bool {
	h.mu.Lock()
	if h.err != nil {
		h.mu.Unlock()
		return false
	}
	h.err = err
	close(h.dead)
	ws := make([]func(error), 0, len(h.watchers))
	for id, fn := range h.watchers {
		ws = append(ws, fn)
		delete(h.watchers, id)
	}
	h.mu.Unlock()
	for _, fn := range ws {
		fn(err)
	}
	return true
}

// What the completion poller does after ibv_get_cq_event found no event.
type cqEventOutcome uint8

const (
	cqEventWait   cqEventOutcome = iota // none yet: wait for the channel's fd
	cqEventRetry                        // interrupted: ask again
	cqEventFailed                       // the channel failed: no event will come again
)

// cqEventErrno judges ibv_get_cq_event's errno on a nonblocking channel:
// only "none yet" and an interruption are not failures.
func cqEventErrno(errno syscall.Errno) (cqEventOutcome, error) {
	switch errno {
	case syscall.EAGAIN:
		return cqEventWait, nil
	case syscall.EINTR:
		return cqEventRetry, nil
	case 0:
		errno = syscall.EIO // failed without saying why
	}
	return cqEventFailed, &VerbsError{Op: "ibv_get_cq_event", Errno: errno}
}

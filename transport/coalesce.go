package transport

import "sync"

// Coalescer gathers items from many goroutines and hands them to flush in
// batches, from one goroutine: while one flush runs, new items pile up and
// go out together in the next. Idle, an item goes out at once; under load,
// one frame carries many items, so the frame rate stays far below the item
// rate. It is how frontends submit tasks, the scheduler sends drop notices
// and backends send results.
type Coalescer[T any] struct {
	flush func([]T)

	mu      sync.Mutex
	items   []T
	spare   []T
	running bool
	closed  bool
	// added and flushed count the items queued and handed to flush, so
	// that Flush waits for what was queued before it, not for a lull.
	added, flushed uint64
	idle           sync.Cond // signalled after each flush
}

// NewCoalescer returns a Coalescer that calls flush with each batch. flush
// owns the slice only during the call.
func NewCoalescer[T any](flush func([]T)) *Coalescer[T] {
	c := &Coalescer[T]{flush: flush}
	c.idle.L = &c.mu
	return c
}

// Add queues items. It returns false, and queues nothing, after Close.
func (c *Coalescer[T]) Add(items ...T) bool {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false
	}
	c.items = append(c.items, items...)
	c.added += uint64(len(items))
	if c.running {
		c.mu.Unlock()
		return true
	}
	c.running = true
	c.mu.Unlock()
	go c.drain()
	return true
}

func (c *Coalescer[T]) drain() {
	c.mu.Lock()
	for len(c.items) > 0 {
		batch := c.items
		c.items = c.spare[:0]
		c.mu.Unlock()
		c.flush(batch)
		c.mu.Lock()
		c.flushed += uint64(len(batch))
		c.idle.Broadcast()
		clear(batch)
		c.spare = batch[:0]
	}
	c.running = false
	c.idle.Broadcast()
	c.mu.Unlock()
}

// Flush waits until everything queued so far has been handed to flush.
// Unlike Close it keeps taking items, so that a sender can be sure its
// queue went out (before closing the connection under it, say) while
// others may still add to it.
func (c *Coalescer[T]) Flush() {
	c.mu.Lock()
	for target := c.added; c.flushed < target; {
		c.idle.Wait()
	}
	c.mu.Unlock()
}

// Close flushes what is queued, waits for the flush to finish and refuses
// later items.
func (c *Coalescer[T]) Close() {
	c.mu.Lock()
	c.closed = true
	for c.running {
		c.idle.Wait()
	}
	c.mu.Unlock()
}

package scheduler

import (
	"slices"
	"time"
)

// requestQueue is a ring buffer of requests kept in deadline order. Requests
// of one model nearly always arrive in deadline order, so insertion is O(1)
// in the common case; an out-of-order request is shifted into place.
type requestQueue struct {
	buf  []Request
	head int
	n    int
}

func (q *requestQueue) len() int { return q.n }

func (q *requestQueue) at(i int) *Request { return &q.buf[(q.head+i)&(len(q.buf)-1)] }

func (q *requestQueue) front() *Request { return q.at(0) }

func (q *requestQueue) grow() {
	size := len(q.buf) * 2
	if size == 0 {
		size = 64
	}
	nb := make([]Request, size)
	for i := 0; i < q.n; i++ {
		nb[i] = *q.at(i)
	}
	q.buf, q.head = nb, 0
}

// insert adds r, keeping the queue sorted by deadline; requests with equal
// deadlines keep their arrival order.
func (q *requestQueue) insert(r Request) {
	if q.n == len(q.buf) {
		q.grow()
	}
	i := q.n
	q.n++
	for i > 0 && q.at(i-1).Deadline > r.Deadline {
		*q.at(i) = *q.at(i - 1)
		i--
	}
	*q.at(i) = r
}

// popFront removes and returns the earliest-deadline request.
func (q *requestQueue) popFront() Request {
	r := *q.at(0)
	q.head = (q.head + 1) & (len(q.buf) - 1)
	q.n--
	return r
}

// priorityQueue is a model's queue: one deadline-ordered requestQueue per
// priority level, highest level first. Its positions (at, popFront,
// popInto) run through the levels in that order, each in deadline order:
// the order in which requests are planned. With one level, which is every
// model whose requests carry no priority, it is that level's requestQueue
// and nothing else.
//
// With topOnly set, it shows only the highest level that holds requests:
// the view the drop policy's window pruning works on (ModelCore.updateFor),
// so that it never prunes a request to make room for a lower level's.
type priorityQueue struct {
	levels  []priorityLevel // by level, highest first; empty ones stay
	topOnly bool
	// rateWindow is each level's rate estimator's window.
	rateWindow time.Duration
}

type priorityLevel struct {
	level Priority
	q     requestQueue
	// rate is the level's arrival rate, for the keep-up test of the
	// highest level (ModelCore.updateLevels).
	rate rateEstimator
}

// queueFor returns level p's queue, adding it in place if it is new.
func (q *priorityQueue) queueFor(p Priority) *requestQueue {
	i := 0
	for i < len(q.levels) && q.levels[i].level > p {
		i++
	}
	if i == len(q.levels) || q.levels[i].level != p {
		q.levels = append(q.levels, priorityLevel{})
		copy(q.levels[i+1:], q.levels[i:])
		q.levels[i] = priorityLevel{level: p, rate: newRateEstimator(q.rateWindow)}
	}
	return &q.levels[i].q
}

// insert queues r at its level, counting its arrival at now in the
// level's rate.
func (q *priorityQueue) insert(now Time, r Request) {
	var l *priorityLevel
	if len(q.levels) == 1 && q.levels[0].level == r.Priority {
		l = &q.levels[0]
	} else {
		q.queueFor(r.Priority)
		for i := range q.levels {
			if q.levels[i].level == r.Priority {
				l = &q.levels[i]
			}
		}
	}
	l.q.insert(r)
	l.rate.observe(now, 1)
}

// topRate is the arrival rate of the highest level that holds requests.
func (q *priorityQueue) topRate(now Time) float64 {
	for i := range q.levels {
		if q.levels[i].q.len() > 0 {
			return q.levels[i].rate.perSecond(now)
		}
	}
	return 0
}

// top is the highest level that holds requests, or nil.
func (q *priorityQueue) top() *requestQueue {
	for i := range q.levels {
		if q.levels[i].q.len() > 0 {
			return &q.levels[i].q
		}
	}
	return nil
}

// multiLevel reports whether requests of more than one level are queued.
func (q *priorityQueue) multiLevel() bool {
	held := 0
	for i := range q.levels {
		if q.levels[i].q.len() > 0 {
			held++
		}
	}
	return held > 1
}

func (q *priorityQueue) len() int {
	if q.topOnly {
		if t := q.top(); t != nil {
			return t.len()
		}
		return 0
	}
	n := 0
	for i := range q.levels {
		n += q.levels[i].q.len()
	}
	return n
}

// at is the request at position i.
func (q *priorityQueue) at(i int) *Request {
	if len(q.levels) == 1 {
		return q.levels[0].q.at(i)
	}
	for l := range q.levels {
		lq := &q.levels[l].q
		if i < lq.len() {
			return lq.at(i)
		}
		if q.topOnly && lq.len() > 0 {
			break
		}
		i -= lq.len()
	}
	panic("scheduler: queue position out of range")
}

func (q *priorityQueue) front() *Request { return q.at(0) }

// popFront removes and returns the request at position 0.
func (q *priorityQueue) popFront() Request { return q.top().popFront() }

// popInto moves the k requests at the front to the end of dst.
func (q *priorityQueue) popInto(dst []Request, k int) []Request {
	for ; k > 0; k-- {
		dst = append(dst, q.popFront())
	}
	return dst
}

// clone is a deep copy.
func (q *priorityQueue) clone() priorityQueue {
	c := priorityQueue{levels: slices.Clone(q.levels), topOnly: q.topOnly}
	for i := range c.levels {
		c.levels[i].q.buf = slices.Clone(c.levels[i].q.buf)
	}
	return c
}

// prefixDeadline is the earliest deadline among the k requests at the
// front: a batch of them must meet it. Each level is in deadline order, so
// it is the earliest of the fronts of the levels the k reach into.
func (q *priorityQueue) prefixDeadline(k int) Time {
	if len(q.levels) == 1 {
		return q.levels[0].q.front().Deadline
	}
	dl := Never
	for l := range q.levels {
		lq := &q.levels[l].q
		if lq.len() == 0 {
			continue
		}
		dl = MinTime(dl, lq.front().Deadline)
		if k -= lq.len(); k <= 0 {
			break
		}
	}
	return dl
}

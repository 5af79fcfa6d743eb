package scheduler

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

// popInto moves the k earliest-deadline requests to the end of dst.
func (q *requestQueue) popInto(dst []Request, k int) []Request {
	for ; k > 0; k-- {
		dst = append(dst, q.popFront())
	}
	return dst
}

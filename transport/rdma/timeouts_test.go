package rdma

import "time"

// ackTimeout is how long a try waits for its response, for a queue pair
// timeout exponent (at least that: devices may round it up).
func ackTimeout(exp uint8) time.Duration { return 4096 * time.Nanosecond << exp }

// deadPeerAfter is about how long a READ to a peer that no longer answers
// takes to fail: every try times out.
func deadPeerAfter(exp, retries uint8) time.Duration {
	return time.Duration(retries+1) * ackTimeout(exp)
}

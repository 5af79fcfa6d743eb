package rdma

import (
	"bytes"
	"strings"
)

// DeviceConfig picks the RDMA device, port and GID a process uses.
type DeviceConfig struct {
	// Name is the device (as `ibv_devices` lists it, e.g. mlx5_0 or rxe0);
	// empty for the first one with an active port.
	Name string
	// Port is the port number; 0 for the device's first active port.
	Port int
	// GIDIndex is the GID table index for RoCE; -1 picks one: a RoCE v2
	// GID holding an IPv4 address first, then any RoCE v2 GID, then any.
	GIDIndex int
}

// DefaultDeviceConfig picks everything automatically.
func DefaultDeviceConfig() DeviceConfig { return DeviceConfig{GIDIndex: -1} }

// gidScore ranks a GID table entry for RoCE: 0 for an empty entry (never
// used), 3 for RoCE v2 with an IPv4-mapped address (routable, what
// `rdma link add rxe0 type rxe netdev eth0` gives an interface with an
// IPv4 address), 2 for other RoCE v2, 1 for the rest (RoCE v1, IB).
func gidScore(gid [16]byte, typ string) int {
	if gid == [16]byte{} {
		return 0
	}
	v2 := strings.Contains(strings.ToLower(typ), "v2")
	mapped := bytes.Equal(gid[:10], make([]byte, 10)) && gid[10] == 0xff && gid[11] == 0xff
	switch {
	case v2 && mapped:
		return 3
	case v2:
		return 2
	}
	return 1
}

// pickGID returns the index of the best-ranked GID (the lowest index
// among equals), or -1 if every entry is empty.
func pickGID(gids [][16]byte, types []string) int {
	best, bestScore := -1, 0
	for i, g := range gids {
		typ := ""
		if i < len(types) {
			typ = types[i]
		}
		if s := gidScore(g, typ); s > bestScore {
			best, bestScore = i, s
		}
	}
	return best
}

// localReadDepth is the READ depth a queue pair advertises
// (RDMAEndpoint.ReadDepth): at most 16, and within both the device's
// requester (max_qp_init_rd_atom) and responder (max_qp_rd_atom) limits.
func localReadDepth(maxInit, maxDest int) uint8 { return uint8(max(1, min(16, maxInit, maxDest))) }

// pairReadDepth is the READ depth both ends of a connected pair use, as
// requester (max_rd_atomic) and as responder (max_dest_rd_atomic): the
// smaller of the two advertised depths, so that it is the same number on
// both sides and neither asks more of the other than it serves.
func pairReadDepth(local, remote uint8) int { return max(1, int(min(local, remote))) }

// The transport timeout and retry count of our queue pairs (ibv_qp_attr
// timeout and retry_cnt), which decide how soon a READ to a frontend that
// vanished, or whose queue pair was replaced, fails with "transport retry
// counter exceeded" and breaks the session (so that it is redialed, and
// reads go over TCP meanwhile).
//
// A READ answered later than the acceptance window (half the reuse delay:
// 25 ms by default) is refused anyway, so retries beyond the window only
// keep a dead queue pair looking alive. With timeout 12 a try waits about
// 16.8 ms: a READ whose request or response was lost once is retried and
// can still land within the window, and a dead peer is noticed after 4
// tries, about 67 ms, where timeout 14 and retry_cnt 7 took about 0.5 s.
// Lower timeouts risk spurious retries under incast (a batch's READs are
// answered in well under a millisecond, but queueing in the fabric adds
// to it). The cost of fewer retries is that a link losing the same
// message's packets three times running breaks the session, which TCP
// covers until the redial.
const (
	qpAckTimeout = 12 // 4.096 µs × 2^12 ≈ 16.8 ms per try
	qpRetryCount = 3  // retries after the first try
)

package wire

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// The RDMA data path (transport/rdma) brings up one reliable-connected
// queue pair per data connection. The backend, which issues the one-sided
// READs, opens the exchange with RDMAConnect; the frontend, whose
// registered memory is read, answers RDMAAccept (its queue pair, the keys
// of its registered regions, and the slot seal with which a backend checks
// what it read) or RDMARefuse, and later announces each region it
// registers with RDMARegions. All of it travels on the data connection
// itself, so it needs no connection manager (librdmacm) and no other port.

// Limits of the RDMA messages.
const (
	// MaxRDMARegions bounds the regions one message announces: a frontend
	// store of 2 GiB in 8 MiB regions has 256.
	MaxRDMARegions = 1 << 16
	// MaxReuseDelay bounds the reuse delay a frontend may announce; the
	// backend's acceptance window is half of it.
	MaxReuseDelay = time.Minute
)

// RDMAEndpoint is one side of an RC queue pair, as its peer needs it to
// move its own queue pair to ready-to-receive: ibv_modify_qp's dest_qp_num,
// rq_psn, ah_attr (LID, or GID for RoCE) and path_mtu.
type RDMAEndpoint struct {
	// QPN is the queue pair number (24 bits).
	QPN uint32
	// PSN is the first packet sequence number this side sends (24 bits).
	PSN uint32
	// LID is the port's InfiniBand local ID; 0 on RoCE.
	LID uint16
	// GID is the port's global ID; on RoCE the address of every packet.
	GID [16]byte
	// MTU is the port's active path MTU as an ibv_mtu (1 = 256 bytes ...
	// 5 = 4096); the pair uses the smaller of the two.
	MTU uint8
	// ReadDepth is how many READs this side keeps in flight as requester,
	// or serves at once as responder (max_rd_atomic, max_dest_rd_atomic).
	ReadDepth uint8
}

// RDMAConnect opens the RDMA exchange on a data connection: the backend's
// queue pair, already in the INIT state.
type RDMAConnect struct{ Endpoint RDMAEndpoint }

// RDMARegion is one registered region of a frontend's input store, as a
// backend READs it: InputRef.Region names it, and an input's bytes lie at
// Addr + InputRef.Offset, readable with RKey.
type RDMARegion struct {
	ID     uint32
	Addr   uint64
	Length uint64
	RKey   uint32
}

// RDMAAccept answers an RDMAConnect: the frontend's queue pair (already
// ready to receive the backend's READs), the regions registered so far,
// and how a backend checks a slot it read.
type RDMAAccept struct {
	// ForQPN is the backend queue pair this answers, so that an answer to
	// an abandoned attempt is not taken for the current one.
	ForQPN   uint32
	Endpoint RDMAEndpoint
	// Seal is the store's secret that seals each slot header; a backend
	// accepts a READ only if its header carries the seal (transport/rdma).
	Seal uint64
	// ReuseDelay is how long the store keeps released space from reuse; a
	// backend accepts only READs that completed within half of it.
	ReuseDelay time.Duration
	Regions    []RDMARegion
}

// RDMARefuse answers an RDMAConnect that the frontend will not serve over
// RDMA (it runs the TCP data path, or its queue pair failed): the backend
// reads this frontend's inputs over TCP.
type RDMARefuse struct {
	ForQPN uint32
	Reason string
}

// RDMARegions announces regions registered after the RDMAAccept. A region
// is announced before any input in it is handed out, but a plan may still
// reach a backend before the announcement does: the backend then reads
// that input over TCP.
type RDMARegions struct{ Regions []RDMARegion }

// Validate checks an endpoint's ranges.
func (e *RDMAEndpoint) validate(field string) error {
	switch {
	case e.QPN >= 1<<24:
		return fmt.Errorf("%s.qpn: %d over 24 bits", field, e.QPN)
	case e.PSN >= 1<<24:
		return fmt.Errorf("%s.psn: %d over 24 bits", field, e.PSN)
	case e.MTU < 1 || e.MTU > 5:
		return fmt.Errorf("%s.mtu: %d not an ibv_mtu (1..5)", field, e.MTU)
	case e.ReadDepth == 0:
		return fmt.Errorf("%s.read_depth: zero", field)
	case e.LID == 0 && e.GID == [16]byte{}:
		return fmt.Errorf("%s: neither a LID nor a GID", field)
	}
	return nil
}

func validateRegions(rs []RDMARegion) error {
	if len(rs) > MaxRDMARegions {
		return fmt.Errorf("regions: %d over %d", len(rs), MaxRDMARegions)
	}
	for i := range rs {
		r := &rs[i]
		if r.Length == 0 {
			return fmt.Errorf("regions[%d].length: zero", i)
		}
		if r.Addr > math.MaxUint64-r.Length {
			return fmt.Errorf("regions[%d]: addr %#x + length %d overflows", i, r.Addr, r.Length)
		}
	}
	return nil
}

// Validate checks RDMAConnect's endpoint.
func (m *RDMAConnect) Validate() error { return m.Endpoint.validate("endpoint") }

// Validate checks RDMAAccept's endpoint, delay and regions.
func (m *RDMAAccept) Validate() error {
	if err := m.Endpoint.validate("endpoint"); err != nil {
		return err
	}
	if m.ReuseDelay <= 0 || m.ReuseDelay > MaxReuseDelay {
		return fmt.Errorf("reuse_delay: %v not in (0, %v]", m.ReuseDelay, MaxReuseDelay)
	}
	return validateRegions(m.Regions)
}

// Validate accepts any RDMARefuse.
func (m *RDMARefuse) Validate() error { return nil }

// Validate checks RDMARegions' regions.
func (m *RDMARegions) Validate() error {
	if len(m.Regions) == 0 {
		return errors.New("regions: empty")
	}
	return validateRegions(m.Regions)
}

func (e *RDMAEndpoint) encode(enc *msgpack.Encoder) {
	_ = enc.EncodeArrayLen(6)
	_ = enc.EncodeUint32(e.QPN)
	_ = enc.EncodeUint32(e.PSN)
	_ = enc.EncodeUint16(e.LID)
	_ = enc.EncodeBytes(e.GID[:])
	_ = enc.EncodeUint8(e.MTU)
	_ = enc.EncodeUint8(e.ReadDepth)
}

func (e *RDMAEndpoint) decode(d *decoder) {
	n := d.fields("endpoint", 6)
	e.QPN = d.u32("endpoint.qpn")
	e.PSN = d.u32("endpoint.psn")
	lid := d.u32("endpoint.lid")
	if lid > math.MaxUint16 {
		d.fail("endpoint.lid", fmt.Errorf("%d overflows 16 bits", lid))
	}
	e.LID = uint16(lid)
	if gid := d.bytes("endpoint.gid"); d.err == nil {
		if len(gid) != len(e.GID) {
			d.fail("endpoint.gid", fmt.Errorf("%d bytes, want %d", len(gid), len(e.GID)))
		}
		copy(e.GID[:], gid)
	}
	e.MTU = d.u8("endpoint.mtu")
	e.ReadDepth = d.u8("endpoint.read_depth")
	d.rest("endpoint", n, 6)
}

func (r *RDMARegion) encode(e *msgpack.Encoder) {
	_ = e.EncodeArrayLen(4)
	_ = e.EncodeUint32(r.ID)
	_ = e.EncodeUint64(r.Addr)
	_ = e.EncodeUint64(r.Length)
	_ = e.EncodeUint32(r.RKey)
}

func (r *RDMARegion) decode(d *decoder) {
	n := d.fields("regions[]", 4)
	r.ID = d.u32("regions[].id")
	r.Addr = d.u64("regions[].addr")
	r.Length = d.u64("regions[].length")
	r.RKey = d.u32("regions[].rkey")
	d.rest("regions[]", n, 4)
}

func encodeRegions(e *msgpack.Encoder, rs []RDMARegion) {
	_ = e.EncodeArrayLen(len(rs))
	for i := range rs {
		rs[i].encode(e)
	}
}

func decodeRegions(d *decoder) []RDMARegion {
	k := d.list("regions")
	if k > MaxRDMARegions {
		d.fail("regions", errTooMany(k, MaxRDMARegions))
		return nil
	}
	rs := make([]RDMARegion, 0, capped(k))
	for i := 0; i < k && d.err == nil; i++ {
		rs = append(rs, RDMARegion{})
		rs[i].decode(d)
	}
	return rs
}

func (m *RDMAConnect) encode(e *msgpack.Encoder) error {
	_ = e.EncodeArrayLen(1)
	m.Endpoint.encode(e)
	return nil
}

func (m *RDMAConnect) decode(d *decoder) {
	n := d.fields("rdma_connect", 1)
	m.Endpoint.decode(d)
	d.rest("rdma_connect", n, 1)
}

func (m *RDMAAccept) encode(e *msgpack.Encoder) error {
	_ = e.EncodeArrayLen(5)
	_ = e.EncodeUint32(m.ForQPN)
	m.Endpoint.encode(e)
	_ = e.EncodeUint64(m.Seal)
	_ = e.EncodeInt64(int64(m.ReuseDelay))
	encodeRegions(e, m.Regions)
	return nil
}

func (m *RDMAAccept) decode(d *decoder) {
	n := d.fields("rdma_accept", 5)
	m.ForQPN = d.u32("for_qpn")
	m.Endpoint.decode(d)
	m.Seal = d.u64("seal")
	m.ReuseDelay = time.Duration(d.i64("reuse_delay"))
	m.Regions = decodeRegions(d)
	d.rest("rdma_accept", n, 5)
}

func (m *RDMARefuse) encode(e *msgpack.Encoder) error {
	_ = e.EncodeArrayLen(2)
	_ = e.EncodeUint32(m.ForQPN)
	return e.EncodeString(m.Reason)
}

func (m *RDMARefuse) decode(d *decoder) {
	n := d.fields("rdma_refuse", 2)
	m.ForQPN = d.u32("for_qpn")
	m.Reason = d.str("reason", MaxReason)
	d.rest("rdma_refuse", n, 2)
}

func (m *RDMARegions) encode(e *msgpack.Encoder) error {
	_ = e.EncodeArrayLen(1)
	encodeRegions(e, m.Regions)
	return nil
}

func (m *RDMARegions) decode(d *decoder) {
	n := d.fields("rdma_regions", 1)
	m.Regions = decodeRegions(d)
	d.rest("rdma_regions", n, 1)
}

// Package conn is the per-lcore connection table of the load balancer and
// the IPVS TCP state machine that drives each entry's timeout.
//
// One Table belongs to one worker lcore and is touched only by it (lcores
// share nothing), so nothing here locks or uses atomics. Entries are
// fixed-size, pointer-free 64-byte records in one slice the GC never scans,
// and the per-packet calls do not allocate (docs/design.md, "Connection
// table").
//
// Addresses are the big-endian value of the four IPv4 bytes
// (192.0.2.1 == 0xC0000201), ports are in host order and protocols are IP
// protocol numbers.
package conn

import (
	"unsafe"

	"github.com/dplb/dplb/lcore/fwd"
)

// Dir is the direction of a packet relative to its connection.
type Dir uint8

const (
	// Original is client -> VIP: src = ClientIP:ClientPort, dst = VIP:VPort.
	Original Dir = 0
	// Reply is real server -> client: src = RIP:RPort, dst = ClientIP:ClientPort.
	Reply Dir = 1
)

// String names the direction the way IPVS debug output does.
func (d Dir) String() string {
	switch d {
	case Original:
		return "original"
	case Reply:
		return "reply"
	}
	return "invalid"
}

// FlagOneWay marks a connection whose replies bypass the balancer (DR, TUN):
// only the Original key is indexed and the state machine uses IPVS's
// INPUT-ONLY rows. The table reads it once, at Insert.
const FlagOneWay uint8 = 1 << 0

// Conn is one connection entry. It fills exactly one cache line and holds
// no pointers, so a table of millions of them costs the GC nothing.
//
// The key fields (Proto, ClientIP, ClientPort, VIP, VPort, RIP, RPort) are
// read-only once the entry is inserted: the index was built from them.
// State, Fwd, Dest, Service and the caller's own Flags bits may be
// changed through the pointer Get returns; Expires is moved by Touch or
// SetExpires (or raised by Expire's callback), which keep the expiry
// sweep's bound no later than it.
type Conn struct {
	ClientIP uint32
	VIP      uint32
	RIP      uint32
	Dest     uint32 // real-server id, opaque to this package
	Service  uint32 // service id, opaque to this package

	ClientPort uint16
	VPort      uint16
	RPort      uint16

	Proto uint8
	State State
	Flags uint8 // FlagOneWay and caller-defined bits
	Fwd   fwd.Method

	// indexed records which keys this entry holds in the index; zero means
	// the slot is free. Kept apart from Flags so a caller flipping Flags
	// cannot desynchronise the index.
	indexed uint8
	// marks: markFresh and markConfirmed (defense.go), kept by Touch.
	marks uint8

	Expires int64 // monotonic nanoseconds; entry is expired when Expires <= now

	// Hashes of the two keys, so Delete finds their index slots without
	// rehashing and without trusting the key fields.
	hashOrig  uint32
	hashReply uint32

	// Template is the caller's reference to the persistence template
	// whose real server this connection uses (0: none).
	Template uint32
	// SyncPackets counts the client's packets, for the caller's
	// connection sync thresholds (the table never reads it).
	SyncPackets uint32

	// seen is when Touch last saw a packet, in 2^seenShift ns units
	// (the drop-entry defense evicts long-idle entries).
	seen uint32

	// SyncedAt is when the caller last synced the connection to a peer,
	// on the caller's own coarse clock (0: never); the table never reads it.
	SyncedAt uint32
}

// Bits of Conn.indexed.
const (
	indexedLive  uint8 = 1 << 0
	indexedReply uint8 = 1 << 1
)

// ConnSize is the size of one entry in bytes: one cache line.
const ConnSize = 64

// Compile-time checks that Conn is exactly ConnSize bytes: either array
// length goes negative if the size drifts.
var (
	_ [ConnSize - unsafe.Sizeof(Conn{})]byte
	_ [unsafe.Sizeof(Conn{}) - ConnSize]byte
)

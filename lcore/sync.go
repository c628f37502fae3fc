package lcore

import (
	"sync/atomic"
	"time"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
)

// Connection synchronisation between directors (docs/design.md, "High
// availability"). A master worker copies the state of its connections into
// SyncConn records on its own sync ring, never blocking (a full ring is
// counted and the record lost; the next threshold or refresh sends it
// again). The control plane batches them to the peers. A backup's control
// plane routes each received record to the worker that owns its flow,
// in a SyncBatch, and that worker installs it with its own timeouts.

// SyncConn is one connection, or one persistence template, as directors
// exchange it. A connection is named by its addresses and ports, not by
// ids: the real server is found again by RIP:RPort in the receiver's
// service VIP:VPort, whatever dest id it has there.
type SyncConn struct {
	ClientIP uint32 // for a template: the client network (address & persistence mask)
	VIP      uint32
	RIP      uint32

	ClientPort uint16 // 0 for a template
	VPort      uint16 // for a template of a fwmark-less port-0 service: 0
	RPort      uint16

	Proto    uint8
	State    conn.State
	Fwd      fwd.Method
	Template bool // a persistence template, not a connection

	// HasExt: the connection has an extension, Ext: a FullNAT
	// connection's local address and port, and the sequence-number
	// deltas of a connection whose numbering the director moved (PROXY
	// v2, SYN proxy; a NAT one has LIP:LPort = the client's). Such
	// records travel in the longer extended layout.
	HasExt bool
	Ext    conn.Ext

	// IPv6: an IPv6 connection (never a template), whose addresses are
	// Six: ClientIP and VIP are then 0, as the entry's folds of them are
	// keyed per process and never leave it (the receiver folds the
	// addresses again with its own key). RIP is a NAT64 connection's
	// IPv4 server (Six.RIP then zero; its local endpoint in Ext), else 0.
	IPv6 bool
	Six  conn.Addrs6

	// FTP: a VS/NAT FTP control connection (ftp.go), with the helper's
	// state: the sequence adjustment of the client's stream (FTPIn) and
	// of the server's (FTPOut, moved by rewritten 227 replies). Never
	// with HasExt, IPv6 or Template; such records travel in their own
	// layout.
	FTP           bool
	FTPIn, FTPOut SeqShift
	// FTPData: an FTP data connection the helper expected (VS/NAT TCP),
	// of the FTP service on VIP:ServicePort (its VPort and RPort are the
	// data connection's own); it travels in the FTP layout, unshifted.
	FTPData     bool
	ServicePort uint16

	// Steer: not a connection but its steering entry (steerentry.go),
	// for the worker that owns the record's local port here while worker
	// SteerTo holds the connection. The control plane sets it as it
	// routes a FullNAT or NAT64 record to the workers; never on the wire.
	Steer   bool
	SteerTo int
}

// ExtFlagsMask is the conn.Ext.Flags bits a record may carry.
const ExtFlagsMask = extProxy | extSynPending | extSynSACK | 3<<extSynMSS | extSynTS |
	0xf<<extWSCliShift | 0xf<<extWSSrvShift | extWSCliLeg | extWSSrvLeg

// SyncParams are a worker's sync rules, IPVS's sysctls: a connection is
// synced when it has seen Threshold packets and then every Period packets
// (Period 0: on the threshold only), on every state change past the
// handshake, and again when RefreshPeriod has passed since it was last
// synced (0: never by time). Off: nothing is synced.
type SyncParams struct {
	On            bool
	Threshold     uint32
	Period        uint32
	RefreshPeriod time.Duration
}

// SyncBatch is a Command's load of received records, all owned by the
// worker it is sent to. The worker fills the counters and marks it done;
// the control plane reads them after Done.
type SyncBatch struct {
	Records []SyncConn

	Installed uint32 // new entries made or existing ones updated
	NoService uint32 // no service VIP:VPort here
	NoDest    uint32 // the service has no real server RIP:RPort here
	TableFull uint32 // no room (live entries are never pushed out for a synced one)
	Conflict  uint32 // a live entry here holds the connection's keys for another real server: kept
	Invalid   uint32 // a state that is not one of the protocol's
	FullNAT   uint32 // for a FullNAT server: a record without the extension (an older peer's), not installed
	// LocalPort: a FullNAT record (or its steering entry) whose local
	// port another connection holds.
	LocalPort uint32

	done atomic.Bool
}

// Done reports whether the worker has installed the batch.
func (b *SyncBatch) Done() bool { return b.done.Load() }

// MarkDone says the batch is installed and its counters final: the
// worker's last word on it (or a stand-in dataplane's, in tests).
func (b *SyncBatch) MarkDone() { b.done.Store(true) }

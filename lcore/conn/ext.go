package conn

import "errors"

// Ext is what a FullNAT connection needs beyond the 64-byte entry: the
// local address and port it uses towards the real server (its Reply key
// is RIP:RPort -> LIP:LPort, not -> the client) and the sequence-number
// deltas of a connection whose byte streams the director changed (a PROXY
// protocol header inserted, a SYN proxy's cookie ISN). It lives in a side
// array indexed like the entries, allocated by EnableExt only on lcores
// whose snapshots have such services: NAT, DR and TUN entries stay one
// cache line each and their lookups never touch it.
type Ext struct {
	LIP   uint32
	LPort uint16
	Flags uint16 // the caller's bits
	// ClientISN is the client's initial sequence number (its SYN's seq);
	// ServerISN the one the client sees from the server side.
	ClientISN, ServerISN uint32
	// SeqIn is added to the client's sequence numbers towards the server
	// (and taken off the server's acknowledgements); SeqOut is added to
	// the server's sequence numbers towards the client (and taken off
	// the client's acknowledgements).
	SeqIn, SeqOut uint32
	// TSOff is added to the server's TSval towards the client (and taken
	// off the client's TSecr) when a SYN proxy spliced timestamps; until
	// the server's SYN-ACK it holds the TSval the proxy's SYN-ACK gave the
	// client, and TSPeer the client's last TSval (what the proxy's SYN to
	// the server carries).
	TSOff, TSPeer uint32
}

// ErrNoExt is returned by InsertExt on a table without EnableExt.
var ErrNoExt = errors.New("conn: table has no extension array")

// ErrNoSix is returned by Insert6 on a table without EnableSix.
var ErrNoSix = errors.New("conn: table has no IPv6 address array")

// indexedExt marks an entry with an extension; indexedLocal one whose
// Reply key is then RIP:RPort -> LIP:LPort (IPv4), FullNAT's and NAT64's.
// A NAT66 entry's extension (Insert6Seq) keeps NAT66's Reply key.
// indexedLocal6 marks, beside indexedLocal, an IPv6 entry whose Reply
// key is IPv6's RIP:RPort -> LIP:LPort (FNAT66), never an IPv4 lookup's.
const (
	indexedExt    uint8 = 1 << 2
	indexedLocal  uint8 = 1 << 4
	indexedLocal6 uint8 = 1 << 5
)

// EnableExt allocates the extension array (once; later calls do nothing).
// Control work: it allocates 32 bytes per entry.
func (t *Table) EnableExt() {
	if t.ext == nil {
		t.ext = make([]Ext, len(t.entries))
	}
}

// HasExt reports whether EnableExt was called.
func (t *Table) HasExt() bool { return t.ext != nil }

// Ext returns a live entry's extension, or nil when the entry has none.
func (t *Table) Ext(id uint32) *Ext {
	if t.ext == nil || id >= uint32(len(t.entries)) || t.entries[id].indexed&(indexedLive|indexedExt) != indexedLive|indexedExt {
		return nil
	}
	return &t.ext[id]
}

// InsertExt is Insert for a connection with an extension: its Reply key
// is c.RIP:c.RPort -> x.LIP:x.LPort (c's FlagOneWay is ignored: a FullNAT
// connection sees its replies). Errors as Insert's, and ErrNoExt.
func (t *Table) InsertExt(c *Conn, x *Ext) (uint32, error) {
	if c == nil || x == nil {
		return 0, ErrNilConn
	}
	if t.ext == nil {
		return 0, ErrNoExt
	}
	return t.insert(c, x)
}

// matchesExt is matches for the Reply key of an entry with an extension.
func (x *Ext) matchesReply(c *Conn, proto uint8, srcIP uint32, srcPort uint16, dstIP uint32, dstPort uint16) bool {
	return c.Proto == proto && srcIP == c.RIP && srcPort == c.RPort && dstIP == x.LIP && dstPort == x.LPort
}

// Package connsync sends connection state between directors and installs
// what it receives: the message codec (a versioned header, fixed-size
// records in network byte order, an HMAC-SHA256 trailer), a replay filter
// per sender, and a UDP daemon with IPVS's master and backup modes.
package connsync

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"net/netip"
	"time"

	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// The wire format, all integers big-endian:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                      magic "DPSY"                             |
//	|    version    |     kind      |    syncid     |   reserved    |
//	|         record count          |           reserved            |
//	|                           reserved                            |
//	|                     sender boot id (64)                       |
//	|                     sequence (64)                             |
//	|  ref (64): bulk-end: requester's boot id; hello: state; else 0|
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                  count records of 24 bytes                    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          HMAC-SHA256 of everything before it (32)             |
//
// A record:
//
//	| client IP (32) | VIP (32) | RIP (32) | client port | VPort | RPort |
//	| proto | state | fwd | flags (bit 0: template) | reserved (16) |
//
// Kind 4 (extended records, the record layout's second version) carries
// connections with an extension, FullNAT's or a SYN proxy's, in 56-byte
// records: a record (never a template), then
//
//	| local address (32) | local port (16) | extension flags (16) |
//	| client ISN (32) | server ISN (32) | SeqIn (32) | SeqOut (32) |
//	| TSOff (32) | TSPeer (32) |
//
// A master sends them in messages of their own, so that a peer that
// knows only kind 1 still takes the plain records and drops these (its
// FullNAT clients reconnect after a failover, as before).
//
// Kind 5 carries IPv6 connections (never templates: an IPv6 template's
// key is a fold, rebuilt by the receiver from the connections) in 96-byte
// records, the full addresses and never the sender's folds of them:
//
//	| client (128) | VIP (128) | RIP (128; 0 for NAT64) |
//	| IPv4 RIP (32): NAT64's server, else 0 |
//	| client port | VPort | RPort | proto | state | fwd | reserved (8+16) |
//	| the extension as kind 4's (32 bytes): NAT64's local address and
//	  port, flags, ISNs and deltas; a SYN proxy's NAT66 TCP connection's
//	  flags, ISNs and deltas (local address and port 0); else all 0 |
//
// They too go in messages of their own: an older peer drops kind 5 for
// its kind and keeps the rest.
//
// Kind 6 carries the FTP helper's VS/NAT connections (TCP, never
// templates nor with an extension) in 48-byte records: a record, then
// the sequence adjustment of the client's stream and of the server's
// (the one a rewritten 227 reply moves), each
//
//	| init: seq of the last segment resized (32) |
//	| delta: shift from it on (32, signed) | prev: shift before it (32, signed) |
//
// a stream never shifted all 0. A control connection's record has flags
// 0; a data connection's (one the helper expected) has flag bit 1 and,
// in the record's reserved 16 bits, the port of its FTP service (its
// VPort and RPort are its own), and both streams 0. A master sends a
// control connection again when a rewrite changes its adjustment. An
// older peer drops kind 6 for its kind: those connections break at a
// takeover.
//
// Kind 7 is a master's hello, sent every HelloInterval and when it stops:
// its records are the director's own FullNAT local addresses, 4 bytes
// each (IPv4), and ref says what the sender is doing: HelloAlive,
// HelloLeaving (lbd stops: its peers take its local addresses over at
// once) or HelloForget (its master mode stopped while it runs on: its
// peers forget it and take nothing over), with bit HelloTakesOver when
// it takes a dead peer's addresses over itself (its backup mode runs and
// its takeover is on). A scale-out director takes over
// the local addresses of a peer whose hellos stopped (ctl/takeover.go).
// An older peer drops kind 7 for its kind.
//
// Kind 8 lists the peers a master's backup holds hellos from, sent with
// a bulk dump before its bulk-end, so that a director that starts after
// a crash (no handover) knows a peer that died before it: one record per
// (peer, local address), 36 bytes: the peer's address (128, IPv4-mapped),
// its boot id (64), the age of its newest hello in ms (32), flags (32:
// bit 0 leaving, bit 1 takes over) and a local address (32; 0: it listed
// none). An older peer drops kind 8 for its kind.
//
// Kinds 10 and 11 are kinds 7 and 8 for IPv6 local addresses (FNAT66's),
// which do not fit their 32-bit fields. A master sends a kind 10 hello
// (the same ref, its IPv6 local addresses 16 bytes each) right after each
// kind 7 once it has listed an IPv6 one (so a peer hears the list empty
// again); a receiver takes either as a hello and keeps the other
// family's addresses from the sender's last one of the same boot. Kind
// 11 goes with kind 8, a record per (peer, IPv6 local address), 48
// bytes: kind 8's with a 128-bit local address. An older peer drops both
// for their kind, and takes no IPv6 local address over.
const (
	Magic   = 0x44505359 // "DPSY"
	Version = 1

	HeaderLen = 40
	RecordLen = 24
	// ExtRecordLen is an extended record's length (kind 4).
	ExtRecordLen = RecordLen + 32
	// Record6Len is an IPv6 record's length (kind 5).
	Record6Len = 3*16 + 4 + 12 + extLen
	extLen     = 32
	// FTPRecordLen is an FTP control connection's record length (kind 6).
	FTPRecordLen = RecordLen + 2*shiftLen
	shiftLen     = 12
	// HelloAddrLen is a hello's record: one IPv4 local address (kind 7).
	HelloAddrLen = 4
	// HelloAddr6Len is an IPv6 hello's record: one IPv6 local address
	// (kind 10).
	HelloAddr6Len = 16
	// PeerRecordLen is a peers message's record (kind 8).
	PeerRecordLen = 16 + 8 + 4 + 4 + 4
	// PeerRecord6Len is an IPv6 peers message's record (kind 11).
	PeerRecord6Len = PeerRecordLen - 4 + 16
	// FullNAT6RecordLen is an FNAT66 record's length (kind 9), the
	// longest.
	FullNAT6RecordLen = Record6Len + 16
	MACLen            = sha256.Size

	// MinMessageLen is a message without records.
	MinMessageLen = HeaderLen + MACLen
	// MaxMessageLen bounds what a receiver accepts (a jumbo frame's
	// payload); longer datagrams are dropped for their length.
	MaxMessageLen = 9000
	// MaxRecords is the most records a message may carry.
	MaxRecords = (MaxMessageLen - MinMessageLen) / RecordLen

	// MinKeyLen is the shortest shared key accepted (128 bits).
	MinKeyLen = 16
)

const (
	offMagic   = 0
	offVersion = 4
	offKind    = 5
	offSyncID  = 6
	offRsv1    = 7
	offCount   = 8
	offRsv2    = 10
	offRsv3    = 12
	offBoot    = 16
	offSeq     = 24
	offRef     = 32

	flagTemplate = 1
	flagFTPData  = 2 // kind 6 only

	// An IPv6 record's FTP byte (kind 5, byte 61): a VS/NAT TCP control
	// connection of the FTP helper (its adjustments are never shifted over
	// IPv6), or a data connection, whose service port follows (62-63).
	ftp6Control = 1
	ftp6Data    = 2
)

// Kind is what a message carries.
type Kind uint8

const (
	KindRecords     Kind = 1  // connection and template records
	KindBulkRequest Kind = 2  // a peer asks the masters for their whole table
	KindBulkEnd     Kind = 3  // a master finished sending its table to Ref
	KindExtRecords  Kind = 4  // connection records with their extension (FullNAT, SYN proxy)
	KindRecords6    Kind = 5  // IPv6 connection records
	KindFTP         Kind = 6  // FTP control connection records with the helper's sequence adjustments
	KindHello       Kind = 7  // a master's heartbeat: its own FullNAT local addresses
	KindPeers       Kind = 8  // the peers a master's backup heard, with a bulk dump
	KindFullNAT6    Kind = 9  // FullNAT connection records to IPv6 servers (FNAT66)
	KindHello6      Kind = 10 // kind 7 for the master's IPv6 local addresses
	KindPeers6      Kind = 11 // kind 8 for the peers' IPv6 local addresses

	lastKind = KindPeers6
)

// What a hello's ref says of its sender.
const (
	HelloAlive   uint64 = 0 // it runs and owns the addresses listed
	HelloLeaving uint64 = 1 // lbd stops: take its addresses over now
	HelloForget  uint64 = 2 // its master mode stopped, lbd runs on: forget it

	// HelloTakesOver, or'ed into the state: the sender takes dead peers'
	// addresses over (a peer that does not is never chosen to).
	HelloTakesOver uint64 = 1 << 8
)

// String names the kind for logs.
func (k Kind) String() string {
	switch k {
	case KindRecords:
		return "records"
	case KindBulkRequest:
		return "bulk-request"
	case KindBulkEnd:
		return "bulk-end"
	case KindExtRecords:
		return "ext-records"
	case KindRecords6:
		return "ipv6-records"
	case KindFTP:
		return "ftp-records"
	case KindHello:
		return "hello"
	case KindPeers:
		return "peers"
	case KindFullNAT6:
		return "fullnat6-records"
	case KindHello6:
		return "hello6"
	case KindPeers6:
		return "peers6"
	}
	return "unknown"
}

// Header is a message's header, without the record count (the records
// slice's length is the count).
type Header struct {
	Kind   Kind
	SyncID uint8
	Boot   uint64 // the sender's boot id: larger after each start
	Seq    uint64 // the sender's message sequence, from 1
	Ref    uint64 // bulk-end: the boot id of the peer whose request it ends; hello: HelloAlive, HelloLeaving or HelloForget, and HelloTakesOver
}

// Codec encodes and checks messages with one shared key. It keeps one
// HMAC state, so a Codec belongs to one goroutine.
type Codec struct {
	mac hash.Hash
	sum [MACLen]byte
}

// NewCodec makes a codec for key, which must be at least MinKeyLen bytes.
func NewCodec(key []byte) (*Codec, error) {
	if len(key) < MinKeyLen {
		return nil, errShortKey(len(key))
	}
	return &Codec{mac: hmac.New(sha256.New, key)}, nil
}

// RecordsFit is how many records fit a datagram of payload bytes.
func RecordsFit(payload int) int {
	n := (min(payload, MaxMessageLen) - MinMessageLen) / RecordLen
	return max(n, 0)
}

// ExtRecordsFit is how many extended records fit a datagram of payload bytes.
func ExtRecordsFit(payload int) int { return KindFit(KindExtRecords, payload) }

// KindFit is how many records of a message of kind k fit a datagram of
// payload bytes.
func KindFit(k Kind, payload int) int {
	n := (min(payload, MaxMessageLen) - MinMessageLen) / recordLen(k)
	return max(n, 0)
}

// recordLen is the length of a record in a message of kind k.
func recordLen(k Kind) int {
	switch k {
	case KindExtRecords:
		return ExtRecordLen
	case KindRecords6:
		return Record6Len
	case KindFTP:
		return FTPRecordLen
	case KindHello:
		return HelloAddrLen
	case KindPeers:
		return PeerRecordLen
	case KindFullNAT6:
		return FullNAT6RecordLen
	case KindHello6:
		return HelloAddr6Len
	case KindPeers6:
		return PeerRecord6Len
	}
	return RecordLen
}

// RecordKind is the kind of message that carries r.
func RecordKind(r *lcore.SyncConn) Kind {
	switch {
	case r.IPv6 && !r.Six.LIP.IsUnspecified():
		return KindFullNAT6
	case r.IPv6:
		return KindRecords6
	case r.FTP || r.FTPData:
		return KindFTP
	case r.HasExt:
		return KindExtRecords
	}
	return KindRecords
}

// hasRecords reports whether messages of kind k carry records.
func hasRecords(k Kind) bool {
	return k == KindRecords || k == KindExtRecords || k == KindRecords6 || k == KindFTP || k == KindFullNAT6
}

// IsHello reports whether kind k is a hello (7, or 10 for IPv6).
func IsHello(k Kind) bool { return k == KindHello || k == KindHello6 }

// isPeers reports whether kind k is a peers message (8, or 11 for IPv6).
func isPeers(k Kind) bool { return k == KindPeers || k == KindPeers6 }

// lipFamily reports whether local address a belongs in a message of kind
// k: IPv4 in kinds 7 and 8, IPv6 in 10 and 11.
func lipFamily(k Kind, a netip.Addr) bool {
	return a.Is4() == (k == KindHello || k == KindPeers)
}

// validLIP reports whether a can be a director's local address: unicast,
// neither unspecified nor loopback, IPv6 not IPv4-mapped.
func validLIP(a netip.Addr) bool {
	return a.IsValid() && !a.IsUnspecified() && !a.IsMulticast() && !a.IsLoopback() && !a.Is4In6() &&
		a != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

// lipAt reads the local address of n bytes (4 or 16) at b.
func lipAt(b []byte, n int) netip.Addr {
	if n == 4 {
		return netip.AddrFrom4([4]byte(b[:4]))
	}
	return netip.AddrFrom16([16]byte(b[:16]))
}

// Append appends the message h with recs, MAC included, to dst.
func (c *Codec) Append(dst []byte, h Header, recs []lcore.SyncConn) []byte {
	start := len(dst)
	dst = appendHeader(dst, h, len(recs))
	for i := range recs {
		switch h.Kind {
		case KindRecords6:
			dst = appendRecord6(dst, &recs[i])
		case KindFullNAT6:
			dst = appendFullNAT6(dst, &recs[i])
		case KindFTP:
			dst = appendFTP(appendRecord(dst, &recs[i]), &recs[i])
		case KindExtRecords:
			dst = appendExt(appendRecord(dst, &recs[i]), &recs[i].Ext)
		default:
			dst = appendRecord(dst, &recs[i])
		}
	}
	return c.sign(dst, start)
}

// appendHeader appends h's header with a count of n records.
func appendHeader(dst []byte, h Header, n int) []byte {
	var b [HeaderLen]byte
	binary.BigEndian.PutUint32(b[offMagic:], Magic)
	b[offVersion] = Version
	b[offKind] = byte(h.Kind)
	b[offSyncID] = h.SyncID
	binary.BigEndian.PutUint16(b[offCount:], uint16(n))
	binary.BigEndian.PutUint64(b[offBoot:], h.Boot)
	binary.BigEndian.PutUint64(b[offSeq:], h.Seq)
	binary.BigEndian.PutUint64(b[offRef:], h.Ref)
	return append(dst, b[:]...)
}

// sign appends the MAC of the message that starts at dst[start].
func (c *Codec) sign(dst []byte, start int) []byte {
	c.mac.Reset()
	c.mac.Write(dst[start:])
	return c.mac.Sum(dst)
}

func appendRecord(dst []byte, r *lcore.SyncConn) []byte {
	var b [RecordLen]byte
	binary.BigEndian.PutUint32(b[0:], r.ClientIP)
	binary.BigEndian.PutUint32(b[4:], r.VIP)
	binary.BigEndian.PutUint32(b[8:], r.RIP)
	binary.BigEndian.PutUint16(b[12:], r.ClientPort)
	binary.BigEndian.PutUint16(b[14:], r.VPort)
	binary.BigEndian.PutUint16(b[16:], r.RPort)
	b[18], b[19], b[20] = r.Proto, byte(r.State), byte(r.Fwd)
	if r.Template {
		b[21] = flagTemplate
	}
	return append(dst, b[:]...)
}

func appendExt(dst []byte, x *conn.Ext) []byte {
	dst = binary.BigEndian.AppendUint32(dst, x.LIP)
	dst = binary.BigEndian.AppendUint16(dst, x.LPort)
	dst = binary.BigEndian.AppendUint16(dst, x.Flags)
	dst = binary.BigEndian.AppendUint32(dst, x.ClientISN)
	dst = binary.BigEndian.AppendUint32(dst, x.ServerISN)
	dst = binary.BigEndian.AppendUint32(dst, x.SeqIn)
	dst = binary.BigEndian.AppendUint32(dst, x.SeqOut)
	dst = binary.BigEndian.AppendUint32(dst, x.TSOff)
	return binary.BigEndian.AppendUint32(dst, x.TSPeer)
}

// Decode checks msg and appends its records to recs. The cheap checks
// (length, magic, version, kind) come before the MAC so garbage costs
// little; no record is looked at before the MAC is right. A rejected
// message returns the reason it is dropped for, and recs unchanged.
func (c *Codec) Decode(msg []byte, recs []lcore.SyncConn) (Header, []lcore.SyncConn, Reason) {
	var h Header
	if len(msg) < MinMessageLen || len(msg) > MaxMessageLen {
		return h, recs, ReasonLength
	}
	if binary.BigEndian.Uint32(msg[offMagic:]) != Magic {
		return h, recs, ReasonMagic
	}
	if msg[offVersion] != Version {
		return h, recs, ReasonVersion
	}
	count := int(binary.BigEndian.Uint16(msg[offCount:]))
	h.Kind = Kind(msg[offKind])
	rlen := recordLen(h.Kind)
	if len(msg) != MinMessageLen+count*rlen {
		return h, recs, ReasonLength
	}
	switch {
	case h.Kind < KindRecords || h.Kind > lastKind:
		return h, recs, ReasonKind
	case !hasRecords(h.Kind) && !IsHello(h.Kind) && !isPeers(h.Kind) && count != 0,
		IsHello(h.Kind) && binary.BigEndian.Uint64(msg[offRef:])&^HelloTakesOver > HelloForget:
		return h, recs, ReasonMalformed
	case msg[offRsv1] != 0 || binary.BigEndian.Uint16(msg[offRsv2:]) != 0 || binary.BigEndian.Uint32(msg[offRsv3:]) != 0:
		return h, recs, ReasonMalformed
	}
	body := msg[:len(msg)-MACLen]
	c.mac.Reset()
	c.mac.Write(body)
	if !hmac.Equal(c.mac.Sum(c.sum[:0]), msg[len(body):]) {
		return h, recs, ReasonMAC
	}
	h.SyncID = msg[offSyncID]
	h.Boot = binary.BigEndian.Uint64(msg[offBoot:])
	h.Seq = binary.BigEndian.Uint64(msg[offSeq:])
	h.Ref = binary.BigEndian.Uint64(msg[offRef:])
	if h.Boot == 0 || h.Seq == 0 {
		return h, recs, ReasonMalformed
	}
	if IsHello(h.Kind) {
		// Its addresses are read by HelloAddrs once the message passed.
		for off := HeaderLen; off < len(body); off += rlen {
			if !validLIP(lipAt(body[off:], rlen)) {
				return h, recs, ReasonRecord
			}
		}
		return h, recs, ReasonNone
	}
	if isPeers(h.Kind) {
		// Its peers are read by PeersOf once the message passed; kind 8's
		// local address 0 says the peer listed none.
		for off := HeaderLen; off < len(body); off += rlen {
			b := body[off : off+rlen]
			a := netip.AddrFrom16([16]byte(b[:16])).Unmap()
			lip := lipAt(b[32:], rlen-32)
			if a.IsUnspecified() || a.IsMulticast() || binary.BigEndian.Uint64(b[16:]) == 0 ||
				binary.BigEndian.Uint32(b[28:])&^(peerLeaving|peerTakesOver) != 0 ||
				!validLIP(lip) && (h.Kind == KindPeers6 || !lip.IsUnspecified()) {
				return h, recs, ReasonRecord
			}
		}
		return h, recs, ReasonNone
	}
	n := len(recs)
	for off := HeaderLen; off < len(body); off += rlen {
		var r lcore.SyncConn
		var ok bool
		switch h.Kind {
		case KindRecords6:
			r, ok = decodeRecord6(body[off : off+rlen])
		case KindFullNAT6:
			r, ok = decodeFullNAT6(body[off : off+rlen])
		case KindFTP:
			r, ok = decodeFTPRecord(body[off : off+rlen])
		case KindExtRecords:
			r, ok = decodeExtRecord(body[off : off+rlen])
		default:
			r, ok = decodeRecord(body[off : off+rlen])
		}
		if !ok {
			return h, recs[:n], ReasonRecord
		}
		recs = append(recs, r)
	}
	return h, recs, ReasonNone
}

// AppendHello appends a hello (h.Kind KindHello or KindHello6, h.Ref
// what the sender does) listing those of lips of its family, MAC
// included, to dst.
func (c *Codec) AppendHello(dst []byte, h Header, lips []netip.Addr) []byte {
	start := len(dst)
	n := 0
	for _, a := range lips {
		if lipFamily(h.Kind, a) {
			n++
		}
	}
	dst = appendHeader(dst, h, n)
	for _, a := range lips {
		if lipFamily(h.Kind, a) {
			dst = append(dst, a.AsSlice()...)
		}
	}
	return c.sign(dst, start)
}

// Flags of a peers record.
const (
	peerLeaving   = 1
	peerTakesOver = 2
)

// peerRecords is how many records peer p takes in a peers message of
// kind k: one per local address of the kind's family; in kind 8 one for
// a peer with none (so that it is known), in kind 11 none.
func peerRecords(k Kind, p *PeerHello) int {
	n := 0
	for _, a := range p.LIPs {
		if lipFamily(k, a) {
			n++
		}
	}
	if k == KindPeers {
		n = max(n, 1)
	}
	return n
}

// AppendPeers appends a peers message (h.Kind KindPeers or KindPeers6)
// listing peers, each hello's age counted to now, MAC included, to dst.
// The caller keeps the records (peerRecords) within a datagram.
func (c *Codec) AppendPeers(dst []byte, h Header, peers []PeerHello, now time.Time) []byte {
	start := len(dst)
	n := 0
	for i := range peers {
		n += peerRecords(h.Kind, &peers[i])
	}
	dst = appendHeader(dst, h, n)
	for _, p := range peers {
		a := p.Peer.As16()
		age := uint32(min(max(now.Sub(p.At).Milliseconds(), 0), 1<<32-1))
		var flags uint32
		if p.Leaving {
			flags |= peerLeaving
		}
		if p.TakesOver {
			flags |= peerTakesOver
		}
		record := func(lip []byte) {
			dst = append(dst, a[:]...)
			dst = binary.BigEndian.AppendUint64(dst, p.Boot)
			dst = binary.BigEndian.AppendUint32(dst, age)
			dst = binary.BigEndian.AppendUint32(dst, flags)
			dst = append(dst, lip...)
		}
		listed := false
		for _, l := range p.LIPs {
			if lipFamily(h.Kind, l) {
				record(l.AsSlice())
				listed = true
			}
		}
		if !listed && h.Kind == KindPeers {
			record(make([]byte, 4))
		}
	}
	return c.sign(dst, start)
}

// PeersOf reads the peers of peers message msg, which Decode passed, each
// hello's time its age before now; a peer's records are merged.
func PeersOf(msg []byte, now time.Time) []PeerHello {
	rlen := recordLen(Kind(msg[offKind]))
	body := msg[HeaderLen : len(msg)-MACLen]
	var out []PeerHello
	for off := 0; off+rlen <= len(body); off += rlen {
		b := body[off : off+rlen]
		a, boot := netip.AddrFrom16([16]byte(b[:16])).Unmap(), binary.BigEndian.Uint64(b[16:])
		if len(out) == 0 || out[len(out)-1].Peer != a || out[len(out)-1].Boot != boot {
			flags := binary.BigEndian.Uint32(b[28:])
			out = append(out, PeerHello{Peer: a, Hello: Hello{Boot: boot,
				At:      now.Add(-time.Duration(binary.BigEndian.Uint32(b[24:])) * time.Millisecond),
				Leaving: flags&peerLeaving != 0, TakesOver: flags&peerTakesOver != 0}})
		}
		if l := lipAt(b[32:], rlen-32); !l.IsUnspecified() {
			out[len(out)-1].LIPs = append(out[len(out)-1].LIPs, l)
		}
	}
	return out
}

// HelloAddrs reads the local addresses of hello msg (kind 7 or 10),
// which Decode passed.
func HelloAddrs(msg []byte) []netip.Addr {
	rlen := recordLen(Kind(msg[offKind]))
	body := msg[HeaderLen : len(msg)-MACLen]
	out := make([]netip.Addr, 0, len(body)/rlen)
	for off := 0; off+rlen <= len(body); off += rlen {
		out = append(out, lipAt(body[off:], rlen))
	}
	return out
}

func decodeRecord(b []byte) (lcore.SyncConn, bool) {
	r, ok := decodeRecordAny(b)
	return r, ok && r.Fwd <= fwd.TUN // FullNAT travels in extended records only
}

// decodeRecordAny reads a record's common 24 bytes, any method.
func decodeRecordAny(b []byte) (lcore.SyncConn, bool) {
	r := lcore.SyncConn{
		ClientIP:   binary.BigEndian.Uint32(b[0:]),
		VIP:        binary.BigEndian.Uint32(b[4:]),
		RIP:        binary.BigEndian.Uint32(b[8:]),
		ClientPort: binary.BigEndian.Uint16(b[12:]),
		VPort:      binary.BigEndian.Uint16(b[14:]),
		RPort:      binary.BigEndian.Uint16(b[16:]),
		Proto:      b[18],
		State:      conn.State(b[19]),
		Fwd:        fwd.Method(b[20]),
		Template:   b[21]&flagTemplate != 0,
	}
	ok := (r.Proto == hdr.ProtoTCP || r.Proto == hdr.ProtoUDP) &&
		r.State < conn.NumStates && r.Fwd <= fwd.FullNAT &&
		b[21]&^flagTemplate == 0 && b[22] == 0 && b[23] == 0 &&
		r.VIP != 0 && r.RIP != 0 && (r.Template || (r.ClientIP != 0 && r.ClientPort != 0))
	return r, ok
}

// decodeExtRecord reads an extended record: a connection (not a
// template) with its extension. A FullNAT one names its local endpoint;
// a NAT one (a SYN-proxied connection) has the client's there.
func decodeExtRecord(b []byte) (lcore.SyncConn, bool) {
	r, ok := decodeRecordAny(b[:RecordLen])
	x := b[RecordLen:]
	r.HasExt = true
	r.Ext = decodeExt(x)
	ok = ok && !r.Template && (r.Fwd == fwd.NAT || r.Fwd == fwd.FullNAT) &&
		r.Ext.LIP != 0 && r.Ext.LPort != 0 && r.Ext.Flags&^lcore.ExtFlagsMask == 0 &&
		(r.Fwd == fwd.FullNAT || r.Proto == hdr.ProtoTCP && r.Ext.LIP == r.ClientIP && r.Ext.LPort == r.ClientPort)
	return r, ok
}

func decodeExt(x []byte) conn.Ext {
	return conn.Ext{
		LIP:       binary.BigEndian.Uint32(x[0:]),
		LPort:     binary.BigEndian.Uint16(x[4:]),
		Flags:     binary.BigEndian.Uint16(x[6:]),
		ClientISN: binary.BigEndian.Uint32(x[8:]),
		ServerISN: binary.BigEndian.Uint32(x[12:]),
		SeqIn:     binary.BigEndian.Uint32(x[16:]),
		SeqOut:    binary.BigEndian.Uint32(x[20:]),
		TSOff:     binary.BigEndian.Uint32(x[24:]),
		TSPeer:    binary.BigEndian.Uint32(x[28:]),
	}
}

// appendFTP appends what kind 6 adds to r's record, just appended to
// dst: a data connection's flag and service port, the sequence
// adjustments.
func appendFTP(dst []byte, r *lcore.SyncConn) []byte {
	if rec := dst[len(dst)-RecordLen:]; r.FTPData {
		rec[21] |= flagFTPData
		binary.BigEndian.PutUint16(rec[22:], r.ServicePort)
	}
	for _, s := range [2]*lcore.SeqShift{&r.FTPIn, &r.FTPOut} {
		dst = binary.BigEndian.AppendUint32(dst, s.Init)
		dst = binary.BigEndian.AppendUint32(dst, uint32(s.Delta))
		dst = binary.BigEndian.AppendUint32(dst, uint32(s.Prev))
	}
	return dst
}

// decodeFTPRecord reads an FTP record: a VS/NAT TCP connection (not a
// template) and the adjustments of its two streams, each possible (one
// never shifted is all 0); a data connection with its service's port
// and nothing shifted.
func decodeFTPRecord(b []byte) (lcore.SyncConn, bool) {
	var rec [RecordLen]byte
	copy(rec[:], b)
	data, port := rec[21]&flagFTPData != 0, binary.BigEndian.Uint16(rec[22:])
	rec[21] &^= flagFTPData
	rec[22], rec[23] = 0, 0
	r, ok := decodeRecordAny(rec[:])
	r.FTP, r.FTPData, r.ServicePort = !data, data, port
	ok = ok && data == (port != 0)
	for i, s := range [2]*lcore.SeqShift{&r.FTPIn, &r.FTPOut} {
		x := b[RecordLen+i*shiftLen:]
		*s = lcore.SeqShift{
			Init:  binary.BigEndian.Uint32(x[0:]),
			Delta: int32(binary.BigEndian.Uint32(x[4:])),
			Prev:  int32(binary.BigEndian.Uint32(x[8:])),
		}
		ok = ok && s.Possible()
	}
	unshifted := r.FTPIn == lcore.SeqShift{} && r.FTPOut == lcore.SeqShift{}
	return r, ok && !r.Template && r.Fwd == fwd.NAT && r.Proto == hdr.ProtoTCP && (!data || unshifted)
}

// appendRecord6 appends an IPv6 connection in the kind 5 layout. A
// NAT64 connection's extension follows; the others have 32 zero bytes.
func appendRecord6(dst []byte, r *lcore.SyncConn) []byte {
	dst = append(dst, r.Six.Client[:]...)
	dst = append(dst, r.Six.VIP[:]...)
	dst = append(dst, r.Six.RIP[:]...)
	dst = binary.BigEndian.AppendUint32(dst, r.RIP)
	dst = binary.BigEndian.AppendUint16(dst, r.ClientPort)
	dst = binary.BigEndian.AppendUint16(dst, r.VPort)
	dst = binary.BigEndian.AppendUint16(dst, r.RPort)
	var ftp byte
	var servicePort uint16
	switch {
	case r.FTPData:
		ftp, servicePort = ftp6Data, r.ServicePort
	case r.FTP:
		ftp = ftp6Control
	}
	dst = append(dst, r.Proto, byte(r.State), byte(r.Fwd), ftp)
	dst = binary.BigEndian.AppendUint16(dst, servicePort)
	var x conn.Ext
	if r.HasExt {
		x = r.Ext
	}
	return appendExt(dst, &x)
}

// decodeRecord6 reads an IPv6 record and reports whether it is a possible
// connection: TCP or UDP, a known state, addresses given (the client's,
// the VIP's, and the server's of its family), NAT64 (an IPv4 server,
// method fullnat) with its local endpoint, a SYN proxy's NAT66 TCP
// connection with its extension but no local endpoint, NAT66, DR and TUN
// otherwise without, an FTP control or data connection only for NAT66
// TCP (a data one with its service port), other bytes 0. What it accepts encodes back to the
// same bytes.
func decodeRecord6(b []byte) (lcore.SyncConn, bool) {
	r := lcore.SyncConn{IPv6: true}
	copy(r.Six.Client[:], b[0:16])
	copy(r.Six.VIP[:], b[16:32])
	copy(r.Six.RIP[:], b[32:48])
	r.RIP = binary.BigEndian.Uint32(b[48:])
	r.ClientPort = binary.BigEndian.Uint16(b[52:])
	r.VPort = binary.BigEndian.Uint16(b[54:])
	r.RPort = binary.BigEndian.Uint16(b[56:])
	r.Proto, r.State, r.Fwd = b[58], conn.State(b[59]), fwd.Method(b[60])
	x := b[64:Record6Len]
	nat64 := r.Fwd == fwd.FullNAT
	if nat64 {
		r.HasExt, r.Ext = true, decodeExt(x)
	}
	ftp, servicePort := b[61], binary.BigEndian.Uint16(b[62:])
	r.FTP, r.FTPData = ftp == ftp6Control, ftp == ftp6Data
	if r.FTPData {
		r.ServicePort = servicePort
	}
	ok := (r.Proto == hdr.ProtoTCP || r.Proto == hdr.ProtoUDP) && r.State < conn.NumStates && r.Fwd <= fwd.FullNAT &&
		ftp <= ftp6Data && (servicePort != 0) == r.FTPData && (ftp == 0 || r.Proto == hdr.ProtoTCP && r.Fwd == fwd.NAT) &&
		!r.Six.Client.IsUnspecified() && !r.Six.VIP.IsUnspecified() && r.ClientPort != 0
	if nat64 {
		return r, ok && r.Six.RIP.IsUnspecified() && r.RIP != 0 &&
			r.Ext.LIP != 0 && r.Ext.LPort != 0 && r.Ext.Flags&^lcore.ExtFlagsMask == 0
	}
	ok = ok && !r.Six.RIP.IsUnspecified() && r.RIP == 0
	if string(x) == string(make([]byte, extLen)) {
		return r, ok
	}
	// A SYN proxy's NAT66 TCP connection: its ISNs and deltas, no local
	// endpoint.
	r.HasExt, r.Ext = true, decodeExt(x)
	return r, ok && r.Fwd == fwd.NAT && r.Proto == hdr.ProtoTCP && ftp == 0 &&
		r.Ext.LIP == 0 && r.Ext.LPort == 0 && r.Ext.Flags&^lcore.ExtFlagsMask == 0
}

// appendFullNAT6 appends an FNAT66 connection in the kind 9 layout: the
// kind 5 record (the IPv6 server in its RIP, the extension's local
// address 0), then the IPv6 local address.
func appendFullNAT6(dst []byte, r *lcore.SyncConn) []byte {
	dst = appendRecord6(dst, r)
	return append(dst, r.Six.LIP[:]...)
}

// decodeFullNAT6 reads an FNAT66 record and reports whether it is a
// possible connection: a kind 5 record of a fullnat TCP or UDP connection
// to an IPv6 server with its local port (neither FTP nor NAT64's IPv4
// server nor local address), and a unicast local address.
func decodeFullNAT6(b []byte) (lcore.SyncConn, bool) {
	r := lcore.SyncConn{IPv6: true}
	copy(r.Six.Client[:], b[0:16])
	copy(r.Six.VIP[:], b[16:32])
	copy(r.Six.RIP[:], b[32:48])
	copy(r.Six.LIP[:], b[Record6Len:FullNAT6RecordLen])
	r.RIP = binary.BigEndian.Uint32(b[48:])
	r.ClientPort = binary.BigEndian.Uint16(b[52:])
	r.VPort = binary.BigEndian.Uint16(b[54:])
	r.RPort = binary.BigEndian.Uint16(b[56:])
	r.Proto, r.State, r.Fwd = b[58], conn.State(b[59]), fwd.Method(b[60])
	r.HasExt, r.Ext = true, decodeExt(b[64:Record6Len])
	for _, a := range []*hdr.Addr6{&r.Six.Client, &r.Six.VIP, &r.Six.RIP, &r.Six.LIP} {
		if a.IsUnspecified() || a.IsMulticast() {
			return r, false
		}
	}
	return r, (r.Proto == hdr.ProtoTCP || r.Proto == hdr.ProtoUDP) && r.State < conn.NumStates && r.Fwd == fwd.FullNAT &&
		r.RIP == 0 && b[61] == 0 && binary.BigEndian.Uint16(b[62:]) == 0 && r.ClientPort != 0 &&
		r.Ext.LIP == 0 && r.Ext.LPort != 0 && r.Ext.Flags&^lcore.ExtFlagsMask == 0
}

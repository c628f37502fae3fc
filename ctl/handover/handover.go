// Package handover is what a stopping lbd hands to the lbd that follows
// it, so that established connections survive a restart or an upgrade:
// the connection table and the persistence templates as the records
// directors sync (lcore.SyncConn), the listing's counters per real
// server, and the neighbour table.
//
// The encoding is binary, all integers big-endian, and ends in a SHA-256
// of everything before it: a torn or corrupted file is refused whole,
// never half installed. It is not authenticated: it travels in lbd's own
// memory (an inherited memfd across exec) or in a file only root may
// write (restart.state_file).
//
//	magic "DPLBHAND" (8) | version (16) | flags (16) | written, Unix ns (64)
//	| writer's pid (32) | config path length (16) | config path
//	| sync daemons (8), each: mode (8) | syncid (8) | interface length (8) | interface
//	| version 2: steering key (40), all zero when not handed over
//	| records (32) | version 2: extended records (32) | counters (32) | neighbours (32)
//	| records of 24 bytes (connection sync's record, ctl/connsync)
//	| version 2: extended records of 56 bytes (FullNAT and SYN-proxied
//	  connections, connection sync's kind 4)
//	| counters of 96 bytes | neighbours of 12 bytes
//	| version 3: IPv6 records (32) | IPv6 counters (32) | IPv6 neighbours (32)
//	| version 3: IPv6 records of 96 bytes (connection sync's kind 5: the
//	  full addresses, which the next lbd folds with its own key)
//	| version 3: IPv6 counters of 124 bytes (proto, 0, VPort, VIP (128),
//	  RIP (128; 0 for an IPv4 server), IPv4 RIP (32), RPort, 0, then the
//	  counters and baselines as an IPv4 one's)
//	| version 3: IPv6 neighbours of 24 bytes (address (128), MAC, port)
//	| version 4: FTP records (32) | version 5: services length (32)
//	| version 6: peers length (32)
//	| version 4: FTP records of 48 bytes (the FTP helper's VS/NAT control
//	  connections with their sequence adjustments and data connections
//	  with their service, connection sync's kind 6)
//	| version 5: the services, as the control plane encodes them (opaque
//	  here: the running table with lbctl's edits, and the configuration's
//	  as the writer last read it)
//	| version 6: the peer directors whose hellos the writer's sync backup
//	  held, each: address (128, IPv4-mapped for IPv4) | boot id (64)
//	  | age of the hello at writing, ms (32) | flags (8: bit 0 leaving,
//	  bit 1 takes over) | local addresses (8) | each (32)
//	  | version 8: IPv6 local addresses (8) | each (128)
//	| SHA-256 of all the above (32)
//
// Flags: bit 0, the writer was one of an HA pair's backup (else master);
// bit 1, it was the master. Neither: not said.
//
// A build writes version 8 and reads 1 to 8 (an upgrade from a build
// that wrote an older version keeps the connections that version
// carries, an FTP control connection as a plain one, untranslated, and
// starts with its configuration's services and no peers, or with the
// peers' IPv4 local addresses alone before version 8; a downgrade to a
// build that does not read version 8 starts with an empty table).
package handover

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/dplb/dplb/ctl/connsync"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/hdr"
)

const (
	magic = "DPLBHAND"
	// Version is the encoding's version written; a build reads it and
	// the versions before it (from 1) and refuses any other.
	Version = 8

	RecordLen     = connsync.RecordLen
	ExtRecordLen  = connsync.ExtRecordLen
	keyLen        = lcore.SteeringKeyLen
	CountersLen   = 96
	NeighbourLen  = 12
	Record6Len    = connsync.Record6Len
	Counters6Len  = 124
	Neighbour6Len = 24
	FTPRecordLen  = connsync.FTPRecordLen
	// FullNAT6RecordLen is an FNAT66 connection's record (version 7).
	FullNAT6RecordLen = connsync.FullNAT6RecordLen

	fixedLen = 8 + 2 + 2 + 8 + 4 + 2 + 4 + 4 + 4
	sumLen   = sha256.Size
	// MaxLen bounds what Decode accepts (and what lbd reads): 16 million
	// records and then some.
	MaxLen = 512 << 20

	flagBackup = 1
	flagMaster = 2

	peerFixedLen    = 16 + 8 + 4 + 1 + 1
	peerLeaving     = 1
	peerTakesOver   = 2
	maxPeerLIPs     = 255
	maxHelloAgeMsec = 1<<32 - 1
)

// State is what one lbd hands to the next.
type State struct {
	Written    time.Time
	PID        int    // the writer's process id (for the log)
	ConfigPath string // the configuration file the writer ran with
	// HA is the writer's state in an HA pair, "master" or "backup" (as
	// keepalived last set it, which may not be the configuration's); ""
	// when not said.
	HA string
	// SyncDaemons are the connection sync daemons the writer ran (as
	// keepalived's notify script last started them).
	SyncDaemons []SyncDaemon
	// Records are the connections and templates; those with HasExt are
	// written as extended records, the IPv6 ones as IPv6 records, the FTP
	// control connections as FTP records.
	Records []lcore.SyncConn
	// SteeringKey is the writer's steering key (nil from a version 1
	// writer): a FullNAT connection's local port was chosen for its owner
	// under it, so the next lbd keeps it unless its configuration sets one.
	SteeringKey []byte
	Counters    []DestCounters
	Neighbours  []Neighbour
	Neighbours6 []Neighbour6
	// Services are the writer's services, encoded by the control plane
	// (ctl's servicesHandover); nil from a writer before version 5.
	Services []byte
	// Peers are the peer directors' newest hellos as the writer's sync
	// backup held them (At is as old as it was then, to the millisecond),
	// so that the next lbd knows a peer that died before it started;
	// nil from a writer before version 6.
	Peers []connsync.PeerHello
}

// DestCounters are one (service, real server) pair's counters as the
// writer's listing had them: the dataplane's, and the baseline the
// listing subtracts (lbctl -Z).
type DestCounters struct {
	Proto uint8
	VIP   uint32
	VPort uint16
	RIP   uint32 // an IPv4 server's (an IPv6 service's NAT64 one too)
	RPort uint16
	// VIP6, RIP6: an IPv6 service's VIP (VIP then 0) and IPv6 server.
	VIP6, RIP6 hdr.Addr6
	// Conns, InPkts, OutPkts, InBytes, OutBytes.
	Counters, Base [5]uint64
}

// SyncDaemon is one running connection sync daemon.
type SyncDaemon struct {
	Mode      string // "master" or "backup"
	SyncID    uint8
	Interface string // its multicast interface as started ("" the configuration's)
}

// Neighbour is one resolved next hop.
type Neighbour struct {
	IP   uint32
	MAC  hdr.MAC
	Port uint16
}

// Neighbour6 is one resolved IPv6 next hop.
type Neighbour6 struct {
	IP   hdr.Addr6
	MAC  hdr.MAC
	Port uint16
}

// Encode appends s's encoding to b.
func Encode(b []byte, s State) []byte {
	start := len(b)
	b = append(b, magic...)
	b = binary.BigEndian.AppendUint16(b, Version)
	var flags uint16
	switch s.HA {
	case "backup":
		flags = flagBackup
	case "master":
		flags = flagMaster
	}
	b = binary.BigEndian.AppendUint16(b, flags)
	b = binary.BigEndian.AppendUint64(b, uint64(s.Written.UnixNano()))
	b = binary.BigEndian.AppendUint32(b, uint32(s.PID))
	path := s.ConfigPath
	if len(path) > 4096 {
		path = path[:4096]
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(path)))
	b = append(b, path...)
	daemons := s.SyncDaemons[:min(len(s.SyncDaemons), 2)]
	b = append(b, byte(len(daemons)))
	for _, d := range daemons {
		mode := byte(1)
		if d.Mode == "backup" {
			mode = 2
		}
		iface := d.Interface[:min(len(d.Interface), 255)]
		b = append(b, mode, d.SyncID, byte(len(iface)))
		b = append(b, iface...)
	}
	var key [keyLen]byte
	copy(key[:], s.SteeringKey)
	b = append(b, key[:]...)
	var kinds [5]int // plain, extended, IPv6, FTP, FNAT66 records
	for i := range s.Records {
		kinds[recordKind(&s.Records[i])]++
	}
	six := 0
	for i := range s.Counters {
		if s.Counters[i].isIPv6() {
			six++
		}
	}
	b = binary.BigEndian.AppendUint32(b, uint32(kinds[0]))
	b = binary.BigEndian.AppendUint32(b, uint32(kinds[1]))
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.Counters)-six))
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.Neighbours)))
	b = binary.BigEndian.AppendUint32(b, uint32(kinds[2]))
	b = binary.BigEndian.AppendUint32(b, uint32(six))
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.Neighbours6)))
	b = binary.BigEndian.AppendUint32(b, uint32(kinds[3]))
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.Services)))
	peersAt := len(b)
	b = binary.BigEndian.AppendUint32(b, 0) // the peers' length, once written
	b = binary.BigEndian.AppendUint32(b, uint32(kinds[4]))
	for k, appendRec := range []func([]byte, lcore.SyncConn) []byte{connsync.AppendRecord, connsync.AppendExtRecord} {
		for i := range s.Records {
			if recordKind(&s.Records[i]) == k {
				b = appendRec(b, s.Records[i])
			}
		}
	}
	for _, c := range s.Counters {
		if c.isIPv6() {
			continue
		}
		b = append(b, c.Proto, 0)
		b = binary.BigEndian.AppendUint16(b, c.VPort)
		b = binary.BigEndian.AppendUint32(b, c.VIP)
		b = binary.BigEndian.AppendUint32(b, c.RIP)
		b = binary.BigEndian.AppendUint16(b, c.RPort)
		b = binary.BigEndian.AppendUint16(b, 0)
		b = appendCounters(b, c)
	}
	for _, n := range s.Neighbours {
		b = binary.BigEndian.AppendUint32(b, n.IP)
		b = append(b, n.MAC[:]...)
		b = binary.BigEndian.AppendUint16(b, n.Port)
	}
	for i := range s.Records {
		if recordKind(&s.Records[i]) == 2 {
			b = connsync.AppendRecord6(b, s.Records[i])
		}
	}
	for _, c := range s.Counters {
		if !c.isIPv6() {
			continue
		}
		b = append(b, c.Proto, 0)
		b = binary.BigEndian.AppendUint16(b, c.VPort)
		b = append(b, c.VIP6[:]...)
		b = append(b, c.RIP6[:]...)
		b = binary.BigEndian.AppendUint32(b, c.RIP)
		b = binary.BigEndian.AppendUint16(b, c.RPort)
		b = binary.BigEndian.AppendUint16(b, 0)
		b = appendCounters(b, c)
	}
	for _, n := range s.Neighbours6 {
		b = append(b, n.IP[:]...)
		b = append(b, n.MAC[:]...)
		b = binary.BigEndian.AppendUint16(b, n.Port)
	}
	for i := range s.Records {
		if recordKind(&s.Records[i]) == 3 {
			b = connsync.AppendFTPRecord(b, s.Records[i])
		}
	}
	b = append(b, s.Services...)
	n := len(b)
	b = appendPeers(b, s.Peers, s.Written)
	binary.BigEndian.PutUint32(b[peersAt:], uint32(len(b)-n))
	for i := range s.Records {
		if recordKind(&s.Records[i]) == 4 {
			b = connsync.AppendFullNAT6Record(b, s.Records[i])
		}
	}
	sum := sha256.Sum256(b[start:])
	return append(b, sum[:]...)
}

// Decode checks and reads an encoded State. Any defect refuses the whole:
// a wrong magic or version, a length that does not add up, a checksum
// that does not match, an impossible record.
func Decode(b []byte) (State, error) {
	var s State
	if len(b) > MaxLen {
		return s, fmt.Errorf("%d bytes: more than the %d a handover may have", len(b), MaxLen)
	}
	if len(b) < fixedLen+sumLen {
		return s, fmt.Errorf("%d bytes: too short for a handover", len(b))
	}
	if string(b[:8]) != magic {
		return s, errors.New("not a handover (wrong magic)")
	}
	version := binary.BigEndian.Uint16(b[8:])
	if version < 1 || version > Version {
		return s, fmt.Errorf("handover version %d; this lbd reads versions 1 to %d", version, Version)
	}
	body, sum := b[:len(b)-sumLen], b[len(b)-sumLen:]
	if want := sha256.Sum256(body); string(want[:]) != string(sum) {
		return s, errors.New("checksum mismatch: the handover is torn or corrupt")
	}
	switch binary.BigEndian.Uint16(b[10:]) {
	case 0:
	case flagBackup:
		s.HA = "backup"
	case flagMaster:
		s.HA = "master"
	default:
		return s, errors.New("unknown flags")
	}
	s.Written = time.Unix(0, int64(binary.BigEndian.Uint64(b[12:])))
	s.PID = int(binary.BigEndian.Uint32(b[20:]))
	pathLen := int(binary.BigEndian.Uint16(b[24:]))
	p := body[26:]
	if len(p) < pathLen+1 {
		return s, errors.New("truncated header")
	}
	s.ConfigPath, p = string(p[:pathLen]), p[pathLen:]
	nd := int(p[0])
	p = p[1:]
	if nd > 2 {
		return s, fmt.Errorf("%d sync daemons: at most a master and a backup run", nd)
	}
	for range nd {
		if len(p) < 3 || len(p) < 3+int(p[2]) {
			return s, errors.New("truncated header")
		}
		d := SyncDaemon{Mode: "master", SyncID: p[1], Interface: string(p[3 : 3+int(p[2])])}
		switch p[0] {
		case 1:
		case 2:
			d.Mode = "backup"
		default:
			return s, fmt.Errorf("sync daemon mode %d", p[0])
		}
		s.SyncDaemons = append(s.SyncDaemons, d)
		p = p[3+int(p[2]):]
	}
	// records, extended records, counters, neighbours; from version 3
	// IPv6 records, counters and neighbours; from version 4 FTP records;
	// from version 5 the services; from 6 the peers; from 7 FNAT66 records (8: the peers' IPv6
	// local addresses)
	var nr, nx, nc, nn, n6, nc6, nn6, nf, ns, np, n66 uint32
	counts := [][]*uint32{1: {&nr, &nc, &nn}, 2: {&nr, &nx, &nc, &nn}, 3: {&nr, &nx, &nc, &nn, &n6, &nc6, &nn6},
		4: {&nr, &nx, &nc, &nn, &n6, &nc6, &nn6, &nf}, 5: {&nr, &nx, &nc, &nn, &n6, &nc6, &nn6, &nf, &ns},
		6: {&nr, &nx, &nc, &nn, &n6, &nc6, &nn6, &nf, &ns, &np},
		7: {&nr, &nx, &nc, &nn, &n6, &nc6, &nn6, &nf, &ns, &np, &n66},
		8: {&nr, &nx, &nc, &nn, &n6, &nc6, &nn6, &nf, &ns, &np, &n66}}[version]
	if version >= 2 {
		if len(p) < keyLen {
			return s, errors.New("truncated header")
		}
		if key := p[:keyLen]; string(key) != string(make([]byte, keyLen)) {
			s.SteeringKey = append([]byte(nil), key...)
		}
		p = p[keyLen:]
	}
	if len(p) < 4*len(counts) {
		return s, errors.New("truncated header")
	}
	for i, n := range counts {
		*n = binary.BigEndian.Uint32(p[4*i:])
	}
	p = p[4*len(counts):]
	if want := uint64(nr)*RecordLen + uint64(nx)*ExtRecordLen + uint64(nc)*CountersLen + uint64(nn)*NeighbourLen +
		uint64(n6)*Record6Len + uint64(nc6)*Counters6Len + uint64(nn6)*Neighbour6Len + uint64(nf)*FTPRecordLen + uint64(ns) + uint64(np) +
		uint64(n66)*FullNAT6RecordLen; want != uint64(len(p)) {
		return s, fmt.Errorf("%d records, %d extended records, %d counters, %d neighbours, %d IPv6 records, %d IPv6 counters, "+
			"%d IPv6 neighbours, %d FTP records, %d bytes of services, %d of peers and %d FNAT66 records need %d bytes, the handover has %d",
			nr, nx, nc, nn, n6, nc6, nn6, nf, ns, np, n66, want, len(p))
	}
	s.Records = make([]lcore.SyncConn, 0, uint64(nr)+uint64(nx)+uint64(n6)+uint64(nf)+uint64(n66))
	var err error
	if p, err = s.decodeRecords(p, nr, RecordLen, connsync.DecodeRecord); err != nil {
		return State{}, err
	}
	if p, err = s.decodeRecords(p, nx, ExtRecordLen, connsync.DecodeExtRecord); err != nil {
		return State{}, err
	}
	s.Counters = make([]DestCounters, nc, nc+nc6)
	for i := range s.Counters {
		c := &s.Counters[i]
		c.Proto, c.VPort = p[0], binary.BigEndian.Uint16(p[2:])
		c.VIP, c.RIP, c.RPort = binary.BigEndian.Uint32(p[4:]), binary.BigEndian.Uint32(p[8:]), binary.BigEndian.Uint16(p[12:])
		decodeCounters(c, p[16:])
		p = p[CountersLen:]
	}
	s.Neighbours = make([]Neighbour, nn)
	for i := range s.Neighbours {
		n := &s.Neighbours[i]
		n.IP = binary.BigEndian.Uint32(p)
		copy(n.MAC[:], p[4:10])
		n.Port = binary.BigEndian.Uint16(p[10:])
		p = p[NeighbourLen:]
	}
	if p, err = s.decodeRecords(p, n6, Record6Len, connsync.DecodeRecord6); err != nil {
		return State{}, err
	}
	for range nc6 {
		c := DestCounters{Proto: p[0], VPort: binary.BigEndian.Uint16(p[2:])}
		copy(c.VIP6[:], p[4:20])
		copy(c.RIP6[:], p[20:36])
		c.RIP, c.RPort = binary.BigEndian.Uint32(p[36:]), binary.BigEndian.Uint16(p[40:])
		if !c.isIPv6() {
			return State{}, errors.New("IPv6 counters without an IPv6 VIP")
		}
		decodeCounters(&c, p[44:])
		s.Counters = append(s.Counters, c)
		p = p[Counters6Len:]
	}
	if nn6 > 0 {
		s.Neighbours6 = make([]Neighbour6, nn6)
	}
	for i := range s.Neighbours6 {
		n := &s.Neighbours6[i]
		copy(n.IP[:], p[0:16])
		copy(n.MAC[:], p[16:22])
		n.Port = binary.BigEndian.Uint16(p[22:])
		p = p[Neighbour6Len:]
	}
	if p, err = s.decodeRecords(p, nf, FTPRecordLen, connsync.DecodeFTPRecord); err != nil {
		return State{}, err
	}
	if ns > 0 {
		s.Services = append([]byte(nil), p[:ns]...)
	}
	p = p[ns:]
	if s.Peers, err = decodePeers(p[:np], s.Written, version); err != nil {
		return State{}, err
	}
	if _, err = s.decodeRecords(p[np:], n66, FullNAT6RecordLen, connsync.DecodeFullNAT6Record); err != nil {
		return State{}, err
	}
	return s, nil
}

// appendPeers appends the peers' hellos, each with its age at written.
func appendPeers(b []byte, peers []connsync.PeerHello, written time.Time) []byte {
	for _, h := range peers {
		a := h.Peer.As16()
		b = append(b, a[:]...)
		b = binary.BigEndian.AppendUint64(b, h.Boot)
		age := min(max(written.Sub(h.At).Milliseconds(), 0), maxHelloAgeMsec)
		b = binary.BigEndian.AppendUint32(b, uint32(age))
		var flags byte
		if h.Leaving {
			flags |= peerLeaving
		}
		if h.TakesOver {
			flags |= peerTakesOver
		}
		var lips, lips6 []netip.Addr
		for _, l := range h.LIPs {
			if l.Is4() && len(lips) < maxPeerLIPs {
				lips = append(lips, l)
			} else if l.Is6() && len(lips6) < maxPeerLIPs {
				lips6 = append(lips6, l)
			}
		}
		b = append(b, flags, byte(len(lips)))
		for _, l := range lips {
			b = append(b, l.AsSlice()...)
		}
		b = append(b, byte(len(lips6)))
		for _, l := range lips6 {
			b = append(b, l.AsSlice()...)
		}
	}
	return b
}

// decodePeers reads appendPeers' encoding of version, all of p.
func decodePeers(p []byte, written time.Time, version uint16) ([]connsync.PeerHello, error) {
	var out []connsync.PeerHello
	for len(p) > 0 {
		if len(p) < peerFixedLen || len(p) < peerFixedLen+4*int(p[peerFixedLen-1]) {
			return nil, fmt.Errorf("peer %d: truncated", len(out))
		}
		h := connsync.PeerHello{Peer: netip.AddrFrom16([16]byte(p[:16])).Unmap()}
		h.Boot = binary.BigEndian.Uint64(p[16:])
		h.At = written.Add(-time.Duration(binary.BigEndian.Uint32(p[24:])) * time.Millisecond)
		flags, n := p[28], int(p[29])
		if flags&^(peerLeaving|peerTakesOver) != 0 || !h.Peer.IsValid() || h.Peer.IsUnspecified() {
			return nil, fmt.Errorf("peer %d: not a possible peer", len(out))
		}
		h.Leaving, h.TakesOver = flags&peerLeaving != 0, flags&peerTakesOver != 0
		for i := range n {
			h.LIPs = append(h.LIPs, netip.AddrFrom4([4]byte(p[peerFixedLen+4*i:])))
		}
		p = p[peerFixedLen+4*n:]
		if version >= 8 {
			if len(p) < 1 || len(p) < 1+16*int(p[0]) {
				return nil, fmt.Errorf("peer %d: truncated", len(out))
			}
			for i := range int(p[0]) {
				h.LIPs = append(h.LIPs, netip.AddrFrom16([16]byte(p[1+16*i:])))
			}
			p = p[1+16*int(p[0]):]
		}
		out = append(out, h)
	}
	return out, nil
}

// decodeRecords appends n records of length rlen, read by decode, from p
// and returns the rest of p.
func (s *State) decodeRecords(p []byte, n uint32, rlen int, decode func([]byte) (lcore.SyncConn, bool)) ([]byte, error) {
	for range n {
		r, ok := decode(p)
		if !ok {
			return nil, fmt.Errorf("record %d: not a possible connection or template", len(s.Records))
		}
		s.Records = append(s.Records, r)
		p = p[rlen:]
	}
	return p, nil
}

// recordKind is the section a record is written in: 0 plain, 1
// extended, 2 IPv6, 3 FTP.
func recordKind(r *lcore.SyncConn) int {
	switch {
	case r.IPv6 && !r.Six.LIP.IsUnspecified():
		return 4
	case r.IPv6:
		return 2
	case r.FTP || r.FTPData:
		return 3
	case r.HasExt:
		return 1
	}
	return 0
}

func (c *DestCounters) isIPv6() bool { return !c.VIP6.IsUnspecified() }

func appendCounters(b []byte, c DestCounters) []byte {
	for _, v := range c.Counters {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	for _, v := range c.Base {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	return b
}

func decodeCounters(c *DestCounters, p []byte) {
	for j := range c.Counters {
		c.Counters[j] = binary.BigEndian.Uint64(p[8*j:])
		c.Base[j] = binary.BigEndian.Uint64(p[40+8*j:])
	}
}

// Check refuses a handover that is not for this lbd now: written for
// another configuration file, longer than maxAge ago, or in the future
// (beyond a second of clock slack).
func (s *State) Check(configPath string, now time.Time, maxAge time.Duration) error {
	if s.ConfigPath != configPath {
		return fmt.Errorf("written by an lbd running %q, this one runs %q", s.ConfigPath, configPath)
	}
	age := now.Sub(s.Written)
	if age > maxAge {
		return fmt.Errorf("written %v ago, more than restart.max_age (%v): its connections may have moved on", age.Round(time.Millisecond), maxAge)
	}
	if age < -time.Second {
		return fmt.Errorf("written %v in the future", (-age).Round(time.Millisecond))
	}
	return nil
}

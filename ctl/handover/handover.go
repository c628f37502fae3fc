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
//	| SHA-256 of all the above (32)
//
// Flags: bit 0, the writer was one of an HA pair's backup (else master);
// bit 1, it was the master. Neither: not said.
//
// A build writes version 2 and reads 1 and 2 (an upgrade from a build
// that wrote version 1 keeps its connections; a downgrade to one that
// reads only version 1 starts with an empty table).
package handover

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/dplb/dplb/ctl/connsync"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/hdr"
)

const (
	magic = "DPLBHAND"
	// Version is the encoding's version written; a build reads it and
	// version 1 and refuses any other.
	Version = 2

	RecordLen    = connsync.RecordLen
	ExtRecordLen = connsync.ExtRecordLen
	keyLen       = lcore.SteeringKeyLen
	CountersLen  = 96
	NeighbourLen = 12

	fixedLen = 8 + 2 + 2 + 8 + 4 + 2 + 4 + 4 + 4
	sumLen   = sha256.Size
	// MaxLen bounds what Decode accepts (and what lbd reads): 16 million
	// records and then some.
	MaxLen = 512 << 20

	flagBackup = 1
	flagMaster = 2
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
	// written as extended records.
	Records []lcore.SyncConn
	// SteeringKey is the writer's steering key (nil from a version 1
	// writer): a FullNAT connection's local port was chosen for its owner
	// under it, so the next lbd keeps it unless its configuration sets one.
	SteeringKey []byte
	Counters    []DestCounters
	Neighbours  []Neighbour
}

// DestCounters are one (service, real server) pair's counters as the
// writer's listing had them: the dataplane's, and the baseline the
// listing subtracts (lbctl -Z).
type DestCounters struct {
	Proto uint8
	VIP   uint32
	VPort uint16
	RIP   uint32
	RPort uint16
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
	ext := 0
	for i := range s.Records {
		if s.Records[i].HasExt {
			ext++
		}
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.Records)-ext))
	b = binary.BigEndian.AppendUint32(b, uint32(ext))
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.Counters)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.Neighbours)))
	for _, r := range s.Records {
		if !r.HasExt {
			b = connsync.AppendRecord(b, r)
		}
	}
	for _, r := range s.Records {
		if r.HasExt {
			b = connsync.AppendExtRecord(b, r)
		}
	}
	for _, c := range s.Counters {
		b = append(b, c.Proto, 0)
		b = binary.BigEndian.AppendUint16(b, c.VPort)
		b = binary.BigEndian.AppendUint32(b, c.VIP)
		b = binary.BigEndian.AppendUint32(b, c.RIP)
		b = binary.BigEndian.AppendUint16(b, c.RPort)
		b = binary.BigEndian.AppendUint16(b, 0)
		for _, v := range c.Counters {
			b = binary.BigEndian.AppendUint64(b, v)
		}
		for _, v := range c.Base {
			b = binary.BigEndian.AppendUint64(b, v)
		}
	}
	for _, n := range s.Neighbours {
		b = binary.BigEndian.AppendUint32(b, n.IP)
		b = append(b, n.MAC[:]...)
		b = binary.BigEndian.AppendUint16(b, n.Port)
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
	if version != 1 && version != Version {
		return s, fmt.Errorf("handover version %d; this lbd reads versions 1 and %d", version, Version)
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
	var nr, nx, nc, nn uint32 // records, extended records, counters, neighbours
	if version >= 2 {
		if len(p) < keyLen+16 {
			return s, errors.New("truncated header")
		}
		if key := p[:keyLen]; string(key) != string(make([]byte, keyLen)) {
			s.SteeringKey = append([]byte(nil), key...)
		}
		p = p[keyLen:]
		nr, nx, nc, nn = binary.BigEndian.Uint32(p), binary.BigEndian.Uint32(p[4:]), binary.BigEndian.Uint32(p[8:]), binary.BigEndian.Uint32(p[12:])
		p = p[16:]
	} else {
		if len(p) < 12 {
			return s, errors.New("truncated header")
		}
		nr, nc, nn = binary.BigEndian.Uint32(p), binary.BigEndian.Uint32(p[4:]), binary.BigEndian.Uint32(p[8:])
		p = p[12:]
	}
	if want := uint64(nr)*RecordLen + uint64(nx)*ExtRecordLen + uint64(nc)*CountersLen + uint64(nn)*NeighbourLen; want != uint64(len(p)) {
		return s, fmt.Errorf("%d records, %d extended records, %d counters and %d neighbours need %d bytes, the handover has %d",
			nr, nx, nc, nn, want, len(p))
	}
	s.Records = make([]lcore.SyncConn, nr+nx)
	for i := range s.Records {
		var r lcore.SyncConn
		var ok bool
		if i < int(nr) {
			r, ok = connsync.DecodeRecord(p)
			p = p[RecordLen:]
		} else {
			r, ok = connsync.DecodeExtRecord(p)
			p = p[ExtRecordLen:]
		}
		if !ok {
			return State{}, fmt.Errorf("record %d: not a possible connection or template", i)
		}
		s.Records[i] = r
	}
	s.Counters = make([]DestCounters, nc)
	for i := range s.Counters {
		c := &s.Counters[i]
		c.Proto, c.VPort = p[0], binary.BigEndian.Uint16(p[2:])
		c.VIP, c.RIP, c.RPort = binary.BigEndian.Uint32(p[4:]), binary.BigEndian.Uint32(p[8:]), binary.BigEndian.Uint16(p[12:])
		for j := range c.Counters {
			c.Counters[j] = binary.BigEndian.Uint64(p[16+8*j:])
			c.Base[j] = binary.BigEndian.Uint64(p[56+8*j:])
		}
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
	return s, nil
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

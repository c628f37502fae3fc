// Package bfd runs single-hop BFD sessions (RFC 5880, in the asynchronous
// mode, over UDP as RFC 5881 says) from the host's own stack to real
// servers, for lbd's health checks of type bfd (keepalived's BFD_CHECK):
// a server is up while its session is.
//
// lbd is always the active side: it sends a Down packet once a second
// until the server answers, and the three-way handshake brings the
// session up. Once up, lbd asks for the check's interval both ways (a
// Poll Sequence confirms it) and declares the session down when the
// server sends nothing for its detect multiplier times the interval
// agreed, or says it is down. Authentication is optional (auth.go): a
// simple password, or keyed (meticulous) MD5 or SHA1. No demand mode and
// no echo function: a real server's BFD daemon (bird, FRR, keepalived)
// answers without them by default.
package bfd

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// State is a session's state (RFC 5880 4.1).
type State uint8

// States.
const (
	AdminDown State = 0
	Down      State = 1
	Init      State = 2
	Up        State = 3
)

func (s State) String() string {
	switch s {
	case AdminDown:
		return "AdminDown"
	case Down:
		return "Down"
	case Init:
		return "Init"
	}
	return "Up"
}

// Diag is why a session last left Up (RFC 5880 4.1).
type Diag uint8

// Diagnostics lbd sets or reports.
const (
	DiagNone         Diag = 0
	DiagTimeExpired  Diag = 1
	DiagNeighborDown Diag = 3
	DiagAdminDown    Diag = 7
)

func (d Diag) String() string {
	switch d {
	case DiagNone:
		return "no diagnostic"
	case DiagTimeExpired:
		return "control detection time expired"
	case 2:
		return "echo function failed"
	case DiagNeighborDown:
		return "neighbor signaled session down"
	case 4:
		return "forwarding plane reset"
	case 5:
		return "path down"
	case 6:
		return "concatenated path down"
	case DiagAdminDown:
		return "administratively down"
	case 8:
		return "reverse concatenated path down"
	}
	return fmt.Sprintf("diagnostic %d", uint8(d))
}

// PacketLen is the length of a control packet without authentication
// (auth.go).
const PacketLen = 24

// Port is where BFD control packets go (RFC 5881 4), and the range of
// the ports they come from.
const (
	Port        = 3784
	minSrcPort  = 49152
	maxSrcPort  = 65535
	version     = 1
	requiredTTL = 255 // RFC 5881 5: single hop, sent and checked at 255
)

// Packet is a control packet's mandatory section (RFC 5880 4.1). The
// intervals are in microseconds, as on the wire.
type Packet struct {
	Diag                Diag
	State               State
	Poll, Final         bool
	CPI                 bool // control plane independent
	Auth, Demand, Multi bool
	DetectMult          uint8
	MyDisc, YourDisc    uint32
	DesiredMinTx        uint32
	RequiredMinRx       uint32
	RequiredMinEchoRx   uint32
}

// Append appends p's wire form to b.
func (p Packet) Append(b []byte) []byte {
	flags := byte(p.State) << 6
	for i, f := range [...]bool{p.Poll, p.Final, p.CPI, p.Auth, p.Demand, p.Multi} {
		if f {
			flags |= 0x20 >> i
		}
	}
	b = append(b, version<<5|byte(p.Diag)&0x1f, flags, p.DetectMult, PacketLen)
	b = binary.BigEndian.AppendUint32(b, p.MyDisc)
	b = binary.BigEndian.AppendUint32(b, p.YourDisc)
	b = binary.BigEndian.AppendUint32(b, p.DesiredMinTx)
	b = binary.BigEndian.AppendUint32(b, p.RequiredMinRx)
	return binary.BigEndian.AppendUint32(b, p.RequiredMinEchoRx)
}

// Errors of Parse: the reception checks of RFC 5880 6.8.6 that need no
// session.
var (
	ErrShort      = errors.New("bfd: shorter than a control packet")
	ErrVersion    = errors.New("bfd: not version 1")
	ErrLength     = errors.New("bfd: length field out of range")
	ErrDetectMult = errors.New("bfd: detect multiplier 0")
	ErrMultipoint = errors.New("bfd: multipoint bit set")
	ErrMyDisc     = errors.New("bfd: my discriminator 0")
	ErrYourDisc   = errors.New("bfd: your discriminator 0 in a packet neither Down nor AdminDown")
)

// Parse reads a control packet and checks what RFC 5880 6.8.6 checks
// before looking for its session.
func Parse(b []byte) (Packet, error) {
	if len(b) < PacketLen {
		return Packet{}, ErrShort
	}
	if b[0]>>5 != version {
		return Packet{}, ErrVersion
	}
	if n := int(b[3]); n < PacketLen || n > len(b) {
		return Packet{}, ErrLength
	}
	p := Packet{
		Diag:              Diag(b[0] & 0x1f),
		State:             State(b[1] >> 6),
		Poll:              b[1]&0x20 != 0,
		Final:             b[1]&0x10 != 0,
		CPI:               b[1]&0x08 != 0,
		Auth:              b[1]&0x04 != 0,
		Demand:            b[1]&0x02 != 0,
		Multi:             b[1]&0x01 != 0,
		DetectMult:        b[2],
		MyDisc:            binary.BigEndian.Uint32(b[4:]),
		YourDisc:          binary.BigEndian.Uint32(b[8:]),
		DesiredMinTx:      binary.BigEndian.Uint32(b[12:]),
		RequiredMinRx:     binary.BigEndian.Uint32(b[16:]),
		RequiredMinEchoRx: binary.BigEndian.Uint32(b[20:]),
	}
	switch {
	case p.DetectMult == 0:
		return Packet{}, ErrDetectMult
	case p.Multi:
		return Packet{}, ErrMultipoint
	case p.MyDisc == 0:
		return Packet{}, ErrMyDisc
	case p.YourDisc == 0 && p.State != Down && p.State != AdminDown:
		return Packet{}, ErrYourDisc
	case p.Auth && int(b[3]) < PacketLen+2:
		return Packet{}, ErrLength // no room for the authentication section's type and length
	}
	return p, nil
}

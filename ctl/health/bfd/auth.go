package bfd

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/binary"
	"fmt"
	"hash"
	"time"
)

// Authentication (RFC 5880 4.2-4.4, 6.7). A session with an AuthType
// other than AuthNone sends every packet with the A bit and an
// authentication section, and takes only packets whose section proves
// the shared key; a session without takes only packets without. The
// keyed types sign the packet with MD5 or SHA1 over it with the key in
// the digest's place and carry a sequence number, which lbd increments
// with every packet it sends (what the meticulous types require and the
// others allow). A received sequence number must lie within 3 x the
// sender's detect multiplier of the last one accepted (above it, for the
// meticulous types), once one was: a replayed packet is refused.

// AuthType is a session's authentication type (RFC 5880 4.1).
type AuthType uint8

// Authentication types.
const (
	AuthNone               AuthType = 0
	AuthSimple             AuthType = 1
	AuthKeyedMD5           AuthType = 2
	AuthMeticulousKeyedMD5 AuthType = 3
	AuthKeyedSHA1          AuthType = 4
	AuthMeticulousSHA1     AuthType = 5
)

// AuthTypes are the configuration's names of the types (conf's
// BFDAuthTypes, which ctl/health's tests keep alike).
var AuthTypes = map[string]AuthType{
	"":                      AuthNone,
	"none":                  AuthNone,
	"simple":                AuthSimple,
	"keyed-md5":             AuthKeyedMD5,
	"meticulous-keyed-md5":  AuthMeticulousKeyedMD5,
	"keyed-sha1":            AuthKeyedSHA1,
	"meticulous-keyed-sha1": AuthMeticulousSHA1,
}

func (a AuthType) String() string {
	for name, t := range AuthTypes {
		if t == a && name != "" {
			return name
		}
	}
	return fmt.Sprintf("type %d", uint8(a))
}

// Auth is a session's authentication: its type, the key ID its packets
// carry and expect, and the key (1..16 bytes, 20 for SHA1: RFC 5880
// 4.2-4.4, which the configuration checks).
type Auth struct {
	Type  AuthType
	KeyID uint8
	Key   string
}

// sectionLen is the authentication section's length for a.
func (a Auth) sectionLen() int {
	switch a.Type {
	case AuthNone:
		return 0
	case AuthSimple:
		return 3 + len(a.Key)
	}
	return 8 + a.digestLen()
}

func (a Auth) meticulous() bool {
	return a.Type == AuthMeticulousKeyedMD5 || a.Type == AuthMeticulousSHA1
}

func (a Auth) digestLen() int {
	if a.Type == AuthKeyedSHA1 || a.Type == AuthMeticulousSHA1 {
		return sha1.Size
	}
	return md5.Size
}

func (a Auth) newHash() hash.Hash {
	if a.Type == AuthKeyedSHA1 || a.Type == AuthMeticulousSHA1 {
		return sha1.New()
	}
	return md5.New()
}

// sign appends the authentication section for packet b (its mandatory
// section, the A bit set and the length counting the section) with
// sequence number seq, and returns the whole packet.
func (a Auth) sign(b []byte, seq uint32) []byte {
	b = append(b, byte(a.Type), byte(a.sectionLen()), a.KeyID)
	if a.Type == AuthSimple {
		return append(b, a.Key...)
	}
	b = append(b, 0)
	b = binary.BigEndian.AppendUint32(b, seq)
	keyAt := len(b)
	b = append(b, make([]byte, a.digestLen())...)
	copy(b[keyAt:], a.Key)
	h := a.newHash()
	h.Write(b)
	h.Sum(b[:keyAt])
	return b
}

// rcvAuth is a session's receiving side of authentication: RFC 5880's
// bfd.RcvAuthSeq and bfd.AuthSeqKnown.
type rcvAuth struct {
	seq    uint32
	known  bool
	lastOK time.Time
}

// verify checks the authentication of packet b (its header parsed as p)
// for a session authenticated by a (AuthNone: none expected), and
// returns why it fails, "" when it passes. forget is how long without an
// accepted packet makes the last sequence number unknown again (twice
// the detection time, RFC 5880 6.8.1).
func (r *rcvAuth) verify(a Auth, p Packet, b []byte, now time.Time, forget time.Duration) string {
	switch {
	case a.Type == AuthNone && p.Auth:
		return "the server's packets are authenticated and the check's bfd_auth is none"
	case a.Type == AuthNone:
		return ""
	case !p.Auth:
		return "the server's packets carry no authentication (bfd_auth " + a.Type.String() + ")"
	}
	n := int(b[3])
	sec := b[PacketLen:n] // Parse: at least 2 bytes
	if AuthType(sec[0]) != a.Type {
		return "the server's packets are authenticated by " + AuthType(sec[0]).String() + ", not bfd_auth " + a.Type.String()
	}
	switch {
	case int(sec[1]) != len(sec), a.Type == AuthSimple && (len(sec) < 4 || len(sec) > 19), a.Type != AuthSimple && len(sec) != a.sectionLen():
		return "the server's authentication section has a bad length"
	}
	if sec[2] != a.KeyID {
		return fmt.Sprintf("the server's packets carry key ID %d, not bfd_key_id %d", sec[2], a.KeyID)
	}
	if a.Type == AuthSimple {
		if subtle.ConstantTimeCompare(sec[3:], []byte(a.Key)) != 1 {
			return "the server's password is not bfd_password"
		}
		return ""
	}
	seq := binary.BigEndian.Uint32(sec[4:])
	if r.known && now.Sub(r.lastOK) >= forget {
		r.known = false
	}
	if d := seq - r.seq; r.known && (d > 3*uint32(p.DetectMult) || d == 0 && a.meticulous()) {
		return "the server's sequence number is out of its window (a replayed or stale packet)"
	}
	got := append([]byte(nil), sec[8:]...)
	buf := append([]byte(nil), b[:n]...)
	key := buf[PacketLen+8 : n]
	clear(key)
	copy(key, a.Key)
	h := a.newHash()
	h.Write(buf)
	if subtle.ConstantTimeCompare(h.Sum(nil), got) != 1 {
		return "the server's digest does not match bfd_password"
	}
	r.seq, r.known, r.lastOK = seq, true, now
	return ""
}

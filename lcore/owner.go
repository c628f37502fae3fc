package lcore

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"

	"github.com/dplb/dplb/lcore/hdr"
)

// Ownership. The worker that owns a connection is a function of its
// packets and of a secret key drawn at boot, nothing else: the Toeplitz
// hash (the one NICs compute for RSS) of the client's endpoint, address
// and port, the one endpoint VS/NAT never rewrites, so that the client's
// packets and the real server's replies agree; reduced to a worker as a
// NIC's default redirection table does (hash modulo the queue count). No
// snapshot changes it: persistence, methods and RSS modes do not enter.
//
// Ports whose NIC can hash the source fields alone (client side) or the
// destination fields alone (server side) are configured with the same key
// (RSSKey), so the NIC already delivers nearly every packet to its owner;
// a worker still checks each packet and hands the others (ICMP errors
// hashed on a router's address, a NIC that spreads differently) to their
// owner, so a wrong guess about the NIC costs handoffs, never a
// connection.

// SteeringKeyLen is the Toeplitz key length of most NICs (40 bytes);
// longer keys (52 bytes) repeat it.
const SteeringKeyLen = 40

// steerKey is the secret, drawn at boot unless configured
// (SetSteeringKey): without it a sender cannot choose source ports that
// pile its flows on one worker.
var steerKey = func() [SteeringKeyLen]byte {
	var k [SteeringKeyLen]byte
	if _, err := rand.Read(k[:]); err != nil {
		panic("lcore: no randomness for the steering key: " + err.Error())
	}
	return k
}()

// toeplitz holds, for each of the 6 input bytes (address, port) and each
// byte value, the hash bits that byte contributes: the hash of an
// endpoint is 6 lookups and 5 XORs.
var toeplitz = toeplitzTable(steerKey[:])

// toeplitzTable precomputes the Toeplitz hash of 6-byte inputs under key
// (at least 10 bytes).
func toeplitzTable(key []byte) (t [6][256]uint32) {
	word := func(bit int) uint32 { // the 32 key bits from bit on
		var w uint32
		for i := 0; i < 32; i++ {
			b := bit + i
			if key[b/8]>>(7-b%8)&1 != 0 {
				w |= 1 << (31 - i)
			}
		}
		return w
	}
	for i := range t {
		for v := 0; v < 256; v++ {
			var h uint32
			for j := 0; j < 8; j++ {
				if v>>(7-j)&1 != 0 {
					h ^= word(8*i + j)
				}
			}
			t[i][v] = h
		}
	}
	return t
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// SetSteeringKey replaces the boot key by a configured one. Call it once,
// before any worker or port starts: ownership must never change while
// connections exist.
func SetSteeringKey(key []byte) error {
	if len(key) != SteeringKeyLen || allZero(key) {
		return fmt.Errorf("steering key of %d bytes: want %d, not all zero", len(key), SteeringKeyLen)
	}
	copy(steerKey[:], key)
	toeplitz = toeplitzTable(steerKey[:])
	toeplitz6 = toeplitzTable6(steerKey[:])
	return nil
}

// CurrentSteeringKey returns a copy of the steering key in use (control
// work: a restart hands it to the next lbd).
func CurrentSteeringKey() []byte { return append([]byte(nil), steerKey[:]...) }

// Steering is Owner under a given key, for a process other than lbd (a
// traffic generator) that must agree with an lbd configured with it.
type Steering struct {
	table  [6][256]uint32
	table6 [18][256]uint32
}

// NewSteering makes the owner function of a steering key.
func NewSteering(key []byte) (*Steering, error) {
	if len(key) != SteeringKeyLen || allZero(key) {
		return nil, fmt.Errorf("steering key of %d bytes: want %d, not all zero", len(key), SteeringKeyLen)
	}
	return &Steering{table: toeplitzTable(key), table6: toeplitzTable6(key)}, nil
}

// Owner is the worker (0..n-1) that owns a client endpoint's connections
// under the key, as lcore.Owner in an lbd that uses it.
func (s *Steering) Owner(clientIP uint32, clientPort uint16, n int) int {
	if n <= 1 {
		return 0
	}
	return int(hashWith(&s.table, clientIP, clientPort) % uint32(n))
}

// Owner6 is Owner for an IPv6 client endpoint, as lcore.Owner6 in an
// lbd that uses the key.
func (s *Steering) Owner6(client *hdr.Addr6, clientPort uint16, n int) int {
	if n <= 1 {
		return 0
	}
	return int(hash6With(&s.table6, client, clientPort) % uint32(n))
}

// RSSKey is the steering key as a NIC's RSS key of n bytes: ports
// configured with it hash a client's endpoint as Owner does.
func RSSKey(n int) []byte {
	k := make([]byte, n)
	for i := range k {
		k[i] = steerKey[i%SteeringKeyLen]
	}
	return k
}

// endpointHash is the Toeplitz hash of an IPv4 address and port, the
// input a NIC hashes with L3_SRC_ONLY|L4_SRC_ONLY (or DST_ONLY).
func endpointHash(ip uint32, port uint16) uint32 { return hashWith(&toeplitz, ip, port) }

func hashWith(t *[6][256]uint32, ip uint32, port uint16) uint32 {
	var b [6]byte
	binary.BigEndian.PutUint32(b[:], ip)
	binary.BigEndian.PutUint16(b[4:], port)
	return t[0][b[0]] ^ t[1][b[1]] ^ t[2][b[2]] ^ t[3][b[3]] ^ t[4][b[4]] ^ t[5][b[5]]
}

// Owner is the worker (0..n-1) that owns a client endpoint's connections.
func Owner(clientIP uint32, clientPort uint16, n int) int {
	if n <= 1 {
		return 0
	}
	return int(endpointHash(clientIP, clientPort) % uint32(n))
}

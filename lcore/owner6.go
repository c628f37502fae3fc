package lcore

import "github.com/dplb/dplb/lcore/hdr"

// Ownership of IPv6 connections: the same rule as IPv4's (owner.go), the
// Toeplitz hash of the client's endpoint under the steering key, over its
// 16-byte address and port (the input a NIC hashes for IPv6 with
// L3_SRC_ONLY|L4_SRC_ONLY), modulo the number of workers.

// toeplitz6 is toeplitz for the 18 bytes of an IPv6 endpoint.
var toeplitz6 = toeplitzTable6(steerKey[:])

func toeplitzTable6(key []byte) (t [18][256]uint32) {
	for i := range t {
		// Row i is row 0 of the table of the key shifted by i bytes.
		row := toeplitzTable(key[i:])
		t[i] = row[0]
	}
	return t
}

// Owner6 is Owner for an IPv6 client endpoint.
func Owner6(client *hdr.Addr6, port uint16, n int) int {
	if n <= 1 {
		return 0
	}
	return int(SteeringHash6(client, port) % uint32(n))
}

// owner6 is ownerOf for an IPv6 flow: a packet to a VIP comes from the
// client, any other goes to it.
func (w *Worker) owner6(d *desc) int {
	ip := d.ip6()
	if dst := ip.Dst(); w.vips6 != nil {
		if _, toVIP := w.vips6[dst]; toVIP {
			src := ip.Src()
			return Owner6(&src, d.flow.sport, w.nworkers)
		}
		return Owner6(&dst, d.flow.dport, w.nworkers)
	}
	return -1
}

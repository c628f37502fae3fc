package lcore

import "github.com/dplb/dplb/lcore/hdr"

// Local ports a worker hands out: the unprivileged range.
const (
	lportMin = 1024
	lportMax = 65535
)

// lportPool is one worker's free local ports of one LIP, a FIFO ring so a
// port freed is reused as late as possible (the server may still hold the
// old connection in TIME_WAIT). used marks the ports a connection holds,
// queued the ports in the ring: a port a synced connection reserves
// (reserve) may still sit in the ring, and get skips it there.
type lportPool struct {
	lip        uint32
	lip6       *hdr.Addr6 // an IPv6 local address's pool (FNAT66): lip is 0
	worker, n  int
	ports      []uint16
	head, free int
	used       [1 << 16 / 64]uint64
	queued     [1 << 16 / 64]uint64
}

// newLportPool makes the pool of the ports of lip that worker owns among
// n workers (control work: about 64k hashes).
func newLportPool(lip uint32, worker, n int) *lportPool {
	return fillLportPool(&lportPool{lip: lip, worker: worker, n: n})
}

// newLportPool6 is newLportPool for an IPv6 local address.
func newLportPool6(lip hdr.Addr6, worker, n int) *lportPool {
	return fillLportPool(&lportPool{lip6: &lip, worker: worker, n: n})
}

// owns reports whether the pool's worker owns port: the replies to the
// local address and port steer to it (owner.go, owner6.go).
func (p *lportPool) owns(port uint16) bool {
	if p.lip6 != nil {
		return Owner6(p.lip6, port, p.n) == p.worker
	}
	return Owner(p.lip, port, p.n) == p.worker
}

// fillLportPool queues the ports p's worker owns.
func fillLportPool(p *lportPool) *lportPool {
	for port := lportMin; port <= lportMax; port++ {
		if p.owns(uint16(port)) {
			p.ports = append(p.ports, uint16(port))
			setBit(&p.queued, uint16(port), true)
		}
	}
	p.free = len(p.ports)
	return p
}

func bit(s *[1 << 16 / 64]uint64, port uint16) bool { return s[port>>6]&(1<<(port&63)) != 0 }

func setBit(s *[1 << 16 / 64]uint64, port uint16, on bool) {
	if on {
		s[port>>6] |= 1 << (port & 63)
	} else {
		s[port>>6] &^= 1 << (port & 63)
	}
}

// get takes the next free port, skipping the ring's ports that a synced
// connection reserved meanwhile.
func (p *lportPool) get() (uint16, bool) {
	for p.free > 0 {
		port := p.ports[p.head]
		p.head++
		if p.head == len(p.ports) {
			p.head = 0
		}
		p.free--
		setBit(&p.queued, port, false)
		if bit(&p.used, port) {
			continue
		}
		setBit(&p.used, port, true)
		return port, true
	}
	return 0, false
}

// put gives a port back; one no connection holds is ignored.
func (p *lportPool) put(port uint16) {
	if !bit(&p.used, port) {
		return
	}
	setBit(&p.used, port, false)
	if bit(&p.queued, port) || p.free == len(p.ports) {
		return // still in the ring from before a reserve
	}
	i := p.head + p.free
	if i >= len(p.ports) {
		i -= len(p.ports)
	}
	p.ports[i] = port
	setBit(&p.queued, port, true)
	p.free++
}

// reserve marks a port held by a connection this worker did not schedule
// (synced from a peer, handed over by a restart), so that get never hands
// it out while the connection lives (the connection's, or its steering
// entry's: steerentry.go). It reports false when the port is not this
// worker's or a connection here holds it already.
func (p *lportPool) reserve(port uint16) bool {
	if port < lportMin || !p.owns(port) || bit(&p.used, port) {
		return false
	}
	setBit(&p.used, port, true)
	return true
}

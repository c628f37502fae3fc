package e2e

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
	"github.com/dplb/dplb/lcore/hdr"
)

// synFlood sends n TCP SYNs to dst:dport from ns through a raw socket,
// each from a random address of spoofed (an IPv4 /16, or an IPv6 prefix
// of /64 or shorter: a random interface identifier) and a random port, at
// most rate a second, and stops early after limit. It returns how many it
// sent.
func synFlood(ns string, spoofed netip.Prefix, dst netip.Addr, dport uint16, n, rate int, limit time.Duration) (int, error) {
	family, ipLen := unix.AF_INET6, hdr.IPv6Len
	var to unix.Sockaddr = &unix.SockaddrInet6{Addr: dst.As16()}
	if dst.Is4() {
		family, ipLen = unix.AF_INET, hdr.IPv4MinLen
		to = &unix.SockaddrInet4{Addr: dst.As4()}
	}
	var fd int
	if err := topo.InNS(ns, func() error {
		var err error
		// IPPROTO_RAW: the packets carry their own IP header.
		fd, err = unix.Socket(family, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
		return err
	}); err != nil {
		return 0, fmt.Errorf("raw socket in %s: %w", ns, err)
	}
	defer unix.Close(fd)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 18))
	pkt := make([]byte, ipLen+20)
	tcp := pkt[ipLen:]
	fill := func() { // the IP header, then the SYN's checksum over it
		clear(tcp)
		binary.BigEndian.PutUint16(tcp[0:], uint16(1024+rng.IntN(64000)))
		binary.BigEndian.PutUint16(tcp[2:], dport)
		binary.BigEndian.PutUint32(tcp[4:], rng.Uint32())
		tcp[12] = 5 << 4
		tcp[13] = hdr.TCPFlagSYN
		binary.BigEndian.PutUint16(tcp[14:], 64240)
		if dst.Is6() {
			src := hdr.Addr6(spoofed.Masked().Addr().As16())
			binary.BigEndian.PutUint64(src[8:], rng.Uint64()|1)
			dst6 := hdr.Addr6(dst.As16())
			hdr.IPv6(pkt).Encode(20, hdr.ProtoTCP, 64, src, dst6)
			binary.BigEndian.PutUint16(tcp[16:], hdr.TransportChecksum6(src, dst6, hdr.ProtoTCP, tcp))
			return
		}
		base := binary.BigEndian.Uint32(spoofed.Masked().Addr().AsSlice())
		src := base | (rng.Uint32() & (uint32(1)<<(32-spoofed.Bits()) - 1))
		if src&0xff == 0 || src&0xff == 0xff {
			src ^= 1
		}
		dstIP := binary.BigEndian.Uint32(dst.AsSlice())
		ip := hdr.IPv4(pkt)
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], 40)
		binary.BigEndian.PutUint16(ip[4:], uint16(rng.Uint32()))
		ip[6], ip[7] = 0x40, 0 // DF
		ip[8] = 64
		ip[9] = hdr.ProtoTCP
		binary.BigEndian.PutUint32(ip[12:], src)
		binary.BigEndian.PutUint32(ip[16:], dstIP)
		// The kernel fills in the IP checksum of a raw IPPROTO_RAW packet.
		binary.BigEndian.PutUint16(tcp[16:], hdr.TransportChecksum(src, dstIP, hdr.ProtoTCP, tcp))
	}
	const batch = 50
	pause := time.Duration(batch) * time.Second / time.Duration(rate)
	start := time.Now()
	sent := 0
	for sent < n && time.Since(start) < limit {
		for range batch {
			fill()
			if err := unix.Sendto(fd, pkt, 0, to); err != nil {
				if err == unix.ENOBUFS || err == unix.EAGAIN {
					continue
				}
				return sent, fmt.Errorf("raw send: %w", err)
			}
			sent++
		}
		time.Sleep(pause)
	}
	return sent, nil
}

// TestSYNFloodFourWorkers: lbd on four workers with a small table (1024
// entries per lcore, 4096 in all) takes a spoofed SYN flood of ten times
// its capacity to the service that carries 100 long-lived connections.
// The table defense (default thresholds) keeps every one of those
// streaming to its last byte, and a real client keeps connecting while
// the flood runs. lbd exits cleanly with no mbuf in use.
func TestSYNFloodFourWorkers(t *testing.T) {
	const perLcore, lcores = 1024, 4
	e := startNATWith(t, natOptions{
		setup: func(t *testing.T, tp *topo.Topo, nat *topo.NAT) {
			startStreamServers(t, 9000, nat.Servers[0].NS, nat.Servers[1].NS)
		},
		configure: func(c *harness.Config) {
			c.Workers = []int{0, 1, 0, 1}
			c.ConnTableSize = perLcore
			c.Ports = []harness.Port{
				harness.AFPacketPort(0, "wan", c.WANIf, c.WANAddr, "", "client"),
				harness.AFPacketPort(1, "lan", c.LANIf, c.LANAddr, "", "server"),
			}
			for i := range c.Ports {
				c.Ports[i].Device += fmt.Sprintf(",qpairs=%d", lcores)
			}
			c.Services = append(c.Services, harness.Service{VIP: c.Services[0].VIP, Port: 9000, Scheduler: "rr",
				Servers: []harness.Server{{Address: c.Services[0].Servers[0].Address, Port: 9000, Weight: 1},
					{Address: c.Services[0].Servers[1].Address, Port: 9000, Weight: 1}}})
		},
	})
	e.warmUp(t)
	addr := net.JoinHostPort(e.nat.VIP.String(), "9000")

	// 100 established connections, streaming slowly through the flood.
	long := streamSpec{total: 200 * 256, chunk: 256, interval: 100 * time.Millisecond, stall: 15 * time.Second}
	var longs tally
	var wg sync.WaitGroup
	for range 100 {
		c, r := dialStream(e.ctx, e.nat.Client.NS, addr, long, 5*time.Second)
		if c == nil {
			t.Fatalf("long-lived connection before the flood: %v", r)
		}
		wg.Go(func() { longs.add(readStream(c, r, long)) })
	}

	// The flood: ten times the table's capacity from spoofed clients.
	capacity := perLcore * lcores
	floodDone := make(chan struct{})
	var sent int
	var floodErr error
	floodStart := time.Now()
	go func() {
		defer close(floodDone)
		sent, floodErr = synFlood(e.nat.Client.NS, netip.MustParsePrefix("10.77.0.0/16"), e.nat.VIP, 9000,
			10*capacity, 5000, 20*time.Second)
	}()

	// A real client connects, again and again, while it lasts.
	short := streamSpec{total: 4096, chunk: 4096, stall: 10 * time.Second}
	var shorts tally
	attempts := 0
	var slowest time.Duration
	for flooding := true; flooding; {
		select {
		case <-floodDone:
			flooding = false
		case <-time.After(250 * time.Millisecond):
			attempts++
			t0 := time.Now()
			c, r := dialStream(e.ctx, e.nat.Client.NS, addr, short, 10*time.Second)
			slowest = max(slowest, time.Since(t0))
			if c == nil {
				shorts.add(r)
				continue
			}
			shorts.add(readStream(c, r, short))
		}
	}
	floodTook := time.Since(floodStart)
	if floodErr != nil {
		t.Fatal(floodErr)
	}
	wg.Wait()
	body := e.scrapeMetrics(t)
	drops := dropsByReason(body)
	newConns, evictions, shortTO := counterSum(body, "new_conns"), counterSum(body, "evictions"), counterSum(body, "short_timeouts")
	t.Logf("flood: %d SYNs sent in %v; lbd: new_conns %.0f evictions %.0f short_timeouts %.0f; drops: %s",
		sent, floodTook.Round(time.Millisecond), newConns, evictions, shortTO, nonZero(drops))
	t.Logf("real clients during the flood: %d attempts, %s; slowest connect+transfer %v", attempts, shorts.summary(), slowest.Round(time.Millisecond))
	t.Logf("established connections: %s", longs.summary())

	if n := longs.broken(); n != 0 {
		t.Errorf("%d of 100 established connections broke under the flood: %s", n, longs.summary())
	}
	if attempts < 4 || shorts.broken() != 0 {
		t.Errorf("a real client during the flood: %d attempts, %s", attempts, shorts.summary())
	}
	if sent < 10*capacity {
		t.Errorf("only %d of %d SYNs were sent", sent, 10*capacity)
	}
	// The flood must have reached lbd and filled its tables.
	for _, d := range []string{"secure", "drop_entry"} {
		if _, ok := metric(body, "dplb_lcore_table_defense", map[string]string{"lcore": "0", "defense": d}); !ok {
			t.Errorf("/metrics has no dplb_lcore_table_defense{defense=%q}", d)
		}
	}
	if newConns < float64(2*capacity) || evictions == 0 {
		t.Errorf("the flood did not put the table under pressure: %.0f new connections, %.0f evictions", newConns, evictions)
	}
	e.stopLBD(t)
}

package e2e

import (
	"encoding/binary"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dplb/dplb/e2e/topo"
	"github.com/dplb/dplb/lcore/hdr"
)

// lcoreSum adds a per-lcore metric over the lcores (label key=value).
func lcoreSum(body, name, key, value string) float64 {
	var sum float64
	for i := 0; i < 64; i++ {
		if v, ok := metric(body, name, map[string]string{"lcore": strconv.Itoa(i), key: value}); ok {
			sum += v
		}
	}
	return sum
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// TestWireIsNotBelieved, with real Linux hosts around lbd: a SYN that
// reaches lbd with TTL 1 is answered with ICMP time exceeded from lbd's
// client-facing address (traceroute through lbd works), and a gratuitous
// ARP for the VIP from the client's side is not learnt but counted and
// logged, while the service keeps working.
func TestWireIsNotBelieved(t *testing.T) {
	e := startNAT(t)
	e.warmUp(t)
	cli := e.nat.Client
	var icmpFD, rawFD, arpFD, ifindex int
	if err := topo.InNS(cli.NS, func() error {
		var err error
		if icmpFD, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP); err != nil {
			return err
		}
		if rawFD, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW); err != nil {
			return err
		}
		if arpFD, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ARP))); err != nil {
			return err
		}
		ifc, err := net.InterfaceByName(cli.If)
		if err == nil {
			ifindex = ifc.Index
		}
		return err
	}); err != nil {
		t.Fatalf("sockets in %s: %v", cli.NS, err)
	}
	defer unix.Close(icmpFD)
	defer unix.Close(rawFD)
	defer unix.Close(arpFD)

	// A SYN to the VIP with TTL 1.
	src, vip := binary.BigEndian.Uint32(cli.Addr.Addr().AsSlice()), binary.BigEndian.Uint32(e.nat.VIP.AsSlice())
	const sport = 47123
	pkt := make([]byte, 40)
	ip := hdr.IPv4(pkt)
	ip.Encode(&hdr.IPv4Fields{TotalLength: 40, TTL: 1, Protocol: hdr.ProtoTCP, Src: src, Dst: vip})
	hdr.TCP(pkt[20:]).Encode(&hdr.TCPFields{SrcPort: sport, DstPort: 80, Seq: 1, Flags: hdr.TCPFlagSYN, Window: 1024}, src, vip)
	if err := unix.Sendto(rawFD, pkt, 0, &unix.SockaddrInet4{Addr: e.nat.VIP.As4()}); err != nil {
		t.Fatalf("send the SYN: %v", err)
	}
	tv := unix.NsecToTimeval(int64(200 * time.Millisecond))
	unix.SetsockoptTimeval(icmpFD, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	wan := binary.BigEndian.Uint32(e.nat.WANAddr.Addr().AsSlice())
	buf := make([]byte, 1500)
	got := false
	for deadline := time.Now().Add(5 * time.Second); !got && time.Now().Before(deadline); {
		n, _, err := unix.Recvfrom(icmpFD, buf, 0)
		if err != nil {
			continue
		}
		rip := hdr.IPv4(buf[:n])
		if !rip.IsValid(n) || rip.Protocol() != hdr.ProtoICMP {
			continue
		}
		icmp := hdr.ICMP(rip.Payload())
		if len(icmp) < hdr.ICMPErrorMinLen || icmp.Type() != hdr.ICMPTimeExceeded {
			continue
		}
		q := hdr.IPv4(icmp.Payload())
		qtcp := hdr.TCP(q[q.HeaderLen():])
		if q.Dst() != vip || qtcp.SrcPort() != sport {
			continue
		}
		if rip.Src() != wan {
			t.Fatalf("time exceeded from %x, want lbd's client-facing address %x", rip.Src(), wan)
		}
		got = true
	}
	if !got {
		t.Fatalf("no ICMP time exceeded for a SYN with TTL 1 (lbd log tail: %s)", e.log.String()[max(0, len(e.log.String())-2000):])
	}

	// A gratuitous ARP for the VIP, from a MAC of the client's side.
	frame := make([]byte, 60)
	eth := hdr.Ethernet(frame)
	evil := hdr.MAC{0x02, 0, 0, 0, 0x0d, 0x66}
	eth.SetDst(hdr.BroadcastMAC)
	eth.SetSrc(evil)
	eth.SetEtherType(hdr.EtherTypeARP)
	hdr.ARP(eth.Payload()).SetRequest(evil, vip, vip)
	to := &unix.SockaddrLinklayer{Ifindex: ifindex, Protocol: htons(unix.ETH_P_ARP), Halen: 6}
	copy(to.Addr[:], hdr.BroadcastMAC[:])
	if err := unix.Sendto(arpFD, frame, 0, to); err != nil {
		t.Fatalf("send the gratuitous ARP: %v", err)
	}
	var conflicts, exceeded float64
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		body := e.scrapeMetrics(t)
		conflicts = lcoreSum(body, "dplb_lcore_drops_total", "reason", "arp_conflict")
		exceeded = lcoreSum(body, "dplb_lcore_events_total", "counter", "icmp_time_exceeded")
		if conflicts > 0 && strings.Contains(e.log.String(), "address conflict") {
			break
		}
	}
	if conflicts == 0 || exceeded == 0 {
		t.Fatalf("arp_conflict %v, icmp_time_exceeded %v", conflicts, exceeded)
	}
	if log := e.log.String(); !strings.Contains(log, "address conflict") || strings.Contains(log, `"msg":"neighbour","ip":"`+e.nat.VIP.String()+`"`) {
		t.Fatalf("the conflict was not logged, or the VIP was learnt:\n%s", e.log.String()[max(0, len(e.log.String())-3000):])
	}
	for _, r := range e.get(t, e.url, 10, 5*time.Second) {
		if r.Err != "" {
			t.Fatalf("request %d after the conflict: %s", r.I, r.Err)
		}
	}
	e.stopLBD(t)
}

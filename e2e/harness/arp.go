package harness

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dplb/dplb/e2e/topo"
)

const ethPARP = 0x0806

// ProbeMAC is the made-up (locally administered) sender of ARPAnswers'
// requests: the answers go to it, so the kernel of the namespace that
// asks ignores them (they are not for its MAC) and its ARP cache stays
// what the hosts announced.
var ProbeMAC = net.HardwareAddr{0x02, 0xd9, 0x1b, 0x00, 0x00, 0x01}

// ARPAnswers broadcasts one ARP request "who has target, tell src" from
// ProbeMAC out of ifc in the namespace ns and returns the MAC address of
// every host that answered within wait, in the order heard. src should be
// an address nobody uses: whoever answers may learn it at ProbeMAC.
func ARPAnswers(ns, ifc string, src, target netip.Addr, wait time.Duration) ([]net.HardwareAddr, error) {
	var macs []net.HardwareAddr
	err := topo.InNS(ns, func() error {
		link, err := net.InterfaceByName(ifc)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(ethPARP)))
		if err != nil {
			return fmt.Errorf("arp socket: %w", err)
		}
		defer unix.Close(fd)
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(ethPARP), Ifindex: link.Index}); err != nil {
			return fmt.Errorf("arp bind %s: %w", ifc, err)
		}
		bcast := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
		frame := make([]byte, 60)
		copy(frame[0:6], bcast)
		copy(frame[6:12], ProbeMAC)
		binary.BigEndian.PutUint16(frame[12:], ethPARP)
		a := frame[14:]
		binary.BigEndian.PutUint16(a[0:], 1)      // Ethernet
		binary.BigEndian.PutUint16(a[2:], 0x0800) // IPv4
		a[4], a[5] = 6, 4
		binary.BigEndian.PutUint16(a[6:], 1) // request
		copy(a[8:14], ProbeMAC)
		s4, t4 := src.As4(), target.As4()
		copy(a[14:18], s4[:])
		copy(a[24:28], t4[:])
		to := &unix.SockaddrLinklayer{Protocol: htons(ethPARP), Ifindex: link.Index, Halen: 6}
		copy(to.Addr[:], bcast)
		if err := unix.Sendto(fd, frame, 0, to); err != nil {
			return fmt.Errorf("arp send on %s: %w", ifc, err)
		}
		deadline := time.Now().Add(wait)
		buf := make([]byte, 1600)
		for {
			left := time.Until(deadline)
			if left <= 0 {
				return nil
			}
			tv := unix.NsecToTimeval(left.Nanoseconds())
			if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
				return err
			}
			n, _, err := unix.Recvfrom(fd, buf, 0)
			if err == unix.EAGAIN || err == unix.EINTR {
				continue
			}
			if err != nil {
				return fmt.Errorf("arp receive on %s: %w", ifc, err)
			}
			if n < 42 || binary.BigEndian.Uint16(buf[12:]) != ethPARP {
				continue
			}
			r := buf[14:n]
			// A reply about target, to us.
			if binary.BigEndian.Uint16(r[6:]) != 2 || [4]byte(r[14:18]) != t4 || [4]byte(r[24:28]) != s4 {
				continue
			}
			mac := net.HardwareAddr(slices.Clone(r[8:14]))
			if !slices.ContainsFunc(macs, func(m net.HardwareAddr) bool { return m.String() == mac.String() }) {
				macs = append(macs, mac)
			}
		}
	})
	return macs, err
}

// htons converts a 16-bit value to network byte order, as AF_PACKET wants
// its protocol numbers.
func htons(v uint16) uint16 { return v<<8 | v>>8 }

// LinkMAC returns the MAC address of ifc in the namespace ns.
func LinkMAC(ns, ifc string) (net.HardwareAddr, error) {
	var mac net.HardwareAddr
	err := topo.InNS(ns, func() error {
		link, err := net.InterfaceByName(ifc)
		if err == nil {
			mac = link.HardwareAddr
		}
		return err
	})
	return mac, err
}

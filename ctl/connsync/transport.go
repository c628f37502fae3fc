package connsync

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// DefaultPort is IPVS's sync port.
const DefaultPort = 8848

// DefaultGroup is IPVS's sync multicast group.
var DefaultGroup = netip.AddrFrom4([4]byte{224, 0, 0, 81})

// socketBuffer is the kernel buffer asked for each way: a bulk dump of a
// large table arrives faster than it is installed.
const socketBuffer = 4 << 20

// Transport says where sync messages go and come from: a multicast group
// joined on a host interface (IPVS's way), or a list of unicast peers.
type Transport struct {
	// Interface is the host interface (not a dataplane port) that carries
	// sync; required for multicast, optional with Peers (then only its MTU
	// is used, and the socket is bound to it).
	Interface string
	// Group is the multicast group (default 224.0.0.81), unused with Peers.
	Group netip.Addr
	// Peers, when set, are sent each message by unicast instead of a group.
	Peers []netip.Addr
	// Port is the UDP port, the same on every director (default 8848).
	Port uint16
	// Listen is the local address to bind with Peers (default: any).
	Listen netip.Addr
}

func (t Transport) withDefaults() Transport {
	if !t.Group.IsValid() {
		t.Group = DefaultGroup
	}
	if t.Port == 0 {
		t.Port = DefaultPort
	}
	if !t.Listen.IsValid() {
		t.Listen = netip.IPv4Unspecified()
	}
	return t
}

// Multicast reports whether messages go to a group.
func (t Transport) Multicast() bool { return len(t.Peers) == 0 }

// destinations are the addresses each message is sent to.
func (t Transport) destinations() []netip.AddrPort {
	if t.Multicast() {
		return []netip.AddrPort{netip.AddrPortFrom(t.Group, t.Port)}
	}
	out := make([]netip.AddrPort, len(t.Peers))
	for i, p := range t.Peers {
		out[i] = netip.AddrPortFrom(p, t.Port)
	}
	return out
}

// open makes the socket: for multicast bound to group:port, joined on the
// interface, sending out of it with TTL 1 (sync never leaves the link)
// and without looping our own messages back. It returns the socket and
// the UDP payload a datagram may carry on the interface's MTU.
func (t Transport) open() (*net.UDPConn, int, error) {
	mtu, ifindex := 1500, 0
	if t.Interface != "" {
		ifi, err := net.InterfaceByName(t.Interface)
		if err != nil {
			return nil, 0, fmt.Errorf("mcast interface %s (sync.mcast_interface or --mcast-interface): %w", t.Interface, err)
		}
		mtu, ifindex = ifi.MTU, ifi.Index
	} else if t.Multicast() {
		return nil, 0, errors.New("sync.mcast_interface: multicast sync needs the host interface to join the group on (set it, give --mcast-interface, or list sync.peers for unicast)")
	}
	bind := netip.AddrPortFrom(t.Listen, t.Port)
	if t.Multicast() {
		if !t.Group.Is4() || !t.Group.IsMulticast() {
			return nil, 0, fmt.Errorf("sync.mcast_group %s: not an IPv4 multicast address", t.Group)
		}
		bind = netip.AddrPortFrom(t.Group, t.Port)
	}
	var serr error
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		err := c.Control(func(fd uintptr) {
			s := int(fd)
			serr = errors.Join(
				unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1),
				unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RCVBUF, socketBuffer),
				unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_SNDBUF, socketBuffer))
			if serr != nil || ifindex == 0 {
				return
			}
			if t.Multicast() {
				mreq := &unix.IPMreqn{Multiaddr: t.Group.As4(), Ifindex: int32(ifindex)}
				serr = errors.Join(
					unix.SetsockoptIPMreqn(s, unix.IPPROTO_IP, unix.IP_ADD_MEMBERSHIP, mreq),
					unix.SetsockoptIPMreqn(s, unix.IPPROTO_IP, unix.IP_MULTICAST_IF, &unix.IPMreqn{Ifindex: int32(ifindex)}),
					unix.SetsockoptInt(s, unix.IPPROTO_IP, unix.IP_MULTICAST_TTL, 1),
					unix.SetsockoptInt(s, unix.IPPROTO_IP, unix.IP_MULTICAST_LOOP, 0),
					// Only the group's traffic on this interface, not
					// every group any socket on the host joined.
					unix.SetsockoptInt(s, unix.IPPROTO_IP, unix.IP_MULTICAST_ALL, 0))
				return
			}
			serr = unix.BindToDevice(s, t.Interface)
		})
		return errors.Join(err, serr)
	}}
	pc, err := lc.ListenPacket(context.Background(), "udp4", bind.String())
	if err != nil {
		return nil, 0, fmt.Errorf("sync socket %s: %w", bind, err)
	}
	payload := mtu - 20 - 8 // IPv4 and UDP headers
	return pc.(*net.UDPConn), payload, nil
}

package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// decapStats are the decapsulator's counters, printed as one line
// "stats frames=N decap=N bad=N errors=N" on SIGUSR1 and at exit.
type decapStats struct {
	frames uint64 // IPIP packets addressed to this host seen on the interface
	decap  uint64 // inner packets written to the TUN device
	bad    uint64 // malformed or fragmented outer packets, bad inner packets
	errs   uint64 // writes to the TUN device that failed
}

func (s decapStats) String() string {
	return fmt.Sprintf("stats frames=%d decap=%d bad=%d errors=%d", s.frames, s.decap, s.bad, s.errs)
}

// decap is a user-space IPIP decapsulator for VS/TUN real servers on a
// kernel without the ipip module: it reads IPIP packets (IP protocol 4)
// from an AF_PACKET socket on -dev, strips the outer header and writes the
// inner IPv4 packet into the TUN device -tun, which it creates with the
// address -vip/32. It runs until SIGTERM or SIGINT.
func decap(args []string) error {
	fs := flag.NewFlagSet("decap", flag.ContinueOnError)
	dev := fs.String("dev", "", "interface the IPIP packets arrive on")
	tun := fs.String("tun", "dplbtun0", "name of the TUN device to create")
	vipFlag := fs.String("vip", "", "virtual IP to put on the TUN device (/32)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	vip, err := netip.ParseAddr(*vipFlag)
	if err != nil || !vip.Is4() && !vip.Is6() {
		return fmt.Errorf("decap: -vip %q is not an IPv4 or IPv6 address", *vipFlag)
	}
	ifi, err := net.InterfaceByName(*dev)
	if err != nil {
		return fmt.Errorf("decap: -dev: %w", err)
	}
	fam := ipip4
	if vip.Is6() {
		fam = ipip6
	}
	return fam.run(ifi, *dev, *tun, vip)
}

// tunnel is what decap needs to know of one outer family: IPv4 in IPv4
// (protocol 4) or IPv6 in IPv6 (next header 41).
type tunnel struct {
	name      string                                // for messages
	family    int                                   // of the raw socket that keeps the kernel quiet
	proto     uint8                                 // the outer header's protocol / next header
	protoAt   uint32                                // its offset in the outer header
	etherType uint16                                // of the outer packets
	bits      int                                   // prefix length of the VIP on the TUN device
	strip     func([]byte) ([]byte, bool)           // the inner packet, if well formed
	openTUN   func(string, netip.Addr) (int, error) // the TUN device holding the VIP
}

var (
	ipip4 = tunnel{"IPIP", unix.AF_INET, unix.IPPROTO_IPIP, 9, unix.ETH_P_IP, 32, stripIPIP, openTUN}
	ipip6 = tunnel{"IPv6-in-IPv6", unix.AF_INET6, unix.IPPROTO_IPV6, 6, unix.ETH_P_IPV6, 128, strip6in6, openTUN6}
)

// run decapsulates until SIGTERM or SIGINT, printing its counters on
// SIGUSR1 and at exit.
func (t tunnel) run(ifi *net.Interface, dev, tun string, vip netip.Addr) error {
	tunFD, err := t.openTUN(tun, vip)
	if err != nil {
		return err
	}
	defer unix.Close(tunFD)
	// Without a handler for the tunnel protocol the kernel answers every
	// packet with an ICMP error, unless a raw socket of that protocol
	// exists: hold one that accepts nothing.
	rawFD, err := unix.Socket(t.family, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(t.proto))
	if err != nil {
		return fmt.Errorf("decap: raw %s socket: %w", t.name, err)
	}
	defer unix.Close(rawFD)
	if err := attachFilter(rawFD, []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: 0}}); err != nil {
		return fmt.Errorf("decap: raw %s socket filter: %w", t.name, err)
	}
	pktFD, err := t.openPacket(ifi.Index)
	if err != nil {
		return err
	}
	defer unix.Close(pktFD)

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1)
	fmt.Printf("ready %s %s %s/%d\n", dev, tun, vip, t.bits)
	var st decapStats
	buf := make([]byte, 65536)
	for {
		select {
		case sig := <-sigs:
			fmt.Println(st)
			if sig != syscall.SIGUSR1 {
				return nil
			}
			continue
		default:
		}
		n, err := recvHost(pktFD, buf)
		switch {
		case err != nil:
			fmt.Println(st)
			return fmt.Errorf("decap: read %s: %w", dev, err)
		case n == 0:
			continue
		}
		st.frames++ // the socket's filter passes only the tunnel protocol
		inner, ok := t.strip(buf[:n])
		if !ok {
			st.bad++
			continue
		}
		if _, err := unix.Write(tunFD, inner); err != nil {
			st.errs++
			continue
		}
		st.decap++
	}
}

// stripIPIP returns the inner IPv4 packet of an unfragmented IPIP packet.
func stripIPIP(p []byte) ([]byte, bool) {
	if len(p) < 20 || p[0]>>4 != 4 || p[9] != unix.IPPROTO_IPIP {
		return nil, false
	}
	ihl := int(p[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(p[2:4]))
	if ihl < 20 || total < ihl || total > len(p) {
		return nil, false
	}
	if binary.BigEndian.Uint16(p[6:8])&0x3fff != 0 { // MF or an offset
		return nil, false
	}
	inner := p[ihl:total]
	if len(inner) < 20 || inner[0]>>4 != 4 || int(binary.BigEndian.Uint16(inner[2:4])) > len(inner) {
		return nil, false
	}
	return inner, true
}

// openTUN creates the TUN device name (no packet information header),
// gives it addr/32, sets rp_filter=0 on it and brings it up.
func openTUN(name string, addr netip.Addr) (int, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("decap: open /dev/net/tun: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			unix.Close(fd)
		}
	}()
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return -1, fmt.Errorf("decap: -tun %q: %w", name, err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		return -1, fmt.Errorf("decap: TUNSETIFF %s: %w", name, err)
	}
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(s)
	a4 := addr.As4()
	for _, step := range []struct {
		what string
		req  uint
		set  func(*unix.Ifreq) error
	}{
		{"address", unix.SIOCSIFADDR, func(r *unix.Ifreq) error { return r.SetInet4Addr(a4[:]) }},
		{"netmask", unix.SIOCSIFNETMASK, func(r *unix.Ifreq) error { return r.SetInet4Addr([]byte{255, 255, 255, 255}) }},
	} {
		r, _ := unix.NewIfreq(name)
		if err := step.set(r); err != nil {
			return -1, err
		}
		if err := unix.IoctlIfreq(s, step.req, r); err != nil {
			return -1, fmt.Errorf("decap: set %s of %s: %w", step.what, name, err)
		}
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+name+"/rp_filter", []byte("0\n"), 0o644); err != nil {
		return -1, fmt.Errorf("decap: %w", err)
	}
	r, _ := unix.NewIfreq(name)
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, r); err != nil {
		return -1, fmt.Errorf("decap: flags of %s: %w", name, err)
	}
	r.SetUint16(r.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, r); err != nil {
		return -1, fmt.Errorf("decap: bring %s up: %w", name, err)
	}
	ok = true
	return fd, nil
}

// openPacket opens an AF_PACKET datagram socket (network header first) on
// ifindex that receives only the tunnel's outer packets, and times out its
// reads every 200ms so that signals are seen.
func (t tunnel) openPacket(ifindex int) (int, error) {
	return openPacket("decap", ifindex, t.etherType, t.protoAt, t.proto)
}

// openPacket opens an AF_PACKET socket on interface ifindex that takes
// the frames of etherType whose byte at protoAt (of the network header)
// is proto, and times out reads after 200 ms (for signals to be seen);
// what names the caller in errors.
func openPacket(what string, ifindex int, etherType uint16, protoAt uint32, proto uint8) (int, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("%s: AF_PACKET socket: %w", what, err)
	}
	// ldb [protoAt]; jeq #proto, accept, drop
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, K: protoAt},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: uint32(proto)},
		{Code: unix.BPF_RET | unix.BPF_K, K: 0xffff},
		{Code: unix.BPF_RET | unix.BPF_K, K: 0},
	}
	if err := attachFilter(fd, prog); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("%s: AF_PACKET filter: %w", what, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(etherType), Ifindex: ifindex}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("%s: bind AF_PACKET: %w", what, err)
	}
	tv := unix.NsecToTimeval(200e6)
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// recvHost reads a frame addressed to this host from AF_PACKET socket
// fd into buf; 0 for none (a read timed out or was interrupted, or the
// frame was our own outgoing one, a broadcast, another host's).
func recvHost(fd int, buf []byte) (int, error) {
	n, from, err := unix.Recvfrom(fd, buf, 0)
	switch {
	case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
		return 0, nil
	case err != nil:
		return 0, err
	}
	if ll, ok := from.(*unix.SockaddrLinklayer); !ok || ll.Pkttype != unix.PACKET_HOST {
		return 0, nil
	}
	return n, nil
}

func attachFilter(fd int, prog []unix.SockFilter) error {
	fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	return unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fp)
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// decap6 is decap for IPv6 in IPv6 (next header 41, VS/TUN of an IPv6
// service): the inner IPv6 packet of each one addressed to this host goes
// into the TUN device tun, which holds vip/128.
func decap6(ifi *net.Interface, dev, tun string, vip netip.Addr) error {
	tunFD, err := openTUN6(tun, vip)
	if err != nil {
		return err
	}
	defer unix.Close(tunFD)
	// Without a handler for next header 41 the kernel answers each packet
	// with an ICMPv6 parameter problem, unless a raw socket of that
	// protocol exists: hold one that accepts nothing.
	rawFD, err := unix.Socket(unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_IPV6)
	if err != nil {
		return fmt.Errorf("decap: raw IPv6-in-IPv6 socket: %w", err)
	}
	defer unix.Close(rawFD)
	if err := attachFilter(rawFD, []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: 0}}); err != nil {
		return fmt.Errorf("decap: raw socket filter: %w", err)
	}
	pktFD, err := openPacket6(ifi.Index)
	if err != nil {
		return err
	}
	defer unix.Close(pktFD)

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1)
	fmt.Printf("ready %s %s %s/128\n", dev, tun, vip)
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
		n, from, err := unix.Recvfrom(pktFD, buf, 0)
		switch {
		case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			fmt.Println(st)
			return fmt.Errorf("decap: read %s: %w", dev, err)
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); !ok || ll.Pkttype != unix.PACKET_HOST {
			continue
		}
		st.frames++
		inner, ok := strip6in6(buf[:n])
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

// strip6in6 returns the inner IPv6 packet of an IPv6 packet whose next
// header is 41 (no extension headers: lbd sends none).
func strip6in6(p []byte) ([]byte, bool) {
	if len(p) < 40 || p[0]>>4 != 6 || p[6] != unix.IPPROTO_IPV6 {
		return nil, false
	}
	end := 40 + int(binary.BigEndian.Uint16(p[4:6]))
	if end > len(p) {
		return nil, false
	}
	inner := p[40:end]
	if len(inner) < 40 || inner[0]>>4 != 6 || 40+int(binary.BigEndian.Uint16(inner[4:6])) > len(inner) {
		return nil, false
	}
	return inner, true
}

// openTUN6 creates the TUN device name and gives it addr/128 (by ip(8),
// without duplicate address detection), up.
func openTUN6(name string, addr netip.Addr) (int, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("decap: open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("decap: -tun %q: %w", name, err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("decap: TUNSETIFF %s: %w", name, err)
	}
	for _, args := range [][]string{
		{"sysctl", "-q", "-w", "net.ipv6.conf." + name + ".disable_ipv6=0"},
		{"ip", "-6", "addr", "add", addr.String() + "/128", "dev", name, "nodad"},
		{"ip", "link", "set", name, "up"},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("decap: %v: %w: %s", args, err, out)
		}
	}
	return fd, nil
}

// openPacket6 is openPacket for IPv6 packets whose next header is 41.
func openPacket6(ifindex int) (int, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("decap: AF_PACKET socket: %w", err)
	}
	// ldb [6]; jeq #41, accept, drop
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, K: 6},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: unix.IPPROTO_IPV6},
		{Code: unix.BPF_RET | unix.BPF_K, K: 0xffff},
		{Code: unix.BPF_RET | unix.BPF_K, K: 0},
	}
	if err := attachFilter(fd, prog); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("decap: AF_PACKET filter: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IPV6), Ifindex: ifindex}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("decap: bind AF_PACKET: %w", err)
	}
	tv := unix.NsecToTimeval(200e6)
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

package main

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os/exec"

	"golang.org/x/sys/unix"
)

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

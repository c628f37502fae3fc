package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// toaWatch prints the TCP option address (DPVS's TOA: kind 254, length 8,
// the client's port and IPv4 address, or 20 and an IPv6 one) of every
// TCP segment, over IPv4 or IPv6, to -port that
// arrives on -dev, as the toa kernel module on a real server would read
// it: "toa CLIENT:PORT from SRC:SPORT flags F" per segment carrying one,
// after "ready". It only watches (a copy of each frame, from an AF_PACKET
// socket): the kernel's TCP takes the segments as usual.
func toaWatch(args []string) error {
	return watchOptions("toa", "TCP", args, []uint8{unix.IPPROTO_TCP}, toaLine)
}

// watchOptions is toa's and uoa's watcher: it reads copies of the IPv4
// and IPv6 frames of the given protocols arriving on -dev (AF_PACKET
// sockets, one a protocol and family; IPv6's without extension headers)
// and prints what line makes of each one to -port, after
// "ready DEV PORT", until SIGTERM or SIGINT. transport names the port's
// protocol in the flag's help.
func watchOptions(name, transport string, args []string, protos []uint8, line func(p []byte, port uint16) (string, bool)) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	dev := fs.String("dev", "", "interface the packets arrive on")
	port := fs.Int("port", 0, transport+" destination port to watch")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ifi, err := net.InterfaceByName(*dev)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	lines := make(chan string)
	errs := make(chan error, 2*len(protos))
	type family struct {
		etherType uint16
		protoAt   uint32 // IPv4's protocol byte, IPv6's next header
	}
	for _, proto := range protos {
		for _, f := range []family{{unix.ETH_P_IP, 9}, {unix.ETH_P_IPV6, 6}} {
			fd, err := openPacket(name, ifi.Index, f.etherType, f.protoAt, proto)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			go watchSocket(fd, name, *dev, uint16(*port), line, lines, errs)
		}
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	fmt.Printf("ready %s %d\n", *dev, *port)
	for {
		select {
		case <-sigs:
			return nil
		case err := <-errs:
			return err
		case l := <-lines:
			fmt.Println(l)
		}
	}
}

// watchSocket sends what line makes of each frame read from AF_PACKET
// socket fd to lines, until a read fails (to errs).
func watchSocket(fd int, name, dev string, port uint16, line func(p []byte, port uint16) (string, bool), lines chan<- string, errs chan<- error) {
	buf := make([]byte, 65536)
	for {
		n, err := recvHost(fd, buf)
		if err != nil {
			errs <- fmt.Errorf("%s: read %s: %w", name, dev, err)
			return
		}
		if l, ok := line(buf[:n], port); ok {
			lines <- l
		}
	}
}

// toaLine describes the option address of IP packet p (IPv4, or IPv6
// without extension headers), a TCP segment to port; false when p is not
// one or carries no option address.
func toaLine(p []byte, port uint16) (string, bool) {
	var tcp []byte
	var src netip.Addr
	switch {
	case len(p) >= 20 && p[0]>>4 == 4:
		ihl := int(p[0]&0x0f) * 4
		if len(p) < ihl+20 {
			return "", false
		}
		tcp, src = p[ihl:], netip.AddrFrom4([4]byte(p[12:16]))
	case len(p) >= 60 && p[0]>>4 == 6:
		tcp, src = p[40:], netip.AddrFrom16([16]byte(p[8:24]))
	default:
		return "", false
	}
	off := int(tcp[12]>>4) * 4
	if binary.BigEndian.Uint16(tcp[2:]) != port || off < 20 || len(tcp) < off {
		return "", false
	}
	srcPort := netip.AddrPortFrom(src, binary.BigEndian.Uint16(tcp[0:]))
	client, ok := clientOption(tcp[20:off], 254)
	if !ok {
		return "", false
	}
	return fmt.Sprintf("toa %s from %s flags %#02x", client, srcPort, tcp[13]), true
}

// clientOption finds option kind in opts (TCP's and IPv4's share their
// layout: 0 ends the list, 1 pads, others have a length) in DPVS's form:
// length 8 with a port and an IPv4 address, or 20 with an IPv6 one.
func clientOption(opts []byte, kind byte) (netip.AddrPort, bool) {
	for len(opts) > 0 {
		switch opts[0] {
		case 0: // end of options
			return netip.AddrPort{}, false
		case 1: // no-operation
			opts = opts[1:]
			continue
		}
		if len(opts) < 2 || opts[1] < 2 || int(opts[1]) > len(opts) {
			return netip.AddrPort{}, false
		}
		if opts[0] == kind && (opts[1] == 8 || opts[1] == 20) {
			var addr netip.Addr
			if opts[1] == 8 {
				addr = netip.AddrFrom4([4]byte(opts[4:8]))
			} else { // an IPv6 client's (NAT64, FNAT66)
				addr = netip.AddrFrom16([16]byte(opts[4:20]))
			}
			return netip.AddrPortFrom(addr, binary.BigEndian.Uint16(opts[2:])), true
		}
		opts = opts[opts[1]:]
	}
	return netip.AddrPort{}, false
}

// Package hdr provides typed views over packet bytes for the per-packet path:
// Ethernet, ARP, IPv4, IPv6 (with its extension-header walk), TCP, UDP,
// ICMPv4, ICMPv6 and neighbour discovery, plus ones'-complement checksum
// helpers with RFC 1624 incremental updates for NAT rewrites.
//
// Each header type is a []byte aliasing the packet buffer, so reading or
// writing a field touches the packet in place and never allocates. The
// contract follows gVisor's pkg/tcpip/header: call the type's IsValid gate
// once, then use the accessors freely. Accessors assume the gate passed; on a
// view that did not pass it they may panic with an index out of range. Gates
// themselves never panic, whatever the bytes or length fields say.
//
// Addresses are uint32 holding the big-endian value of the four address
// bytes, so 192.0.2.1 is 0xC0000201; this keeps addresses comparable and
// hashable without allocation; IPv6 addresses are Addr6, their 16 bytes.
package hdr

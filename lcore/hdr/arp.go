package hdr

import "encoding/binary"

// ARP packet for Ethernet/IPv4 (RFC 826):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|      Hardware Type (1)        |     Protocol Type (0x0800)    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  HW Len (6)   | Proto Len (4) |           Operation           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                   Sender MAC (6 bytes)                        |
//	+                               +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                               |   Sender IP (4 bytes) ...     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|    ... Sender IP              |   Target MAC (6 bytes) ...    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+                               +
//	|                     ... Target MAC                            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                     Target IP (4 bytes)                       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
const (
	arpHType     = 0
	arpPType     = 2
	arpHLen      = 4
	arpPLen      = 5
	arpOp        = 6
	arpSenderMAC = 8
	arpSenderIP  = 14
	arpTargetMAC = 18
	arpTargetIP  = 24

	arpHTypeEthernet = 1
)

// ARP operations and the Ethernet/IPv4 packet length.
const (
	ARPRequest = 1
	ARPReply   = 2
	ARPLen     = 28
)

// ARP is a view over an Ethernet/IPv4 ARP packet. Accessors assume IsValid.
type ARP []byte

// IsValid reports whether a is an Ethernet/IPv4 ARP packet of full length.
// Other hardware or protocol types are not ours to answer.
func (a ARP) IsValid() bool {
	return len(a) >= ARPLen &&
		binary.BigEndian.Uint16(a[arpHType:]) == arpHTypeEthernet &&
		binary.BigEndian.Uint16(a[arpPType:]) == EtherTypeIPv4 &&
		a[arpHLen] == 6 && a[arpPLen] == 4
}

// Op returns the operation, ARPRequest or ARPReply.
func (a ARP) Op() uint16 { return binary.BigEndian.Uint16(a[arpOp:]) }

// SenderMAC returns the sender hardware address.
func (a ARP) SenderMAC() MAC { return MAC(a[arpSenderMAC : arpSenderMAC+6]) }

// SenderIP returns the sender protocol address.
func (a ARP) SenderIP() uint32 { return binary.BigEndian.Uint32(a[arpSenderIP:]) }

// TargetMAC returns the target hardware address (zero in a request).
func (a ARP) TargetMAC() MAC { return MAC(a[arpTargetMAC : arpTargetMAC+6]) }

// TargetIP returns the target protocol address.
func (a ARP) TargetIP() uint32 { return binary.BigEndian.Uint32(a[arpTargetIP:]) }

// SetOp writes the operation.
func (a ARP) SetOp(op uint16) { binary.BigEndian.PutUint16(a[arpOp:], op) }

// SetSenderMAC writes the sender hardware address.
func (a ARP) SetSenderMAC(m MAC) { copy(a[arpSenderMAC:arpSenderMAC+6], m[:]) }

// SetSenderIP writes the sender protocol address.
func (a ARP) SetSenderIP(ip uint32) { binary.BigEndian.PutUint32(a[arpSenderIP:], ip) }

// SetTargetMAC writes the target hardware address.
func (a ARP) SetTargetMAC(m MAC) { copy(a[arpTargetMAC:arpTargetMAC+6], m[:]) }

// SetTargetIP writes the target protocol address.
func (a ARP) SetTargetIP(ip uint32) { binary.BigEndian.PutUint32(a[arpTargetIP:], ip) }

// setEthernetIPv4 writes the fixed fields so a freshly built packet passes IsValid.
func (a ARP) setEthernetIPv4() {
	binary.BigEndian.PutUint16(a[arpHType:], arpHTypeEthernet)
	binary.BigEndian.PutUint16(a[arpPType:], EtherTypeIPv4)
	a[arpHLen] = 6
	a[arpPLen] = 4
}

// SetRequest fills every field of a "who has targetIP, tell srcIP" request.
// a must hold at least ARPLen bytes.
func (a ARP) SetRequest(srcMAC MAC, srcIP, targetIP uint32) {
	a.setEthernetIPv4()
	a.SetOp(ARPRequest)
	a.SetSenderMAC(srcMAC)
	a.SetSenderIP(srcIP)
	a.SetTargetMAC(MAC{})
	a.SetTargetIP(targetIP)
}

// SetReply fills every field of a "srcIP is at srcMAC" reply sent to dstMAC/dstIP.
// a must hold at least ARPLen bytes; it may be the request being answered.
func (a ARP) SetReply(srcMAC MAC, srcIP uint32, dstMAC MAC, dstIP uint32) {
	a.setEthernetIPv4()
	a.SetOp(ARPReply)
	a.SetSenderMAC(srcMAC)
	a.SetSenderIP(srcIP)
	a.SetTargetMAC(dstMAC)
	a.SetTargetIP(dstIP)
}

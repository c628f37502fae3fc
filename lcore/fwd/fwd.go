// Package fwd names the LVS forwarding methods, the one word a real server,
// a scheduler's Dest and a connection entry carry about how packets reach
// the server.
package fwd

// Method is how packets of a connection reach its real server.
type Method uint8

const (
	NAT Method = iota // VS/NAT: rewrite addresses and ports both ways
	DR                // VS/DR: rewrite the MAC only, replies bypass the balancer
	TUN               // VS/TUN: IPIP to the real server, replies bypass the balancer
	// FullNAT: client -> VIP becomes LIP:lport -> RIP:rport (a local
	// address of the director), so replies come back through it without
	// the server routing through it.
	FullNAT
)

// String is the method's name in the configuration (forward: nat|dr|tun).
func (m Method) String() string {
	switch m {
	case NAT:
		return "nat"
	case DR:
		return "dr"
	case TUN:
		return "tun"
	case FullNAT:
		return "fullnat"
	}
	return "invalid"
}

// OneWay reports whether replies bypass the balancer (DR, TUN).
func (m Method) OneWay() bool { return m == DR || m == TUN }

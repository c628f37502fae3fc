package harness

import (
	"fmt"
	"time"

	"github.com/dplb/dplb/e2e/topo"
)

// TapPort is a Port on DPDK's TAP device number i: lbd makes the tap
// interface tap in its own namespace, and BridgeTap joins it to the
// topology. Tests about IP fragments use it instead of af_packet, whose
// sockets (DPDK joins them to a PACKET_FANOUT group with
// PACKET_FANOUT_FLAG_DEFRAG) hand lbd datagrams the kernel reassembled.
func TapPort(i int, name, tap, addr, gateway, role string) Port {
	return Port{Name: name, Device: fmt.Sprintf("net_tap%d,iface=%s", i, tap), Address: addr, Gateway: gateway, Role: role}
}

// BridgeTap joins lbd's tap interface (made when lbd started) to iface in
// ns through a new bridge br, so that frames pass between the topology and
// lbd unchanged. The tap interface first gets a MAC of its own (mac, not
// lbd's port's): a bridge takes frames to its ports' own MACs for itself.
func BridgeTap(t *topo.Topo, ns, br, tap, iface, mac string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		_, err := t.Exec(ns, "ip", "link", "show", tap)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lbd's tap interface %s in %s: %w", tap, ns, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := t.Exec(ns, "ip", "link", "set", tap, "address", mac); err != nil {
		return err
	}
	if err := t.NoIPv6(ns, tap); err != nil {
		return err
	}
	return t.Bridge(ns, br, iface, tap)
}

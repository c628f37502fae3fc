// Package ctl is dplb's control plane: it turns the configuration into
// snapshots for the lcores, owns the neighbour (ARP) table, serves lbctl's
// requests and exports metrics. It never blocks an lcore: everything
// reaches the dataplane as an immutable snapshot through the workers'
// command rings.
package ctl

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// ipv4 is an address as the dataplane holds it: the big-endian value of
// its four bytes.
func ipv4(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

func addrOf(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// Forwarding methods, as conn.Conn.Fwd and sched.Dest.Fwd carry them.
const (
	FwdNAT uint8 = iota
	FwdDR
	FwdTUN
)

// forwardNames are ipvsadm's names of the methods, as -L prints them.
var forwardNames = [...]string{FwdNAT: "Masq", FwdDR: "Route", FwdTUN: "Tunnel"}

// destIDs hands out stable ids to (service, real server) pairs, so that
// counters survive configuration changes.
type destIDs struct {
	ids  map[string]uint32
	next uint32
}

func (d *destIDs) get(svc lcore.ServiceKey, addr uint32, port uint16) (uint32, error) {
	key := fmt.Sprintf("%d/%d:%d/%d:%d", svc.Proto, svc.VIP, svc.Port, addr, port)
	if id, ok := d.ids[key]; ok {
		return id, nil
	}
	if d.next >= lcore.MaxDests {
		return 0, fmt.Errorf("more than %d real servers in all", lcore.MaxDests)
	}
	if d.ids == nil {
		d.ids = map[string]uint32{}
	}
	d.ids[key] = d.next
	d.next++
	return d.ids[key], nil
}

// portInfos describes the ports for the lcores; macs come from the devices.
func portInfos(ports []conf.Port, macs []hdr.MAC) []lcore.PortInfo {
	out := make([]lcore.PortInfo, len(ports))
	for i, p := range ports {
		pfx := p.Prefix()
		mask := ^uint32(0) << (32 - pfx.Bits())
		out[i] = lcore.PortInfo{
			Name: p.Name, MAC: macs[i], Addr: ipv4(pfx.Addr()),
			Net: ipv4(pfx.Masked().Addr()), Mask: mask, FacesClients: p.FacesClients(),
		}
		if gw, ok := p.GatewayAddr(); ok {
			out[i].Gateway = ipv4(gw)
		}
	}
	return out
}

// buildServices turns configured services into the dataplane's, with one
// scheduler instance per worker.
func buildServices(svcs []conf.Service, workers int, ids *destIDs) ([]lcore.Service, error) {
	out := make([]lcore.Service, 0, len(svcs))
	for i, s := range svcs {
		key := lcore.ServiceKey{VIP: ipv4(s.VIPAddr()), Port: uint16(s.Port), Proto: hdr.ProtoTCP}
		ls := lcore.Service{Key: key, Scheduler: s.Scheduler}
		for _, rs := range s.Servers {
			addr := ipv4(rs.Addr())
			id, err := ids.get(key, addr, uint16(rs.Port))
			if err != nil {
				return nil, fmt.Errorf("services[%d]: %w", i, err)
			}
			ls.Dests = append(ls.Dests, sched.Dest{ID: id, Addr: addr, Port: uint16(rs.Port), Weight: int32(rs.Weight), Fwd: FwdNAT})
		}
		for w := 0; w < workers; w++ {
			sc, err := sched.New(s.Scheduler, ls.Dests)
			if err != nil {
				return nil, fmt.Errorf("services[%d].scheduler: %w", i, err)
			}
			ls.Scheds = append(ls.Scheds, sc)
		}
		out = append(out, ls)
	}
	return out, nil
}

// timeouts maps ipvsadm's three settings (and the SYN one) onto the states.
func timeouts(t conf.Timeouts) conn.Timeouts {
	ct := conn.DefaultTimeouts()
	ct.ByState[conn.StateEstablished] = t.TCP
	ct.ByState[conn.StateFinWait] = t.TCPFin
	ct.ByState[conn.StateUDP] = t.UDP
	for _, s := range []conn.State{conn.StateSynSent, conn.StateSynRecv, conn.StateSynAck} {
		ct.ByState[s] = t.SYN
	}
	return ct
}

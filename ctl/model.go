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
	"github.com/dplb/dplb/lcore/fwd"
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

// forwardNames are ipvsadm's names of the methods, as -L prints them.
var forwardNames = [...]string{fwd.NAT: "Masq", fwd.DR: "Route", fwd.TUN: "Tunnel"}

// destIDs hands out stable ids to (service, real server) pairs, so that
// counters survive configuration changes.
type destIDs struct {
	ids  map[string]uint32
	next uint32
}

func (d destIDs) clone() destIDs {
	c := destIDs{ids: make(map[string]uint32, len(d.ids)), next: d.next}
	for k, v := range d.ids {
		c.ids[k] = v
	}
	return c
}

// lookup finds the id of a (service, server) pair without making one.
func (d *destIDs) lookup(svc lcore.ServiceKey, addr uint32, port uint16) (uint32, bool) {
	id, ok := d.ids[fmt.Sprintf("%d/%d:%d/%d:%d", svc.Proto, svc.VIP, svc.Port, addr, port)]
	return id, ok
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

// PortHW is what the started devices tell about a port.
type PortHW struct {
	MAC         hdr.MAC
	MTU         uint16
	CsumOffload bool  // TX IPv4, TCP and UDP checksum offload enabled
	RSS         uint8 // lcore.RSS...: how the NIC spreads packets over the lcores
}

// portInfos describes the ports for the lcores.
func portInfos(ports []conf.Port, hw []PortHW) []lcore.PortInfo {
	out := make([]lcore.PortInfo, len(ports))
	for i, p := range ports {
		pfx := p.Prefix()
		mask := ^uint32(0) << (32 - pfx.Bits())
		out[i] = lcore.PortInfo{
			Name: p.Name, MAC: hw[i].MAC, Addr: ipv4(pfx.Addr()),
			Net: ipv4(pfx.Masked().Addr()), Mask: mask, FacesClients: p.FacesClients(),
			MTU: hw[i].MTU, CsumOffload: hw[i].CsumOffload,
		}
		if gw, ok := p.GatewayAddr(); ok {
			out[i].Gateway = ipv4(gw)
		}
	}
	return out
}

// forwardMethods maps the configuration's forward names.
var forwardMethods = map[string]fwd.Method{"nat": fwd.NAT, "dr": fwd.DR, "tun": fwd.TUN}

// protocols maps the configuration's protocol names.
var protocols = map[string]uint8{"tcp": hdr.ProtoTCP, "udp": hdr.ProtoUDP}

// serverState is what the health checks make of a real server now.
type serverState struct {
	down   bool // failed its check: no new connections
	weight int  // weight to schedule with (slow start ramps it)
	expire bool // down, and its connections are to be ended
}

// configured is the state of a server nobody checks.
func configured(_ conf.Service, r conf.RealServer) serverState {
	return serverState{weight: r.Weight}
}

// built is the dataplane's view of the services.
type built struct {
	services []lcore.Service
	expire   []uint32 // dest ids whose connections are to be ended
}

// buildServices turns configured services into the dataplane's, with one
// scheduler instance per worker. state tells how the health checks see
// each server: a failed one gets weight 0, and when all of a service's
// servers failed its sorry server (if any) takes the new connections.
func buildServices(svcs []conf.Service, workers int, ids *destIDs, state func(conf.Service, conf.RealServer) serverState) (built, error) {
	var out built
	for i, s := range svcs {
		key := lcore.ServiceKey{VIP: ipv4(s.VIPAddr()), Port: uint16(s.Port), Proto: protocols[s.Protocol]}
		ls := lcore.Service{
			Key: key, Scheduler: s.Scheduler, SloppyTCP: s.SloppyTCP,
			// A shift by 32 gives 0 in Go: netmask 0.0.0.0 puts all clients in one network.
			Persistence: int64(s.Persistence), PersistMask: ^uint32(0) << (32 - s.NetmaskBits()),
		}
		down := 0
		for _, rs := range s.Servers {
			addr := ipv4(rs.Addr())
			id, err := ids.get(key, addr, uint16(rs.Port))
			if err != nil {
				return built{}, fmt.Errorf("services[%d]: %w", i, err)
			}
			st := state(s, rs)
			if st.down {
				down++
			}
			if st.expire {
				out.expire = append(out.expire, id)
			}
			ls.Dests = append(ls.Dests, sched.Dest{
				ID: id, Addr: addr, Port: uint16(rs.Port), Weight: int32(st.weight), Fwd: forwardMethods[rs.Forward],
				Upper: uint32(rs.Upper), Lower: uint32(rs.Lower),
			})
		}
		if sorry, ok := s.SorryAddr(); ok && down > 0 && down == len(s.Servers) {
			addr := ipv4(sorry.Addr())
			id, err := ids.get(key, addr, sorry.Port())
			if err != nil {
				return built{}, fmt.Errorf("services[%d].sorry_server: %w", i, err)
			}
			ls.Dests = append(ls.Dests, sched.Dest{ID: id, Addr: addr, Port: sorry.Port(), Weight: 1, Fwd: fwd.NAT})
		}
		for w := 0; w < workers; w++ {
			sc, err := sched.New(s.Scheduler, ls.Dests, schedOptions(s))
			if err != nil {
				return built{}, fmt.Errorf("services[%d].scheduler: %w", i, err)
			}
			ls.Scheds = append(ls.Scheds, sc)
		}
		out.services = append(out.services, ls)
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

// schedOptions maps a service's scheduler settings (ipvsadm -b) onto the
// scheduler's options.
func schedOptions(s conf.Service) sched.Options {
	o := sched.Options{MHTableSize: s.MHTable()}
	if s.HasFlag("sh-fallback") || s.HasFlag("mh-fallback") {
		o.Flags |= sched.FlagFallback
	}
	if s.HasFlag("sh-port") || s.HasFlag("mh-port") {
		o.Flags |= sched.FlagPort
	}
	return o
}

package ctl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/api"
)

// The ipvsadm edit rules (-A -E -D -a -e -d -C --set, DPVS's local
// address and client list verbs, and -R, a file of them): pure functions
// from the configured services and a request to the services that would
// result, refusals naming the command.

// edit applies one table-changing request to svcs and t, which it may
// modify; refusals name the command and its arguments.
func edit(svcs []conf.Service, t *conf.Timeouts, req api.Request) ([]conf.Service, error) {
	return editRule(keptClientLists(svcs), t, req)
}

// editRule is edit on services whose client lists are as lbd keeps them
// (keptClientLists).
func editRule(svcs []conf.Service, t *conf.Timeouts, req api.Request) ([]conf.Service, error) {
	cmd := map[string]string{
		api.OpAddService: "-A", api.OpEditService: "-E", api.OpDeleteService: "-D",
		api.OpAddServer: "-a", api.OpEditServer: "-e", api.OpDeleteServer: "-d",
		api.OpAddLaddr: "--add-laddr", api.OpDelLaddr: "--del-laddr",
		api.OpAddBlklst: "--add-blklst", api.OpDelBlklst: "--del-blklst",
		api.OpAddWhtlst: "--add-whtlst", api.OpDelWhtlst: "--del-whtlst",
	}[req.Op]
	switch req.Op {
	case api.OpClear:
		return []conf.Service{}, nil
	case api.OpSetTimeouts:
		if req.Timeouts == nil {
			return nil, errors.New("--set: no timeouts given")
		}
		for _, v := range []struct {
			name string
			sec  int
			dst  *time.Duration
		}{{"tcp", req.Timeouts.TCP, &t.TCP}, {"tcpfin", req.Timeouts.TCPFin, &t.TCPFin}, {"udp", req.Timeouts.UDP, &t.UDP}} {
			if v.sec < 0 || v.sec > api.MaxTimeout {
				return nil, fmt.Errorf("--set: %s timeout %d is out of range 0..%d seconds", v.name, v.sec, api.MaxTimeout)
			}
			if v.sec != 0 {
				*v.dst = time.Duration(v.sec) * time.Second
			}
		}
		return svcs, nil
	}
	if req.Service == nil {
		return nil, fmt.Errorf("%s needs a service: -t|-u VIP:port", cmd)
	}
	spec := *req.Service
	if err := spec.Check(); err != nil {
		return nil, fmt.Errorf("%s %w", cmd, err)
	}
	spec.VIP = addrString(spec.VIP)
	at := findService(svcs, spec)
	switch req.Op {
	case api.OpAddService:
		if at >= 0 {
			return nil, fmt.Errorf("-A %s: service already exists", spec)
		}
		s := conf.Service{Protocol: spec.Protocol, VIP: spec.VIP, Port: spec.Port, Scheduler: "rr",
			SchedFlags: []string{}, Netmask: "255.255.255.255", Servers: []conf.RealServer{}}
		if err := setService(&s, spec); err != nil {
			return nil, err
		}
		return append(svcs, s), nil
	}
	if at < 0 {
		return nil, fmt.Errorf("%s %s: service does not exist", cmd, spec)
	}
	switch req.Op {
	case api.OpEditService:
		if err := setService(&svcs[at], spec); err != nil {
			return nil, err
		}
		return svcs, nil
	case api.OpDeleteService:
		return append(svcs[:at], svcs[at+1:]...), nil
	case api.OpAddLaddr, api.OpDelLaddr:
		return editLocalAddress(svcs, at, req, fmt.Sprintf("%s %s -z %s", cmd, spec, req.LocalAddress))
	case api.OpAddBlklst, api.OpDelBlklst, api.OpAddWhtlst, api.OpDelWhtlst:
		list, flag := clientList(req.Op)
		return editClientList(svcs, at, req, list, fmt.Sprintf("%s %s %s %s", cmd, spec, flag, req.ClientPrefix))
	}
	if req.Server == nil {
		return nil, fmt.Errorf("%s %s needs a real server: -r RIP[:port]", cmd, spec)
	}
	rspec := *req.Server
	if err := rspec.Check(); err != nil {
		return nil, fmt.Errorf("%s %s %w", cmd, spec, err)
	}
	s := &svcs[at]
	j := findServer(*s, rspec)
	if rspec.Port == 0 {
		rspec.Port = s.Port
	}
	name := fmt.Sprintf("%s %s -r %s:%d", cmd, spec, addrString(rspec.Address), rspec.Port)
	switch req.Op {
	case api.OpAddServer:
		if j >= 0 {
			return nil, fmt.Errorf("%s: server already exists", name)
		}
		rs := conf.RealServer{Address: addrString(rspec.Address), Port: rspec.Port, Weight: 1, Forward: "nat"}
		if err := setServer(&rs, rspec, name); err != nil {
			return nil, err
		}
		s.Servers = append(s.Servers, rs)
		return svcs, nil
	}
	if j < 0 {
		return nil, fmt.Errorf("%s: server does not exist", name)
	}
	if req.Op == api.OpDeleteServer {
		s.Servers = append(s.Servers[:j], s.Servers[j+1:]...)
		return svcs, nil
	}
	if err := setServer(&s.Servers[j], rspec, name); err != nil {
		return nil, err
	}
	return svcs, nil
}

// setService copies the settings spec carries; a bad -M is refused.
func setService(s *conf.Service, spec api.ServiceSpec) error {
	if spec.Scheduler != nil {
		s.Scheduler = *spec.Scheduler
	}
	if spec.Persistence != nil {
		s.Persistence = time.Duration(*spec.Persistence) * time.Second
	}
	if spec.Netmask != nil {
		if err := setNetmask(s, *spec.Netmask); err != nil {
			return fmt.Errorf("%s -M %s: %w", spec, *spec.Netmask, err)
		}
	}
	if spec.SchedFlags != nil {
		s.SchedFlags = append([]string{}, *spec.SchedFlags...)
	}
	if spec.SloppyTCP != nil {
		s.SloppyTCP = *spec.SloppyTCP
	}
	if spec.SynProxy != nil {
		s.SynProxy = *spec.SynProxy
	}
	if spec.OnePacket != nil {
		s.OnePacket = *spec.OnePacket
	}
	if spec.QUIC != nil {
		s.QUIC = *spec.QUIC
	}
	return nil
}

// setNetmask sets the persistence granularity: an IPv4 service's netmask
// (a prefix length up to 32 is turned into one), an IPv6 service's
// prefix length (persistence_prefix).
func setNetmask(s *conf.Service, m string) error {
	n, err := strconv.Atoi(m)
	isLen := err == nil
	switch v6 := s.VIPAddr().Is6(); {
	case v6 && !isLen:
		return fmt.Errorf("an IPv6 service's persistence granularity is a prefix length, e.g. 64")
	case v6 && (n < 1 || n > 128):
		return fmt.Errorf("prefix length %d is out of range 1..128", n)
	case v6:
		s.PersistencePrefix = n
	case isLen && (n < 1 || n > 32):
		return fmt.Errorf("prefix length %d is out of range 1..32 for an IPv4 service", n)
	case isLen:
		s.Netmask = netip.AddrFrom4([4]byte(binary.BigEndian.AppendUint32(nil, ^uint32(0)<<(32-n)))).String()
	default:
		s.Netmask = m
	}
	return nil
}

// setServer copies the settings spec carries; name prefixes refusals.
func setServer(rs *conf.RealServer, spec api.ServerSpec, name string) error {
	if spec.Forward != nil {
		rs.Forward = *spec.Forward
	}
	for _, v := range []struct {
		flag, what string
		src        *int
		max        int
		dst        *int
	}{
		{"-w", "weight", spec.Weight, 65535, &rs.Weight},
		{"-x", "upper threshold", spec.Upper, api.MaxThreshold, &rs.Upper},
		{"-y", "lower threshold", spec.Lower, api.MaxThreshold, &rs.Lower},
	} {
		switch {
		case v.src == nil:
		case *v.src < 0:
			return fmt.Errorf("%s: %s %d: %s is negative", name, v.flag, *v.src, v.what)
		case *v.src > v.max:
			return fmt.Errorf("%s: %s %d: %s is out of range 0..%d", name, v.flag, *v.src, v.what, v.max)
		default:
			*v.dst = *v.src
		}
	}
	return nil
}

// restore applies ipvsadm -R text to svcs and t, line by line, in memory.
func restore(svcs []conf.Service, t *conf.Timeouts, text string) ([]conf.Service, error) {
	reqs, err := api.ParseRestore(text)
	if err != nil {
		return nil, err
	}
	lines := restoreLines(text)
	svcs = keptClientLists(svcs) // once, not per line: a list, like a restore, may run to thousands
	for i, req := range reqs {
		if svcs, err = editRule(svcs, t, req); err != nil {
			return nil, fmt.Errorf("line %d: %w", lines[i], err)
		}
	}
	return svcs, nil
}

// restoreLines numbers the lines ParseRestore turns into requests.
func restoreLines(text string) []int {
	var n []int
	for i, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		n = append(n, i+1)
	}
	return n
}

// findService returns the index of spec's service in svcs, or -1.
func findService(svcs []conf.Service, spec api.ServiceSpec) int {
	vip, _ := netip.ParseAddr(spec.VIP)
	for i, s := range svcs {
		if s.Protocol == spec.Protocol && s.VIPAddr() == vip && s.Port == spec.Port {
			return i
		}
	}
	return -1
}

// findServer returns the index of spec's server in s, or -1.
func findServer(s conf.Service, spec api.ServerSpec) int {
	addr, _ := netip.ParseAddr(spec.Address)
	port := spec.Port
	if port == 0 {
		port = s.Port
	}
	for i, rs := range s.Servers {
		if rs.Addr() == addr && rs.Port == port {
			return i
		}
	}
	return -1
}

// addrString normalises an address as typed; one that does not parse
// is left as it is (a later check names it).
func addrString(s string) string {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return s
	}
	return a.String()
}

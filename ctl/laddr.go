package ctl

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/hdr"
)

// FullNAT local addresses by lbctl (DPVS's --add-laddr, --del-laddr,
// --get-laddr). An added address goes through the whole validation
// (Apply) like the configuration's. A removed one stops serving new
// connections at once; the connections that use it drain: lbd keeps
// answering ARP for it (Snapshot.KeepLIPs; the workers keep its ports)
// until a check, every lipDrainCheck, finds no connection using it.

// lipDrainCheck is how often draining local addresses are looked for in
// the connection tables.
const lipDrainCheck = 5 * time.Second

// lipDrain is a removed local address and the service it was removed from.
type lipDrain struct {
	svc   lcore.ServiceKey
	proto string
	vip   string
}

// editLocalAddress adds or removes req.LocalAddress in svcs[at]; name
// prefixes refusals.
func editLocalAddress(svcs []conf.Service, at int, req api.Request, name string) ([]conf.Service, error) {
	a, err := netip.ParseAddr(req.LocalAddress)
	if err != nil || a.Zone() != "" {
		return nil, fmt.Errorf("%s: -z %q is not an IPv4 or IPv6 address", name, req.LocalAddress)
	}
	a = a.Unmap()
	s := &svcs[at]
	i := slices.IndexFunc(s.LocalAddresses, func(l string) bool { return addrString(l) == a.String() })
	if req.Op == api.OpAddLaddr {
		if i >= 0 {
			return nil, fmt.Errorf("%s: already a local address of the service", name)
		}
		s.LocalAddresses = append(slices.Clone(s.LocalAddresses), a.String())
		return svcs, nil
	}
	if i < 0 {
		return nil, fmt.Errorf("%s: not a local address of the service", name)
	}
	s.LocalAddresses = slices.Delete(slices.Clone(s.LocalAddresses), i, i+1)
	return svcs, nil
}

// nextLIPDrain is the draining set once svcs replace the running
// services: the local addresses they drop join it, those they list leave it.
func (c *Controller) nextLIPDrain(svcs []conf.Service) map[netip.Addr]lipDrain {
	listed := map[netip.Addr]bool{}
	for _, s := range svcs {
		for _, l := range s.LocalAddresses {
			if a, err := netip.ParseAddr(l); err == nil {
				listed[a.Unmap()] = true
			}
		}
	}
	next := map[netip.Addr]lipDrain{}
	for a, d := range c.lipDrain {
		if !listed[a] {
			next[a] = d
		}
	}
	for i := range c.services {
		s := &c.services[i].conf
		for _, l := range s.LocalAddresses {
			a, err := netip.ParseAddr(l)
			if err == nil && !listed[a.Unmap()] {
				next[a.Unmap()] = lipDrain{svc: c.services[i].key, proto: strings.ToUpper(s.Protocol), vip: s.VIP}
			}
		}
	}
	return next
}

// lipsOf4 are the IPv4 keys of a set of local addresses (draining, taken
// over), sorted.
func lipsOf4[V any](m map[netip.Addr]V) []uint32 {
	out := make([]uint32, 0, len(m))
	for a := range m {
		if a.Is4() {
			out = append(out, ipv4(a))
		}
	}
	slices.Sort(out)
	return out
}

// lipsOf6 are the IPv6 keys of a set of local addresses, FNAT66's.
func lipsOf6[V any](m map[netip.Addr]V) []hdr.Addr6 {
	var out []hdr.Addr6
	for a := range m {
		if a.Is6() {
			out = append(out, hdr.Addr6From(a))
		}
	}
	return out
}

// drainLoop ends the drain of local addresses no connection uses any
// more, until ctx ends.
func (c *Controller) drainLoop(ctx context.Context) {
	t := time.NewTicker(lipDrainCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.endDrains()
	}
}

// endDrains looks for each draining local address in the connection
// tables (a dump of at most one entry, filtered on the lcores) and ends
// the drain of those no connection uses: lbd stops answering ARP for them.
func (c *Controller) endDrains() {
	c.mu.Lock()
	lips := slices.Collect(maps.Keys(c.lipDrain))
	c.mu.Unlock()
	var done []netip.Addr
	for _, a := range lips {
		f := lcore.ConnFilter{LIP: ipv4(a)}
		if a.Is6() {
			f = lcore.ConnFilter{LIP6: hdr.Addr6From(a)}
		}
		conns, truncated, err := c.dp.DumpConns(f, 1)
		if err == nil && len(conns) == 0 && !truncated {
			done = append(done, a)
		}
	}
	if len(done) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range done {
		delete(c.lipDrain, a)
		c.log.Info("local address drained: no connection uses it any more", zap.Stringer("address", a))
	}
	c.republish()
}

// localAddresses answers --get-laddr: the local addresses of the service
// spec (every service's when nil), draining ones included.
func (c *Controller) localAddresses(spec *api.ServiceSpec) (api.Response, error) {
	svcs, _ := c.Services()
	var only *lcore.ServiceKey
	if spec != nil {
		if err := spec.Check(); err != nil {
			return api.Response{}, fmt.Errorf("--get-laddr %w", err)
		}
		i := findService(svcs, *spec)
		if i < 0 {
			return api.Response{}, fmt.Errorf("--get-laddr %s: service does not exist", spec)
		}
		k := serviceKey(svcs[i])
		only = &k
	}
	resp := api.Response{LocalAddresses: []api.LocalAddress{}}
	for _, s := range svcs {
		if only != nil && serviceKey(s) != *only {
			continue
		}
		for _, l := range s.LocalAddresses {
			resp.LocalAddresses = append(resp.LocalAddresses, api.LocalAddress{Protocol: strings.ToUpper(s.Protocol),
				VIP: s.VIP, Port: uint16(s.Port), Address: addrString(l)})
		}
	}
	c.mu.Lock()
	for a, d := range c.lipDrain {
		if only == nil || d.svc == *only {
			resp.LocalAddresses = append(resp.LocalAddresses, api.LocalAddress{Protocol: d.proto, VIP: d.vip,
				Port: d.svc.Port, Address: a.String(), Draining: true})
		}
	}
	c.mu.Unlock()
	return resp, nil
}

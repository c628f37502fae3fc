package ctl

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/api"
)

// Client lists by lbctl (DPVS's --add-blklst, --del-blklst, --get-blklst
// and the same for whtlst). An entry added goes through the whole
// validation (Apply) like the configuration's. The lcores check the lists
// when a client opens a connection, so a change applies to new
// connections only: nothing drains.

// clientList is the list an op is about and the option of its entries.
func clientList(op string) (list, flag string) {
	switch op {
	case api.OpAddWhtlst, api.OpDelWhtlst, api.OpGetWhtlst:
		return api.Allowlist, "-2"
	}
	return api.Blocklist, "-k"
}

// clientEntry is an entry as lbd keeps and shows it: a host prefix as its
// address, another prefix as address/length.
func clientEntry(p netip.Prefix) string {
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.String()
}

// keptClientLists gives svcs client lists of their own (the running
// services' stay as they are), their entries written as lbd keeps them
// (lbd.yaml may have 192.0.2.7/32 for 192.0.2.7), so that an edit finds
// an entry by its text and adds one without a copy of the list.
func keptClientLists(svcs []conf.Service) []conf.Service {
	for i := range svcs {
		s := &svcs[i]
		s.Blocklist, s.Allowlist = keptEntries(s.Blocklist), keptEntries(s.Allowlist)
	}
	return svcs
}

// keptEntries is keptClientLists for one list (and what the listings
// show); an entry that does not parse is left for the validation to name.
func keptEntries(list []string) []string {
	if len(list) == 0 {
		return nil
	}
	out := slices.Clone(list)
	for i, e := range out {
		if p, err := conf.ParseClientPrefix(e); err == nil {
			out[i] = clientEntry(p)
		}
	}
	return out
}

// editClientList adds req.ClientPrefix, however written, to svcs[at]'s
// list or removes it; the lists are as keptClientLists leaves them. name
// prefixes refusals.
func editClientList(svcs []conf.Service, at int, req api.Request, list, name string) ([]conf.Service, error) {
	p, err := conf.ParseClientPrefix(req.ClientPrefix)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s := &svcs[at]
	if p.Addr().Is4() != s.VIPAddr().Is4() {
		return nil, fmt.Errorf("%s: not in the VIP's family (%s)", name, s.VIPAddr())
	}
	entries := &s.Blocklist
	if list == api.Allowlist {
		entries = &s.Allowlist
	}
	i := slices.Index(*entries, clientEntry(p))
	if req.Op == api.OpAddBlklst || req.Op == api.OpAddWhtlst {
		if i >= 0 {
			return nil, fmt.Errorf("%s: already in the service's %s", name, list)
		}
		*entries = append(*entries, clientEntry(p))
		return svcs, nil
	}
	if i < 0 {
		return nil, fmt.Errorf("%s: not in the service's %s", name, list)
	}
	*entries = slices.Delete(*entries, i, i+1)
	return svcs, nil
}

// clientLists answers --get-blklst and --get-whtlst: the entries of the
// service req.Service names (every service's when nil).
func (c *Controller) clientLists(req api.Request) (api.Response, error) {
	list, _ := clientList(req.Op)
	cmd := map[string]string{api.Blocklist: "--get-blklst", api.Allowlist: "--get-whtlst"}[list]
	svcs, _ := c.Services()
	only := -1
	if spec := req.Service; spec != nil {
		if err := spec.Check(); err != nil {
			return api.Response{}, fmt.Errorf("%s %w", cmd, err)
		}
		if only = findService(svcs, *spec); only < 0 {
			return api.Response{}, fmt.Errorf("%s %s: service does not exist", cmd, spec)
		}
	}
	resp := api.Response{ClientLists: []api.ClientListEntry{}}
	for i, s := range svcs {
		if only >= 0 && i != only {
			continue
		}
		entries := s.Blocklist
		if list == api.Allowlist {
			entries = s.Allowlist
		}
		for _, e := range keptEntries(entries) {
			resp.ClientLists = append(resp.ClientLists, api.ClientListEntry{Protocol: strings.ToUpper(s.Protocol),
				VIP: s.VIPAddr().String(), Port: uint16(s.Port), List: list, Prefix: e})
		}
	}
	return resp, nil
}

package web

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/dplb/dplb/ctl/api"
)

// fakeLBD answers like lbd's handler for one service with two servers:
// enough to see what the console sends and that refusals change nothing.
type fakeLBD struct {
	mu       sync.Mutex
	services []api.Service
	lcores   []api.Lcore
	reqs     []api.Request // every request but list and edits
	restart  []string      // what a reload answers needs a restart
	log      []api.Edit    // the edits, with the author their context names, as lbd keeps them
}

func newFake() *fakeLBD {
	return &fakeLBD{
		services: []api.Service{{Protocol: "TCP", VIP: "192.0.2.10", Port: 80, Scheduler: "rr", Servers: []api.RealServer{
			{Address: "198.51.100.11", Port: 8080, Forward: "Masq", Weight: 1, Health: "up"},
			{Address: "198.51.100.12", Port: 8080, Forward: "Masq", Weight: 1, Health: "up"},
		}}},
		lcores: []api.Lcore{{ID: 1}},
	}
}

func (f *fakeLBD) edits() []api.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

// traffic adds n connections of 10 packets of 100 bytes each way to every server.
func (f *fakeLBD) traffic(n uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &f.services[0]
	for i := range s.Servers {
		rs := &s.Servers[i]
		rs.Stats.Conns += n
		rs.Stats.InPkts += 10 * n
		rs.Stats.OutPkts += 10 * n
		rs.Stats.InBytes += 1000 * n
		rs.Stats.OutBytes += 1000 * n
		s.Stats.Conns += n
		s.Stats.InPkts += 10 * n
		s.Stats.OutPkts += 10 * n
		s.Stats.InBytes += 1000 * n
		s.Stats.OutBytes += 1000 * n
	}
	f.lcores[0].RxPackets += 20 * n
}

func (f *fakeLBD) server(addr string) *api.RealServer {
	for i := range f.services[0].Servers {
		if f.services[0].Servers[i].Address == addr {
			return &f.services[0].Servers[i]
		}
	}
	return nil
}

func (f *fakeLBD) Handle(ctx context.Context, req api.Request) api.Response {
	f.mu.Lock()
	defer f.mu.Unlock()
	if req.Op == api.OpEdits {
		return api.Response{Edits: slices.Clone(f.log)}
	}
	resp := f.handle(req)
	if req.Op != api.OpList && req.Op != api.OpConnections {
		a, _ := api.AuthorOf(ctx)
		result := "ok"
		if resp.Error != "" {
			result = "refused: " + resp.Error
		}
		f.log = append(f.log, api.Edit{Seq: uint64(len(f.log) + 1), Time: time.Now(), User: a.User, Via: a.Via, Op: req.Op, Result: result})
	}
	return resp
}

// lbctl makes an edit as lbd's control socket would hand it over.
func (f *fakeLBD) lbctl(user string, req api.Request) api.Response {
	return f.Handle(api.WithAuthor(context.Background(), api.Author{User: user, Via: api.ViaSocket}), req)
}

func (f *fakeLBD) handle(req api.Request) api.Response {
	if req.Op == api.OpList {
		svcs := slices.Clone(f.services)
		for i := range svcs {
			svcs[i].Servers = slices.Clone(svcs[i].Servers)
		}
		return api.Response{Info: &api.Info{ConnTableSize: 1000, Connections: 10}, Services: svcs, Lcores: slices.Clone(f.lcores)}
	}
	f.reqs = append(f.reqs, req)
	switch req.Op {
	case api.OpEditServer, api.OpDeleteServer:
		if req.Service == nil || req.Server == nil {
			return api.Response{Error: "no service or server"}
		}
		rs := f.server(req.Server.Address)
		if rs == nil {
			return api.Response{Error: fmt.Sprintf("-e -t %s:%d -r %s:%d: server does not exist", req.Service.VIP, req.Service.Port, req.Server.Address, req.Server.Port)}
		}
		if req.Op == api.OpDeleteServer {
			f.services[0].Servers = slices.DeleteFunc(f.services[0].Servers, func(x api.RealServer) bool { return x.Address == req.Server.Address })
			return api.Response{}
		}
		if w := req.Server.Weight; w != nil {
			if *w < 0 || *w > 65535 {
				return api.Response{Error: fmt.Sprintf("-w %d: weight is out of range 0..65535", *w)}
			}
			rs.Weight = *w
		}
		return api.Response{}
	case api.OpConnections:
		if req.Client != "" {
			if a, err := netip.ParseAddr(req.Client); err != nil || !a.Is4() {
				return api.Response{Error: fmt.Sprintf("--client %s: not an IPv4 address", req.Client)}
			}
		}
		return api.Response{Conns: []api.Conn{{Protocol: "TCP", State: "ESTABLISHED", ExpiresSecs: 899, Client: "192.0.2.2:40000", Virtual: "192.0.2.10:80", Destination: "198.51.100.11:8080"}}}
	case api.OpReload:
		return api.Response{Restart: f.restart}
	}
	return api.Response{}
}

// Package bgp announces lbd's VIPs to routers over BGP, with an embedded
// GoBGP speaker (github.com/osrg/gobgp): each VIP a /32 (an IPv6 one a
// /128, in MP-BGP) whose next hop is lbd's dataplane address, so that routers in front of several active
// directors spread the VIPs' flows over them with ECMP. The speaker holds
// the sessions and the announcements; which VIPs to announce (health,
// drain) is the caller's decision, handed over whole with Announce.
//
// The sessions run over the host's kernel TCP stack (a management
// interface): lbd's dataplane ports have no kernel stack.
package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/server"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/dplb/dplb/conf"
)

// connectRetry is how often a session that is down is dialled again
// (GoBGP's default, 120 s, would leave a VIP unannounced for minutes
// after a router restarts).
const connectRetry = 5 * time.Second

// Speaker is lbd's BGP speaker.
type Speaker struct {
	srv      *server.BgpServer
	cfg      conf.BGP
	nextHop  netip.Addr
	nextHop6 netip.Addr // IPv6 VIPs' (MP-BGP); invalid: none announced
	log      *zap.Logger

	unwatch func() // ends the session-state watch

	mu        sync.Mutex
	announced map[netip.Addr][]uint32 // VIP -> the communities it was announced with
}

// Start starts the speaker with cfg (valid, enabled) and dials every
// peer; nextHop is announced with every IPv4 VIP, nextHop6 with every
// IPv6 one (invalid: none is announced). Nothing is announced until
// Announce.
func Start(ctx context.Context, cfg conf.BGP, nextHop, nextHop6 netip.Addr, log *zap.Logger) (*Speaker, error) {
	srv := server.NewBgpServer(server.LoggerOption(zapLogger{log.Named("gobgp")}))
	go srv.Serve()
	s := &Speaker{srv: srv, cfg: cfg, nextHop: nextHop, nextHop6: nextHop6, log: log, announced: map[netip.Addr][]uint32{}}
	global := &api.Global{Asn: uint32(cfg.ASN), RouterId: cfg.RouterID, ListenPort: int32(cfg.ListenPort)}
	if err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: global}); err != nil {
		srv.Stop()
		return nil, fmt.Errorf("bgp: %w", err)
	}
	// Session changes are logged here (GoBGP's own lines are at debug).
	wctx, unwatch := context.WithCancel(context.Background())
	s.unwatch = unwatch
	err := srv.WatchEvent(wctx, &api.WatchEventRequest{Peer: &api.WatchEventRequest_Peer{}}, func(r *api.WatchEventResponse) {
		ev := r.GetPeer()
		if ev.GetType() != api.WatchEventResponse_PeerEvent_STATE {
			return
		}
		st := ev.GetPeer().GetState()
		log.Info("bgp: session "+stateName(st.GetSessionState()), zap.String("peer", st.GetNeighborAddress()),
			zap.Uint32("asn", st.GetPeerAsn()))
	})
	if err != nil {
		s.Stop()
		return nil, fmt.Errorf("bgp: %w", err)
	}
	for i, p := range cfg.Peers {
		if err := srv.AddPeer(ctx, &api.AddPeerRequest{Peer: peerOf(p)}); err != nil {
			s.Stop()
			return nil, fmt.Errorf("bgp.peers[%d]: %w", i, err)
		}
	}
	return s, nil
}

// peerOf is GoBGP's form of a configured peer.
func peerOf(p conf.BGPPeer) *api.Peer {
	hold, keep := p.Timers()
	return &api.Peer{
		Conf: &api.PeerConf{NeighborAddress: p.Address, PeerAsn: uint32(p.ASN), AuthPassword: p.Password},
		Timers: &api.Timers{Config: &api.TimersConfig{HoldTime: uint64(hold / time.Second),
			KeepaliveInterval: uint64(keep / time.Second), ConnectRetry: uint64(connectRetry / time.Second)}},
		Transport: &api.Transport{LocalAddress: p.LocalAddress, RemotePort: uint32(p.PeerPort())},
		// IPv6 VIPs travel in MP-BGP over the same (IPv4) session; a
		// router without the IPv6 family takes the IPv4 ones alone.
		AfiSafis: []*api.AfiSafi{{Config: &api.AfiSafiConfig{Family: ipv4Unicast, Enabled: true}},
			{Config: &api.AfiSafiConfig{Family: ipv6Unicast, Enabled: true}}},
	}
}

var (
	ipv4Unicast = &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
	ipv6Unicast = &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}
)

// familyOf is vip's address family.
func familyOf(vip netip.Addr) *api.Family {
	if vip.Is6() {
		return ipv6Unicast
	}
	return ipv4Unicast
}

// Announce makes the set of announced VIPs want: VIPs not in it are
// withdrawn, new ones announced with their communities. It returns the
// first error; the VIPs it could handle are handled.
func (s *Speaker) Announce(ctx context.Context, want []netip.Addr) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first error
	note := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	for vip := range s.announced {
		if !slices.Contains(want, vip) {
			note(s.withdraw(ctx, vip))
		}
	}
	for _, vip := range want {
		if vip.Is6() && !s.nextHop6.IsValid() {
			continue // no IPv6 next hop: the announcer withholds it
		}
		comms := s.cfg.CommunitiesOf(vip)
		if have, ok := s.announced[vip]; ok && slices.Equal(have, comms) {
			continue
		}
		note(s.announce(ctx, vip, comms))
	}
	return first
}

// announce adds (or replaces) vip's path.
func (s *Speaker) announce(ctx context.Context, vip netip.Addr, comms []uint32) error {
	p, err := s.path(vip, comms)
	if err != nil {
		return err
	}
	if _, err := s.srv.AddPath(ctx, &api.AddPathRequest{Path: p}); err != nil {
		return fmt.Errorf("bgp: announce %s: %w", vip, err)
	}
	s.announced[vip] = comms
	s.log.Info("bgp: announced", zap.Stringer("vip", vip), zap.Stringer("next_hop", s.nextHopOf(vip)))
	return nil
}

// withdraw deletes vip's path.
func (s *Speaker) withdraw(ctx context.Context, vip netip.Addr) error {
	p, err := s.path(vip, s.announced[vip])
	if err != nil {
		return err
	}
	if err := s.srv.DeletePath(ctx, &api.DeletePathRequest{Family: familyOf(vip), Path: p}); err != nil {
		return fmt.Errorf("bgp: withdraw %s: %w", vip, err)
	}
	delete(s.announced, vip)
	s.log.Info("bgp: withdrawn", zap.Stringer("vip", vip))
	return nil
}

// path is vip's /32 (an IPv6 VIP's /128) with lbd's next hop and comms.
func (s *Speaker) path(vip netip.Addr, comms []uint32) (*api.Path, error) {
	family := familyOf(vip)
	nlri, err := anypb.New(&api.IPAddressPrefix{Prefix: vip.String(), PrefixLen: uint32(vip.BitLen())})
	if err != nil {
		return nil, err
	}
	origin, err := anypb.New(&api.OriginAttribute{Origin: 0}) // IGP
	if err != nil {
		return nil, err
	}
	// An IPv6 route's next hop travels in MP_REACH_NLRI (RFC 4760).
	var nh *anypb.Any
	if vip.Is6() {
		nh, err = anypb.New(&api.MpReachNLRIAttribute{Family: family, NextHops: []string{s.nextHop6.String()}, Nlris: []*anypb.Any{nlri}})
	} else {
		nh, err = anypb.New(&api.NextHopAttribute{NextHop: s.nextHop.String()})
	}
	if err != nil {
		return nil, err
	}
	attrs := []*anypb.Any{origin, nh}
	if len(comms) > 0 {
		c, err := anypb.New(&api.CommunitiesAttribute{Communities: comms})
		if err != nil {
			return nil, err
		}
		attrs = append(attrs, c)
	}
	return &api.Path{Family: family, Nlri: nlri, Pattrs: attrs}, nil
}

// Announced lists the VIPs announced now, in address order.
func (s *Speaker) Announced() []netip.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]netip.Addr, 0, len(s.announced))
	for vip := range s.announced {
		out = append(out, vip)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// NextHop is the next hop announced with every IPv4 VIP.
func (s *Speaker) NextHop() netip.Addr { return s.nextHop }

// NextHop6 is the next hop announced with every IPv6 VIP; invalid when
// there is none (IPv6 VIPs are not announced).
func (s *Speaker) NextHop6() netip.Addr { return s.nextHop6 }

// nextHopOf is the next hop vip is announced with.
func (s *Speaker) nextHopOf(vip netip.Addr) netip.Addr {
	if vip.Is6() {
		return s.nextHop6
	}
	return s.nextHop
}

// Peer is one session's state.
type Peer struct {
	Address     string
	ASN         uint32
	State       string    // BGP's FSM state, lower case: idle, connect, active, opensent, openconfirm, established
	Since       time.Time // when it became established; zero while it is not
	Advertised  uint64    // prefixes sent to it and not withdrawn
	HoldTime    uint64    // negotiated, seconds (0 before it is)
	Established bool
}

// Peers lists the sessions in configuration order.
func (s *Speaker) Peers(ctx context.Context) ([]Peer, error) {
	got := map[string]Peer{}
	err := s.srv.ListPeer(ctx, &api.ListPeerRequest{EnableAdvertised: true}, func(p *api.Peer) {
		st := p.GetState()
		out := Peer{Address: p.GetConf().GetNeighborAddress(), ASN: p.GetConf().GetPeerAsn()}
		out.Established = st.GetSessionState() == api.PeerState_ESTABLISHED
		out.State = stateName(st.GetSessionState())
		if out.Established {
			if up := p.GetTimers().GetState().GetUptime(); up != nil {
				out.Since = up.AsTime()
			}
			out.HoldTime = p.GetTimers().GetState().GetNegotiatedHoldTime()
		}
		for _, af := range p.GetAfiSafis() {
			out.Advertised += af.GetState().GetAdvertised()
		}
		got[out.Address] = out
	})
	if err != nil {
		return nil, err
	}
	out := make([]Peer, 0, len(s.cfg.Peers))
	for _, p := range s.cfg.Peers {
		if v, ok := got[p.Address]; ok {
			out = append(out, v)
		}
	}
	return out, nil
}

func stateName(s api.PeerState_SessionState) string {
	switch s {
	case api.PeerState_IDLE:
		return "idle"
	case api.PeerState_CONNECT:
		return "connect"
	case api.PeerState_ACTIVE:
		return "active"
	case api.PeerState_OPENSENT:
		return "opensent"
	case api.PeerState_OPENCONFIRM:
		return "openconfirm"
	case api.PeerState_ESTABLISHED:
		return "established"
	}
	return "unknown"
}

// Stop closes the sessions (a BGP peer drops the routes of a closed
// session at once) and stops the speaker.
func (s *Speaker) Stop() {
	s.srv.Stop()
	if s.unwatch != nil {
		s.unwatch()
	}
}

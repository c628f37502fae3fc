package api

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Scale-out over BGP: lbd announces its VIPs to routers; lbctl drains
// and undrains it and lists its sessions.

const (
	// OpDrain withdraws every VIP from the BGP peers and keeps them
	// withdrawn (lbctl drain): the routers send new flows to the other
	// directors, the connections this one holds go on.
	OpDrain = "drain"
	// OpUndrain announces the healthy VIPs again (lbctl undrain).
	OpUndrain = "undrain"
	// OpBGP lists the BGP sessions and announcements (lbctl -L --bgp) in
	// Response.BGP.
	OpBGP = "bgp"
)

// BGP is lbd's BGP state (OpBGP, OpDrain, OpUndrain).
type BGP struct {
	ASN       uint32        `json:"asn"`
	RouterID  string        `json:"router_id"`
	NextHop   string        `json:"next_hop"`            // announced with every IPv4 VIP
	NextHop6  string        `json:"next_hop6,omitempty"` // announced with every IPv6 VIP
	Draining  bool          `json:"draining"`            // lbctl drain: nothing is announced
	Stopping  bool          `json:"stopping"`            // SIGTERM: withdrawn, lbd stops after bgp.shutdown_grace
	Peers     []BGPPeer     `json:"peers"`               // in configuration order
	Announced []string      `json:"announced"`           // VIPs announced now, as /32 prefixes
	Withheld  []BGPWithheld `json:"withheld,omitempty"`
}

// BGPPeer is one BGP session.
type BGPPeer struct {
	Address    string    `json:"address"`
	ASN        uint32    `json:"asn"`
	State      string    `json:"state"`               // idle, connect, active, opensent, openconfirm, established
	Since      time.Time `json:"since,omitzero"`      // established since
	HoldTime   uint64    `json:"hold_time,omitempty"` // negotiated, seconds
	Advertised uint64    `json:"advertised"`          // prefixes sent and not withdrawn
}

// BGPWithheld is a VIP not announced, and why.
type BGPWithheld struct {
	VIP    string `json:"vip"`
	Reason string `json:"reason"` // "draining", "stopping", "port link down", "no live server", "no IPv6 next hop"
}

func init() {
	longOpts["--bgp"] = optSpec{"--bgp", noValue}
	allowedWith["--bgp"] = []string{OpBGP}
}

// WriteBGP prints lbctl -L --bgp: the state, one line per session, the
// announced and withheld VIPs.
func WriteBGP(w io.Writer, resp Response, now time.Time) error {
	b := resp.BGP
	if b == nil {
		_, err := fmt.Fprintln(w, "BGP is off (bgp.asn is 0)")
		return err
	}
	state := "announcing"
	switch {
	case b.Stopping:
		state = "stopping (withdrawn)"
	case b.Draining:
		state = "drained (withdrawn)"
	}
	var sb strings.Builder
	nh := b.NextHop
	if b.NextHop6 != "" {
		nh += " " + b.NextHop6
	}
	fmt.Fprintf(&sb, "BGP AS %d router-id %s next-hop %s: %s\n", b.ASN, b.RouterID, nh, state)
	fmt.Fprintf(&sb, "%-18s %-10s %-12s %-10s %s\n", "Peer", "AS", "State", "Up", "Advertised")
	for _, p := range b.Peers {
		up := "-"
		if !p.Since.IsZero() {
			up = now.Sub(p.Since).Truncate(time.Second).String()
		}
		fmt.Fprintf(&sb, "%-18s %-10d %-12s %-10s %d\n", p.Address, p.ASN, p.State, up, p.Advertised)
	}
	fmt.Fprintf(&sb, "Announced: %s\n", orNone(b.Announced))
	for _, x := range b.Withheld {
		prefix := x.VIP + "/32"
		if strings.Contains(x.VIP, ":") {
			prefix = x.VIP + "/128"
		}
		fmt.Fprintf(&sb, "Withheld: %s (%s)\n", prefix, x.Reason)
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, " ")
}
